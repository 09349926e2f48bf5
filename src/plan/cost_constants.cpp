// The planner's vocabulary and constants: the names of what it chooses among (PlanAlgo,
// Protocol), which schedule each runs, and CostConstants with each protocol's view of them.
// Every constant's source: docs/PLANNER.md "The constants".
#include <strings.h>
#include <algorithm>

#include "plan/cost_model.hpp"

namespace trib {

bool isNvlsPlan(PlanAlgo a) {
  return a == PlanAlgo::Nvls || a == PlanAlgo::NvlsSwitch || a == PlanAlgo::NvlsRing ||
         a == PlanAlgo::NvlsTree;
}

const char* planAlgoName(PlanAlgo a) {
  static const char* const names[kNumPlanAlgos] = {
      "ring",      "tree",     "rhd",         "direct",  "binomial",    "chain",   "hierarchical",
      "switch",    "nvls",     "nvls_switch", "oneshot", "hier_switch", "twoshot", "allgather_reduce",
      "nvls_ring", "nvls_tree"};
  auto i = static_cast<int>(a);
  return i >= 0 && i < kNumPlanAlgos ? names[i] : "invalid";
}

std::string planAlgoNames() {
  std::string all;
  for (int i = 0; i < kNumPlanAlgos; ++i)
    all += (i ? ", " : "") + std::string(planAlgoName(static_cast<PlanAlgo>(i)));
  return all;
}

bool parsePlanAlgo(const std::string& s, PlanAlgo* out) {
  if (s == "sharp" || s == "collnet") {
    *out = PlanAlgo::Switch;
    return true;
  }
  for (int i = 0; i < kNumPlanAlgos; ++i) {
    if (s == planAlgoName(static_cast<PlanAlgo>(i))) {
      *out = static_cast<PlanAlgo>(i);
      return true;
    }
  }
  return false;
}

Algo toScheduleAlgo(PlanAlgo a) {
  switch (a) {
    case PlanAlgo::Ring:
      return Algo::Ring;
    case PlanAlgo::Tree:
      return Algo::Tree;
    case PlanAlgo::Rhd:
      return Algo::Rhd;
    case PlanAlgo::Direct:
      return Algo::Direct;
    case PlanAlgo::Binomial:
      return Algo::Binomial;
    case PlanAlgo::Chain:
      return Algo::Chain;
    case PlanAlgo::Hierarchical:
      return Algo::Hierarchical;
    case PlanAlgo::OneShot:
      return Algo::OneShot;
    case PlanAlgo::HierSwitch:
      return Algo::HierSwitch;
    case PlanAlgo::TwoShot:
      return Algo::TwoShot;
    case PlanAlgo::AllgatherReduce:
      return Algo::AllgatherReduce;
    default:
      return Algo::Switch;
  }
}

const char* protocolName(Protocol p) {
  switch (p) {
    case Protocol::Simple:
      return "Simple";
    case Protocol::LL128:
      return "LL128";
    case Protocol::LL:
      return "LL";
  }
  return "invalid";
}

bool parseProtocol(const std::string& s, Protocol* out) {
  for (int i = 0; i < kNumProtocols; ++i)
    if (strcasecmp(s.c_str(), protocolName(static_cast<Protocol>(i))) == 0) {
      *out = static_cast<Protocol>(i);
      return true;
    }
  return false;
}

bool protocolApplies(PlanAlgo a) {
  switch (a) {
    case PlanAlgo::Ring:
    case PlanAlgo::Tree:
    case PlanAlgo::Rhd:
    case PlanAlgo::Direct:
    case PlanAlgo::Binomial:
    case PlanAlgo::Chain:
    case PlanAlgo::Hierarchical:
    case PlanAlgo::AllgatherReduce:
      return true;
    default:
      return false;
  }
}

double CostConstants::protocolShare(Protocol p, PlanAlgo a, int domains) const {
  if (p == Protocol::Simple) return 1.0;
  const ProtocolCost& pc = protocolCost(p);
  if (a != PlanAlgo::Tree) return pc.linkShare;
  return domains <= 1 ? pc.treeShareInDomain : pc.treeShareAcross;
}

CostConstants CostConstants::forProtocol(Protocol p, PlanAlgo a, int domains) const {
  if (p == Protocol::Simple) return *this;
  const ProtocolCost& pc = protocolCost(p);
  CostConstants c = *this;
  const double share = protocolShare(p, a, domains);
  for (double& e : c.eff) e *= share;
  c.stepOverheadUs = pc.stepOverheadUs;
  c.netStepOverheadUs = pc.netStepOverheadUs;
  c.launchUs = pc.launchUs;
  return c;
}

const CostConstants& CostConstants::defaults() {
  // The one place the model's constants live; docs/PLANNER.md gives each one's source.
  static const CostConstants k = [] {
    CostConstants c{};
    c.eff[static_cast<int>(LinkType::NvLink)] = 370.0 / 450.0;  // DGX H100 ring busbw / NVLink4 per direction
    c.eff[static_cast<int>(LinkType::Net)] = 47.0 / 50.0;       // ring busbw per 400 Gb/s NIC / line rate
    c.eff[static_cast<int>(LinkType::Pcie)] = 0.80;             // PCIe Gen4/5 DMA, TLP overhead
    c.eff[static_cast<int>(LinkType::C2C)] = 0.80;
    // Copy in + copy out through a shared segment. Measured (docs/PLANNER.md): bm_shm one-way
    // 64 MiB 4.9-5.0 GB/s against memcpy 9.8-10.2 GB/s, back to back on this machine = 0.49-0.50.
    c.eff[static_cast<int>(LinkType::Shm)] = 0.50;
    c.eff[static_cast<int>(LinkType::Loop)] = 1.0;
    c.stepOverheadUs = 2.5;     // + ~1 µs of NVLink hops = NCCL's 3-4 µs per NVLink step
    c.netStepOverheadUs = 8.0;  // + ~3 µs of NIC/switch hops + 2.5 = NCCL's ~14 µs network step
    c.launchUs = 8.0;           // NCCL's base latency
    c.chunkOverheadUs = 0.5;
    c.switchOpUs = 0.5;  // SHARP: 128-host 8-byte all-reduce 2.83 µs over ~3 tiers
    c.gpuReduceGBps = 2000;
    c.cpuReduceGBps =
        8;  // one core's memory rate when unknown; trib-plan --calibrate passes a measured memcpy
    // The board's copies and reductions touch cells just written into the shared last-level
    // cache, not memory: their traffic (read + write bytes) moves this much faster than the memory
    // rate. Fitted to trib-perf -A oneshot|twoshot on this machine (host rate 4 GB/s), measured /
    // predicted us: 4 ranks 1 MiB two-shot 205 / 211, one-shot 386-577 / 459, 256 KiB two-shot
    // 49 / 63, 64 KiB one-shot 34-44 / 39; 2 ranks 1 MiB one-shot 132-135 / 131, two-shot 68-69 / 91.
    // (Those runs were the board's fast path; the two-shot window schedule moves 4S/n more, see
    // docs/PLANNER.md, and is not re-measured yet.) The simulator uses it for window work on a host.
    c.boardCacheSpeedup = 7.6;
    c.boardChunkBytes = 1 << 20;
    c.minChunkBytes = 64 << 10;
    c.maxChunkBytes = 4 << 20;
    c.executorWindowSteps = static_cast<int>(kExecutorWindowSteps);  // the executor's (algo/schedule.hpp)
    // NCCL's tuning model (docs/PLANNER.md "Protocols"): a ring gets 0.92 of Simple's rate with
    // LL128 and 0.5 with LL; its steps cost 1.9 and 0.6 us on NVLink (Simple 3.4) and 4.0 and
    // 2.7 us across the network (Simple 14.0); its base latencies are 14.0 and 6.6 us (Simple 8.4).
    // The overheads here are those steps less the hops the generators already charge (two NVLink
    // hops, 1.0 us; about 3 us of network hops), never below zero.
    // The tree's shares of its own Simple rate: LL 1/3.8 (NCCL's busBw * 1.0/3.8 on the tree),
    // LL128 7/9 in one node and 120/128 across nodes (busBw * (nNodes == 1 ? 7.0/9.0 : 120.0/128.0)).
    c.ll128 = {0.92, 7.0 / 9.0, 120.0 / 128.0, 1.9 - 1.0, 0.0, 14.0, {}, {}};
    c.ll = {0.5, 1.0 / 3.8, 1.0 / 3.8, 0.0, 0.0, 6.6, {}, {}};
    // LL's throughput ceilings (NCCL's llMaxBws, GB/s of bus bandwidth): in one node by GPU
    // generation (Volta 39, Ampere 87.7, Hopper 141, Blackwell 282); across nodes by CPU maker,
    // two nodes / more (Intel, and Arm, which NCCL counts with Intel: 39 / 20.4; AMD 22.5 / 19.0).
    const double inDomain[kNumGpuArchs] = {0, 39.0, 87.7, 141.0, 2 * 141.0};
    std::copy(inDomain, inDomain + kNumGpuArchs, c.ll.ceilingInDomainGBps);
    c.ll.ceilingAcrossGBps[0][0] = 39.0, c.ll.ceilingAcrossGBps[0][1] = 20.4;
    c.ll.ceilingAcrossGBps[1][0] = 22.5, c.ll.ceilingAcrossGBps[1][1] = 19.0;
    return c;
  }();
  return k;
}

}  // namespace trib
