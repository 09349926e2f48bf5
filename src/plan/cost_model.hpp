// Cost model: predicted time of each algorithm on a topology, analytically.
//
// time = launch + Σ phases (steps × per-step latency + bytes / bottleneck bandwidth), where a
// link's usable bandwidth is its nominal speed × an efficiency per link type, reduction is fused
// with receiving (it costs only where the reducer is slower than the link), and in-network
// reduction moves S up and S down per rank at min(link, switch reduce rate). Every constant lives
// in CostConstants and is documented, with its source, in docs/PLANNER.md.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "algo/schedule.hpp"
#include "common/dtype.hpp"
#include "topo/route.hpp"
#include "topo/topology.hpp"

namespace trib {

// What the planner chooses among: the schedule algorithms plus the in-network variants.
enum class PlanAlgo : uint8_t {
  Ring,
  Tree,
  Rhd,
  Direct,
  Binomial,
  Chain,
  Hierarchical,  // intra-domain reduce-scatter -> inter-domain all-reduce (ring) -> intra-domain all-gather
  Switch,        // in-network reduction in the network switches (SHARP): each rank sends S up, gets S down
  Nvls,          // NVLink-switch reduction inside one NVLink domain
  NvlsSwitch,    // NVLS inside each domain + switch reduction across domains (NCCL's NVLS-Tree/CollNet)
  OneShot,       // every rank reduces all inputs off the peers' windows (one host, or RDMA: PlanRequest)
  HierSwitch,    // ring reduce-scatter in each domain -> switch all-reduce of S/d per rank -> ring all-gather
  TwoShot,       // each rank reduces a slice of each window cell, then gets the others' (one host, or RDMA)
  AllgatherReduce,  // every rank sends its input to every rank, then folds all n (small vectors)
  NvlsRing,  // NVLS inside each domain + a ring all-reduce of each GPU's slice across the domains on its
             // own NIC
  NvlsTree,  // NVLS inside each domain + a double binary tree of the domains for each GPU's slice on its
             // own NIC (NCCL's NVLS-Tree where the network does not reduce)
};
constexpr int kNumPlanAlgos = 16;
const char* planAlgoName(PlanAlgo a);                     // "ring", ..., "nvls_switch"
std::string planAlgoNames();                              // every name, "ring, tree, ..."
bool parsePlanAlgo(const std::string& s, PlanAlgo* out);  // also accepts "sharp" = switch
Algo toScheduleAlgo(PlanAlgo a);                          // the NVLS plans -> Algo::Switch
// Nvls, NvlsSwitch, NvlsRing, NvlsTree: no schedule yet; the planner prices them and simulateInNetwork
// replays them directly.
bool isNvlsPlan(PlanAlgo a);

// How GPU ranks move a step's data (NCCL's three): Simple, large chunks behind a flag per chunk,
// what the executor runs and what CostConstants' own figures are; LL128, 128-byte lines of 120
// data bytes and a flag; LL, 16-byte lines of 8 data bytes and a flag, the cheapest step and half
// the link. The point-to-point schedules can take any of them (model only: the executor runs
// Simple); in-network and peer-window algorithms run Simple. docs/PLANNER.md "Protocols".
enum class Protocol : uint8_t { Simple, LL128, LL };
constexpr int kNumProtocols = 3;
const char* protocolName(Protocol p);                     // "Simple", "LL128", "LL"
bool parseProtocol(const std::string& s, Protocol* out);  // any case
bool protocolApplies(PlanAlgo a);                         // the algorithm can run LL/LL128

// What a protocol other than Simple changes: its share of Simple's link rate (its payload per
// line, its flag handling) and its per-step and per-call costs, in place of Simple's.
struct ProtocolCost {
  double linkShare;
  // The double tree's share instead (its kernel forwards and reduces each line in one pass): in one
  // NVLink domain and across domains. NCCL's tree refinements, relative to the tree's Simple.
  double treeShareInDomain, treeShareAcross;
  double stepOverheadUs, netStepOverheadUs, launchUs;
  // The most a rank moves under the protocol, GB/s (0: no ceiling beyond its links): in one NVLink
  // domain by the GPUs' generation (index GpuArch), across domains by the hosts' CPU maker (AMD or
  // not) and the number of domains (two, or three and more). NCCL's llMaxBws for LL.
  double ceilingInDomainGBps[kNumGpuArchs];
  double ceilingAcrossGBps[2][2];  // [AMD hosts][three or more domains]
};

struct CostConstants {
  // Fraction of a link's nominal bandwidth a collective achieves, per link type.
  double eff[kNumLinkTypes];
  double stepOverheadUs;     // software cost per communication step (kernel/progress handoff)
  double netStepOverheadUs;  // extra per step that crosses the network (proxy, doorbell, completion)
  double launchUs;           // once per collective
  double chunkOverheadUs;    // per pipelined chunk (flag/credit exchange)
  double switchOpUs;         // per in-network reduction tier (switch ALU + buffer)
  double gpuReduceGBps;      // local reduction throughput when the topology does not say
  double cpuReduceGBps;
  double boardCacheSpeedup;  // one-/two-shot: their window cells are still in the shared cache
  uint64_t boardChunkBytes;  // two-shot: bytes per board step (TRIB_SHM_BOARD_BYTES' default)
  uint64_t minChunkBytes, maxChunkBytes;
  int executorWindowSteps;  // steps past its first unfinished one the executor may start
  ProtocolCost ll128, ll;   // the other protocols (the fields above are Simple's)
  static const CostConstants& defaults();
  // The constants as protocol p sees them for algorithm a on `domains` NVLink domains: every link
  // type's efficiency times its share, its step and launch costs. Simple: these constants unchanged.
  CostConstants forProtocol(Protocol p, PlanAlgo a = PlanAlgo::Ring, int domains = 1) const;
  // Protocol p's share of Simple's link rate for algorithm a (1 for Simple).
  double protocolShare(Protocol p, PlanAlgo a, int domains) const;
  const ProtocolCost& protocolCost(Protocol p) const {
    return p == Protocol::LL128 ? ll128 : ll;
  }  // not Simple
};

// The facts about (topology, first n ranks) the formulas need; computed once per rank count.
struct FabricView {
  int n = 1;
  int domains = 1;      // NVLink domains (or hosts on a CPU-only machine) holding the ranks
  int perDomain = 1;    // ranks in the smallest domain
  bool uniform = true;  // all domains the same size and ranks contiguous by domain
  // Ranks contiguous by domain, each domain this many but the last, which may hold fewer (the
  // rack order of direct.cpp's PeerOrder); 0 otherwise. perDomain where uniform.
  int perFullDomain = 0;
  double bwIntra = 0;     // GB/s, effective, between two ranks of a domain (0 if perDomain == 1)
  double latIntraUs = 0;  // per step, overheads included
  bool intraNet = false, interNet = false;  // the step crosses a network link (its overhead)
  double bwInter = 0;                       // GB/s, effective, one flow between domains
  double bwInterLoaded = 0;                 // GB/s per rank when every rank of a domain talks across at once
  double latInterUs = 0;                    // to the next domain
  double latFarUs = 0;  // to the farthest (more network tiers), for steps that wait on every peer
  // The ring's step between domains: a domain's last rank to the next domain's first (ranks of
  // different local indices: on a rail-optimized fabric, different rails, over a spine).
  double latRingInterUs = 0;
  // The step of a ring across domains among GPUs of one local index (hierarchical's and nvls_ring's
  // level across: each domain's GPU l to the next domain's GPU l, the last domain back to the
  // first), at the mean latency of those steps.
  double latLevelInterUs = 0;
  // That step goes through a PXN relay (route.hpp): NVLink to the GPU on the next rank's rail, its
  // NIC from there; the relay's NVLink port carries it too.
  bool ringInterRelayed = false;
  // nvls_tree's level across (equal domains): the double binary tree of the m domains
  // (algo::doubleTreeNode), as the loads it puts on a GPU's NIC, in halves of the GPU's slice: each
  // distinct (children, parents) pair over both trees (a GPU receives a half from each child,
  // reduced, and from each parent; sends one to each), and the deeper tree's depth.
  struct DomainTree {
    std::vector<std::array<int, 2>> loads;  // {children, parents} over both trees
    int depth = 0;
  };
  DomainTree domainTree;
  double reduceGBps = 0;  // a rank's local reduction throughput
  // Double binary tree (algo/tree.cpp): edges of the busiest rank inside its domain and across
  // domains (each edge carries S/2 each way), and the most cross-domain edges of one host's ranks,
  // which share its NICs (hostEgressGBps, effective).
  int treeEdgesIn = 0, treeEdgesOut = 0, treeHostEdgesOut = 0;
  double treePathUs = 0;  // the costliest path from a rank to its tree's root (per-step latencies)
  // The two trees rank by rank, for the timing of the tree's first and last slices (tree_model.cpp,
  // treeAllReduceUs; docs/PLANNER.md "The tree under two channels"): per tree each rank's parent and
  // children (-1: none) and the ranks deepest first (every child before its parent); each rank's
  // domain. Shared, so that copying the view (the planner does per request) copies none of it.
  struct TreeShape {
    std::vector<std::array<int, 3>> node[2];  // parent, child 0, child 1
    std::vector<int> order[2];
    std::vector<int> domain;
    // Rank-to-root paths of both trees by their number of edges e: the fewest and the most of
    // them across domains (treePathUs prices the costliest path at any two step latencies).
    std::vector<std::array<int, 2>> pathAcross;
  };
  std::shared_ptr<const TreeShape> treeShape;
  // Rail-optimized fabrics: each rank's rail, and where GPUs relay (PXN) the NICs a step across
  // domains may leave by. NIC i < n is rank i's own; the others belong to GPUs of the ranks'
  // domains that are not ranks (a partly used node's), which relay all the same. Null on other
  // fabrics.
  struct Rails {
    bool relays = false;  // PXN (Router::relays); else every GPU sends by its own NIC
    int nics = 0;
    std::vector<int> rail, domain;                         // per rank: its rail (Router::railOf), domain
    std::vector<std::vector<std::pair<int, int>>> byRail;  // per domain: (rail, NIC) of its GPUs
  };
  std::shared_ptr<const Rails> rails;
  // The NIC that carries rank s's step to rank q: s's own (index s) unless s relays (PXN) through
  // the GPU of its domain on q's rail.
  int relayNic(int s, int q) const;
  // Direct through relays (PXN), in blocks a phase (a block to every peer from every rank): the
  // most any GPU's NVLink port carries one way (its own domain's blocks and the first legs it
  // sends or forwards) and the most any NIC sends (every block of its domain for its rail's
  // remote ranks). 0 where nobody relays.
  double relayedNvlinkBlocks = 0, relayedNicBlocks = 0;
  // Rank s's step to rank q goes between rails: in other domains, on rails of their own.
  bool crossesRails(int s, int q) const;
  // What such a step's route adds to a same-rail one's: the NVLink hop into the relay (PXN), or
  // the spine between the rails' leaves (PXN off).
  double crossRailLatUs = 0;
  int nics() const { return rails && rails->relays ? rails->nics : n; }
  double hostEgressGBps = 0;
  bool hostRanks = false;  // every rank is a CPU process (host memory: the one-host window schedules apply)
  // The peer windows are remote (RDMA READ/WRITE across hosts; PlanRequest::remoteWindows).
  bool remoteWindows = false;
  // In-network reduction: 0 when absent.
  double nvlsGBps = 0;  // the domain's NVSwitch reduce rate per port
  ReduceCapability nvlsCap;
  double switchGBps = 0;  // the network switches' reduce rate per port (min over the ranks' leaves)
  ReduceCapability switchCap;
  int switchTiers = 0;     // depth of the aggregation tree (1: leaves are the root)
  double switchLatUs = 0;  // one way rank -> root of the aggregation tree, overheads included
  // The slowest rank's first hop toward its leaf (a DGX GPU's PCIe link to its NIC; a host's link
  // to the switch itself), where a pipeline's chunk overheads fall (cost_model.cpp switchPace).
  double switchFeedGBps = 0;
  std::string summary;  // one line: "4608 ranks in 64 domains of 72; intra 740 GB/s 3.5 us; ..."
  Protocol protocol = Protocol::Simple;  // the protocol its rates and step latencies are for
  // What bounds a protocol's rate per rank (ProtocolCost's ceilings): the ranks' oldest GPU
  // generation and their hosts' CPU maker (AMD if any is; Unknown if any is not declared).
  GpuArch gpuArch = GpuArch::Unknown;
  CpuVendor hostVendor = CpuVendor::Unknown;
  double rankCeilingGBps = 0;  // protocol's ceiling on every rank rate above (0: none)
};
FabricView computeFabric(const Topology& t, Router& router, const std::vector<int>& rankNodes,
                         const CostConstants& k);
// The view of a Simple fabric (computed with k) for protocol p and algorithm a: link rates times
// p's share for a, step latencies with p's overheads. In-network figures stay Simple's (those
// algorithms run Simple).
FabricView protocolView(const FabricView& simple, const CostConstants& k, Protocol p,
                        PlanAlgo a = PlanAlgo::Ring);
// Protocol p's ceiling on a rank's rate on that fabric (GB/s; 0: none): what protocolView caps the
// rates at and the simulator caps a rank's links at (SimOptions::rankCeilingGBps).
double rankCeilingGBps(const FabricView& f, const CostConstants& k, Protocol p);
// The costliest rank-to-root path of the double tree, a step costing aIn inside a domain and aOut
// across (0 without a tree shape).
double treePathUs(const FabricView& f, double aIn, double aOut);
// The schedule's slice (CollArgs::chunkElems) for a planned chunk of chunkBytes: whole elements,
// at least one.
inline uint64_t chunkElemsOf(uint64_t chunkBytes, size_t elemSize) {
  const uint64_t es = elemSize ? elemSize : 1, elems = (chunkBytes + es - 1) / es;
  return elems ? elems : 1;
}

// Working memory predict() reuses across calls: the tree's streams of each rank (~600 bytes a
// rank, 75 MB at 131,072 ranks, whose fresh pages cost more than the model's arithmetic). One
// caller at a time; the planner keeps one per explanation, for its protocols' calls.
class PredictScratch {
 public:
  PredictScratch();
  ~PredictScratch();
  struct Impl {
    // Up to 4 streams through one of a rank's links (tree_model.cpp, treeAllReduceUs).
    struct Streams {
      std::array<double, 4> r;
      std::array<int, 4> src;
      std::array<int, 4> feeder;  // up streams: the rank that sends it (the child, or the rank itself)
      std::array<int8_t, 4> tree;
      int m = 0;
      void add(double t, int from = -1, int by = -1, int tr = 0) {
        r[m] = t, src[m] = from, feeder[m] = by, tree[m++] = static_cast<int8_t>(tr);
      }
    };
    std::vector<std::array<Streams, 2>> lists[4];  // per rank and class: up in, up out, down in, down out
  };
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

struct Prediction {
  bool supported = false;
  std::string reason;  // when unsupported: why; else a short formula note
  double us = 0;
  uint64_t chunkBytes = 0;
  bool pruned = false;  // not priced: provably no faster than cutoffUs (supported stays false)
};
// Predicted time for algorithm a on a request (bytes = nccl-tests S; see PlanRequest), on the
// fabric and constants of one protocol (f.protocol; k for it: CostConstants::forProtocol).
// cutoffUs: a model whose cheap bound already reaches it may stop there (Prediction::pruned); the
// planner passes Simple's time when it prices another protocol.
Prediction predict(PlanAlgo a, Coll coll, uint64_t bytes, DataType dtype, RedOp op, const FabricView& f,
                   const CostConstants& k, double cutoffUs = 1e300, PredictScratch* scratch = nullptr);

}  // namespace trib
