// Stream-ordered calls (NCCL's semantics): a call on device memory, or any call given a stream, is
// enqueued on the caller's stream and returns at once; the communicator's progress thread
// (core/stream_progress.hpp) runs it once the stream reaches it, and the stream's later work waits
// for it. Host-memory calls without a stream never come here.
#pragma once
#include <memory>

#include "core/comm.hpp"
#include "core/group.hpp"
#include "core/stream_progress.hpp"

namespace trib {

// A communicator's stream-ordered machinery, made at its first stream-ordered call.
struct StreamState {
  std::unique_ptr<StreamOrdering> ordering;
  // The engine of device-memory calls (the CUDA engine on `device`; a test's stand-in) and its
  // scratch; made at the first device-memory call.
  std::unique_ptr<Engine> deviceEngine;
  std::unique_ptr<ScratchPool> deviceScratch;
  int device = -1;            // the CUDA device its calls run on (-1: none yet)
  bool hostAsDevice = false;  // tests: host buffers run as device memory on the stand-in engine
  uint32_t nextTicket = 1;
  size_t groupPending = 0;                   // calls of the current group not yet enqueued (group.cpp)
  std::unique_ptr<StreamProgress> progress;  // last: destroyed (drained and joined) first
};

// What a stream-ordered call must satisfy before it is planned (call validated and classified):
// buffers all device or all host memory, device memory of the communicator's device, no host
// request in flight, within a group the stream of the communicator's earlier calls. Makes the
// communicator's StreamState (ordering, progress thread, engine). Nothing it refuses has taken a
// sequence number.
Status prepareStreamCall(Communicator* comm, CollCall* call, void* stream, const void* const* deviceBuffers,
                         size_t n);
// Enqueues `run` on `stream` (its engine and scratch pool set from its memory), or, inside a group,
// keeps it for flushGroupStreamCalls (`what`: the call, for tribGroupSimulateEnd's estimate).
Status submitStreamRun(Communicator* comm, void* stream, StreamRun run, bool device, const QueuedCall& what);
// Group end: one ticket per communicator for all its calls of the group, every start marked before
// any hold, so ranks driven by one thread may share one stream.
Status flushGroupStreamCalls();
// Group end by tribGroupSimulateEnd: the group's stream-ordered calls are dropped unrun, and what
// they were is appended to *dropped.
void dropGroupStreamCalls(std::vector<QueuedCall>* dropped);
// A host call waits for the communicator's stream-ordered work first: one thread at a time drives
// its transports. Refused inside a group that has stream-ordered calls of it pending.
Status quiesceStreamsSlow(Communicator* comm);
inline Status quiesceStreams(Communicator* comm) {
  return comm->streams ? quiesceStreamsSlow(comm) : Status::Ok();
}
// The blocking forms with a stream: a stream, or device memory (then NULL is the legacy default
// stream), makes the call stream-ordered; host memory without one runs as before (ops.cpp).
Status runBlocking(Communicator* comm, const CollCall& call, void* stream);
Status runP2p(Communicator* comm, bool isSend, const void* buf, uint64_t count, DataType dtype, int peer,
              void* stream);
// "send(count 8, float32, peer 1) on rank 0 of 2".
std::string describeP2p(const Communicator* comm, bool isSend, uint64_t count, DataType dtype, int peer);
// Tests: stream-ordered calls of `comm` use `ordering`; with `deviceStandIn`, host buffers of them
// count as device memory and run on it. Before the communicator's first stream-ordered call.
Status setStreamTesting(Communicator* comm, std::unique_ptr<StreamOrdering> ordering,
                        std::unique_ptr<Engine> deviceStandIn);

}  // namespace trib
