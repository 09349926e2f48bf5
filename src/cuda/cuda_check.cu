// trib-perf's device-side check of results: a kernel compares each output element with the
// expected value of common/perf_pattern.hpp (the formula the host check uses) and counts mismatches,
// so a device run checks its output without copying it back.
#include <cuda_runtime.h>

#include "cuda/cuda_api.hpp"
#include "cuda/cuda_util.hpp"
#include "reduce/element_ops.hpp"

namespace trib::cuda {
namespace {

// An element as a double, as trib::loadElement reads it on the host.
template <class T>
struct Plain {
  using Storage = T;
  __device__ static double value(T x) { return static_cast<double>(x); }
};
template <DataType D>
struct Widened {
  using Storage = typename elem::Element<D>::Storage;
  __device__ static double value(Storage x) { return elem::Element<D>::widen(x); }
};

template <class L>
__global__ void mismatchKernel(const typename L::Storage* out, uint64_t n, perf::Check c,
                               unsigned long long* count) {
  unsigned long long local = 0;
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += uint64_t{gridDim.x} * blockDim.x)
    local += perf::wrong(c, i, L::value(out[i]));
  if (local) atomicAdd(count, local);
}

template <class L>
void launch(const void* out, uint64_t n, const perf::Check& c, unsigned long long* count, cudaStream_t s) {
  constexpr unsigned kThreads = 256;
  const uint64_t blocks = n / kThreads + 1;
  mismatchKernel<L><<<static_cast<unsigned>(blocks < 1024 ? blocks : 1024), kThreads, 0, s>>>(
      static_cast<const typename L::Storage*>(out), n, c, count);
}

}  // namespace

Status countMismatches(int device, void* stream, const void* out, uint64_t elems, DataType dtype,
                       const perf::Check& check, int64_t* mismatches) {
  TRIB_RETURN_IF_ERROR(deviceStatus());
  DeviceScope scope(device, true);
  *mismatches = 0;
  if (elems == 0) return Status::Ok();
  const auto s = static_cast<cudaStream_t>(stream);
  unsigned long long* count = nullptr;
  TRIB_CUDA_RETURN_IF_ERROR(cudaMallocAsync(reinterpret_cast<void**>(&count), sizeof *count, s));
  cudaError_t e = cudaMemsetAsync(count, 0, sizeof *count, s);
  switch (dtype) {
    case tribInt8:
      launch<Plain<int8_t>>(out, elems, check, count, s);
      break;
    case tribUint8:
      launch<Plain<uint8_t>>(out, elems, check, count, s);
      break;
    case tribInt32:
      launch<Plain<int32_t>>(out, elems, check, count, s);
      break;
    case tribUint32:
      launch<Plain<uint32_t>>(out, elems, check, count, s);
      break;
    case tribInt64:
      launch<Plain<int64_t>>(out, elems, check, count, s);
      break;
    case tribUint64:
      launch<Plain<uint64_t>>(out, elems, check, count, s);
      break;
    case tribFloat32:
      launch<Plain<float>>(out, elems, check, count, s);
      break;
    case tribFloat64:
      launch<Plain<double>>(out, elems, check, count, s);
      break;
    case tribFloat16:
      launch<Widened<tribFloat16>>(out, elems, check, count, s);
      break;
    case tribBfloat16:
      launch<Widened<tribBfloat16>>(out, elems, check, count, s);
      break;
    case tribFp8E4M3:
      launch<Widened<tribFp8E4M3>>(out, elems, check, count, s);
      break;
    case tribFp8E5M2:
      launch<Widened<tribFp8E5M2>>(out, elems, check, count, s);
      break;
    default:
      cudaFreeAsync(count, s);
      return errorf(tribInvalidArgument, "countMismatches: unknown dtype %d", static_cast<int>(dtype));
  }
  if (e == cudaSuccess) e = cudaGetLastError();  // the launch
  unsigned long long host = 0;
  if (e == cudaSuccess) e = cudaMemcpyAsync(&host, count, sizeof host, cudaMemcpyDeviceToHost, s);
  cudaFreeAsync(count, s);
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);
  if (e != cudaSuccess) return cudaFailure(e, "the mismatch-count kernel");
  *mismatches = static_cast<int64_t>(host);
  return Status::Ok();
}

}  // namespace trib::cuda
