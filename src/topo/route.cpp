// Router: Dijkstra from the source with early exit, pruning dead ends (a node whose only way on is
// back where it came from, e.g. the NICs hanging off a leaf switch), so a query on a 4,608-GPU fat
// tree explores a few hundred nodes instead of twelve thousand.
#include "topo/route.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>

namespace trib {
namespace {

// A hop costs its latency plus the time a 1 MB message takes on it, so a fast link beats a
// short slow one (NVLink over a shared PCIe switch) and fewer hops win among equals.
constexpr double kRefMessageUs = 1000.0;      // 1 MB at 1 GB/s, in µs: weight += kRefMessageUs / bw
constexpr double kCpuTransitPenaltyUs = 5.0;  // bouncing through host memory is slow
// PXN (NCCL's "PCI x NVLink"): a GPU's data for a remote GPU on another rail crosses NVLink to the
// GPU of its own domain whose NIC is on that rail, which sends it. A relay's store and its proxy's
// handoff cost about a step, so a relay wins only where it saves hops (a rail fabric's spine).
constexpr double kGpuRelayPenaltyUs = 5.0;

bool transit(NodeType t) { return t != NodeType::Gpu; }
bool hostNode(NodeType t) { return t == NodeType::Cpu || t == NodeType::Numa || t == NodeType::Host; }

uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

}  // namespace

size_t relayHop(const Topology& t, std::span<const DirLink> path) {
  for (size_t i = 1; i < path.size(); ++i) {
    if (path[i] >= 2 * static_cast<DirLink>(t.numLinks())) continue;
    if (t.node(dirLinkFrom(t, path[i])).type == NodeType::Gpu) return i;
  }
  return 0;
}

Router::Router(const Topology& t) : t_(t) {
  int n = t.numNodes();
  transitNeighbours_.assign(n, 0);
  for (int i = 0; i < n; ++i)
    for (auto [lid, nb] : t.adjacent(i)) transitNeighbours_[i] += transit(t.node(nb).type);
  // PXN relays: each GPU's rail (the first network switch above it). Relays are a way on where the
  // fabric is rail-optimized with one switch a rail: every NVSwitch's GPUs each on a rail of their
  // own, the same rails under every NVSwitch. Where some GPUs of a node share one (a rack on one
  // leaf; a node's NICs split over two leaves, which NCCL's PXN, choosing the relay by NIC index,
  // not by switch, would not use to save a hop), or a rail spans several leaves (more nodes than a
  // leaf's ports: a relay would then save the spine for some pairs of two nodes and not for
  // others, which the cost model does not price, docs/PLANNER.md "PXN"), the search stays as it was.
  railOf_.assign(n, -1);
  relayHub_.assign(n, 0);
  for (int i = 0; i < n; ++i)
    if (t.node(i).type == NodeType::Gpu) railOf_[i] = firstSwitchAbove(t, i, nullptr);
  std::vector<int> hubs, firstRails;
  bool railOptimized = true;
  for (int i = 0; i < n && railOptimized; ++i) {
    if (t.node(i).type != NodeType::NvSwitch) continue;
    std::vector<int> rails;
    for (auto [lid, nb] : t.adjacent(i))
      if (t.node(nb).type == NodeType::Gpu && railOf_[nb] >= 0) rails.push_back(railOf_[nb]);
    std::sort(rails.begin(), rails.end());
    if (rails.empty()) continue;
    if (hubs.empty()) firstRails = rails;
    railOptimized = rails.size() >= 2 && std::adjacent_find(rails.begin(), rails.end()) == rails.end() &&
                    rails == firstRails;
    hubs.push_back(i);
  }
  railOptimized_ = railOptimized && !hubs.empty();
  relays_ = railOptimized_ && t.pxn;
  if (relays_)
    for (int i : hubs) relayHub_[i] = 1, ++transitNeighbours_[i];
  dist_.assign(n, 0);
  via_.assign(n, -1);
  stamp_.assign(n, 0);
  done_.assign(n, 0);
  nearDst_.assign(n, 0);
  relay_.assign(n, 0);
  depthStamp_.assign(n, 0);
  depth_.assign(n, 0);
}

const std::vector<DirLink>& Router::route(int src, int dst) {
  uint64_t key = static_cast<uint64_t>(src) << 32 | static_cast<uint32_t>(dst);
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  std::vector<DirLink> path;
  if (src != dst) compute(src, dst, &path);
  return cache_.emplace(key, std::move(path)).first->second;
}

void Router::path(int src, int dst, std::vector<DirLink>* out) {
  out->clear();
  if (src != dst) compute(src, dst, out);
}

void Router::paths(int src, int dst, std::vector<DirLink>* out,
                   std::vector<std::vector<DirLink>>* alternatives) {
  out->clear();
  if (src == dst) {
    alternatives->clear();
    return;
  }
  compute(src, dst, out);
  equalCostHops(src, dst, *out, alternatives);
}

double Router::weight(int u, int lid, int v, int dst) const {
  const Link& l = t_.link(lid);
  double w = l.latencyUs + kRefMessageUs / std::max(1e-9, (l.a == u ? l.bwAB : l.bwBA));
  NodeType vt = t_.node(v).type;
  if (v != dst && hostNode(vt)) {
    if (noHostTransit_) return std::numeric_limits<double>::infinity();
    w += kCpuTransitPenaltyUs;
  }
  if (v != dst && vt == NodeType::Gpu) w += kGpuRelayPenaltyUs;
  return w;
}

// Walks back from dst over the tight edges of compute()'s search (dist[u] + w(u, v) == dist[v],
// u settled): layer i of the walk is the nodes i hops before dst on some shortest path. Every node
// on a shortest path has a distance below dst's, so the search settled it before it stopped.
void Router::equalCostHops(int src, int dst, const std::vector<DirLink>& path,
                           std::vector<std::vector<DirLink>>* alternatives) {
  const size_t hops = path.size();
  auto& sets = *alternatives;  // the caller's, reused: its vectors keep their capacity
  auto single = [&] {
    for (size_t i = 0; i < hops; ++i) sets[i].assign(1, path[i]);
  };
  sets.resize(hops);
  single();
  if (hops < 2 || !tie_) return;  // no choice, or the search met no equal-cost alternative
  for (auto& s : sets) s.clear();
  std::vector<int>& layer = layer_;
  std::vector<int>& prev = prevLayer_;
  layer.assign(1, dst);
  depthStamp_[dst] = gen_;
  depth_[dst] = 0;
  for (size_t h = 0; h < hops; ++h) {
    prev.clear();
    for (int v : layer)
      for (auto [lid, u] : t_.adjacent(v)) {
        if (stamp_[u] != gen_ || done_[u] != gen_) continue;
        if (u != src && !transit(t_.node(u).type) && relay_[u] != gen_) continue;
        if (std::fabs(dist_[u] + weight(u, lid, v, dst) - dist_[v]) > 1e-9) continue;
        const bool fresh = depthStamp_[u] != gen_;
        if (fresh) {
          depthStamp_[u] = gen_;
          depth_[u] = static_cast<int>(h + 1);
          prev.push_back(u);
        } else if (depth_[u] != static_cast<int>(h + 1)) {
          single();  // equal-cost paths of different lengths: keep the one
          return;
        }
        const Link& l = t_.link(lid);
        sets[hops - 1 - h].push_back(2 * lid + (l.a == u ? 0 : 1));
      }
    layer.swap(prev);
  }
  if (layer.size() != 1 || layer[0] != src) {
    single();
    return;
  }
  for (auto& s : sets) std::sort(s.begin(), s.end());
}

// GPUDirect RDMA: a GPU's traffic leaves and enters the network by a NIC on its own side of the
// host's CPUs, as NCCL gives each GPU its nearest NIC (the receiver's included: PXN relays only on
// the sending side). By weight alone a route could reach a GPU through another GPU's NIC and the
// CPU between them, where the network's links are slower than PCIe's (DGX A100 on rails without
// PXN: in by the NIC of the sender's rail, across the CPU, instead of over a spine to the
// receiver's own); such a route is taken only where no route avoids the CPU (a NIC on the CPU's
// own root port).
void Router::compute(int src, int dst, std::vector<DirLink>* out) {
  noHostTransit_ = false;
  search(src, dst, out);
  if (!networkThroughHost(src, dst, *out)) return;
  std::vector<DirLink> avoiding;
  noHostTransit_ = true;
  search(src, dst, &avoiding);
  if (!avoiding.empty()) {
    *out = std::move(avoiding);
    return;
  }
  noHostTransit_ = false;
  out->clear();
  search(src, dst, out);  // again: equalCostHops reads the search's state
}

bool Router::networkThroughHost(int src, int dst, const std::vector<DirLink>& path) const {
  if (t_.node(src).type != NodeType::Gpu && t_.node(dst).type != NodeType::Gpu) return false;
  bool net = false, host = false;
  for (size_t i = 0; i < path.size(); ++i) {
    net |= t_.link(dirLinkId(path[i])).type == LinkType::Net;
    host |= i > 0 && hostNode(t_.node(dirLinkFrom(t_, path[i])).type);
  }
  return net && host;
}

void Router::search(int src, int dst, std::vector<DirLink>* out) {
  ++gen_;
  tie_ = false;
  const bool srcGpu = t_.node(src).type == NodeType::Gpu;
  for (auto [lid, nb] : t_.adjacent(dst)) nearDst_[nb] = gen_;
  uint64_t pairHash = mix(static_cast<uint64_t>(src) * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(dst));
  using Item = std::pair<double, int>;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> pq;
  auto touch = [&](int v) {
    if (stamp_[v] != gen_) {
      stamp_[v] = gen_;
      dist_[v] = std::numeric_limits<double>::infinity();
      via_[v] = -1;
    }
  };
  touch(src);
  dist_[src] = 0;
  pq.push({0, src});
  while (!pq.empty()) {
    auto [d, u] = pq.top();
    pq.pop();
    if (done_[u] == gen_ || d > dist_[u]) continue;
    done_[u] = gen_;
    if (u == dst) break;
    const bool uRelay = u != src && relay_[u] == gen_;  // a PXN relay: on to its NIC only
    if (u != src && !transit(t_.node(u).type) && !uRelay) continue;
    bool uTransit = transit(t_.node(u).type);
    // PXN, sender side only: the GPUs behind the source's own NVSwitch may relay.
    const bool relays = srcGpu && relayHub_[u] && via_[u] >= 0 && dirLinkFrom(t_, via_[u]) == src;
    for (auto [lid, v] : t_.adjacent(u)) {
      if (done_[v] == gen_) continue;
      const Link& l = t_.link(lid);
      if (uRelay && l.type != LinkType::Pcie) continue;
      // Dead end: v is not the destination nor next to it, and its only transit neighbour is u.
      if (v != dst && nearDst_[v] != gen_ && transitNeighbours_[v] - (uTransit ? 1 : 0) <= 0) continue;
      const bool vRelay = relays && v != dst && t_.node(v).type == NodeType::Gpu && railOf_[v] >= 0 &&
                          railOf_[v] != railOf_[src];
      if (v != dst && !transit(t_.node(v).type) && !vRelay) continue;
      const double w = weight(u, lid, v, dst);
      DirLink dl = 2 * lid + (l.a == u ? 0 : 1);
      touch(v);
      double nd = d + w;
      if (nd < dist_[v] - 1e-9) {
        dist_[v] = nd;
        via_[v] = dl;
        if (vRelay) relay_[v] = gen_;
        pq.push({nd, v});
      } else if (nd <= dist_[v] + 1e-9 && via_[v] >= 0) {
        // Equal cost: pick among the candidates by a hash of (src, dst, candidate) -- ECMP.
        tie_ = true;
        if (mix(pairHash ^ static_cast<uint64_t>(dl)) < mix(pairHash ^ static_cast<uint64_t>(via_[v])))
          via_[v] = dl;
      }
    }
  }
  if (stamp_[dst] != gen_ || via_[dst] < 0) return;
  for (int x = dst; x != src;) {
    DirLink dl = via_[x];
    out->push_back(dl);
    x = dirLinkFrom(t_, dl);
  }
  std::reverse(out->begin(), out->end());
}

double Router::latencyUs(int src, int dst) {
  double s = 0;
  for (DirLink d : route(src, dst)) s += t_.link(dirLinkId(d)).latencyUs;
  return s;
}

double Router::bottleneckGBps(int src, int dst) {
  const auto& p = route(src, dst);
  if (p.empty()) return 0;
  double b = std::numeric_limits<double>::infinity();
  for (DirLink d : p) b = std::min(b, dirLinkBw(t_, d));
  return b;
}

int firstSwitchAbove(const Topology& t, int node, std::vector<DirLink>* up) {
  struct Item {
    int node, parent, depth;
    DirLink via;
  };
  // Scratch kept between calls: the planner asks once per rank (131,040 at the largest cluster).
  thread_local std::vector<Item> q;
  thread_local std::vector<int> seen;
  q.assign(1, {node, -1, 0, -1});
  seen.assign(1, node);
  for (size_t i = 0; i < q.size(); ++i) {
    Item it = q[i];
    for (auto [lid, nb] : t.adjacent(it.node)) {
      if (std::find(seen.begin(), seen.end(), nb) != seen.end()) continue;
      seen.push_back(nb);
      const Link& l = t.link(lid);
      DirLink dl = 2 * lid + (l.a == it.node ? 0 : 1);
      NodeType nt = t.node(nb).type;
      if (nt == NodeType::Switch) {
        if (up) {
          up->clear();
          up->push_back(dl);
          for (int j = static_cast<int>(i); j > 0; j = q[j].parent) up->push_back(q[j].via);
          std::reverse(up->begin(), up->end());
        }
        return nb;
      }
      if (it.depth < 4 && (nt == NodeType::Nic || nt == NodeType::PcieSwitch || hostNode(nt)))
        q.push_back({nb, static_cast<int>(i), it.depth + 1, dl});
    }
  }
  return -1;
}

const AggTree* findAggTree(const Topology& t, const std::vector<int>& leaves, int* depth, int skip) {
  std::vector<const AggTree*> covering;
  std::vector<int> depths;
  for (const auto& tr : t.aggTrees()) {
    std::unordered_map<int, int> parent;
    for (auto [c, p] : tr.edges) parent[c] = p;
    bool covers = true;
    int maxDepth = 0;
    for (int leaf : leaves) {
      int x = leaf, d = 0;
      while (parent.count(x)) x = parent[x], ++d;
      covers &= x == tr.root;
      maxDepth = std::max(maxDepth, d);
    }
    if (covers) covering.push_back(&tr), depths.push_back(maxDepth);
  }
  if (covering.empty()) return nullptr;
  size_t i = static_cast<size_t>(skip) % covering.size();  // spread groups over the trees
  if (depth) *depth = depths[i];
  return covering[i];
}

DirLink dirLinkBetween(const Topology& t, int a, int b) {
  for (auto [lid, nb] : t.adjacent(a))
    if (nb == b) return 2 * lid + (t.link(lid).a == a ? 0 : 1);
  return -1;
}

}  // namespace trib
