#include "core/switch_coll.hpp"

#include <algorithm>
#include <numeric>

#include "common/env.hpp"
#include "common/log.hpp"
#include "plan/planner.hpp"
#include "topo/route.hpp"
#include "transports/registry.hpp"

namespace trib {

struct SwitchRun {
  enum Phase { Switch, Agree, Fallback } phase = Switch;
  CollCall call;
  CollArgs args;
  uint32_t agreeSeq = 0, fallbackSeq = 0;
  int32_t flagIn = 1, flagOut = 0;         // agreement: 1 = "my switch phase succeeded"
  Scratch agreeScratch, fallbackScratch;   // from the communicator's pool
  std::shared_ptr<Scratch> switchScratch;  // the switch phase's, once it is over (above)
  uint64_t avgDivisor = 0;                 // op avg: what the launch set (the fallback finishes the same way)
  Region avgRegion;
  Status switchError;
};

namespace {

// Where rank `r` attaches: where this process's environment says (TRIB_SWITCH), else the address
// (addr=) of the first switch above the rank's node in the planner's topology. "" = no switch.
std::string leafAddress(const Communicator* comm, const OffloadDescriptor& offload, int r) {
  std::string addr = offload.configuredAddress();
  if (!addr.empty() || !comm->planner) return addr;
  const Topology& t = comm->planner->topology();
  // The rank's GPU (its CPU without GPUs): the node whose NIC a multi-GPU host gives the rank.
  const std::vector<int> nodes = comm->planner->rankNodes(MemoryKind::Device, comm->nranks);
  if (nodes.empty()) return "";
  const int leaf = firstSwitchAbove(t, nodes[static_cast<size_t>(r) % nodes.size()], nullptr);
  return leaf >= 0 ? t.node(leaf).addr : std::string();
}

// Attaches to `leaves[index]` (through the registry's aggregation offload) and registers `group`
// with the path of member `index` among the members whose leaves are `leaves`. Null (and a WARN
// naming `what`) when the switch refuses.
std::unique_ptr<CollectiveOffload> connectGroup(const Communicator* comm, uint64_t group,
                                                const std::vector<std::string>& leaves, int index,
                                                const std::vector<int>& memberRanks, const char* what) {
  const OffloadDescriptor* offload = aggregationOffload();
  if (!offload) return nullptr;
  SwitchTree tree = switchTreeOf(leaves, index);
  OffloadAttachArgs args;
  args.address = leaves[index];
  args.group = group;
  args.path = tree.path;
  for (size_t m = 0; m < leaves.size(); ++m)  // the leaf's children, in child order
    if (leaves[m] == leaves[index]) args.leafRanks.push_back(memberRanks[m]);
  // A switch is a standing service: if it does not answer within TRIB_SWITCH_ATTACH_TIMEOUT (a
  // second by default), plan without it rather than delay every communicator's creation.
  const auto attachFor = std::chrono::milliseconds(
      std::max<int64_t>(1, static_cast<int64_t>(envDouble("TRIB_SWITCH_ATTACH_TIMEOUT") * 1000.0)));
  args.timeout = std::min(comm->config.timeout, attachFor);
  std::unique_ptr<CollectiveOffload> client;
  std::string granted;
  Status s = offload->attach(args, &client, &granted);
  if (!s.ok()) {
    TRIB_WARN("switch",
              "rank %d: not using the aggregation switch %s for %s: %s; those collectives run on host "
              "algorithms",
              comm->rank, args.address.c_str(), what, s.message().c_str());
    return nullptr;
  }
  TRIB_INFO("switch", "rank %d: aggregation switch %s for %s (%s), %s", comm->rank, args.address.c_str(),
            what, tree.describe().c_str(), granted.c_str());
  return client;
}

void attachOne(Communicator* comm, const std::vector<std::string>& leaves) {
  std::vector<int> ranks(leaves.size());
  std::iota(ranks.begin(), ranks.end(), 0);
  comm->switchOffload = connectGroup(comm, comm->commId, leaves, comm->rank, ranks, "the communicator");
  if (!comm->switchOffload) comm->switchDisabled = true;
}

uint64_t sliceGroupId(uint64_t commId, int slice) {  // splitmix64 of (id, slice): distinct, nonzero
  uint64_t x = commId + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(slice + 1);
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x ? x : 1;
}

// hier_switch's slice group: with equal, contiguous domains of d >= 2 ranks (hosts), the ranks
// with the same local index (rank mod d), one per domain, form a group of their own; its tree
// comes from those members' leaves, as the communicator's does.
void attachSlice(Communicator* comm, const std::vector<std::string>& leaves) {
  if (!comm->planner) return;
  int domains = 0, d = 0;
  bool uniform = false;
  // The switch reads host memory: its slices follow the host placement's domains.
  comm->planner->domainShape(comm->nranks, MemoryKind::Host, &domains, &d, &uniform);
  if (domains < 2 || d < 2 || !uniform || comm->nranks % d != 0) return;
  std::vector<std::string> memberLeaves;
  std::vector<int> memberRanks;
  for (int q = comm->rank % d; q < comm->nranks; q += d)
    memberLeaves.push_back(leaves[q]), memberRanks.push_back(q);
  comm->sliceOffload = connectGroup(comm, sliceGroupId(comm->commId, comm->rank % d), memberLeaves,
                                    comm->rank / d, memberRanks, "hier_switch slices");
  if (comm->sliceOffload) comm->sliceStride = d;
}

void dropSlice(Communicator* comm) {
  if (comm->sliceOffload) comm->sliceOffload->abort(errorf(tribAborted, "the slice groups were given up"));
  comm->sliceOffload.reset();
  comm->sliceStride = 0;
}

// The planner learns the switch: its figures (TRIB_SWITCH_BW / _LAT) and the tree's shape.
void tellPlanner(Communicator* comm, const std::vector<std::string>& leaves) {
  if (!comm->planner) return;
  AttachedSwitch sw;
  Status s = attachedSwitchFromEnv(&sw);
  if (!s.ok())
    TRIB_WARN("switch", "rank %d: %s; the planner uses the defaults", comm->rank, s.message().c_str());
  SwitchTree tree = switchTreeOf(leaves, comm->rank);
  sw.tiers = static_cast<int>(tree.path.size());
  sw.fanIn = tree.fanIn;
  sw.where = leaves[comm->rank];
  sw.fromTopology = aggregationOffload()->configuredAddress().empty();
  comm->planner->setAttachedSwitch(sw);
}

// A rank that attached drops the switch because another did not (one WARN, then host algorithms).
void giveUp(Communicator* comm, const std::string& why) {
  if (comm->switchOffload) {
    TRIB_WARN("switch", "rank %d: not using the aggregation switch: %s; collectives run on host algorithms",
              comm->rank, why.c_str());
    comm->switchOffload->abort(errorf(tribAborted, "the ranks did not all attach to the switch"));
    comm->switchOffload.reset();
  }
  dropSlice(comm);
  comm->switchDisabled = true;
}

}  // namespace

SwitchTree switchTreeOf(const std::vector<std::string>& leaves, int rank) {
  SwitchTree t;
  std::vector<std::string> distinct;
  std::vector<uint32_t> members;
  uint32_t mine = 0, leafIndex = 0;
  for (int r = 0; r < static_cast<int>(leaves.size()); ++r) {
    auto it = std::find(distinct.begin(), distinct.end(), leaves[r]);
    const size_t li = static_cast<size_t>(it - distinct.begin());
    if (it == distinct.end()) distinct.push_back(leaves[r]), members.push_back(0);
    if (r == rank) mine = members[li], leafIndex = static_cast<uint32_t>(li);
    ++members[li];
  }
  if (rank < 0 || rank >= static_cast<int>(leaves.size())) return t;
  t.path.push_back({members[leafIndex], mine});
  if (distinct.size() > 1) t.path.push_back({static_cast<uint32_t>(distinct.size()), leafIndex});
  t.fanIn =
      static_cast<int>(std::max<size_t>(distinct.size(), *std::max_element(members.begin(), members.end())));
  t.leaves = static_cast<int>(distinct.size());
  return t;
}

std::string SwitchTree::describe() const {
  std::string s;
  for (size_t i = 0; i < path.size(); ++i)
    s += strprintf("%slevel %zu: child %u of %u", i ? ", " : "", i, path[i].second, path[i].first);
  return s;
}

void attachSwitch(Communicator* comm, const OobAllGather& agree) {
  const OffloadDescriptor* offload = aggregationOffload();
  if (!offload) return;
  const std::string mine = leafAddress(comm, *offload, comm->rank);
  if (mine.empty()) return;  // every rank of a job sets TRIB_SWITCH (or the topology names it), or none
  std::vector<std::string> leaves(comm->nranks, mine);
  if (agree) {
    // Every rank's leaf, so that ranks under one leaf are its children and the leaves are the
    // children of one spine (trib-switchd --parent).
    std::vector<std::vector<uint8_t>> all;
    Status s = agree(std::vector<uint8_t>(mine.begin(), mine.end()), all);
    if (!s.ok() || all.size() != leaves.size()) {
      giveUp(comm, s.ok() ? "the ranks' switch addresses did not arrive" : s.message());
      return;
    }
    for (size_t r = 0; r < all.size(); ++r) leaves[r].assign(all[r].begin(), all[r].end());
  } else {
    // In one process: TRIB_SWITCH is the same for all, or each rank's comes from the topology.
    for (int r = 0; r < comm->nranks; ++r) leaves[r] = leafAddress(comm, *offload, r);
  }
  int without = -1;
  for (int r = 0; r < comm->nranks && without < 0; ++r)
    if (leaves[r].empty()) without = r;
  if (without < 0) attachOne(comm, leaves);
  if (comm->switchOffload) attachSlice(comm, leaves);
  if (without >= 0) giveUp(comm, strprintf("rank %d has no switch (TRIB_SWITCH unset)", without));
  if (agree) {
    // Bit 0: attached; bit 1: slice group registered (hier_switch runs only if every rank has one).
    std::vector<uint8_t> ok{
        static_cast<uint8_t>((comm->switchOffload ? 1 : 0) | (comm->sliceOffload ? 2 : 0))};
    std::vector<std::vector<uint8_t>> all;
    Status s = agree(ok, all);
    int missing = -1, noSlice = -1;
    for (size_t r = 0; r < all.size(); ++r) {
      const int bits = all[r].size() == 1 ? all[r][0] : 0;
      if (!(bits & 1) && missing < 0) missing = static_cast<int>(r);
      if (!(bits & 2) && noSlice < 0) noSlice = static_cast<int>(r);
    }
    if (!s.ok() || missing >= 0) {
      giveUp(comm, s.ok() ? strprintf("rank %d could not attach to it", missing) : s.message());
      return;
    }
    if (noSlice >= 0) dropSlice(comm);
  }
  if (comm->switchOffload) tellPlanner(comm, leaves);
}

void agreeSwitchLocal(tribComm** comms, int n) {
  int missing = -1;
  for (int r = 0; r < n && missing < 0; ++r) {
    if (!comms[r]->impl()->switchOffload) missing = r;
  }
  if (missing < 0) {
    bool slices = true;
    for (int r = 0; r < n; ++r) slices &= comms[r]->impl()->sliceOffload != nullptr;
    if (!slices)
      for (int r = 0; r < n; ++r) dropSlice(comms[r]->impl());
    return;
  }
  for (int r = 0; r < n; ++r) giveUp(comms[r]->impl(), strprintf("rank %d could not attach to it", missing));
}

bool switchUsable(const Communicator* comm) { return comm->switchOffload && !comm->switchDisabled; }
bool sliceUsable(const Communicator* comm) {
  return switchUsable(comm) && comm->sliceOffload && comm->sliceStride >= 2;
}

bool switchTraffic(const Communicator* comm, uint64_t* sent, uint64_t* received) {
  if (!comm->switchOffload || !comm->switchOffload->payloadTraffic(sent, received)) return false;
  uint64_t s = 0, r = 0;
  if (comm->sliceOffload && comm->sliceOffload->payloadTraffic(&s, &r)) {
    *sent += s;
    *received += r;
  }
  return true;
}

void prepareSwitchRun(Communicator* comm, const CollCall& call, const CollArgs& args, Algo algo,
                      tribRequest* req, ExecOptions* opts) {
  auto run = std::make_shared<SwitchRun>();
  run->call = call;
  run->args = args;
  run->agreeSeq = comm->collSeq++ & ~kP2pSeqBit;
  run->fallbackSeq = comm->collSeq++ & ~kP2pSeqBit;
  run->avgDivisor = opts->avgDivisor;
  run->avgRegion = opts->avgRegion;
  req->switchRun = std::move(run);
  opts->offload = offloadFor(comm, algo);
  opts->coll = args.coll;
  opts->root = args.root;
  opts->nranks = args.nranks;
  opts->mayAbandon = true;  // a failed switch phase is given up with its host sends in flight
}

namespace {

// Starts `exec` as the request's current execution; if it finishes at once, advances again.
Status startPhase(tribRequest* req, std::unique_ptr<Execution> exec, bool* done) {
  req->exec = std::move(exec);
  Status st = req->exec->start();
  bool finished = false;
  if (st.ok() && req->exec->finished()) st = req->exec->progress(&finished);
  if (!st.ok() || finished) return advanceSwitchRun(req, st, done);
  *done = false;
  return Status::Ok();
}

}  // namespace

Status advanceSwitchRun(tribRequest* req, Status result, bool* done) {
  Communicator* comm = req->comm;
  SwitchRun& run = *req->switchRun;
  *done = false;
  switch (run.phase) {
    case SwitchRun::Switch: {
      run.flagIn = result.ok() ? 1 : 0;
      if (!result.ok()) {
        run.switchError = result;
        // Leave the group: the switch fails it for every member, so nobody waits for us.
        if (comm->switchOffload) comm->switchOffload->abort(result);
        if (comm->sliceOffload) comm->sliceOffload->abort(result);
      }
      // In place, where the switch writes over the input, the switch schedule first copied it
      // to scratch (its only use of scratch); the fallback needs it. Elsewhere the input is intact.
      const bool inputSaved = run.args.inPlace && !req->scratch.empty() && req->exec->stepDone(0);
      // The scratch is now shared: the fallback may read the saved input from it, and a kept
      // execution's posted operations may still point into it.
      run.switchScratch = std::make_shared<Scratch>(std::move(req->scratch));
      if (inputSaved) {
        run.call.sendbuff = run.switchScratch->data();
        run.args.inPlace = false;
      }
      run.phase = SwitchRun::Agree;
      // The switch schedule's host steps may still be posted, for peers that have not reached
      // them yet (hier_switch's intra-host ring): its sends copy their data aside, and the
      // execution outlives the transports, so nothing they hold points at freed memory.
      req->exec->detachPostedSends();
      // Only an execution whose operations a transport still holds must outlive it (after a
      // success, none does); those kept are dropped once their operations complete.
      std::erase_if(comm->abandonedExecs, [](const auto& e) { return !e.exec->holdsPostedOps(); });
      if (req->exec->holdsPostedOps())
        comm->abandonedExecs.push_back({std::move(req->exec), run.switchScratch});
      // Agreement: a min-all-reduce of one int32 flag on a host algorithm the planner picks (a
      // tree or recursive doubling at scale, not 2(n-1) ring steps; one-shot on one host).
      CollCall flag;
      flag.coll = Coll::AllReduce;
      flag.sendbuff = &run.flagIn;
      flag.recvbuff = &run.flagOut;
      flag.count = 1;
      flag.dtype = tribInt32;
      flag.op = tribMin;
      CollArgs a = argsFor(comm, flag);
      const AlgoInfo* algo = nullptr;
      TRIB_RETURN_IF_ERROR(chooseAlgorithm(comm, flag, &a, &algo, ChoiceFor::SwitchAgreement));
      auto steps = std::make_shared<const std::vector<Step>>(materialize(*algo, a, comm->rank));
      const uint64_t scratch = algo->scratchCount(a, comm->rank);
      TRIB_RETURN_IF_ERROR(comm->scratchPool.acquire(scratch * sizeof(int32_t), &run.agreeScratch));
      ExecOptions o;
      o.dtype = tribInt32;
      o.op = tribMin;
      o.seq = run.agreeSeq;
      o.rank = comm->rank;
      o.engine = comm->engine;
      attachRunResources(comm, flag, a, algo->algo, &o);  // one-shot's windows, when it is the choice
      ExecBuffers b{&run.flagIn, &run.flagOut, run.agreeScratch.data(), 1, 1, scratch};
      return startPhase(req, std::make_unique<Execution>(std::move(steps), b, comm->peers, o), done);
    }
    case SwitchRun::Agree: {
      if (!result.ok() || run.flagOut == 1) {
        *done = true;
        return result;  // success through the switch, or the host transports themselves failed
      }
      if (!comm->switchDisabled) {
        std::string why = run.switchError.ok() ? std::string("another rank's switch operation failed")
                                               : run.switchError.message();
        TRIB_WARN("switch",
                  "rank %d: the aggregation switch failed during %s (%s); this communicator stops "
                  "using it and finishes on a host algorithm",
                  comm->rank, req->what().c_str(), why.c_str());
        comm->switchDisabled = true;
        comm->clearPlans();  // cached switch plans must not be reused
        if (comm->switchOffload) comm->switchOffload->abort(errorf(tribAborted, "the switch was given up"));
        if (comm->sliceOffload) comm->sliceOffload->abort(errorf(tribAborted, "the switch was given up"));
      }
      run.phase = SwitchRun::Fallback;
      const size_t es = dataTypeSize(run.call.dtype);
      const AlgoInfo* algo = nullptr;
      // The agreement may have used a window cell since the call was launched.
      run.args.windowCell = comm->windowCell;
      TRIB_RETURN_IF_ERROR(chooseAlgorithm(comm, run.call, &run.args, &algo, ChoiceFor::Failover));
      auto steps = std::make_shared<const std::vector<Step>>(materialize(*algo, run.args, comm->rank));
      TRIB_RETURN_IF_ERROR(
          comm->scratchPool.acquire(algo->scratchCount(run.args, comm->rank) * es, &run.fallbackScratch));
      ExecBuffers b{run.call.sendbuff,
                    run.call.recvbuff,
                    run.fallbackScratch.data(),
                    inputCount(run.args, comm->rank),
                    outputCount(run.args, comm->rank),
                    algo->scratchCount(run.args, comm->rank)};
      ExecOptions o;
      o.dtype = run.call.dtype;
      o.op = run.call.op;
      o.seq = run.fallbackSeq;
      o.rank = comm->rank;
      o.engine = comm->engine;
      o.avgDivisor = run.avgDivisor;  // the same output region as the switch phase's
      o.avgRegion = run.avgRegion;
      attachRunResources(comm, run.call, run.args, algo->algo, &o);  // the fallback may use windows
      req->fallback = algoName(algo->algo);
      return startPhase(req, std::make_unique<Execution>(std::move(steps), b, comm->peers, o), done);
    }
    case SwitchRun::Fallback:
      *done = true;
      return result;
  }
  *done = true;
  return errorf(tribInternalError, "switch run in an unknown phase");
}

}  // namespace trib
