// tribCommInitRankScalable: the rendezvous spread over several root stores (docs/BOOTSTRAP.md).
// Thread ranks and forked processes get working communicators (and splits of them), one id is the
// plain init, and each bad input gets its own error within the timeout.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/unique_id.hpp"
#include "fork_util.hpp"
#include "tributary/tributary.h"
#include "tributary/tributary.hpp"

namespace {

std::string lastError() { return tribGetLastError(nullptr); }

std::vector<tribUniqueId> makeIds(int k) {
  std::vector<tribUniqueId> ids(k);
  for (auto& id : ids) EXPECT_EQ(tribGetUniqueId(&id), tribSuccess);
  return ids;
}

// Sum all-reduce of rank + 1 over comm; true when every element is right.
bool allReduceWorks(tribComm_t comm, int n) {
  std::vector<int32_t> v(1000);
  int rank = -1;
  if (tribCommUserRank(comm, &rank) != tribSuccess) return false;
  for (size_t i = 0; i < v.size(); ++i) v[i] = (rank + 1) * static_cast<int32_t>(i);
  if (tribAllReduce(v.data(), v.data(), v.size(), tribInt32, tribSum, comm, nullptr) != tribSuccess)
    return false;
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] != n * (n + 1) / 2 * static_cast<int32_t>(i)) return false;
  return true;
}

TEST(ScalableInit, ThreadRanksOverThreeStoresAllReduceAndSplit) {
  const int n = 7;  // groups of 3, 2 and 2 ranks
  const std::vector<tribUniqueId> ids = makeIds(3);
  std::vector<std::string> failures(n);
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; ++r)
    ranks.emplace_back([&, r] {
      tribConfig_t cfg = TRIB_CONFIG_INITIALIZER;
      cfg.timeoutMs = 60000;
      tribComm_t comm = nullptr;
      if (tribCommInitRankScalable(&comm, n, r, 3, ids.data(), &cfg) != tribSuccess) {
        failures[r] = "init: " + lastError();
        return;
      }
      int size = 0;
      if (tribCommCount(comm, &size) != tribSuccess || size != n) failures[r] = "size";
      if (failures[r].empty() && !allReduceWorks(comm, n)) failures[r] = "all-reduce: " + lastError();
      // A split meets over the parent's stores: its ranks span all three.
      tribComm_t half = nullptr;
      if (failures[r].empty() && tribCommSplit(comm, r % 2, r, &half, nullptr) != tribSuccess)
        failures[r] = "split: " + lastError();
      if (failures[r].empty() && !allReduceWorks(half, r % 2 ? n / 2 : n - n / 2))
        failures[r] = "split all-reduce: " + lastError();
      if (half) tribCommDestroy(half);
      if (tribCommDestroy(comm) != tribSuccess && failures[r].empty())
        failures[r] = "destroy: " + lastError();
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < n; ++r) EXPECT_EQ(failures[r], "") << "rank " << r;
}

TEST(ScalableInit, NonBlockingAndTheCppWrapper) {
  const int n = 2;
  const std::vector<tribUniqueId> ids = makeIds(2);
  std::atomic<int> failures{0};
  std::thread other([&] {  // rank 1 through the C++ API
    try {
      tributary::Communicator c = tributary::Communicator::initRankScalable(n, 1, ids);
      if (!allReduceWorks(c.get(), n)) ++failures;
    } catch (const std::exception& e) {
      ADD_FAILURE() << e.what();
      ++failures;
    }
  });
  tribConfig_t cfg = TRIB_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  tribComm_t comm = nullptr;
  ASSERT_EQ(tribCommInitRankScalable(&comm, n, 0, 2, ids.data(), &cfg), tribInProgress) << lastError();
  tribResult_t state = tribInProgress;
  for (int i = 0; i < 60000 && state == tribInProgress; ++i) {
    ASSERT_EQ(tribCommGetAsyncError(comm, &state), tribSuccess);
    if (state == tribInProgress) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(state, tribSuccess);
  EXPECT_TRUE(allReduceWorks(comm, n)) << lastError();
  other.join();
  EXPECT_EQ(tribCommDestroy(comm), tribSuccess);
  EXPECT_EQ(failures.load(), 0);
}

// Starts a non-blocking join of rank 0 of 2 over `ids` (60 s timeout), aborts it 100 ms later and
// checks that the join then ends with tribAborted within 5 s (its timeout would take 60).
void abortTheJoinAndExpectItEnds(const std::vector<tribUniqueId>& ids, const char* ranOn) {
  tribConfig_t cfg = TRIB_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  cfg.timeoutMs = 60000;
  tribComm_t comm = nullptr;
  ASSERT_EQ(tribCommInitRankScalable(&comm, 2, 0, static_cast<int>(ids.size()), ids.data(), &cfg),
            tribInProgress)
      << lastError();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the join waits or retries by now
  tribResult_t state = tribInProgress;
  ASSERT_EQ(tribCommGetAsyncError(comm, &state), tribSuccess);
  EXPECT_EQ(state, tribInProgress);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(tribCommAbort(comm), tribSuccess);
  while (state == tribInProgress && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60)) {
    ASSERT_EQ(tribCommGetAsyncError(comm, &state), tribSuccess);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(state, tribAborted);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5)) << ranOn;
  EXPECT_EQ(tribCommDestroy(comm), tribSuccess);
}

// An abort while a non-blocking join over two stores waits for a rank that never comes ends the
// join (its stores' waits, bootstrap/cancellable_store.hpp) well before its 60 s timeout.
TEST(ScalableInit, AbortEndsANonBlockingJoin) {
  abortTheJoinAndExpectItEnds(makeIds(2), "the join ran on after the abort");
}

// An abort while a non-blocking join still tries to reach its store (nothing listens at the id's
// address: its server is gone) ends the connect's retries, which otherwise run to the 60 s
// timeout; over one id (the plain init's connect) and over two (the scalable init's).
TEST(ScalableInit, AbortEndsAJoinThatCannotReachItsStore) {
  for (int nIds : {1, 2}) {
    SCOPED_TRACE(nIds);
    std::vector<tribUniqueId> ids(nIds);
    for (auto& id : ids) {
      trib::StoreServerHandle server;
      ASSERT_TRUE(trib::makeUniqueId(&id, &server, "127.0.0.1:0").ok());
    }  // each server stops here: its port refuses connections
    abortTheJoinAndExpectItEnds(ids, "the join went on connecting after the abort");
  }
}

TEST(ScalableInit, OneIdIsThePlainInit) {
  // Ranks joining with tribCommInitRankScalable(nIds = 1) and with tribCommInitRank meet in one
  // communicator: both are the same rendezvous.
  const int n = 3;
  tribUniqueId id;
  ASSERT_EQ(tribGetUniqueId(&id), tribSuccess);
  std::vector<std::string> failures(n);
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; ++r)
    ranks.emplace_back([&, r] {
      tribComm_t comm = nullptr;
      const tribResult_t rc =
          r == 1 ? tribCommInitRank(&comm, n, id, r) : tribCommInitRankScalable(&comm, n, r, 1, &id, nullptr);
      if (rc != tribSuccess) failures[r] = "init: " + lastError();
      if (failures[r].empty() && !allReduceWorks(comm, n)) failures[r] = "all-reduce: " + lastError();
      if (comm) tribCommDestroy(comm);
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < n; ++r) EXPECT_EQ(failures[r], "") << "rank " << r;
}

TEST(ScalableInit, ForkedProcessesOverTwoStores) {
  // The ids are made before the fork: the children join as clients of this process's stores, as
  // ranks on other hosts would. This process is rank 0 (store 0); ranks 2 and 3 use store 1.
  const int n = 4, timeoutSec = 60;
  const std::vector<tribUniqueId> ids = makeIds(2);
  auto rankMain = [&](int rank) {
    tribConfig_t cfg = TRIB_CONFIG_INITIALIZER;
    cfg.timeoutMs = 50000;
    tribComm_t comm = nullptr;
    if (tribCommInitRankScalable(&comm, n, rank, 2, ids.data(), &cfg) != tribSuccess) {
      std::fprintf(stderr, "rank %d: init: %s\n", rank, lastError().c_str());
      return 2;
    }
    CHILD_CHECK(allReduceWorks(comm, n), 3);
    CHILD_CHECK(tribCommDestroy(comm) == tribSuccess, 4);
    return 0;
  };
  auto pids = trib::testing::forkChildren(n - 1, timeoutSec, [&](int i) { return rankMain(i + 1); });
  EXPECT_EQ(rankMain(0), 0);
  for (const auto& c : trib::testing::waitChildren(pids, timeoutSec)) EXPECT_EQ(c.code, 0) << "pid " << c.pid;
}

TEST(ScalableInit, EachStoreServedByItsFirstRanksProcess) {
  // As NCCL programs do it: the first rank of each store makes that store's id (its process then
  // serves it) and shares it with everyone, here through shared memory. Ranks 0 and 2 serve; rank
  // 0 leads store 0 and also writes to store 1, so rank 2 must keep store 1 up until rank 0 has
  // left it, and the other way round.
  const int n = 4, k = 2, timeoutSec = 60;
#if defined(__SANITIZE_THREAD__)
  // TSan cannot start threads (the children's store servers) in a fork()ed child of a threaded
  // process; CTest runs each case in a fresh process, where the only thread is this one.
  if (std::distance(std::filesystem::directory_iterator("/proc/self/task"), {}) > 1)
    GTEST_SKIP() << "under ThreadSanitizer this case needs a process of its own (as CTest runs it)";
#endif
  struct Shared {
    std::atomic<int> ready[2];
    tribUniqueId ids[2];
  };
  void* mem = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto* shared = new (mem) Shared{};
  auto rankMain = [&](int rank) {
    const int root = rank == 0 ? 0 : rank == 2 ? 1 : -1;  // the store this rank serves, if any
    if (root >= 0) {
      CHILD_CHECK(tribGetUniqueId(&shared->ids[root]) == tribSuccess, 1);
      shared->ready[root].store(1, std::memory_order_release);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (int s = 0; s < k; ++s)
      while (!shared->ready[s].load(std::memory_order_acquire)) {
        CHILD_CHECK(std::chrono::steady_clock::now() < deadline, 2);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    tribConfig_t cfg = TRIB_CONFIG_INITIALIZER;
    cfg.timeoutMs = 50000;
    tribComm_t comm = nullptr;
    if (tribCommInitRankScalable(&comm, n, rank, k, shared->ids, &cfg) != tribSuccess) {
      std::fprintf(stderr, "rank %d: init: %s\n", rank, lastError().c_str());
      return 3;
    }
    CHILD_CHECK(allReduceWorks(comm, n), 4);
    CHILD_CHECK(tribCommDestroy(comm) == tribSuccess, 5);
    return 0;
  };
  auto pids = trib::testing::forkChildren(n, timeoutSec, rankMain);
  for (const auto& c : trib::testing::waitChildren(pids, timeoutSec)) EXPECT_EQ(c.code, 0) << "pid " << c.pid;
  munmap(mem, sizeof(Shared));
}

TEST(ScalableInit, BadArgumentsNameWhatIsWrong) {
  const std::vector<tribUniqueId> ids = makeIds(2);
  tribComm_t c = nullptr;
  auto expectError = [&](tribResult_t got, tribResult_t want, const std::string& text) {
    EXPECT_EQ(got, want) << lastError();
    EXPECT_NE(lastError().find(text), std::string::npos) << lastError();
    EXPECT_EQ(c, nullptr);
  };
  expectError(tribCommInitRankScalable(&c, 2, 0, 0, ids.data(), nullptr), tribInvalidArgument,
              "nIds 0 must be in 1..nranks (2)");
  expectError(tribCommInitRankScalable(&c, 2, 0, 3, ids.data(), nullptr), tribInvalidArgument,
              "nIds 3 must be in 1..nranks (2)");
  expectError(tribCommInitRankScalable(&c, 2, 0, 2, nullptr, nullptr), tribInvalidArgument, "ids is NULL");
  expectError(tribCommInitRankScalable(&c, 2, 2, 2, ids.data(), nullptr), tribInvalidArgument,
              "rank 2 is out of range 0..1");
  EXPECT_EQ(tribCommInitRankScalable(nullptr, 2, 0, 2, ids.data(), nullptr), tribInvalidArgument);
  std::vector<tribUniqueId> bad = ids;
  std::memset(&bad[1], 0x5a, sizeof bad[1]);
  expectError(tribCommInitRankScalable(&c, 2, 0, 2, bad.data(), nullptr), tribInvalidArgument, "ids[1]: ");
  bad = {ids[0], ids[0]};
  expectError(tribCommInitRankScalable(&c, 2, 0, 2, bad.data(), nullptr), tribInvalidArgument,
              "ids[0] and ids[1] are the same unique id");
  tribConfig_t badCfg;
  std::memset(&badCfg, 0, sizeof badCfg);
  expectError(tribCommInitRankScalable(&c, 2, 0, 2, ids.data(), &badCfg), tribInvalidArgument,
              "TRIB_CONFIG_INITIALIZER");
}

TEST(ScalableInit, UnreachableStoreIsNamedWithinTheTimeout) {
  std::vector<tribUniqueId> ids = makeIds(1);
  {
    tribUniqueId dead;
    trib::StoreServerHandle server;  // stopped before anyone joins: its port refuses
    ASSERT_TRUE(trib::makeUniqueId(&dead, &server).ok());
    ids.push_back(dead);
  }
  tribConfig_t cfg = TRIB_CONFIG_INITIALIZER;
  cfg.timeoutMs = 300;
  tribComm_t c = nullptr;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_NE(tribCommInitRankScalable(&c, 2, 1, 2, ids.data(), &cfg), tribSuccess);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  EXPECT_NE(lastError().find("cannot reach ids[1] (store at "), std::string::npos) << lastError();
  EXPECT_EQ(c, nullptr);
}

TEST(ScalableInit, RanksGivenOtherIdsFailWithinTheTimeout) {
  // Rank 0 was given (a, b), rank 1 (a, c): rank 1 leads store c's group and publishes to a and c,
  // so rank 0 reads its join from a and names it; rank 1 never sees a group from store b's side
  // and times out naming the store it waited for.
  const std::vector<tribUniqueId> ids = makeIds(3);
  const tribUniqueId mine[2][2] = {{ids[0], ids[1]}, {ids[0], ids[2]}};
  tribResult_t rc[2];
  std::string msg[2];
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      tribConfig_t cfg = TRIB_CONFIG_INITIALIZER;
      cfg.timeoutMs = 1500;
      tribComm_t comm = nullptr;
      rc[r] = tribCommInitRankScalable(&comm, 2, r, 2, mine[r], &cfg);
      msg[r] = lastError();
      if (comm) tribCommDestroy(comm);
    });
  for (auto& t : ranks) t.join();
  EXPECT_EQ(rc[0], tribInvalidUsage) << msg[0];
  EXPECT_NE(msg[0].find("rank 1 nranks=2 and 2 ids"), std::string::npos) << msg[0];
  EXPECT_NE(msg[0].find("the same ids in the same order"), std::string::npos) << msg[0];
  EXPECT_EQ(rc[1], tribTimeout) << msg[1];
  EXPECT_NE(msg[1].find("missing: ids[0] (store at "), std::string::npos) << msg[1];
}

}  // namespace
