// What the rest of the library knows of CUDA: plain C++, no CUDA headers, the same in every build.
// A CUDA build implements it in src/cuda/*.cu; a build without CUDA links src/cuda/stub/no_cuda.cpp,
// which answers "not built with CUDA". Every function is safe without a driver or a device.
#pragma once
#include <memory>

#include "common/status.hpp"
#include "exec/engine.hpp"
#include "exec/stream_order.hpp"

namespace trib::cuda {

// Whether this build has CUDA compiled in.
bool built();
// Ok when a CUDA driver and at least one device are present (checked once per process); else
// tribUnhandledCudaError "no CUDA driver/device: ..." naming what the runtime said.
Status deviceStatus();
// True for device (or managed) memory of any device; false for host memory, and always false
// without a driver. Never leaves a CUDA error behind.
bool isDevicePointer(const void* p);
// A CUDA engine (MemoryKind::Device) on `device`, with its own stream: copies by the copy engine,
// reductions and the avg division by kernels; ops complete from events polled by progress().
// Fails with deviceStatus()'s error where there is no device.
Status createEngine(int device, std::unique_ptr<Engine>* out);
// Waits for everything the engine posted (tests; never on a caller's stream).
Status synchronize(Engine& engine);
// The device that device (or managed) memory at `p` belongs to; -1 for host memory (and always
// without a driver). Never leaves a CUDA error behind.
int deviceOf(const void* p);
// The calling thread's current device.
Status currentDevice(int* device);
// Stream ordering on CUDA streams (exec/stream_order.hpp) for calls on `device`: cuStreamWriteValue32
// marks a ticket's start in mapped host memory that the progress thread reads; cuStreamWaitValue32
// holds the stream until the progress thread writes the release word. Driver functions come from
// cudaGetDriverEntryPointByVersion (libcuda is never linked). Any stream, NULL (the legacy default
// stream) and cudaStreamPerThread included.
Status createStreamOrdering(int device, std::unique_ptr<StreamOrdering>* out);

}  // namespace trib::cuda
