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

// f(L{}) for dtype's layout; false (f not called) when the dtype is unknown.
template <class F>
bool withLayout(DataType dtype, F&& f) {
  switch (dtype) {
    case tribInt8:
      return f(Plain<int8_t>{}), true;
    case tribUint8:
      return f(Plain<uint8_t>{}), true;
    case tribInt32:
      return f(Plain<int32_t>{}), true;
    case tribUint32:
      return f(Plain<uint32_t>{}), true;
    case tribInt64:
      return f(Plain<int64_t>{}), true;
    case tribUint64:
      return f(Plain<uint64_t>{}), true;
    case tribFloat32:
      return f(Plain<float>{}), true;
    case tribFloat64:
      return f(Plain<double>{}), true;
    case tribFloat16:
      return f(Widened<tribFloat16>{}), true;
    case tribBfloat16:
      return f(Widened<tribBfloat16>{}), true;
    case tribFp8E4M3:
      return f(Widened<tribFp8E4M3>{}), true;
    case tribFp8E5M2:
      return f(Widened<tribFp8E5M2>{}), true;
    default:
      return false;
  }
}

}  // namespace

Status loadCheckKernels() {
  cudaError_t e = cudaSuccess;
  for (int d = 0; d < tribNumTypes; ++d)
    withLayout(static_cast<DataType>(d), [&](auto layout) {
      cudaFuncAttributes attributes;
      if (e == cudaSuccess) e = cudaFuncGetAttributes(&attributes, mismatchKernel<decltype(layout)>);
    });
  if (e != cudaSuccess) return cudaFailure(e, "loading the check kernels");
  return Status::Ok();
}

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
  if (!withLayout(dtype, [&](auto layout) { launch<decltype(layout)>(out, elems, check, count, s); })) {
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
