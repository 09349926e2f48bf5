// Planner and cost model: calibration figures, monotone choices, overrides, tune strings, cache.
#include <gtest/gtest.h>

#include <chrono>

#include "plan/planner.hpp"

using namespace trib;

static PlanRequest allreduce(uint64_t bytes, int n, bool modelOnly = true) {
  PlanRequest r;
  r.coll = Coll::AllReduce;
  r.bytes = bytes;
  r.nranks = n;
  r.includeModelOnly = modelOnly;
  return r;
}

static const Candidate* find(const std::vector<Candidate>& cs, PlanAlgo a) {
  for (const auto& c : cs)
    if (c.plan.algo == a) return &c;
  return nullptr;
}

TEST(CostModel, CalibratedOnPublishedDgxH100Figures) {
  Planner p(makeDgxH100());
  auto cs = p.explain(allreduce(8ull << 30, 8));
  const Candidate* ring = find(cs, PlanAlgo::Ring);
  const Candidate* nvls = find(cs, PlanAlgo::Nvls);
  ASSERT_TRUE(ring && nvls);
  EXPECT_NEAR(ring->busbwGBps, 370, 370 * 0.03);  // REFERENCE.md: ring ~370 GB/s
  EXPECT_NEAR(nvls->busbwGBps, 480, 480 * 0.05);  // NVLS ~480 GB/s at large sizes
  EXPECT_EQ(p.choose(allreduce(8ull << 30, 8)).algo, PlanAlgo::Nvls);
}

TEST(CostModel, MultiNodeRingIsNicBound) {
  // Two DGX H100 over 400 Gb/s NICs: one ring crosses the network on one NIC: ~46-48 GB/s busbw.
  Planner p(makeDgxH100(2));
  auto cs = p.explain(allreduce(4ull << 30, 16));
  const Candidate* ring = find(cs, PlanAlgo::Ring);
  ASSERT_TRUE(ring);
  EXPECT_GT(ring->busbwGBps, 40);
  EXPECT_LT(ring->busbwGBps, 48);
}

TEST(CostModel, PredictionsGrowWithSize) {
  Planner p(makeNvl72Cluster(4));
  const FabricView& f = p.fabric(288);
  for (int a = 0; a < kNumPlanAlgos; ++a) {
    double prev = 0;
    for (uint64_t b = 8; b <= (1ull << 32); b *= 4) {
      Prediction pr =
          predict(static_cast<PlanAlgo>(a), Coll::AllReduce, b, tribFloat32, tribSum, f, p.constants());
      if (!pr.supported) break;
      EXPECT_GE(pr.us, prev) << planAlgoName(static_cast<PlanAlgo>(a)) << " at " << b;
      prev = pr.us;
    }
  }
}

TEST(Planner, SmallMessagesNeverPickRingOn1024Ranks) {
  std::vector<std::string> noSharp{"sharp=0"};
  Topology flat;
  ASSERT_TRUE(generateTopology("uniform:1024:50:1", noSharp, &flat).ok());
  Planner pf(flat);
  Planner pc(makeNvl72Cluster(15));  // 1,080 GPUs; use the first 1,024
  for (Planner* p : {&pf, &pc}) {
    for (uint64_t b = 8; b <= (256u << 10); b *= 2) {
      Plan plan = p->choose(allreduce(b, 1024));
      EXPECT_NE(plan.algo, PlanAlgo::Ring) << p->topology().name << " " << b << " B: " << plan.why;
    }
  }
}

TEST(Planner, OnceBandwidthBoundRingWinsItKeepsWinning) {
  // 48 ranks (not a power of two: halving/doubling pays an extra full-size step) on a flat fabric
  // without in-network reduction: latency-bound rhd, then tree, then ring for good.
  Topology flat;
  ASSERT_TRUE(generateTopology("uniform:48:50:1", {"sharp=0"}, &flat).ok());
  Planner p(flat);
  bool ringSeen = false;
  for (uint64_t b = 8; b <= (16ull << 30); b *= 2) {
    PlanAlgo a = p.choose(allreduce(b, 48)).algo;
    if (b <= 4096) {
      EXPECT_NE(a, PlanAlgo::Ring) << b;
    }
    if (ringSeen) {
      EXPECT_EQ(a, PlanAlgo::Ring) << b;
    }
    ringSeen |= a == PlanAlgo::Ring;
  }
  EXPECT_TRUE(ringSeen);
}

TEST(Planner, InNetworkReductionWinsAtScaleAndHierarchicalBeatsFlatRing) {
  Planner p(makeNvl72Cluster(64));
  auto cs = p.explain(allreduce(1ull << 30, 4608));
  const Candidate* ring = find(cs, PlanAlgo::Ring);
  const Candidate* hier = find(cs, PlanAlgo::Hierarchical);
  const Candidate* innet = find(cs, PlanAlgo::NvlsSwitch);
  ASSERT_TRUE(ring && hier && innet);
  EXPECT_LT(hier->plan.predictedUs, ring->plan.predictedUs);
  EXPECT_LT(innet->plan.predictedUs, hier->plan.predictedUs);
  EXPECT_EQ(cs.front().plan.algo, PlanAlgo::NvlsSwitch);
  // Without SHARP the in-network candidates are excluded with a reason.
  Topology noSharp;
  ASSERT_TRUE(generateTopology("nvl72-cluster:2", {"sharp=0"}, &noSharp).ok());
  Planner q(noSharp);
  auto cq = q.explain(allreduce(1ull << 30, 144));
  const Candidate* sw = find(cq, PlanAlgo::Switch);
  ASSERT_TRUE(sw);
  EXPECT_FALSE(sw->eligible);
  EXPECT_NE(sw->reason.find("no reduce-capable network switch"), std::string::npos) << sw->reason;
}

TEST(Planner, PlanningAtScaleIsFastAndCached) {
  auto t0 = std::chrono::steady_clock::now();
  Planner p(makeNvl72Cluster(64));
  Plan plan = p.choose(allreduce(1ull << 30, 4608));
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 1.0);
  EXPECT_FALSE(plan.why.empty());
  auto t1 = std::chrono::steady_clock::now();
  for (int i = 0; i < 1000; ++i) {
    Plan again = p.choose(allreduce(1ull << 30, 4608));
    ASSERT_EQ(again.algo, plan.algo);
  }
  double per =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t1).count() / 1000;
  EXPECT_LT(per, 50.0);  // a hash lookup, not a re-plan
}

TEST(Planner, ExecutableOnlyPicksARegisteredSchedule) {
  Planner p(makeNvl72Cluster(2));
  Plan plan = p.choose(allreduce(1ull << 20, 144, /*modelOnly=*/false));
  EXPECT_TRUE(plan.executable) << plan.why;
  EXPECT_NE(findAlgorithm(Coll::AllReduce, plan.scheduleAlgo()), nullptr);
  EXPECT_GE(plan.chunkElems, 1u);
}

TEST(Overrides, NcclStyleAlgoLists) {
  AlgoFilter f;
  ASSERT_TRUE(parseAlgoOverride("ring,tree", &f).ok());
  for (int c = 0; c < kNumColls; ++c) EXPECT_EQ(f.allowed[c], (1u << 0) | (1u << 1));
  ASSERT_TRUE(parseAlgoOverride("allreduce:^ring,rhd;broadcast:chain", &f).ok());
  int ar = static_cast<int>(Coll::AllReduce), bc = static_cast<int>(Coll::Broadcast);
  EXPECT_FALSE(f.allowed[ar] & 1u << static_cast<int>(PlanAlgo::Ring));
  EXPECT_FALSE(f.allowed[ar] & 1u << static_cast<int>(PlanAlgo::Rhd));
  EXPECT_TRUE(f.allowed[ar] & 1u << static_cast<int>(PlanAlgo::Tree));
  EXPECT_EQ(f.allowed[bc], 1u << static_cast<int>(PlanAlgo::Chain));
  EXPECT_EQ(f.allowed[static_cast<int>(Coll::AllGather)], ~0u);
  Status s = parseAlgoOverride("allreduce:rings", &f);
  EXPECT_EQ(s.code(), tribInvalidArgument);
  EXPECT_NE(s.message().find("unknown algorithm 'rings'"), std::string::npos) << s.message();
  s = parseAlgoOverride("allreduc:ring", &f);
  EXPECT_NE(s.message().find("unknown collective 'allreduc'"), std::string::npos) << s.message();
}

TEST(Overrides, AlgoOverrideChangesTheChoiceAndSaysSo) {
  Planner p(makeDgxH100());
  ASSERT_EQ(p.choose(allreduce(1ull << 30, 8)).algo, PlanAlgo::Nvls);
  ASSERT_TRUE(p.setOverrides("allreduce:^nvls", "").ok());
  Plan plan = p.choose(allreduce(1ull << 30, 8));
  EXPECT_NE(plan.algo, PlanAlgo::Nvls);
  EXPECT_NE(plan.why.find("TRIB_ALGO"), std::string::npos) << plan.why;
  // Excluding everything that works falls back to the fastest runnable schedule, with a reason.
  ASSERT_TRUE(p.setOverrides("allreduce:switch", "").ok());
  plan = p.choose(allreduce(1ull << 30, 8));
  EXPECT_TRUE(plan.executable);
  EXPECT_NE(plan.why.find("overrides left no usable algorithm"), std::string::npos) << plan.why;
}

TEST(Overrides, TuneStringWithSizeRanges) {
  std::vector<TuneRule> rules;
  ASSERT_TRUE(
      parseTuneString("allreduce:0-64k:@tree#allreduce,reduce:64k-inf:@ring:ranks=2-16", &rules).ok());
  ASSERT_EQ(rules.size(), 2u);
  EXPECT_EQ(rules[0].lo, 0u);
  EXPECT_EQ(rules[0].hi, 65536u);
  EXPECT_EQ(rules[1].hi, UINT64_MAX);
  EXPECT_EQ(rules[1].maxRanks, 16);
  Planner p(makeDgxH100());
  ASSERT_TRUE(p.setOverrides("", "allreduce:0-64k:@tree#allreduce:64k-inf:@rhd").ok());
  EXPECT_EQ(p.choose(allreduce(4096, 8)).algo, PlanAlgo::Tree);
  EXPECT_EQ(p.choose(allreduce(1 << 20, 8)).algo, PlanAlgo::Rhd);
  // Bad strings name the problem.
  for (const char* bad : {"allreduce:0-64k", "allreduce:64k-0:@ring", "allreduce:0-1x:@ring",
                          "alreduce:@ring", "allreduce:@warp"}) {
    Status s = parseTuneString(bad, &rules);
    EXPECT_EQ(s.code(), tribInvalidArgument) << bad;
    EXPECT_NE(s.message().find("TRIB_TUNE"), std::string::npos) << bad << ": " << s.message();
  }
}

TEST(Planner, CrossoversAndSizes) {
  uint64_t b = 0;
  ASSERT_TRUE(parseSize("1G", &b).ok());
  EXPECT_EQ(b, 1ull << 30);
  ASSERT_TRUE(parseSize("64KiB", &b).ok());
  EXPECT_EQ(b, 65536u);
  EXPECT_FALSE(parseSize("lots", &b).ok());
  Topology flat;
  ASSERT_TRUE(generateTopology("uniform:48:50:1", {"sharp=0"}, &flat).ok());
  Planner p(flat);
  auto xs = p.crossovers(allreduce(0, 48), 8, 16ull << 30);
  ASSERT_GE(xs.size(), 2u);
  for (const auto& x : xs) {
    EXPECT_NE(x.from, x.to);
    EXPECT_EQ(p.choose(allreduce(x.bytes, 48)).algo, x.to);
    EXPECT_EQ(p.choose(allreduce(x.bytes - x.bytes / 100 - 1, 48)).algo, x.from);
  }
  EXPECT_NE(formatExplain(allreduce(1 << 20, 48), p.explain(allreduce(1 << 20, 48))).find("busbw"),
            std::string::npos);
}

TEST(Planner, CpuOnlyHostMapsManyRanksToOneNode) {
  Topology host;
  ASSERT_TRUE(parseTopology("node cpu0 cpu\n", &host).ok());
  Planner p(host);
  Plan plan = p.choose(allreduce(1 << 20, 4, false));
  EXPECT_GT(plan.predictedUs, 0) << plan.why;
  EXPECT_TRUE(plan.executable);
}
