// Cost model formulas. Units inside: µs and bytes; bandwidths converted from GB/s (10^9 B/s) to
// bytes/µs (x 1e3). Derivations and calibration: docs/PLANNER.md.
#include "plan/cost_model.hpp"

#include <strings.h>
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "algo/algorithms.hpp"

namespace trib {

bool isNvlsPlan(PlanAlgo a) {
  return a == PlanAlgo::Nvls || a == PlanAlgo::NvlsSwitch || a == PlanAlgo::NvlsRing;
}

const char* planAlgoName(PlanAlgo a) {
  static const char* const names[kNumPlanAlgos] = {
      "ring",     "tree", "rhd",         "direct",  "binomial",    "chain",   "hierarchical",
      "switch",   "nvls", "nvls_switch", "oneshot", "hier_switch", "twoshot", "allgather_reduce",
      "nvls_ring"};
  auto i = static_cast<int>(a);
  return i >= 0 && i < kNumPlanAlgos ? names[i] : "invalid";
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

namespace {

constexpr double kB = 1e3;  // GB/s -> bytes/µs

struct PathInfo {
  double bw = 0;  // effective GB/s
  double lat = 0;
  bool net = false;
};

PathInfo pathInfo(const Topology& t, Router& r, int a, int b, const CostConstants& k) {
  PathInfo p;
  if (a == b) {  // two ranks on one node (processes on one host): a copy through shared memory
    const Node& n = t.node(a);
    double mem =
        n.reduceGBps > 0 ? n.reduceGBps : (n.type == NodeType::Gpu ? k.gpuReduceGBps : k.cpuReduceGBps);
    p.bw = mem * k.eff[static_cast<int>(LinkType::Shm)];
    return p;
  }
  const auto& path = r.route(a, b);
  p.bw = path.empty() ? 0 : 1e300;
  for (DirLink d : path) {
    const Link& l = t.link(dirLinkId(d));
    p.bw = std::min(p.bw, dirLinkBw(t, d) * k.eff[static_cast<int>(l.type)]);
    p.lat += l.latencyUs;
    p.net |= l.type == LinkType::Net;
  }
  return p;
}

double reduceRate(const Node& n, const CostConstants& k) {
  if (n.reduceGBps > 0) return n.reduceGBps;
  return n.type == NodeType::Gpu ? k.gpuReduceGBps : k.cpuReduceGBps;
}

}  // namespace

// Boundaries between domains whose routes price the ring's step across, and rings of the level
// across whose steps are priced (computeFabric).
constexpr size_t kRingCrossingsPriced = 64;
constexpr int kLevelRingsPriced = 8;

bool FabricView::crossesRails(int s, int q) const {
  if (!rails) return false;
  const Rails& r = *rails;
  return r.rail[s] >= 0 && r.rail[q] >= 0 && r.rail[s] != r.rail[q] && r.domain[s] != r.domain[q];
}

int FabricView::relayNic(int s, int q) const {
  if (!rails || !rails->relays || !crossesRails(s, q)) return s;
  const Rails& r = *rails;
  for (auto [rail, nic] : r.byRail[r.domain[s]])
    if (rail == r.rail[q]) return nic;
  return s;
}

// On a rail-optimized fabric each rank's rail and domain (crossesRails), and where GPUs relay
// (PXN), as the Router's routes go (route.cpp: a step across domains leaves by the NIC of the
// sender's domain on the receiver's rail), per domain the NICs of all its GPUs (a GPU that is no
// rank relays all the same), for relayNic.
std::shared_ptr<const FabricView::Rails> relayTable(const Topology& t, const Router& router,
                                                    const std::vector<int>& ranks,
                                                    const std::vector<int>& dom) {
  auto rails = std::make_shared<FabricView::Rails>();
  rails->relays = router.relays();
  const int n = static_cast<int>(ranks.size());
  rails->nics = n;
  rails->rail.resize(n);
  rails->domain.resize(n);
  std::map<int, int> domainIndex;  // topology domain -> index into byRail
  std::unordered_map<int, int> rankOfNode;
  for (int i = 0; i < n; ++i) {
    rails->rail[i] = router.railOf(ranks[i]);
    rails->domain[i] = domainIndex.emplace(dom[i], static_cast<int>(domainIndex.size())).first->second;
    rankOfNode.emplace(ranks[i], i);
  }
  rails->byRail.resize(domainIndex.size());
  for (int node = 0; node < t.numNodes(); ++node) {  // every GPU of those domains, rank or not
    const auto d = domainIndex.find(t.domainOf(node));
    if (d == domainIndex.end() || t.node(node).type != NodeType::Gpu || router.railOf(node) < 0) continue;
    const auto rank = rankOfNode.find(node);
    rails->byRail[d->second].emplace_back(router.railOf(node),
                                          rank != rankOfNode.end() ? rank->second : rails->nics++);
  }
  return rails;
}

// Direct's blocks through relays (FabricView::relayedNvlinkBlocks): per domain D and rail j, r(D, j)
// remote ranks on rail j (all ranks on it less D's own). GPU g of D on rail j sends its |D| - 1
// local blocks and a first leg for every remote rank on another rail, and takes in its local
// blocks and a leg from each other rank of D for every remote rank on rail j; its NIC sends
// |D| r(D, j).
void relayedDirectBlocks(const FabricView::Rails& rails, int n, FabricView* f) {
  const size_t domains = rails.byRail.size();
  std::map<int, double> onRail;                           // rail -> ranks on it
  std::vector<std::map<int, double>> ownOnRail(domains);  // per domain: rail -> its ranks on it
  std::vector<double> size(domains, 0);
  for (int i = 0; i < n; ++i) {
    ++size[rails.domain[i]];
    if (rails.rail[i] >= 0) ++onRail[rails.rail[i]], ++ownOnRail[rails.domain[i]][rails.rail[i]];
  }
  auto count = [](const std::map<int, double>& m, int j) {
    const auto it = m.find(j);
    return it == m.end() ? 0.0 : it->second;
  };
  for (size_t d = 0; d < domains; ++d) {
    auto remoteOn = [&](int j) { return count(onRail, j) - count(ownOnRail[d], j); };
    double remoteOnItsRails = 0;
    for (auto [j, nic] : rails.byRail[d]) remoteOnItsRails += remoteOn(j);
    for (auto [j, nic] : rails.byRail[d]) {
      const bool rank = nic < n;
      const double local = rank ? size[d] - 1 : 0;
      const double in = local + (size[d] - (rank ? 1 : 0)) * remoteOn(j);
      const double out = rank ? local + remoteOnItsRails - remoteOn(j) : 0;
      f->relayedNvlinkBlocks = std::max({f->relayedNvlinkBlocks, in, out});
      f->relayedNicBlocks = std::max(f->relayedNicBlocks, size[d] * remoteOn(j));
    }
  }
}

FabricView computeFabric(const Topology& t, Router& router, const std::vector<int>& ranks,
                         const CostConstants& k) {
  FabricView f;
  f.n = static_cast<int>(ranks.size());
  if (ranks.empty()) return f;
  std::map<int, int> perDom;
  std::vector<int> dom(ranks.size());
  bool contiguous = true;
  for (size_t i = 0; i < ranks.size(); ++i) {
    dom[i] = t.domainOf(ranks[i]);
    if (dom[i] < 0) dom[i] = -1 - static_cast<int>(i);  // outside any domain: alone
    if (i > 0 && dom[i] != dom[i - 1] && perDom.count(dom[i])) contiguous = false;
    ++perDom[dom[i]];
  }
  f.domains = static_cast<int>(perDom.size());
  f.hostRanks =
      std::all_of(ranks.begin(), ranks.end(), [&](int r) { return t.node(r).type != NodeType::Gpu; });
  f.perDomain = f.n;
  int maxDom = 0;
  for (auto [d, c] : perDom) f.perDomain = std::min(f.perDomain, c), maxDom = std::max(maxDom, c);
  f.uniform = contiguous && maxDom == f.perDomain;
  if (contiguous) {  // domains in rank order: all of maxDom ranks but the last?
    bool full = true;
    for (size_t i = 0, size; i < ranks.size(); i += size)
      size = perDom[dom[i]], full &= size == static_cast<size_t>(maxDom) || i + size == ranks.size();
    f.perFullDomain = full ? maxDom : 0;
  }
  // The oldest GPU generation; the hosts' CPU maker (AMD if any is, as NCCL's "mixed" counts).
  f.gpuArch = GpuArch::Blackwell;
  std::vector<char> rankHost(t.numHosts(), 0);
  for (int r : ranks) {
    f.gpuArch = std::min(f.gpuArch, t.node(r).arch);  // Unknown sorts first
    if (t.hostOf(r) >= 0) rankHost[t.hostOf(r)] = 1;
  }
  bool anyUnknown = false, anyAmd = false;
  CpuVendor other = CpuVendor::Unknown;  // Intel or Arm: NCCL counts them alike
  for (int i = 0; i < t.numNodes(); ++i) {
    const Node& x = t.node(i);
    if ((x.type != NodeType::Cpu && x.type != NodeType::Numa) || t.hostOf(i) < 0 || !rankHost[t.hostOf(i)])
      continue;
    anyUnknown |= x.vendor == CpuVendor::Unknown;
    anyAmd |= x.vendor == CpuVendor::Amd;
    if (x.vendor != CpuVendor::Amd) other = x.vendor;
  }
  f.hostVendor = anyUnknown ? CpuVendor::Unknown : anyAmd ? CpuVendor::Amd : other;
  f.reduceGBps = reduceRate(t.node(ranks[0]), k);
  for (int r : ranks) f.reduceGBps = std::min(f.reduceGBps, reduceRate(t.node(r), k));
  // Ranks beyond a CPU node's cores time-share them: each gets cores/ranks of a core for its copies
  // and reductions (the slowest node bounds a collective). Unknown cores (0): no sharing assumed.
  std::map<int, int> onNode;
  for (int r : ranks) ++onNode[r];
  double share = 1;
  for (auto [node, count] : onNode)
    if (t.node(node).cores > 0 && count > t.node(node).cores)
      share = std::min(share, static_cast<double>(t.node(node).cores) / count);
  f.reduceGBps *= share;

  if (maxDom >= 2) {
    for (size_t i = 1; i < ranks.size(); ++i) {
      if (dom[i] != dom[0]) continue;
      PathInfo p = pathInfo(t, router, ranks[0], ranks[i], k);
      f.bwIntra = ranks[0] == ranks[i] ? p.bw * share : p.bw;  // a same-node copy runs on a shared core
      f.latIntraUs = p.lat + k.stepOverheadUs + (p.net ? k.netStepOverheadUs : 0);
      f.intraNet = p.net;
      break;
    }
  }
  if (f.domains >= 2) {
    size_t j = 1;
    while (dom[j] == dom[0]) ++j;
    PathInfo p = pathInfo(t, router, ranks[0], ranks[j], k);
    f.bwInter = p.bw;
    f.latInterUs = p.lat + k.stepOverheadUs + (p.net ? k.netStepOverheadUs : 0);
    // The farthest domain: the last where the network is built in rank order (another pod of a
    // three-tier tree, more hops); its rank on rank 0's rail on a rail-optimized fabric (what a
    // step between rails adds is crossRailLatUs, added where a step crosses).
    size_t farRank = ranks.size() - 1;
    if (router.railOptimized())
      for (size_t q = ranks.size(); q-- > 0 && dom[q] == dom.back();)
        if (router.railOf(ranks[q]) == router.railOf(ranks[0])) farRank = q;
    const double far = dom.back() != dom[0] ? pathInfo(t, router, ranks[0], ranks[farRank], k).lat : p.lat;
    f.latFarUs = f.latInterUs + std::max(0.0, far - p.lat);
    // The ring crosses every boundary between domains in rank order, the last one back to the
    // first: its step across is priced at their mean latency (on a fat tree some pairs meet at a
    // spine where the first pair shares a leaf). A route is a search of the fabric, so past
    // kRingCrossingsPriced boundaries an evenly spaced sample of them stands for all.
    std::vector<size_t> boundary;  // rank i is the last of its domain
    for (size_t i = 0; i < ranks.size(); ++i)
      if (dom[i] != dom[(i + 1) % ranks.size()]) boundary.push_back(i);
    const size_t priced = std::min(boundary.size(), kRingCrossingsPriced);
    double crossLat = 0;
    for (size_t s = 0; s < priced; ++s) {
      const size_t i = boundary[s * boundary.size() / priced];
      crossLat += pathInfo(t, router, ranks[i], ranks[(i + 1) % ranks.size()], k).lat;
    }
    f.latRingInterUs = f.latInterUs + crossLat / static_cast<double>(priced) - p.lat;
    // The level across of hierarchical plans (equal domains): d rings at once, ring l joining GPU
    // l of each domain to GPU l of the next, each at the mean of its steps; the slowest ring
    // paces the level (a node's NICs may sit on two leaves: `dgx-a100`'s leaves take 20 NICs).
    // Within the same budget of route searches: up to kLevelRingsPriced rings, evenly spaced,
    // each over an evenly spaced sample of the boundaries.
    f.latLevelInterUs = f.latInterUs;
    if (f.uniform) {
      const int d = f.perDomain, rings = std::min(d, kLevelRingsPriced);
      const size_t steps = std::min(boundary.size(), std::max<size_t>(1, kRingCrossingsPriced / rings));
      double slowest = 0;
      for (int u = 0; u < rings; ++u) {
        const size_t l = static_cast<size_t>(u) * d / rings;
        double lat = 0;
        for (size_t s = 0; s < steps; ++s) {
          const size_t i = boundary[s * boundary.size() / steps];  // the last rank of its domain
          lat += pathInfo(t, router, ranks[i + 1 - d + l], ranks[(i + 1 + l) % ranks.size()], k).lat;
        }
        slowest = std::max(slowest, lat / static_cast<double>(steps));
      }
      f.latLevelInterUs = f.latInterUs + slowest - p.lat;
    }
    if (router.railOptimized()) {
      f.rails = relayTable(t, router, ranks, dom);
      if (f.rails->relays) relayedDirectBlocks(*f.rails, f.n, &f);
      const int last = static_cast<int>(j) - 1;  // the ring's step across: domain 0's last rank to j
      f.ringInterRelayed = f.relayNic(last, static_cast<int>(j)) != last;
      // What a step between rails adds: rank 0's route to a GPU of the next domain on another
      // rail, against its route to that domain's first rank (p).
      for (size_t q = j; q < ranks.size() && dom[q] == dom[j]; ++q)
        if (f.crossesRails(0, static_cast<int>(q))) {
          f.crossRailLatUs = std::max(0.0, pathInfo(t, router, ranks[0], ranks[q], k).lat - p.lat);
          break;
        }
    }
    f.interNet = p.net;
    // Under load every rank of a host shares the host's network egress; a thin core shares more.
    int host = t.hostOf(ranks[0]);
    double egress = 0;
    for (int i = 0; i < t.numLinks(); ++i) {
      const Link& l = t.link(i);
      if (l.type != LinkType::Net) continue;
      bool ina = t.node(l.a).type != NodeType::Switch && t.hostOf(l.a) == host;
      bool inb = t.node(l.b).type != NodeType::Switch && t.hostOf(l.b) == host;
      if (ina != inb) egress += (ina ? l.bwAB : l.bwBA) * k.eff[static_cast<int>(LinkType::Net)];
    }
    int inHost = 0;
    for (int r : ranks) inHost += t.hostOf(r) == host;
    double edge = 0, core = 0;
    t.networkCapacity(&edge, &core);
    double oversub = core > 0 && edge > 0 ? std::min(1.0, core / edge) : 1.0;
    f.bwInterLoaded = egress > 0 ? std::min(f.bwInter, egress / std::max(1, inHost)) * oversub : f.bwInter;
    f.hostEgressGBps = egress * oversub;
  }
  // The tree's busiest rank and host (O(n): at 131,072 ranks a few ms, once per rank count).
  if (f.n >= 2) {
    std::unordered_map<int, int> hostOut;
    std::vector<int> edgesIn(f.n, 0);  // each rank's edges within its domain (its NVLink port)
    for (int i = 0; i < f.n; ++i) {
      int in = 0, out = 0;
      for (int tr = 0; tr < 2; ++tr) {
        const algo::TreeLinks l = algo::doubleTreeNode(f.n, i, tr);
        for (int nb : {l.parent, l.child[0], l.child[1]}) {
          if (nb < 0) continue;
          (dom[nb] == dom[i] ? in : out)++;
        }
      }
      edgesIn[i] = in;
      f.treeEdgesIn = std::max(f.treeEdgesIn, in);
      f.treeEdgesOut = std::max(f.treeEdgesOut, out);
      if (out > 0) f.treeHostEdgesOut = std::max(f.treeHostEdgesOut, hostOut[t.hostOf(ranks[i])] += out);
    }
    // Through PXN relays an edge's data leaves by the relay's NIC, not its sender's (it arrives at
    // its receiver's own): the busiest NIC out is the one most edges leave by (relayNic).
    // And the edge's first leg crosses NVLink, out of its sender's port and into the relay GPU's,
    // beside their edges in the domain (under LL NVLink runs at the NIC's rate).
    if (f.rails && f.rails->relays) {
      std::vector<int> leaving(f.nics(), 0), legsOut(f.nics(), 0), legsIn(f.nics(), 0);
      for (int i = 0; i < f.n; ++i)
        for (int tr = 0; tr < 2; ++tr) {
          const algo::TreeLinks l = algo::doubleTreeNode(f.n, i, tr);
          for (int nb : {l.parent, l.child[0], l.child[1]})
            if (nb >= 0 && dom[nb] != dom[i]) {
              const int x = f.relayNic(i, nb);
              f.treeEdgesOut = std::max(f.treeEdgesOut, ++leaving[x]);
              if (x != i) ++legsOut[i], ++legsIn[x];
            }
        }
      for (int x = 0; x < f.nics(); ++x) {
        const int own = x < f.n ? edgesIn[x] : 0;
        f.treeEdgesIn = std::max(f.treeEdgesIn, own + std::max(legsOut[x], legsIn[x]));
      }
    }
    // The critical path: the costliest rank-to-root path of either tree, an edge costing one
    // step inside a domain or across (the trees run at once; a slice goes up, then down).
    const double aIn = f.perDomain > 1 ? f.latIntraUs : f.latInterUs, aOut = f.latInterUs;
    std::vector<int> pending, edges(f.n), across(f.n);
    auto shape = std::make_shared<FabricView::TreeShape>();
    shape->domain = dom;
    auto& paths = shape->pathAcross;
    for (int tr = 0; tr < 2; ++tr) {
      auto& nodes = shape->node[tr];
      nodes.resize(f.n);
      for (int i = 0; i < f.n; ++i) {
        const algo::TreeLinks l = algo::doubleTreeNode(f.n, i, tr);
        nodes[i] = {l.parent, l.child[0], l.child[1]};
      }
      std::fill(edges.begin(), edges.end(), -1);
      for (int i = 0; i < f.n; ++i) {
        int x = i;
        while (edges[x] < 0) {
          const int up = nodes[x][0];
          if (up < 0) {
            edges[x] = across[x] = 0;
            break;
          }
          pending.push_back(x);
          x = up;
        }
        while (!pending.empty()) {  // fill back down from the first known ancestor
          const int y = pending.back();
          pending.pop_back();
          const int up = nodes[y][0];
          edges[y] = edges[up] + 1;
          across[y] = across[up] + (dom[up] != dom[y]);
        }
        if (static_cast<int>(paths.size()) <= edges[i]) paths.resize(edges[i] + 1, {INT32_MAX, -1});
        paths[edges[i]] = {std::min(paths[edges[i]][0], across[i]), std::max(paths[edges[i]][1], across[i])};
      }
      // Deepest first (a counting sort by depth in edges): every child before its parent.
      const int maxEdges = *std::max_element(edges.begin(), edges.end());
      std::vector<int> start(maxEdges + 2, 0);
      for (int e : edges) ++start[maxEdges - e + 1];
      for (int d = 1; d <= maxEdges + 1; ++d) start[d] += start[d - 1];
      shape->order[tr].resize(f.n);
      for (int i = 0; i < f.n; ++i) shape->order[tr][start[maxEdges - edges[i]]++] = i;
    }
    f.treeShape = std::move(shape);
    f.treePathUs = treePathUs(f, aIn, aOut);
  }

  // NVLink-switch reduction: every rank's NVSwitch must reduce.
  f.nvlsGBps = 1e300;
  for (int r : ranks) {
    double best = 0;
    for (auto [lid, nb] : t.adjacent(r)) {
      const Node& sw = t.node(nb);
      if (sw.type == NodeType::NvSwitch && sw.reduce.can() && sw.reduce.reduceGBps > best) {
        best = sw.reduce.reduceGBps;
        f.nvlsCap = sw.reduce;
      }
    }
    f.nvlsGBps = std::min(f.nvlsGBps, best);
  }
  if (f.nvlsGBps <= 0 || f.nvlsGBps > 1e299) f.nvlsGBps = 0;

  // Network-switch reduction: every rank's leaf reduces and one aggregation tree spans all leaves.
  std::vector<int> leaves;
  double leafLat = 0, leafBw = 1e300, rate = 1e300, feed = 1e300;
  bool ok = f.n >= 2;
  std::vector<DirLink> up;
  for (int r : ranks) {
    int leaf = firstSwitchAbove(t, r, &up);
    if (leaf < 0 || !t.node(leaf).reduce.can()) {
      ok = false;
      break;
    }
    if (std::find(leaves.begin(), leaves.end(), leaf) == leaves.end()) leaves.push_back(leaf);
    double lat = 0;
    for (DirLink d : up) {
      const Link& l = t.link(dirLinkId(d));
      lat += l.latencyUs;
      leafBw = std::min(leafBw, dirLinkBw(t, d) * k.eff[static_cast<int>(l.type)]);
    }
    if (!up.empty())
      feed = std::min(feed, dirLinkBw(t, up[0]) * k.eff[static_cast<int>(t.link(dirLinkId(up[0])).type)]);
    leafLat = std::max(leafLat, lat);
    rate = std::min(rate, t.node(leaf).reduce.reduceGBps);
    f.switchCap = t.node(leaf).reduce;
  }
  int depth = 0;
  const AggTree* tree = ok ? findAggTree(t, leaves, &depth) : nullptr;
  if (tree) {
    double upLat = 0;
    for (auto [c, p] : tree->edges) {
      rate = std::min(rate, t.node(p).reduce.reduceGBps);
      upLat = std::max(upLat, t.link(dirLinkId(dirLinkBetween(t, c, p))).latencyUs);
    }
    f.switchTiers = depth + 1;
    double loaded = f.bwInterLoaded > 0 ? std::min(leafBw, f.bwInterLoaded) : leafBw;
    f.switchGBps = std::min(loaded, rate * k.eff[static_cast<int>(LinkType::Net)]);
    f.switchFeedGBps = feed;
    f.switchLatUs =
        leafLat + depth * upLat + k.stepOverheadUs + k.netStepOverheadUs + k.switchOpUs * f.switchTiers;
  }
  f.summary = strprintf("%d ranks in %d domain(s) of %d%s", f.n, f.domains, f.perDomain,
                        f.uniform ? "" : " (uneven)");
  if (share < 1) f.summary += strprintf("; ranks time-share cores (x%.2f)", share);
  if (f.bwIntra > 0) f.summary += strprintf("; intra %.0f GB/s %.1f us/step", f.bwIntra, f.latIntraUs);
  if (f.domains > 1)
    f.summary +=
        strprintf("; inter %.0f GB/s (%.0f loaded) %.1f us/step", f.bwInter, f.bwInterLoaded, f.latInterUs);
  if (f.ringInterRelayed) f.summary += "; PXN: steps across rails relay over NVLink";
  if (router.railOptimized() && !router.relays()) f.summary += "; PXN off: each GPU sends by its own NIC";
  if (f.nvlsGBps > 0) f.summary += strprintf("; nvls %.0f GB/s", f.nvlsGBps);
  if (f.switchGBps > 0)
    f.summary += strprintf("; switch reduce %.0f GB/s, %d tier(s), %.1f us one way", f.switchGBps,
                           f.switchTiers, f.switchLatUs);
  return f;
}

PredictScratch::PredictScratch() : impl_(std::make_unique<Impl>()) {}
PredictScratch::~PredictScratch() = default;

double treePathUs(const FabricView& f, double aIn, double aOut) {
  if (!f.treeShape) return 0;
  // A path of e edges, x of them across: e aIn + x (aOut - aIn), longest at the most (or fewest)
  // crossings for its e.
  double worst = 0;
  const auto& paths = f.treeShape->pathAcross;
  for (size_t e = 0; e < paths.size(); ++e) {
    if (paths[e][1] < 0) continue;
    const int x = aOut >= aIn ? paths[e][1] : paths[e][0];
    worst = std::max(worst, static_cast<double>(e - x) * aIn + x * aOut);
  }
  return worst;
}

double rankCeilingGBps(const FabricView& f, const CostConstants& k, Protocol p) {
  if (p == Protocol::Simple) return 0;
  const ProtocolCost& pc = k.protocolCost(p);
  if (f.domains <= 1) return pc.ceilingInDomainGBps[static_cast<int>(f.gpuArch)];
  if (f.hostVendor == CpuVendor::Unknown) return 0;
  return pc.ceilingAcrossGBps[f.hostVendor == CpuVendor::Amd][f.domains >= 3];
}

FabricView protocolView(const FabricView& simple, const CostConstants& k, Protocol p, PlanAlgo a) {
  FabricView f = simple;
  f.protocol = p;
  if (p == Protocol::Simple) return f;
  const CostConstants kp = k.forProtocol(p, a, simple.domains);
  const double share = k.protocolShare(p, a, simple.domains);
  // Every link's efficiency scales alike, so each path's bottleneck scales by the share; a rank
  // moves no more than the protocol's ceiling, whatever its links.
  f.bwIntra *= share, f.bwInter *= share, f.bwInterLoaded *= share, f.hostEgressGBps *= share;
  f.rankCeilingGBps = rankCeilingGBps(f, k, p);
  if (f.rankCeilingGBps > 0)
    for (double* bw : {&f.bwIntra, &f.bwInter, &f.bwInterLoaded, &f.hostEgressGBps})
      *bw = std::min(*bw, f.rankCeilingGBps);
  auto step = [](const CostConstants& c, bool net) {
    return c.stepOverheadUs + (net ? c.netStepOverheadUs : 0);
  };
  if (f.latIntraUs > 0) f.latIntraUs += step(kp, f.intraNet) - step(k, f.intraNet);
  if (f.latInterUs > 0) {
    f.latInterUs += step(kp, f.interNet) - step(k, f.interNet);
    f.latFarUs += step(kp, f.interNet) - step(k, f.interNet);
    f.latRingInterUs += step(kp, f.interNet) - step(k, f.interNet);
    f.latLevelInterUs += step(kp, f.interNet) - step(k, f.interNet);
  }
  f.treePathUs = treePathUs(f, f.perDomain > 1 ? f.latIntraUs : f.latInterUs, f.latInterUs);
  return f;
}

namespace {

uint64_t clampChunk(double c, const CostConstants& k) {
  c = std::max<double>(k.minChunkBytes, std::min<double>(k.maxChunkBytes, c));
  return static_cast<uint64_t>(std::ceil(c));
}

// Pipelined chunk that balances fill (depth x chunk / bw) against per-chunk overhead.
uint64_t pipelineChunk(double S, double bwBpu, int depth, const CostConstants& k) {
  return clampChunk(std::sqrt(S * k.chunkOverheadUs * bwBpu / std::max(1, depth)), k);
}

double pipelineCost(double S, double c, double bwBpu, int depth, const CostConstants& k) {
  c = std::max(1.0, std::min(c, S));  // a message smaller than a chunk fills the pipe with itself
  return depth * c / bwBpu + std::ceil(S / c) * k.chunkOverheadUs;
}

int ceilLog2(int n) {
  int l = 0;
  while ((1 << l) < n) ++l;
  return l;
}

struct Ctx {
  const FabricView& f;
  const CostConstants& k;
  double R;  // reduce rate, bytes/µs
  bool multi;
  double bIn, bOut, bLoaded, aIn, aOut;
};

// Ring rounds in which every rank passes a block of v bytes to its neighbour, cut into chunks of c
// that pipeline (the hierarchical schedules slice every round; a chunk goes on once the same chunk
// of the previous round has arrived): `reduceRounds` at bReduce, then `copyRounds` at bCopy.
// Either the link paces them (every round's bytes back to back, one hop's latency at the end) or
// one chunk's chain of hops does (a latency and a chunk-time per round, the block's other chunks
// one chunk-time behind). One chunk per block: rounds x (a + v/b).
double pipelinedRing(int reduceRounds, int copyRounds, double v, double c, double a, double bReduce,
                     double bCopy) {
  if (reduceRounds + copyRounds <= 0 || v <= 0) return 0;
  c = std::clamp(c, 1.0, v);
  const double link = reduceRounds * v / bReduce + copyRounds * v / bCopy + a;
  const double chain = reduceRounds * (a + c / bReduce) + copyRounds * (a + c / bCopy) +
                       (std::ceil(v / c) - 1) * c / std::min(bReduce, bCopy);
  return std::max(link, chain);
}

// The flat ring (ring.cpp without rails): n-1 rounds reducing a block of v into the next rank,
// n-1 copying it on, or both, each block sent in slices of `chunk` that pipeline as the
// hierarchical levels' rings do (pipelinedRing): either the busiest link paces the rounds (their
// bytes back to back, one hop's latency at the end) or one slice's chain of hops does (a latency
// and a slice-time per hop, the block's other slices one slice-time behind at the slowest hop's
// rate). Across domains the chain crosses the network on m of every n hops. One slice a block:
// rounds x (a + v/b). A block of several slices hides all but one hop's latency behind its bytes
// (one GB200 rack at 256 MiB on 36 GPUs, two slices a block: the latencies in series priced it
// 1.34x its replay).
double flatRing(const Ctx& c, double v, double chunk, bool reduce, bool copy) {
  const int n = c.f.n, reduceRounds = reduce ? n - 1 : 0, copyRounds = copy ? n - 1 : 0;
  const double bInR = std::min(c.bIn, c.R);
  if (!c.multi) return pipelinedRing(reduceRounds, copyRounds, v, chunk, c.aIn, bInR, c.bIn);
  if (n < 2 || v <= 0) return 0;
  const double bOutR = std::min(c.bOut, c.R), cb = std::clamp(chunk, 1.0, v);
  const double across = static_cast<double>(c.f.domains) / n;
  const bool inside = c.f.perDomain > 1;
  auto hop = [&](double bIn, double bOut) {
    return (1 - across) * (inside ? c.aIn + cb / bIn : 0) + across * (c.aOut + cb / bOut);
  };
  // The block's other slices follow at the slowest hop's rate (a reducing one where any reduces).
  const double slowest =
      reduce ? (inside ? std::min(bInR, bOutR) : bOutR) : (inside ? std::min(c.bIn, c.bOut) : c.bOut);
  const double chain = reduceRounds * hop(bInR, bOutR) + copyRounds * hop(c.bIn, c.bOut) +
                       (std::ceil(v / cb) - 1) * cb / slowest;
  const double link = reduceRounds * v / bOutR + copyRounds * v / c.bOut + c.aOut;
  return std::max(chain, link);
}

// The domain all-gather of a two-level schedule (hierarchical, hier_switch) overlapped with the
// level across domains, which takes `across` in all, returns its first final piece after
// `firstFinal` and its last of c0 bytes at its end: the all-gather, on the NVLink that level does
// not use, starts on the first piece and ends after the last one's d-1 hops, or after its own
// pipelined time from the first, whichever is later. The executor starts steps at most a window past its
// first unfinished one: while the level across has `acrossSteps` steps pending, only the all-gather's rounds
// that fit in the rest of the window overlap it; the others run after it (and the last chunk's hops with
// them).
double domainAllGatherAfter(const Ctx& c, int d, double v, double cb, double c0, double across,
                            double firstFinal, double acrossSteps) {
  const double ag = pipelinedRing(0, d - 1, v, cb, c.aIn, c.bIn, c.bIn);
  const double lastChunkAg = pipelinedRing(0, d - 1, c0, cb, c.aIn, c.bIn, c.bIn);
  const double agSteps = 2.0 * (d - 1) * std::ceil(v / std::min(cb, v));
  const double seen = std::clamp((c.k.executorWindowSteps - acrossSteps) / agSteps, 0.0, 1.0);
  return std::max(across + std::max(lastChunkAg, (1 - seen) * ag), firstFinal + ag);
}

// A two-level schedule in pipeline slices (hierarchical, hier_switch: docs/PLANNER.md
// "hierarchical: pipeline slices"), each slice d blocks of w through the levels before the next,
// `rs` one slice's reduce-scatter: the busier of the NVLink port and the level across paces them.
// The port (every slice's reduce-scatter and all-gather) is busy from the start and idle at the
// end while the last slice crosses (`acrossOne`) and its last chunk (c0) goes round the domain.
// The level across (`acrossSlice` of work a slice) waits at the start: every slice in the window
// offers its first round at once and the port serves sends in the order they are ready, so the
// first slice's reduce-scatter ends with the window's others; after its last chunk, its latency
// and that chunk's round. `fedWork`: the window's slices' work on the busier link.
struct SliceBounds {
  double us, fedWork;
};
SliceBounds pipelineSlices(const Ctx& c, int d, double w, double cb, double c0, double slices,
                           double sliceSteps, double rs, double acrossOne, double acrossSlice,
                           double acrossLat) {
  const double reduceIn = std::min(c.bIn, c.R);
  const double inWindow = std::clamp(c.k.executorWindowSteps / sliceSteps, 1.0, slices);
  const double nvlinkSlice = (d - 1) * w * (1 / reduceIn + 1 / c.bIn), rsPort = (d - 1) * w / reduceIn;
  const double lastChunkAg = pipelinedRing(0, d - 1, c0, cb, c.aIn, c.bIn, c.bIn);
  const double byNvlink = slices * nvlinkSlice + acrossOne + lastChunkAg;
  const double byAcross = std::max(rs, inWindow * rsPort) + slices * acrossSlice + acrossLat + lastChunkAg;
  return {std::max(byNvlink, byAcross), inWindow * std::max(nvlinkSlice, acrossSlice)};
}

// The rail ring all-reduce (ring.cpp with ranksPerDomain = d making m >= 2 domains): d channels,
// each a ring of all n ranks over S/d that enters every domain at a different local rank, so per
// round (every rank passes one block of v = S/(dn) on each channel) a rank's NVLink port carries
// d-1 blocks and its NIC (the loaded share: every rank of a host sends at once) one. The rounds
// pipeline chunk by chunk (pipelinedRing's two bounds): either the busier link paces them (2(n-1)
// rounds of its share back to back, one network hop's latency at the end), or one chunk's chain
// does: 2(n-1) hops, m/n of them across domains (a network latency and the chunk on the NIC), the
// others inside (a latency and the chunk on NVLink), then the block's other chunks one
// busiest-link chunk-time each. The chain's chunk meets the port's other channels only in the
// link bound: in a round a rank's channels arrive at different times (each channel crosses at a
// different rank), so on the chain a chunk finds the port mostly free (dgx-a100:2 16 MiB, one
// chunk a block: with d-1 chunks a hop the model was 1.35x the replay).
double railRing(const Ctx& c, int d, double v, double chunk) {
  const int n = c.f.n;
  if (n < 2 || v <= 0) return 0;
  const double cb = std::clamp(chunk, 1.0, v);
  const double bInR = std::min(c.bIn, c.R), bOutR = std::min(c.bLoaded, c.R);
  // Through PXN relays the step between domains also crosses the entering rank's NVLink port (one
  // more block a round there) and lands whole in the relay before its NIC sends it.
  const int relayed = c.f.ringInterRelayed ? 1 : 0;
  auto share = [&](double x, double bIn, double bOut) {
    return std::max((d - 1 + relayed) * x / bIn, x / bOut);
  };
  const double link = (n - 1) * (share(v, bInR, bOutR) + share(v, c.bIn, c.bLoaded)) + c.aOut;
  const double fr = static_cast<double>(c.f.domains) / n;
  auto hop = [&](double bIn, double bOut) {
    return (1 - fr) * (c.aIn + cb / bIn) + fr * (c.aOut + relayed * cb / bIn + cb / bOut);
  };
  const double chain =
      (n - 1) * (hop(bInR, bOutR) + hop(c.bIn, c.bLoaded)) + (std::ceil(v / cb) - 1) * share(cb, bInR, bOutR);
  return std::max(link, chain);
}

// The double binary tree all-reduce on 3+ ranks, its trees two channels that share each link round
// robin (SimOptions::LinkOrder::Channels), rank by rank on the schedule's own trees
// (docs/PLANNER.md "The tree under two channels"). An edge costs its hop's latency a (one step,
// the chunk's software step in it: it overlaps the previous chunk's transfer) and a chunk's time
// tau on its link, inside a domain or across. Three bounds, the latest wins:
// - busy: a rank whose link in carries the most (bwTime: its edges x S/2) is busy from the first
//   chunk that reaches it (the earliest of its streams: a child's first partial sum, or a parent's
//   first result), from when that chunk starts on it (its arrival less its chunk time, which
//   bwTime already holds), for bwTime, after which the last slice still descends below it (each
//   edge a latency and a chunk, two where a rank sends to both children over one link);
// - fill: on that busiest link, from when its last stream starts there, what is left of its
//   bytes after the streams before could send them only as fast as they were fed (an up stream
//   no faster than the children's shares of their links), then the last stream's descent;
// - trip: the first slice's round trip to the last leaf (the second child's chunk queued behind
//   the first on a shared link in, both children served over one link out), then the other k - 1
//   slices behind it at the pace of the busiest up link per slice (the up streams that share it;
//   one where the streams before the last are leaves' streams gone before it starts).
// O(n) per call, on FabricView::treeShape.
double treeAllReduceUs(const FabricView& f, double S, double chunk, double aIn, double aOut, double bIn,
                       double bOut, double bwTime, PredictScratch* scratch) {
  const FabricView::TreeShape& sh = *f.treeShape;
  const int n = f.n;
  const double c = std::min(chunk, S / 2);
  const double tauIn = c / bIn, tauOut = c / bOut;
  auto across = [&](int x, int y) { return sh.domain[x] != sh.domain[y]; };
  // An edge to the next domain costs its hops (aOut); one to any other the farthest domain's
  // (the network is built in rank order: neighbours share the nearest switches).
  const double aFar = aOut + (f.latFarUs - f.latInterUs);
  auto alpha = [&](int x, int y) {
    if (!across(x, y)) return aIn;
    const double rails = f.crossesRails(x, y) ? f.crossRailLatUs : 0;  // a relay's hop, or a spine
    return rails + (std::abs(sh.domain[x] - sh.domain[y]) <= 1 ? aOut : aFar);
  };
  auto tau = [&](int x, int y) { return across(x, y) ? tauOut : tauIn; };
  constexpr double kInf = 1e300;
  std::vector<double> up(n), first(n), trip(n), maxDescent(n, 0.0), treeDescent[2], treeBeyond[2];
  std::vector<std::array<double, 2>> start(n, {kInf, kInf});  // [inside, across]
  std::vector<std::array<int, 2>> edges(n, {0, 0});
  // The up streams through each rank's link in and link out, per class: when each one's first
  // chunk is there (in: arrives, as `up` counts it; out: is ready to leave), at most 4 in, 2 out.
  // src: on a link in, the child whose stream it is where that child is a leaf in its tree (its
  // half ready at the start), on a link out kLeaf for the rank's own leaf stream; else -1.
  constexpr int kLeaf = -2;
  using Streams = PredictScratch::Impl::Streams;
  PredictScratch own;  // when the caller lends none
  auto& lists = (scratch ? scratch : &own)->impl().lists;
  for (auto& l : lists) {
    if (l.size() < static_cast<size_t>(n)) l.resize(n);
    for (int x = 0; x < n; ++x) l[x][0].m = l[x][1].m = 0;
  }
  auto &upIn = lists[0], &upOut = lists[1], &downIn = lists[2], &downOut = lists[3];
  double lastTrip = 0;
  for (int t = 0; t < 2; ++t) {
    const auto& nd = sh.node[t];
    const auto& order = sh.order[t];
    // Children served over the same link as child ch of x (1 or 2).
    auto sharing = [&](int x, int ch) {
      int m = 0;
      for (int o : {nd[x][1], nd[x][2]}) m += o >= 0 && across(o, x) == across(ch, x);
      return m;
    };
    for (int x : order) {  // up: the first partial sum at x (children first)
      double v = 0, lo = kInf;
      int kids = 0;
      for (int ch : {nd[x][1], nd[x][2]}) {
        if (ch < 0) continue;
        const double at = up[ch] + alpha(ch, x) + tau(ch, x);
        double& st = start[x][across(ch, x)];
        st = std::min(st, at);
        v = std::max(v, at);
        lo = std::min(lo, at);
        ++kids;
        ++edges[x][across(ch, x)];
      }
      auto leafOf = [&](int ch) { return nd[ch][1] < 0 && nd[ch][2] < 0 ? ch : -1; };
      const bool shared = kids == 2 && across(nd[x][1], x) == across(nd[x][2], x);
      if (shared) {  // the later child's first chunk queues behind the earlier one's
        const double at1 = up[nd[x][1]] + alpha(nd[x][1], x) + tau(nd[x][1], x);
        const int early = at1 <= lo ? nd[x][1] : nd[x][2], late = early == nd[x][1] ? nd[x][2] : nd[x][1];
        v = std::max(v, lo + tau(nd[x][1], x));
        upIn[x][across(nd[x][1], x)].add(lo, leafOf(early), early, t);
        upIn[x][across(nd[x][1], x)].add(v, leafOf(late), late, t);
      } else {
        for (int ch : {nd[x][1], nd[x][2]})
          if (ch >= 0) upIn[x][across(ch, x)].add(up[ch] + alpha(ch, x) + tau(ch, x), leafOf(ch), ch, t);
      }
      up[x] = v;
      if (nd[x][0] >= 0) {
        ++edges[x][across(x, nd[x][0])];
        upOut[x][across(x, nd[x][0])].add(v, kids ? -1 : kLeaf, x, t);  // a leaf's is ready at the start
      }
    }
    for (auto it = order.rbegin(); it != order.rend(); ++it) {  // down: the first result at x
      const int x = *it, p = nd[x][0];
      if (p < 0) {
        first[x] = trip[x] = up[x];
      } else {
        first[x] = first[p] + alpha(p, x) + tau(p, x);
        trip[x] = trip[p] + alpha(p, x) + sharing(p, x) * tau(p, x);
        downIn[x][across(p, x)].add(first[x], -1, -1, t);
        downOut[p][across(p, x)].add(first[p], -1, -1, t);
        double& st = start[x][across(p, x)];
        st = std::min(st, first[x]);
      }
      lastTrip = std::max(lastTrip, trip[x]);
    }
    std::vector<double>&descent = treeDescent[t], &beyond = treeBeyond[t];
    descent.assign(n, 0.0);
    beyond.assign(n, 0.0);
    for (int x : order) {  // the last slice's descent below x (beyond: once it has left x's link)
      double v = 0;
      for (int ch : {nd[x][1], nd[x][2]}) {
        if (ch < 0) continue;
        v = std::max(v, alpha(x, ch) + sharing(x, ch) * tau(x, ch) + descent[ch]);
        beyond[x] = std::max(beyond[x], alpha(x, ch) + descent[ch]);
      }
      descent[x] = v;
      maxDescent[x] = std::max(maxDescent[x], v);
    }
  }
  // The slices after the first on the busiest up link: k - 1 slices, each a chunk time per up
  // stream sharing the link (a rank's children's streams into its link in, its two trees' streams
  // out over one link), as before, except where the link is provably free of every other stream
  // when the last one starts there: the streams before it (up or down, r: when their first chunk
  // is there) are all leaves' streams (S/2 ready at the start, going at the link's rate: on a link
  // out the rank's own, on a link in a leaf child's whose link out nothing else uses until it is
  // gone) and all of their bytes fit between the first start and the last. Then the last stream
  // runs alone, one chunk time a slice (3 ranks at 2 MiB: a leaf's half is gone before its
  // neighbour's partial sums start). A stream fed from upstream may come slower than its link,
  // so it is never taken as gone early.
  const double slices = std::ceil(S / 2 / c);
  // A leaf's stream has rank y's link out of class a to itself until it is gone (S/2 at the link's
  // rate from the start) when nothing else starts there sooner.
  auto alone = [&](int y, int a, double w) {
    for (const Streams* q : {&upOut[y][a], &downOut[y][a]})
      for (int j = 0; j < q->m; ++j)
        if (q->src[j] != kLeaf && q->r[j] < w) return false;
    return true;
  };
  auto upLink = [&](const Streams& st, const Streams& down, int a, bool in, double t, double b) {
    const double w = S / 2 / b, last = *std::max_element(st.r.begin(), st.r.begin() + st.m);
    double lo = last;
    int before = 0;
    bool leaves = true;  // every stream there before the last is a leaf's, at its link's rate
    for (const Streams* q : {&st, &down})
      for (int j = 0; j < q->m; ++j)
        if (q->r[j] < last) {
          lo = std::min(lo, q->r[j]), ++before;
          leaves = leaves && (in ? q->src[j] >= 0 && alone(q->src[j], a, w) : q->src[j] == kLeaf);
        }
    const int m = before == 0 || (leaves && lo + before * w <= last) ? 1 : st.m;
    return (slices - 1) * t * m;
  };
  // The busiest links: the most edges of their class where that class's load is the largest.
  int most[2] = {0, 0};
  double pace = 0;
  for (int x = 0; x < n; ++x) {
    for (int a = 0; a < 2; ++a) {
      most[a] = std::max(most[a], edges[x][a]);
      const double t = a ? tauOut : tauIn, b = a ? bOut : bIn;
      if (upIn[x][a].m) pace = std::max(pace, upLink(upIn[x][a], downIn[x][a], a, true, t, b));
      if (upOut[x][a].m) pace = std::max(pace, upLink(upOut[x][a], downOut[x][a], a, false, t, b));
    }
  }
  const double load[2] = {most[0] * S / 2 / bIn, most[1] * S / 2 / bOut};
  const double top = std::max(load[0], load[1]);
  // Each rank's up stream can leave it no faster than its children's partial sums come in: a
  // child's stream has the rate of its links' shares among the up streams on them (its link out,
  // the parent's link in), and no more than the child's own inputs give (leaves: their link).
  // Before its parent's results come down, a link may carry only up streams so fed, slower than
  // the link, and the link's bytes are not back to back from its first chunk (the fill bound).
  const double rate[2] = {bIn, bOut};
  std::vector<double> feed[2] = {std::vector<double>(n, kInf), std::vector<double>(n, kInf)};
  for (int t = 0; t < 2; ++t)
    for (int x : sh.order[t])
      for (int ch : {sh.node[t][x][1], sh.node[t][x][2]}) {
        if (ch < 0) continue;
        const int a = across(ch, x);
        feed[t][x] = std::min({feed[t][x], feed[t][ch], rate[a] / upOut[ch][a].m, rate[a] / upIn[x][a].m});
      }
  // The link's last byte no sooner than: from when its last stream starts there (T), what is left
  // of its bytes after the streams before T sent what their feeds allowed, at the link's rate.
  auto fill = [&](int x, const Streams& ups, const Streams& downs, int a, bool in) {
    const double tau = in ? (a ? tauOut : tauIn) : 0, v = S / 2, b = rate[a];  // out: r is ready to leave
    double lo = kInf, last = 0, w = 0;
    for (const Streams* q : {&ups, &downs})
      for (int j = 0; j < q->m; ++j)
        lo = std::min(lo, q->r[j] - tau), last = std::max(last, q->r[j] - tau), w += v;
    double sent = 0;
    for (int j = 0; j < ups.m; ++j) {
      const int y = ups.feeder[j];
      const double f = in ? std::min(feed[ups.tree[j]][y], b / upOut[y][a].m) : feed[ups.tree[j]][y];
      const double dt = std::max(0.0, last - (ups.r[j] - tau));
      sent += std::min({v, dt * b, c + dt * f});  // its first chunk is whole when it starts
    }
    for (int j = 0; j < downs.m; ++j) sent += std::min(v, std::max(0.0, last - (downs.r[j] - tau)) * b);
    sent = std::min(sent, (last - lo) * b);
    // The stream that starts last there has sent nothing by then, so it ends last (round robin);
    // where it is a parent's results, its last slice still descends below x in its tree: on x's
    // link in, all of the descent; on its link out, what follows the link (its bytes are in w).
    double below = 0;
    for (int j = 0; j < downs.m; ++j)
      if (downs.r[j] - tau >= last)
        below = std::max(below, (in ? treeDescent : treeBeyond)[downs.tree[j]][x]);
    return last + (w - sent) / b + below;
  };
  double busy = 0;
  for (int x = 0; x < n; ++x)
    for (int a = 0; a < 2; ++a)
      if (most[a] > 0 && edges[x][a] == most[a] && load[a] >= top * (1 - 1e-12) && start[x][a] < kInf) {
        busy = std::max(busy, start[x][a] - (a ? tauOut : tauIn) + maxDescent[x] + bwTime);
        busy = std::max(busy, fill(x, upIn[x][a], downIn[x][a], a, true));
        busy = std::max(busy, fill(x, upOut[x][a], downOut[x][a], a, false));
      }
  return std::max(busy, lastTrip + pace);
}

}  // namespace

Prediction predict(PlanAlgo a, Coll coll, uint64_t bytes, DataType dtype, RedOp op, const FabricView& f,
                   const CostConstants& k, double cutoffUs, PredictScratch* scratch) {
  Prediction p;
  int n = f.n;
  if (n < 1) {
    p.reason = "no ranks";
    return p;
  }
  if (f.protocol != Protocol::Simple) {
    if (f.hostRanks) {
      p.reason = "CPU ranks run Simple only";
      return p;
    }
    if (!protocolApplies(a)) {
      p.reason = strprintf("%s runs Simple only", planAlgoName(a));
      return p;
    }
  }
  double S = static_cast<double>(bytes);
  Ctx c{f,
        k,
        f.reduceGBps * kB,
        f.domains > 1,
        f.bwIntra * kB,
        f.bwInter * kB,
        f.bwInterLoaded * kB,
        f.latIntraUs,
        f.latInterUs};
  if (!c.multi) c.bOut = c.bIn, c.aOut = c.aIn;
  if (f.perDomain < 2 && c.multi) c.bIn = c.bOut, c.aIn = c.aOut;  // every rank alone: no NVLink
  Ctx ring = c;  // the ring's steps between domains are its own (FabricView::latRingInterUs)
  if (c.multi) ring.aOut = f.latRingInterUs;
  if (c.multi && f.perDomain < 2) ring.aIn = ring.aOut;
  double bMix = c.multi ? c.bOut : c.bIn;
  double aMix =
      c.multi ? (1 - static_cast<double>(f.domains) / n) * c.aIn + static_cast<double>(f.domains) / n * c.aOut
              : c.aIn;
  bool reduces = coll == Coll::AllReduce || coll == Coll::Reduce || coll == Coll::ReduceScatter;
  auto unsupported = [&](const char* why) {
    p.supported = false;
    p.reason = why;
    return p;
  };
  if (n == 1) {
    if (a != PlanAlgo::Ring) return unsupported("one rank: a local copy, the ring handles it");
    p.supported = true;
    p.us = k.launchUs + (S > 0 ? S / (f.reduceGBps * kB) : 0);
    p.chunkBytes = clampChunk(S, k);
    return p;
  }
  double t = -1;
  uint64_t chunk = clampChunk(std::ceil(S / n), k);  // a whole block per slice when it fits
  // rhd.cpp's power-of-two group of pof2 ranks: the first 2 rem ranks fold in pairs (2v, 2v + 1)
  // and inner rank v is real rank 2v + 1 for v < rem, else v + rem. With ranks contiguous by
  // domain (f.uniform) real rank r is in domain r / perDomain, so whether a step's partners are in
  // one domain depends on the rank, not only on the distance (72 per rack: distance 64 crosses
  // for 64 of every 72 ranks); with domains of different sizes the ranks' own domains say it.
  int pof2 = 1;
  while (pof2 * 2 <= n) pof2 *= 2;
  const int rem = n - pof2;
  const uint64_t count = bytes / std::max<size_t>(1, dataTypeSize(dtype));  // elements
  // Real rank r's domain: by position where ranks are contiguous by equal domains, else from the
  // tree shape's per-rank domains (computeFabric keeps them); without either, every step of a
  // multi-domain group is counted across.
  const bool knownDomains = f.uniform || f.treeShape;
  auto domainOf = [&](int r) {
    return f.uniform || !f.treeShape ? r / std::max(1, f.perDomain) : f.treeShape->domain[r];
  };
  auto innerReal = [&](int v) { return v < rem ? 2 * v + 1 : v + rem; };  // rhd.cpp's Rhd::outer
  auto innerDomain = [&](int v) { return domainOf(innerReal(v)); };
  auto crosses = [&](int v, int dist) {
    return c.multi && (!knownDomains || innerDomain(v) != innerDomain(v ^ dist));
  };
  // A step's latency: inside a domain, to the next one, or (ranks contiguous by domain, the
  // network built in rank order) to one further away at the farthest domain's hops.
  const double aFar = c.aOut + (c.multi ? f.latFarUs - f.latInterUs : 0);
  auto stepLat = [&](int v, int dist) {
    if (!crosses(v, dist)) return c.aIn;
    // Between rails the route adds the NVLink hop into the relay (PXN) or a spine.
    const double rails = f.crossesRails(innerReal(v), innerReal(v ^ dist)) ? f.crossRailLatUs : 0;
    return rails + (knownDomains && std::abs(innerDomain(v) - innerDomain(v ^ dist)) > 1 ? aFar : c.aOut);
  };
  // foldIn, foldOut: the fold of the pair (2v, 2v + 1) before the halving and after the doubling;
  // only the folding ranks (inner v < rem) run it, so their chains start and end that much later,
  // and the others' steps go on meanwhile until they need a folding partner's data.
  // halve, dbl: which phases run (all-reduce both, reduce-scatter the halving, all-gather the
  // doubling). Both phases are one timing chain and one link bound, not a sum of two: the executor
  // runs a rank's steps with no barrier between the phases, so early chunks pass through the
  // domain steps at the end of the halving and the start of the doubling while the halving's
  // network step still sends its later ones, and a NIC's network steps of both phases run nearly
  // back to back (2 x DGX H100 16 MiB: each NIC busy 94.5% of the replay).
  constexpr double kPrunedUs = std::numeric_limits<double>::infinity();  // rhdSteps reached the cutoff
  auto rhdSteps = [&](bool halve, bool dbl, double total, double foldIn, double foldOut, double foldLat,
                      bool foldCross) {
    // Recursive halving (reduce-scatter) and doubling (all-gather) as src/algo/rhd.cpp runs them:
    // the largest pieces travel the longest distances (S/2 to the partner p/2 away). A step whose
    // partner is in another domain crosses the network, every such rank sending at once. Steps
    // are sent in chunks and the executor starts a chunk once its data are there, so steps
    // overlap: the collective ends after the later of the busiest rank's link's bytes back to back
    // (its steps across domains on the network share, the others on the domain link; one latency
    // at the end) and one chunk's chain through the steps (every step's latency, the slowest
    // step's bytes, a chunk of each other's).
    int L = 0;
    while ((2 << L) <= n) ++L;
    struct RhdStep {
      bool reduce;
      int dist;
    };
    std::vector<RhdStep> steps;
    if (halve)
      for (int s = 0; s < L; ++s) steps.push_back({true, 1 << (L - 1 - s)});
    if (dbl)
      for (int s = 0; s < L; ++s) steps.push_back({false, 1 << s});
    auto rate = [&](bool reduce, bool cross) {
      return reduce ? std::min(cross ? c.bLoaded : c.bIn, c.R) : (cross ? c.bLoaded : c.bIn);
    };
    {  // Rank 0's link bytes alone (the links bound below takes every rank's): when they reach the
       // cutoff, the walk over every rank cannot come in under it.
      double in = 0, out = 0;
      for (const RhdStep& st : steps)
        (crosses(0, st.dist) ? out : in) += total * st.dist / pof2 / rate(st.reduce, crosses(0, st.dist));
      if (k.launchUs + std::max(in, out) >= cutoffUs) return kPrunedUs;
    }
    // The chain: the partner's chunk of step s leaves once the partner finished step s - 1, and
    // its trip runs while the rank finishes its own step s - 1 (sends are posted as soon as their
    // data are there, into receive buffers already posted): T_s(r) = max(T_{s-1}(r),
    // T_{s-1}(partner) + latency) + a chunk, on each pair's own link. So a rank on the network in
    // some steps and on NVLink in others paces only what depends on it.
    // Halving keeps the dist blocks of p around the rank and receives them from the partner;
    // doubling receives the partner's dist blocks. A rank receiving no element (fewer elements
    // than blocks: 8 B is 2 floats of 4,096 blocks) skips the step, as the schedule does.
    const bool alike =
        (!c.multi || !knownDomains) && count >= static_cast<uint64_t>(pof2);  // every rank the same
    const int ranks = alike ? 1 : pof2;
    auto folds = [&](int r) { return alike ? rem > 0 : r < rem; };  // alike: the folding ranks
    auto receives = [&](int r, const RhdStep& st) {                 // rank r receives some element in step st
      const uint64_t b0 = static_cast<uint64_t>((st.reduce ? r : r ^ st.dist) & ~(st.dist - 1));
      return blockBegin(count, pof2, b0 + st.dist) != blockBegin(count, pof2, b0);
    };
    std::vector<double> chain(ranks, 0), next(ranks);
    for (int r = 0; r < ranks; ++r) chain[r] = folds(r) ? foldIn : 0;
    // The last chunks: a step's last chunk leaves once the rank has sent the step's other chunks
    // and those before on the same link, and once its data are there (halving: the rank's lower
    // half sends the upper half of what it received in the step before, whose last chunk came
    // last; the upper half the lower, there at the middle of that reception; doubling: the lower
    // half sends what it just received last, the upper half it had a step earlier); it is in once
    // the receiving side of the partner's link has taken it after that link's earlier steps, and
    // a latency later. When steps shrink below a latency's worth of bytes (the ends of the halving
    // and doubling), a link waits for them; and a rank receiving two network steps at once (144
    // GPUs: inner ranks 24-31, distance 64 and 32) gets the earlier one's last chunk only after
    // both, which holds up what it forwards. The links' bound, bytes back to back, sees neither.
    // A folding rank's fold comes in on the receiving side of the fold's link, its partner's vector
    // in order, as its first step starts sending: the half it sends first (the upper rank's lower
    // half) is there halfway through the fold. Its sending sides are free.
    // The vector's time on the fold's link (foldIn and foldOut are the same full-size step, or 0).
    const double foldBytes = std::max(0.0, std::max(foldIn, foldOut) - foldLat);
    // A step across domains leaves by its sender's NIC, or where GPUs relay (PXN) by the NIC of
    // the sender's domain on the receiver's rail: net (the NICs' sending sides) is indexed by the
    // real rank whose NIC it is (its own rank where every rank is alike).
    auto realOf = [&](int r) { return alike ? r : innerReal(r); };
    auto nicOf = [&](int r, int dist) { return alike ? r : f.relayNic(realOf(r), realOf(r ^ dist)); };
    // A step that leaves by another GPU's NIC (a PXN relay): the relay forwards a chunk once it is
    // in, so the chunk also takes its time on the NVLink hop into the relay (under LL that hop is
    // no faster than the NIC: both at the protocol's ceiling).
    auto relayed = [&](int r, int dist) { return crosses(r, dist) && nicOf(r, dist) != realOf(r); };
    auto relayUs = [&](int r, int dist, double bytes) { return relayed(r, dist) ? bytes / c.bIn : 0.0; };
    std::vector<double> got(chain), gotBefore(chain), net(alike ? ranks : f.nics(), 0), dom(ranks, 0),
        netIn(ranks, 0), domIn(ranks, 0), sent(ranks);
    for (int r = 0; r < ranks; ++r) (foldCross ? netIn : domIn)[r] = chain[r];
    // Where the fold brings first the half the first halving step sends (algo::rhdFoldSendsFirst,
    // over the slices the planner's chunk makes), the chain's first chunk leaves once the fold's
    // first chunk is in.
    const uint64_t chunkElems = chunkElemsOf(chunk, dataTypeSize(dtype));
    const bool foldSendsFirst = algo::rhdFoldSendsFirst(pof2, count, chunkElems);
    // With two inner ranks the fold brings the kept half first, final after the one halving step.
    // Where the folding rank's steps before its unfold fit the executor's window the unfold
    // streams out as each slice of it is final, so the chain carries one chunk of it, not its
    // whole bytes, and its sending side prices the rest (below). Past the window the unfold waits
    // for the steps 512 before it (3 ranks at 1 GiB) and stays whole in the chain.
    // (Where the two inner ranks' steps cross domains and the fold does not, or the other way,
    // the unfold has a link of its own, and the walk below prices it as before.)
    const bool unfoldStreams = foldIn > 0 && foldOut > 0 &&
                               algo::rhdUnfoldInWindow(pof2, count, chunkElems) && crosses(0, 1) == foldCross;
    // The fold's first chunk: the fold and the unfold are cut at the halves' boundary, so no
    // chunk is more than a half (one chunk a half where the chunk is the whole vector: `dgx-h100:3`
    // 24 ranks rhd/LL 64 KiB 0.899 -> 0.947 for that).
    const double foldChunk = foldBytes * std::min(0.5, chunk / std::max(1.0, total));
    if (foldSendsFirst)
      for (int r = 0; r < ranks; ++r)
        if (folds(r) && foldIn > 0) chain[r] = foldLat + foldChunk;
    const RhdStep* prev = nullptr;
    double slowest = 0, links = 0;
    // The sending sides as the doubling begins (the unfold's bound below).
    std::vector<double> turnNet, turnDom;
    for (const RhdStep& st : steps) {
      const double v = total * st.dist / pof2;
      if (foldOut > 0 && !st.reduce && (!prev || prev->reduce)) turnNet = net, turnDom = dom;
      for (int r = 0; r < ranks; ++r) {
        sent[r] = -1;
        if (!alike && !receives(r ^ st.dist, st)) continue;  // the partner gets nothing from r
        const bool cross = crosses(r, st.dist);
        const bool lower = alike || (r & (st.reduce ? st.dist : st.dist / 2)) == 0;  // its own part first
        const double b = rate(st.reduce, cross);
        double dep = got[r];
        if (!lower && prev && prev->reduce == st.reduce)
          dep = st.reduce ? std::max(gotBefore[r], got[r] - v / rate(prev->reduce, crosses(r, prev->dist)))
                          : gotBefore[r];
        else if (!prev && folds(r) && foldSendsFirst)
          dep = got[r] - foldBytes * v / total;  // the fold's half it sends first
        double& link = cross ? net[nicOf(r, st.dist)] : dom[r];
        const double piece = std::min(v, static_cast<double>(chunk));
        link = sent[r] = std::max(link + v / b, dep + relayUs(r, st.dist, piece) + piece / b);
      }
      gotBefore = got;
      for (int r = 0; r < ranks; ++r) {
        const int from = alike ? r : r ^ st.dist;
        if (sent[from] < 0) continue;
        const bool cross = crosses(r, st.dist);
        double& in = cross ? netIn[r] : domIn[r];  // the receiving side of the rank's link
        in = std::max(in + v / rate(st.reduce, cross), sent[from]);
        got[r] = std::max(got[r], in + stepLat(r, st.dist));
      }
      prev = &st;
      for (int r = 0; r < ranks; ++r) {
        const int from = alike ? r : r ^ st.dist;
        if (!alike && !receives(r, st)) {
          next[r] = chain[r];  // nothing to receive this step
          continue;
        }
        const bool cross = crosses(r, st.dist);
        const double b = rate(st.reduce, cross), piece = std::min(v, static_cast<double>(chunk)),
                     one = piece / b;
        next[r] = std::max(chain[r], chain[from] + stepLat(r, st.dist) + relayUs(r, st.dist, piece)) + one;
        slowest = std::max(slowest, v / b - one);
      }
      chain.swap(next);
    }
    // The NICs' sending sides: each step across on the NIC that carries it (its sender's, or the
    // relay's).
    // Through relays a step's first leg also crosses NVLink: out of its sender's port (legOut, by
    // inner rank) and into the relay's (legIn, by the relay's GPU), beside their own steps. NVLink
    // is 8x a NIC under Simple, but under LL both run at the protocol's ceiling: `dgx-h100:4,
    // rails=1` 24 GPUs rhd/LL 16 MiB, the replay's busiest link (a relay's NVLink in, 0.875 S of
    // its own steps and 2 S of two GPUs' legs) busy 2,364 us where the model said 2,100 in all.
    std::vector<double> nicOut(net.size(), 0), legOut(ranks, 0), legIn(net.size(), 0);
    for (int r = 0; r < ranks; ++r)
      for (const RhdStep& st : steps) {
        if (!crosses(r, st.dist)) continue;
        const double v = total * st.dist / pof2;
        const int x = nicOf(r, st.dist);
        nicOut[x] += v / rate(st.reduce, true);
        if (x != realOf(r)) legOut[r] += v / c.bIn, legIn[x] += v / c.bIn;
      }
    for (int r = 0; r < ranks; ++r) {  // each rank's link bytes
      // Its network steps of both phases back to back on the network share, its domain steps on
      // the domain link. The network link also waits for the chain of the domain steps before its
      // first network step (halving: distances longer than any of its network steps) and after
      // its last (doubling: the same distances), one latency and chunk each; the domain steps in
      // between (the halving's shorter distances, then the doubling's) need only the first chunks
      // of the network step before them, so they run while it still sends.
      // Its NIC's sending side carries its own steps across, or where GPUs relay whatever reaches it.
      double linkIn = 0, linkOut = nicOut[realOf(r)], before = 0, after = 0;
      bool seen = false;
      for (const RhdStep& st : steps) {
        const double v = total * st.dist / pof2;
        const bool cross = crosses(r, st.dist);
        if (!cross) linkIn += v / rate(st.reduce, false);
        if (cross) {
          seen = true;
          after = 0;
          continue;
        }
        if (!alike && !receives(r, st)) continue;  // nothing to wait for
        const double hop = c.aIn + std::min(v, static_cast<double>(chunk)) / rate(st.reduce, false);
        (seen ? after : before) += hop;
      }
      // A folding rank sends its first step's half once that half of the fold is in: its first
      // chunk where it comes first; where it comes second, half the fold (the whole fold, tried,
      // put the replay 3-6% under the model on 12-24 ranks of DGX H100 and on 136 GPUs).
      if (folds(r) && !foldCross && foldIn > 0)
        before += foldLat + (foldSendsFirst ? foldChunk : foldBytes / 2);
      if (linkOut > 0) linkOut += c.aOut - c.aIn + before + after;
      // A folding rank's fold: its partner's vector in on the receiving side of the fold's link,
      // the result out on the sending side, each one direction's bytes beside that link's steps
      // (their latencies in series).
      double foldLats = 0;
      if (folds(r)) {
        (foldCross ? linkOut : linkIn) += foldBytes;
        foldLats = ((foldIn > 0) + (foldOut > 0)) * foldLat;
      }
      const double domLink = linkIn + std::max(legOut[r], legIn[realOf(r)]);
      links = std::max(links, std::max(domLink, linkOut) + c.aIn + foldLats);
      if (folds(r)) chain[r] += unfoldStreams ? foldLat + foldChunk : foldOut;
    }
    // The unfold sends the result back, the half it kept first, the other as the last doubling
    // step brings it: the lower rank gets the upper half last (one chunk after it), the upper rank
    // the lower half (half the fold after it: one chunk, tried, took 56 GPUs of DGX A100 on rails
    // at 1 MiB from 1.102 to 1.114); that half no sooner than its bytes after the step before
    // (the whole fold's before 2026-12-07: the kept half goes out as each chunk of it is final;
    // 24-72 ranks at 1 MiB 0.92-0.97 -> 0.97-1.04); and all of it no sooner than its link's sending
    // side has sent the steps' bytes and, from the doubling's first send on, the doubling's and the
    // unfold's bytes back to back (its chunks go out between the doubling's; the unfold after the
    // steps' sends instead: gb200-nvl72 72 ranks 16 MiB 0.896, now 0.956).
    double last = 0;
    for (int r = 0; r < ranks; ++r) {
      double end = got[r];
      if (folds(r) && foldOut > 0) {
        const bool lowerLast = alike || (r & (pof2 / 2)) == 0;
        const double sendSide =
            foldCross ? net[realOf(r)] : dom[r];  // the fold's link, after the steps' sends
        const std::vector<double>& turn = foldCross ? turnNet : turnDom;  // empty: no doubling
        double packed = 0;
        if (!unfoldStreams) {
          packed = (turn.empty() ? sendSide : turn[foldCross ? realOf(r) : r]) + foldBytes;
          for (const RhdStep& st : steps)
            if (!st.reduce && crosses(r, st.dist) == foldCross && (alike || receives(r ^ st.dist, st)))
              packed += total * st.dist / pof2 / rate(st.reduce, foldCross);
        } else {
          // Two inner ranks, the unfold in the window: the sending side takes each piece once it is
          // final, from when the fold's and the partner's first chunks of the kept half are in
          // (one port: one after the other). Either all its bytes back to back (the halving's
          // sends, the doubling's, the unfold), or, where the halving's first send (the fold's
          // second half) queues behind the kept half's (to the partner and to the folded rank),
          // that send, the partner's reply to it, and then the unfold's other half
          // (3 ranks, 64 KiB-680 MiB: the replay 0.80-1.04x the bounds above, 1.000 with these).
          const double v = total / 2, piece = std::min(v, static_cast<double>(chunk));
          const double hb = rate(true, foldCross), db = rate(false, foldCross);  // halving, doubling
          const double start = foldLat + 2 * foldChunk;
          const double backToBack = start + v / hb + v / db + foldBytes;
          const double afterReply = start + v / db + foldBytes / 2 + piece / hb + stepLat(r, 1) + piece / db +
                                    foldLat + foldBytes / 2;
          packed = std::max(backToBack, afterReply);
        }
        const double tail = lowerLast ? foldChunk : foldBytes / 2;
        end = std::max({got[r] + tail, gotBefore[r] + foldBytes / 2, std::max(sendSide, packed)}) + foldLat;
      }
      last = std::max(last, end);
    }
    // A relay that is not an inner rank (a folded-away GPU, or a GPU of the domain that is no rank)
    // sends only what it relays.
    if (f.rails && f.rails->relays && !alike)
      for (int x = 0; x < f.nics(); ++x)
        if (x >= n || (x < 2 * rem && x % 2 == 0))
          links = std::max({links, nicOut[x] + c.aOut, legIn[x] + c.aIn});
    return std::max({links, *std::max_element(chain.begin(), chain.end()) + slowest, last});
  };

  // One phase of a direct schedule (src/algo/direct.cpp): every rank sends a block of v, slice by
  // slice, to each of its n-1 peers. The executor posts every send in its window in one pass
  // without waiting for any (src/exec/executor.cpp), so their step overheads overlap: one step
  // latency, then the rank's bytes, its own domain's peers' over the domain link and the others'
  // over its network share, at once. The window (512 steps past the first unfinished one) slides:
  // send i + 512 starts when send i is done, not when the whole window is, and an eager send is
  // done once posted (the transport holds its bytes), so past 513 ranks the later sends still
  // follow at once and queue behind the first on the link; a latency per window, in series, priced
  // direct at 4,608 ranks twice its replay (docs/PLANNER.md, "Direct on a flat fabric"). Reducing, the
  // owner folds the n blocks of a slice in rank order (the same bits everywhere); the staggered
  // sends (direct.cpp PeerOrder) bring some owner an early block last (rank + k: rank 0 its block
  // from rank 1; rank ^ k and the rack order: rank n-1 its block from rank 0), so about n-2 folds
  // of the last slice follow it.
  // An ideal switch, as in the replay: the n-1 streams into a port add up to its rate and nothing
  // pushes back. Incast, congestion control and per-peer NIC costs are not priced: no published
  // figure to price them from (docs/PLANNER.md, "Direct on a flat fabric"). Past 256 ranks the
  // executor does not run direct (AlgoInfo::maxRunRanks: rendezvous sends could wait on receives
  // beyond their receiver's window); this prices the schedule there for the model-only choice.
  auto directPhase = [&](double v, bool reduce) {
    double bIn = c.bIn, bOut = c.multi ? c.bLoaded : c.bIn;
    if (reduce) bIn = std::min(bIn, c.R), bOut = std::min(bOut, c.R);
    double local = (c.multi ? f.perDomain : n) - 1, remote = n - 1 - local;
    // Through relays a GPU's NVLink port also carries first legs, and a NIC its domain's blocks
    // for its rail (relayedDirectBlocks).
    if (c.multi)
      local = std::max(local, f.relayedNvlinkBlocks), remote = std::max(remote, f.relayedNicBlocks);
    // One step to every peer at once: it waits on the farthest.
    // (On rails the farthest peers are on other rails: their route adds a relay's hop or a spine.)
    double t =
        (c.multi ? f.latFarUs + f.crossRailLatUs : c.aIn) + std::max(local * v / bIn, remote * v / bOut);
    if (reduce) t += (n - 2) * std::min(v, static_cast<double>(chunk)) / c.R;
    return t;
  };
  // GPU windows (transports/nvlink): every rank folds n terms of v bytes in rank order, reading
  // term j off rank j's window (one-sided: the route's latency, no software step), each read
  // after the last (it writes what the next one reduces into). They start together, so all read
  // rank 0 first and its link serves the n-1 reads one after another; the last rank then leads
  // the others by a read each, and its n-2 later reads find their links free:
  // (n-1) latencies + (2n-3) reads.
  const double windowReadUs = std::max(0.0, c.aIn - k.stepOverheadUs);  // a one-sided read's latency
  auto gpuWindowFold = [&](double v) {
    return (n - 1) * windowReadUs + (2.0 * n - 3) * v / std::min(c.bIn, c.R);
  };
  // NVLS in each domain (reduce-scatter into the NVSwitch, all-gather out of it) around a level
  // across domains that takes acrossUs for every GPU's S/d, acrossLatUs of latency and
  // acrossDepth pipeline stages (nvls_switch: the switches; nvls_ring: a ring of the domains),
  // pipelined chunk by chunk. The fill is the first chunk's trip through every stage at that
  // stage's size and rate: into the NVSwitch (reduced there) and out, a slice of c/d to each GPU
  // and back in, and acrossFill(c) for the slice across (not depth x the whole chunk at the
  // slowest rate: across domains each GPU carries only its slice). The slower level sets the
  // pace: the NVSwitch's (the GPUs drive its reduction chunk by chunk, each chunk's overhead on
  // that stage) with the last chunk's trip across after it, or acrossPaced(feedUs, overheads), the
  // level across with the latency its work does not hide. Sets `chunk`.
  auto nvlsAround = [&](double acrossUs, double acrossLatUs, int acrossDepth, auto acrossFill,
                        auto acrossPaced) {
    const double bn = std::min(c.bIn, f.nvlsGBps * kB), d = f.perDomain;
    chunk = pipelineChunk(S, S / std::max(S / bn, acrossUs), 2 + acrossDepth, k);
    const double cb = std::max(1.0, std::min(static_cast<double>(chunk), S));
    const double fill = 2 * cb / bn + 2 * cb / d / bn + acrossFill(cb);
    const double overheads = std::ceil(S / cb) * k.chunkOverheadUs, feedUs = S / bn + overheads;
    return 2 * c.aIn + fill + std::max(feedUs + acrossLatUs, acrossPaced(feedUs, overheads));
  };
  // The fold of a pair (2v, 2v + 1), v < rem, before the halving and after the doubling: over the
  // network only where some pair straddles two domains.
  bool foldCrosses = false;
  for (int v = 0; v < rem && !foldCrosses; ++v)
    foldCrosses = c.multi && (!knownDomains || domainOf(2 * v) != domainOf(2 * v + 1));
  const double foldLat = foldCrosses ? c.aOut : c.aIn;
  double rhdExtra = pof2 == n ? 0 : foldLat + S / (foldCrosses ? c.bOut : c.bIn);

  // v bytes a rank streams through the network switches at b in chunks of c: each chunk leaves
  // the rank's first hop (switchFeedGBps) a chunk overhead after the one before (the flag and
  // credit exchange per chunk, charged there by the simulator too), and the switch level takes
  // them at b, so the slower of the two paces the stream (a DGX GPU's PCIe link is faster than
  // its NIC: the overheads hide behind the NIC's bytes), then the last chunk's 2 x tiers stages.
  // switchPace: the stream's pace alone, given its chunks' overheads.
  auto switchPace = [&](double v, double overheads, double b) {
    const double feed = f.switchFeedGBps > 0 ? f.switchFeedGBps * kB : b;
    return std::max(v / b, v / feed + overheads);
  };
  auto throughSwitches = [&](double v, double cb, double b) {
    cb = std::max(1.0, std::min(cb, v));  // as pipelineCost: a message smaller than a chunk is one
    return switchPace(v, std::ceil(v / cb) * k.chunkOverheadUs, b) + 2 * f.switchTiers * cb / b;
  };

  // The other collectives through the switch (branch `switch` adds their schedules): each rank
  // sends `up` and receives `down` bytes; the larger sets the pace, as for all-reduce.
  if (a == PlanAlgo::Switch && coll != Coll::AllReduce) {
    double up = 0, down = 0;
    switch (coll) {
      case Coll::Reduce:
        up = S, down = S;  // the root's; the others receive nothing
        break;
      case Coll::Broadcast:
        up = S, down = S;
        break;
      case Coll::AllGather:
        up = S / n, down = S;
        break;
      case Coll::ReduceScatter:
        up = S, down = S / n;
        break;
      case Coll::Barrier:
        break;
      default:
        return unsupported("not for this collective");
    }
    if (f.switchGBps <= 0)
      return unsupported("no reduce-capable network switch with an aggregation tree over all ranks");
    if (reduces && !f.switchCap.supports(dtype, op))
      return unsupported("the switches do not reduce this dtype/op");
    const double v = std::max(up, down), b = f.switchGBps * kB;
    t = 2 * f.switchLatUs;
    if (v > 0) {
      chunk = pipelineChunk(v, b, 2 * f.switchTiers, k);
      if (f.switchCap.bufferBytes && chunk > f.switchCap.bufferBytes) chunk = f.switchCap.bufferBytes;
      t += throughSwitches(v, chunk, b);
    }
    p.reason = strprintf("through the switch: %s up, %s down per rank",
                         up == S  ? "S"
                         : up > 0 ? "S/n"
                                  : "0",
                         down == S  ? "S"
                         : down > 0 ? "S/n"
                                    : "0");
    p.supported = true;
    p.us = k.launchUs + t;
    p.chunkBytes = chunk;
    return p;
  }
  switch (coll) {
    case Coll::AllReduce:
      switch (a) {
        case PlanAlgo::Ring:
          if (c.multi && f.uniform && f.perDomain > 1 && f.perDomain <= kMaxRailChannels) {
            // Rails (ring.cpp; the planner sets ranksPerDomain): d rings of n ranks over S/d each,
            // channel c entering every domain at local rank c, so each rank's NIC carries one
            // channel's cross-domain stream each way and its NVLink the other d-1 channels' hops,
            // every round. v = S/(dn) a block; 2(n-1) rounds, pipelined chunk by chunk as the
            // hierarchical levels' rings (pipelinedRing): a round is the busier of the two links'
            // shares, and a chunk's trip crosses a domain on m of every n hops.
            const int d = f.perDomain;
            const double v = S / d / n;
            chunk = clampChunk(std::ceil(v), k);  // a whole block per slice when it fits
            t = railRing(ring, d, v, static_cast<double>(chunk));
            p.reason = strprintf("rails: %d rings (one per NIC) of 2(n-1) steps of S/%dn", d, d);
          } else {
            t = flatRing(ring, S / n, static_cast<double>(chunk), true, true);
            p.reason = "2(n-1) steps of S/n";
          }
          break;
        case PlanAlgo::Tree: {
          int D = ceilLog2(n);
          const double path = f.treePathUs;
          // Every edge carries S/2 each way (half the buffer per tree, up then down), pipelined, so
          // the busiest link paces the tree: the busiest rank's domain link (up to 4 edges: inner in
          // one tree, leaf in the other), its own network path, or its host's NICs when the host's
          // ranks share them.
          double bIn = std::min(c.bIn, c.R), bOut = std::min(c.bOut, c.R);
          double bwTime = f.treeEdgesIn * S / 2 / bIn;
          if (c.multi) {
            bwTime = std::max(bwTime, f.treeEdgesOut * S / 2 / bOut);
            if (f.hostEgressGBps > 0)
              bwTime = std::max(bwTime, f.treeHostEdgesOut * S / 2 / std::min(f.hostEgressGBps * kB, c.R));
          }
          double b = c.multi && f.perDomain < 2 ? bOut : bIn;  // one hop's link: the chunk, two ranks' trip
          chunk = pipelineChunk(S, b, 2 * D, k);
          if (n == 2) {
            // Each tree is one edge, and each direction of it carries one tree's leaf stream (the
            // input: ready at the start) and the other tree's root stream (fed by the leaf stream
            // of the opposite direction, a chunk behind): the link never waits for a pipeline to
            // fill, so it is busy from its first chunk to its last (its bytes back to back and one
            // trip), unless a slice's round trip, up and down, is longer (small buffers).
            t = std::max(path + bwTime, 2 * (path + std::min(static_cast<double>(chunk), S / 2) / b));
          } else {
            // Rank by rank on the two trees, as two channels sharing each link (treeAllReduceUs;
            // docs/PLANNER.md "The tree under two channels"), inside one domain and across.
            if (!f.treeShape) return unsupported("no tree shape in the fabric view (computeFabric makes it)");
            // Its time is at least the busiest link's bytes (treeAllReduceUs' busy bound) and a
            // slice's round trip on the costliest path (its trip bound): no need for the O(n)
            // walk when either alone reaches the cutoff.
            const double aIn = f.perDomain > 1 ? f.latIntraUs : f.latInterUs;
            if (k.launchUs + std::max(bwTime, 2 * treePathUs(f, aIn, f.latInterUs)) >= cutoffUs) {
              p.pruned = true;
              return unsupported("no faster than the cutoff: a bound on its time already reaches it");
            }
            t = treeAllReduceUs(f, S, static_cast<double>(chunk), aIn, f.latInterUs, bIn,
                                c.multi ? bOut : bIn, bwTime, scratch);
          }
          p.reason = "double binary tree: 2 log2(n) hops, pipelined";
          break;
        }
        case PlanAlgo::Rhd: {
          t = rhdSteps(true, true, S, rhdExtra, rhdExtra, foldLat, foldCrosses);
          if (t == kPrunedUs) p.pruned = true;
          p.reason = "2 log2(n) steps, halving/doubling";
          break;
        }
        case PlanAlgo::Direct:
          t = directPhase(S / n, true) + directPhase(S / n, false);
          p.reason = "direct reduce-scatter + all-gather: every peer at once";
          break;
        case PlanAlgo::AllgatherReduce:
          // One direct round of whole inputs (n-1 sends of S, as direct's all-gather phase with
          // blocks of S), then the fold of n terms in rank order: a copy fused with the first
          // reduction, then n-2 more, (n-1)S at the reduction rate.
          t = directPhase(S, false) + (n - 1) * S / c.R;
          p.reason = "one round: every rank sends S to every peer, then folds the n inputs in rank order";
          break;
        case PlanAlgo::Hierarchical: {
          if (!c.multi) return unsupported("needs more than one domain");
          if (f.perDomain < 2) return unsupported("one rank per domain: nothing to do inside domains");
          if (!f.uniform) return unsupported("needs equal, contiguous domains");
          const int d = f.perDomain, m = f.domains;
          const double v = S / d, bInR = std::min(c.bIn, c.R), bOutR = std::min(c.bLoaded, c.R);
          const double aX = f.latLevelInterUs;  // the level across: GPU l of each domain in a ring
          // The schedule cuts the count in pipeline slices of d x m chunks where the executor's
          // window holds enough of them (algo::hierarchicalSliceElems), each through the three
          // levels before the next in the list; else it is one slice.
          const double sliceSteps = static_cast<double>(algo::hierarchicalSliceSteps(d, m));
          const bool sliced = algo::hierSlicesFitTheWindow(algo::hierarchicalSliceSteps(d, m));
          struct Priced {
            double us;
            bool fed;  // the window's slices keep the busier link fed (below: the chunk search)
          };
          auto timeWith = [&](uint64_t ch) {
            const double cb = static_cast<double>(ch);
            const double P = sliced ? std::min(S, static_cast<double>(d) * m * cb) : S,
                         slices = std::ceil(S / P);
            const double w = P / d;  // a slice's block
            // One slice's levels overlap chunk by chunk where the data allow (docs/PLANNER.md
            // "Pipelining: ring rounds and levels"): the domain reduce-scatter first (its last round
            // alone makes the block, so at most a round overlaps the next level: not counted);
            // across domains a ring of 2(m-1) rounds of w/m, whose results appear from its (m-1)-th
            // round on; the domain all-gather, on the NVLink the network phase does not use, starts
            // on the first final chunk. It ends after the last final chunk's d-1 hops, or after its
            // own work from the first, whichever is later.
            const double rs = pipelinedRing(d - 1, 0, w, cb, c.aIn, bInR, c.bIn);
            const double across = pipelinedRing(m - 1, m - 1, w / m, cb, aX, bOutR, c.bLoaded);
            const double c0 = std::min(cb, w / m);
            const double firstFinal =
                std::max((m - 2) * w / m / bOutR, (m - 2) * (aX + c0 / bOutR)) + aX + c0 / bOutR;
            // The network level's all-gather rounds: a send and a receive per chunk.
            const double one = rs + domainAllGatherAfter(c, d, w, cb, c0, across, firstFinal,
                                                         2.0 * (m - 1) * std::ceil(w / m / c0));
            if (slices <= 1) return Priced{one, true};
            // Where a slice's levels take longer than the window's slices' work on the busier
            // link (small chunks), the window paces the slices instead, which this does not price:
            // the chunk search below stops there.
            const SliceBounds sb = pipelineSlices(c, d, w, cb, c0, slices, sliceSteps, rs, across,
                                                  (m - 1) * w / m * (1 / bOutR + 1 / c.bLoaded), aX);
            return Priced{std::max(one, sb.us), sb.fedWork >= one};
          };
          // The chunk: one a block across domains, or (sliced) smaller where shorter slices start the
          // network level sooner, halving while the window keeps the links fed, whichever is fastest.
          chunk = clampChunk(std::ceil(v / m), k);
          t = timeWith(chunk).us;
          for (uint64_t ch = chunk / 2; sliced && ch >= k.minChunkBytes; ch /= 2) {
            const Priced p2 = timeWith(ch);
            if (!p2.fed) break;
            if (p2.us < t) t = p2.us, chunk = ch;
          }
          p.reason = "ring reduce-scatter in domain, ring all-reduce of S/d across, all-gather in domain";
          break;
        }
        case PlanAlgo::Switch: {
          if (f.switchGBps <= 0)
            return unsupported("no reduce-capable network switch with an aggregation tree over all ranks");
          if (!f.switchCap.supports(dtype, op))
            return unsupported("the switches do not reduce this dtype/op");
          double b = f.switchGBps * kB;
          chunk = pipelineChunk(S, b, 2 * f.switchTiers, k);
          if (f.switchCap.bufferBytes && chunk > f.switchCap.bufferBytes) chunk = f.switchCap.bufferBytes;
          t = 2 * f.switchLatUs + throughSwitches(S, chunk, b);
          p.reason = "each rank sends S up and receives S down";
          break;
        }
        case PlanAlgo::HierSwitch: {
          if (!c.multi) return unsupported("needs more than one domain (see switch)");
          if (f.perDomain < 2) return unsupported("one rank per domain: the flat switch plan is the same");
          if (!f.uniform) return unsupported("needs equal, contiguous domains");
          if (f.switchGBps <= 0)
            return unsupported("no reduce-capable network switch with an aggregation tree over all ranks");
          if (!f.switchCap.supports(dtype, op))
            return unsupported("the switches do not reduce this dtype/op");
          // Every rank sends its S/d slice at once: the per-rank switch rate under full load
          // (f.switchGBps) applies to S/d, so a host moves S through the switch instead of d x S.
          const int d = f.perDomain;
          const double v = S / d, b = f.switchGBps * kB;
          // The block goes to the switch in pieces of whole ring slices (algo/schedule.hpp
          // hierSwitchPieces; a SwitchReduce each, streamed in slices), so the levels overlap as
          // hierarchical's do: the switch level from the first piece the reduce-scatter's last
          // round makes, the domain all-gather from the first piece back, ending after the last
          // piece's d-1 hops.
          auto timeWith = [&](uint64_t ch) {
            if (f.switchCap.bufferBytes && ch > f.switchCap.bufferBytes) ch = f.switchCap.bufferBytes;
            const double cb = static_cast<double>(ch);
            const double reduceIn = std::min(c.bIn, c.R);  // a reduce round's rate
            // Pipeline slices (algo::hierSwitchSliceElems): d blocks of q chunks, a block one switch
            // operation, each slice through the three levels before the next; priced as
            // hierarchical's (docs/PLANNER.md "hierarchical: pipeline slices"), the switch in place
            // of the ring across.
            const uint64_t q = algo::hierSwitchSliceChunks(chunkElemsOf(ch, dataTypeSize(dtype)));
            const double sliceSteps = static_cast<double>(algo::hierSwitchSliceSteps(d, q)), w = q * cb;
            if (algo::hierSlicesFitTheWindow(algo::hierSwitchSliceSteps(d, q)) && v > w) {
              const double rs = pipelinedRing(d - 1, 0, w, cb, c.aIn, reduceIn, c.bIn);
              const double trip = 2 * f.switchLatUs + throughSwitches(w, cb, b);
              const double one = rs + domainAllGatherAfter(c, d, w, cb, w, trip, trip, 1);
              const SliceBounds sb = pipelineSlices(c, d, w, cb, std::min(cb, w), std::ceil(v / w),
                                                    sliceSteps, rs, trip, w / b, 2 * f.switchLatUs);
              return std::pair{std::max(one, sb.us), ch};
            }
            const double slices = std::ceil(v / std::min(cb, v));
            const double pieces = static_cast<double>(hierSwitchPieces(
                static_cast<uint64_t>(v) / dataTypeSize(dtype), static_cast<uint64_t>(slices)));
            const double piece = std::min(v, std::ceil(slices / pieces) * cb);
            const double rs = pipelinedRing(d - 1, 0, v, cb, c.aIn, reduceIn, c.bIn);
            // The reduce-scatter's last round reduces the block slice by slice over v / rate, so the
            // first piece is ready (pieces - 1) / pieces of that round before its end; the last
            // piece leaves at the end and takes its own trip through the switch.
            const double early = (pieces - 1) / pieces * v / reduceIn;
            const double pieceTrip = 2 * f.switchLatUs + throughSwitches(piece, cb, b);
            const double across = std::max(2 * f.switchLatUs + throughSwitches(v, cb, b) - early, pieceTrip);
            return std::pair{rs + domainAllGatherAfter(c, d, v, cb, piece, across, pieceTrip - early, pieces),
                             ch};
          };
          // The ring slice: the switch's pipeline chunk, or the smallest that puts no more slices in
          // the block than the executor's window holds with the all-gather's 2(d-1) steps each
          // (with more, its later rounds wait for the switch to finish): whichever is faster.
          const double windowSlices = std::max(1.0, std::floor(k.executorWindowSteps / (2.0 * d - 1)));
          std::tie(t, chunk) = std::min(timeWith(pipelineChunk(v, b, 2 * f.switchTiers, k)),
                                        timeWith(clampChunk(std::ceil(v / windowSlices), k)));
          p.reason = "ring reduce-scatter in domain, switch all-reduce of S/d, all-gather in domain";
          break;
        }
        case PlanAlgo::Nvls: {
          if (c.multi) return unsupported("NVLS reduces within one NVLink domain (see nvls_switch)");
          if (f.nvlsGBps <= 0) return unsupported("no reduce-capable NVSwitch");
          if (!f.nvlsCap.supports(dtype, op))
            return unsupported("the NVSwitch does not reduce this dtype/op");
          double b = std::min(c.bIn, f.nvlsGBps * kB);
          chunk = pipelineChunk(S, b, 2, k);
          // One step (one kernel: reduce-load through the switch, multicast store): one software
          // step overhead and the path up and back (aIn holds both hops), as the simulator runs it.
          t = c.aIn + S / b + pipelineCost(S, chunk, b, 2, k);
          p.reason = "each GPU sends S to the NVSwitch and receives S";
          break;
        }
        case PlanAlgo::NvlsSwitch: {
          if (!c.multi) return unsupported("single domain (see nvls)");
          if (f.nvlsGBps <= 0 || f.switchGBps <= 0)
            return unsupported("needs reduce-capable NVSwitches and network switches");
          if (!f.uniform) return unsupported("needs equal, contiguous domains");
          if (!f.nvlsCap.supports(dtype, op) || !f.switchCap.supports(dtype, op))
            return unsupported("the switches do not reduce this dtype/op");
          // The level across: each GPU's S/d up and down the aggregation tree, a slice of a chunk per
          // tier each way.
          const double bs = f.switchGBps * kB, d = f.perDomain;
          // Paced by the switches: every chunk's slice up (its overhead on the GPU's first hop, as
          // throughSwitches), then the last one's trip up and down.
          const double acrossUs = S / d / bs, acrossLatUs = 2 * f.switchLatUs;
          t = nvlsAround(
              acrossUs, acrossLatUs, 2 * f.switchTiers,
              [&](double cb) { return 2 * f.switchTiers * cb / d / bs; },
              [&](double, double overheads) { return switchPace(S / d, overheads, bs) + acrossLatUs; });
          p.reason = "NVLS reduce-scatter, switch all-reduce of S/d, NVLS all-gather, pipelined";
          break;
        }
        case PlanAlgo::NvlsRing: {
          // nvls_switch with a ring of the m domains in place of the switch: GPU i of every domain
          // all-reduces slice i (c/d of each chunk) with its counterparts, 2(m-1) steps of c/(dm)
          // over its own NIC, every slice's ring beside the others (rails).
          if (!c.multi) return unsupported("single domain (see nvls)");
          if (f.nvlsGBps <= 0) return unsupported("no reduce-capable NVSwitch");
          if (!f.uniform) return unsupported("needs equal, contiguous domains");
          if (!f.nvlsCap.supports(dtype, op))
            return unsupported("the NVSwitch does not reduce this dtype/op");
          // The level across: (m-1)/m of each GPU's S/d each way on its NIC; a chunk's slice through
          // the ring's 2(m-1) steps, each a step's latency and c/(dm).
          const double m = f.domains, d = f.perDomain, steps = 2 * (m - 1), lat = f.latLevelInterUs;
          const double bNet = c.bLoaded, bRed = std::min(bNet, c.R);
          const double acrossUs = (m - 1) / m * (S / d) * (1 / bRed + 1 / bNet);
          // Paced by the NICs: a step's latency is not the NIC's time, so while one chunk's step is
          // under way the NIC sends the other chunks' steps. The chunks enter the ring over feedUs
          // (the NVSwitch's pace), bringing acrossUs/feedUs of NIC work per us once every step is
          // under way; step s starts (s-1) latencies after the first chunk, so at t the NIC gets
          // t/(steps x lat) of that, and idles until it reaches 1 (at steps x lat x feedUs/acrossUs):
          // half that time in all. Then all its work, and one latency for the last step. (Nor can
          // it end before every latency but one and a step's share: step `steps` of any chunk.)
          t = nvlsAround(
              acrossUs, steps * lat, static_cast<int>(steps),
              [&](double cb) { return (m - 1) * cb / (d * m) * (1 / bRed + 1 / bNet); },
              [&](double feedUs, double) {
                const double warmIdle = steps * lat / 2 * std::min(1.0, feedUs / acrossUs);
                return std::max(acrossUs + warmIdle, (steps - 1) * lat + acrossUs / steps) + lat;
              });
          p.reason =
              "NVLS reduce-scatter, ring all-reduce of S/d across the domains on each GPU's NIC, NVLS "
              "all-gather, pipelined";
          break;
        }
        case PlanAlgo::OneShot:
          if (f.remoteWindows) {  // (host memory: the windows are registered host memory)
            // Over remote windows (verbs): copy S into its window (2S), one signal exchange across
            // the network, the n-1 peers' windows read by RDMA (a round trip, then (n-1)S into the
            // rank's NIC at once) and folded (3S each, uncached: they came from the NIC); from
            // kOneShotExposeFromElems one more exchange ends the call.
            const double bNet = c.multi ? c.bLoaded : c.bIn;  // one host: verbs forced there
            t = ((S / dataTypeSize(dtype) >= kOneShotExposeFromElems ? 2 : 1) + 1) * c.aOut +
                (n - 1) * S / bNet + (3.0 * n - 1) * S / c.R;
            chunk = clampChunk(S, k);
            p.reason = "one exchange; every rank reads the n-1 peer windows by RDMA and reduces";
            break;
          }
          if (c.multi) return unsupported("one-shot needs every rank's window mapped (one host)");
          if (!f.hostRanks) {
            // GPU windows: copy (or expose, priced as a copy) S into its window, one exchange, the
            // fold off the windows (gpuWindowFold); from kOneShotExposeFromElems one more exchange.
            t = (S / dataTypeSize(dtype) >= kOneShotExposeFromElems ? 2 : 1) * c.aIn + S / c.R +
                gpuWindowFold(S);
            chunk = clampChunk(S, k);
            p.reason = "one exchange; every GPU reduces the n inputs off the peer windows";
            break;
          }
          // The window schedule (algo/oneshot.cpp), per rank: one signal exchange; copy S into its
          // window (2S of traffic: read, write); fold the n windows into the output in rank order,
          // the first two in one reduce (the executor fuses a copy and the reduce after it: 3S:
          // two reads, a write) and n-2 more reductions (3S each), against cache-resident cells:
          // (3n-1)S, one step after another on the rank's core.
          // From kOneShotExposeFromElems one more exchange ends the call (its input may be
          // exposed); priced with the expose a copy, as in two-shot.
          t = (S / dataTypeSize(dtype) >= kOneShotExposeFromElems ? 2 : 1) * c.aIn +
              (3.0 * n - 1) * S / (c.R * k.boardCacheSpeedup);
          chunk = clampChunk(S, k);
          p.reason = "one exchange; every rank reduces the n inputs off the windows";
          break;
        case PlanAlgo::TwoShot: {
          if (f.remoteWindows) {  // (host memory: the windows are registered host memory)
            // Over remote windows, per cell-sized chunk: two exchanges and a read round trip across
            // the network; over the call 2(n-1)/n S in and out of the rank's NIC (the peers' slices
            // written or read, the others' results read), and the local work of the mapped case
            // below, uncached. One more exchange ends the call.
            const double chunks = std::ceil(S / static_cast<double>(k.boardChunkBytes));
            const double bNet = c.multi ? c.bLoaded : c.bIn;
            t = (3 * chunks + 1) * c.aOut + 2.0 * (n - 1) / n * S / bNet + (7.0 * n - 5) / n * S / c.R;
            chunk = std::min<double>(S, static_cast<double>(k.boardChunkBytes));
            p.reason = "per window cell, by RDMA: each rank reduces its slice, then reads the others'";
            break;
          }
          if (c.multi) return unsupported("two-shot needs every rank's window mapped (one host)");
          if (!f.hostRanks) {
            // GPU windows, per cell-sized chunk c, one after another: two exchanges; the peers'
            // slices and then its result exposed (priced as copies: c/R); the fold of its slice
            // (c/n) off the windows (gpuWindowFold); the n-1 other slices got at once, each from its
            // owner (a latency, (n-1)c/n into the rank). One more exchange ends the call.
            const double chunks = std::ceil(S / static_cast<double>(k.boardChunkBytes));
            const double cb = std::min<double>(S, static_cast<double>(k.boardChunkBytes));
            t = c.aIn + chunks * (2 * c.aIn + cb / c.R + gpuWindowFold(cb / n) + windowReadUs +
                                  (n - 1) * cb / n / std::min(c.bIn, c.R));
            chunk = std::min<double>(S, static_cast<double>(k.boardChunkBytes));
            p.reason =
                "per window cell: each GPU reduces its slice off the peer windows, then gets the others'";
            break;
          }
          // The window schedule (algo/oneshot.cpp), out of place (the planner plans every rank
          // alike, and in-place-ness may differ), per cell-sized chunk: two signal exchanges; per
          // rank, copy the peers' slices into its window (2(n-1)/n S over all chunks), fold its
          // slice of the n inputs, its own from its input (the first two in one reduce, fused as in
          // one-shot, then n-2 more: 3(n-1)/n S), publish it in its window (2S/n) and get the n-1
          // other slices (2(n-1)/n S): (7n-5)/n S against cache-resident cells. (In place a rank
          // puts its slice into every peer's window instead, and the call needs no exchange at
          // the end.) Chunks run one after another (a chunk's copy waits for the previous
          // exchange). One more exchange ends the call (a peer may read a rank's exposed buffers
          // until then). Priced with every expose a copy (the simulator's choice: which ranks
          // map is known only at run time).
          double chunks = std::ceil(S / static_cast<double>(k.boardChunkBytes));
          t = (2 * chunks + 1) * c.aIn + (7.0 * n - 5) / n * S / (c.R * k.boardCacheSpeedup);
          chunk = std::min<double>(S, static_cast<double>(k.boardChunkBytes));
          p.reason = "per window cell: each rank reduces its slice, then gets the others' slices";
          break;
        }
        default:
          return unsupported("not for this collective");
      }
      break;
    case Coll::ReduceScatter:
    case Coll::AllGather:
      if (a == PlanAlgo::Ring) {
        t = flatRing(ring, S / n, static_cast<double>(chunk), reduces, !reduces);
        p.reason = "n-1 steps of S/n";
      } else if (a == PlanAlgo::Rhd) {
        t = rhdSteps(reduces, !reduces, S, 0, 0, 0, false) + rhdExtra;
        if (t == kPrunedUs) p.pruned = true;
        p.reason = "log2(n) steps";
      } else if (a == PlanAlgo::Direct) {
        t = directPhase(S / n, reduces);
        p.reason = "every peer at once";
      } else {
        return unsupported("not for this collective");
      }
      break;
    case Coll::Broadcast:
    case Coll::Reduce: {
      double b = reduces ? std::min(bMix, c.R) : bMix;
      if (a == PlanAlgo::Ring || a == PlanAlgo::Chain) {
        chunk = pipelineChunk(S, b, n, k);
        t = (n - 1) * aMix + S / b + pipelineCost(S, chunk, b, n - 1, k);
        p.reason = "pipelined chain";
      } else if (a == PlanAlgo::Tree) {
        int D = ceilLog2(n);
        chunk = pipelineChunk(S, b / 2, D, k);
        t = D * aMix + 2 * S / b + pipelineCost(S, chunk, b / 2, D, k);
        p.reason = "pipelined binary tree (2 children per node)";
      } else if (a == PlanAlgo::Binomial) {
        t = ceilLog2(n) * (aMix + S / b);
        chunk = clampChunk(S, k);
        p.reason = "log2(n) rounds of S";
      } else {
        return unsupported("not for this collective");
      }
      break;
    }
    case Coll::AlltoAll:
    case Coll::Gather:
    case Coll::Scatter:
      if (a == PlanAlgo::Binomial && coll != Coll::AlltoAll) {
        // log2(n) rounds; the root's link carries every block but its own.
        t = ceilLog2(n) * (aMix + k.chunkOverheadUs) + S * (n - 1) / n / bMix;
        p.reason = "binomial tree: log2(n) rounds";
        break;
      }
      if (a != PlanAlgo::Direct && a != PlanAlgo::Ring) return unsupported("not for this collective");
      if (a == PlanAlgo::Direct) {
        double b = coll == Coll::AlltoAll ? (c.multi ? c.bLoaded : c.bIn) : bMix;
        t = c.aOut + (n - 1) * k.chunkOverheadUs + S * (n - 1) / n / b;
        p.reason = "every peer at once";
      } else {
        t = (n - 1) * (aMix + S / n / bMix) * (coll == Coll::AlltoAll ? n / 2.0 : 1.0);
        p.reason = "n-1 ring steps";
      }
      break;
    case Coll::Barrier:
      if (a == PlanAlgo::Rhd || a == PlanAlgo::Direct)  // direct: the dissemination barrier's rounds
        t = ceilLog2(n) * std::max(c.aIn, c.aOut);
      else if (a == PlanAlgo::Ring)
        t = 2 * (n - 1) * aMix;
      else
        return unsupported("not for this collective");
      p.reason = "latency only";
      break;
  }
  if (t < 0) return unsupported("not modelled");
  if (p.pruned) return unsupported("no faster than the cutoff: a bound on its time already reaches it");
  p.supported = true;
  p.us = k.launchUs + t;
  p.chunkBytes = chunk;
  return p;
}

}  // namespace trib
