// Group calls and split (which needs an all-gather before it can build the new communicator).
#include "core/group.hpp"

#include <algorithm>
#include <thread>

#include "common/log.hpp"
#include "core/stream_coll.hpp"

namespace trib {

namespace {

struct PendingSplit {
  Communicator* parent;
  tribRequest* allgather;
  std::vector<int32_t> table;  // (color, key) of every rank, filled by the all-gather
  uint32_t splitSeq;
  int color;
  const tribConfig_t* config;
  tribComm** out;
};

// A call of the open group, launched at its end in call order.
struct GroupCall {
  enum class Kind { Collective, P2p, Split } kind = Kind::Collective;
  Communicator* comm = nullptr;
  CollCall call;        // Collective: validated, classified (a pre-multiplied sum rewritten)
  Scratch scaled;       // Collective: a pre-multiplied sum's scaled input, read until it is done
  bool isSend = false;  // P2p: the buffer, count, dtype and peer
  const void* buf = nullptr;
  int peer = -1;
  int color = 0, key = 0;  // Split: where the new communicator goes
  const tribConfig_t* config = nullptr;
  tribComm** out = nullptr;
};

struct GroupState {
  int depth = 0;
  std::vector<GroupCall> calls;
};
thread_local GroupState tGroup;

Status launchSplit(Communicator* comm, int color, int key, const tribConfig_t* cfg, tribComm** out,
                   std::unique_ptr<PendingSplit>* pending) {
  auto p = std::make_unique<PendingSplit>();
  p->parent = comm;
  p->table.assign(2 * static_cast<size_t>(comm->nranks), 0);
  p->table[2 * comm->rank] = color;
  p->table[2 * comm->rank + 1] = key;
  p->splitSeq = comm->splitSeq++;
  p->color = color;
  p->config = cfg;
  p->out = out;
  CollCall call;
  call.coll = Coll::AllGather;
  call.sendbuff = p->table.data() + 2 * comm->rank;  // in place
  call.recvbuff = p->table.data();
  call.count = 2;
  call.dtype = tribInt32;
  TRIB_RETURN_IF_ERROR(launchCollective(comm, call, &p->allgather));
  *pending = std::move(p);
  return Status::Ok();
}

Status completeSplit(PendingSplit& p, Status gathered) {
  requestFree(p.allgather);
  if (!gathered.ok()) return gathered.prefix("split: exchanging (color, key) failed: ");
  return finishSplit(p.parent, p.table.data(), p.splitSeq, p.color, p.config, p.out);
}

// Launches a queued call: a request for the group to drive, or a split waiting for its exchange.
Status launchGroupCall(GroupCall& g, std::vector<tribRequest*>* reqs,
                       std::vector<std::unique_ptr<PendingSplit>>* splits) {
  tribRequest* req = nullptr;
  switch (g.kind) {
    case GroupCall::Kind::Collective:
      TRIB_RETURN_IF_ERROR(launchCollective(g.comm, g.call, &req));
      req->preMulInput = std::move(g.scaled);
      break;
    case GroupCall::Kind::P2p:
      TRIB_RETURN_IF_ERROR(launchP2p(g.comm, g.isSend, g.buf, g.call.count, g.call.dtype, g.peer, &req));
      break;
    case GroupCall::Kind::Split: {
      std::unique_ptr<PendingSplit> p;
      TRIB_RETURN_IF_ERROR(launchSplit(g.comm, g.color, g.key, g.config, g.out, &p));
      splits->push_back(std::move(p));
      return Status::Ok();
    }
  }
  reqs->push_back(req);
  return Status::Ok();
}

std::chrono::milliseconds groupTimeout(const std::vector<tribRequest*>& reqs) {
  std::chrono::milliseconds t{0};
  for (tribRequest* r : reqs) t = std::max(t, r->comm->config.timeout);
  return t;
}

}  // namespace

bool inGroup() { return tGroup.depth > 0; }

Status groupStart() {
  ++tGroup.depth;
  return Status::Ok();
}

Status finishBlocking(tribRequest* req) {
  Status st = requestWait(req, req->comm->config.timeout, /*abortOnTimeout=*/true);
  requestFree(req);
  return st;
}

Status queueCollective(Communicator* comm, const CollCall& call, Scratch scaled) {
  GroupCall g;
  g.comm = comm;
  g.call = call;
  g.scaled = std::move(scaled);
  tGroup.calls.push_back(std::move(g));
  return Status::Ok();
}

Status queueP2p(Communicator* comm, bool isSend, const void* buf, uint64_t count, DataType dtype, int peer) {
  GroupCall g;
  g.kind = GroupCall::Kind::P2p;
  g.comm = comm;
  g.call.count = count;
  g.call.dtype = dtype;
  g.isSend = isSend;
  g.buf = buf;
  g.peer = peer;
  tGroup.calls.push_back(std::move(g));
  return Status::Ok();
}

bool groupHasHostCalls(const Communicator* comm) {
  for (const GroupCall& g : tGroup.calls)
    if (g.comm == comm) return true;
  return false;
}

Status groupSplit(Communicator* comm, int color, int key, const tribConfig_t* cfg, tribComm** out) {
  TRIB_RETURN_IF_ERROR(comm->checkUsable());
  *out = nullptr;
  if (color < 0 && color != TRIB_SPLIT_NOCOLOR) {
    return errorf(tribInvalidArgument, "split color %d is negative (use a color >= 0 or TRIB_SPLIT_NOCOLOR)",
                  color);
  }
  if (inGroup()) {
    GroupCall g;
    g.kind = GroupCall::Kind::Split;
    g.comm = comm;
    g.color = color;
    g.key = key;
    g.config = cfg;
    g.out = out;
    tGroup.calls.push_back(std::move(g));
    return Status::Ok();
  }
  std::unique_ptr<PendingSplit> p;
  TRIB_RETURN_IF_ERROR(launchSplit(comm, color, key, cfg, out, &p));
  Status st = requestWait(p->allgather, comm->config.timeout, /*abortOnTimeout=*/true);
  return completeSplit(*p, st);
}

Status groupEnd() {
  if (tGroup.depth == 0) return errorf(tribInvalidUsage, "tribGroupEnd without a matching tribGroupStart");
  if (--tGroup.depth > 0) return Status::Ok();
  // Stream-ordered calls are enqueued on their streams first: they return at once.
  Status first = flushGroupStreamCalls();
  std::vector<GroupCall> calls = std::move(tGroup.calls);
  tGroup.calls.clear();
  std::vector<tribRequest*> reqs;
  std::vector<std::unique_ptr<PendingSplit>> splits;
  for (GroupCall& g : calls) {
    Status st = launchGroupCall(g, &reqs, &splits);
    if (first.ok() && !st.ok()) first = st;
  }
  std::vector<tribRequest*> all = reqs;
  for (auto& s : splits) all.push_back(s->allgather);

  // Drive every request (they may belong to different communicators) until all are done.
  auto deadline = std::chrono::steady_clock::now() + groupTimeout(all);
  std::vector<Status> results(all.size());
  std::vector<bool> finished(all.size(), false);
  size_t left = all.size();
  Backoff backoff;
  while (left > 0) {
    for (size_t i = 0; i < all.size(); ++i) {
      if (finished[i]) continue;
      bool done = false;
      Status st = requestTest(all[i], &done);
      if (done) {
        finished[i] = true;
        results[i] = st;
        --left;
      }
    }
    if (left == 0) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      for (size_t i = 0; i < all.size(); ++i) {
        if (!finished[i])
          results[i] = requestWait(all[i], std::chrono::milliseconds(0), /*abortOnTimeout=*/true);
      }
      break;
    }
    backoff.idle();
  }
  for (size_t i = 0; i < reqs.size(); ++i) {
    if (first.ok() && !results[i].ok()) first = results[i];
    requestFree(reqs[i]);
  }
  for (size_t i = 0; i < splits.size(); ++i) {
    Status st = completeSplit(*splits[i], results[reqs.size() + i]);
    if (first.ok() && !st.ok()) first = st;
  }
  return first;
}

Status groupSimulateEnd(double* estimatedUs) {
  if (tGroup.depth == 0)
    return errorf(tribInvalidUsage, "tribGroupSimulateEnd without a matching tribGroupStart");
  if (tGroup.depth > 1)
    return errorf(tribInvalidUsage,
                  "tribGroupSimulateEnd inside a nested group (depth %d): only the outermost group is "
                  "simulated, end the inner ones with tribGroupEnd",
                  tGroup.depth);
  std::vector<QueuedCall> queued;
  for (const GroupCall& g : tGroup.calls) {
    if (g.kind == GroupCall::Kind::Split)
      return errorf(tribInvalidUsage,
                    "tribGroupSimulateEnd: the group holds a tribCommSplit, which cannot be simulated (it "
                    "makes a communicator); the group is still open: end it with tribGroupEnd");
    queued.push_back(QueuedCall{g.comm, g.call, g.kind == GroupCall::Kind::P2p});
  }
  // From here the group ends: its calls are dropped whatever the estimate says.
  tGroup.depth = 0;
  tGroup.calls.clear();  // frees the pre-multiplied sums' scaled inputs
  dropGroupStreamCalls(&queued);
  return estimateQueuedCalls(queued, estimatedUs);
}

}  // namespace trib
