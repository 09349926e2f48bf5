// tribBarrier / tribIbarrier synchronise: no rank leaves barrier i before every rank has entered
// it. Written against the public C header only, as an independent client tests it: each rank
// stores the iteration it has reached in a shared slot, enters the barrier, and on leaving checks
// that every slot has reached that iteration. Random short sleeps make ranks arrive apart.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fork_util.hpp"
#include "tributary/tributary.h"

namespace {

using Clock = std::chrono::steady_clock;
// Every rank runs all of them (a rank that stopped early would leave the others waiting in the
// barrier); each barrier is bounded by the communicator's timeout.
constexpr int kIterations = 300;

// What the ranks share: the iteration each one has entered, and the first violation seen.
struct Board {
  std::atomic<int> entered[32];
  std::atomic<int> violations;
  std::atomic<int> firstRank, firstIter, firstPeer, firstPeerIter;
};

// One rank's loop; returns 0, or an exit code naming what failed.
int barrierLoop(tribComm_t comm, int rank, int nranks, Board* board, bool nonBlocking) {
  std::mt19937 rng(static_cast<unsigned>(rank * 7919 + 17));
  for (int it = 1; it <= kIterations; ++it) {
    if (rng() % 3 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 300));
    board->entered[rank].store(it, std::memory_order_release);
    if (nonBlocking) {
      tribRequest_t req = nullptr;
      if (tribIbarrier(comm, &req) != tribSuccess) return 2;
      if (tribWait(&req, TRIB_TIMEOUT_DEFAULT) != tribSuccess) return 3;
    } else if (tribBarrier(comm, nullptr) != tribSuccess) {
      std::fprintf(stderr, "rank %d: tribBarrier failed: %s\n", rank, tribGetLastError(comm));
      return 4;
    }
    for (int q = 0; q < nranks; ++q) {
      const int seen = board->entered[q].load(std::memory_order_acquire);
      if (seen < it && board->violations.fetch_add(1) == 0) {
        board->firstRank = rank;
        board->firstIter = it;
        board->firstPeer = q;
        board->firstPeerIter = seen;
      }
    }
  }
  return 0;
}

std::string describe(const Board& b) {
  return "rank " + std::to_string(b.firstRank.load()) + " left barrier " +
         std::to_string(b.firstIter.load()) + " while rank " + std::to_string(b.firstPeer.load()) +
         " was at " + std::to_string(b.firstPeerIter.load());
}

class ThreadBarrier : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(ThreadBarrier, NoRankLeavesBeforeEveryRankEntered) {
  const auto [n, nonBlocking] = GetParam();
  std::vector<tribComm_t> comms(n);
  ASSERT_EQ(tribCommInitAll(comms.data(), n, nullptr), tribSuccess) << tribGetLastError(nullptr);
  Board board{};
  std::vector<int> rc(n, -1);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] { rc[r] = barrierLoop(comms[r], r, n, &board, nonBlocking); });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) EXPECT_EQ(rc[r], 0) << "rank " << r;
  EXPECT_EQ(board.violations.load(), 0) << describe(board);
  for (tribComm_t c : comms) EXPECT_EQ(tribCommDestroy(c), tribSuccess);
}

INSTANTIATE_TEST_SUITE_P(Ranks, ThreadBarrier,
                         ::testing::Combine(::testing::Values(2, 3, 6, 8, 9, 16), ::testing::Bool()));

// Processes: rank 0 makes the unique id, then forks the others (the client's pattern), and every
// rank joins with tribCommInitRank; the board is a shared anonymous mapping. Over shared memory
// and over UCX (the schedule is the same; the client saw both fail).
class ProcessBarrier : public ::testing::TestWithParam<std::tuple<const char*, int>> {};

TEST_P(ProcessBarrier, NoRankLeavesBeforeEveryRankEntered) {
  const auto [transport, n] = GetParam();
#ifndef TRIB_HAVE_UCX
  if (std::string(transport) == "ucx") GTEST_SKIP() << "needs the UCX transport (build with libucx-dev)";
#endif
  void* mem = mmap(nullptr, sizeof(Board), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  Board* board = new (mem) Board{};
  tribUniqueId id;
  ASSERT_EQ(tribGetUniqueId(&id), tribSuccess);
  const int timeoutSec = 120;
  auto results = trib::testing::runChildren(n, timeoutSec, [&](int rank) {
    tribConfig_t cfg = TRIB_CONFIG_INITIALIZER;
    cfg.transport = transport;
    tribComm_t comm = nullptr;
    if (tribCommInitRankConfig(&comm, n, id, rank, &cfg) != tribSuccess) {
      std::fprintf(stderr, "rank %d: init failed: %s\n", rank, tribGetLastError(nullptr));
      return 10;
    }
    int rc = barrierLoop(comm, rank, n, board, rank % 2 == 1);  // blocking and non-blocking mixed
    if (tribCommDestroy(comm) != tribSuccess) rc = rc ? rc : 11;
    return rc;
  });
  for (auto& r : results) EXPECT_EQ(r.code, 0) << "child " << r.pid;
  EXPECT_EQ(board->violations.load(), 0) << describe(*board);
  munmap(mem, sizeof(Board));
}

INSTANTIATE_TEST_SUITE_P(Ranks, ProcessBarrier,
                         ::testing::Combine(::testing::Values("shm", "ucx"), ::testing::Values(2, 4, 6)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param)) + "_" +
                                  std::to_string(std::get<1>(info.param));
                         });

}  // namespace
