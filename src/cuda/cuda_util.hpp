// Helpers of the CUDA sources (nvcc only).
#pragma once
#include <cuda_runtime.h>

#include "common/status.hpp"

namespace trib::cuda {

// tribUnhandledCudaError naming the call and the runtime's error; clears the last error.
Status cudaFailure(cudaError_t e, const char* what);

#define TRIB_CUDA_RETURN_IF_ERROR(call)                                                   \
  do {                                                                                    \
    const cudaError_t trib_cuda_e = (call);                                               \
    if (trib_cuda_e != cudaSuccess) return ::trib::cuda::cudaFailure(trib_cuda_e, #call); \
  } while (0)

// Loads trib-perf's check kernels (cuda_check.cu) on the current device, so that no first launch
// loads one while a stream waits on a collective (lazy loading: see loadEngineKernels).
Status loadCheckKernels();

// Makes `device` current for a scope and restores the caller's device after it. `bind`: set it even
// when it is current already, so that its primary context is current on this thread (driver-API
// calls need one; a thread that never called the runtime has none).
class DeviceScope {
 public:
  explicit DeviceScope(int device, bool bind = false) {
    if (cudaGetDevice(&saved_) != cudaSuccess) saved_ = -1;
    if (bind || saved_ != device) cudaSetDevice(device);
  }
  ~DeviceScope() {
    int now = -1;
    if (saved_ >= 0 && cudaGetDevice(&now) == cudaSuccess && now != saved_) cudaSetDevice(saved_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int saved_ = -1;
};

}  // namespace trib::cuda
