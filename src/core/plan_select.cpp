// The communicator's planner: built once at init from the topology (TRIB_TOPO_FILE, or this
// machine's, merged across hosts), then asked per call which schedule to run.
#include <map>
#include <mutex>

#include "common/env.hpp"
#include "common/log.hpp"
#include "core/comm.hpp"
#include "core/stream_coll.hpp"
#include "core/switch_coll.hpp"
#include "plan/planner.hpp"
#include "topo/topology.hpp"

namespace trib {

namespace {

// Detection reads /sys and, with a GPU, NVML: do it once per process (per TRIB_TOPO_FILE).
Status localTopology(Topology* out) {
  static std::mutex mu;
  static bool done = false;
  static Status status;
  static Topology topo;
  static std::string file;  // TRIB_TOPO_FILE it was read from: a changed variable reads again
  std::lock_guard<std::mutex> lock(mu);
  const std::string now = envString("TRIB_TOPO_FILE");
  if (!done || now != file) {
    status = topologyFromEnv(&topo);
    file = now;
    done = true;
  }
  *out = topo;
  return status;
}

}  // namespace

Status localTopologyDump(std::string* out) {
  Topology topo;
  TRIB_RETURN_IF_ERROR(localTopology(&topo));
  *out = dumpTopology(topo);
  return Status::Ok();
}

RankNodes placeRanks(const Topology& topo, const RankPlacement& placement, bool merged) {
  // Each rank sits on one of its host's rank nodes (GPUs, else CPUs), by local rank; its host
  // memory on that node's nearest CPU.
  const int nranks = static_cast<int>(placement.hostOfRank.size());
  const std::vector<int>& nodes = topo.rankNodes();
  if (nodes.empty()) return {};
  std::vector<int> rankToNode(nranks, -1);
  std::map<int, std::vector<int>> byHost;  // host index -> its rank nodes
  for (int node : nodes) {
    const std::string& name = topo.node(node).name;
    int host = 0;
    if (merged && name.size() > 1 && name[0] == 'h') host = std::atoi(name.c_str() + 1);
    byHost[host].push_back(node);
  }
  for (int r = 0; r < nranks; ++r) {
    int host = merged ? placement.hostOfRank[r] : 0;
    const std::vector<int>& mine = byHost.count(host) ? byHost[host] : nodes;
    rankToNode[r] = mine[static_cast<size_t>(placement.localRankOf[r]) % mine.size()];
  }
  std::vector<int> host = hostNodesOf(topo, rankToNode);
  return RankNodes{std::move(rankToNode), std::move(host)};
}

Status makePlanner(const RankPlacement& placement, const std::vector<std::string>& hostDumps,
                   const CommConfig& config, std::shared_ptr<Planner>* out) {
  Topology topo;
  const bool merged = hostDumps.size() > 1 && envString("TRIB_TOPO_FILE").empty();
  if (merged) {
    // Network figures for the join between hosts: the topology file is the way to give real
    // ones; this default is one 100 GB/s (800 Gb/s) NIC per host.
    TRIB_RETURN_IF_ERROR(mergeHostTopologies(hostDumps, 100.0, 5.0, &topo).prefix("planner: "));
  } else {
    TRIB_RETURN_IF_ERROR(localTopology(&topo).prefix("planner: topology: "));
  }
  // The executor has no PXN relay (a proxy on the GPU of another rail): its plans are priced over
  // the routes it runs, each GPU through its own NIC, whatever a topology file says.
  topo.pxn = false;
  RankNodes nodes = placeRanks(topo, placement, merged);
  auto planner = std::make_shared<Planner>(std::move(topo), std::move(nodes));
  TRIB_RETURN_IF_ERROR(planner->setOverrides(config.algo, envString("TRIB_TUNE"), envString("TRIB_PROTO"))
                           .prefix("TRIB_ALGO / TRIB_TUNE / TRIB_PROTO / config.algo: "));
  *out = std::move(planner);
  return Status::Ok();
}

CollectiveOffload* offloadFor(const Communicator* comm, Algo algo) {
  switch (algo) {
    case Algo::Switch:
      return comm->switchOffload.get();
    case Algo::HierSwitch:
      return comm->sliceOffload.get();
    default:
      return nullptr;
  }
}

// FNV-1a of what every rank of one call shares (not its buffers, nor whether it runs in place).
static uint32_t callFingerprint(const CollCall& call, Algo algo) {
  const uint64_t fields[] = {
      static_cast<uint64_t>(call.coll),  static_cast<uint64_t>(algo),    call.count,
      static_cast<uint64_t>(call.dtype), static_cast<uint64_t>(call.op), static_cast<uint64_t>(call.root)};
  uint64_t h = 1469598103934665603ull;
  for (uint64_t f : fields) h = (h ^ f) * 1099511628211ull;
  return static_cast<uint32_t>(h ^ (h >> 32));
}

PeerWindows* callWindows(const Communicator* comm, const CollCall& call) {
  if (callMemoryKind(call) != MemoryKind::Device) return comm->windows;
  PeerWindows* w = comm->deviceWindows;
  return w && comm->streams && w->device() == comm->streams->device ? w : nullptr;
}

void setWindowArgs(const Communicator* comm, const CollCall& call, CollArgs* a) {
  PeerWindows* w = callWindows(comm, call);
  a->windowElems = w ? w->windowBytes() / dataTypeSize(call.dtype) : 0;
  a->windowCell = w && w == comm->deviceWindows ? comm->deviceWindowCell : comm->windowCell;
}

void attachRunResources(Communicator* comm, const CollCall& call, const CollArgs& args, Algo algo,
                        ExecOptions* opts) {
  opts->nranks = comm->nranks;
  opts->offload = offloadFor(comm, algo);
  if (!needsWindows(algo)) return;
  opts->windows = callWindows(comm, call);
  const bool device = opts->windows && opts->windows == comm->deviceWindows;
  opts->windowWrites = device ? nullptr : &comm->windowWrites;  // streaming stores are the CPU's
  opts->callFingerprint = callFingerprint(call, algo);
  int& cell = device ? comm->deviceWindowCell : comm->windowCell;
  cell = static_cast<int>((cell + windowChunks(algo, args)) % 2);
}

Status chooseAlgorithm(const Communicator* comm, const CollCall& call, CollArgs* args, const AlgoInfo** out,
                       ChoiceFor purpose) {
  const size_t elemSize = dataTypeSize(call.dtype);
  PlanRequest req;
  req.coll = args->coll;
  req.dtype = call.dtype;  // slices are cut in elements of this size; switches reduce only some
  req.op = call.op;
  req.memory = callMemoryKind(call);
  req.nranks = args->nranks;
  req.root = args->root;
  req.inPlace = false;  // in-place-ness may differ between ranks; the choice must not
  // The planner knows the attached switch (attachSwitch told it); this communicator may have
  // given it up since (failover) -- the same on every rank, so the choice stays the same.
  const bool hostOnly = purpose == ChoiceFor::SwitchAgreement;
  // Device memory runs over the device windows where every rank's is mapped (nvlink), else over
  // transports (staged through host memory where they cannot reach it); the host windows are
  // host memory a kernel cannot read, and the switch client takes host buffers.
  const bool device = req.memory == MemoryKind::Device;
  PeerWindows* const callWin = callWindows(comm, call);
  const bool windows = callWin != nullptr;
  req.switchDown = hostOnly || device || !switchUsable(comm);
  req.sliceStride = !hostOnly && !device && sliceUsable(comm) ? comm->sliceStride : 0;
  // One-shot takes what fits in one window cell; two-shot any size, a cell at a time.
  req.oneShotBytes = windows ? callWin->windowBytes() / 2 / elemSize * elemSize : 0;
  req.remoteWindows = windows && callWin->remote();
  switch (args->coll) {
    case Coll::AllGather:
    case Coll::ReduceScatter:
    case Coll::AlltoAll:
    case Coll::Gather:
    case Coll::Scatter:
      req.bytes = args->count * elemSize * static_cast<uint64_t>(args->nranks);
      break;
    default:
      req.bytes = args->count * elemSize;
  }
  Plan plan = comm->planner->choose(req);
  const AlgoInfo* algo = findAlgorithm(args->coll, plan.scheduleAlgo());
  args->ranksPerDomain = plan.ranksPerDomain;
  args->chunkElems = comm->config.chunkBytes ? std::max<uint64_t>(1, comm->config.chunkBytes / elemSize)
                                             : std::max<uint64_t>(1, plan.chunkElems);
  // Offload plans need their offload: an attached switch (and hier_switch its slice groups for
  // these domains); peer-memory plans every rank's window. The planner only offers them then;
  // this guards against drift (supports() below checks that the call fits the window).
  const bool offloadMissing = (algo && needsOffload(algo->algo) && device) ||
                              (algo && algo->algo == Algo::Switch && !switchUsable(comm)) ||
                              (algo && algo->algo == Algo::HierSwitch &&
                               (!sliceUsable(comm) || args->ranksPerDomain != comm->sliceStride)) ||
                              (algo && needsWindows(algo->algo) && !windows);
  if (!algo || !executorRuns(*algo, *args) || offloadMissing) {
    // The planner only offers executable algorithms; this guards against a model/registry drift.
    algo = nullptr;
    for (const AlgoInfo* a : algorithmsFor(args->coll)) {
      if (!algo && executorRuns(*a, *args) && !needsOffload(a->algo) && (!needsWindows(a->algo) || windows))
        algo = a;
    }
    if (!algo) {
      return errorf(tribInternalError, "no algorithm supports %s on %d ranks", collName(args->coll),
                    args->nranks);
    }
    // The cost model covers fewer collectives than the registry (barrier, say): then the
    // registry's first algorithm that runs the request is the choice.
    TRIB_INFO("tuning", "planner has no runnable %s for %s; using %s", algoName(plan.scheduleAlgo()),
              collName(args->coll), algoName(algo->algo));
  }
  if (!plan.overrideUnmet.empty() && purpose != ChoiceFor::SwitchAgreement) {
    // A forced algorithm that cannot run must not pass unnoticed. Strict: the call fails (on every
    // rank alike: the choice depends only on what all ranks share).
    if (comm->config.algoStrict && purpose == ChoiceFor::Call) {
      return errorf(tribInvalidUsage, "%s; TRIB_ALGO_STRICT=1 refuses to run %s instead",
                    plan.overrideUnmet.c_str(), algoName(algo->algo));
    }
    const uint32_t bit = 1u << static_cast<int>(args->coll);
    if (!(comm->forcedAlgoWarned.fetch_or(bit) & bit)) {
      TRIB_WARN("tuning",
                "rank %d: %s; running %s instead (warned once per communicator and collective; "
                "TRIB_ALGO_STRICT=1 makes it an error)",
                comm->rank, plan.overrideUnmet.c_str(), algoName(algo->algo));
    }
  }
  *out = algo;
  return Status::Ok();
}

}  // namespace trib
