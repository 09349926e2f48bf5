// The CUDA engine: a schedule's local work on device memory. Copies go to the copy engine
// (cudaMemcpyAsync), reductions and the avg division to kernels that run the shared element
// arithmetic (reduce/element_ops.hpp, the CPU reducer's very functions) with 16-byte loads and
// stores; each op completes from an event that progress() polls. Everything runs on the engine's
// own stream; stream-ordered calls (core/stream_coll.cpp) order it against the caller's stream.
#include <cuda_runtime.h>

#include <cstring>
#include <deque>
#include <mutex>
#include <set>
#include <vector>

#include "cuda/cuda_api.hpp"
#include "cuda/cuda_util.hpp"
#include "exec/staging_pool.hpp"
#include "reduce/element_ops.hpp"

namespace trib::cuda {
namespace {

constexpr int kThreads = 256;
constexpr uint64_t kMaxBlocks = 4096;  // grid-stride loops past that

// How [0, n) splits: `head` scalar elements until every pointer is 16-byte aligned, `vectors`
// whole 16-byte vectors, then a scalar tail. Pointers with different offsets mod 16 go all scalar.
struct Split {
  uint64_t head = 0, vectors = 0, n = 0;
  bool elementAligned = true;  // the scalar part may load T directly (else byte-wise)
};
template <class T>
Split splitFor(uint64_t n, std::initializer_list<const void*> ptrs) {
  Split s;
  s.n = n;
  const uintptr_t off = reinterpret_cast<uintptr_t>(*ptrs.begin()) & 15;
  bool same = true;
  for (const void* p : ptrs) {
    same &= (reinterpret_cast<uintptr_t>(p) & 15) == off;
    s.elementAligned &= reinterpret_cast<uintptr_t>(p) % sizeof(T) == 0;
  }
  if (!same || off % sizeof(T) != 0) return s;
  s.head = off ? (16 - off) / sizeof(T) : 0;
  if (s.head > n) s.head = n;
  s.vectors = (n - s.head) / (16 / sizeof(T));
  return s;
}
uint64_t blocksFor(uint64_t work) {
  const uint64_t b = (work + kThreads - 1) / kThreads;
  return b == 0 ? 1 : b < kMaxBlocks ? b : kMaxBlocks;
}

template <class T>
__device__ inline T loadElem(const T* p, bool aligned) {
  if (aligned) return *p;
  T v;
  memcpy(&v, p, sizeof(T));
  return v;
}
template <class T>
__device__ inline void storeElem(T* p, T v, bool aligned) {
  if (aligned)
    *p = v;
  else
    memcpy(p, &v, sizeof(T));
}
// Index of the r-th scalar element (the head, then the tail after the vectors).
__device__ inline uint64_t scalarIndex(uint64_t r, const Split& s, uint64_t perVector) {
  return r < s.head ? r : s.head + s.vectors * perVector + (r - s.head);
}

template <class T>
union Vec16 {
  uint4 bits;
  T lanes[16 / sizeof(T)];
};

// dst = a op b. Each vector (and element) is read before it is written: dst may alias a or b.
template <class E, elem::Op kOp>
__global__ void reduceKernel(typename E::Storage* dst, const typename E::Storage* a,
                             const typename E::Storage* b, Split s) {
  using T = typename E::Storage;
  constexpr uint64_t kPer = 16 / sizeof(T);
  const uint64_t first = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x;
  const uint64_t stride = uint64_t{gridDim.x} * blockDim.x;
  const uint4* va = reinterpret_cast<const uint4*>(a + s.head);
  const uint4* vb = reinterpret_cast<const uint4*>(b + s.head);
  uint4* vd = reinterpret_cast<uint4*>(dst + s.head);
  for (uint64_t v = first; v < s.vectors; v += stride) {
    Vec16<T> x, y;
    x.bits = va[v];
    y.bits = vb[v];
#pragma unroll
    for (uint64_t k = 0; k < kPer; ++k) x.lanes[k] = E::template combine<kOp>(x.lanes[k], y.lanes[k]);
    vd[v] = x.bits;
  }
  const uint64_t scalars = s.n - s.vectors * kPer;
  for (uint64_t r = first; r < scalars; r += stride) {
    const uint64_t i = scalarIndex(r, s, kPer);
    storeElem(dst + i,
              E::template combine<kOp>(loadElem(a + i, s.elementAligned), loadElem(b + i, s.elementAligned)),
              s.elementAligned);
  }
}

// buf = buf / divisor (avg's last step).
template <class E>
__global__ void divideKernel(typename E::Storage* buf, uint64_t divisor, Split s) {
  using T = typename E::Storage;
  constexpr uint64_t kPer = 16 / sizeof(T);
  const uint64_t first = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x;
  const uint64_t stride = uint64_t{gridDim.x} * blockDim.x;
  uint4* vp = reinterpret_cast<uint4*>(buf + s.head);
  for (uint64_t v = first; v < s.vectors; v += stride) {
    Vec16<T> x;
    x.bits = vp[v];
#pragma unroll
    for (uint64_t k = 0; k < kPer; ++k) x.lanes[k] = E::divide(x.lanes[k], divisor);
    vp[v] = x.bits;
  }
  const uint64_t scalars = s.n - s.vectors * kPer;
  for (uint64_t r = first; r < scalars; r += stride) {
    const uint64_t i = scalarIndex(r, s, kPer);
    storeElem(buf + i, E::divide(loadElem(buf + i, s.elementAligned), divisor), s.elementAligned);
  }
}

bool overlapping(const void* x, const void* y, size_t bytes) {
  const auto a = reinterpret_cast<uintptr_t>(x), b = reinterpret_cast<uintptr_t>(y);
  return a < b + bytes && b < a + bytes;
}

class CudaEngine final : public Engine {
 public:
  CudaEngine(int device, cudaStream_t stream) : device_(device), stream_(stream) {}
  ~CudaEngine() override {
    DeviceScope scope(device_);
    cudaStreamSynchronize(stream_);
    for (Pending& p : pending_) cudaEventDestroy(p.event);
    for (cudaEvent_t e : spareEvents_) cudaEventDestroy(e);
    cudaStreamDestroy(stream_);
    (void)cudaGetLastError();
  }

  const char* name() const override { return "cuda"; }
  MemoryKind memory() const override { return MemoryKind::Device; }

  Status postCopy(void* dst, const void* src, size_t bytes, TransferOp* op, bool) override {
    std::lock_guard<std::mutex> lock(mu_);
    DeviceScope scope(device_);
    if (bytes && dst != src) {
      if (overlapping(dst, src, bytes)) {  // memmove: cudaMemcpy is undefined on overlap, so go via a copy
        void* tmp = nullptr;
        TRIB_CUDA_RETURN_IF_ERROR(cudaMallocAsync(&tmp, bytes, stream_));
        TRIB_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(tmp, src, bytes, cudaMemcpyDefault, stream_));
        TRIB_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, tmp, bytes, cudaMemcpyDefault, stream_));
        TRIB_CUDA_RETURN_IF_ERROR(cudaFreeAsync(tmp, stream_));
      } else {
        TRIB_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_));
      }
    }
    return track(op);
  }

  Status postReduce(void* dst, const void* a, const void* b, uint64_t count, DataType dtype, RedOp rop,
                    TransferOp* op) override {
    std::lock_guard<std::mutex> lock(mu_);
    DeviceScope scope(device_);
    if (count) {
      const bool known = elem::withElement(dtype, [&](auto e) {
        using E = decltype(e);
        using T = typename E::Storage;
        const Split s = splitFor<T>(count, {dst, a, b});
        const uint64_t scalars = count - s.vectors * (16 / sizeof(T));
        const uint64_t blocks = blocksFor(s.vectors > scalars ? s.vectors : scalars);
        elem::withOp(elem::opOf(rop), [&](auto tag) {
          reduceKernel<E, decltype(tag)::value><<<static_cast<unsigned>(blocks), kThreads, 0, stream_>>>(
              static_cast<T*>(dst), static_cast<const T*>(a), static_cast<const T*>(b), s);
        });
      });
      if (!known)
        return errorf(tribInvalidArgument, "cuda engine: unknown datatype %d", static_cast<int>(dtype));
      TRIB_CUDA_RETURN_IF_ERROR(cudaGetLastError());  // the launch itself
    }
    return track(op);
  }

  Status postDivide(void* buf, uint64_t count, DataType dtype, uint64_t divisor, TransferOp* op) override {
    if (divisor == 0) return errorf(tribInvalidArgument, "cuda engine: avg divisor 0");
    std::lock_guard<std::mutex> lock(mu_);
    DeviceScope scope(device_);
    if (count && divisor != 1) {
      const bool known = elem::withElement(dtype, [&](auto e) {
        using E = decltype(e);
        using T = typename E::Storage;
        const Split s = splitFor<T>(count, {buf});
        const uint64_t scalars = count - s.vectors * (16 / sizeof(T));
        const uint64_t blocks = blocksFor(s.vectors > scalars ? s.vectors : scalars);
        divideKernel<E>
            <<<static_cast<unsigned>(blocks), kThreads, 0, stream_>>>(static_cast<T*>(buf), divisor, s);
      });
      if (!known)
        return errorf(tribInvalidArgument, "cuda engine: unknown datatype %d", static_cast<int>(dtype));
      TRIB_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    }
    return track(op);
  }

  // Completes, in order, every op whose event has passed; a failed stream fails them all.
  Status progress() override {
    std::lock_guard<std::mutex> lock(mu_);
    return progressLocked();
  }

  // Stream-ordered (cudaMallocAsync / cudaFreeAsync on the engine's stream, which alone uses
  // scratch): cudaFree would wait for the whole device, caller streams included, and a caller's
  // stream may be held until this engine's call finishes (deadlock).
  void* allocScratch(size_t bytes) override {
    DeviceScope scope(device_);
    void* p = nullptr;
    if (cudaMallocAsync(&p, bytes ? bytes : 1, stream_) != cudaSuccess) {
      (void)cudaGetLastError();
      return nullptr;
    }
    return p;
  }
  void freeScratch(void* p, size_t) override {
    DeviceScope scope(device_);
    if (p && cudaFreeAsync(p, stream_) != cudaSuccess) (void)cudaGetLastError();
  }
  // Pinned and mapped: the copy engine moves it at full speed, and kernels read it directly (a
  // host-staged receive-reduce combines from it). Kept for reuse and freed only with the engine, as
  // cudaFreeHost may wait for the device (the same deadlock as cudaFree). cudaHostAlloc waits for
  // blocking streams, one of which may be held for this engine's call: stream-ordered calls
  // reserve their staging first, on the caller's thread (exec/staging_pool.hpp).
  void* allocHostStaging(size_t bytes) override { return pinned_.take(bytes); }
  void freeHostStaging(void* p, size_t bytes) override { pinned_.give(p, bytes); }
  Status reserveHostStaging(const std::vector<size_t>& bytes) override { return pinned_.reserve(bytes); }

  Status synchronize() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      DeviceScope scope(device_);
      TRIB_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    }
    return progress();
  }

 private:
  struct Pending {
    cudaEvent_t event;
    TransferOp* op;
  };

  Status track(TransferOp* op) {
    cudaEvent_t e;
    if (!spareEvents_.empty()) {
      e = spareEvents_.back();
      spareEvents_.pop_back();
    } else {
      TRIB_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    }
    const cudaError_t r = cudaEventRecord(e, stream_);
    if (r != cudaSuccess) {
      spareEvents_.push_back(e);
      return cudaFailure(r, "cudaEventRecord");
    }
    pending_.push_back({e, op});
    return progressLocked();  // work that is already done completes at once
  }

  Status progressLocked() {
    while (!pending_.empty()) {
      const cudaError_t q = cudaEventQuery(pending_.front().event);
      if (q == cudaErrorNotReady) {
        (void)cudaGetLastError();
        return Status::Ok();
      }
      if (q != cudaSuccess) {
        const Status err = cudaFailure(q, "cuda engine: work on the engine's stream");
        for (Pending& p : pending_) {
          p.op->fail(err);
          spareEvents_.push_back(p.event);
        }
        pending_.clear();
        return err;
      }
      pending_.front().op->complete();
      spareEvents_.push_back(pending_.front().event);
      pending_.pop_front();
    }
    return Status::Ok();
  }

  const int device_;
  const cudaStream_t stream_;
  std::mutex mu_;
  StagingPool pinned_{
      [device = device_](size_t size) {
        DeviceScope scope(device);
        void* p = nullptr;
        if (cudaHostAlloc(&p, size, cudaHostAllocPortable | cudaHostAllocMapped) == cudaSuccess) return p;
        (void)cudaGetLastError();
        return static_cast<void*>(nullptr);
      },
      [](void* p) { cudaFreeHost(p); }};
  std::deque<Pending> pending_;
  std::vector<cudaEvent_t> spareEvents_;
};

// Loads every engine kernel (each dtype x operator, and the division) on the current device.
// With lazy module loading (CUDA's default since 12.2) a kernel's first launch loads it under the
// context's lock and waits for all of the device's work to drain; a caller's stream held by
// cuStreamWaitValue32 until this engine's call ends never drains, so that launch waits forever (seen
// on an H200: every reduction of 2 ranks on device memory hung at its first kernel).
// cudaFuncGetAttributes loads a kernel without running it.
Status loadEngineKernels() {
  cudaError_t e = cudaSuccess;
  for (int d = 0; d < tribNumTypes; ++d)
    elem::withElement(static_cast<DataType>(d), [&](auto element) {
      using E = decltype(element);
      cudaFuncAttributes attributes;
      for (elem::Op op : {elem::Op::kSum, elem::Op::kProd, elem::Op::kMin, elem::Op::kMax})
        elem::withOp(op, [&](auto tag) {
          if (e == cudaSuccess) e = cudaFuncGetAttributes(&attributes, reduceKernel<E, decltype(tag)::value>);
        });
      if (e == cudaSuccess) e = cudaFuncGetAttributes(&attributes, divideKernel<E>);
    });
  if (e != cudaSuccess) return cudaFailure(e, "loading the engine's kernels");
  return Status::Ok();
}

// The library's kernels, loaded once per device before its first engine can hold a stream.
Status loadKernelsOnce(int device) {
  static std::mutex mu;
  static std::set<int> loaded;
  std::lock_guard<std::mutex> lock(mu);
  if (loaded.count(device)) return Status::Ok();
  TRIB_RETURN_IF_ERROR(loadEngineKernels());
  TRIB_RETURN_IF_ERROR(loadCheckKernels());
  loaded.insert(device);
  return Status::Ok();
}

}  // namespace

Status createEngine(int device, std::unique_ptr<Engine>* out) {
  TRIB_RETURN_IF_ERROR(deviceStatus());
  int count = 0;
  TRIB_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
  if (device < 0 || device >= count)
    return errorf(tribInvalidArgument, "cuda engine: device %d does not exist (this process sees %d)", device,
                  count);
  DeviceScope scope(device);
  TRIB_RETURN_IF_ERROR(loadKernelsOnce(device).prefix(strprintf("cuda engine on device %d: ", device)));
  cudaStream_t stream;
  TRIB_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  *out = std::make_unique<CudaEngine>(device, stream);
  return Status::Ok();
}

Status synchronize(Engine& engine) {
  auto* cuda = dynamic_cast<CudaEngine*>(&engine);
  if (!cuda)
    return errorf(tribInvalidArgument, "synchronize: the %s engine is not a CUDA engine", engine.name());
  return cuda->synchronize();
}

}  // namespace trib::cuda
