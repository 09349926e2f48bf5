// Routes between endpoints: lowest-latency paths over the topology, with deterministic
// ECMP-style spreading over equal-cost paths (a hash of the endpoints picks among them), the way
// adaptive/hashed routing spreads flows over the spines of a fat tree. CPUs may forward traffic
// between two other endpoints, at a penalty (host-memory bounce, as NCCL avoids "SYS"). GPUs do
// only as NCCL's PXN: a GPU behind the source's own NVSwitch may take the source's data over
// NVLink and send it from its NIC (PCIe), at a penalty, where that saves hops (a rail-optimized
// fabric's spine: the relay's NIC is on the destination's rail).
// Shared by the cost model and the simulator so both see the same paths.
#pragma once
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "topo/topology.hpp"

namespace trib {

// A hop on a path: the directed link 2*linkId + (0: a->b, 1: b->a).
using DirLink = int32_t;
inline int dirLinkId(DirLink d) { return d >> 1; }
inline int dirLinkFrom(const Topology& t, DirLink d) {  // the node the hop leaves
  const Link& l = t.link(d >> 1);
  return (d & 1) ? l.b : l.a;
}
inline double dirLinkBw(const Topology& t, DirLink d) {
  const Link& l = t.link(d >> 1);
  return (d & 1) ? l.bwBA : l.bwAB;
}

// The index in `path` of the first hop out of a GPU that relays (PXN: a GPU past the path's first
// hop), or 0 where no GPU relays. Links past the topology's (a simulator's link groups) are skipped.
size_t relayHop(const Topology& t, std::span<const DirLink> path);

class Router {
 public:
  explicit Router(const Topology& t);
  // Path from node src to node dst (empty when src == dst, or unreachable: check reachable()).
  // The reference stays valid for the Router's lifetime.
  const std::vector<DirLink>& route(int src, int dst);
  // The same path, computed into *out and not cached (for callers that keep n² paths more
  // compactly than the cache's vector per pair: the simulator's RoutePool).
  void path(int src, int dst, std::vector<DirLink>* out);
  // The same path, and in (*alternatives)[i] every directed link that some equal-cost path takes
  // as its i-th hop (path[i] among them; one link where there is no choice): the spine bundles a
  // fat tree's adaptive routing or packet spraying spreads one pair's traffic over. Where the
  // equal-cost paths differ in length, each hop's set is the path's own link.
  void paths(int src, int dst, std::vector<DirLink>* out, std::vector<std::vector<DirLink>>* alternatives);
  bool reachable(int src, int dst) { return src == dst || !route(src, dst).empty(); }
  double latencyUs(int src, int dst);       // sum of link latencies
  double bottleneckGBps(int src, int dst);  // min link bandwidth along the path (0 if none)
  const Topology& topology() const { return t_; }
  // Some GPU may relay (PXN): the fabric is rail-optimized, one leaf a rail (route.cpp), and the
  // topology lets GPUs relay (Topology::pxn).
  bool relays() const { return relays_; }
  // The fabric is rail-optimized, one leaf a rail: GPUs would relay if the topology let them.
  bool railOptimized() const { return railOptimized_; }
  // A GPU's rail: the first network switch above it (-1: none, or not a GPU).
  int railOf(int node) const {
    return node >= 0 && node < static_cast<int>(railOf_.size()) ? railOf_[node] : -1;
  }

 private:
  void compute(int src, int dst, std::vector<DirLink>* out);
  void search(int src, int dst, std::vector<DirLink>* out);  // Dijkstra by weight()
  // The path crosses the network and passes a CPU on the way, with a GPU at one end.
  bool networkThroughHost(int src, int dst, const std::vector<DirLink>& path) const;
  double weight(int u, int lid, int v, int dst) const;  // the hop u -> v over link lid
  // After compute(src, dst, path): the equal-cost hops (paths()).
  void equalCostHops(int src, int dst, const std::vector<DirLink>& path,
                     std::vector<std::vector<DirLink>>* alternatives);
  const Topology& t_;
  std::vector<int> transitNeighbours_;
  std::vector<int> railOf_;     // per GPU: the first network switch above it (-1: none)
  std::vector<char> relayHub_;  // per NVSwitch: its GPUs are on different rails (PXN can pay)
  bool railOptimized_ = false;  // relays would pay (every NVSwitch's GPUs on rails of their own)
  bool relays_ = false;         // some NVSwitch is a relay hub
  std::unordered_map<uint64_t, std::vector<DirLink>> cache_;
  // Dijkstra scratch, reset by generation stamp so a query touches only what it explores.
  std::vector<double> dist_;
  std::vector<DirLink> via_;
  std::vector<uint32_t> stamp_, done_, nearDst_, relay_;  // relay_: reached as a PXN relay
  uint32_t gen_ = 0;
  bool tie_ = false;            // the last search met an equal-cost alternative
  bool noHostTransit_ = false;  // the search may not pass a CPU (compute: GPUDirect RDMA)
  // equalCostHops scratch: each node's hops before dst (stamped by gen_), the walk's layers.
  std::vector<uint32_t> depthStamp_;
  std::vector<int> depth_, layer_, prevLayer_;
};

// The first network switch above an endpoint (through its NICs, PCIe switches, CPUs), by fewest
// hops, and the directed path up to it; -1 if there is none within a few hops.
int firstSwitchAbove(const Topology& t, int node, std::vector<DirLink>* up);
// The first aggregation tree whose root is reached from every leaf by following parents, with the
// deepest leaf's number of edges to the root; nullptr if none covers all leaves.
const AggTree* findAggTree(const Topology& t, const std::vector<int>& leaves, int* depth, int skip = 0);
// The directed link from a to b (first one when parallel), -1 if none.
DirLink dirLinkBetween(const Topology& t, int a, int b);

}  // namespace trib
