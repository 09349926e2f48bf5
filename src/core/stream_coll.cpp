#include "core/stream_coll.hpp"

#include <algorithm>

#include "core/group.hpp"
#include "cuda/cuda_api.hpp"
#include "exec/executor.hpp"

namespace trib {

void StreamStateDeleter::operator()(StreamState* s) const { delete s; }

namespace {

// Stream-ordered calls of the current group, enqueued together at its end.
struct GroupStreamCall {
  Communicator* comm;
  void* stream;
  StreamRun run;
  QueuedCall what;
};
thread_local std::vector<GroupStreamCall> tGroupCalls;

Status makeState(Communicator* comm, std::unique_ptr<StreamOrdering> ordering, int device) {
  auto s = std::unique_ptr<StreamState, StreamStateDeleter>(new StreamState);
  s->ordering = std::move(ordering);
  s->device = device;
  s->nextTicket = s->ordering->firstTicket();
  StreamProgress::Hooks hooks;
  hooks.aborted = [comm] { return comm->aborted.load(std::memory_order_acquire); };
  hooks.fail = [comm](const Status& why) {  // as a failed host call: the communicator breaks
    comm->setAsyncError(why);
    comm->abortTransports(why);
  };
  s->progress =
      std::make_unique<StreamProgress>(*s->ordering, comm->peers, comm->config.timeout, std::move(hooks));
  comm->streams = std::move(s);
  return Status::Ok();
}

// The host staging a work's runs take from the engine, reserved on the caller's thread before
// its stream is held (Engine::reserveHostStaging says why).
Status reserveStaging(Communicator* comm, const StreamWork& work) {
  if (!comm->streams->deviceEngine) return Status::Ok();
  std::vector<size_t> needs;
  for (const StreamRun& r : work.runs) addHostStagingNeeds(*r.steps, comm->peers, r.options, &needs);
  if (needs.empty()) return Status::Ok();
  Status st = comm->streams->deviceEngine->reserveHostStaging(needs);
  if (!st.ok()) st.prefix(strprintf("rank %d: a stream-ordered call's host staging: ", comm->rank));
  return st;
}

}  // namespace

Status setStreamTesting(Communicator* comm, std::unique_ptr<StreamOrdering> ordering,
                        std::unique_ptr<Engine> deviceStandIn) {
  if (comm->streams) return errorf(tribInvalidUsage, "setStreamTesting: stream-ordered calls already ran");
  TRIB_RETURN_IF_ERROR(makeState(comm, std::move(ordering), -1));
  if (deviceStandIn) {
    comm->streams->deviceScratch = std::make_unique<ScratchPool>(*deviceStandIn);
    comm->streams->deviceEngine = std::move(deviceStandIn);
    comm->streams->hostAsDevice = true;
  }
  return Status::Ok();
}

Status prepareStreamCall(Communicator* comm, CollCall* call, void* stream, const void* const* buffers,
                         size_t n) {
  const bool sendDevice = call->sendKind == MemoryKind::Device,
             recvDevice = call->recvKind == MemoryKind::Device;
  if (sendDevice != recvDevice)
    return errorf(
        tribInvalidArgument,
        "rank %d: sendbuff is %s memory and recvbuff %s memory: a call's buffers must both be CUDA device "
        "memory (or both host memory); copy the host buffer to the device first",
        comm->rank, memoryKindName(call->sendKind), memoryKindName(call->recvKind));
  if (inGroup()) {
    for (const GroupStreamCall& g : tGroupCalls)
      if (g.comm == comm && g.stream != stream)
        return errorf(tribInvalidUsage,
                      "rank %d: stream-ordered calls of one communicator in one group must use one stream "
                      "(%p, then %p)",
                      comm->rank, g.stream, stream);
  }
  if (inGroup() && groupHasHostCalls(comm))
    return errorf(tribInvalidUsage,
                  "rank %d: a stream-ordered call after host-memory calls of the same communicator in one "
                  "group: make them separate groups",
                  comm->rank);
  if (!comm->active.empty())
    return errorf(tribInvalidUsage,
                  "rank %d: a stream-ordered call while %zu non-blocking host-memory request(s) of this "
                  "communicator are in flight: wait for them first",
                  comm->rank, comm->active.size());
  bool device = sendDevice;
  if (comm->streams && comm->streams->hostAsDevice) {
    call->sendKind = call->recvKind = MemoryKind::Device;
    device = true;
  }
  if (!comm->streams) {
    // The device named at creation, else the first device buffer's, else the caller's current one.
    int dev = comm->boundDevice;
    for (size_t i = 0; i < n && dev < 0 && device; ++i) dev = cuda::deviceOf(buffers[i]);
    if (dev < 0) TRIB_RETURN_IF_ERROR(cuda::currentDevice(&dev).prefix("a stream-ordered call: "));
    std::unique_ptr<StreamOrdering> ordering;
    TRIB_RETURN_IF_ERROR(cuda::createStreamOrdering(dev, &ordering));
    TRIB_RETURN_IF_ERROR(makeState(comm, std::move(ordering), dev));
  }
  StreamState& s = *comm->streams;
  if (!device) return Status::Ok();
  if (!s.hostAsDevice) {
    for (size_t i = 0; i < n; ++i) {
      // A registered buffer whose memory was freed since is refused before anything runs.
      if (Status st = comm->registrations.checkDevice(buffers[i], 1); !st.ok())
        return st.prefix(strprintf("rank %d: ", comm->rank));
      const int dev = cuda::deviceOf(buffers[i]);
      if (dev >= 0 && s.device >= 0 && dev != s.device)
        return errorf(
            tribInvalidArgument,
            "rank %d: a buffer (%p) is memory of CUDA device %d, but this communicator's calls run on "
            "device %d (%s)",
            comm->rank, buffers[i], dev, s.device,
            comm->boundDevice >= 0 ? "tribCommInitAll's devlist" : "its first stream-ordered call's");
    }
  }
  if (!s.deviceEngine) {
    TRIB_RETURN_IF_ERROR(cuda::createEngine(s.device, &s.deviceEngine));
    s.deviceScratch = std::make_unique<ScratchPool>(*s.deviceEngine);
  }
  return Status::Ok();
}

Status submitStreamRun(Communicator* comm, void* stream, StreamRun run, bool device, const QueuedCall& what) {
  StreamState& s = *comm->streams;
  run.options.engine = device ? s.deviceEngine.get() : &hostEngine();
  run.scratchPool = device ? s.deviceScratch.get() : &comm->scratchPool;
  if (inGroup()) {
    tGroupCalls.push_back({comm, stream, std::move(run), what});
    ++s.groupPending;
    return Status::Ok();
  }
  StreamWork work;
  work.runs.push_back(std::move(run));
  TRIB_RETURN_IF_ERROR(reserveStaging(comm, work));
  TRIB_RETURN_IF_ERROR(s.progress->reserve());
  work.ticket = s.nextTicket++;
  Status st = s.ordering->markStart(stream, work.ticket);
  if (st.ok()) st = s.ordering->holdUntilDone(stream, work.ticket);
  if (!st.ok()) {
    s.progress->unreserve();
    return st;
  }
  s.progress->push(std::move(work));
  return Status::Ok();
}

Status flushGroupStreamCalls() {
  std::vector<GroupStreamCall> calls = std::move(tGroupCalls);
  tGroupCalls.clear();
  if (calls.empty()) return Status::Ok();
  // One work per communicator, in the order of their first calls.
  struct PerComm {
    Communicator* comm;
    void* stream;
    StreamWork work;
    bool marked = false;
  };
  std::vector<PerComm> works;
  for (GroupStreamCall& c : calls) {
    auto it = std::find_if(works.begin(), works.end(), [&](const PerComm& w) { return w.comm == c.comm; });
    if (it == works.end()) it = works.insert(works.end(), PerComm{c.comm, c.stream, {}});
    it->work.runs.push_back(std::move(c.run));
    c.comm->streams->groupPending = 0;
  }
  Status first;
  for (PerComm& w : works) {
    StreamState& s = *w.comm->streams;
    Status st = reserveStaging(w.comm, w.work);
    if (st.ok()) st = s.progress->reserve();
    if (st.ok()) {
      w.work.ticket = s.nextTicket++;
      st = s.ordering->markStart(w.stream, w.work.ticket);
      if (!st.ok()) s.progress->unreserve();
    }
    w.marked = st.ok();
    if (first.ok() && !st.ok()) first = st;
  }
  // Every start is on its stream before any stream is held.
  for (PerComm& w : works) {
    if (!w.marked) continue;
    StreamState& s = *w.comm->streams;
    if (Status st = s.ordering->holdUntilDone(w.stream, w.work.ticket); !st.ok()) {
      s.progress->unreserve();
      if (first.ok()) first = st;
      continue;
    }
    s.progress->push(std::move(w.work));
  }
  return first;
}

void dropGroupStreamCalls(std::vector<QueuedCall>* dropped) {
  std::vector<GroupStreamCall> calls = std::move(tGroupCalls);
  tGroupCalls.clear();
  for (GroupStreamCall& c : calls) {
    c.comm->streams->groupPending = 0;
    dropped->push_back(c.what);
  }
}

Status quiesceStreamsSlow(Communicator* comm) {
  StreamState& s = *comm->streams;
  if (s.groupPending > 0)
    return errorf(
        tribInvalidUsage,
        "rank %d: a host-memory call after stream-ordered calls of the same communicator in one group: "
        "make them separate groups",
        comm->rank);
  if (!s.progress->busy()) return Status::Ok();
  return s.progress->drain(comm->config.timeout)
      .prefix("a host-memory call waited for stream-ordered work: ");
}

}  // namespace trib
