// The verifier against every registered schedule (sweep of rank counts, sizes, roots, slices,
// in-place) and against hand-broken schedules it must reject with the right message.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "algo/algorithms.hpp"
#include "algo/schedule.hpp"
#include "verify/rankset.hpp"
#include "verify/verify.hpp"

namespace trib {
namespace {

using verify::RankSet;

// ---- RankSet -------------------------------------------------------------------------------

TEST(RankSet, UnionIntersectMinus) {
  RankSet a = RankSet::range(0, 4), b = RankSet::range(4, 6), c = RankSet::range(8, 10);
  RankSet u, overlap;
  ASSERT_TRUE(RankSet::disjointUnion(a, b, &u, &overlap));
  EXPECT_TRUE(u.isRange(0, 6));
  ASSERT_TRUE(RankSet::disjointUnion(u, c, &u, &overlap));
  EXPECT_EQ(u.intervals(), 2u);
  EXPECT_EQ(u.size(), 8u);
  EXPECT_EQ(u.toString(), "{0-5, 8-9}");
  // Three intervals spill to the heap; copies stay independent.
  RankSet d;
  ASSERT_TRUE(RankSet::disjointUnion(u, RankSet::single(12), &d, &overlap));
  RankSet e = d;
  EXPECT_EQ(e, d);
  EXPECT_EQ(e.toString(), "{0-5, 8-9, 12}");
  EXPECT_FALSE(RankSet::disjointUnion(d, RankSet::range(5, 9), &u, &overlap));
  EXPECT_EQ(overlap.toString(), "{5, 8}");
  EXPECT_EQ(RankSet::minus(RankSet::range(0, 13), d).toString(), "{6-7, 10-11}");
  EXPECT_EQ(RankSet::unite(d, RankSet::range(5, 13)).toString(), "{0-12}");
  EXPECT_EQ(RankSet::intersect(d, RankSet::range(9, 20)).toString(), "{9, 12}");
}

// ---- Buffer sizes --------------------------------------------------------------------------

TEST(ScheduleSizes, CountsAndInPlaceOffsets) {
  CollArgs a;
  a.nranks = 4;
  a.count = 10;
  a.root = 2;
  a.coll = Coll::AllGather;
  EXPECT_EQ(inputCount(a, 1), 10u);
  EXPECT_EQ(outputCount(a, 1), 40u);
  EXPECT_EQ(inPlaceInputOffset(a, 3), 30);
  a.coll = Coll::ReduceScatter;
  EXPECT_EQ(inputCount(a, 1), 40u);
  EXPECT_EQ(outputCount(a, 1), 10u);
  EXPECT_EQ(inPlaceInputOffset(a, 3), -30);
  a.coll = Coll::Reduce;
  EXPECT_EQ(outputCount(a, 1), 0u);
  EXPECT_EQ(outputCount(a, 2), 10u);
  a.coll = Coll::Broadcast;
  EXPECT_EQ(inputCount(a, 1), 0u);
  EXPECT_EQ(inputCount(a, 2), 10u);
  a.coll = Coll::Gather;
  EXPECT_EQ(outputCount(a, 2), 40u);
  EXPECT_EQ(inPlaceInputOffset(a, 2), 20);
  a.coll = Coll::Scatter;
  EXPECT_EQ(inputCount(a, 2), 40u);
  EXPECT_EQ(inPlaceInputOffset(a, 2), -20);
  EXPECT_FALSE(supportsInPlace(Coll::AlltoAll));
  EXPECT_TRUE(supportsInPlace(Coll::AllReduce));
}

TEST(Registry, EveryCollectiveHasAnAlgorithm) {
  for (int c = 0; c < kNumColls; ++c) {
    const Coll coll = static_cast<Coll>(c);
    auto algos = algorithmsFor(coll);
    ASSERT_FALSE(algos.empty()) << collName(coll);
    for (const AlgoInfo* info : algos) {
      EXPECT_EQ(info->coll, coll);
      EXPECT_EQ(findAlgorithm(coll, info->algo), info);
    }
  }
  EXPECT_EQ(findAlgorithm(Coll::AlltoAll, Algo::Tree), nullptr);
  EXPECT_EQ(algorithmsFor(Coll::AllReduce).front()->algo, Algo::Ring);  // the default
}

TEST(Registry, MaterializeMatchesGenerator) {
  CollArgs a;
  a.nranks = 5;
  a.count = 23;
  a.chunkElems = 2;
  const AlgoInfo* ring = findAlgorithm(Coll::AllReduce, Algo::Ring);
  ASSERT_NE(ring, nullptr);
  std::vector<Step> steps = materialize(*ring, a, 3);
  auto gen = ring->generate(a, 3);
  size_t i = 0;
  while (gen.next()) {
    ASSERT_LT(i, steps.size());
    EXPECT_EQ(describeStep(gen.value()), describeStep(steps[i]));
    ++i;
  }
  EXPECT_EQ(i, steps.size());
  // Blocks of 5,5,5,4,4 elements in slices of 2 (3 or 2 slices). Rank 3 sends blocks 3,2,1,0
  // and folds in 2,1,0,4 (reduce-scatter), then sends 4,3,2,1 and receives 3,2,1,0 (all-gather).
  size_t sends = 0, folds = 0, recvs = 0;
  for (const Step& s : steps) {
    sends += s.kind == StepKind::Send;
    folds += s.kind == StepKind::RecvReduce;
    recvs += s.kind == StepKind::Recv;
    if (s.isComm()) {
      EXPECT_EQ(s.peer, s.kind == StepKind::Send ? 4 : 2) << describeStep(s);
    }
  }
  EXPECT_EQ(sends, 11u + 10u);
  EXPECT_EQ(folds, 11u);
  EXPECT_EQ(recvs, 11u);
  EXPECT_EQ(steps.size(), 43u);
}

// rhd's folded-away rank sends its input in the order its partner uses it: first the half the
// partner's first halving step sends on, with 4+ inner ranks and a list that fits the executor's
// window; else (3 ranks, or a list past the window) the half the partner keeps.
TEST(Registry, RhdFoldOrderFollowsThePartnersFirstStep) {
  const AlgoInfo* rhd = findAlgorithm(Coll::AllReduce, Algo::Rhd);
  ASSERT_NE(rhd, nullptr);
  EXPECT_TRUE(algo::rhdFoldSendsFirst(4, 85, 1));
  EXPECT_FALSE(algo::rhdFoldSendsFirst(4, 86, 1));  // 86 slices: 6 x 86 steps pass the 512-step window
  EXPECT_FALSE(algo::rhdFoldSendsFirst(2, 1, 1));
  struct Case {
    int n;
    uint64_t chunk;
    uint64_t firstOffset;  // of rank 0's first send (to rank 1, its partner: inner rank 0, lower)
  };
  // 1,000 elements in p = 4 blocks of 250 (2 blocks for n = 3: 500 each).
  for (const Case& c : {Case{5, 100, 500}, Case{7, 100, 500}, Case{5, 1, 0}, Case{3, 100, 0}}) {
    CollArgs a;
    a.nranks = c.n;
    a.count = 1000;
    a.chunkElems = c.chunk;
    const std::vector<Step> folded = materialize(*rhd, a, 0);
    ASSERT_FALSE(folded.empty());
    EXPECT_EQ(folded[0].kind, StepKind::Send);
    EXPECT_EQ(folded[0].peer, 1);
    EXPECT_EQ(folded[0].src.offset, c.firstOffset) << c.n << " ranks, chunk " << c.chunk;
    // The partner takes the fold's first half whole, then the second half slice by slice inside
    // its first halving step, each slice just before the step's slice that uses it.
    const std::vector<Step> partner = materialize(*rhd, a, 1);
    ASSERT_FALSE(partner.empty());
    EXPECT_EQ(partner[0].kind, StepKind::RecvReduce);
    EXPECT_EQ(partner[0].dst.offset, c.firstOffset);
    const uint64_t half = 500, firstHalfSlices = (half + c.chunk - 1) / c.chunk;
    ASSERT_GT(partner.size(), firstHalfSlices + 1);
    const Step& next = partner[firstHalfSlices];
    EXPECT_EQ(next.kind, StepKind::RecvReduce);
    EXPECT_EQ(next.peer, 0) << describeStep(next);
    EXPECT_EQ(next.dst.offset, half - c.firstOffset);
    EXPECT_EQ(partner[firstHalfSlices + 1].kind, StepKind::Send)
        << describeStep(partner[firstHalfSlices + 1]);
  }
  // Every shape of these is a correct all-reduce (VerifyEveryShape covers 3-100 ranks and slices
  // of 1, 3 and 65,536 elements, both orders among them).
}

// The cost model streams a 3-rank unfold only while the folding rank's steps before it fit the
// executor's window: the rule counts the steps the schedule makes.
TEST(Registry, RhdUnfoldInWindowCountsTheFoldingRanksSteps) {
  const AlgoInfo* rhd = findAlgorithm(Coll::AllReduce, Algo::Rhd);
  ASSERT_NE(rhd, nullptr);
  EXPECT_FALSE(algo::rhdUnfoldInWindow(4, 10, 1));  // four inner ranks: not this rule's case
  for (const uint64_t count : {uint64_t{170}, uint64_t{171}, uint64_t{172}, uint64_t{7}}) {
    CollArgs a;
    a.nranks = 3;
    a.count = count;
    a.chunkElems = 1;
    const std::vector<Step> folding = materialize(*rhd, a, 1);  // real rank 1 folds rank 0 in
    size_t before = 0;
    while (before < folding.size() && !(folding[before].kind == StepKind::Send && folding[before].peer == 0))
      ++before;
    ASSERT_LT(before, folding.size()) << count;  // the unfold is there
    EXPECT_EQ(algo::rhdUnfoldInWindow(2, count, 1), before <= kExecutorWindowSteps)
        << count << " elements: " << before << " steps before the unfold";
  }
  EXPECT_TRUE(algo::rhdUnfoldInWindow(2, 170, 1));   // 85 slices a half: 510 steps
  EXPECT_FALSE(algo::rhdUnfoldInWindow(2, 172, 1));  // 86: 516
}

// Hierarchical's pipeline slices: d x m chunks, each through the three levels before the next, so
// the level across starts within the first slice's steps; the cost model counts a slice's steps
// (hierarchicalSliceSteps) to know how many the executor's window holds, so they are counted here.
TEST(Registry, HierarchicalSlicesRunTheLevelsSliceBySlice) {
  const AlgoInfo* hier = findAlgorithm(Coll::AllReduce, Algo::Hierarchical);
  ASSERT_NE(hier, nullptr);
  CollArgs a;
  a.coll = Coll::AllReduce;
  a.nranks = 16;
  a.ranksPerDomain = 8;  // two domains of eight: 60 steps a slice, five fit the window
  a.chunkElems = 4;
  a.count = 3 * 8 * 2 * 4;  // three slices of 64 elements
  ASSERT_EQ(algo::hierarchicalSliceSteps(8, 2), 60u);
  EXPECT_EQ(algo::hierarchicalSliceElems(a), 64u);
  const std::vector<Step> steps = materialize(*hier, a, 0);
  EXPECT_EQ(steps.size(), 3 * algo::hierarchicalSliceSteps(8, 2));
  size_t firstAcross = 0;
  while (firstAcross < steps.size() &&
         !(steps[firstAcross].kind == StepKind::Send && steps[firstAcross].peer == 8))
    ++firstAcross;
  EXPECT_LT(firstAcross, algo::hierarchicalSliceSteps(8, 2));  // within the first slice
  a.count += 5;                                                // a short fourth slice
  EXPECT_TRUE(verifySchedule(*hier, a).ok());
  // Four domains of eight: 124 steps a slice, four fit: one pass, the level across after every
  // reduce-scatter step (7 rounds of a 64-element block in 16 chunks, a send and a receive each).
  a.nranks = 32;
  a.count = 4 * 8 * 4 * 4;
  EXPECT_EQ(algo::hierarchicalSliceElems(a), a.count);
  const std::vector<Step> onePass = materialize(*hier, a, 0);
  firstAcross = 0;
  while (firstAcross < onePass.size() &&
         !(onePass[firstAcross].kind == StepKind::Send && onePass[firstAcross].peer == 8))
    ++firstAcross;
  EXPECT_EQ(firstAcross, 2u * 7 * 4 * 4);
}

TEST(Registry, InvalidRequestsAreRefusedNotScheduled) {
  for (int c = 0; c < kNumColls; ++c) {
    for (const AlgoInfo* info : algorithmsFor(static_cast<Coll>(c))) {
      CollArgs a;
      a.coll = info->coll;
      a.nranks = 0;  // would divide by zero inside the generators
      EXPECT_FALSE(info->supports(a));
      EXPECT_EQ(info->scratchCount(a, 0), 0u);
      auto gen = info->generate(a, 0);
      EXPECT_THROW(gen.next(), std::invalid_argument) << algoName(info->algo) << " " << collName(info->coll);
      a.nranks = 4;
      a.root = 4;  // not a rank
      EXPECT_FALSE(info->supports(a));
      a.root = 0;
      a.count = UINT64_MAX / 2;  // nranks * count overflows
      EXPECT_FALSE(info->supports(a));
    }
  }
}

// Pipelining: no message is longer than a slice, and a long buffer is cut into many messages.
TEST(Registry, MessagesAreSlices) {
  for (int c = 0; c < kNumColls; ++c) {
    for (const AlgoInfo* info : algorithmsFor(static_cast<Coll>(c))) {
      // One SwitchReduce step: the offload (the switch client), not the schedule, chunks it.
      if (needsOffload(info->algo) || needsWindows(info->algo)) continue;
      for (int n : {5, 8}) {
        CollArgs a;
        a.coll = info->coll;
        a.nranks = n;
        a.root = n - 2;
        a.count = info->coll == Coll::Barrier ? 0 : 50;
        a.chunkElems = 4;
        if (!info->supports(a)) continue;  // e.g. hierarchical without domains
        uint64_t busiest = 0;              // messages sent + received by the busiest rank
        for (int r = 0; r < n; ++r) {
          uint64_t comm = 0;
          for (const Step& s : materialize(*info, a, r)) {
            if (!s.isComm()) continue;
            ++comm;
            const uint64_t len = s.kind == StepKind::Send ? s.src.count : s.dst.count;
            EXPECT_LE(len, a.chunkElems) << algoName(info->algo) << " " << collName(info->coll) << " rank "
                                         << r << ": " << describeStep(s);
          }
          busiest = std::max(busiest, comm);
        }
        // Some rank moves at least the 50 elements of a whole buffer: 13 slices of 4 at least.
        if (info->coll != Coll::Barrier) {
          EXPECT_GE(busiest, 13u) << algoName(info->algo) << " " << collName(info->coll);
        }
      }
    }
  }
}

// ---- Every registered schedule -------------------------------------------------------------

bool rooted(Coll c) {
  return c == Coll::Reduce || c == Coll::Broadcast || c == Coll::Gather || c == Coll::Scatter;
}

// Roughly how many steps verifying `a` takes: the root's schedule length times the ranks.
uint64_t workEstimate(const AlgoInfo& info, const CollArgs& a) {
  uint64_t steps = 0;
  auto gen = info.generate(a, a.root);
  while (gen.next()) ++steps;
  return steps * static_cast<uint64_t>(a.nranks);
}

// One test per collective, so that CI's two-at-a-time run of the computations (label compute)
// shares them out over the cores.
class VerifyEveryShape : public ::testing::TestWithParam<Coll> {};

TEST_P(VerifyEveryShape, EveryAlgorithm) {
  const Coll coll = GetParam();
  const std::vector<int> rankCounts = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11,
                                       12, 13, 14, 15, 16, 17, 31, 32, 33, 64, 100};
  const std::vector<uint64_t> chunks = {1, 3, 1 << 16};
  // Combinations estimated above this many steps are skipped (and counted): the largest counts
  // cut into 1- or 3-element slices at 64 or 100 ranks would take minutes and add nothing that
  // the same shapes with larger slices or fewer ranks do not already cover.
  const uint64_t kMaxWork = 400'000;
  uint64_t verified = 0, skipped = 0, steps = 0;
  int failures = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (const AlgoInfo* info : algorithmsFor(coll)) {
    for (int n : rankCounts) {
      std::vector<uint64_t> counts = {0,   1, 7, static_cast<uint64_t>(n - 1), static_cast<uint64_t>(n + 1),
                                      4093};
      if (coll == Coll::Barrier) counts = {0};
      std::vector<int> roots = {0};
      if (rooted(coll) && n > 1) roots = {0, n - 1, n / 2};
      for (uint64_t count : counts) {
        for (int inPlace = 0; inPlace < 2; ++inPlace) {
          if (inPlace && !supportsInPlace(coll)) continue;
          for (int root : roots) {
            for (uint64_t chunk : chunks) {
              CollArgs a;
              a.coll = coll;
              a.nranks = n;
              a.root = root;
              a.count = count;
              a.inPlace = inPlace;
              a.chunkElems = chunk;
              if (info->algo == Algo::Hierarchical || info->algo == Algo::HierSwitch) {
                // Domains of the smallest size that gives at least two of them.
                for (int d = 2; d <= n / 2 && a.ranksPerDomain == 0; ++d) {
                  if (n % d == 0) a.ranksPerDomain = d;
                }
              }
              if (!info->supports(a)) continue;
              if (workEstimate(*info, a) > kMaxWork) {
                ++skipped;
                continue;
              }
              VerifyStats stats;
              Status st = verifySchedule(*info, a, &stats);
              ++verified;
              steps += stats.steps;
              if (!st.ok() && ++failures <= 10) {
                ADD_FAILURE() << collName(coll) << " " << algoName(info->algo) << " ranks " << n << " count "
                              << count << " root " << root << " chunk " << chunk
                              << (inPlace ? " in-place" : "") << ": " << st.message();
              }
            }
          }
        }
      }
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(failures, 0);
  EXPECT_GT(verified, 10 * skipped);  // the cap only trims the extremes
  std::printf("%s: verified %llu schedules (%llu steps) in %.1f s; skipped %llu over the work cap\n",
              collName(coll), static_cast<unsigned long long>(verified),
              static_cast<unsigned long long>(steps), secs, static_cast<unsigned long long>(skipped));
}

std::vector<Coll> everyColl() {
  std::vector<Coll> colls;
  for (int c = 0; c < kNumColls; ++c) colls.push_back(static_cast<Coll>(c));
  return colls;
}
INSTANTIATE_TEST_SUITE_P(Colls, VerifyEveryShape, ::testing::ValuesIn(everyColl()),
                         [](const ::testing::TestParamInfo<Coll>& p) {
                           return std::string(collName(p.param));
                         });

// Direct in rack order (args.ranksPerDomain: contiguous domains, the planner's choice across
// racks): every collective, domains of 2 to 72 ranks, rank counts that are and are not powers of
// two, a last domain as full as the others or smaller (padded: 6 = 4 + 2, 12 = 8 + 4, 14 = 8 + 6,
// 100 = 72 + 28, 7 = 3 + 3 + 1), uneven blocks, in place and not. A domain size that does not make
// two or more domains falls back to the flat order and must run too.
TEST(VerifyAll, DirectInRackOrder) {
  const std::vector<std::pair<int, int>> shapes = {
      {4, 2},    {6, 2}, {6, 3},  {8, 4},  {9, 3}, {10, 5},   {12, 4}, {15, 5}, {16, 8}, {24, 8},
      {144, 72}, {6, 4}, {12, 8}, {14, 8}, {7, 3}, {100, 72}, {5, 2},  {6, 6},  {7, 1}};
  int verified = 0;
  for (int c = 0; c < kNumColls; ++c) {
    const AlgoInfo* info = findAlgorithm(static_cast<Coll>(c), Algo::Direct);
    if (!info) continue;
    for (auto [n, d] : shapes) {
      for (uint64_t count : {static_cast<uint64_t>(n + 1), uint64_t{4093}}) {
        if (n >= 100 && count > 1000) continue;  // n x count state: the small one proves the order
        for (int inPlace = 0; inPlace < 2; ++inPlace) {
          if (inPlace && !supportsInPlace(static_cast<Coll>(c))) continue;
          CollArgs a;
          a.coll = static_cast<Coll>(c);
          a.nranks = n;
          a.root = n - 1;
          a.count = static_cast<Coll>(c) == Coll::Barrier ? 0 : count;
          a.inPlace = inPlace;
          a.chunkElems = 64;
          a.ranksPerDomain = d;
          if (!info->supports(a)) continue;
          const Status st = verifySchedule(*info, a);
          ++verified;
          EXPECT_TRUE(st.ok()) << collName(a.coll) << " direct ranks " << n << " ranks/domain " << d
                               << " count " << count << (inPlace ? " in place" : "") << ": " << st.message();
        }
      }
    }
  }
  EXPECT_GT(verified, 100);
}

// The ring all-reduce as rails (args.ranksPerDomain making two or more equal contiguous domains:
// one ring per local rank, src/algo/ring.cpp): domains of 2 to 72 ranks, uneven blocks and channels
// (counts below the channel and rank counts too), several slice groups, in place and not; domain
// sizes that make no two equal domains, or domains past kMaxRailChannels (72), fall back to the one
// ring. Every channel's ring must leave
// each domain from a different rank: channel c's cross-domain send comes from local rank c - 1.
TEST(VerifyAll, RingRails) {
  const AlgoInfo* info = findAlgorithm(Coll::AllReduce, Algo::Ring);
  ASSERT_NE(info, nullptr);
  const std::vector<std::pair<int, int>> shapes = {{4, 2},  {6, 2},  {6, 3},    {8, 4}, {9, 3}, {12, 4},
                                                   {16, 8}, {24, 8}, {144, 72}, {6, 4}, {6, 6}, {7, 1}};
  int verified = 0;
  for (auto [n, d] : shapes) {
    for (uint64_t count : {uint64_t{1}, static_cast<uint64_t>(n + 1), uint64_t{4093}, uint64_t{40000}}) {
      if (n == 144 && count > 1000) continue;
      for (int inPlace = 0; inPlace < 2; ++inPlace) {
        CollArgs a;
        a.nranks = n;
        a.count = count;
        a.inPlace = inPlace;
        a.chunkElems = 7;
        a.ranksPerDomain = d;
        const bool rails = d >= 2 && d <= kMaxRailChannels && d < n && n % d == 0;
        EXPECT_EQ(channelsOf(*info, a), rails ? d : 1) << n << " " << d;
        if (n * count / 7 < 200000) {  // the verifier's state: the larger shapes at the smaller counts
          const Status st = verifySchedule(*info, a);
          ++verified;
          EXPECT_TRUE(st.ok()) << "ring ranks " << n << " ranks/domain " << d << " count " << count
                               << (inPlace ? " in place" : "") << ": " << st.message();
        }
        if (!rails || count < static_cast<uint64_t>(n * d)) continue;
        for (int r = 0; r < n; ++r) {
          std::set<int> crossing;
          for (const Step& s : materialize(*info, a, r)) {
            ASSERT_LT(s.channel, d);
            if (s.kind == StepKind::Send && s.peer / d != r / d) crossing.insert(s.channel);
          }
          EXPECT_EQ(crossing, std::set<int>{(r % d + 1) % d}) << "rank " << r << " of " << n << ", d " << d;
        }
      }
    }
  }
  EXPECT_GT(verified, 50);
}

TEST(VerifyAll, AllReduceAt1024Ranks) {
  for (Algo algo : {Algo::Ring, Algo::Tree, Algo::Rhd}) {
    const AlgoInfo* info = findAlgorithm(Coll::AllReduce, algo);
    if (!info) {
      ADD_FAILURE() << "no " << algoName(algo) << " all-reduce registered";
      continue;
    }
    for (int inPlace = 0; inPlace < 2; ++inPlace) {
      CollArgs a;
      a.nranks = 1024;
      a.count = 1024 + 3;
      a.inPlace = inPlace;
      a.chunkElems = 1 << 16;
      VerifyStats stats;
      Status st = verifySchedule(*info, a, &stats);
      EXPECT_TRUE(st.ok()) << algoName(algo) << ": " << st.message();
      EXPECT_GT(stats.messages, 0u);
    }
  }
}

TEST(VerifyAll, RejectsBadRequests) {
  const AlgoInfo* ring = findAlgorithm(Coll::AllReduce, Algo::Ring);
  ASSERT_NE(ring, nullptr);
  CollArgs a;
  a.nranks = 0;
  Status st = verifySchedule(*ring, a);
  EXPECT_EQ(st.code(), tribInvalidArgument);
  EXPECT_NE(st.message().find("nranks"), std::string::npos) << st.message();
  a.nranks = 4;
  a.coll = Coll::Broadcast;
  st = verifySchedule(*ring, a);
  EXPECT_EQ(st.code(), tribInvalidArgument);
  EXPECT_NE(st.message().find("implements allreduce"), std::string::npos) << st.message();
}

// ---- Hand-broken schedules -----------------------------------------------------------------

bool always(const CollArgs&) { return true; }
uint64_t none(const CollArgs&, int) { return 0; }
uint64_t someScratch(const CollArgs& a, int) { return a.count; }

Region in(uint64_t off, uint64_t n) { return {Buf::Input, off, n}; }
Region out(uint64_t off, uint64_t n) { return {Buf::Output, off, n}; }

// All-reduce on 2 ranks that folds its own input in twice.
Generator<Step> doubleContribution(CollArgs a, int rank) {
  co_yield Step::send(1 - rank, in(0, a.count));
  co_yield Step::recvReduce(1 - rank, in(0, a.count), out(0, a.count));
  co_yield Step::reduce(in(0, a.count), out(0, a.count));
}
// All-reduce on 3 ranks where each rank only hears from its left neighbour.
Generator<Step> missingContribution(CollArgs a, int rank) {
  co_yield Step::send((rank + 1) % a.nranks, in(0, a.count));
  co_yield Step::recvReduce((rank + a.nranks - 1) % a.nranks, in(0, a.count), out(0, a.count));
}
// Both ranks receive before they send.
Generator<Step> deadlock(CollArgs a, int rank) {
  co_yield Step::recv(1 - rank, out(0, a.count));
  co_yield Step::send(1 - rank, in(0, a.count));
}
// Rank 0 sends a whole buffer, rank 1 expects one element less.
Generator<Step> sizeMismatch(CollArgs a, int rank) {
  if (rank == 0) co_yield Step::send(1, in(0, a.count));
  if (rank == 1) co_yield Step::recv(0, out(0, a.count - 1));
}
// Reads one element past the input.
Generator<Step> outOfBounds(CollArgs a, int rank) { co_yield Step::copy(in(1, a.count), out(0, a.count)); }
// Sends scratch nobody wrote.
Generator<Step> uninitScratch(CollArgs a, int rank) {
  if (rank == 0) co_yield Step::send(1, {Buf::Scratch, 0, a.count});
  if (rank == 1) co_yield Step::recv(0, out(0, a.count));
}
// Correct all-reduce on 2 ranks plus one message nobody receives.
Generator<Step> leftover(CollArgs a, int rank) {
  co_yield Step::send(1 - rank, in(0, a.count));
  co_yield Step::recvReduce(1 - rank, in(0, a.count), out(0, a.count));
  if (rank == 0) co_yield Step::send(1, in(0, 1));
}
// Reduces the first half of one rank's data with the second half of the other's.
Generator<Step> misaligned(CollArgs a, int rank) {
  const uint64_t h = a.count / 2;
  co_yield Step::send(1 - rank, in(rank == 0 ? 0 : h, h));
  co_yield Step::recvReduce(1 - rank, in(0, h), out(0, h));
}
// Recursive doubling on 2 ranks: both compute the sum themselves (in different orders).
Generator<Step> separateSums(CollArgs a, int rank) {
  co_yield Step::send(1 - rank, in(0, a.count));
  co_yield Step::recvReduce(1 - rank, in(0, a.count), out(0, a.count));
}
// Writes into the caller's input buffer.
Generator<Step> writesInput(CollArgs a, int rank) {
  co_yield Step::send(1 - rank, in(0, a.count));
  co_yield Step::recvReduce(1 - rank, in(0, a.count), in(0, a.count));
}

struct BrokenCase {
  const char* name;
  Generator<Step> (*gen)(CollArgs, int);
  uint64_t (*scratch)(const CollArgs&, int);
  int nranks;
  const char* expect;  // substring of the error message
};

TEST(VerifyNegative, RejectsBrokenSchedules) {
  const BrokenCase cases[] = {
      {"double contribution", doubleContribution, none, 2,
       "step 2 reduce(in[0+8] into out[0+8]): ranks {1} would contribute twice"},
      {"missing contribution", missingContribution, none, 3, "missing contributions from ranks {1}"},
      {"deadlock", deadlock, none, 2, "deadlock: no rank can progress; 2 of 2 ranks are blocked"},
      {"size mismatch", sizeMismatch, none, 2, "size mismatch: the message from rank 0 has 8 elements"},
      {"out of bounds", outOfBounds, none, 2,
       "region [1, 9) is out of bounds: the input buffer of rank 0 has 8"},
      {"uninitialised scratch", uninitScratch, someScratch, 2, "reads scratch[0], which was never written"},
      {"unreceived message", leftover, none, 2,
       "rank 0 sent 1 message(s) to rank 1 that were never received"},
      {"misaligned blocks", misaligned, none, 2, "reduces element index 0 with element index 4"},
      {"writes input", writesInput, none, 2, "writes the input buffer"},
      {"separately reduced", separateSums, none, 2,
       "rank 1: out[0] holds its own reduction of element index 0 (made by rank 1 at step 1), not the one "
       "rank 0 "
       "holds (made by rank 0 at step 1)"},
  };
  for (const BrokenCase& bc : cases) {
    const AlgoInfo fake = {Algo::Direct, Coll::AllReduce, always, bc.scratch, bc.gen};
    CollArgs a;
    a.nranks = bc.nranks;
    a.count = 8;
    Status st = verifySchedule(fake, a);
    ASSERT_FALSE(st.ok()) << bc.name << " was accepted";
    EXPECT_NE(st.message().find(bc.expect), std::string::npos)
        << bc.name << ": message was\n  " << st.message() << "\nexpected to contain\n  " << bc.expect;
  }
}

TEST(VerifyNegative, DeadlockNamesWhatEachRankWaitsFor) {
  const AlgoInfo fake = {Algo::Direct, Coll::AllReduce, always, none, deadlock};
  CollArgs a;
  a.nranks = 2;
  a.count = 4;
  Status st = verifySchedule(fake, a);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("rank 0 at step 0 recv(from 1, out[0+4]) waits for a message from rank 1"),
            std::string::npos)
      << st.message();
}

}  // namespace
}  // namespace trib
