// src/cuda/cuda_api.hpp in a CUDA build: is there a driver and a device, and is a pointer device
// memory. The runtime is linked statically and loads libcuda itself (dlopen), so without a driver
// these calls fail softly: the first answer is kept, and no error is left behind.
#include <cuda_runtime.h>

#include "cuda/cuda_api.hpp"
#include "cuda/cuda_util.hpp"

namespace trib::cuda {
namespace {

struct Probe {
  cudaError_t error;
  int devices;
};

// Once per process: cudaGetDeviceCount fails without a driver (cudaErrorInsufficientDriver,
// cudaErrorNoDevice); later calls reuse the answer instead of asking the runtime again.
const Probe& probe() {
  static const Probe p = [] {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();  // not sticky, but leave nothing for a later check to find
      n = 0;
    }
    return Probe{e, n};
  }();
  return p;
}

}  // namespace

bool built() { return true; }

Status deviceStatus() {
  const Probe& p = probe();
  if (p.error != cudaSuccess)
    return errorf(tribUnhandledCudaError, "no CUDA driver/device: cudaGetDeviceCount failed: %s (%s)",
                  cudaGetErrorName(p.error), cudaGetErrorString(p.error));
  if (p.devices == 0)
    return errorf(tribUnhandledCudaError, "no CUDA driver/device: the driver reports 0 devices");
  return Status::Ok();
}

bool isDevicePointer(const void* ptr) {
  if (!ptr || probe().devices == 0) return false;
  cudaPointerAttributes attr{};
  const cudaError_t e = cudaPointerGetAttributes(&attr, ptr);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // clear it: the caller's own CUDA error checks must not see ours
    return false;
  }
  // Managed memory counts as device memory, as in NCCL: it lives on the GPU while kernels use it.
  return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
}

int deviceOf(const void* ptr) {
  if (!ptr || probe().devices == 0) return -1;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged ? attr.device : -1;
}

Status currentDevice(int* device) {
  TRIB_RETURN_IF_ERROR(deviceStatus());
  TRIB_CUDA_RETURN_IF_ERROR(cudaGetDevice(device));
  return Status::Ok();
}

Status setDevice(int device) {
  TRIB_RETURN_IF_ERROR(deviceStatus());
  TRIB_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  // Since CUDA 12 cudaSetDevice makes the primary context current; cudaFree(nullptr) makes sure on
  // older runtimes too.
  TRIB_CUDA_RETURN_IF_ERROR(cudaFree(nullptr));
  return Status::Ok();
}

Status cudaFailure(cudaError_t e, const char* what) {
  (void)cudaGetLastError();
  return errorf(tribUnhandledCudaError, "%s failed: %s (%s)", what, cudaGetErrorName(e),
                cudaGetErrorString(e));
}

}  // namespace trib::cuda
