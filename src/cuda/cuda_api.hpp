// What the rest of the library knows of CUDA: plain C++, no CUDA headers, the same in every build.
// A CUDA build implements it in src/cuda/*.cu; a build without CUDA links src/cuda/stub/no_cuda.cpp,
// which answers "not built with CUDA". Every function is safe without a driver or a device.
#pragma once
#include <memory>

#include "common/perf_pattern.hpp"
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
// Makes `device` the calling thread's current device with its primary context current, as an NCCL
// program does before it creates a communicator (device windows need a context at init).
Status setDevice(int device);
// Stream ordering on CUDA streams (exec/stream_order.hpp) for calls on `device`: cuStreamWriteValue32
// marks a ticket's start in mapped host memory that the progress thread reads; cuStreamWaitValue32
// holds the stream until the progress thread writes the release word. Driver functions come from
// cudaGetDriverEntryPointByVersion (libcuda is never linked). Any stream, NULL (the legacy default
// stream) and cudaStreamPerThread included.
Status createStreamOrdering(int device, std::unique_ptr<StreamOrdering>* out);

// Buffers and streams of a program driving device collectives (bench/trib-perf), so that it needs
// no CUDA headers. Each fails with deviceStatus()'s error where there is no device.
// How many devices the driver reports.
Status deviceCount(int* count);
// `bytes` of device memory on `device` (cudaMalloc), zero-filled.
Status deviceAlloc(int device, size_t bytes, void** out);
// cudaFree; nullptr is a no-op. It may wait for the whole device: call it when no stream of the
// device can be waiting for another rank.
void deviceFree(void* p);
// A copy between host and device memory, either way (cudaMemcpyDefault), on `stream` and waited
// for: on the stream that later calls use, so they are ordered after it (a pageable cudaMemcpy on
// the legacy stream may return before its DMA is done, unordered with non-blocking streams).
Status copy(void* dst, const void* src, size_t bytes, void* stream);
// A stream on `device` that does not synchronise with the legacy default stream (NCCL's and
// nccl-tests' choice: cudaStreamNonBlocking).
Status streamCreate(int device, void** stream);
void streamDestroy(void* stream);
Status streamSynchronize(void* stream);
// trib-perf's device-side check: a kernel on `stream` (of `device`) counts the elements of `out`
// (device memory, `elems` of `dtype`) that differ from common/perf_pattern.hpp's expected values;
// waits for it and sets *mismatches.
Status countMismatches(int device, void* stream, const void* out, uint64_t elems, DataType dtype,
                       const perf::Check& check, int64_t* mismatches);

}  // namespace trib::cuda
