// Simulator: runs the real schedules (the registry's Generator<Step> per rank, what the executor
// runs) on a modelled network and predicts time, algbw, busbw and the busiest links.
//
// Model (docs/PLANNER.md): every directed link is a server of its bandwidth x efficiency (the cost
// model's constants); a message occupies each link on its route in turn, cut-through, queueing behind
// messages already on it. Each rank runs its steps as a dataflow: a step starts when the regions it
// touches are ready (as the executor overlaps steps whose regions do not conflict), looking up to a
// window of blocked steps ahead. Sends depart after a per-step software overhead; receives that reduce
// are fused with the transfer (cost only where the reducer is slower than the link).
// Peer-memory steps: Put/Get/GetReduce move data over the route between the rank and the window's
// owner (one-sided: no software step); between processes of one host they are work in memory on the
// rank's own core at the cache-resident rate. Signal is a small message (latency only); Wait ends
// when the matching signal arrives; both order window steps as schedule.hpp's rule says.
// SwitchReduce is a rendezvous of its group (every rank, or a slice group): once all have arrived,
// every member's data streams up the aggregation tree, which reduces it, and the result back down.
// Nvls/NvlsSwitch/NvlsRing have no schedule yet: simulateInNetwork models them directly.
#pragma once
#include <string>
#include <vector>

#include "algo/schedule.hpp"
#include "plan/cost_model.hpp"
#include "topo/topology.hpp"

namespace trib {

struct SimOptions {
  int window = 0;    // blocked steps a rank may look past (executor's overlap); 0 = by rank count
  int topLinks = 5;  // busiest links to report
  CostConstants k = CostConstants::defaults();
  // Nvls/NvlsSwitch/NvlsRing: simulate one domain per class of identical domains (exact; see NvlsSim in
  // sim.cpp). false: every domain, the reference the reduction is tested against.
  bool symmetry = true;
  // simulate() refuses (tribNotSupported, naming its estimate) a replay estimated to need more
  // memory than this; 0: the address-space limit (ulimit -v) or the machine's memory.
  double memoryLimitBytes = 0;
  // Point-to-point messages spread over a route's equal-cost links (a fat tree's spine bundles)
  // evenly, as adaptive routing and packet spraying do (docs/PLANNER.md); false: each (source,
  // destination) pair on the one hashed path of the Router (static ECMP).
  bool spreadRoutes = true;
  // How a rank's source link (its first hop: NIC, NVLink port) orders the messages waiting for it
  // (docs/PLANNER.md "Simulator"). Channels (default): each of the schedule's channels
  // (Step::channel, AlgoInfo::channels; the double tree's two trees) is one stream that leaves in
  // posting order, and the channels take the link round robin, a message at a time, as NCCL's
  // channels (each with its own connections and progress) share a NIC and the executor's channels
  // in flight would; a one-channel schedule is replayed exactly as in posting order, and the cost
  // model's terms are derived against this order (the tree's for two channels). Posting: one queue
  // in posting order, kept for comparison (a leaf's whole stream then holds its link ahead of the
  // other tree). Peers: round robin over (source, destination) pairs, each pair in order (a queue
  // pair per peer, every send posted as soon as its data are there).
  enum class LinkOrder : uint8_t { Posting, Channels, Peers };
  LinkOrder linkOrder = LinkOrder::Channels;
  // Replay only ranks [replayFirst, replayFirst + replayRanks) of the n-rank schedule (0: every
  // rank): a message to a rank outside is carried over the route to that rank's node and
  // delivered to the rank a multiple of replayRanks away inside, as if from the sender so shifted.
  // A quotient by the shift of replayRanks ranks: it equals the full replay only where the schedule
  // and the topology are invariant under that shift (simulatePlanned checks and picks it; point-to-
  // point steps only). replayRanks must divide n.
  int replayFirst = 0, replayRanks = 0;
  // A rank's links carry at most this, each way (GB/s; 0: their rates): a protocol's ceiling on
  // what a rank moves (rankCeilingGBps in plan/cost_model.hpp: LL's), as the model caps its rates.
  double rankCeilingGBps = 0;
};

struct LinkLoad {
  std::string name;  // "r0.gpu3 -> r0.nvsw (nvlink)"
  double bytes = 0;
  double busyUs = 0;
  double utilization = 0;  // busy / total time
};

struct SimResult {
  double timeUs = 0;
  double algbwGBps = 0, busbwGBps = 0;
  uint64_t steps = 0, messages = 0;
  double wallSeconds = 0;  // how long the simulation itself took
  // Nvls/NvlsSwitch/NvlsRing: the NVLink domains, and those run (one per class of identical domains).
  size_t domains = 0, simulatedDomains = 0;
  // A schedule replayed on a quotient (SimOptions::replayRanks; sim_plan.hpp): the ranks replayed,
  // the lower bound where timeUs is an upper one (0: timeUs is exact), and why it is sound.
  int replayedRanks = 0;
  double timeLowUs = 0;
  std::string reduction;
  std::vector<LinkLoad> busiest;
  // Schedules replayed rank by rank: when each replayed rank's last step ended, launch included
  // (rank rankEndFirst + i for entry i); empty for the in-network models. Which rank paces the call.
  std::vector<double> rankEndUs;
  int rankEndFirst = 0;
};

// Simulates `algo` for args on the topology; rankToNode[r] is rank r's node (default: rankNodes()).
// dtype sets the byte size of elements.
Status simulate(const Topology& t, const AlgoInfo& algo, const CollArgs& args, DataType dtype, SimResult* out,
                const std::vector<int>& rankToNode = {}, const SimOptions& opt = {});
// Nvls (the domain's NVSwitch), NvlsSwitch (NVLS in each domain + switch reduction across) and
// NvlsRing (NVLS in each domain + a ring of each GPU's slice across) all-reduce, modelled without a
// schedule. Switch and HierSwitch have schedules: use simulate().
Status simulateInNetwork(const Topology& t, PlanAlgo algo, const CollArgs& args, DataType dtype,
                         SimResult* out, const std::vector<int>& rankToNode = {}, const SimOptions& opt = {});

}  // namespace trib
