// src/cuda/cuda_api.hpp in a CUDA build: device buffers and streams for programs that drive device
// collectives without CUDA headers of their own (bench/trib-perf).
#include <cuda_runtime.h>

#include "cuda/cuda_api.hpp"
#include "cuda/cuda_util.hpp"

namespace trib::cuda {

Status deviceCount(int* count) {
  TRIB_RETURN_IF_ERROR(deviceStatus());
  TRIB_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(count));
  return Status::Ok();
}

Status deviceAlloc(int device, size_t bytes, void** out) {
  TRIB_RETURN_IF_ERROR(deviceStatus());
  DeviceScope scope(device, true);
  *out = nullptr;
  TRIB_CUDA_RETURN_IF_ERROR(cudaMalloc(out, bytes ? bytes : 1));
  // Explicitly on the legacy stream and waited for: an unfinished memset would not be ordered
  // before the work of a non-blocking stream.
  cudaError_t e = cudaMemsetAsync(*out, 0, bytes, cudaStreamLegacy);
  if (e == cudaSuccess) e = cudaStreamSynchronize(cudaStreamLegacy);
  if (e != cudaSuccess) {
    cudaFree(*out);
    *out = nullptr;
    return cudaFailure(e, "zero-filling a device buffer");
  }
  return Status::Ok();
}

void deviceFree(void* p) {
  if (p && cudaFree(p) != cudaSuccess) (void)cudaGetLastError();
}

Status copy(void* dst, const void* src, size_t bytes, void* stream) {
  TRIB_RETURN_IF_ERROR(deviceStatus());
  if (bytes == 0) return Status::Ok();
  const auto s = static_cast<cudaStream_t>(stream);
  TRIB_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s));
  TRIB_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
  return Status::Ok();
}

Status streamCreate(int device, void** stream) {
  TRIB_RETURN_IF_ERROR(deviceStatus());
  DeviceScope scope(device, true);
  cudaStream_t s = nullptr;
  TRIB_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  *stream = s;
  return Status::Ok();
}

void streamDestroy(void* stream) {
  if (stream && cudaStreamDestroy(static_cast<cudaStream_t>(stream)) != cudaSuccess) (void)cudaGetLastError();
}

Status streamSynchronize(void* stream) {
  TRIB_RETURN_IF_ERROR(deviceStatus());
  TRIB_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
  return Status::Ok();
}

}  // namespace trib::cuda
