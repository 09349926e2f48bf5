// The verifier covers every algorithm the registry holds (so every one the planner can choose), at
// rank counts up to 4,608 where the algorithm applies: peer-memory schedules within one memory
// domain (a host, an NVLink domain of 72), hierarchical ones with 72-rank domains, the rest flat.
// Heavy for sanitizers: label nosan (tests/CMakeLists.txt).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "algo/schedule.hpp"
#include "verify/verify.hpp"
#include "verify_util.hpp"

namespace trib {
namespace {

using testing::windowArgs;
const AlgoInfo& windowAlgo(Algo algo) { return testing::allReduceAlgo(algo); }

TEST(VerifyWindowsScale, OneShotAndTwoShotAt1To64Ranks) {
  int verified = 0;
  for (Algo algo : {Algo::OneShot, Algo::TwoShot}) {
    const AlgoInfo& info = windowAlgo(algo);
    for (int n = 1; n <= 64; ++n) {
      // Counts: one element, not a multiple of the slice grain, several two-shot chunks (an odd
      // number of them with the 64-cell window), a full one-shot cell.
      for (uint64_t count : {1ull, 37ull, 100ull, 320ull}) {
        for (uint64_t windowElems : {128ull, 640ull}) {
          for (int cell : {0, 1}) {
            if (n > 16 && cell != n % 2) continue;  // both first cells up to 16 ranks, then one
            for (bool inPlace : {false, true}) {
              const CollArgs a = windowArgs(n, count, windowElems, cell, inPlace);
              if (!info.supports(a)) continue;  // one-shot: count beyond a cell
              VerifyStats st;
              const Status s = verifySchedule(info, a, &st);
              ASSERT_TRUE(s.ok()) << algoName(algo) << " n " << n << " count " << count << " window "
                                  << windowElems << " cell " << cell << (inPlace ? " in place" : "") << ": "
                                  << s.message();
              if (n > 1) {
                EXPECT_GT(st.windowSteps, 0u);
                EXPECT_GT(st.signals, 0u);
                EXPECT_EQ(st.messages, 0u);
              }
              ++verified;
            }
          }
        }
      }
    }
  }
  // One-shot takes the counts within a cell (64 or 320): all 4 with the large window, 2 with the
  // small; two-shot takes all 8. Both first cells at 16 ranks, one beyond.
  const int shapes = 16 * 2 + 48;
  EXPECT_EQ(verified, shapes * 2 * (4 + 2) + shapes * 2 * 8);
}

TEST(VerifyWindowsScale, OneShotAndTwoShotWithinADomainUpTo576Ranks) {
  for (int n : {72, 144, 576}) {
    for (bool inPlace : {false, true}) {
      if (inPlace && n == 576) continue;  // in place is proven at the smaller sizes
      // Two-shot: count not a multiple of the slice grain (16) times n, in two chunks at 72 ranks.
      const uint64_t count = 2 * static_cast<uint64_t>(n) + 5;
      VerifyStats st;
      Status s = verifySchedule(windowAlgo(Algo::OneShot), windowArgs(n, count, 2 * count, 1, inPlace), &st);
      ASSERT_TRUE(s.ok()) << "oneshot n " << n << ": " << s.message();
      EXPECT_EQ(st.signals, static_cast<uint64_t>(n) * (n - 1));
      const uint64_t w = n == 72 ? count + 1 : 2 * count;  // 72 ranks: two chunks
      s = verifySchedule(windowAlgo(Algo::TwoShot), windowArgs(n, count, w, 0, inPlace), &st);
      ASSERT_TRUE(s.ok()) << "twoshot n " << n << ": " << s.message();
      // Two per chunk, and out of place one more exchange at the end.
      EXPECT_EQ(st.signals, static_cast<uint64_t>(n) * (n - 1) * (2 * (n == 72 ? 2 : 1) + (inPlace ? 0 : 1)));
    }
  }
}

// The largest rank count at which `algo` is proven here. Window schedules apply within one memory
// domain (576: eight NVL72 domains' worth is already past any one of them). All-gather, reduce-
// scatter and all-to-all hold n x count cells per rank, each block from a different rank, so
// 4,608 ranks mean 21M+ runs and gigabytes: they stop at 576 here (trib-verify runs the 4,608 case).
int maxRanks(const AlgoInfo& info) {
  if (info.algo == Algo::AllgatherReduce) return 256;  // it refuses more (n-1 messages per rank)
  if (needsWindows(info.algo)) return 576;
  if (info.coll == Coll::AllGather || info.coll == Coll::ReduceScatter || info.coll == Coll::AlltoAll)
    return 576;
  return 4608;
}

TEST(VerifyCoverage, EveryRegisteredAlgorithmUpTo4608Ranks) {
  std::vector<int> ladder;
  for (int n = 1; n <= 16; ++n) ladder.push_back(n);
  for (int n : {64, 72, 256, 576, 4608}) ladder.push_back(n);
  int checked = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int c = 0; c < kNumColls; ++c) {
    const Coll coll = static_cast<Coll>(c);
    for (const AlgoInfo* info : algorithmsFor(coll)) {
      int largest = 0;
      for (int n : ladder) {
        if (n > maxRanks(*info) || (n == 256 && maxRanks(*info) != 256)) continue;
        CollArgs a;
        a.coll = coll;
        a.nranks = n;
        a.root = n - 1;
        // An odd count that is not a multiple of n: uneven blocks and slices (from 576 ranks a small
        // one, mostly empty blocks, since the state is n x count: the large ranks prove the scale).
        a.count = coll == Coll::Barrier ? 0 : n < 576 ? static_cast<uint64_t>(n) + 3 : 13;
        a.chunkElems = 64;
        if (needsWindows(info->algo)) a.windowElems = 2 * a.count;  // one-shot fits a cell
        if (info->algo == Algo::Hierarchical || info->algo == Algo::HierSwitch)
          a.ranksPerDomain = n % 72 == 0 && n > 72 ? 72 : (n % 2 == 0 && n > 2 ? n / 2 : 0);
        if (!info->supports(a)) continue;
        for (bool inPlace : {false, true}) {
          if (inPlace && !supportsInPlace(coll)) continue;
          // The largest sizes once, out of place: in place is covered at every smaller size.
          if (inPlace && n >= 576) continue;
          a.inPlace = inPlace;
          const Status st = verifySchedule(*info, a);
          ASSERT_TRUE(st.ok()) << collName(coll) << " " << algoName(info->algo) << " ranks " << n
                               << " ranks/domain " << a.ranksPerDomain << (inPlace ? " in place" : "") << ": "
                               << st.message();
        }
        largest = n;
        ++checked;
      }
      // No algorithm is silently left out: each is proven at its largest applicable size.
      EXPECT_EQ(largest, maxRanks(*info)) << collName(coll) << " " << algoName(info->algo);
    }
  }
  std::printf("verified %d (algorithm, rank count) pairs in %.1f s\n", checked,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

}  // namespace
}  // namespace trib
