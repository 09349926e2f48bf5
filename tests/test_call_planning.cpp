// What a call tells the planner: its real dtype and op (slices are cut in bytes of that dtype) and
// the kind of its buffers (host, registered, tribMemAlloc's shared memory), which the plan cache
// keeps apart; and the C API's registration calls.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "core/comm.hpp"
#include "tributary/tributary.h"

namespace trib {
namespace {

// n thread ranks that run `body(rank, comm)` together; ring forced so the slices are the planner's.
void withComms(int n, const std::function<void(int, tribComm_t)>& body) {
  tribUniqueId id;
  ASSERT_EQ(tribGetUniqueId(&id), tribSuccess);
  std::vector<tribComm_t> comms(n);
  std::vector<std::thread> t;
  for (int r = 0; r < n; ++r)
    t.emplace_back([&, r] {
      tribConfig_t cfg = TRIB_CONFIG_INITIALIZER;
      cfg.algo = "allreduce:ring";
      ASSERT_EQ(tribCommInitRankConfig(&comms[r], n, id, r, &cfg), tribSuccess) << tribGetLastError(nullptr);
      body(r, comms[r]);
    });
  for (auto& th : t) th.join();
  for (tribComm_t c : comms) EXPECT_EQ(tribCommDestroy(c), tribSuccess);
}

// The largest message of the cached all-reduce plan for `dtype`, in bytes.
uint64_t largestMessageBytes(const tribComm* comm, DataType dtype) {
  uint64_t most = 0;
  for (const auto& [key, plan] : comm->impl()->planCache) {
    if (key.dtype != dtype) continue;
    for (const Step& s : *plan.steps)
      if (s.kind == StepKind::Send) most = std::max<uint64_t>(most, s.src.count * dataTypeSize(dtype));
  }
  return most;
}

TEST(CallPlanning, SlicesAreTheSameBytesWhateverTheDtype) {
  constexpr size_t kBytes = 8 << 20;  // many slices at any plausible slice size
  std::vector<uint64_t> slice[2][3];
  const DataType dtypes[3] = {tribInt8, tribFloat32, tribFloat64};
  withComms(2, [&](int r, tribComm_t comm) {
    std::vector<char> in(kBytes, 1), out(kBytes);
    for (int d = 0; d < 3; ++d) {
      const size_t count = kBytes / dataTypeSize(dtypes[d]);
      ASSERT_EQ(tribAllReduce(in.data(), out.data(), count, dtypes[d], tribMax, comm, nullptr), tribSuccess)
          << tribGetLastError(nullptr);
      slice[r][d].push_back(largestMessageBytes(comm, dtypes[d]));
    }
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_GT(slice[r][1][0], 0u);
    EXPECT_EQ(slice[r][0][0], slice[r][1][0]) << "int8 slices differ from float32's (bytes)";
    EXPECT_EQ(slice[r][2][0], slice[r][1][0]) << "float64 slices differ from float32's (bytes)";
  }
}

TEST(CallPlanning, MemoryKindsArePlannedApart) {
  withComms(2, [&](int r, tribComm_t comm) {
    std::vector<float> heap(1024, 1.0f), out(1024);
    void* shared = nullptr;
    ASSERT_EQ(tribMemAlloc(&shared, 1024 * sizeof(float)), tribSuccess);
    std::memcpy(shared, heap.data(), 1024 * sizeof(float));
    void* handle = nullptr;
    ASSERT_EQ(tribCommRegister(comm, heap.data(), heap.size() * sizeof(float), &handle), tribSuccess);
    // Registered in, heap out: the weaker kind (host) plans the call; both registered: registered.
    ASSERT_EQ(tribAllReduce(heap.data(), out.data(), 1024, tribFloat32, tribSum, comm, nullptr), tribSuccess);
    ASSERT_EQ(tribAllReduce(heap.data(), heap.data(), 1024, tribFloat32, tribSum, comm, nullptr),
              tribSuccess);
    ASSERT_EQ(tribAllReduce(shared, shared, 1024, tribFloat32, tribSum, comm, nullptr), tribSuccess);
    EXPECT_EQ(static_cast<float*>(shared)[7], 2.0f) << "rank " << r;
    EXPECT_EQ(heap[7], 2.0f) << "rank " << r;
    std::vector<MemoryKind> kinds;
    for (const auto& [key, plan] : comm->impl()->planCache) kinds.push_back(key.memory);
    std::sort(kinds.begin(), kinds.end());
    EXPECT_EQ(kinds,
              (std::vector<MemoryKind>{MemoryKind::Host, MemoryKind::HostShared, MemoryKind::Registered}));
    EXPECT_EQ(tribCommDeregister(comm, handle), tribSuccess);
    EXPECT_EQ(tribMemFree(shared), tribSuccess);
  });
}

// A repeated call skips validation and classification (ops.cpp checkedCall) only while the memory
// it was classified by is unchanged: registering, deregistering, freeing and reusing the address
// change the kind the same call runs with.
TEST(CallPlanning, RepeatedCallsSeeMemoryChanges) {
  withComms(2, [&](int r, tribComm_t comm) {
    const Communicator::RepeatCall& last = comm->impl()->lastCall;
    auto kindOfRepeat = [&](void* buf) {
      EXPECT_EQ(tribAllReduce(buf, buf, 256, tribFloat32, tribSum, comm, nullptr), tribSuccess)
          << tribGetLastError(nullptr);
      EXPECT_TRUE(last.valid && last.made.sendbuff == buf) << "rank " << r;
      return last.call.sendKind;
    };
    std::vector<float> heap(256, 1.0f);
    EXPECT_EQ(kindOfRepeat(heap.data()), MemoryKind::Host);
    EXPECT_EQ(kindOfRepeat(heap.data()), MemoryKind::Host);
    void* handle = nullptr;
    ASSERT_EQ(tribCommRegister(comm, heap.data(), heap.size() * sizeof(float), &handle), tribSuccess);
    EXPECT_EQ(kindOfRepeat(heap.data()), MemoryKind::Registered);
    ASSERT_EQ(tribCommDeregister(comm, handle), tribSuccess);
    EXPECT_EQ(kindOfRepeat(heap.data()), MemoryKind::Host);
    EXPECT_EQ(heap[0], 16.0f) << "rank " << r;  // four all-reduces of 2 ranks, in place

    // A tribMemAlloc buffer freed, and private memory mapped at its address: host again.
    const size_t bytes = 256 * sizeof(float);
    void* shared = nullptr;
    ASSERT_EQ(tribMemAlloc(&shared, bytes), tribSuccess);
    std::memset(shared, 0, bytes);
    EXPECT_EQ(kindOfRepeat(shared), MemoryKind::HostShared);
    ASSERT_EQ(tribMemFree(shared), tribSuccess);
    void* again =
        mmap(shared, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    ASSERT_EQ(again, shared) << "the address was taken meanwhile";
    EXPECT_EQ(kindOfRepeat(again), MemoryKind::Host);
    munmap(again, bytes);

    // A repeat is still refused what validation refuses: a call that differs is validated again.
    EXPECT_EQ(tribAllReduce(heap.data() + 1, heap.data() + 2, 255, tribFloat32, tribSum, comm, nullptr),
              tribInvalidArgument);
    EXPECT_EQ(kindOfRepeat(heap.data()), MemoryKind::Host);
  });
}

TEST(CallPlanning, RegistrationErrorsThroughTheCApi) {
  withComms(2, [&](int r, tribComm_t comm) {
    if (r != 0) return;
    std::vector<char> buf(4096);
    void* h = nullptr;
    EXPECT_EQ(tribCommRegister(nullptr, buf.data(), 16, &h), tribInvalidArgument);
    EXPECT_EQ(tribCommRegister(comm, nullptr, 16, &h), tribInvalidArgument);
    EXPECT_NE(std::string(tribGetLastError(nullptr)).find("buff is NULL"), std::string::npos);
    EXPECT_EQ(tribCommRegister(comm, buf.data(), 0, &h), tribInvalidArgument);
    ASSERT_EQ(tribCommRegister(comm, buf.data(), buf.size(), &h), tribSuccess);
    void* h2 = nullptr;
    EXPECT_EQ(tribCommRegister(comm, buf.data() + 100, 10, &h2), tribInvalidArgument);
    EXPECT_NE(std::string(tribGetLastError(nullptr)).find("overlaps"), std::string::npos);
    EXPECT_EQ(tribCommDeregister(comm, h), tribSuccess);
    EXPECT_EQ(tribCommDeregister(comm, h), tribInvalidArgument);
    EXPECT_NE(std::string(tribGetLastError(nullptr)).find("deregistered already"), std::string::npos);
  });
  // Another communicator's handle.
  std::vector<tribComm_t> a(1), b(1);
  ASSERT_EQ(tribCommInitAll(a.data(), 1, nullptr), tribSuccess);
  ASSERT_EQ(tribCommInitAll(b.data(), 1, nullptr), tribSuccess);
  std::vector<char> buf(64);
  void* h = nullptr;
  ASSERT_EQ(tribCommRegister(a[0], buf.data(), buf.size(), &h), tribSuccess);
  EXPECT_EQ(tribCommDeregister(b[0], h), tribInvalidArgument);
  EXPECT_NE(std::string(tribGetLastError(nullptr)).find("not returned by this communicator"),
            std::string::npos);
  EXPECT_EQ(tribCommDeregister(a[0], h), tribSuccess);
  EXPECT_EQ(tribCommDestroy(a[0]), tribSuccess);
  EXPECT_EQ(tribCommDestroy(b[0]), tribSuccess);
}

}  // namespace
}  // namespace trib
