// Planner: for each request, every algorithm that supports it gets a predicted time from the cost
// model over the topology; overrides (TRIB_ALGO, TRIB_TUNE) apply; the cheapest wins; a cache makes
// a repeated request cost one hash lookup. Every choice carries a sentence saying why.
// Cost model and constants: cost_model.hpp, docs/PLANNER.md.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "algo/schedule.hpp"
#include "common/dtype.hpp"
#include "common/memory_kind.hpp"
#include "plan/cost_model.hpp"
#include "topo/topology.hpp"

namespace trib {

struct PlanRequest {
  Coll coll = Coll::AllReduce;
  // nccl-tests' size S: count x dtype size for AllReduce/Reduce/Broadcast; the whole (nranks x count)
  // array for AllGather/ReduceScatter; everything a rank sends for AlltoAll/Gather/Scatter.
  uint64_t bytes = 0;
  DataType dtype = tribFloat32;
  RedOp op = tribSum;
  // The call's buffers (core: callMemoryKind). It places the ranks: device memory on GPUs, every
  // host kind on CPUs (RankNodes), whatever else the machine has. A kind that can differ between
  // ranks (tribMemAlloc memory on some ranks only) must not change the choice, which every rank
  // makes alike: the host kinds share one placement.
  MemoryKind memory = MemoryKind::Host;
  int nranks = 1;
  int root = 0;
  bool inPlace = false;
  // false: only algorithms with an executable schedule (what the communicator runs);
  // true: also model-only ones (in-network reduction before its executor lands) -- trib-plan.
  bool includeModelOnly = false;
  // The communicator gave up its attached switch (failover) or never attached it: switch plans
  // are not executable for it even when the planner knows a switch (a planner can be shared).
  bool switchDown = false;
  // hier_switch needs the communicator's slice groups registered at the switch for its domains:
  // their stride (ranks per domain), 0 = none.
  int sliceStride = 0;
  // A cell of every rank's peer window (bytes): the largest all-reduce OneShot takes, TwoShot's
  // chunk; 0: no windows (no transport maps or reaches every rank's, or TRIB_WINDOW_BYTES=0).
  uint64_t oneShotBytes = 0;
  // The windows are remote (PeerWindows::remote(): RDMA across hosts, verbs): one-shot and
  // two-shot are priced at the network's latency and rate, and offered across domains.
  bool remoteWindows = false;
};

struct Plan {
  PlanAlgo algo = PlanAlgo::Ring;
  // Simple unless the request admits model-only plans (PlanRequest::includeModelOnly) on GPU ranks
  // and another protocol is faster for this algorithm (the executor runs Simple).
  Protocol protocol = Protocol::Simple;
  uint64_t chunkElems = 1 << 16;  // pipeline slice for CollArgs::chunkElems
  int channels = 1;               // parallel rings/trees (the schedules run one today)
  int ranksPerDomain = 0;         // for CollArgs::ranksPerDomain (Hierarchical, Direct, Ring rails; else 0)
  double predictedUs = 0;
  bool executable = true;  // a schedule generator exists (src/algo registry)
  std::string why;
  // Set when TRIB_ALGO (or config.algo) allows, for this collective, only algorithms that cannot
  // run the request, so the plan is another one: which override, and why each allowed one cannot
  // run. The communicator warns (or fails, with TRIB_ALGO_STRICT) from it.
  std::string overrideUnmet;
  Algo scheduleAlgo() const { return toScheduleAlgo(algo); }
};
// "ring", or "ring/LL128" for another protocol than Simple.
std::string planName(const Plan& p);

struct Candidate {
  Plan plan;
  bool eligible = true;  // false: excluded (reason says why: unsupported, overridden, model-only)
  std::string reason;
  double algbwGBps = 0, busbwGBps = 0;
};

// Parsed TRIB_ALGO: per collective, the set of allowed algorithms (a bit per PlanAlgo).
struct AlgoFilter {
  uint32_t allowed[kNumColls];
  bool set[kNumColls] = {};
  AlgoFilter() {
    for (auto& a : allowed) a = ~0u;
  }
};
// NCCL-style: "ring,tree" (every collective), "allreduce:tree;broadcast:chain", "^ring" (all but),
// "allreduce:^ring,rhd". Names: ring tree rhd direct binomial chain hierarchical switch nvls nvls_switch
// oneshot hier_switch twoshot allgather_reduce nvls_ring nvls_tree.
Status parseAlgoOverride(const std::string& spec, AlgoFilter* out);
// NCCL_PROTO-style (TRIB_PROTO): "LL,LL128,Simple" allows those, "^LL" all but; any case; empty:
// all. A bit per Protocol.
Status parseProtocolOverride(const std::string& spec, uint32_t* allowed);

// UCC-style tune string (TRIB_TUNE): entries separated by '#', fields by ':' --
// "allreduce:0-64k:@tree#allreduce:64k-inf:@ring", optionally "ranks=2-64". A collective list may be
// "allreduce,reduce" or "all". Sizes take k/m/g (binary) suffixes and "inf"; ranges are [lo, hi).
struct TuneRule {
  uint32_t collMask = 0;
  uint64_t lo = 0, hi = UINT64_MAX;
  int minRanks = 0, maxRanks = INT32_MAX;
  PlanAlgo algo = PlanAlgo::Ring;
};
Status parseTuneString(const std::string& spec, std::vector<TuneRule>* out);
Status parseSize(const std::string& s, uint64_t* out);  // "1G", "64k", "8", "inf"

// An aggregation switch the communicator attached (trib-switchd, or a real one, through
// TRIB_SWITCH or the topology file's addr=): with it, the planner predicts switch plans from these
// figures and marks them executable. Without one they stay model-only.
struct AttachedSwitch {
  double gbps = 1.0;          // one switch's reduce throughput, summed over its members (TRIB_SWITCH_BW)
  double latUs = 50;          // one way per tier (TRIB_SWITCH_LAT)
  int tiers = 1;              // levels of the aggregation tree the communicator's path climbs
  int fanIn = 0;              // most children at one switch of the tree (0: all ranks at one switch)
  bool fromTopology = false;  // the topology's own switch nodes describe it: keep their figures
  std::string where;          // "127.0.0.1:7000", for explanations
};
// Figures from TRIB_SWITCH_BW / TRIB_SWITCH_LAT (defaults: docs/SWITCH.md's measurement).
Status attachedSwitchFromEnv(AttachedSwitch* out);

// The topology node of each rank, by where the call's buffers live. Empty device: the topology's
// rankNodes() in order; empty host: hostNodesOf(device).
struct RankNodes {
  std::vector<int> device;  // device-memory calls: GPUs (CPUs on a machine without)
  std::vector<int> host;    // host-memory calls: CPUs; more ranks than CPUs share them round-robin
};
// Where the process of each device-placed rank keeps host memory: its GPU's nearest CPU (a CPU
// stays itself). GPUs that reach no CPU are left out.
std::vector<int> hostNodesOf(const Topology& topo, const std::vector<int>& device);

class Planner {
 public:
  explicit Planner(Topology topo, RankNodes nodes = {}, CostConstants k = CostConstants::defaults());
  Status setOverrides(const std::string& algoSpec, const std::string& tuneSpec,
                      const std::string& protoSpec = "");
  Status setOverridesFromEnv();  // TRIB_ALGO, TRIB_TUNE, TRIB_PROTO

  // The plan for a request (cached). Never fails: with no eligible algorithm it returns the first
  // executable one that supports the request, and says so in why.
  Plan choose(const PlanRequest& req);
  // Every candidate with its prediction, cheapest eligible first.
  std::vector<Candidate> explain(const PlanRequest& req);
  // Sizes (bytes) in [lo, hi] where the choice changes, with the algorithms on either side.
  struct Crossover {
    uint64_t bytes;
    PlanAlgo from, to;
    Protocol fromProtocol = Protocol::Simple, toProtocol = Protocol::Simple;
  };
  std::vector<Crossover> crossovers(PlanRequest req, uint64_t lo, uint64_t hi);
  // Tells the planner that a switch is attached (switch plans become executable and are
  // predicted from its figures); clears the caches.
  void setAttachedSwitch(const AttachedSwitch& sw);
  bool hasAttachedSwitch() const;
  // The shape of the ranks' domains (hosts for host memory): for attaching slice groups.
  void domainShape(int nranks, MemoryKind memory, int* domains, int* perDomain, bool* uniform);
  const Topology& topology() const { return topo_; }
  // Topology node per rank for calls on `memory` (the first nranks; host placements repeat).
  std::vector<int> rankNodes(MemoryKind memory, int nranks) const;
  const FabricView& fabric(int nranks, MemoryKind memory);
  const CostConstants& constants() const { return k_; }

 private:
  std::vector<Candidate> explainLocked(const PlanRequest& req);
  const TuneRule* tuneRuleFor(const PlanRequest& req) const;  // the last matching TRIB_TUNE rule
  // The placement for `memory`: host placements may repeat nodes (ranks share a CPU); device
  // placements hold one rank per node.
  static bool onHost(MemoryKind memory) { return memory != MemoryKind::Device; }
  const std::vector<int>& placement(MemoryKind memory) const;
  Topology topo_;
  RankNodes nodes_;
  CostConstants k_;
  AlgoFilter filter_;
  std::string algoSpec_;                            // the TRIB_ALGO text filter_ came from, for messages
  uint32_t protocols_ = (1u << kNumProtocols) - 1;  // TRIB_PROTO: a bit per Protocol
  std::string protoSpec_;
  std::vector<TuneRule> tune_;
  std::unique_ptr<Router> router_;
  std::unordered_map<int, FabricView> fabrics_[2];  // by nranks: [0] device, [1] host placement
  mutable std::mutex mu_;
  std::unordered_map<std::string, Plan> cache_;
  bool attached_ = false;
  AttachedSwitch sw_;
};

// Text of explain() as trib-plan prints it (also what TRIB_DEBUG_SUBSYS=TUNING logs).
std::string formatExplain(const PlanRequest& req, const std::vector<Candidate>& cands);
std::string formatBytes(uint64_t b);  // "1 GiB", "64 MiB", "8 B"

}  // namespace trib
