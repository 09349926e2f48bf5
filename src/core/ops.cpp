// Operations: validate a call, turn it into a schedule, run it; progress and completion.
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "common/log.hpp"
#include "common/shared_alloc.hpp"
#include "core/comm.hpp"
#include "core/group.hpp"
#include "core/premul.hpp"
#include "core/stream_coll.hpp"
#include "core/switch_coll.hpp"
#include "cuda/cuda_api.hpp"
#include "reduce/reduce.hpp"

namespace trib {

namespace {

bool rangesOverlap(const void* a, uint64_t aBytes, const void* b, uint64_t bBytes) {
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return aBytes && bBytes && x < y + bBytes && y < x + aBytes;
}

bool usesOp(Coll c) { return c == Coll::AllReduce || c == Coll::Reduce || c == Coll::ReduceScatter; }

// The in-place pattern of `call` on this rank (NCCL's definitions), if its pointers match it.
bool matchesInPlace(const Communicator* comm, const CollCall& call, size_t es) {
  auto send = reinterpret_cast<uintptr_t>(call.sendbuff), recv = reinterpret_cast<uintptr_t>(call.recvbuff);
  uint64_t block = call.count * es;
  switch (call.coll) {
    case Coll::AllReduce:
    case Coll::Broadcast:
      return send == recv;
    case Coll::Reduce:
      return comm->rank == call.root && send == recv;
    case Coll::AllGather:
      return send == recv + comm->rank * block;
    case Coll::ReduceScatter:
      return recv == send + comm->rank * block;
    case Coll::Gather:
      return comm->rank == call.root && send == recv + call.root * block;
    case Coll::Scatter:
      return comm->rank == call.root && recv == send + call.root * block;
    default:
      return false;
  }
}

Status checkBuffer(const char* name, const void* p, uint64_t elems, size_t es, DataType dtype) {
  if (elems == 0) return Status::Ok();
  if (!p) {
    return errorf(tribInvalidArgument, "%s is NULL but %llu %s elements must be %s", name,
                  static_cast<unsigned long long>(elems), dataTypeName(dtype),
                  std::string(name) == "sendbuff" ? "read from it" : "written to it");
  }
  if (reinterpret_cast<uintptr_t>(p) % es != 0) {
    return errorf(tribInvalidArgument, "%s %p is not aligned to the %zu-byte size of %s", name, p, es,
                  dataTypeName(dtype));
  }
  return Status::Ok();
}

tribRequest* newRequest(Communicator* comm) {
  auto* req = new tribRequest;
  req->comm = comm;
  req->started = std::chrono::steady_clock::now();
  comm->outstanding.fetch_add(1);
  comm->active.push_back(req);
  return req;
}

void retire(tribRequest* req, Status result) {
  req->done = true;
  req->result = std::move(result);
  auto& v = req->comm->active;
  v.erase(std::remove(v.begin(), v.end(), req), v.end());
}

// A failed operation may still have steps posted in the transports, pointing at its buffers and
// completion records. Fail everything in flight first (the communicator is broken from here
// on, as NCCL's is after an error), so nothing touches user memory once the request is freed.
void breakComm(Communicator* comm, const Status& why) {
  comm->setAsyncError(why);
  comm->abortTransports(why);
}

// Whether a peer-memory execution issued before `req` on its communicator is still running.
bool earlierWindowRun(const Communicator* comm, const tribRequest* req) {
  for (const tribRequest* r : comm->active) {
    if (r == req) return false;
    if (r->usesWindows && !r->done) return true;
  }
  return false;
}

Status startRequest(tribRequest* req) {
  Status st = req->exec->start();
  bool done = false;
  if (st.ok() && req->exec->finished()) st = req->exec->progress(&done);
  // A switch collective moves on to its agreement / fallback phase instead of finishing.
  if (req->switchRun && (done || !st.ok())) st = advanceSwitchRun(req, st, &done);
  if (!st.ok()) {
    breakComm(req->comm, st);
    retire(req, st);  // reported by test/wait, like a failure during progress
  } else if (done) {
    retire(req, st);
  }
  return Status::Ok();
}

// Advances every running request of the communicator: a peer may need our progress on an
// earlier operation before it can serve the one we wait for.
void commProgress(Communicator* comm) {
  // retire() edits `active` as requests finish: walk a snapshot, on the stack in the usual case
  // (this runs on every poll round, so no allocation).
  constexpr size_t kOnStack = 8;
  tribRequest* onStack[kOnStack];
  std::vector<tribRequest*> onHeap;
  const size_t n = comm->active.size();
  tribRequest** running = onStack;
  if (n > kOnStack) {
    onHeap = comm->active;
    running = onHeap.data();
  } else {
    std::copy(comm->active.begin(), comm->active.end(), onStack);
  }
  for (size_t i = 0; i < n; ++i) {
    tribRequest* r = running[i];
    if (r->done) continue;
    if (r->deferred) {
      if (earlierWindowRun(comm, r)) continue;
      r->deferred = false;
      (void)startRequest(r);  // a failure retires it with its error
      continue;
    }
    bool done = false;
    Status st = r->exec->progress(&done);
    if (r->switchRun && (done || !st.ok())) st = advanceSwitchRun(r, st, &done);
    if (!st.ok()) {
      TRIB_WARN("coll", "%s failed: %s", r->what().c_str(), st.message().c_str());
      breakComm(comm, st);
      retire(r, st);
    } else if (done) {
      retire(r, Status::Ok());
    }
  }
}

}  // namespace

CollArgs argsFor(const Communicator* comm, const CollCall& call) {
  CollArgs a;
  a.coll = call.coll;
  a.nranks = comm->nranks;
  a.root = call.root;
  a.count = call.count;
  a.inPlace = matchesInPlace(comm, call, dataTypeSize(call.dtype));
  setWindowArgs(comm, call, &a);
  return a;
}

Status validateCall(const Communicator* comm, const CollCall& call, CollArgs* argsOut) {
  TRIB_RETURN_IF_ERROR(comm->checkUsable());
  if (!validDataType(call.dtype)) {
    return errorf(tribInvalidArgument, "unknown datatype %d (valid: 0..%d, see tribDataType_t)",
                  static_cast<int>(call.dtype), tribNumTypes - 1);
  }
  if (usesOp(call.coll) && !validRedOp(call.op)) TRIB_RETURN_IF_ERROR(checkPreMulSum(comm, call));
  bool rooted = call.coll == Coll::Reduce || call.coll == Coll::Broadcast || call.coll == Coll::Gather ||
                call.coll == Coll::Scatter;
  if (rooted && (call.root < 0 || call.root >= comm->nranks)) {
    return errorf(tribInvalidArgument, "root %d is out of range: the communicator has ranks 0..%d", call.root,
                  comm->nranks - 1);
  }
  size_t es = dataTypeSize(call.dtype);
  uint64_t total = 0;
  if (__builtin_mul_overflow(call.count, static_cast<uint64_t>(es) * static_cast<uint64_t>(comm->nranks),
                             &total) ||
      total > (uint64_t{1} << 62)) {
    return errorf(tribInvalidArgument, "count %llu of %s is too large: the buffers would exceed 2^62 bytes",
                  static_cast<unsigned long long>(call.count), dataTypeName(call.dtype));
  }
  CollArgs args = argsFor(comm, call);
  uint64_t inElems = inputCount(args, comm->rank), outElems = outputCount(args, comm->rank);
  TRIB_RETURN_IF_ERROR(checkBuffer("sendbuff", call.sendbuff, inElems, es, call.dtype));
  TRIB_RETURN_IF_ERROR(checkBuffer("recvbuff", call.recvbuff, outElems, es, call.dtype));
  if (call.coll == Coll::AlltoAll && call.sendbuff == call.recvbuff && inElems > 0) {
    return errorf(tribInvalidArgument,
                  "in-place alltoall is not supported: use distinct send and receive buffers");
  }
  if (!args.inPlace && rangesOverlap(call.sendbuff, inElems * es, call.recvbuff, outElems * es)) {
    return errorf(
        tribInvalidArgument,
        "sendbuff and recvbuff overlap but not in %s's in-place layout (see tributary.h): use separate "
        "buffers or the exact in-place pointers",
        collName(call.coll));
  }
  if (argsOut) *argsOut = args;
  return Status::Ok();
}

// The kinds of a validated call's buffers (a NULL or empty one stays Host).
static CollCall classified(const Communicator* comm, const CollCall& call, const CollArgs& args) {
  CollCall c = call;
  const size_t es = dataTypeSize(call.dtype);
  const uint64_t in = inputCount(args, comm->rank) * es, out = outputCount(args, comm->rank) * es;
  auto kindOf = [&](const void* p, uint64_t bytes) { return classifyMemory(p, bytes, &comm->registrations); };
  // A buffer the rank does not use (the reduce's output off the root, say) does not limit the call
  // and is not looked up; nor is an in-place call's second buffer (a lookup may ask the CUDA driver).
  if (out == 0) {
    c.sendKind = c.recvKind = kindOf(call.sendbuff, in);
    return c;
  }
  c.recvKind = kindOf(call.recvbuff, out);
  const bool same = call.sendbuff == call.recvbuff && in == out;
  c.sendKind = in == 0 || same ? c.recvKind : kindOf(call.sendbuff, in);
  return c;
}

// Whether `a` and `b` are the same call as made (their buffers' kinds aside).
static bool sameCall(const CollCall& a, const CollCall& b) {
  return a.coll == b.coll && a.sendbuff == b.sendbuff && a.recvbuff == b.recvbuff && a.count == b.count &&
         a.dtype == b.dtype && a.op == b.op && a.root == b.root;
}

// Whether a CUDA driver could classify host memory as device memory in this process: a host buffer
// may be freed and its address reused by a device allocation, which no generation here would see.
static bool deviceLookups() {
  static const bool present = cuda::built() && cuda::deviceStatus().ok();
  return present;
}

// Validates `made` and classifies its buffers (validateCall, classified). A repeat of the last call
// so checked takes what that found while nothing it depends on can have changed: the call's fields
// and the communicator's shape are the same, and the memory it was classified by (the process's
// shared allocations, this communicator's registrations) has the same generations. Only the
// communicator's state (checkUsable) and the window cell are looked at again. Not remembered: a
// pre-multiplied sum (its operator may be destroyed and its value reused), and buffers the CUDA
// driver was asked about where one is present. *repeat: the id of the remembered call this is (a
// run of it may keep what the last run of the same id built), or 0.
static Status checkedCall(Communicator* comm, const CollCall& made, CollArgs* args, CollCall* call,
                          uint64_t* repeat) {
  *repeat = 0;
  Communicator::RepeatCall& last = comm->lastCall;
  const uint64_t shared = sharedRegionsGeneration(), registered = comm->registrations.generation();
  if (last.valid && sameCall(last.made, made) && last.sharedGeneration == shared &&
      last.registrationGeneration == registered) {
    TRIB_RETURN_IF_ERROR(comm->checkUsable());
    *args = last.args;
    // The cell moves on with every peer-memory call. argsFor's setWindowArgs gave a call as made
    // (its kinds not known yet: host) the host windows' cell.
    args->windowCell = comm->windowCell;
    *call = last.call;
    *repeat = last.id;
    return Status::Ok();
  }
  last.valid = false;
  TRIB_RETURN_IF_ERROR(validateCall(comm, made, args));
  *call = classified(comm, made, *args);
  const bool askedDriver = call->sendKind == MemoryKind::Host || call->recvKind == MemoryKind::Host ||
                           call->sendKind == MemoryKind::Device || call->recvKind == MemoryKind::Device;
  if (!isPreMulSum(made.op) && !(askedDriver && deviceLookups())) {
    last = Communicator::RepeatCall{true, made, *call, *args, shared, registered, ++comm->repeatCalls};
    *repeat = last.id;
  }
  return Status::Ok();
}

MemoryKind callMemoryKind(const CollCall& call) {
  // The weaker kind wins (classified() gave an unused buffer its partner's kind).
  auto rank = [](MemoryKind k) {
    return k == MemoryKind::HostShared ? 2 : k == MemoryKind::Registered ? 1 : 0;
  };
  if (call.sendKind == MemoryKind::Device || call.recvKind == MemoryKind::Device) return MemoryKind::Device;
  return rank(call.sendKind) <= rank(call.recvKind) ? call.sendKind : call.recvKind;
}

// The plan for `call` on this communicator: from the cache, or chosen and generated now.
static Status planFor(Communicator* comm, const CollCall& call, CollArgs args, const CachedPlan** out) {
  PlanKey key{static_cast<uint8_t>(args.coll),
              args.inPlace,
              args.root,
              args.count,
              call.dtype,
              call.op,
              callMemoryKind(call),
              static_cast<uint8_t>(args.windowCell)};
  Communicator::RecentPlan& recent = comm->recentPlans[key.windowCell & 1];
  if (recent.plan && recent.epoch == comm->planEpoch && recent.key == key) {
    *out = recent.plan;
    return Status::Ok();
  }
  auto it = comm->planCache.find(key);
  if (it == comm->planCache.end()) {
    const AlgoInfo* algo = nullptr;
    TRIB_RETURN_IF_ERROR(chooseAlgorithm(comm, call, &args, &algo));
    constexpr size_t kMaxPlans = 256;  // a training loop uses a handful; bound memory anyway
    if (comm->planCache.size() >= kMaxPlans) comm->clearPlans();
    auto steps = std::make_shared<const std::vector<Step>>(materialize(*algo, args, comm->rank));
    it = comm->planCache
             .emplace(key, CachedPlan{algo, std::move(steps), algo->scratchCount(args, comm->rank), nullptr})
             .first;
  }
  *out = &it->second;
  recent = Communicator::RecentPlan{key, *out, comm->planEpoch};
  return Status::Ok();
}

// Starts `plan` for `call` as a request (validated, planned).
// The buffers and options of one execution of `plan` for `call` (its sequence number taken).
static void executionSetup(Communicator* comm, const CollCall& call, const CollArgs& args,
                           const CachedPlan* plan, void* scratch, ExecBuffers* bufs, ExecOptions* opts) {
  *bufs = ExecBuffers{
      call.sendbuff,     call.recvbuff, scratch, inputCount(args, comm->rank), outputCount(args, comm->rank),
      plan->scratchCount};
  opts->dtype = call.dtype;
  opts->op = call.op;
  opts->seq = comm->collSeq++ & ~kP2pSeqBit;
  opts->rank = comm->rank;
  opts->engine = comm->engine;
  opts->inputKind = call.sendKind;
  opts->outputKind = call.recvKind;
  if (call.op == tribAvg && usesOp(call.coll) && (call.coll != Coll::Reduce || comm->rank == call.root)) {
    opts->avgDivisor = static_cast<uint64_t>(comm->nranks);
    opts->avgRegion = Region{Buf::Output, 0, outputCount(args, comm->rank)};
  }
}

static Status launchPlan(Communicator* comm, const CollCall& call, const CollArgs& args,
                         const CachedPlan* plan, tribRequest** out) {
  const size_t es = dataTypeSize(call.dtype);
  Scratch scratch;
  TRIB_RETURN_IF_ERROR(comm->scratchPool.acquire(plan->scratchCount * es, &scratch));
  tribRequest* req = newRequest(comm);
  req->call = call;
  req->algo = algoName(plan->algo->algo);
  req->scratch = std::move(scratch);
  ExecBuffers bufs;
  ExecOptions opts;
  executionSetup(comm, call, args, plan, req->scratch.data(), &bufs, &opts);
  // Switch plans also get their agreement/fallback phases; every offloaded plan its offload.
  if (isSwitchAlgo(plan->algo->algo)) prepareSwitchRun(comm, call, args, plan->algo->algo, req, &opts);
  attachRunResources(comm, call, args, plan->algo->algo, &opts);
  // A switch collective may fall back to a peer-memory schedule: it takes its turn as one.
  req->usesWindows = comm->windows && (opts.windows || req->switchRun);
  TRIB_TRACE("coll", "%s", req->what().c_str());
  req->exec = std::make_unique<Execution>(plan->steps, bufs, comm->peers, opts);
  *out = req;
  if (req->usesWindows && earlierWindowRun(comm, req)) {
    req->deferred = true;  // started by commProgress once the earlier one is done
    return Status::Ok();
  }
  return startRequest(req);
}

Status launchCollective(Communicator* comm, const CollCall& userCall, tribRequest** out) {
  CollArgs args;
  CollCall call;
  uint64_t repeat = 0;
  TRIB_RETURN_IF_ERROR(checkedCall(comm, userCall, &args, &call, &repeat));
  TRIB_RETURN_IF_ERROR(quiesceStreams(comm));
  if (callMemoryKind(call) == MemoryKind::Device)  // refused before anything is planned or touched
    return errorf(tribInvalidUsage,
                  "rank %d: %s on CUDA device memory (sendbuff %s, recvbuff %s) as a request: device memory "
                  "runs stream-ordered, through the blocking form with a stream (tribAllReduce(..., stream))",
                  comm->rank, collName(call.coll), memoryKindName(call.sendKind),
                  memoryKindName(call.recvKind));
  CollCall run = call;
  Scratch scaled;
  if (usesOp(call.coll) && isPreMulSum(call.op)) {
    TRIB_RETURN_IF_ERROR(applyPreMulSum(comm, &run, &scaled));
    args = argsFor(comm, run);
  }
  const CachedPlan* plan = nullptr;
  TRIB_RETURN_IF_ERROR(planFor(comm, run, args, &plan));
  TRIB_RETURN_IF_ERROR(launchPlan(comm, run, args, plan, out));
  (*out)->preMulInput = std::move(scaled);  // the request reads it until done
  return Status::Ok();
}

namespace {

// Polls until `finished()` returns true (then true) or `timeout` passes (then false; < 0: never),
// backing off while `mark()` stays put.
template <typename Finished, typename Mark>
bool pollUntil(std::chrono::milliseconds timeout, Finished finished, Mark mark) {
  std::chrono::steady_clock::time_point deadline;
  Backoff backoff;
  unsigned rounds = 0;
  auto last = mark();
  while (!finished()) {
    // The clock costs as much as a poll: read it every 16th round, and not at all for waits
    // shorter than that (most small operations; the deadline is 16 polls late, a few µs).
    if (++rounds % 16 == 0 && timeout.count() >= 0) {
      auto now = std::chrono::steady_clock::now();
      if (rounds == 16) deadline = now + timeout;
      if (now >= deadline) return false;
    }
    auto now = mark();
    if (now != last)
      backoff.reset();
    else
      backoff.idle();
    last = now;
  }
  return true;
}

std::string timeoutMessage(const std::string& what, std::chrono::milliseconds timeout,
                           const std::string& pending) {
  return strprintf(
      "%s timed out after %.1f s (TRIB_TIMEOUT); still waiting for: %s. A peer may have died, be stuck, or "
      "be "
      "calling a different collective.",
      what.c_str(), timeout.count() / 1000.0, pending.c_str());
}

}  // namespace

namespace {

// A blocking call while nothing else of the communicator is in flight, outside a group, on a host
// plan (no switch phases): its execution runs right here, with no request (the request, its
// bookkeeping and the communicator-wide progress were most of an 8-byte all-reduce's cost).
// Failure, timeout and abort end it as they end a request: the communicator breaks (its
// transports are aborted first, so nothing refers to the caller's buffers afterwards).
// `repeat`: checkedCall's id of the call (0: none).
Status runInline(Communicator* comm, const CollCall& call, const CollArgs& args, const CachedPlan* plan,
                 uint64_t repeat) {
  const size_t es = dataTypeSize(call.dtype);
  Scratch scratch;
  if (plan->scratchCount) TRIB_RETURN_IF_ERROR(comm->scratchPool.acquire(plan->scratchCount * es, &scratch));
  const char* algo = algoName(plan->algo->algo);
  TRIB_TRACE("coll", "%s", describeCall(comm, call, algo).c_str());
  std::shared_ptr<Execution> reuse = std::move(plan->idle);
  uint8_t cellMoves = plan->idleCellMoves;
  // The idle execution last ran this very call (the same id: the same fields and memory, so the
  // same buffers and options, made on this communicator whose windows and engine stay): only the
  // sequence number and the window cells move on, as executionSetup and attachRunResources would.
  if (repeat != 0 && reuse && plan->idleCall == repeat &&
      reuse->rerun(comm->collSeq & ~kP2pSeqBit, scratch.data())) {
    ++comm->collSeq;
    if (cellMoves & 1) comm->windowCell ^= 1;
    if (cellMoves & 2) comm->deviceWindowCell ^= 1;
  } else {
    ExecBuffers bufs;
    ExecOptions opts;
    executionSetup(comm, call, args, plan, scratch.data(), &bufs, &opts);
    const int hostCell = comm->windowCell, deviceCell = comm->deviceWindowCell;
    attachRunResources(comm, call, args, plan->algo->algo, &opts);
    cellMoves = static_cast<uint8_t>((hostCell != comm->windowCell ? 1 : 0) |
                                     (deviceCell != comm->deviceWindowCell ? 2 : 0));
    if (!reuse || !reuse->rearm(bufs, opts))
      reuse = std::make_shared<Execution>(plan->steps, bufs, comm->peers, opts);
  }
  Execution& exec = *reuse;
  bool done = false;
  Status st = exec.start();
  auto finished = [&] {
    if (!st.ok()) return true;
    if (comm->aborted.load(std::memory_order_relaxed)) {
      st = errorf(tribAborted, "the communicator was aborted");
      return true;
    }
    st = exec.progress(&done);
    return done || !st.ok();
  };
  if (st.ok() && !pollUntil(comm->config.timeout, finished, [&] { return exec.progressMark(); })) {
    Status err(tribTimeout,
               timeoutMessage(describeCall(comm, call, algo), comm->config.timeout, exec.describePending()));
    TRIB_WARN("coll", "%s", err.message().c_str());
    breakComm(comm, err);
    return err;
  }
  if (st.ok()) {
    plan->idle = std::move(reuse);
    plan->idleCall = repeat;
    plan->idleCellMoves = cellMoves;
    return st;
  }
  const std::string what = describeCall(comm, call, algo);
  if (st.code() != tribAborted) TRIB_WARN("coll", "%s failed: %s", what.c_str(), st.message().c_str());
  Status err = st.prefix(what + ": ");
  breakComm(comm, err);
  return err;
}

}  // namespace

// A stream-ordered collective (validated, classified): planned here, run by the progress thread.
static Status enqueueOnStream(Communicator* comm, CollCall call, const CollArgs& callArgs, void* stream) {
  const void* buffers[] = {call.sendbuff, call.recvbuff};
  TRIB_RETURN_IF_ERROR(prepareStreamCall(comm, &call, stream, buffers, 2));
  CollArgs args = callArgs;
  setWindowArgs(comm, call, &args);  // the windows of its memory kind, now that it is final
  // A pre-multiplied sum runs as a sum of its scaled input, which lies in scratch: out of place.
  std::vector<uint8_t> preMulScalar;
  if (usesOp(call.coll) && isPreMulSum(call.op)) {
    preMulScalar = trib::preMulScalar(comm, call.op);
    call.op = tribSum;
    args.inPlace = false;
  }
  const bool device = callMemoryKind(call) == MemoryKind::Device;
  const CachedPlan* plan = nullptr;
  TRIB_RETURN_IF_ERROR(planFor(comm, call, args, &plan));
  if (isSwitchAlgo(plan->algo->algo))  // its agreement and fallback phases run on the caller's thread
    return errorf(
        tribNotSupported,
        "rank %d: %s with a stream would run in-network (%s), which stream-ordered calls do not yet: "
        "choose a host algorithm (TRIB_ALGO) or pass a NULL stream",
        comm->rank, collName(call.coll), algoName(plan->algo->algo));
  StreamRun run;
  executionSetup(comm, call, args, plan, nullptr, &run.buffers, &run.options);
  attachRunResources(comm, call, args, plan->algo->algo, &run.options);
  run.steps = plan->steps;
  run.scratchBytes = plan->scratchCount * dataTypeSize(call.dtype);
  run.usesWindows = run.options.windows != nullptr;
  run.what = describeCall(comm, call, algoName(plan->algo->algo));
  run.preMulScalar = std::move(preMulScalar);
  TRIB_TRACE("coll", "%s on stream %p", run.what.c_str(), stream);
  return submitStreamRun(comm, stream, std::move(run), device, QueuedCall{comm, call, false});
}

Status runBlocking(Communicator* comm, const CollCall& userCall) {
  return runBlocking(comm, userCall, nullptr);
}

Status runBlocking(Communicator* comm, const CollCall& userCall, void* stream) {
  CollArgs args;
  CollCall call;
  uint64_t repeat = 0;
  TRIB_RETURN_IF_ERROR(checkedCall(comm, userCall, &args, &call, &repeat));
  // Device memory is stream-ordered on the legacy default stream when the stream is NULL (NCCL's).
  const bool preMul = usesOp(call.coll) && isPreMulSum(call.op);
  if (stream || callMemoryKind(call) == MemoryKind::Device) return enqueueOnStream(comm, call, args, stream);
  TRIB_RETURN_IF_ERROR(quiesceStreams(comm));
  CollCall run = call;
  Scratch scaled;
  if (preMul) {  // scaled now: the operator may be destroyed once the call returns
    TRIB_RETURN_IF_ERROR(applyPreMulSum(comm, &run, &scaled));
    args = argsFor(comm, run);
  }
  if (inGroup()) return queueCollective(comm, run, std::move(scaled));
  if (preMul) repeat = 0;  // what runs is the scaled call, which is not the one remembered
  const CachedPlan* plan = nullptr;
  // A repeat takes the plan its last run in this window cell had, while the cache still holds it.
  const int cell = args.windowCell & 1;
  Communicator::RepeatCall& last = comm->lastCall;
  if (repeat != 0 && last.plans[cell] && last.plansEpoch[cell] == comm->planEpoch) {
    plan = last.plans[cell];
  } else {
    TRIB_RETURN_IF_ERROR(planFor(comm, run, args, &plan));
    if (repeat != 0) {
      last.plans[cell] = plan;
      last.plansEpoch[cell] = comm->planEpoch;
    }
  }
  if (comm->active.empty() && !isSwitchAlgo(plan->algo->algo))
    return runInline(comm, run, args, plan, repeat);
  tribRequest* req = nullptr;
  TRIB_RETURN_IF_ERROR(launchPlan(comm, run, args, plan, &req));
  req->preMulInput = std::move(scaled);
  return finishBlocking(req);
}

namespace {

// A send or receive, validated, as a one-step execution. Its sequence number is taken only once
// nothing can refuse it any more (takeSeq): a refused call must not shift the pair's numbering.
struct P2pSetup {
  std::shared_ptr<const std::vector<Step>> steps;
  ExecBuffers bufs;
  ExecOptions opts;
  MemoryKind kind = MemoryKind::Host;
};

Status p2pSetup(Communicator* comm, bool isSend, const void* buf, uint64_t count, DataType dtype, int peer,
                P2pSetup* out) {
  TRIB_RETURN_IF_ERROR(comm->checkUsable());
  if (!validDataType(dtype))
    return errorf(tribInvalidArgument, "unknown datatype %d", static_cast<int>(dtype));
  if (peer < 0 || peer >= comm->nranks) {
    return errorf(tribInvalidArgument, "peer %d is out of range: the communicator has ranks 0..%d", peer,
                  comm->nranks - 1);
  }
  size_t es = dataTypeSize(dtype);
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(count, static_cast<uint64_t>(es), &bytes) || bytes > (uint64_t{1} << 62)) {
    return errorf(tribInvalidArgument, "count %llu of %s is too large",
                  static_cast<unsigned long long>(count), dataTypeName(dtype));
  }
  TRIB_RETURN_IF_ERROR(checkBuffer(isSend ? "sendbuff" : "recvbuff", buf, count, es, dtype));
  out->kind = classifyMemory(buf, count * es, &comm->registrations);
  out->opts.dtype = dtype;
  out->opts.rank = comm->rank;
  out->opts.inputKind = out->opts.outputKind = out->kind;
  Region region{isSend ? Buf::Input : Buf::Output, 0, count};
  out->steps = std::make_shared<const std::vector<Step>>(
      std::vector<Step>{isSend ? Step::send(peer, region) : Step::recv(peer, region)});
  out->bufs = ExecBuffers{isSend ? buf : nullptr,
                          isSend ? nullptr : const_cast<void*>(buf),
                          nullptr,
                          isSend ? count : 0,
                          isSend ? 0 : count,
                          0};
  return Status::Ok();
}

void takeSeq(Communicator* comm, bool isSend, int peer, P2pSetup& p) {
  uint32_t& counter = isSend ? comm->p2pSendSeq[peer] : comm->p2pRecvSeq[peer];
  p.opts.seq = kP2pSeqBit | (counter++ & ~kP2pSeqBit);
}

tribRequest* p2pRequest(Communicator* comm, bool isSend, uint64_t count, DataType dtype, int peer,
                        P2pSetup& p) {
  takeSeq(comm, isSend, peer, p);
  tribRequest* req = newRequest(comm);
  req->call.count = count;
  req->call.dtype = dtype;
  req->p2pPeer = peer;
  req->p2pSend = isSend;
  req->exec = std::make_unique<Execution>(std::move(p.steps), p.bufs, comm->peers, p.opts);
  return req;
}

}  // namespace

Status launchP2p(Communicator* comm, bool isSend, const void* buf, uint64_t count, DataType dtype, int peer,
                 tribRequest** out) {
  TRIB_RETURN_IF_ERROR(quiesceStreams(comm));
  P2pSetup p;
  TRIB_RETURN_IF_ERROR(p2pSetup(comm, isSend, buf, count, dtype, peer, &p));
  if (p.kind == MemoryKind::Device)
    return errorf(
        tribInvalidUsage,
        "rank %d: %s on CUDA device memory as a request: device memory runs stream-ordered, through "
        "the blocking form with a stream (%s(..., stream))",
        comm->rank, isSend ? "tribIsend" : "tribIrecv", isSend ? "tribSend" : "tribRecv");
  tribRequest* req = p2pRequest(comm, isSend, count, dtype, peer, p);
  TRIB_RETURN_IF_ERROR(startRequest(req));
  *out = req;
  return Status::Ok();
}

Status runP2p(Communicator* comm, bool isSend, const void* buf, uint64_t count, DataType dtype, int peer,
              void* stream) {
  P2pSetup p;
  TRIB_RETURN_IF_ERROR(p2pSetup(comm, isSend, buf, count, dtype, peer, &p));
  if (!stream && p.kind != MemoryKind::Device) {
    TRIB_RETURN_IF_ERROR(quiesceStreams(comm));
    if (inGroup()) return queueP2p(comm, isSend, buf, count, dtype, peer);
    tribRequest* req = p2pRequest(comm, isSend, count, dtype, peer, p);
    TRIB_RETURN_IF_ERROR(startRequest(req));
    return finishBlocking(req);
  }
  CollCall call;  // what prepareStreamCall checks: the one buffer's kind on both sides
  call.sendKind = call.recvKind = p.kind;
  TRIB_RETURN_IF_ERROR(prepareStreamCall(comm, &call, stream, &buf, 1));
  takeSeq(comm, isSend, peer, p);
  StreamRun run;
  run.steps = std::move(p.steps);
  run.buffers = p.bufs;
  run.options = p.opts;
  run.options.inputKind = call.sendKind;
  run.options.outputKind = call.recvKind;
  run.what = describeP2p(comm, isSend, count, dtype, peer);
  CollCall what;
  what.count = count;
  what.dtype = dtype;
  return submitStreamRun(comm, stream, std::move(run), call.sendKind == MemoryKind::Device,
                         QueuedCall{comm, what, true});
}

namespace {
// How many polls a wait spins before it yields, per thread, learnt from how waits end. With a core
// to itself a rank waits a cross-core round trip or two, where a yield (a system call, costly in a
// VM) is most of an 8-byte all-reduce: on this machine's VM (cores ~400 ns apart), 2 processes
// took 1.6 us spinning 8 polls, 0.7-0.9 us spinning up to 256. When ranks share a core (more ranks
// than cores, a busy machine) the peer can only act once we yield, and spinning only delays it: a
// compiler on the other core measured 4.1 us spinning 64 rounds first, 2.6 us with 8, 2.4 us with
// 1. So: a wait that ends while spinning raises the budget (x2, to kMaxSpins, ~100 us of polls),
// one that outlasts it lowers it (x3/4, to kMinSpins); every 16th wait probes 4x the budget, so a
// budget at its floor finds out when longer spins would now pay (a failed probe changes nothing).
// With more ranks on the host than cores to run them (4 ranks on this 2-core machine), a peer
// that shares our core runs only once we yield, and longer spins measured slower: no adapting then.
constexpr unsigned kMinSpins = 8, kMaxSpins = 1024, kProbeEvery = 16;
thread_local unsigned spinBudget = kMinSpins;
thread_local unsigned waitsEnded = 0;
std::atomic<int> mostRanksOnThisHost{0};

int coresAvailable() {
  static const int cores = [] {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
    return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }();
  return cores;
}
}  // namespace

void Backoff::noteRanksOnThisHost(int ranks) {
  int seen = mostRanksOnThisHost.load(std::memory_order_relaxed);
  while (ranks > seen && !mostRanksOnThisHost.compare_exchange_weak(seen, ranks, std::memory_order_relaxed)) {
  }
}

unsigned Backoff::spins() {
  if (spins_ != 0) return spins_;
  if (mostRanksOnThisHost.load(std::memory_order_relaxed) > coresAvailable()) return spins_ = kMinSpins;
  spins_ = ++waitsEnded % kProbeEvery == 0 ? std::min(kMaxSpins, spinBudget * 4) : spinBudget;
  return spins_;
}

void Backoff::ended() {
  if (idle_ == 0) return;
  const bool probe = spins_ > spinBudget;
  if (idle_ < spins_)
    spinBudget = std::min(kMaxSpins, std::max(spinBudget * 2, probe ? spins_ : 0u));
  else if (!probe)
    spinBudget = std::max(kMinSpins, spinBudget * 3 / 4);
  spins_ = 0;
}

void Backoff::idle() {
  // After the spins it yields; after 100 us of yields it sleeps, longer the longer nothing moved:
  // 1/16 of the idle time so far, 20 us to 1 ms. A wake-up then comes at most ~6% (and 1 ms) late,
  // and a rank that waits seconds for a late peer wakes ~1,000 times a second instead of ~20,000
  // (10% of a core with 20 us sleeps, measured here on a 2 s wait).
  constexpr auto kYieldFor = std::chrono::microseconds(100);
  constexpr auto kMinSleep = std::chrono::microseconds(20), kMaxSleep = std::chrono::microseconds(1000);
  if (++idle_ < spins()) return;
  auto now = std::chrono::steady_clock::now();
  if (idle_ == spins_) since_ = now;
  const auto idleFor = std::chrono::duration_cast<std::chrono::microseconds>(now - since_);
  if (idleFor < kYieldFor) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::clamp(idleFor / 16, kMinSleep, kMaxSleep));
  }
}

Status requestTest(tribRequest* req, bool* done) {
  if (!req->done) {
    if (req->comm->aborted.load()) {
      retire(req, errorf(tribAborted, "%s: the communicator was aborted", req->what().c_str()));
    } else {
      commProgress(req->comm);
    }
  }
  *done = req->done;
  return req->done ? req->result : Status::Ok();
}

Status requestWait(tribRequest* req, std::chrono::milliseconds timeout, bool abortOnTimeout) {
  Status st;
  auto finished = [&] {
    bool done = false;
    st = requestTest(req, &done);
    return done;
  };
  if (pollUntil(timeout, finished, [&] { return req->exec->progressMark(); })) return st;
  if (!abortOnTimeout) {
    // The caller's own wait (0 is a poll) ran out: its choice, not a sign of trouble, so no
    // warning and no costly description of what is pending.
    return errorf(tribTimeout, "%s is not complete after %lld ms; the request stays valid",
                  req->what().c_str(), static_cast<long long>(timeout.count()));
  }
  // The communicator's own timeout has passed (callers pass what is left of it).
  Status err(tribTimeout,
             timeoutMessage(req->what(), req->comm->config.timeout, req->exec->describePending()));
  TRIB_WARN("coll", "%s", err.message().c_str());
  // The transports may still reference this request's buffers: fail everything and mark the
  // communicator broken, so nothing touches user memory after we return.
  breakComm(req->comm, err);
  retire(req, err);
  return err;
}

void requestFree(tribRequest* req) {
  if (!req->done) {
    auto& v = req->comm->active;
    v.erase(std::remove(v.begin(), v.end(), req), v.end());
  }
  req->comm->outstanding.fetch_sub(1);
  delete req;
}

}  // namespace trib

std::string tribRequest::what() const {
  using namespace trib;
  if (p2pPeer >= 0) return describeP2p(comm, p2pSend, call.count, call.dtype, p2pPeer);
  std::string s = describeCall(comm, call, algo);
  if (fallback) s += strprintf(" [fallback %s]", fallback);
  return s;
}

std::string trib::describeP2p(const Communicator* comm, bool isSend, uint64_t count, DataType dtype,
                              int peer) {
  return strprintf("%s(count %llu, %s, peer %d) on rank %d of %d", isSend ? "send" : "recv",
                   static_cast<unsigned long long>(count), dataTypeName(dtype), peer, comm->rank,
                   comm->nranks);
}

std::string trib::describeCall(const Communicator* comm, const CollCall& call, const char* algo) {
  std::string s = strprintf("%s(count %llu, %s", collName(call.coll),
                            static_cast<unsigned long long>(call.count), dataTypeName(call.dtype));
  if (usesOp(call.coll)) s += strprintf(", %s", redOpName(call.op));
  if (call.coll == Coll::Reduce || call.coll == Coll::Broadcast || call.coll == Coll::Gather ||
      call.coll == Coll::Scatter)
    s += strprintf(", root %d", call.root);
  s += strprintf(") on rank %d of %d", comm->rank, comm->nranks);
  if (algo) s += strprintf(" [%s]", algo);
  return s;
}
