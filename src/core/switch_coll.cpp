#include "core/switch_coll.hpp"

#include <algorithm>

#include "common/env.hpp"
#include "common/log.hpp"
#include "transports/switch/switch_client.hpp"

namespace trib {

struct SwitchRun {
  enum Phase { Switch, Agree, Fallback } phase = Switch;
  CollCall call;
  CollArgs args;
  uint32_t agreeSeq = 0, fallbackSeq = 0;
  int32_t flagIn = 1, flagOut = 0;  // agreement: 1 = "my switch phase succeeded"
  std::vector<char> fallbackScratch;
  uint64_t avgDivisor = 0;  // op avg: what the launch set (the fallback finishes the same way)
  Region avgRegion;
  Status switchError;
};

namespace {

void attachOne(tribComm* comm, const std::string& addr) {
  sw::SwitchClientConfig cfg;
  cfg.address = addr;
  // The switch is a standing service with its own key; by default the job's key.
  cfg.key = envString("TRIB_SWITCH_KEY");
  if (cfg.key.empty()) cfg.key = envString("TRIB_AUTH_KEY");
  cfg.group = comm->commId;
  cfg.path = {{static_cast<uint32_t>(comm->nranks), static_cast<uint32_t>(comm->rank)}};
  cfg.slots = static_cast<uint32_t>(std::clamp<int64_t>(envInt("TRIB_SWITCH_SLOTS"), 1, 1 << 20));
  // A switch is a standing service: if it does not answer within a second, plan without it
  // rather than delay every communicator's creation.
  cfg.timeoutMs = static_cast<int>(std::min<int64_t>(comm->config.timeout.count(), 1000));
  std::unique_ptr<sw::SwitchClient> client;
  Status s = sw::SwitchClient::connect(cfg, &client);
  if (!s.ok()) {
    TRIB_SWITCH_WARN(
        "rank %d: not using the aggregation switch (TRIB_SWITCH=%s): %s; collectives run on host "
        "algorithms",
        comm->rank, addr.c_str(), s.message().c_str());
    comm->switchDisabled = true;
    return;
  }
  TRIB_SWITCH_INFO("rank %d: aggregation switch %s, %u slots of %llu bytes", comm->rank, addr.c_str(),
                   client->quota(), static_cast<unsigned long long>(client->slotBytes()));
  comm->switchOffload = std::move(client);
}

// A rank that attached drops the switch because another did not (one WARN, then host algorithms).
void giveUp(tribComm* comm, const std::string& why) {
  if (comm->switchOffload) {
    TRIB_SWITCH_WARN("rank %d: not using the aggregation switch: %s; collectives run on host algorithms",
                     comm->rank, why.c_str());
    comm->switchOffload->abort(errorf(tribAborted, "the ranks did not all attach to the switch"));
    comm->switchOffload.reset();
  }
  comm->switchDisabled = true;
}

}  // namespace

void attachSwitch(tribComm* comm, const OobAllGather& agree) {
  const std::string addr = envString("TRIB_SWITCH");
  if (addr.empty()) return;
  attachOne(comm, addr);
  if (!agree) return;
  std::vector<uint8_t> mine{static_cast<uint8_t>(comm->switchOffload ? 1 : 0)};
  std::vector<std::vector<uint8_t>> all;
  Status s = agree(mine, all);
  int missing = -1;
  for (size_t r = 0; r < all.size() && missing < 0; ++r) {
    if (all[r].size() != 1 || all[r][0] != 1) missing = static_cast<int>(r);
  }
  if (s.ok() && missing < 0) return;
  giveUp(comm, s.ok() ? strprintf("rank %d could not attach to it", missing) : s.message());
}

void agreeSwitchLocal(tribComm** comms, int n) {
  int missing = -1;
  for (int r = 0; r < n && missing < 0; ++r) {
    if (!comms[r]->switchOffload) missing = r;
  }
  if (missing < 0) return;
  for (int r = 0; r < n; ++r) giveUp(comms[r], strprintf("rank %d could not attach to it", missing));
}

bool switchUsable(const tribComm* comm) { return comm->switchOffload && !comm->switchDisabled; }

bool switchTraffic(const tribComm* comm, uint64_t* sent, uint64_t* received) {
  auto* c = dynamic_cast<const sw::SwitchClient*>(comm->switchOffload.get());
  if (!c) return false;
  *sent = c->stats().payloadSent;
  *received = c->stats().payloadRecv;
  return true;
}

void prepareSwitchRun(tribComm* comm, const CollCall& call, const CollArgs& args, tribRequest* req,
                      ExecOptions* opts) {
  auto run = std::make_shared<SwitchRun>();
  run->call = call;
  run->args = args;
  run->agreeSeq = comm->collSeq++ & ~kP2pSeqBit;
  run->fallbackSeq = comm->collSeq++ & ~kP2pSeqBit;
  run->avgDivisor = opts->avgDivisor;
  run->avgRegion = opts->avgRegion;
  req->switchRun = std::move(run);
  opts->offload = comm->switchOffload.get();
  opts->coll = args.coll;
  opts->root = args.root;
  opts->nranks = args.nranks;
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
  tribComm* comm = req->comm;
  SwitchRun& run = *req->switchRun;
  *done = false;
  switch (run.phase) {
    case SwitchRun::Switch: {
      run.flagIn = result.ok() ? 1 : 0;
      if (!result.ok()) {
        run.switchError = result;
        // Leave the group: the switch fails it for every member, so nobody waits for us.
        if (comm->switchOffload) comm->switchOffload->abort(result);
      }
      // In place, where the switch writes over the input, the switch schedule first copied it
      // to scratch (its only use of scratch); the fallback needs it. Elsewhere the input is intact.
      const bool inputSaved = run.args.inPlace && !req->scratch.empty() && req->exec->stepDone(0);
      if (inputSaved) {
        run.call.sendbuff = req->scratch.data();
        run.args.inPlace = false;
      }
      run.phase = SwitchRun::Agree;
      const AlgoInfo* ring = findAlgorithm(Coll::AllReduce, Algo::Ring);
      CollArgs a;
      a.coll = Coll::AllReduce;
      a.nranks = comm->nranks;
      a.count = 1;
      a.chunkElems = 1;
      auto steps = std::make_shared<const std::vector<Step>>(materialize(*ring, a, comm->rank));
      ExecOptions o;
      o.dtype = tribInt32;
      o.op = tribMin;
      o.seq = run.agreeSeq;
      o.rank = comm->rank;
      ExecBuffers b{&run.flagIn, &run.flagOut, nullptr, 1, 1, 0};
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
        TRIB_SWITCH_WARN(
            "rank %d: the aggregation switch failed during %s (%s); this communicator stops "
            "using it and finishes on a host algorithm",
            comm->rank, req->what().c_str(), why.c_str());
        comm->switchDisabled = true;
        comm->planCache.clear();  // cached switch plans must not be reused
        if (comm->switchOffload) comm->switchOffload->abort(errorf(tribAborted, "the switch was given up"));
      }
      run.phase = SwitchRun::Fallback;
      const size_t es = dataTypeSize(run.call.dtype);
      const AlgoInfo* algo = nullptr;
      TRIB_RETURN_IF_ERROR(chooseAlgorithm(comm, &run.args, es, &algo));
      auto steps = std::make_shared<const std::vector<Step>>(materialize(*algo, run.args, comm->rank));
      run.fallbackScratch.resize(algo->scratchCount(run.args, comm->rank) * es);
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
      o.avgDivisor = run.avgDivisor;  // the same output region as the switch phase's
      o.avgRegion = run.avgRegion;
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
