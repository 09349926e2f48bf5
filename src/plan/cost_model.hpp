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
};
constexpr int kNumPlanAlgos = 14;
const char* planAlgoName(PlanAlgo a);                     // "ring", ..., "nvls_switch"
bool parsePlanAlgo(const std::string& s, PlanAlgo* out);  // also accepts "sharp" = switch
Algo toScheduleAlgo(PlanAlgo a);                          // Nvls, NvlsSwitch -> Algo::Switch

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
  static const CostConstants& defaults();
};

// The facts about (topology, first n ranks) the formulas need; computed once per rank count.
struct FabricView {
  int n = 1;
  int domains = 1;           // NVLink domains (or hosts on a CPU-only machine) holding the ranks
  int perDomain = 1;         // ranks in the smallest domain
  bool uniform = true;       // all domains the same size and ranks contiguous by domain
  double bwIntra = 0;        // GB/s, effective, between two ranks of a domain (0 if perDomain == 1)
  double latIntraUs = 0;     // per step, overheads included
  double bwInter = 0;        // GB/s, effective, one flow between domains
  double bwInterLoaded = 0;  // GB/s per rank when every rank of a domain talks across at once
  double latInterUs = 0;
  double reduceGBps = 0;  // a rank's local reduction throughput
  // Double binary tree (algo/tree.cpp): edges of the busiest rank inside its domain and across
  // domains (each edge carries S/2 each way), and the most cross-domain edges of one host's ranks,
  // which share its NICs (hostEgressGBps, effective).
  int treeEdgesIn = 0, treeEdgesOut = 0, treeHostEdgesOut = 0;
  double treePathUs = 0;  // the costliest path from a rank to its tree's root (per-step latencies)
  // The two trees rank by rank, for the timing of the tree's first and last slices (cost_model.cpp,
  // treeAllReduceUs; docs/PLANNER.md "The tree under two channels"): per tree each rank's parent and
  // children (-1: none) and the ranks deepest first (every child before its parent); each rank's
  // domain. Shared, so that copying the view (the planner does per request) copies none of it.
  struct TreeShape {
    std::vector<std::array<int, 3>> node[2];  // parent, child 0, child 1
    std::vector<int> order[2];
    std::vector<int> domain;
  };
  std::shared_ptr<const TreeShape> treeShape;
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
  std::string summary;     // one line: "4608 ranks in 64 domains of 72; intra 740 GB/s 3.5 us; ..."
};
FabricView computeFabric(const Topology& t, Router& router, const std::vector<int>& rankNodes,
                         const CostConstants& k);

struct Prediction {
  bool supported = false;
  std::string reason;  // when unsupported: why; else a short formula note
  double us = 0;
  uint64_t chunkBytes = 0;
};
// Predicted time for algorithm a on a request (bytes = nccl-tests S; see PlanRequest).
Prediction predict(PlanAlgo a, Coll coll, uint64_t bytes, DataType dtype, RedOp op, const FabricView& f,
                   const CostConstants& k);

}  // namespace trib
