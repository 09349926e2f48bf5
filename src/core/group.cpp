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

struct GroupState {
  int depth = 0;
  std::vector<tribRequest*> requests;
  std::vector<std::unique_ptr<PendingSplit>> splits;
};
thread_local GroupState tGroup;

Status launchSplit(Communicator* comm, int color, int key, const tribConfig_t* cfg, tribComm** out,
                   std::unique_ptr<PendingSplit>* pending) {
  if (color < 0 && color != TRIB_SPLIT_NOCOLOR) {
    return errorf(tribInvalidArgument, "split color %d is negative (use a color >= 0 or TRIB_SPLIT_NOCOLOR)",
                  color);
  }
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
  if (inGroup()) {
    tGroup.requests.push_back(req);
    return Status::Ok();
  }
  Status st = requestWait(req, req->comm->config.timeout, /*abortOnTimeout=*/true);
  requestFree(req);
  return st;
}

Status groupSplit(Communicator* comm, int color, int key, const tribConfig_t* cfg, tribComm** out) {
  TRIB_RETURN_IF_ERROR(comm->checkUsable());
  *out = nullptr;
  std::unique_ptr<PendingSplit> p;
  TRIB_RETURN_IF_ERROR(launchSplit(comm, color, key, cfg, out, &p));
  if (inGroup()) {
    tGroup.splits.push_back(std::move(p));
    return Status::Ok();
  }
  Status st = requestWait(p->allgather, comm->config.timeout, /*abortOnTimeout=*/true);
  return completeSplit(*p, st);
}

Status groupEnd() {
  if (tGroup.depth == 0) return errorf(tribInvalidUsage, "tribGroupEnd without a matching tribGroupStart");
  if (--tGroup.depth > 0) return Status::Ok();
  // Stream-ordered calls are enqueued on their streams first: they return at once.
  Status streamed = flushGroupStreamCalls();
  std::vector<tribRequest*> reqs = std::move(tGroup.requests);
  std::vector<std::unique_ptr<PendingSplit>> splits = std::move(tGroup.splits);
  tGroup.requests.clear();
  tGroup.splits.clear();
  std::vector<tribRequest*> all = reqs;
  for (auto& s : splits) all.push_back(s->allgather);

  // Drive every request (they may belong to different communicators) until all are done.
  auto deadline = std::chrono::steady_clock::now() + groupTimeout(all);
  Status first = streamed;
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

}  // namespace trib
