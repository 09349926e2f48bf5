// Simulator: the real ring schedule on a uniform topology matches the closed form; calibration on
// DGX H100; switch and window (one-shot, two-shot) schedules replayed against the cost model;
// signal/wait ordering; clear errors for schedules that cannot complete.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "plan/planner.hpp"
#include "sim/links.hpp"
#include "sim/sim.hpp"
#include "sim/sim_plan.hpp"
#include "verify/verify.hpp"

using namespace trib;

static bool always(const CollArgs&) { return true; }
static uint64_t none(const CollArgs&, int) { return 0; }

// An all-reduce of `bytes` on n ranks, on the modelled systems' GPUs, model-only plans included
// (what trib-plan --explain and --simulate ask the planner).
static PlanRequest deviceAllReduce(uint64_t bytes, int n) {
  PlanRequest req;
  req.memory = MemoryKind::Device;
  req.bytes = bytes;
  req.nranks = n;
  req.includeModelOnly = true;
  return req;
}

static CollArgs allreduceArgs(int n, uint64_t count, uint64_t chunk) {
  CollArgs a;
  a.coll = Coll::AllReduce;
  a.nranks = n;
  a.count = count;
  a.chunkElems = chunk;
  return a;
}

TEST(Simulator, RingAllReduceMatchesClosedFormOnUniformTopology) {
  const AlgoInfo* ring = findAlgorithm(Coll::AllReduce, Algo::Ring);
  ASSERT_NE(ring, nullptr);
  const CostConstants& k = CostConstants::defaults();
  const double linkGBps = 25, linkLatUs = 1.5;
  for (int n : {2, 7, 16, 33}) {
    Topology t = makeUniform(n, linkGBps, linkLatUs);
    const uint64_t count = 8u << 20;  // 32 MiB of float32
    SimResult r;
    // One slice per block: the closed form counts whole blocks per step.
    Status s = simulate(t, *ring, allreduceArgs(n, count, count), tribFloat32, &r);
    ASSERT_TRUE(s.ok()) << s.message();
    // alpha: two link latencies plus the per-step overheads; B: the link at its network efficiency.
    double alpha = 2 * linkLatUs + k.stepOverheadUs + k.netStepOverheadUs;
    double B = linkGBps * k.eff[static_cast<int>(LinkType::Net)] * 1e3;  // bytes/us
    double S = count * 4.0;
    double closed = 2.0 * (n - 1) / n * S / B + 2.0 * (n - 1) * alpha + k.launchUs;
    EXPECT_NEAR(r.timeUs, closed, closed * 0.02) << n << " ranks";
    EXPECT_EQ(r.messages, static_cast<uint64_t>(2 * n * (n - 1)));
    EXPECT_NEAR(r.busbwGBps, 2.0 * (n - 1) / n * S / r.timeUs / 1e3, 1e-9);
    ASSERT_FALSE(r.busiest.empty());
    EXPECT_GT(r.busiest[0].utilization, 0.5);
  }
}

// A block of several slices (more than 4 MiB a rank) pipelines through the ring's rounds: the
// model prices one hop's latency per slice chain, not per round in series (it priced 36 GPUs of a
// GB200 rack at 256 MiB 1.34x its replay, the whole rack at 1 GiB 1.17x, 16 ranks across a switch
// 1.07x).
TEST(Simulator, RingModelPipelinesABlockOfSeveralSlices) {
  struct Case {
    const char* system;
    int ranks;
    uint64_t bytes;
  };
  for (const Case& c : {Case{"gb200-nvl72", 36, 256ull << 20}, Case{"gb200-nvl72", 72, 1ull << 30},
                        Case{"uniform:64", 16, 256ull << 20}, Case{"dgx-h100", 5, 256ull << 20}}) {
    Topology t;
    ASSERT_TRUE(generateTopology(c.system, {}, &t).ok()) << c.system;
    Planner p(t);
    ASSERT_TRUE(p.setOverrides("", "", "Simple").ok());
    PlannedSim r;
    ASSERT_TRUE(simulatePlanned(p, deviceAllReduce(c.bytes, c.ranks), PlanAlgo::Ring, &r).ok()) << c.system;
    ASSERT_GT(r.predictedUs, 0) << c.system;
    EXPECT_GT(static_cast<double>(c.bytes) / c.ranks, 1.5 * r.chunkElems * 4)
        << c.system << ": slices a block";
    EXPECT_NEAR(r.sim.timeUs / r.predictedUs, 1.0, 0.02) << c.system << " " << c.ranks << " ranks: simulated "
                                                         << r.sim.timeUs << " us, model " << r.predictedUs;
  }
}

TEST(Simulator, PipelinedRingOnDgxH100MatchesPublishedBusbw) {
  const AlgoInfo* ring = findAlgorithm(Coll::AllReduce, Algo::Ring);
  ASSERT_NE(ring, nullptr);
  Topology t = makeDgxH100();
  SimResult r;
  ASSERT_TRUE(simulate(t, *ring, allreduceArgs(8, 64u << 20, 1u << 18), tribFloat32, &r).ok());  // 256 MiB
  EXPECT_NEAR(r.busbwGBps, 370, 370 * 0.05);  // REFERENCE.md: ~370 GB/s
  // And the cost model agrees with the simulator within 5%.
  Planner p(t);
  PlanRequest req = deviceAllReduce(256u << 20, 8);
  for (const auto& c : p.explain(req)) {
    if (c.plan.algo == PlanAlgo::Ring) {
      EXPECT_NEAR(c.plan.predictedUs, r.timeUs, r.timeUs * 0.05);
    }
  }
}

TEST(Simulator, ContentionShowsOnSharedLinks) {
  // Four ranks behind one thin uplink each pair: a ring crossing the thin link is bound by it.
  const char* text =
      "node g0 gpu\nnode g1 gpu\nnode g2 gpu\nnode g3 gpu\n"
      "node s0 switch\nnode s1 switch\n"
      "link g0 s0 net bw=100\nlink g1 s0 net bw=100\nlink g2 s1 net bw=100\nlink g3 s1 net bw=100\n"
      "link s0 s1 net bw=10\n";
  Topology t;
  ASSERT_TRUE(parseTopology(text, &t).ok());
  const AlgoInfo* ring = findAlgorithm(Coll::AllReduce, Algo::Ring);
  SimResult r;
  const uint64_t count = 4u << 20;
  ASSERT_TRUE(simulate(t, *ring, allreduceArgs(4, count, count), tribFloat32, &r).ok());
  ASSERT_FALSE(r.busiest.empty());
  EXPECT_NE(r.busiest[0].name.find("s0 -> s1"), std::string::npos) << r.busiest[0].name;
  // The thin link carries the ring's 2(n-1) blocks of S/n one way: at least that long.
  double S = count * 4.0, thin = 10 * CostConstants::defaults().eff[static_cast<int>(LinkType::Net)] * 1e3;
  EXPECT_GT(r.timeUs, 2.0 * 3 / 4 * S / thin);
}

TEST(Simulator, InNetworkReductionHalvesTrafficOnUniformTopology) {
  Topology t = makeUniform(16, 50, 1, /*switchReduces=*/true);
  const uint64_t count = 16u << 20;  // 64 MiB
  SimResult sw, ring;
  // The switch schedule, replayed step by step: one SwitchReduce per rank, a rendezvous of all 16.
  ASSERT_TRUE(simulate(t, *findAlgorithm(Coll::AllReduce, Algo::Switch), allreduceArgs(16, count, 1u << 18),
                       tribFloat32, &sw)
                  .ok());
  ASSERT_TRUE(simulate(t, *findAlgorithm(Coll::AllReduce, Algo::Ring), allreduceArgs(16, count, count),
                       tribFloat32, &ring)
                  .ok());
  EXPECT_EQ(sw.steps, 16u);
  // Switch: S up + S down per rank at the link rate; ring: 2(n-1)/n S each way plus 2(n-1) latencies.
  EXPECT_GT(ring.timeUs / sw.timeUs, 1.6);
  EXPECT_LT(ring.timeUs / sw.timeUs, 2.3);
  double B = 50 * CostConstants::defaults().eff[static_cast<int>(LinkType::Net)] * 1e3;
  EXPECT_NEAR(sw.timeUs, count * 4.0 / B, count * 4.0 / B * 0.1);
}

TEST(Simulator, NvlsAndNvlsSwitchRun) {
  Topology dgx = makeDgxH100();
  SimResult r;
  // REFERENCE.md: NVLS ~480 GB/s at large sizes (1 GiB in 4 MiB chunks, the planner's largest: each
  // chunk's fixed overhead costs 1.5% here, 6% at 256 MiB).
  ASSERT_TRUE(
      simulateInNetwork(dgx, PlanAlgo::Nvls, allreduceArgs(8, 256u << 20, 1u << 20), tribFloat32, &r).ok());
  EXPECT_NEAR(r.busbwGBps, 480, 480 * 0.06);
  Topology c = makeNvl72Cluster(2);
  ASSERT_TRUE(
      simulateInNetwork(c, PlanAlgo::NvlsSwitch, allreduceArgs(144, 16u << 20, 1u << 20), tribFloat32, &r)
          .ok());
  EXPECT_GT(r.busbwGBps, 300);
  Status s = simulateInNetwork(c, PlanAlgo::Nvls, allreduceArgs(144, 1024, 256), tribFloat32, &r);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("span 2 NVLink domains"), std::string::npos) << s.message();
  Topology noSharp;
  ASSERT_TRUE(generateTopology("uniform:4", {"sharp=0"}, &noSharp).ok());
  s = simulate(noSharp, *findAlgorithm(Coll::AllReduce, Algo::Switch), allreduceArgs(4, 1024, 256),
               tribFloat32, &r);
  EXPECT_NE(s.message().find("no reduce-capable switch"), std::string::npos) << s.message();
  // Switch schedules are replayed, not modelled on the side.
  s = simulateInNetwork(c, PlanAlgo::Switch, allreduceArgs(144, 1024, 256), tribFloat32, &r);
  EXPECT_NE(s.message().find("simulate() replays"), std::string::npos) << s.message();
}

// The planner's prediction for `a` (with the chunk and domains it would run with).
static Plan modelPlan(Planner& p, PlanAlgo a, uint64_t bytes, int n) {
  PlanRequest req = deviceAllReduce(bytes, n);
  for (const auto& c : p.explain(req))
    if (c.plan.algo == a) return c.plan;
  return {};
}

// NVLS within each rack and the network's switches across: the simulator runs each stage of each
// chunk in the order it becomes ready, so a chunk's all-gather overlaps the next chunk's
// reduction as the model's pipeline assumes. (Run stage by stage, every link carried one stage's
// chunks before the next stage's, and the simulation came out 1.58x the model at 1 GiB.) With the
// model's fill per stage and the replay's per-chunk overhead they agree within 10% at 256 MiB too
// (0.90 before, 0.99 now).
TEST(Simulator, NvlsSwitchPipelinesItsStagesAsTheModelDoes) {
  Topology c = makeNvl72Cluster(2);
  Planner p(c);
  for (uint64_t bytes : {256ull << 20, 1ull << 30}) {
    Plan plan = modelPlan(p, PlanAlgo::NvlsSwitch, bytes, 144);
    ASSERT_GT(plan.predictedUs, 0);
    SimResult r;
    ASSERT_TRUE(simulateInNetwork(c, PlanAlgo::NvlsSwitch, allreduceArgs(144, bytes / 4, plan.chunkElems),
                                  tribFloat32, &r)
                    .ok());
    const double ratio = r.timeUs / plan.predictedUs;
    EXPECT_GT(ratio, 0.9) << bytes << ": simulated " << r.timeUs << " us";
    EXPECT_LT(ratio, 1.1) << bytes << ": simulated " << r.timeUs << " us, model " << plan.predictedUs
                          << " us";
  }
}

// nvls_switch simulates one NVLink domain per class of identical domains (the 1,820-rack goal,
// docs/PLANNER.md "Scale"): it must give exactly what simulating every domain gives — on identical
// racks (one class), on a three-tier tree whose last pod is partial (the network hands its racks
// other times, so the class splits mid-run), and on racks with a slower NVLink (their own class).
TEST(Simulator, NvlsSwitchSymmetryReductionEqualsTheFullSimulation) {
  struct Case {
    std::string system;
    std::vector<std::string> options;
    bool slowLink;
    size_t minClasses, maxClasses;  // simulated domains with the reduction
  };
  const Case cases[] = {
      {"nvl72-cluster:4", {}, false, 1, 1},
      {"nvl72-cluster:9", {"tiers=3", "radix=4"}, false, 2, 8},
      {"nvl72-cluster:4", {}, true, 2, 4},
  };
  for (const Case& c : cases) {
    Topology t;
    ASSERT_TRUE(generateTopology(c.system, c.options, &t).ok()) << c.system;
    if (c.slowLink) {  // one GPU of rack 1 on a slower NVLink: rack 1 is like no other
      const int gpu = t.find("r1.gpu3"), sw = t.find("r1.nvsw");
      ASSERT_GE(gpu, 0);
      ASSERT_GE(sw, 0);
      for (auto [lid, nb] : t.adjacent(gpu))
        if (nb == sw) t.link(lid).bwAB /= 2, t.link(lid).bwBA /= 2;
    }
    const int n = static_cast<int>(t.rankNodes().size());
    for (uint64_t bytes : {1ull << 20, 16ull << 20}) {
      const CollArgs args = allreduceArgs(n, bytes / 4, 1u << 16);
      SimOptions full;
      full.symmetry = false;
      SimResult reduced, every;
      ASSERT_TRUE(simulateInNetwork(t, PlanAlgo::NvlsSwitch, args, tribFloat32, &reduced).ok());
      ASSERT_TRUE(simulateInNetwork(t, PlanAlgo::NvlsSwitch, args, tribFloat32, &every, {}, full).ok());
      const std::string what = c.system + (c.slowLink ? " slow link " : " ") + std::to_string(bytes);
      EXPECT_EQ(every.simulatedDomains, every.domains) << what;
      EXPECT_GE(reduced.simulatedDomains, c.minClasses) << what;
      EXPECT_LE(reduced.simulatedDomains, c.maxClasses) << what;
      EXPECT_EQ(reduced.timeUs, every.timeUs) << what;
      EXPECT_EQ(reduced.messages, every.messages) << what;
      ASSERT_EQ(reduced.busiest.size(), every.busiest.size()) << what;
      for (size_t i = 0; i < every.busiest.size(); ++i) {
        EXPECT_EQ(reduced.busiest[i].name, every.busiest[i].name) << what;
        EXPECT_EQ(reduced.busiest[i].busyUs, every.busiest[i].busyUs) << what;
        EXPECT_EQ(reduced.busiest[i].bytes, every.busiest[i].bytes) << what;
      }
    }
  }
}

// nvls_ring: NVLS in each domain and, where the network does not reduce, a ring of GPU i of every
// domain for slice i. The ring's steps are events of their own (stage 6), so the next chunk's first
// step takes its link before this chunk's later ones are due: booked a ring at a time, the chunks
// went at one ring's chain (1.76x the model on 2 x DGX H100 at 256 MiB). Each GPU's NIC carries
// 2(m-1)/m of its slice a chunk each way, nothing more; one domain, or no NVLS, is refused; the
// symmetry reduction gives what simulating every domain gives.
TEST(Simulator, NvlsRingPipelinesItsRingsAndCarriesEachSliceOnItsOwnNic) {
  for (const char* system : {"dgx-h100:2", "dgx-h100:4", "nvl72-cluster:2"}) {
    Topology t;
    ASSERT_TRUE(generateTopology(system, {"sharp=0"}, &t).ok()) << system;
    Planner p(t);
    const int n = static_cast<int>(t.rankNodes().size()), d = n / t.numDomains();
    const int m = n / d;
    const uint64_t bytes = 256ull << 20;
    Plan plan = modelPlan(p, PlanAlgo::NvlsRing, bytes, n);
    ASSERT_GT(plan.predictedUs, 0) << system;
    SimOptions opt;
    opt.topLinks = 1 << 20;
    SimResult r, every;
    const CollArgs args = allreduceArgs(n, bytes / 4, plan.chunkElems);
    ASSERT_TRUE(simulateInNetwork(t, PlanAlgo::NvlsRing, args, tribFloat32, &r, {}, opt).ok()) << system;
    const double ratio = r.timeUs / plan.predictedUs;
    EXPECT_GT(ratio, 0.9) << system << ": simulated " << r.timeUs << " us, model " << plan.predictedUs;
    EXPECT_LT(ratio, 1.1) << system << ": simulated " << r.timeUs << " us, model " << plan.predictedUs;
    // Every NIC's link into the network carries 2(m-1)/m of its GPU's slices: S/d in all.
    const double perNic = 2.0 * (m - 1) / m * static_cast<double>(bytes) / d;
    int nics = 0;
    for (const LinkLoad& l : r.busiest)
      if (l.name.find(".nic") < l.name.find(" -> ") && l.name.find("(net)") != std::string::npos) {
        ++nics;
        EXPECT_NEAR(l.bytes, perNic, perNic * 1e-9) << system << " " << l.name;
      }
    EXPECT_EQ(nics, n) << system << ": every GPU's NIC carries its own slices";
    opt.symmetry = false;
    ASSERT_TRUE(simulateInNetwork(t, PlanAlgo::NvlsRing, args, tribFloat32, &every, {}, opt).ok());
    EXPECT_EQ(every.simulatedDomains, every.domains);
    EXPECT_EQ(r.timeUs, every.timeUs) << system;
    EXPECT_EQ(r.messages, every.messages) << system;
  }
  Topology one = makeDgxH100(), a100;
  SimResult r;
  Status s = simulateInNetwork(one, PlanAlgo::NvlsRing, allreduceArgs(8, 1024, 256), tribFloat32, &r);
  EXPECT_NE(s.message().find("one NVLink domain (use nvls)"), std::string::npos) << s.message();
  ASSERT_TRUE(generateTopology("dgx-a100:2", {}, &a100).ok());
  s = simulateInNetwork(a100, PlanAlgo::NvlsRing, allreduceArgs(16, 1024, 256), tribFloat32, &r);
  EXPECT_NE(s.message().find("no reduce-capable NVSwitch"), std::string::npos) << s.message();
}

// nvls_tree: NVLS in each domain and a double binary tree of the domains for each GPU's slice (NCCL's
// NVLS tree). Each member's send is an event of its own: booked a tree level at a time, a member
// whose data came later held its NIC ahead of another chunk's earlier send (248 DGX H200: 3.0x the
// model; now 1.11). A GPU's NIC carries half its slice to or from each tree neighbour: 2 x S/d each
// way where it is inner in one tree and a leaf in the other. Where the network's latency dominates
// (8 nodes, 16 MiB) the tree's 2 log2(m) steps beat the ring's 2(m-1), in the model and the replay.
TEST(Simulator, NvlsTreeCarriesHalfASliceToEachNeighbourAndBeatsTheRingOnLatency) {
  for (const char* system : {"dgx-h100:2", "dgx-h100:8", "nvl72-cluster:4"}) {
    Topology t;
    ASSERT_TRUE(generateTopology(system, {"sharp=0"}, &t).ok()) << system;
    Planner p(t);
    const int n = static_cast<int>(t.rankNodes().size()), d = n / t.numDomains(), m = n / d;
    const uint64_t bytes = 16ull << 20;
    const Plan tree = modelPlan(p, PlanAlgo::NvlsTree, bytes, n),
               ring = modelPlan(p, PlanAlgo::NvlsRing, bytes, n);
    ASSERT_GT(tree.predictedUs, 0) << system;
    SimOptions opt;
    opt.topLinks = 1 << 20;
    SimResult r, rr, every;
    const CollArgs args = allreduceArgs(n, bytes / 4, tree.chunkElems);
    ASSERT_TRUE(simulateInNetwork(t, PlanAlgo::NvlsTree, args, tribFloat32, &r, {}, opt).ok()) << system;
    const double ratio = r.timeUs / tree.predictedUs;
    EXPECT_GT(ratio, 0.9) << system << ": simulated " << r.timeUs << " us, model " << tree.predictedUs;
    EXPECT_LT(ratio, 1.1) << system << ": simulated " << r.timeUs << " us, model " << tree.predictedUs;
    // Each NIC's link into the network: half a slice per tree neighbour (parent or child), in all
    // at most 2 x S/d (inner in one tree: a parent and two children; a leaf in the other: a parent).
    int nics = 0;
    for (const LinkLoad& l : r.busiest)
      if (l.name.find(".nic") < l.name.find(" -> ") && l.name.find("(net)") != std::string::npos) {
        ++nics;
        const double halves = l.bytes / (static_cast<double>(bytes) / d / 2);
        EXPECT_NEAR(halves, std::round(halves), 1e-6) << system << " " << l.name;
        EXPECT_GE(halves, 1 - 1e-6) << system << " " << l.name;
        EXPECT_LE(halves, 4 + 1e-6) << system << " " << l.name;
      }
    EXPECT_EQ(nics, n) << system << ": every GPU's NIC carries its own slices";
    if (m >= 8) {  // 2 log2(m) steps across against the ring's 2(m-1)
      ASSERT_TRUE(simulateInNetwork(t, PlanAlgo::NvlsRing, allreduceArgs(n, bytes / 4, ring.chunkElems),
                                    tribFloat32, &rr, {}, opt)
                      .ok());
      EXPECT_LT(tree.predictedUs, ring.predictedUs) << system;
      EXPECT_LT(r.timeUs, rr.timeUs) << system;
    }
    opt.symmetry = false;
    ASSERT_TRUE(simulateInNetwork(t, PlanAlgo::NvlsTree, args, tribFloat32, &every, {}, opt).ok());
    EXPECT_EQ(r.timeUs, every.timeUs) << system;
    EXPECT_EQ(r.messages, every.messages) << system;
  }
  Topology one = makeDgxH100();
  SimResult r;
  Status s = simulateInNetwork(one, PlanAlgo::NvlsTree, allreduceArgs(8, 1024, 256), tribFloat32, &r);
  EXPECT_NE(s.message().find("one NVLink domain (use nvls)"), std::string::npos) << s.message();
}

// nvls_tree on `system` (without SHARP) at `bytes`, replayed (with opt) against its model: within
// [0.95, maxRatio] of it, and its busiest link a NIC's, busy more than minBusy of the replay.
static SimResult nvlsTreeAgainstModel(const char* system, uint64_t bytes, double maxRatio, double minBusy,
                                      const SimOptions& opt = {}) {
  Topology t;
  EXPECT_TRUE(generateTopology(system, {"sharp=0"}, &t).ok()) << system;
  Planner p(t);
  const int n = static_cast<int>(t.rankNodes().size());
  const Plan tree = modelPlan(p, PlanAlgo::NvlsTree, bytes, n);
  EXPECT_GT(tree.predictedUs, 0) << system;
  SimResult r;
  EXPECT_TRUE(simulateInNetwork(t, PlanAlgo::NvlsTree, allreduceArgs(n, bytes / 4, tree.chunkElems),
                                tribFloat32, &r, {}, opt)
                  .ok())
      << system;
  EXPECT_LT(r.timeUs / tree.predictedUs, maxRatio)
      << system << ": simulated " << r.timeUs << " us, model " << tree.predictedUs;
  EXPECT_GT(r.timeUs / tree.predictedUs, 0.95)
      << system << ": simulated " << r.timeUs << " us, model " << tree.predictedUs;
  EXPECT_FALSE(r.busiest.empty()) << system;
  if (!r.busiest.empty()) {
    EXPECT_NE(r.busiest[0].name.find(".nic"), std::string::npos) << r.busiest[0].name;
    EXPECT_GT(r.busiest[0].utilization, minBusy) << r.busiest[0].name;
  }
  return r;
}

// nvls_tree's connections hold NCCL's eight chunks (NCCL_STEPS; more where small chunks need more to
// cover a round trip): a member's send of chunk j waits until its receiver has passed chunk j - 8 on.
// Without that bound, on 32 DGX H100 at 1 GiB (the NICs bound the level) every leaf's partials went
// out as soon as NVLS made them, ahead of the results coming down, and the NICs idled at the end:
// busy 89.4%, the replay 1.08x the model. With it they interleave: busy 94.6%, 1.025x (95.1% and
// 1.020x since the ports serve in turns, below).
TEST(Simulator, NvlsTreeSlotsKeepTheNicsBusy) { nvlsTreeAgainstModel("dgx-h100:32", 1ull << 30, 1.05, 0.93); }

// nvls_tree's ports: a message takes the last switch's port into its receiver's NIC when it gets
// there, in turns with the other tree neighbours' (replay::FairQueue, as the step replay's ports).
// Booked through when sent, it held the port from when its head would reach it, ahead of messages
// sent after it that got there first: 16 DGX H100 at 256 MiB replayed 1.059x the model, the busiest
// NIC busy 86.7%; now 1.034x and 88.7% (taken on arrival first come first served: 1.040x, 88.2%).
// The ports' turns are the across stage's, which every domain's class shares: the replay of one
// domain per class is the full one.
TEST(Simulator, NvlsTreePortsServeTheirSendersInTurn) {
  const SimResult r = nvlsTreeAgainstModel("dgx-h100:16", 256ull << 20, 1.045, 0.88);
  SimOptions every;
  every.symmetry = false;
  const SimResult full = nvlsTreeAgainstModel("dgx-h100:16", 256ull << 20, 1.045, 0.88, every);
  EXPECT_EQ(r.timeUs, full.timeUs);
  EXPECT_EQ(r.messages, full.messages);
}

// The ring all-reduce replayed on one period of alike ranks (a rack; sim_plan.cpp's quotient):
// bit for bit the full replay where the shift by a rack maps everything onto alike things (racks
// of one two-tier fat tree, equal blocks); a bracket of it where the hops out of the racks differ
// (a three-tier tree's pods, a partial last pod) or the blocks differ by an element; the full
// replay where racks are not alike (a slower NVLink in rack 1) or the ranks are not whole racks (the
// only bracket, 2-rank windows whose hops out are NVLink or network hops, is far too wide).
TEST(Simulator, RingQuotientEqualsOrBracketsTheFullReplay) {
  struct Case {
    std::string system;
    std::vector<std::string> options;
    uint64_t count;
    bool slowLink, exact, reduced;
    int ranks = 0;      // 0: every GPU
    int replayed = 72;  // ranks in the window
  };
  const Case cases[] = {
      {"nvl72-cluster:2", {}, 144 * 1024, false, true, true},
      {"nvl72-cluster:4", {}, 288 * 4096, false, true, true},
      {"nvl72-cluster:4", {}, 2 << 20, false, false, true},  // 8 MiB: blocks of two sizes
      {"nvl72-cluster:9", {"tiers=3", "radix=4"}, 648 * 256, false, false, true},  // pods of 2 racks
      // Two whole pods of 4 racks: the hops out of a pod are all alike, so a pod is the period
      // (one class), not a rack (two: within a pod and across).
      {"nvl72-cluster:8", {"tiers=3", "radix=8"}, 576 * 256, false, true, true, 0, 288},
      {"nvl72-cluster:4", {}, 288 * 1024, true, false, false},
      {"nvl72-cluster:2", {}, 100 * 1024, false, false, false, 100},
  };
  for (const Case& c : cases) {
    Topology t;
    ASSERT_TRUE(generateTopology(c.system, c.options, &t).ok()) << c.system;
    if (c.slowLink) {  // one GPU of rack 1 on a slower NVLink: rack 1 is like no other
      const int gpu = t.find("r1.gpu3"), sw = t.find("r1.nvsw");
      for (auto [lid, nb] : t.adjacent(gpu))
        if (nb == sw) t.link(lid).bwAB /= 2, t.link(lid).bwBA /= 2;
    }
    Planner p(t);
    // At Simple's step costs: LL's are the bare hops, and its faster steps widen this bracket
    // (pods of 2 racks) past 1% (a full replay then, as in the last case).
    ASSERT_TRUE(p.setOverrides("", "", "Simple").ok());
    PlanRequest req =
        deviceAllReduce(c.count * 4, c.ranks ? c.ranks : static_cast<int>(t.rankNodes().size()));
    SimOptions every;
    every.symmetry = false;
    PlannedSim reduced, full;
    ASSERT_TRUE(simulatePlanned(p, req, PlanAlgo::Ring, &reduced).ok()) << c.system;
    ASSERT_TRUE(simulatePlanned(p, req, PlanAlgo::Ring, &full, {}, every).ok()) << c.system;
    const std::string what = c.system + " " + std::to_string(c.count) + ": " + reduced.sim.reduction;
    EXPECT_EQ(full.sim.replayedRanks, 0) << what;
    // Every rank's end: the last of them is the call's, every one after the launch.
    ASSERT_EQ(full.sim.rankEndUs.size(), static_cast<size_t>(req.nranks)) << what;
    EXPECT_EQ(full.sim.rankEndFirst, 0) << what;
    EXPECT_DOUBLE_EQ(*std::max_element(full.sim.rankEndUs.begin(), full.sim.rankEndUs.end()), full.sim.timeUs)
        << what;
    EXPECT_GT(*std::min_element(full.sim.rankEndUs.begin(), full.sim.rankEndUs.end()),
              CostConstants::defaults().launchUs)
        << what;
    if (!c.reduced) {
      EXPECT_EQ(reduced.sim.replayedRanks, 0) << what;
      EXPECT_EQ(reduced.sim.reduction.rfind("full replay (no ring quotient", 0), 0u) << what;
      EXPECT_EQ(reduced.sim.timeUs, full.sim.timeUs) << what;
      continue;
    }
    EXPECT_EQ(reduced.sim.replayedRanks, c.replayed) << what;
    EXPECT_EQ(reduced.sim.rankEndUs.size(), static_cast<size_t>(c.replayed)) << what;
    if (c.exact) {
      EXPECT_EQ(reduced.sim.timeLowUs, 0) << what;
      EXPECT_EQ(reduced.sim.timeUs, full.sim.timeUs) << what;  // exact: bit for bit
      EXPECT_EQ(reduced.sim.busbwGBps, full.sim.busbwGBps) << what;
    } else {
      EXPECT_GT(reduced.sim.timeLowUs, 0) << what;
      EXPECT_LE(reduced.sim.timeLowUs, full.sim.timeUs) << what;
      EXPECT_GE(reduced.sim.timeUs, full.sim.timeUs) << what;
      EXPECT_LT(reduced.sim.timeUs, 1.01 * reduced.sim.timeLowUs) << what;
    }
  }
}

TEST(Simulator, OneShotAndTwoShotReplaysAgreeWithTheModelOnAHost) {
  // Processes of one host (the planner maps them all to the CPU node): the window schedules as
  // the communicator runs them, windows of two cells of the default window's size.
  Topology host;
  ASSERT_TRUE(parseTopology("node cpu0 cpu\n", &host).ok());
  Planner p(host);
  const uint64_t cell = CostConstants::defaults().boardChunkBytes;
  for (int n : {2, 4, 8}) {
    for (PlanAlgo a : {PlanAlgo::OneShot, PlanAlgo::TwoShot}) {
      for (uint64_t bytes : {64ull << 10, 1ull << 20, 8ull << 20}) {
        if (a == PlanAlgo::OneShot && bytes > cell) continue;  // one cell at most
        Plan plan = modelPlan(p, a, bytes, n);
        ASSERT_GT(plan.predictedUs, 0) << planAlgoName(a) << " " << n;
        CollArgs args = allreduceArgs(n, bytes / 4, plan.chunkElems);
        args.windowElems = 2 * cell / 4;
        SimResult r;
        Status s = simulate(host, *findAlgorithm(Coll::AllReduce, toScheduleAlgo(a)), args, tribFloat32, &r,
                            std::vector<int>(n, 0));
        ASSERT_TRUE(s.ok()) << s.message();
        // Signals are the only messages: 2 exchanges per chunk and one at the end (one-shot: one,
        // and one more at the end from kOneShotExposeFromElems) of n(n-1).
        const uint64_t exchanges =
            a == PlanAlgo::OneShot ? (oneShotExposes(args) ? 2 : 1) : 2 * ((bytes - 1) / cell + 1) + 1;
        EXPECT_EQ(r.messages, exchanges * n * (n - 1)) << planAlgoName(a);
        // Within 5% for one chunk. Over several chunks two-shot's replay runs up to ~17% longer
        // than the model's chunks-one-after-another sum at 2 and 4 ranks (8 MiB: 785 vs 669 us at
        // 2 ranks), since it stages only the peers' slices; the gap is left for the model work of
        // the next-scale issue (docs/PLANNER.md), and bounded here so it cannot grow unseen.
        // One-shot's end exchange (from kOneShotExposeFromElems) costs the replay an in-node
        // signal's software step (stepOverheadUs) and the model an exchange's latency (aIn, which
        // adds the node's link latency): 17.3 vs 18.4 us at 2 ranks, 64 KiB. Left, with the other
        // gaps, to the model work of the next-scale issue; bounded here.
        const bool endExchange = a == PlanAlgo::OneShot && exchanges == 2;
        const double tolerance = exchanges > 3 ? 0.20 : endExchange ? 0.07 : 0.05;
        EXPECT_NEAR(r.timeUs, plan.predictedUs, plan.predictedUs * tolerance)
            << planAlgoName(a) << " " << n << " ranks " << bytes << " B";
      }
    }
  }
}

TEST(Simulator, WindowStepsOfGpusCrossNvLink) {
  // One-shot on a DGX H100: every GPU reads the 7 others' windows through the NVSwitch, in rank
  // order (all at once from the same window: that window's link is the bottleneck).
  Topology t = makeDgxH100();
  CollArgs a = allreduceArgs(8, 256u << 10, 1u << 16);  // 1 MiB
  a.windowElems = 2 * a.count;
  SimResult r;
  ASSERT_TRUE(simulate(t, *findAlgorithm(Coll::AllReduce, Algo::OneShot), a, tribFloat32, &r).ok());
  ASSERT_FALSE(r.busiest.empty());
  EXPECT_NE(r.busiest[0].name.find("(nvlink)"), std::string::npos) << r.busiest[0].name;
  // Each window's link carries 7 reads of S.
  const double B = 450 * CostConstants::defaults().eff[static_cast<int>(LinkType::NvLink)] * 1e3;
  EXPECT_NEAR(r.busiest[0].bytes, 7 * 1048576.0, 1.0);
  EXPECT_GT(r.timeUs, 7 * 1048576.0 / B);
}

// Rank 0 fills its window and signals rank 1, which waits and reads it; `extraWait` makes rank 1
// wait for a second signal that never comes.
// The replay of an LL plan moves a rank no faster than LL's ceiling (SimOptions::rankCeilingGBps,
// from the plan's fabric), as the model prices it: on one DGX H100 a 16 MiB ring/LL at 141 GB/s a
// rank, not at half of NVLink's 370 GB/s, and both within 10% of their prediction.
// The ring all-reduce of `bytes` on the first n GPUs of t at protocol `proto`, as trib-plan
// --simulate --algo ring --proto PROTO replays it.
static PlannedSim replayRing(const Topology& t, const char* proto, int n, uint64_t bytes,
                             const SimOptions& o = {}) {
  Planner p(t);
  EXPECT_TRUE(p.setOverrides("ring", "", proto).ok());
  PlanRequest req = deviceAllReduce(bytes, n);
  PlannedSim r;
  EXPECT_TRUE(simulatePlanned(p, req, PlanAlgo::Ring, &r, {}, o).ok());
  return r;
}

TEST(Sim, ReplayKeepsTheProtocolsCeiling) {
  Topology capped = makeDgxH100(), free = capped;
  for (int i = 0; i < free.numNodes(); ++i) free.node(i).arch = GpuArch::Unknown;
  double busbw[2] = {0, 0};
  for (int i = 0; i < 2; ++i) {
    const PlannedSim r = replayRing(i == 0 ? capped : free, "LL", 8, 16 << 20);
    ASSERT_EQ(r.protocol, Protocol::LL);
    ASSERT_GT(r.predictedUs, 0);
    EXPECT_NEAR(r.sim.timeUs / r.predictedUs, 1.0, 0.10) << i;
    busbw[i] = r.sim.busbwGBps;
  }
  EXPECT_LT(busbw[0], 141.0);
  EXPECT_GT(busbw[0], 0.85 * 141.0);
  EXPECT_GT(busbw[1], 1.2 * busbw[0]);
}

// The ring's steps between domains are priced at the mean latency of all the boundaries it
// crosses (FabricView::latRingInterUs), not at the first one's: on five DGX H100 (nodes 0-3 behind
// one leaf, node 4 behind another) the first pair of nodes shares a leaf, but the ring's steps
// from node 3 to 4 and back from 4 to 0 cross a spine. Latency-bound (64 KiB), the model priced
// the first pair's step for all five and was 0.95x its replay with LL (0.97x with LL128); now
// they agree within 3%.
TEST(Sim, RingCrossingsArePricedAcrossEveryBoundary) {
  Topology t;
  ASSERT_TRUE(generateTopology("dgx-h100:8", {}, &t).ok());
  for (const char* proto : {"LL", "LL128"}) {
    const PlannedSim r = replayRing(t, proto, 40, 64 << 10);
    ASSERT_GT(r.predictedUs, 0) << proto;
    EXPECT_NEAR(r.sim.timeUs / r.predictedUs, 1.0, 0.03)
        << proto << ": simulated " << r.sim.timeUs << " us, model " << r.predictedUs;
  }
}

// rhd on 40 GPUs of five DGX H100 on a rail-optimized fabric: 8 folding ranks (the odd GPUs of the
// first two nodes stay), so steps across nodes join GPUs of different indices, and PXN relays each
// through the GPU of the sender's node on the receiver's rail: the odd GPUs' NICs of the last node
// carry two GPUs' steps. The model put every step on its sender's own NIC and was 0.71x its replay.
// rhd's replay at Simple of an all-reduce of `bytes` on the first n GPUs of `system`, within `tol`
// of the model.
static void expectRhdNearTheModel(const char* system, std::vector<std::string> params, int n, uint64_t bytes,
                                  double tol) {
  Topology t;
  ASSERT_TRUE(generateTopology(system, params, &t).ok()) << system;
  Planner p(t);
  ASSERT_TRUE(p.setOverrides("", "", "Simple").ok());
  PlannedSim r;
  ASSERT_TRUE(simulatePlanned(p, deviceAllReduce(bytes, n), PlanAlgo::Rhd, &r).ok()) << system;
  ASSERT_GT(r.predictedUs, 0) << system;
  EXPECT_NEAR(r.sim.timeUs / r.predictedUs, 1.0, tol)
      << system << ": simulated " << r.sim.timeUs << " us, model " << r.predictedUs;
}

TEST(Sim, RhdStepsAcrossRailsLoadTheRelaysNic) {
  expectRhdNearTheModel("dgx-h100:8", {"rails=1"}, 40, 16u << 20, 0.03);
}

// A step through a PXN relay takes the NVLink hop into the relay before the relay's NIC
// (FabricView::crossRailLatUs): latency-bound (8 B) on 64 GPUs of eight DGX H100 on a rail-optimized
// fabric, rhd's and the tree's steps between GPUs of different rails. The model priced the far
// steps at a relayed route and the near ones at a same-rail one: rhd 0.871x its replay, the tree
// 0.941x.
TEST(Sim, StepsThroughARelayPayItsNvlinkHop) {
  Topology t;
  ASSERT_TRUE(generateTopology("dgx-h100:8", {"rails=1"}, &t).ok());
  Planner p(t);
  for (PlanAlgo a : {PlanAlgo::Rhd, PlanAlgo::Tree}) {
    PlannedSim r;
    ASSERT_TRUE(simulatePlanned(p, deviceAllReduce(8, 64), a, &r).ok()) << planAlgoName(a);
    ASSERT_GT(r.predictedUs, 0) << planAlgoName(a);
    EXPECT_NEAR(r.sim.timeUs / r.predictedUs, 1.0, 0.03)
        << planAlgoName(a) << ": simulated " << r.sim.timeUs << " us, model " << r.predictedUs;
  }
}

// Without PXN a step between GPUs of different rails crosses a spine, one between same-rail GPUs
// stays on its rail's leaf (FabricView::crossesRails). The model priced every step beyond the next
// node at the farthest rank's route, on another rail, and every step to the next node at a
// same-rail one: 8 B on 64 GPUs of eight DGX A100 (rhd's steps across all join same-index GPUs)
// replayed 0.849x (rhd) and 0.931x (tree) of it; on 16 GPUs of two DGX H100 the tree's edges
// between rails 1.119x.
TEST(Sim, StepsBetweenRailsWithoutPxnPayTheSpine) {
  struct Case {
    const char* system;
    int ranks;
    PlanAlgo algo;
  };
  for (const Case& c : {Case{"dgx-a100:8", 64, PlanAlgo::Rhd}, Case{"dgx-a100:8", 64, PlanAlgo::Tree},
                        Case{"dgx-h100:2", 16, PlanAlgo::Tree}}) {
    Topology t;
    ASSERT_TRUE(generateTopology(c.system, {"rails=1", "pxn=0"}, &t).ok()) << c.system;
    Planner p(t);
    PlannedSim r;
    ASSERT_TRUE(simulatePlanned(p, deviceAllReduce(8, c.ranks), c.algo, &r).ok()) << c.system;
    ASSERT_GT(r.predictedUs, 0) << c.system;
    EXPECT_NEAR(r.sim.timeUs / r.predictedUs, 1.0, 0.03)
        << c.system << " " << planAlgoName(c.algo) << ": simulated " << r.sim.timeUs << " us, model "
        << r.predictedUs;
  }
}

// Direct through PXN relays at LL's ceiling (20.4 GB/s on three or more nodes, below a NIC's LL
// rate, so NVLink is no faster than a NIC): a GPU's NVLink port carries the first legs it sends or
// forwards besides its own domain's blocks (FabricView::relayedNvlinkBlocks; on 8 + 8 + 4 GPUs of
// `dgx-h100:4,rails=1` the relay of rail j < 4 takes 7 local blocks and 14 legs, against the 16
// blocks a NIC sends). The model counted a rank's own blocks: 16 MiB replayed 1.303x it on 20 and
// 24 GPUs, 1.160x on 32.
TEST(Sim, DirectThroughRelaysCarriesTheLegsOnNvlink) {
  Topology t;
  ASSERT_TRUE(generateTopology("dgx-h100:4", {"rails=1"}, &t).ok());
  for (int n : {20, 24, 32}) {
    Planner p(t);
    ASSERT_TRUE(p.setOverrides("direct", "", "LL").ok());
    PlannedSim r;
    ASSERT_TRUE(simulatePlanned(p, deviceAllReduce(16u << 20, n), PlanAlgo::Direct, &r).ok()) << n;
    ASSERT_EQ(r.protocol, Protocol::LL);
    ASSERT_GT(r.predictedUs, 0) << n;
    EXPECT_NEAR(r.sim.timeUs / r.predictedUs, 1.0, 0.03)
        << n << " GPUs: simulated " << r.sim.timeUs << " us, model " << r.predictedUs;
  }
}

// Through the network switches each chunk leaves the GPU's first hop (PCIe on a DGX) a chunk
// overhead after the one before, and the NIC drains them at its own rate: where PCIe is faster,
// the overheads hide behind the NIC's bytes (FabricView::switchFeedGBps). The model added every
// chunk's overhead to the NIC's bytes: on four DGX H100 with 200 Gb/s NICs and SHARP, switch 1 MiB
// replayed 0.895x it, nvls_switch 4 MiB 0.897x, hier_switch 16 MiB 0.938x.
TEST(Sim, SwitchChunkOverheadsHideBehindTheNic) {
  Topology t;
  ASSERT_TRUE(generateTopology("dgx-h100:4", {"nic_gbps=25", "sharp=1"}, &t).ok());
  struct Case {
    PlanAlgo algo;
    uint64_t bytes;
  };
  for (const Case& c : {Case{PlanAlgo::Switch, 1u << 20}, Case{PlanAlgo::NvlsSwitch, 4u << 20},
                        Case{PlanAlgo::HierSwitch, 16u << 20}}) {
    Planner p(t);
    PlannedSim r;
    ASSERT_TRUE(simulatePlanned(p, deviceAllReduce(c.bytes, 32), c.algo, &r).ok()) << planAlgoName(c.algo);
    ASSERT_GT(r.predictedUs, 0) << planAlgoName(c.algo);
    EXPECT_NEAR(r.sim.timeUs / r.predictedUs, 1.0, 0.04)
        << planAlgoName(c.algo) << ": simulated " << r.sim.timeUs << " us, model " << r.predictedUs;
  }
}

// rhd on 24 GPUs of three DGX H100: ranks 0-15 fold in pairs over NVLink and the survivors' NICs
// carry S/2 + S/4 each way a phase. A survivor's first network step waits for half the fold (the
// half it sends first), which the walk's chain knew and its links bound did not: 64 MiB replayed
// 1.129x the model, 1.084x with it (16 MiB 1.175x -> 1.122x: the rest of the gap is not traced
// into the model, docs/PLANNER.md).
TEST(Sim, FoldingRanksNetworkStepsWaitForHalfTheFold) {
  expectRhdNearTheModel("dgx-h100:3", {}, 24, 64u << 20, 0.10);
}

// Hierarchical's level across runs d rings at once, ring l joining GPU l of each node; the slowest
// paces it (FabricView::latLevelInterUs). On five DGX H100 (nodes 0-3 behind one leaf) every ring
// crosses a spine from node 3 to 4 and back to 0; on eight DGX A100, whose leaves take 20 NICs
// (node 2's NICs 0-3 on the first leaf, 4-7 on the second), the rings cross spines at different
// nodes, some more often than ring 0. The model priced every step at rank 0's step to the next
// node: 1.080x and 1.114x its replay at 1 MiB.
TEST(Sim, HierarchicalLevelAcrossIsPacedByItsSlowestRing) {
  struct Case {
    const char* system;
    int ranks;
  };
  for (const Case& c : {Case{"dgx-h100:8", 40}, Case{"dgx-a100:8", 64}}) {
    Topology t;
    ASSERT_TRUE(generateTopology(c.system, {}, &t).ok()) << c.system;
    Planner p(t);
    PlannedSim r;
    ASSERT_TRUE(simulatePlanned(p, deviceAllReduce(1u << 20, c.ranks), PlanAlgo::Hierarchical, &r).ok())
        << c.system;
    ASSERT_GT(r.predictedUs, 0) << c.system;
    EXPECT_NEAR(r.sim.timeUs / r.predictedUs, 1.0, 0.05)
        << c.system << ": simulated " << r.sim.timeUs << " us, model " << r.predictedUs;
  }
}

// PXN on a rail-optimized fabric: the rail ring's steps between nodes join GPUs of different
// indices, so they cross NVLink to the GPU on the next rank's rail and leave by its NIC, in two
// legs (the relay takes the first whole, its proxy sends the second). No spine carries a byte,
// every relay's PCIe link out carries what its NIC sends, the legs are one message each, and the
// replay agrees with the model (which prices the relay's NVLink port and its store-and-forward).
TEST(Simulator, PxnRelaysKeepTheRailRingOnItsRails) {
  Topology t;
  ASSERT_TRUE(generateTopology("dgx-h100:2", {"rails=1"}, &t).ok());
  Topology flat;
  ASSERT_TRUE(generateTopology("dgx-h100:2", {}, &flat).ok());
  // Rail-only (no spines): the same routes for GPU pairs, so the same replay and prediction.
  Topology railOnly;
  ASSERT_TRUE(generateTopology("dgx-h100:2", {"rails=2"}, &railOnly).ok());
  const PlannedSim alone = replayRing(railOnly, "Simple", 16, 16 << 20);
  uint64_t messages[2] = {0, 0};
  SimOptions o;
  o.topLinks = 1 << 20;  // every link that carried a byte
  for (int i = 0; i < 2; ++i) {
    const PlannedSim r = replayRing(i == 0 ? t : flat, "Simple", 16, 16 << 20, o);
    ASSERT_GT(r.predictedUs, 0);
    messages[i] = r.sim.messages;
    if (i == 1) break;
    EXPECT_DOUBLE_EQ(alone.sim.timeUs, r.sim.timeUs);
    EXPECT_DOUBLE_EQ(alone.predictedUs, r.predictedUs);
    EXPECT_NEAR(r.sim.timeUs / r.predictedUs, 1.0, 0.10);
    double nicOut = 0, pcieOut = 0;
    for (const LinkLoad& l : r.sim.busiest) {
      EXPECT_EQ(l.name.find("spine"), std::string::npos) << l.name;
      if (l.name.rfind("n0.nic3 -> ", 0) == 0) nicOut = l.bytes;
      if (l.name.rfind("n0.gpu3 -> n0.pcie3", 0) == 0) pcieOut = l.bytes;
    }
    EXPECT_GT(nicOut, 0);
    EXPECT_DOUBLE_EQ(pcieOut, nicOut);
  }
  EXPECT_EQ(messages[0], messages[1]);  // the same schedule: a relayed message counts once
}

// Through PXN relays a step's first leg crosses NVLink into the relay GPU, beside that GPU's own
// steps. Under LL a GPU's NVLink and its NIC run at the same ceiling, so on three nodes of rails
// (24 GPUs of `dgx-h100:4,rails=1`, 16 MiB) the relays' NVLink ports are the busiest links of the
// replay: the model must not end before their bytes do, and the replay stays within
// [minRatio, maxRatio] of the model.
static void expectRelayLegsPriced(const char* algo, PlanAlgo a, double minRatio, double maxRatio) {
  Topology t;
  ASSERT_TRUE(generateTopology("dgx-h100:4", {"rails=1"}, &t).ok());
  Planner p(t);
  ASSERT_TRUE(p.setOverrides(algo, "", "LL").ok());
  SimOptions o;
  o.topLinks = 1 << 20;
  PlannedSim r;
  ASSERT_TRUE(simulatePlanned(p, deviceAllReduce(16u << 20, 24), a, &r, {}, o).ok());
  ASSERT_GT(r.predictedUs, 0);
  double nvlinkBusy = 0;
  for (const LinkLoad& l : r.sim.busiest)
    if (l.name.find("(nvlink)") != std::string::npos) nvlinkBusy = std::max(nvlinkBusy, l.busyUs);
  ASSERT_GT(nvlinkBusy, 0);
  EXPECT_GE(r.predictedUs, nvlinkBusy) << algo;
  EXPECT_GE(r.sim.timeUs / r.predictedUs, minRatio) << algo;
  EXPECT_LE(r.sim.timeUs / r.predictedUs, maxRatio) << algo;
}

// rhd: the model said 2,100 us against a port busy 2,364 us (the replay 1.33x) before it counted
// the legs, 1.18x with them (the rest: NVLink steps that drain after the network's last chunk).
TEST(Simulator, RhdRelayLegsLoadTheRelaysNvlinkPort) {
  expectRelayLegsPriced("rhd", PlanAlgo::Rhd, 0.9, 1.25);
}

// The double tree's relayed edges: 1,693.9 us against 2,056 (1.24x) before, 0.999 with them.
TEST(Simulator, TreeRelayLegsLoadTheRelaysNvlinkPort) {
  expectRelayLegsPriced("tree", PlanAlgo::Tree, 0.9, 1.1);
}

// hierarchical in pipeline slices (algo::hierarchicalSliceElems) on three DGX B200 without SHARP:
// later slices' domain reduce-scatters run while earlier ones cross the network, so the NICs, the
// busier link here, are busy nearly all the call (96%); in one pass they idled through the whole
// reduce-scatter (74%: 5,116 us against 3,963 now).
TEST(Simulator, HierarchicalSlicesKeepTheNicsBusy) {
  Topology t;
  ASSERT_TRUE(generateTopology("dgx-b200:3", {"sharp=0"}, &t).ok());
  Planner p(t);
  ASSERT_TRUE(p.setOverrides("hierarchical", "", "Simple").ok());
  SimOptions o;
  o.topLinks = 1 << 20;
  PlannedSim r;
  ASSERT_TRUE(simulatePlanned(p, deviceAllReduce(1ull << 30, 24), PlanAlgo::Hierarchical, &r, {}, o).ok());
  double nicBusy = 0;
  for (const LinkLoad& l : r.sim.busiest)
    if (l.name.find("(net)") != std::string::npos) nicBusy = std::max(nicBusy, l.busyUs);
  ASSERT_GT(nicBusy, 0);
  EXPECT_GE(nicBusy / r.sim.timeUs, 0.9);
  EXPECT_NEAR(r.sim.timeUs / r.predictedUs, 1.0, 0.1);
}

static bool extraWait = false;
static Generator<Step> signalGen(CollArgs a, int rank) {
  const Region win{Buf::Window, 0, a.count};
  if (rank == 0) {
    co_yield Step::copy(Region{Buf::Input, 0, a.count}, win);
    co_yield Step::signal(1);
  } else {
    co_yield Step::wait(0);
    co_yield Step::get(0, win, Region{Buf::Output, 0, a.count});
    if (extraWait) co_yield Step::wait(0);
  }
}

TEST(Simulator, WaitEndsWhenTheMatchingSignalArrives) {
  AlgoInfo algo{Algo::OneShot, Coll::AllReduce, always, none, signalGen};
  Topology t = makeUniform(2, 10, 3);  // two GPUs, 3 us per link
  const CostConstants& k = CostConstants::defaults();
  CollArgs a = allreduceArgs(2, 1u << 20, 1u << 20);
  a.windowElems = 2 * a.count;
  SimResult r;
  extraWait = false;
  ASSERT_TRUE(simulate(t, algo, a, tribFloat32, &r).ok());
  // Copy on rank 0, the signal's latency (2 links + the network step), then the read over both links.
  const double S = 4.0 * a.count, B = 10 * k.eff[static_cast<int>(LinkType::Net)] * 1e3;
  const double expect =
      S / (k.gpuReduceGBps * 1e3) + (6 + k.stepOverheadUs + k.netStepOverheadUs) + (6 + S / B);
  EXPECT_NEAR(r.timeUs - k.launchUs, expect, expect * 0.01);
  extraWait = true;
  Status s = simulate(t, algo, a, tribFloat32, &r);
  EXPECT_EQ(s.code(), tribInternalError);
  EXPECT_NE(s.message().find("rank 1 waits at wait"), std::string::npos) << s.message();
}

TEST(Simulator, SwitchSchedulesReplaysAgreeWithTheModel) {
  // Switch: every rank's SwitchReduce is one rendezvous; hier_switch: rings in each domain around
  // one rendezvous per slice group (one member per domain).
  struct Case {
    Topology t;
    PlanAlgo a;
    double tol;
  };
  Topology uni = makeUniform(16, 50, 1, true), racks = makeNvl72Cluster(2), dgx = makeDgxH100(2);
  // hier_switch: as the Hierarchical test, the model does not credit the rings' overlap of slices.
  const std::vector<Case> cases = {{uni, PlanAlgo::Switch, 0.15},
                                   {racks, PlanAlgo::Switch, 0.15},
                                   {racks, PlanAlgo::HierSwitch, 0.30},
                                   {dgx, PlanAlgo::HierSwitch, 0.30}};
  for (const Case& c : cases) {
    Planner p(c.t);
    const int n = static_cast<int>(c.t.rankNodes().size());
    for (uint64_t bytes : {1ull << 20, 16ull << 20}) {
      Plan plan = modelPlan(p, c.a, bytes, n);
      ASSERT_GT(plan.predictedUs, 0) << c.t.name << " " << planAlgoName(c.a);
      CollArgs args = allreduceArgs(n, bytes / 4, plan.chunkElems);
      args.ranksPerDomain = plan.ranksPerDomain;
      SimResult r;
      Status s = simulate(c.t, *findAlgorithm(Coll::AllReduce, toScheduleAlgo(c.a)), args, tribFloat32, &r);
      ASSERT_TRUE(s.ok()) << s.message();
      EXPECT_NEAR(r.timeUs, plan.predictedUs, plan.predictedUs * c.tol)
          << c.t.name << " " << planAlgoName(c.a) << " " << bytes << " B";
    }
  }
}

// A broken schedule: rank 0 waits for a message rank 1 never sends.
static Generator<Step> brokenGen(CollArgs a, int rank) {
  if (rank == 0) co_yield Step::recv(1, Region{Buf::Output, 0, a.count});
}

TEST(Simulator, ScheduleThatCannotFinishIsAnErrorNotAHang) {
  AlgoInfo broken{Algo::Ring, Coll::AllReduce, always, none, brokenGen};
  Topology t = makeUniform(2, 10, 1);
  SimResult r;
  Status s = simulate(t, broken, allreduceArgs(2, 16, 16), tribFloat32, &r);
  EXPECT_EQ(s.code(), tribInternalError);
  EXPECT_NE(s.message().find("rank 0 waits at recv(from 1"), std::string::npos) << s.message();
  s = simulate(t, *findAlgorithm(Coll::AllReduce, Algo::Ring), allreduceArgs(3, 16, 16), tribFloat32, &r);
  EXPECT_NE(s.message().find("has 2 GPUs/CPUs for ranks but 3"), std::string::npos) << s.message();
}

// The replay's per-pair state was compacted (2026-12-04: message queues as vectors, routes in a
// pool, 56-byte messages, peers indexed by rank) so that direct fits at 4,608 ranks. Pinned to
// the replay before that change, bit for bit (`trib-plan --gen G --bytes B --simulate --algo A`):
// direct with every rank's peers indexed by rank, and the window schedules' transfers and signals.
TEST(Simulator, CompactedReplayEqualsTheReplayBeforeIt) {
  struct Case {
    const char* gen;
    int nranks;
    uint64_t bytes;
    PlanAlgo algo;
    double timeUs;
    uint64_t steps, messages;
  };
  const Case cases[] = {
      {"nvl72-cluster:2", 144, 8u << 20, PlanAlgo::Direct, 0x1.6523c760d7a41p+7, 82512, 41184},
      {"uniform:64", 33, 1u << 20, PlanAlgo::Direct, 0x1.b9239fc168b04p+5, 4257, 2112},
      {"dgx-h100", 8, 256u << 10, PlanAlgo::OneShot, 0x1.f576ef5c0f914p+4, 296, 168},
      {"dgx-h100", 8, 1u << 20, PlanAlgo::TwoShot, 0x1.13b5448851f85p+5, 478, 280},
  };
  for (const Case& c : cases) {
    Topology t;
    ASSERT_TRUE(generateTopology(c.gen, {}, &t).ok()) << c.gen;
    Planner planner(t);
    PlanRequest req = deviceAllReduce(c.bytes, c.nranks);
    double predictedUs = 0;
    CollArgs args = plannedArgs(planner, req, c.algo, &predictedUs);
    // The figures were recorded with direct's flat send order (rank + k off powers of two); the
    // planner now gives direct the domain size across racks, for its rack order.
    args.ranksPerDomain = 0;
    const AlgoInfo* info = findAlgorithm(req.coll, toScheduleAlgo(c.algo));
    ASSERT_TRUE(info) << planAlgoName(c.algo);
    // And with each pair on its one hashed route, as the replay routed then (SimOptions::spreadRoutes).
    SimOptions o;
    o.spreadRoutes = false;
    SimResult r;
    Status s = simulate(t, *info, args, req.dtype, &r, planner.rankNodes(req.memory, req.nranks), o);
    ASSERT_TRUE(s.ok()) << c.gen << ": " << s.message();
    EXPECT_EQ(r.timeUs, c.timeUs) << c.gen << " " << planAlgoName(c.algo);
    EXPECT_EQ(r.steps, c.steps) << c.gen << " " << planAlgoName(c.algo);
    EXPECT_EQ(r.messages, c.messages) << c.gen << " " << planAlgoName(c.algo);
  }
}

// Direct's 16 MiB all-reduce on the first n GPUs of `system`, replayed in the planner's rack order
// (its ranksPerDomain, expected to be perDomain) and in the flat order (ranksPerDomain 0).
struct DirectOrders {
  double predictedUs = 0, rackUs = 0, flatUs = 0;
};
static DirectOrders replayDirectOrders(const char* system, std::vector<std::string> params, int n,
                                       int perDomain) {
  DirectOrders o;
  Topology t;
  EXPECT_TRUE(generateTopology(system, params, &t).ok()) << system;
  Planner planner(t);
  PlanRequest req = deviceAllReduce(16u << 20, n);
  CollArgs args = plannedArgs(planner, req, PlanAlgo::Direct, &o.predictedUs);
  EXPECT_GT(o.predictedUs, 0) << system;
  EXPECT_EQ(args.ranksPerDomain, perDomain) << system;
  const AlgoInfo* info = findAlgorithm(Coll::AllReduce, Algo::Direct);
  const std::vector<int> nodes = planner.rankNodes(req.memory, req.nranks);
  SimResult rack, flat;
  EXPECT_TRUE(simulate(t, *info, args, req.dtype, &rack, nodes).ok()) << system;
  args.ranksPerDomain = 0;
  EXPECT_TRUE(simulate(t, *info, args, req.dtype, &flat, nodes).ok()) << system;
  o.rackUs = rack.timeUs, o.flatUs = flat.timeUs;
  return o;
}

// Direct across racks (src/algo/direct.cpp PeerOrder): in the flat order (rank + k on 144 ranks)
// every rank of a rack sends to the same remote rank once its in-rack sends are posted, and that
// rank's port takes their messages one after another; the rack order sends each rank of a rack to
// a different rank of the remote rack. On one spine (no hashed routes to collide) the replay then
// agrees with the model, which assumes no incast.
TEST(Simulator, DirectRackOrderAvoidsIncastAcrossRacks) {
  const DirectOrders o = replayDirectOrders("nvl72-cluster:2", {"spines=1"}, 144, 72);
  EXPECT_NEAR(o.rackUs / o.predictedUs, 1.0, 0.10) << o.rackUs << " us, model " << o.predictedUs << " us";
  EXPECT_GT(o.flatUs, 1.25 * o.rackUs) << o.flatUs << " us flat, " << o.rackUs << " us rack order";
}

// Domains of unequal size (8 + 6 GPUs of two DGX H100): in the flat order (rank + k) every rank of
// the full node sends its remote blocks to ranks 8, 9, ..., 13 in that order, and rank 13 gets all
// eight last; the rack order pads the small node to 8 slots (steps to the two empty ones skipped),
// so at each step the full node's ranks reach different ranks of it. The replay then agrees with
// the model.
TEST(Simulator, DirectRackOrderPadsASmallerLastDomain) {
  const DirectOrders o = replayDirectOrders("dgx-h100:2", {}, 14, 8);
  EXPECT_NEAR(o.rackUs / o.predictedUs, 1.0, 0.10) << o.rackUs << " us, model " << o.predictedUs << " us";
  EXPECT_GT(o.flatUs, 1.15 * o.rackUs) << o.flatUs << " us flat, " << o.rackUs << " us rack order";
}

// Spread over the equal-cost spine links (SimOptions::spreadRoutes, as adaptive routing and packet
// spraying do), two racks' direct exchange across 36 spines replays as on one spine of the same
// total capacity, where no two pairs' routes can collide; hashing each pair onto one spine (static
// ECMP) collides and is slower.
TEST(Simulator, SprayedSpinesReplayAsOneBundle) {
  Topology spines36, spine1;
  ASSERT_TRUE(generateTopology("nvl72-cluster:2", {}, &spines36).ok());
  ASSERT_TRUE(generateTopology("nvl72-cluster:2", {"spines=1"}, &spine1).ok());
  PlanRequest req = deviceAllReduce(16u << 20, 144);
  const AlgoInfo* info = findAlgorithm(Coll::AllReduce, Algo::Direct);
  ASSERT_TRUE(info);
  auto replay = [&](const Topology& t, bool spread) {
    Planner planner(t);
    double predictedUs = 0;
    CollArgs args = plannedArgs(planner, req, PlanAlgo::Direct, &predictedUs);
    SimOptions o;
    o.spreadRoutes = spread;
    SimResult r;
    EXPECT_TRUE(simulate(t, *info, args, req.dtype, &r, planner.rankNodes(req.memory, req.nranks), o).ok());
    return r.timeUs;
  };
  const double sprayed = replay(spines36, true), one = replay(spine1, true), hashed = replay(spines36, false);
  // Not to the µs: the one spine's link is held until each message's tail (fed at one NIC's rate)
  // has left it, the group only for the message's share of its rate (sim.cpp Links::hops): 1.1%.
  EXPECT_NEAR(sprayed / one, 1.0, 0.03) << sprayed << " us over 36 spines, " << one << " us over one";
  EXPECT_GT(hashed, 1.05 * sprayed) << hashed << " us hashed, " << sprayed << " us sprayed";
}

// The grid's tree rule (docs/PLANNER.md): in posting order a rank's source link sends the leaf
// stream of one tree (its whole half of the input, ready at the start) before the other tree's
// messages up and down, so the other tree stalls and the busiest links idle a seventh of the
// replay (a fifth before the replay kept to the executor's window of steps, which holds the leaf
// stream back). With the two trees' channels served round robin (SimOptions::LinkOrder::Channels), or
// every peer (Peers), they stay busy and the replay agrees with the model's busiest-link bound.
TEST(Simulator, TreeLinksStayBusyWhenASourceLinkInterleavesItsChannels) {
  Topology t;
  ASSERT_TRUE(generateTopology("uniform:64", {"sharp=1"}, &t).ok());
  Planner planner(t);
  PlanRequest req = deviceAllReduce(256u << 20, 16);
  PlannedSim fifo, channels, peers;
  SimOptions o;
  EXPECT_EQ(o.linkOrder, SimOptions::LinkOrder::Channels);  // the default
  o.linkOrder = SimOptions::LinkOrder::Posting;
  ASSERT_TRUE(simulatePlanned(planner, req, PlanAlgo::Tree, &fifo, {}, o).ok());
  o.linkOrder = SimOptions::LinkOrder::Channels;
  ASSERT_TRUE(simulatePlanned(planner, req, PlanAlgo::Tree, &channels, {}, o).ok());
  o.linkOrder = SimOptions::LinkOrder::Peers;
  ASSERT_TRUE(simulatePlanned(planner, req, PlanAlgo::Tree, &peers, {}, o).ok());
  ASSERT_FALSE(fifo.sim.busiest.empty());
  EXPECT_LT(fifo.sim.busiest[0].utilization, 0.88);
  EXPECT_GT(fifo.sim.timeUs / fifo.predictedUs, 1.10);
  for (const PlannedSim* rr : {&channels, &peers}) {
    ASSERT_FALSE(rr->sim.busiest.empty());
    EXPECT_GT(rr->sim.busiest[0].utilization, 0.90);
    EXPECT_GT(rr->sim.busiest[0].utilization, fifo.sim.busiest[0].utilization + 0.05);
    EXPECT_NEAR(rr->sim.timeUs / rr->predictedUs, 1.0, 0.10)
        << rr->sim.timeUs << " us, model " << rr->predictedUs;
  }
}

// Ranks 1 and 2 flood rank 0's port with kIncastChunks chunks each (two senders into one link,
// so a backlog builds at the switch); rank 3 sends one chunk once its local copy is done, by then
// well into the backlog, and rank 0 then copies a long region that holds it.
constexpr uint64_t kIncastChunk = 1 << 18, kIncastChunks = 12, kIncastDelay = 576ull << 20;
constexpr uint64_t kIncastTail = 1ull << 32;   // rank 0's copy after rank 3's chunk: longer than the backlog
static uint64_t incastChunks = kIncastChunks;  // 0: rank 3's chunk alone
static Generator<Step> incastGen(CollArgs, int rank) {
  const uint64_t c = kIncastChunk;
  if (rank == 0) {
    co_yield Step::recv(3, Region{Buf::Output, 0, c}).onChannel(1);
    for (uint64_t k = 0; k < incastChunks; ++k) {
      co_yield Step::recv(1, Region{Buf::Output, kIncastTail + 2 * k * c, c});
      co_yield Step::recv(2, Region{Buf::Output, kIncastTail + (2 * k + 1) * c, c});
    }
    co_yield Step::copy(Region{Buf::Output, 0, kIncastTail}, Region{Buf::Input, 0, kIncastTail});
  } else if (rank == 3) {
    co_yield Step::copy(Region{Buf::Input, 0, kIncastDelay}, Region{Buf::Output, 0, kIncastDelay});
    co_yield Step::send(0, Region{Buf::Output, 0, c}).onChannel(1);
  } else {
    for (uint64_t k = 0; k < incastChunks; ++k) co_yield Step::send(0, Region{Buf::Input, k * c, c});
  }
}

// The last switch's port into a rank serves the senders waiting for it round robin (where the
// source links interleave channels): a message that reaches it behind two senders' backlog waits
// for a message or two, not for the whole backlog, as it did when the port took messages in the
// order they reached it (the tree across 3+ racks, docs/PLANNER.md).
TEST(Simulator, SwitchPortServesItsSendersRoundRobin) {
  AlgoInfo algo{Algo::Tree, Coll::AllReduce, always, none, incastGen, 2};
  const double gbps = 10, latUs = 1;
  Topology t = makeUniform(4, gbps, latUs);
  CollArgs a = allreduceArgs(4, kIncastTail + 2 * kIncastChunks * kIncastChunk, kIncastChunk);
  SimResult rr, fifo, alone;
  SimOptions o;
  ASSERT_TRUE(simulate(t, algo, a, tribFloat32, &rr, {}, o).ok());
  incastChunks = 0;  // rank 3's chunk and rank 0's copy only
  ASSERT_TRUE(simulate(t, algo, a, tribFloat32, &alone, {}, o).ok());
  incastChunks = kIncastChunks;
  o.linkOrder = SimOptions::LinkOrder::Posting;  // no interleaving: the port keeps arrival order
  ASSERT_TRUE(simulate(t, algo, a, tribFloat32, &fifo, {}, o).ok());
  const double chunkUs =
      4.0 * kIncastChunk / (gbps * CostConstants::defaults().eff[static_cast<int>(LinkType::Net)] * 1e3);
  std::printf("incast: alone %.1f us, round robin %.1f us, arrival order %.1f us, chunk %.1f us\n",
              alone.timeUs, rr.timeUs, fifo.timeUs, chunkUs);
  // Rank 0's copy after rank 3's chunk outlasts the backlog, so it ends each replay.
  ASSERT_GT(alone.timeUs, 2 * kIncastChunks * chunkUs);
  EXPECT_EQ(rr.messages, fifo.messages);
  // Arrival order: rank 3's chunk waits behind the backlog built before it came.
  EXPECT_GT(fifo.timeUs - alone.timeUs, 8 * chunkUs);
  // Round robin: behind at most the message on the port and the other sender's turn.
  EXPECT_GE(rr.timeUs, alone.timeUs);
  EXPECT_LE(rr.timeUs - alone.timeUs, 2 * chunkUs);
  EXPECT_GE(rr.timeUs, alone.timeUs);
}

// The queue behind such a port (replay::FairQueue, which the step replay's ports and source links
// and the NVLS replay's ports share): a stream's backlog takes turns with a message that came after
// it, which goes right after the message on the link, not after the whole backlog.
TEST(Simulator, FairQueueTakesTurnsOverItsStreams) {
  Topology t = makeUniform(2, 10, 1);
  const CostConstants k = CostConstants::defaults();
  replay::Links links(t, k);
  const DirLink d = 0;
  const double bytes = 1e6;
  replay::FairQueue<int> q;
  EXPECT_TRUE(q.offer(links, d, q.tagFor(0), 0, 0.0, 100));  // the link free and nobody waiting
  links.send(d, 0.0, bytes);
  for (int m = 101; m <= 104; ++m) EXPECT_FALSE(q.offer(links, d, q.tagFor(0), m, 0.0, m));  // a backlog
  EXPECT_FALSE(q.offer(links, d, q.tagFor(1), 200, 1.0, 200));  // another sender's message, later
  std::vector<int> served;
  std::vector<double> starts;
  double now = 0;
  for (int events = 0; !q.waiting.empty() && events < 100; ++events)
    q.serveNext(
        links, d, now,
        [&](int m, double at) {
          served.push_back(m);
          starts.push_back(at);
          links.send(d, at, bytes);
        },
        [&](double at) { now = at; });
  EXPECT_EQ(served, (std::vector<int>{200, 101, 102, 103, 104}));
  ASSERT_EQ(starts.size(), 5u);
  const double messageUs = starts[1] - starts[0];
  EXPECT_GT(messageUs, 0);
  EXPECT_DOUBLE_EQ(starts[0], messageUs);  // right after the first message, the link never idle
  for (size_t i = 1; i < starts.size(); ++i) EXPECT_DOUBLE_EQ(starts[i] - starts[i - 1], messageUs);
}

// A schedule of one channel is one stream per rank: interleaving its channels is the posting
// order, bit for bit (the other algorithms' replays do not move with LinkOrder::Channels).
TEST(Simulator, OneChannelScheduleReplaysAlikeInPostingOrderAndByChannel) {
  Topology t;
  ASSERT_TRUE(generateTopology("uniform:64", {"sharp=1"}, &t).ok());
  Planner planner(t);
  PlanRequest req = deviceAllReduce(16u << 20, 16);
  for (PlanAlgo a : {PlanAlgo::Ring, PlanAlgo::Rhd, PlanAlgo::Direct}) {
    PlannedSim fifo, channels;
    SimOptions o;
    o.linkOrder = SimOptions::LinkOrder::Posting;
    ASSERT_TRUE(simulatePlanned(planner, req, a, &fifo, {}, o).ok());
    o.linkOrder = SimOptions::LinkOrder::Channels;
    ASSERT_TRUE(simulatePlanned(planner, req, a, &channels, {}, o).ok());
    EXPECT_EQ(fifo.sim.timeUs, channels.sim.timeUs) << planAlgoName(a);
    EXPECT_EQ(fifo.sim.messages, channels.sim.messages) << planAlgoName(a);
  }
}

// A replay that cannot fit is refused before it starts, with its estimate.
TEST(Simulator, ReplayTooLargeForTheMemoryIsRefusedUpFront) {
  Topology t = makeUniform(64, 50, 1);
  SimOptions o;
  o.memoryLimitBytes = 1 << 20;
  SimResult r;
  Status s = simulate(t, *findAlgorithm(Coll::AllReduce, Algo::Direct), allreduceArgs(64, 1 << 16, 1 << 16),
                      tribFloat32, &r, {}, o);
  EXPECT_EQ(s.code(), tribNotSupported);
  EXPECT_NE(s.message().find("would need about"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("4.03e+03 rank pairs"), std::string::npos) << s.message();
  o.memoryLimitBytes = 0;  // ulimit -v or the machine's memory: plenty
  EXPECT_TRUE(simulate(t, *findAlgorithm(Coll::AllReduce, Algo::Direct), allreduceArgs(64, 1 << 16, 1 << 16),
                       tribFloat32, &r, {}, o)
                  .ok());
}

TEST(Simulator, RackScaleRingRunsQuickly) {
  Topology t = makeNvl72();
  SimResult r;
  // 256 MiB, one 3.6 MB slice per block: 142 steps of ~5 us transfer + 3.5 us latency.
  ASSERT_TRUE(simulate(t, *findAlgorithm(Coll::AllReduce, Algo::Ring), allreduceArgs(72, 64u << 20, 1u << 20),
                       tribFloat32, &r)
                  .ok());
  // 72 GPUs on NVLink5 at 900 GB/s x efficiency; the per-step latency keeps the ring below the link.
  EXPECT_GT(r.busbwGBps, 350);
  EXPECT_LT(r.busbwGBps, 900 * 370.0 / 450);
  EXPECT_LT(r.wallSeconds, 20);
}

TEST(Hierarchical, ScheduleIsCorrectAndMatchesTheModel) {
  const AlgoInfo* h = findAlgorithm(Coll::AllReduce, Algo::Hierarchical);
  ASSERT_NE(h, nullptr);
  // The verifier proves every rank ends with every contribution exactly once.
  for (auto [n, d] : {std::pair{4, 2}, {6, 3}, {8, 4}, {12, 4}, {15, 5}, {144, 72}}) {
    for (uint64_t count : {1ull, 7ull, 1000ull}) {
      for (bool inPlace : {false, true}) {
        CollArgs a = allreduceArgs(n, count, 3);
        a.ranksPerDomain = d;
        a.inPlace = inPlace;
        ASSERT_TRUE(h->supports(a));
        Status s = verifySchedule(*h, a);
        EXPECT_TRUE(s.ok()) << n << "/" << d << " count " << count << ": " << s.message();
      }
    }
  }
  // Without equal domains (0 = flat, 1, or not dividing n) it runs as one domain: a ring, still correct.
  for (int rpd : {0, 1, 3}) {
    CollArgs flat = allreduceArgs(8, 100, 10);
    flat.ranksPerDomain = rpd;
    ASSERT_TRUE(h->supports(flat));
    Status s = verifySchedule(*h, flat);
    EXPECT_TRUE(s.ok()) << "ranksPerDomain " << rpd << ": " << s.message();
    const AlgoInfo* ring = findAlgorithm(Coll::AllReduce, Algo::Ring);
    EXPECT_EQ(materialize(*h, flat, 2).size(), materialize(*ring, flat, 2).size()) << rpd;
  }
  // On two NVL72 racks the planner's prediction and the simulation agree within 10% (the model
  // pipelines the levels and the ring rounds chunk by chunk as the replay runs them).
  Topology t = makeNvl72Cluster(2);
  Planner p(t);
  PlanRequest req;
  req.memory = MemoryKind::Device;  // the modelled systems' ranks on their GPUs
  req.bytes = 256u << 20;
  req.nranks = 144;
  for (const auto& c : p.explain(req)) {
    if (c.plan.algo != PlanAlgo::Hierarchical) continue;
    EXPECT_TRUE(c.plan.executable);
    EXPECT_EQ(c.plan.ranksPerDomain, 72);
    CollArgs a = allreduceArgs(144, req.bytes / 4, c.plan.chunkElems);
    a.ranksPerDomain = c.plan.ranksPerDomain;
    SimResult r;
    ASSERT_TRUE(simulate(t, *h, a, tribFloat32, &r).ok());
    EXPECT_NEAR(r.timeUs, c.plan.predictedUs, c.plan.predictedUs * 0.10);
  }
}
