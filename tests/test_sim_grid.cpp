// Model against simulator over a grid (issue 16, deliverable 2): every all-reduce algorithm the
// planner can choose x every generator x ranks 2 .. 4,608 x sizes 8 B .. 16 GiB, at Simple (what
// the executor runs) and at the algorithm's fastest protocol where that is another, each cell the
// algorithm's real schedule replayed (simulatePlanned, as trib-plan --simulate runs it) against the
// cost model's prediction. Every cell must agree within 10%, except cells under a kKnownGaps rule
// (with its reason), which are still simulated and each printed with its ratio as an expected
// failure. TRIB_SIM_GRID_PRINT=1 prints every cell; SimGrid.DISABLED_Explore
// runs any system by hand (--gtest_also_run_disabled_tests).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "sim/sim_plan.hpp"

using namespace trib;

namespace {

struct Cell {
  std::string system;  // generator spec
  int ranks;
  PlanAlgo algo;
  uint64_t bytes;
  int domains, perDomain;  // the NVLink domains the ranks span, and ranks in each
  Protocol protocol = Protocol::Simple;
};

// A rule for cells that do not agree within 10% yet: the test still simulates and prints each of
// them with its ratio (an expected failure), and counts those that agree anyway. Reasons:
// docs/PLANNER.md "Model against simulator: the grid".
[[maybe_unused]] constexpr uint64_t kAny = UINT64_MAX;  // for a rule's open ends
[[maybe_unused]] constexpr int kAnyRanks = INT32_MAX;
struct Gap {
  PlanAlgo algo;
  int minRanks, maxRanks;
  uint64_t minBytes, maxBytes;
  bool acrossDomainsOnly;  // only cells whose ranks span several NVLink domains of 2+ ranks
  const char* why;
  int minDomains = 0;                    // only cells whose ranks span at least this many NVLink domains
  Protocol protocol = Protocol::Simple;  // the cells' protocol (the grid runs Simple and the fastest)
};
// Two open, both rhd: 100 ranks (2026-12-06) and 24 GPUs on rails (2026-12-07). Closed: three ranks
// on one switch at 256 MiB (found 2026-12-06 by a sweep outside the grid) when the unfold streamed
// inside the executor's window (algo::rhdUnfoldInWindow, 2026-12-07); before them, the tree's posting-order
// rule went when the replay's default became the schedule's channels round robin and the tree's terms were
// derived for it; its rule for 3+ NVLink domains at >= 16 MiB (the replay 1.12-1.24x the model) went when the
// last switch's port served its senders round robin and the model gained the fill bound (docs/PLANNER.md "The
// tree across 3+ domains"). rhd with LL on 4,608 ranks at 1 MiB (1.125x) left the grid when LL gained its
// ceiling (LL128 is rhd's fastest there now; rhd/LL at that size, replayed by hand, agrees: docs/PLANNER.md
// "Protocols"), rhd on 136 ranks (72 + 64) closed when the model pipelined the fold with the first
// and last steps, and rhd on 5 and 6 ranks at 16 MiB (1.11-1.13x) when the fold brought first the
// half the first halving step sends (algo::rhdFoldSendsFirst; docs/PLANNER.md "The fold's order").
const std::vector<Gap> kKnownGaps = {
    {PlanAlgo::Rhd, 100, 100, 16 << 20, kAny, true,
     "rhd on 100 ranks (racks of 72 and 28) from 16 MiB: the replay 0.87-0.90x the model (0.26-0.42x "
     "before the ranks' own domains priced its steps); the walk's receiving side in step order, traced in "
     "docs/PLANNER.md"},
    {PlanAlgo::Rhd, 24, 24, 16 << 20, 16 << 20, true,
     "rhd on 24 GPUs of three DGX H100 on rails at 16 MiB: the replay 1.11x the model (1.09x before the "
     "fold's order changed, which made this replay 1.8% slower and most of the grid's other folding cells "
     "faster); the walk takes a rank's network receptions in step order, where the replay's port takes the "
     "last doubling step's relayed chunks between the step before's, whose last chunk the rank's own "
     "last sends wait for (docs/PLANNER.md \"The fold's order\")"},
};

bool knownGap(const Cell& c, const char** why) {
  for (const Gap& g : kKnownGaps)
    if (c.algo == g.algo && c.protocol == g.protocol && c.ranks >= g.minRanks && c.ranks <= g.maxRanks &&
        c.bytes >= g.minBytes && c.bytes <= g.maxBytes &&
        (!g.acrossDomainsOnly || (c.domains > 1 && c.perDomain > 1)) && c.domains >= g.minDomains) {
      *why = g.why;
      return true;
    }
  return false;
}

Topology gen(const std::string& spec) {
  std::vector<std::string> params;
  std::string sys = spec;
  if (auto comma = spec.find(','); comma != std::string::npos) {
    sys = spec.substr(0, comma);
    std::string rest = spec.substr(comma + 1);
    for (size_t p = 0; p <= rest.size();) {
      size_t q = rest.find(',', p);
      if (q == std::string::npos) q = rest.size();
      params.push_back(rest.substr(p, q - p));
      p = q + 1;
    }
  }
  Topology t;
  Status s = generateTopology(sys, params, &t);
  EXPECT_TRUE(s.ok()) << spec << ": " << s.message();
  return t;
}

std::string envOr(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

bool printAll() {
  const char* e = std::getenv("TRIB_SIM_GRID_PRINT");
  return e && *e && *e != '0';
}

bool modelled(Planner& p, const PlanRequest& req, PlanAlgo a) {
  for (const auto& c : p.explain(req))
    if (c.plan.algo == a && c.plan.predictedUs > 0) return true;
  return false;
}

// The schedule accepts the plan's arguments (model-only NVLS has none: simulateInNetwork).
bool scheduleRuns(Planner& p, const PlanRequest& req, PlanAlgo a) {
  if (isNvlsPlan(a)) return true;
  const AlgoInfo* info = findAlgorithm(req.coll, toScheduleAlgo(a));
  double predicted = 0;
  return info && info->supports(plannedArgs(p, req, a, &predicted));
}

struct Totals {
  int cells = 0, agree = 0, gaps = 0, gapsAgree = 0, unsupported = 0;
};

// Runs one system's cells: every algorithm the model supports there, for each rank count and size.
void runSystem(const std::string& spec, const std::vector<int>& rankCounts,
               const std::vector<uint64_t>& sizes, const std::vector<PlanAlgo>& algos, Totals* tot) {
  Topology t = gen(spec);
  Planner fastest(t), simple(t);  // every protocol (each algorithm at its fastest); Simple only
  ASSERT_TRUE(simple.setOverrides("", "", "Simple").ok());
  for (int n : rankCounts) {
    ASSERT_LE(n, static_cast<int>(t.rankNodes().size())) << spec;
    int domains = 0, perDomain = 0;
    bool uniform = false;
    fastest.domainShape(n, MemoryKind::Device, &domains, &perDomain, &uniform);
    for (uint64_t bytes : sizes) {
      PlanRequest req;
      req.memory = MemoryKind::Device;  // the modelled systems' ranks on their GPUs
      req.bytes = bytes;
      req.nranks = n;
      req.includeModelOnly = true;
      if (domains > 1 && perDomain > 1 && uniform) req.sliceStride = perDomain;
      for (PlanAlgo a : algos)
        for (Planner* pl : {&simple, &fastest}) {
          Planner& planner = *pl;
          Cell c{spec, n, a, bytes, domains, perDomain};
          if (pl == &fastest) {  // the fastest protocol: a cell of its own where it is not Simple
            double predicted = 0;
            plannedArgs(planner, req, a, &predicted, &c.protocol);
            if (c.protocol == Protocol::Simple) continue;
          }
          if (!modelled(planner, req, a)) {  // the model rejects it here (one domain, no switch, ...)
            ++tot->unsupported;
            continue;
          }
          if (!scheduleRuns(planner, req, a)) {  // e.g. one-shot past a window cell
            ++tot->unsupported;
            continue;
          }
          PlannedSim ps;
          auto t0 = std::chrono::steady_clock::now();
          SimOptions opt;
          if (const char* w = std::getenv("TRIB_SIM_GRID_WINDOW")) opt.window = std::atoi(w);
          opt.spreadRoutes =
              envOr("TRIB_SIM_GRID_HASHED_ROUTES").empty();  // set: static ECMP, for comparison
          // TRIB_SIM_GRID_LINK_ORDER=posting|peers (or TRIB_SIM_GRID_INTERLEAVE=1: peers): another
          // source-link discipline than the default, the schedule's channels round robin
          // (SimOptions::LinkOrder), for comparison
          const std::string order = envOr("TRIB_SIM_GRID_LINK_ORDER");
          if (order == "posting") opt.linkOrder = SimOptions::LinkOrder::Posting;
          if (order == "peers" || !envOr("TRIB_SIM_GRID_INTERLEAVE").empty())
            opt.linkOrder = SimOptions::LinkOrder::Peers;
          Status s = simulatePlanned(planner, req, a, &ps, {}, opt);
          double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          ASSERT_TRUE(s.ok()) << spec << " " << n << " " << planAlgoName(a) << " " << bytes << ": "
                              << s.message();
          ++tot->cells;
          Plan named;
          named.algo = a, named.protocol = ps.protocol;
          const std::string name = planName(named);
          const double ratio = ps.sim.timeUs / ps.predictedUs;
          const bool agrees = std::fabs(ratio - 1) <= 0.10;
          const char* why = nullptr;
          const bool gap = knownGap(c, &why);
          if (printAll() || !agrees || gap)
            std::printf(
                "%-28s %5d %-18s %12s  model %12.1f us  sim %12.1f us  sim/model %.3f  (%.2f s)%s%s\n",
                spec.c_str(), n, name.c_str(), formatBytes(bytes).c_str(), ps.predictedUs, ps.sim.timeUs,
                ratio, secs, agrees ? "" : "  DISAGREES", gap ? "  [known gap]" : "");
          if (gap) {
            ++tot->gaps;
            tot->gapsAgree += agrees;
            if (!agrees) std::printf("    expected failure: %s\n", why);
          } else {
            tot->agree += agrees;
            EXPECT_TRUE(agrees) << spec << " " << n << " ranks " << name << " " << formatBytes(bytes)
                                << ": simulated " << ps.sim.timeUs << " us, model " << ps.predictedUs
                                << " us (ratio " << ratio << ")";
          }
        }
    }
  }
}

const std::vector<PlanAlgo> kAllReduceAlgos = {
    PlanAlgo::Ring,         PlanAlgo::Tree,    PlanAlgo::Rhd,     PlanAlgo::Direct,
    PlanAlgo::Hierarchical, PlanAlgo::Switch,  PlanAlgo::Nvls,    PlanAlgo::NvlsSwitch,
    PlanAlgo::HierSwitch,   PlanAlgo::OneShot, PlanAlgo::TwoShot, PlanAlgo::AllgatherReduce,
    PlanAlgo::NvlsRing,     PlanAlgo::NvlsTree};

// The grid. Sizes and rank counts are dense where simulating is cheap and thinner where a cell
// costs seconds (a flat ring or direct schedule on 4,608 ranks is 42 M steps whatever the size:
// those cells are run by hand with SimGrid.DISABLED_Explore, docs/PLANNER.md).
struct SystemGrid {
  const char* spec;
  std::vector<int> ranks;
  std::vector<uint64_t> sizes;
  std::vector<PlanAlgo> algos;
};
constexpr uint64_t KiB = 1024, MiB = KiB * 1024, GiB = MiB * 1024;
const std::vector<uint64_t> kSizes = {8, 64 * KiB, 16 * MiB, 256 * MiB};
// One-/two-shot on 72 GPUs: every GPU folds all 72 windows cell by cell, O(n^2) steps per cell;
// they are in the grid on 2..16 ranks.
const std::vector<PlanAlgo> kRackAlgos = {PlanAlgo::Ring,         PlanAlgo::Tree,
                                          PlanAlgo::Rhd,          PlanAlgo::Direct,
                                          PlanAlgo::Hierarchical, PlanAlgo::Switch,
                                          PlanAlgo::Nvls,         PlanAlgo::NvlsSwitch,
                                          PlanAlgo::HierSwitch,   PlanAlgo::AllgatherReduce,
                                          PlanAlgo::NvlsRing,     PlanAlgo::NvlsTree};
const std::vector<PlanAlgo> kCheapAlgos = {PlanAlgo::Ring, PlanAlgo::Tree, PlanAlgo::Rhd, PlanAlgo::Switch};
const std::vector<PlanAlgo> kRackScaleAlgos = {
    PlanAlgo::Tree,       PlanAlgo::Rhd,        PlanAlgo::Hierarchical, PlanAlgo::Switch,
    PlanAlgo::NvlsSwitch, PlanAlgo::HierSwitch, PlanAlgo::NvlsRing,     PlanAlgo::NvlsTree};

const std::vector<SystemGrid>& grid() {
  static const std::vector<SystemGrid> g = {
      {"uniform:64,sharp=1", {2, 7, 16, 64}, kSizes, kAllReduceAlgos},
      // rhd folding ranks in (no power of two) on one switch beside the grid's 7 ranks.
      {"uniform:64,sharp=1", {3, 5, 6}, {16 * MiB, 256 * MiB}, {PlanAlgo::Rhd}},
      // The fold's order on both sides of the executor's window: the half the first halving step
      // sends first (1 MiB, 4-12 slices) or the kept half first (1 GiB, 256 slices; 7 ranks was
      // 1.124x there while the window held the replay and the model did not), and one GB200 rack's
      // folding ranks at 1 and 16 MiB (1.08-1.13x before).
      {"uniform:64,sharp=1", {7, 12}, {1 * MiB, 1 * GiB}, {PlanAlgo::Rhd}},
      {"gb200-nvl72", {5, 12, 24}, {1 * MiB, 16 * MiB}, {PlanAlgo::Rhd}},
      // Three ranks (two inner ranks): the unfold streams while the folding rank's list fits the
      // executor's window (64 and 256 MiB were 0.82x and 0.81x before it was priced so) and waits
      // for it past that (1 GiB), on one switch and in one NVLink domain.
      {"uniform:64,sharp=1", {3}, {1 * MiB, 64 * MiB, 1 * GiB}, {PlanAlgo::Rhd}},
      {"dgx-h100", {3}, {64 * KiB, 16 * MiB, 256 * MiB}, {PlanAlgo::Rhd}},
      {"uniform:16,sharp=1", {16}, {1 * GiB, 16 * GiB}, kCheapAlgos},
      {"dgx-a100:2", {2, 8, 16}, kSizes, kAllReduceAlgos},
      {"dgx-h100:2", {2, 8, 16}, kSizes, kAllReduceAlgos},
      // Three nodes (24 ranks, not a power of two): direct's rack order (before it, 1.22x at 16 MiB).
      {"dgx-h100:3", {24}, {16 * MiB, 256 * MiB}, {PlanAlgo::Direct}},
      // Domains of unequal size (8 + 4, 8 + 6 GPUs; a rack and 28 GPUs of another): direct's rack
      // order padded (before it, 1.11-1.28x at 1-16 MiB in the flat order).
      {"dgx-h100:2", {12, 14}, {1 * MiB, 16 * MiB}, {PlanAlgo::Direct}},
      {"nvl72-cluster:2", {100}, {16 * MiB, 256 * MiB}, {PlanAlgo::Direct}},
      // rhd folding ranks on a rail-optimized fabric: its steps across nodes join GPUs of different
      // rails, relayed (PXN) by the NIC of the sender's node on the receiver's rail (before the
      // model put them on the sender's own NIC: 1.33-1.44x; 20 GPUs, 8 + 8 + 4, 1.95-2.0x).
      // At 64 KiB (one chunk a step) a relayed chunk's NVLink hop into the relay shows, and under LL
      // it is as slow as the NIC (1.06-1.12x before it was priced); and a fold of one chunk comes
      // in two halves (24 GPUs of three DGX H100, rhd/LL, 0.899 before).
      {"dgx-h100:4,rails=1", {20, 24}, {64 * KiB, 16 * MiB, 256 * MiB}, {PlanAlgo::Rhd}},
      {"dgx-a100:8,rails=1", {40}, {64 * KiB, 1 * MiB, 16 * MiB, 256 * MiB}, {PlanAlgo::Rhd}},
      {"dgx-a100:8,rails=1", {56}, {64 * KiB}, {PlanAlgo::Rhd}},
      {"dgx-h100:3", {24}, {64 * KiB}, {PlanAlgo::Rhd}},
      // The ring as rails (one ring per NIC, src/algo/ring.cpp) between the grid's sizes, and on
      // four nodes without SHARP (the published RoCE row, docs/PLANNER.md).
      {"dgx-a100:2", {16}, {1 * MiB, 4 * MiB, 64 * MiB, 1 * GiB}, {PlanAlgo::Ring}},
      {"dgx-h100:2", {16}, {1 * MiB, 4 * MiB, 64 * MiB, 1 * GiB}, {PlanAlgo::Ring}},
      {"dgx-h100:4,sharp=0", {32}, {64 * KiB, 16 * MiB, 64 * MiB, 256 * MiB}, {PlanAlgo::Ring}},
      {"dgx-b200:2", {16}, {1 * MiB, 16 * MiB, 1 * GiB}, {PlanAlgo::Ring}},
      // hierarchical in pipeline slices (2-3 nodes of 8 GPUs: the window holds five slices), NVLink-
      // and NIC-bound, with the window's first slices' reduce-scatters before the NIC starts
      // (before the slices the levels ran one pass each: 1.2-1.5x slower in the replay); and four
      // nodes, one pass (the window holds four slices' steps).
      {"dgx-a100:2", {16}, {64 * MiB, 1 * GiB}, {PlanAlgo::Hierarchical}},
      {"dgx-b200:3,sharp=0", {24}, {64 * MiB, 1 * GiB}, {PlanAlgo::Hierarchical}},
      {"dgx-a100:3,nic_gbps=12.5,sharp=0", {24}, {16 * MiB, 256 * MiB}, {PlanAlgo::Hierarchical}},
      {"dgx-h100:4,sharp=0", {32}, {1 * GiB}, {PlanAlgo::Hierarchical}},
      // hier_switch in pipeline slices (a block per switch operation; before them 1.1-1.6x slower in
      // the replay from 64 MiB): NIC-bound on 4 HDR NICs, NVLink-bound on four DGX A100.
      {"dgx-a100:3,nic_gbps=12.5", {24}, {64 * MiB, 1 * GiB}, {PlanAlgo::HierSwitch}},
      {"dgx-a100:4", {32}, {1 * GiB}, {PlanAlgo::HierSwitch}},
      {"dgx-b200:3", {24}, {256 * MiB}, {PlanAlgo::HierSwitch}},
      // The tree between the grid's sizes (issue 16): its rank-by-rank terms in one domain and
      // across two (before them 4 MiB across two DGX H100 was 0.851, 1 MiB in one domain 1.03-1.05).
      {"uniform:64", {7, 16, 64}, {1 * MiB, 4 * MiB, 64 * MiB}, {PlanAlgo::Tree}},
      // Trees of no power of two in one domain, where the old closed form (its root's child and
      // h = P/a) was 0.872-0.898 at 8-16 MiB on 5 and 9 ranks.
      {"uniform:64", {5, 9}, {4 * MiB, 8 * MiB, 16 * MiB}, {PlanAlgo::Tree}},
      // Three ranks, each tree a chain of three whose roots hold the busiest links: 1 MiB was 0.930
      // (the trip bound's pace counted a leaf's stream that is gone before its neighbour's partial
      // sums start), 4 and 16 MiB 0.901 and 0.957 (the busy window's double-counted first chunk);
      // now 0.995, 0.919, 0.971. Not 2 MiB: 0.901, the busy bound's tail (PLANNER, worktree u).
      {"uniform:64", {3}, {1 * MiB, 4 * MiB, 16 * MiB}, {PlanAlgo::Tree}},
      {"dgx-h100:2", {8, 16}, {1 * MiB, 4 * MiB, 64 * MiB}, {PlanAlgo::Tree}},
      {"dgx-a100:2", {16}, {1 * MiB, 4 * MiB, 64 * MiB}, {PlanAlgo::Tree}},
      {"gb200-nvl72", {72}, {1 * MiB, 4 * MiB, 64 * MiB}, {PlanAlgo::Tree}},
      {"nvl72-cluster:2", {144}, {1 * MiB, 4 * MiB, 64 * MiB}, {PlanAlgo::Tree}},
      // Three or more racks, where a rank's NIC carries three cross-rack edges: 1.11-1.25x before
      // the switch port's round robin and the fill bound (PLANNER "The tree across 3+ domains").
      {"nvl72-cluster:3", {216}, {16 * MiB, 64 * MiB, 1 * GiB}, {PlanAlgo::Tree}},
      {"nvl72-cluster:4", {288}, {64 * MiB, 256 * MiB, 1 * GiB}, {PlanAlgo::Tree}},
      {"nvl72-cluster:16", {1152}, {64 * MiB}, {PlanAlgo::Tree}},
      // nvls_ring where the NICs set the pace (the NVSwitch feeds the rings faster than they
      // drain): the NICs send other chunks' steps during one chunk's step latencies, so those
      // latencies are not all added to the NICs' work (before: 0.76-0.82 on B200, 0.71-0.77 on
      // 100 Gb/s NICs).
      {"dgx-b200:4", {32}, {4 * MiB, 16 * MiB, 64 * MiB}, {PlanAlgo::NvlsRing}},
      {"dgx-b200:8", {64}, {16 * MiB, 64 * MiB}, {PlanAlgo::NvlsRing}},
      {"dgx-h100:4,nic_gbps=12.5", {32}, {4 * MiB, 16 * MiB}, {PlanAlgo::NvlsRing}},
      // nvls_tree where the planner picks it: the mid sizes on 4-8 nodes without SHARP, and NVL72
      // racks without SHARP (NVLS-bound there); each member's send its own event in the replay.
      {"dgx-h100:4,sharp=0", {32}, {1 * MiB, 16 * MiB}, {PlanAlgo::NvlsTree}},
      {"dgx-h100:8,sharp=0", {64}, {16 * MiB, 64 * MiB}, {PlanAlgo::NvlsTree}},
      {"nvl72-cluster:16,sharp=0", {1152}, {16 * MiB, 256 * MiB}, {PlanAlgo::NvlsTree}},
      // Many HGX nodes, where the NICs bound both: 1.09-1.13 before the tree's connections held
      // NCCL's slots and the model priced the level's drain (PLANNER "nvls_tree: NCCL's slots and
      // the drain"); and a small size on four nodes, where eight slots alone throttled the tree (1.126).
      {"dgx-h100:32,sharp=0", {256}, {64 * MiB, 1 * GiB}, {PlanAlgo::NvlsRing, PlanAlgo::NvlsTree}},
      {"dgx-b200:4,sharp=0", {32}, {4 * MiB}, {PlanAlgo::NvlsTree}},
      {"dgx-h200:2", {8, 16}, {64 * KiB, 256 * MiB}, kAllReduceAlgos},
      {"dgx-b200:2", {8, 16}, {64 * KiB, 256 * MiB}, kAllReduceAlgos},
      // A rail-optimized fabric (NIC g of every node on rail g's leaf): pairs of different
      // indices relay over NVLink to their rail (PXN), or with pxn=0 cross a spine.
      {"dgx-h100:4,rails=1", {32}, {64 * KiB, 16 * MiB, 256 * MiB}, kAllReduceAlgos},
      {"dgx-h100:4,rails=1,pxn=0", {32}, {64 * KiB, 16 * MiB, 256 * MiB}, kAllReduceAlgos},
      // Direct through PXN relays at LL's ceiling, where NVLink is no faster than a NIC: the
      // remote domains first, so the relays' first legs do not wait behind the local sends
      // (algo_util.hpp PeerOrder; before, 1.117x at 16 GPUs, 1.066x at 24).
      {"dgx-a100:8,rails=1", {16, 24}, {64 * KiB}, {PlanAlgo::Direct, PlanAlgo::AllgatherReduce}},
      // DGX A100 rails without PXN, where the network's links are slower than PCIe: every GPU
      // meets the network by its own NIC (route.cpp; before, routes came in by another rail's
      // NIC and crossed the receiver's CPU: ring 16 MiB 1.91x, direct 64 KiB 3.31x,
      // allgather_reduce 8 B 3.67x).
      {"dgx-a100:8,rails=1,pxn=0",
       {32},
       {8, 64 * KiB, 16 * MiB},
       {PlanAlgo::Ring, PlanAlgo::Direct, PlanAlgo::AllgatherReduce}},
      {"gb200-nvl72", {72}, {8, 16 * MiB, 256 * MiB}, kRackAlgos},
      {"gb300-nvl72", {2}, {8, 16 * MiB, 256 * MiB}, kAllReduceAlgos},
      {"gb300-nvl72", {72}, {8, 16 * MiB, 256 * MiB}, kRackAlgos},
      {"nvl72-cluster:2", {144}, {8, 16 * MiB, 256 * MiB}, kRackAlgos},
      {"nvl72-cluster:4,tiers=3,radix=4", {288}, {8, 16 * MiB}, kRackAlgos},
      // Direct past the executor's 512-step window (575 sends a phase): the model priced a step
      // latency per window, in series, where the window slides (0.668 here; 16 MiB 0.931, 4,608
      // ranks 8 MiB 0.494). One cell, ~3 s: the size where a latency weighs most.
      {"nvl72-cluster:8", {576}, {1 * MiB}, {PlanAlgo::Direct}},
      {"nvl72-cluster:64", {4608}, {8, 1 * MiB}, kRackScaleAlgos},
      // Racks not whole (72 + 28, 72 + 64 ranks): rhd's steps across from the ranks' own domains,
      // where every step was priced across before (the replay 0.26-0.54 of the model).
      {"nvl72-cluster:2", {100, 136}, {8, 1 * MiB, 16 * MiB}, {PlanAlgo::Rhd}},
  };
  return g;
}

}  // namespace

TEST(SimGrid, ModelAndSimulatorAgreeWithin10Percent) {
  auto t0 = std::chrono::steady_clock::now();
  Totals tot;
  for (const SystemGrid& g : grid()) runSystem(g.spec, g.ranks, g.sizes, g.algos, &tot);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "grid: %d cells simulated; %d outside the known gaps, all asserted within 10%% (%d agree); %d "
      "under a known-gap rule, %d of them disagree (expected failures, printed above), %d agree; %d "
      "cells the model or schedule does not cover; %.1f s\n",
      tot.cells, tot.cells - tot.gaps, tot.agree, tot.gaps, tot.gaps - tot.gapsAgree, tot.gapsAgree,
      tot.unsupported, secs);
  EXPECT_GT(tot.cells, 300);  // the grid ran (a generator or the planner losing cells shows here)
}

TEST(SimGrid, DISABLED_Explore) {  // by hand only: no system is given in CI
  const char* sys = std::getenv("TRIB_SIM_GRID_SYSTEM");
  if (!sys)
    FAIL() << "set TRIB_SIM_GRID_SYSTEM=spec TRIB_SIM_GRID_RANKS=a,b TRIB_SIM_GRID_SIZES=8,1M[,...] "
              "[TRIB_SIM_GRID_ALGO=name]";
  std::vector<int> ranks;
  std::vector<uint64_t> sizes;
  for (std::string s = envOr("TRIB_SIM_GRID_RANKS"); !s.empty();) {
    size_t q = s.find(',');
    ranks.push_back(std::atoi(s.substr(0, q).c_str()));
    s = q == std::string::npos ? "" : s.substr(q + 1);
  }
  for (std::string s = envOr("TRIB_SIM_GRID_SIZES"); !s.empty();) {
    size_t q = s.find(',');
    uint64_t b = 0;
    ASSERT_TRUE(parseSize(s.substr(0, q), &b).ok());
    sizes.push_back(b);
    s = q == std::string::npos ? "" : s.substr(q + 1);
  }
  std::vector<PlanAlgo> algos = kAllReduceAlgos;
  if (const char* a = std::getenv("TRIB_SIM_GRID_ALGO")) {
    PlanAlgo x;
    ASSERT_TRUE(parsePlanAlgo(a, &x));
    algos = {x};
  }
  Totals tot;
  runSystem(sys, ranks, sizes, algos, &tot);
  std::printf(
      "%d cells, %d agree outside known gaps, %d under known gaps (%d of them agree), %d unsupported\n",
      tot.cells, tot.agree, tot.gaps, tot.gapsAgree, tot.unsupported);
}
