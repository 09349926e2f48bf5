// Stream ordering on CUDA streams (cuda_api.hpp: createStreamOrdering). Each ordering takes a page
// of mapped, pinned host words: kRing start words, which the caller's stream writes (a ticket's
// start, cuStreamWriteValue32, after the stream's earlier work) and the progress thread reads, and a
// release word, which the progress thread writes and the stream waits on (cuStreamWaitValue32,
// GEQ modulo 2^32). No host thread blocks on the stream, and nothing is enqueued but the two
// memory operations. Pages are never freed: a stream may still wait on a word after its
// communicator is gone; the next ordering takes the page over and counts on from its release word.
#include <cuda.h>  // driver types only: the functions come from the runtime's entry-point lookup
#include <cuda_runtime.h>

#include <mutex>
#include <vector>

#include "cuda/cuda_api.hpp"
#include "cuda/cuda_util.hpp"

namespace trib::cuda {
namespace {

using StreamValue32 = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

struct Driver {
  StreamValue32 write = nullptr, wait = nullptr;
  Status status;
};

// The two driver functions, looked up once (the CUDA 12.0 ABI of each).
const Driver& driver() {
  static const Driver d = [] {
    Driver r;
    if (r.status = deviceStatus(); !r.status.ok()) return r;
    for (auto [name, fn] :
         {std::pair{"cuStreamWriteValue32", &r.write}, std::pair{"cuStreamWaitValue32", &r.wait}}) {
      void* p = nullptr;
      cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
      const cudaError_t e = cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &found);
      if (e != cudaSuccess || found != cudaDriverEntryPointSuccess || !p) {
        (void)cudaGetLastError();
        r.status =
            errorf(tribUnhandledCudaError,
                   "the CUDA driver has no %s (cudaGetDriverEntryPointByVersion: %s, lookup result %d): "
                   "stream-ordered calls need a driver of CUDA 12 or later",
                   name, cudaGetErrorName(e), static_cast<int>(found));
        return r;
      }
      *fn = reinterpret_cast<StreamValue32>(p);
    }
    return r;
  }();
  return d;
}

constexpr size_t kDoneWord = StreamOrdering::kRing + 16;  // its own cache line
constexpr size_t kPageWords = kDoneWord + 16;

struct Page {
  uint32_t* host = nullptr;
  CUdeviceptr device = 0;
};
std::mutex gPagesMu;
std::vector<Page> gSparePages;

Status takePage(int device, Page* out) {
  {
    std::lock_guard<std::mutex> lock(gPagesMu);
    if (!gSparePages.empty()) {
      *out = gSparePages.back();
      gSparePages.pop_back();
      return Status::Ok();
    }
  }
  DeviceScope scope(device);
  void* host = nullptr;
  TRIB_CUDA_RETURN_IF_ERROR(
      cudaHostAlloc(&host, kPageWords * sizeof(uint32_t), cudaHostAllocPortable | cudaHostAllocMapped));
  void* dev = nullptr;
  if (const cudaError_t e = cudaHostGetDevicePointer(&dev, host, 0); e != cudaSuccess) {
    cudaFreeHost(host);
    return cudaFailure(e, "cudaHostGetDevicePointer");
  }
  out->host = static_cast<uint32_t*>(host);
  for (size_t i = 0; i < kPageWords; ++i) out->host[i] = 0;
  out->device = reinterpret_cast<CUdeviceptr>(dev);
  return Status::Ok();
}

Status driverFailure(CUresult r, const char* what) {
  return errorf(tribUnhandledCudaError, "%s on the caller's stream failed: CUresult %d", what,
                static_cast<int>(r));
}

class CudaStreamOrdering final : public StreamOrdering {
 public:
  CudaStreamOrdering(int device, Page page) : device_(device), page_(page) {}
  ~CudaStreamOrdering() override {
    std::lock_guard<std::mutex> lock(gPagesMu);
    gSparePages.push_back(page_);
  }
  const char* name() const override { return "cuda"; }

  Status markStart(void* stream, uint32_t ticket) override {
    DeviceScope scope(device_, true);  // the legacy default stream is the current context's
    const CUresult r = driver().write(static_cast<CUstream>(stream), page_.device + 4 * (ticket % kRing),
                                      ticket, CU_STREAM_WRITE_VALUE_DEFAULT);
    return r == CUDA_SUCCESS ? Status::Ok() : driverFailure(r, "cuStreamWriteValue32");
  }
  Status holdUntilDone(void* stream, uint32_t ticket) override {
    DeviceScope scope(device_, true);
    const CUresult r = driver().wait(static_cast<CUstream>(stream), page_.device + 4 * kDoneWord, ticket,
                                     CU_STREAM_WAIT_VALUE_GEQ);
    return r == CUDA_SUCCESS ? Status::Ok() : driverFailure(r, "cuStreamWaitValue32");
  }
  bool reached(uint32_t ticket) override {
    return __atomic_load_n(&page_.host[ticket % kRing], __ATOMIC_ACQUIRE) == ticket;
  }
  void release(uint32_t ticket) override {
    __atomic_store_n(&page_.host[kDoneWord], ticket, __ATOMIC_RELEASE);
  }
  uint32_t firstTicket() const override {
    return __atomic_load_n(&page_.host[kDoneWord], __ATOMIC_ACQUIRE) + 1;
  }

 private:
  const int device_;
  const Page page_;
};

}  // namespace

Status createStreamOrdering(int device, std::unique_ptr<StreamOrdering>* out) {
  TRIB_RETURN_IF_ERROR(driver().status);
  Page page;
  TRIB_RETURN_IF_ERROR(takePage(device, &page));
  *out = std::make_unique<CudaStreamOrdering>(device, page);
  return Status::Ok();
}

}  // namespace trib::cuda
