// The CUDA-IPC / NVLink window provider on a real GPU: VMM allocations exported as POSIX fds and
// mapped again; all-reduces on device memory whose one-shot and two-shot schedules run over the
// device windows (2 ranks as processes: VMM fds passed over a Unix socket; 3 ranks as threads of
// one process: direct pointers), results checked element by element; tribMemAllocDevice and
// tribCommRegister on device memory. Without a device every test reports SKIPPED ("needs a CUDA
// device"); the same exchange over host windows is test_nvlink.
#include <gtest/gtest.h>
#include <unistd.h>

#include <barrier>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "core/comm.hpp"
#include "cuda/cuda_api.hpp"
#include "cuda/cuda_vmm.hpp"
#include "fork_util.hpp"
#include "tributary/tributary.h"

#ifdef TRIB_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace trib {
namespace {

#ifdef TRIB_HAVE_CUDA

// Whether a child (the parent must touch no CUDA before it forks) sees a device.
bool deviceInAChild() {
  const auto probe = testing::runChildren(1, 60, [](int) { return cuda::deviceStatus().ok() ? 0 : 77; });
  return probe[0].code == 0;
}

#define TRIB_NEED_CUDA_DEVICE_FORKING()                           \
  do {                                                            \
    if (!deviceInAChild()) GTEST_SKIP() << "needs a CUDA device"; \
  } while (0)

// One rank's all-reduces over the device windows: `algo` forced strictly, device buffers from
// tribMemAllocDevice, sizes within a cell and (two-shot) over several; returns 0 or a failure code.
// `allDone` (ranks of one process) runs once this rank's calls are done, before it frees: tribMemFree
// waits for the whole device, as cudaFree does, so freeing while another rank of the process still
// has a call on its stream (waiting for this rank) would never return.
template <class AllDone>
int allReduceRank(tribComm_t comm, int rank, int nranks, cudaStream_t s, AllDone allDone) {
  CHILD_CHECK(comm->impl()->deviceWindows != nullptr, 20);  // the nvlink windows were connected
  const size_t counts[] = {1000, 200000, 1 << 20};
  void* bufs[3] = {};
  for (int k = 0; k < 3; ++k) CHILD_CHECK(tribMemAllocDevice(&bufs[k], counts[k] * 4) == tribSuccess, 21);
  for (int k = 0; k < 3; ++k) {
    const size_t count = counts[k];
    void* d = bufs[k];
    std::vector<float> h(count), back(count, -1.f);
    for (size_t i = 0; i < count; ++i) h[i] = static_cast<float>((rank + 1) * (i % 101));
    CHILD_CHECK(cudaMemcpyAsync(d, h.data(), count * 4, cudaMemcpyHostToDevice, s) == cudaSuccess, 22);
    const tribResult_t r = tribAllReduce(d, d, count, tribFloat32, tribSum, comm, s);
    if (r != tribSuccess) std::fprintf(stderr, "rank %d: %s\n", rank, tribGetLastError(comm));
    CHILD_CHECK(r == tribSuccess, 23);
    CHILD_CHECK(cudaMemcpyAsync(back.data(), d, count * 4, cudaMemcpyDeviceToHost, s) == cudaSuccess, 24);
    CHILD_CHECK(cudaStreamSynchronize(s) == cudaSuccess, 25);
    tribResult_t async = tribSuccess;
    CHILD_CHECK(tribCommGetAsyncError(comm, &async) == tribSuccess && async == tribSuccess, 26);
    const float sum = static_cast<float>(nranks * (nranks + 1) / 2);
    for (size_t i = 0; i < count; ++i) CHILD_CHECK(back[i] == sum * static_cast<float>(i % 101), 27);
  }
  allDone();
  for (void* d : bufs) CHILD_CHECK(tribMemFree(d) == tribSuccess, 28);
  return 0;
}

TEST(NvlinkGpu, VmmAllocationsExportAndMapAgain) {
  if (Status st = cuda::deviceStatus(); !st.ok()) GTEST_SKIP() << "needs a CUDA device: " << st.message();
  cuda::DeviceInfo info;
  ASSERT_TRUE(cuda::deviceInfo(0, &info).ok());
  if (!info.vmmFd) GTEST_SKIP() << "needs a CUDA device with VMM POSIX fd handles";
  cuda::VmmAllocation a, b;
  ASSERT_TRUE(cuda::vmmAlloc(0, 1000, &a).ok());
  EXPECT_GE(a.bytes, 1000u);
  int fd = -1;
  ASSERT_TRUE(cuda::vmmExportFd(a, &fd).ok());
  ASSERT_TRUE(cuda::vmmImportFd(0, fd, a.bytes, &b).ok());
  close(fd);
  EXPECT_NE(a.ptr, b.ptr);  // two mappings of the same memory
  std::vector<int> h(250, 7), back(250, 0);
  ASSERT_EQ(cudaMemcpy(a.ptr, h.data(), 1000, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(back.data(), b.ptr, 1000, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back, h);
  cuda::DeviceAllocation alloc;
  ASSERT_TRUE(cuda::deviceAllocation(static_cast<char*>(a.ptr) + 10, &alloc));
  EXPECT_EQ(alloc.base, reinterpret_cast<uintptr_t>(a.ptr));
  cuda::vmmFree(b);
  cuda::vmmFree(a);
}

TEST(NvlinkGpu, TwoProcessesAllReduceOverDeviceWindows) {
  TRIB_NEED_CUDA_DEVICE_FORKING();
  for (const char* algo : {"oneshot", "twoshot"}) {
    SCOPED_TRACE(algo);
    tribUniqueId id;
    ASSERT_EQ(tribGetUniqueId(&id), tribSuccess);
    const auto results = testing::runChildren(2, 120, [&](int rank) {
      setenv("TRIB_ALGO", algo, 1);
      setenv("TRIB_ALGO_STRICT", "1", 1);
      // The device is set before init (as NCCL programs do): that connects the nvlink windows.
      CHILD_CHECK(cudaSetDevice(0) == cudaSuccess && cudaFree(nullptr) == cudaSuccess, 1);
      tribComm_t comm = nullptr;
      CHILD_CHECK(tribCommInitRank(&comm, 2, id, rank) == tribSuccess, 2);
      cudaStream_t s;
      CHILD_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, 3);
      const int rc = allReduceRank(comm, rank, 2, s, [] {});  // its own process: frees wait for it alone
      cudaStreamDestroy(s);
      CHILD_CHECK(tribCommDestroy(comm) == tribSuccess, 4);
      return rc;
    });
    for (const auto& r : results) EXPECT_EQ(r.code, 0) << "child " << r.pid;
  }
}

TEST(NvlinkGpu, ThreeRanksOfOneProcessAllReduceOverDeviceWindows) {
  if (Status st = cuda::deviceStatus(); !st.ok()) GTEST_SKIP() << "needs a CUDA device: " << st.message();
  for (const char* algo : {"oneshot", "twoshot"}) {
    SCOPED_TRACE(algo);
    setenv("TRIB_ALGO", algo, 1);
    setenv("TRIB_ALGO_STRICT", "1", 1);
    tribUniqueId id;
    ASSERT_EQ(tribGetUniqueId(&id), tribSuccess);
    constexpr int n = 3;
    std::vector<int> codes(n, -1);
    std::barrier allDone(n);
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r)
      threads.emplace_back([&, r] {
        codes[r] = [&]() -> int {
          CHILD_CHECK(cudaSetDevice(0) == cudaSuccess && cudaFree(nullptr) == cudaSuccess, 1);
          tribComm_t comm = nullptr;
          CHILD_CHECK(tribCommInitRank(&comm, n, id, r) == tribSuccess, 2);
          cudaStream_t s;
          CHILD_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, 3);
          bool arrived = false;
          const int rc = allReduceRank(comm, r, n, s, [&] {
            arrived = true;
            allDone.arrive_and_wait();
          });
          if (!arrived) allDone.arrive_and_drop();  // failed early: the others must not wait for it
          cudaStreamDestroy(s);
          CHILD_CHECK(tribCommDestroy(comm) == tribSuccess, 4);
          return rc;
        }();
      });
    for (auto& t : threads) t.join();
    unsetenv("TRIB_ALGO");
    unsetenv("TRIB_ALGO_STRICT");
    for (int r = 0; r < n; ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
  }
}

TEST(NvlinkGpu, DeviceMemAllocAndRegistration) {
  if (Status st = cuda::deviceStatus(); !st.ok()) GTEST_SKIP() << "needs a CUDA device: " << st.message();
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  void* d = nullptr;
  EXPECT_EQ(tribMemAllocDevice(nullptr, 16), tribInvalidArgument);
  EXPECT_EQ(tribMemAllocDevice(&d, 0), tribInvalidArgument);
  ASSERT_EQ(tribMemAllocDevice(&d, 1000), tribSuccess) << tribGetLastError(nullptr);
  EXPECT_TRUE(cuda::isDevicePointer(d));
  cuda::DeviceAllocation alloc;
  ASSERT_TRUE(cuda::deviceAllocation(d, &alloc));
  EXPECT_GE(alloc.bytes, 1000u);  // granularity-rounded
  tribComm_t comm = nullptr;
  ASSERT_EQ(tribCommInitAll(&comm, 1, nullptr), tribSuccess);
  void* h = nullptr;
  ASSERT_EQ(tribCommRegister(comm, d, 1000, &h), tribSuccess) << tribGetLastError(comm);
  void* h2 = nullptr;
  EXPECT_EQ(tribCommRegister(comm, static_cast<char*>(d) + 100, 100, &h2), tribInvalidArgument);  // overlap
  EXPECT_EQ(tribCommRegister(comm, d, alloc.bytes + 1, &h2), tribInvalidArgument);  // past the allocation
  EXPECT_NE(std::string(tribGetLastError(comm)).find("runs past its CUDA allocation"), std::string::npos);
  EXPECT_EQ(tribCommDeregister(comm, h), tribSuccess);
  EXPECT_EQ(tribCommDeregister(comm, h), tribInvalidArgument);
  EXPECT_EQ(tribCommDestroy(comm), tribSuccess);
  EXPECT_EQ(tribMemFree(d), tribSuccess);
}

#else  // a build without CUDA

TEST(NvlinkGpu, TwoProcessesAllReduceOverDeviceWindows) {
  GTEST_SKIP() << "needs a CUDA device (no CUDA in this build)";
}

#endif

}  // namespace
}  // namespace trib
