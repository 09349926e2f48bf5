// The verifier proves synchronisation: a rank's exit must causally follow the entry of every rank
// its result depends on (all of them, for a barrier), under the executor's ordering rule, where
// a rank's steps wait only for earlier steps whose memory they conflict with. Every registered
// barrier passes at 1..1,024 ranks; the barrier that shipped before (data-less signals) and a
// half-fixed one fail, naming a rank that could leave early.
#include <gtest/gtest.h>

#include <string>

#include "algo/schedule.hpp"
#include "verify/causal.hpp"
#include "verify/verify.hpp"

namespace trib {
namespace {

using verify::CausalMemory;
using verify::Know;
using verify::RankSet;

constexpr int kMaxRanks = 1024;

Region in(uint64_t off, uint64_t n) { return {Buf::Input, off, n}; }
Region scr(uint64_t off, uint64_t n) { return {Buf::Scratch, off, n}; }
int mod(int64_t x, int n) { return static_cast<int>(((x % n) + n) % n); }
bool always(const CollArgs&) { return true; }
uint64_t none(const CollArgs&, int) { return 0; }
uint64_t cellPerRound(const CollArgs&, int) { return 32; }  // 2^32 ranks' worth of rounds

// The dissemination barrier as it was: zero-length signals, which order nothing, so every
// round's send leaves at once and a rank hears only from r-1, r-2, r-4, ... directly.
Generator<Step> dataLessDissemination(CollArgs a, int rank) {
  for (int64_t d = 1; d < a.nranks; d *= 2) {
    co_yield Step::send(mod(rank + d, a.nranks), in(0, 0));
    co_yield Step::recv(mod(rank - d, a.nranks), scr(0, 0));
  }
}

// Half fixed: round i forwards only the token of round i-1, so what a rank hears is one chain
// of predecessors, not the union of everything it received.
Generator<Step> lastTokenOnly(CollArgs a, int rank) {
  int i = 0;
  for (int64_t d = 1; d < a.nranks; d *= 2, ++i) {
    co_yield Step::send(mod(rank + d, a.nranks), i == 0 ? in(0, 1) : scr(static_cast<uint64_t>(i - 1), 1));
    co_yield Step::recv(mod(rank - d, a.nranks), scr(static_cast<uint64_t>(i), 1));
  }
}

// Everybody signals everybody: data-less, yet every rank hears from every other one directly.
Generator<Step> allToAllSignals(CollArgs a, int rank) {
  for (int k = 1; k < a.nranks; ++k) co_yield Step::send(mod(rank + k, a.nranks), in(0, 0));
  for (int k = 1; k < a.nranks; ++k) co_yield Step::recv(mod(rank - k, a.nranks), scr(0, 0));
}

CollArgs barrierArgs(int n) {
  CollArgs a;
  a.coll = Coll::Barrier;
  a.nranks = n;
  return a;
}

TEST(VerifySync, EveryBarrierSynchronisesAt1To1024Ranks) {
  const auto barriers = algorithmsFor(Coll::Barrier);
  ASSERT_GE(barriers.size(), 2u);  // dissemination and the switch's rendezvous
  for (const AlgoInfo* algo : barriers) {
    int checked = 0;
    for (int n = 1; n <= kMaxRanks; ++n) {
      const CollArgs a = barrierArgs(n);
      if (!algo->supports(a)) continue;
      const Status st = verifySchedule(*algo, a);
      ASSERT_TRUE(st.ok()) << algoName(algo->algo) << " barrier at " << n << " ranks: " << st.message();
      ++checked;
    }
    EXPECT_EQ(checked, kMaxRanks) << algoName(algo->algo);
  }
}

TEST(VerifySync, DataLessDisseminationFailsFromFourRanks) {
  const AlgoInfo broken = {Algo::Direct, Coll::Barrier, always, none, dataLessDissemination};
  for (int n = 1; n <= kMaxRanks; ++n) {
    const Status st = verifySchedule(broken, barrierArgs(n));
    if (n <= 3) {  // r-1 and r-2 are every other rank: direct signals suffice
      EXPECT_TRUE(st.ok()) << n << " ranks: " << st.message();
      continue;
    }
    ASSERT_FALSE(st.ok()) << "the data-less barrier was accepted at " << n << " ranks";
    EXPECT_NE(st.message().find("can finish the barrier before ranks"), std::string::npos) << st.message();
  }
  // At 4 ranks, rank 0 hears from 3 and 2 directly, and nothing carries rank 1's entry to it.
  const Status st = verifySchedule(broken, barrierArgs(4));
  EXPECT_NE(st.message().find("rank 0 can finish the barrier before ranks {1} have entered it"),
            std::string::npos)
      << st.message();
}

TEST(VerifySync, ForwardingOnlyTheLastTokenFails) {
  const AlgoInfo broken = {Algo::Direct, Coll::Barrier, always, cellPerRound, lastTokenOnly};
  for (int n : {2, 3, 4, 5}) EXPECT_TRUE(verifySchedule(broken, barrierArgs(n)).ok()) << n;
  for (int n : {8, 16, 100, 1024}) {
    const Status st = verifySchedule(broken, barrierArgs(n));
    EXPECT_FALSE(st.ok()) << "accepted at " << n << " ranks";
    EXPECT_NE(st.message().find("can finish the barrier before ranks"), std::string::npos) << st.message();
  }
}

TEST(VerifySync, DataLessSignalsFromEveryRankSuffice) {
  const AlgoInfo direct = {Algo::Direct, Coll::Barrier, always, none, allToAllSignals};
  for (int n : {1, 2, 5, 64}) EXPECT_TRUE(verifySchedule(direct, barrierArgs(n)).ok()) << n;
}

// The cell-level rule itself: a read waits for the last writer; a write also for the readers
// since; unrelated cells pass nothing on.
TEST(CausalMemory, InheritsFromConflictingStepsOnly) {
  CausalMemory m;
  m.init(16);
  m.record(0, 4, true, Know{RankSet::single(1), 3});   // cells 0..3 written knowing {1}, sync 3
  m.record(2, 4, false, Know{RankSet::single(2), 5});  // cells 2..5 read knowing {2}, sync 5
  Know k;
  m.inherit(8, 4, true, &k);
  EXPECT_TRUE(k.entries.empty()) << k.entries.toString();
  m.inherit(4, 1, false, &k);  // read of a cell nobody wrote
  EXPECT_TRUE(k.entries.empty()) << k.entries.toString();
  EXPECT_EQ(k.sync, 0u);
  m.inherit(3, 1, false, &k);  // read-after-write
  EXPECT_EQ(k.entries, RankSet::single(1));
  EXPECT_EQ(k.sync, 3u);
  k = Know();
  m.inherit(5, 1, true, &k);  // write-after-read
  EXPECT_EQ(k.entries, RankSet::single(2));
  EXPECT_EQ(k.sync, 5u);
  k = Know();
  m.inherit(0, 16, true, &k);
  EXPECT_EQ(k.entries, RankSet::range(1, 3));
  EXPECT_EQ(k.sync, 5u);
  m.record(0, 16, true, Know{RankSet::single(7), 1});  // a write supersedes what was there
  k = Know();
  m.inherit(3, 2, true, &k);
  EXPECT_EQ(k.entries, RankSet::single(7));
  EXPECT_EQ(k.sync, 1u);
}

}  // namespace
}  // namespace trib
