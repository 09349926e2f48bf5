// What a call tells the planner: its real dtype and op (slices are cut in bytes of that dtype) and
// the kind of its buffers (host, registered, tribMemAlloc's shared memory), which the plan cache
// keeps apart; and the C API's registration calls.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "core/comm.hpp"
#include "tributary/tributary.h"

namespace trib {
namespace {

// n thread ranks that run `body(rank, comm)` together; ring forced so the slices are the planner's.
void withComms(int n, const std::function<void(int, tribComm_t)>& body, const char* algo = "allreduce:ring") {
  tribUniqueId id;
  ASSERT_EQ(tribGetUniqueId(&id), tribSuccess);
  std::vector<tribComm_t> comms(n);
  std::vector<std::thread> t;
  for (int r = 0; r < n; ++r)
    t.emplace_back([&, r] {
      tribConfig_t cfg = TRIB_CONFIG_INITIALIZER;
      cfg.algo = algo;
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

// Whether some cached plan keeps an idle execution a repeat of the last call may rerun as it is.
bool rerunReady(tribComm_t comm) {
  const Communicator* c = comm->impl();
  for (const auto& [key, plan] : c->planCache)
    if (plan.idle && plan.idleCall != 0 && plan.idleCall == c->lastCall.id) return true;
  return false;
}

// A repeat of the same blocking call reruns its plan's idle execution with the last run's buffers
// and options (ops.cpp runInline). Any call that differs in a buffer, count, dtype, op or place
// right after one that was repeated must run with its own: each result lands where that call
// says, and nothing else is written. Calls alternate the window cells (one plan per cell), so a
// plan's idle execution may be two calls old: X, Y, Y reruns the execution X left.
TEST(CallPlanning, RepeatedCallsRerunOnlyTheSameCall) {
  withComms(
      2,
      [&](int r, tribComm_t comm) {
        constexpr float kUntouched = -7.0f;
        std::vector<float> a(64), b(64, kUntouched), c(64, kUntouched), d(64);
        float round = 0;
        // sendbuff[i] = rank + i + round on both ranks: the sum is 1 + 2 (i + round).
        auto fill = [&](float* p, int n) {
          ++round;
          for (int i = 0; i < n; ++i) p[i] = static_cast<float>(r + i) + round;
        };
        auto sum = [&](int i) { return 1.0f + 2.0f * (static_cast<float>(i) + round); };
        auto allReduce = [&](const float* in, float* out, int n, DataType dt = tribFloat32,
                             RedOp op = tribSum) { return tribAllReduce(in, out, n, dt, op, comm, nullptr); };
        // X: a -> b, 2 floats (8 bytes), repeated until it reruns.
        for (int k = 0; k < 4; ++k) {
          fill(a.data(), 2);
          ASSERT_EQ(allReduce(a.data(), b.data(), 2), tribSuccess) << tribGetLastError(nullptr);
          EXPECT_EQ(b[0], sum(0));
          EXPECT_EQ(b[1], sum(1));
        }
        EXPECT_TRUE(rerunReady(comm)) << "rank " << r << ": the repeat did not keep its execution";
        EXPECT_EQ(b[2], kUntouched);

        // Another output right after: c gets the sum, b keeps the last one.
        fill(a.data(), 2);
        const float bBefore = b[0];
        ASSERT_EQ(allReduce(a.data(), c.data(), 2), tribSuccess);
        EXPECT_EQ(c[0], sum(0)) << "rank " << r;
        EXPECT_EQ(b[0], bBefore) << "rank " << r << ": a changed output went to the last call's";
        // ... repeated (its plan's idle execution is X's, two calls old), then X again.
        for (int k = 0; k < 3; ++k) {
          fill(a.data(), 2);
          ASSERT_EQ(allReduce(a.data(), c.data(), 2), tribSuccess);
          EXPECT_EQ(c[1], sum(1)) << "rank " << r << ", repeat " << k;
        }
        fill(a.data(), 2);
        const float cBefore = c[0];
        ASSERT_EQ(allReduce(a.data(), b.data(), 2), tribSuccess);
        EXPECT_EQ(b[0], sum(0)) << "rank " << r;
        EXPECT_EQ(c[0], cBefore) << "rank " << r;

        // Another input: d's values, not a's.
        fill(d.data(), 2);
        for (float& v : a) v = 1000.0f;
        ASSERT_EQ(allReduce(d.data(), b.data(), 2), tribSuccess);
        EXPECT_EQ(b[0], sum(0)) << "rank " << r << ": a changed input read the last call's";

        // A larger count on the same buffers: all 3 elements, and the 4th untouched.
        b.assign(64, kUntouched);
        for (int k = 0; k < 2; ++k) {
          fill(d.data(), 2);
          ASSERT_EQ(allReduce(d.data(), b.data(), 2), tribSuccess);
        }
        fill(d.data(), 3);
        ASSERT_EQ(allReduce(d.data(), b.data(), 3), tribSuccess);
        EXPECT_EQ(b[2], sum(2)) << "rank " << r << ": a changed count ran the last call's";
        EXPECT_EQ(b[3], kUntouched);
        // A smaller one: only the first element is written.
        for (int k = 0; k < 2; ++k) {
          fill(d.data(), 3);
          ASSERT_EQ(allReduce(d.data(), b.data(), 3), tribSuccess);
        }
        b[1] = kUntouched;
        fill(d.data(), 1);
        ASSERT_EQ(allReduce(d.data(), b.data(), 1), tribSuccess);
        EXPECT_EQ(b[0], sum(0));
        EXPECT_EQ(b[1], kUntouched) << "rank " << r << ": a smaller count wrote the last call's";

        // Another dtype over the same bytes: int32 sums of 2 ints (4 bytes each) and of 1 double.
        auto* ai = reinterpret_cast<int32_t*>(d.data());
        auto* bi = reinterpret_cast<int32_t*>(b.data());
        for (int k = 0; k < 2; ++k) {
          fill(d.data(), 2);
          ASSERT_EQ(allReduce(d.data(), b.data(), 2), tribSuccess);
        }
        ai[0] = 10 + r;
        ai[1] = 20 + r;
        ASSERT_EQ(allReduce(d.data(), b.data(), 2, tribInt32), tribSuccess);
        EXPECT_EQ(bi[0], 21) << "rank " << r << ": a changed dtype ran as float32";
        EXPECT_EQ(bi[1], 41);
        ASSERT_EQ(allReduce(d.data(), b.data(), 2, tribInt32), tribSuccess);
        EXPECT_EQ(bi[1], 41);
        auto* ad = reinterpret_cast<double*>(d.data());
        auto* bd = reinterpret_cast<double*>(b.data());
        *ad = 0.25 + r;
        ASSERT_EQ(allReduce(d.data(), b.data(), 1, tribFloat64), tribSuccess);
        EXPECT_EQ(*bd, 1.5) << "rank " << r;

        // Another op: max instead of sum.
        for (int k = 0; k < 2; ++k) {
          fill(d.data(), 2);
          ASSERT_EQ(allReduce(d.data(), b.data(), 2), tribSuccess);
        }
        fill(d.data(), 2);
        ASSERT_EQ(allReduce(d.data(), b.data(), 2, tribFloat32, tribMax), tribSuccess);
        EXPECT_EQ(b[0], 1.0f + round) << "rank " << r << ": a changed op summed";

        // In place with the input's pointer, after the out-of-place repeat.
        for (int k = 0; k < 2; ++k) {
          fill(d.data(), 2);
          ASSERT_EQ(allReduce(d.data(), b.data(), 2), tribSuccess);
        }
        fill(d.data(), 2);
        ASSERT_EQ(allReduce(d.data(), d.data(), 2), tribSuccess);
        EXPECT_EQ(d[1], sum(1)) << "rank " << r;

        // The plan cache emptied between repeats (as when it is full): the repeat plans again, and
        // does not run the freed plans' executions (ASan reads them).
        for (int k = 0; k < 2; ++k) {
          fill(a.data(), 2);
          ASSERT_EQ(allReduce(a.data(), c.data(), 2), tribSuccess);
        }
        comm->impl()->clearPlans();
        for (int k = 0; k < 3; ++k) {
          fill(a.data(), 2);
          ASSERT_EQ(allReduce(a.data(), c.data(), 2), tribSuccess);
          EXPECT_EQ(c[1], sum(1)) << "rank " << r << ", repeat " << k << " after the cache was emptied";
        }
        EXPECT_EQ(comm->impl()->planCache.size(), 2u) << "one plan per window cell";

        // A refused call between repeats (misaligned output): the repeat after it still runs right.
        for (int k = 0; k < 2; ++k) {
          fill(a.data(), 2);
          ASSERT_EQ(allReduce(a.data(), c.data(), 2), tribSuccess);
        }
        EXPECT_EQ(tribAllReduce(a.data(), reinterpret_cast<char*>(c.data()) + 1, 2, tribFloat32, tribSum,
                                comm, nullptr),
                  tribInvalidArgument);
        c.assign(64, kUntouched);
        fill(a.data(), 2);
        ASSERT_EQ(allReduce(a.data(), c.data(), 2), tribSuccess);
        EXPECT_EQ(c[1], sum(1)) << "rank " << r;
        EXPECT_EQ(c[2], kUntouched);
      },
      "allreduce:oneshot");
}

// A repeat on a communicator that was aborted, or broken by a failed call, fails as the first
// call after it does: the kept execution is not run.
TEST(CallPlanning, RepeatedCallsStopOnceTheCommunicatorFails) {
  for (bool abort : {true, false}) {
    SCOPED_TRACE(abort ? "aborted" : "broken by a failed call");
    std::atomic<int> arrived{0};
    withComms(
        2,
        [&](int r, tribComm_t comm) {
          std::vector<float> a(2, 1.0f), b(2);
          for (int k = 0; k < 4; ++k)
            ASSERT_EQ(tribAllReduce(a.data(), b.data(), 2, tribFloat32, tribSum, comm, nullptr), tribSuccess);
          EXPECT_EQ(b[0], 2.0f);
          // Both ranks are done with the calls before either fails.
          for (arrived.fetch_add(1); arrived.load() < 2;) std::this_thread::yield();
          if (abort) {
            ASSERT_EQ(tribCommAbort(comm), tribSuccess);
          } else {
            // The same call once more, whose peer never comes: rank 1 makes it, times out, and the
            // communicator breaks.
            if (r == 1) {
              comm->impl()->config.timeout = std::chrono::milliseconds(200);
              EXPECT_NE(tribAllReduce(a.data(), b.data(), 2, tribFloat32, tribSum, comm, nullptr),
                        tribSuccess);
            } else {
              ASSERT_EQ(tribCommAbort(comm), tribSuccess);  // rank 0 leaves
            }
          }
          b.assign(2, -1.0f);
          for (int k = 0; k < 2; ++k) {
            EXPECT_NE(tribAllReduce(a.data(), b.data(), 2, tribFloat32, tribSum, comm, nullptr), tribSuccess)
                << "rank " << r << ", call " << k;
            EXPECT_EQ(b[0], -1.0f) << "rank " << r << ": a failed communicator ran the kept execution";
          }
        },
        "allreduce:oneshot");
  }
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
