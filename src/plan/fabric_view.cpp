// The fabric as the cost model sees it (computeFabric): a topology and the ranks' nodes summarized
// into per-class bandwidths, step latencies, rails, relays and the tree's shape, and each
// protocol's view of that summary (protocolView). Derivations: docs/PLANNER.md.
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "algo/algorithms.hpp"
#include "plan/cost_formulas.hpp"
#include "plan/cost_model.hpp"

namespace trib {

using cost::kB;

namespace {

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

FabricView::DomainTree domainTreeOf(int m) {
  FabricView::DomainTree dt;
  for (int x = 0; x < m; ++x) {
    std::array<int, 2> load{0, 0};
    for (int tr = 0; tr < 2; ++tr) {
      const algo::TreeLinks l = algo::doubleTreeNode(m, x, tr);
      load[0] += (l.child[0] >= 0) + (l.child[1] >= 0);
      load[1] += l.parent >= 0;
      int depth = 0;  // edges to the root (bounded by m: a tree has no cycle to loop on)
      for (int y = l.parent; y >= 0 && depth < m; y = algo::doubleTreeNode(m, y, tr).parent) ++depth;
      dt.depth = std::max(dt.depth, depth);
    }
    if (std::find(dt.loads.begin(), dt.loads.end(), load) == dt.loads.end()) dt.loads.push_back(load);
  }
  return dt;
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
  std::vector<int> onNode(t.numNodes(), 0);  // ranks per node
  for (int r : ranks) ++onNode[r];
  double share = 1;
  for (int r : ranks)
    if (t.node(r).cores > 0 && onNode[r] > t.node(r).cores)
      share = std::min(share, static_cast<double>(t.node(r).cores) / onNode[r]);
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
      f.domainTree = domainTreeOf(f.domains);
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
  std::vector<char> isLeaf(t.numNodes(), 0);  // not a search of the leaves per rank: n x leaves
  for (int r : ranks) {
    int leaf = firstSwitchAbove(t, r, &up);
    if (leaf < 0 || !t.node(leaf).reduce.can()) {
      ok = false;
      break;
    }
    if (!isLeaf[leaf]) isLeaf[leaf] = 1, leaves.push_back(leaf);  // in order of first use
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

}  // namespace trib
