// Group calls: between tribGroupStart and tribGroupEnd a thread's blocking host-memory calls are
// validated and queued; tribGroupEnd launches them in call order and waits for all of them
// together (what lets one thread drive several ranks: the loopback case). Stream-ordered calls are
// queued by stream_coll.cpp the same way. tribGroupSimulateEnd ends the group without launching:
// it returns the planner's and simulator's estimate of the queued calls (group_sim.cpp).
#pragma once
#include "core/comm.hpp"

namespace trib {

Status groupStart();
Status groupEnd();
bool inGroup();
// A blocking call's tail outside a group: wait for it, then free it.
Status finishBlocking(tribRequest* req);
// Inside a group: a validated, classified host collective (a pre-multiplied sum already
// rewritten as a sum of `scaled`, its scaled input) or send/receive, launched at the group's end.
Status queueCollective(Communicator* comm, const CollCall& call, Scratch scaled);
Status queueP2p(Communicator* comm, bool isSend, const void* buf, uint64_t count, DataType dtype, int peer);
// Whether this thread's open group holds queued host calls of `comm`.
bool groupHasHostCalls(const Communicator* comm);
// Split inside or outside a group (it needs an all-gather of (color, key) first).
Status groupSplit(Communicator* comm, int color, int key, const tribConfig_t* cfg, tribComm** out);
Status finishSplit(Communicator* parent, const int32_t* table, uint32_t splitSeq, int color,
                   const tribConfig_t* cfg, tribComm** out);

// A queued call as the estimate sees it (p2p: a send or receive, which it does not time).
struct QueuedCall {
  Communicator* comm = nullptr;
  CollCall call;
  bool p2p = false;
};
// Ends the outermost group without running it: its calls (host and stream-ordered) are dropped,
// and *estimatedUs is the estimate of running them (estimateQueuedCalls). Refused, with the group
// left open, when not in a group, in a nested one, or when the group holds a split.
Status groupSimulateEnd(double* estimatedUs);
// The planner's choice for each collective, run by the simulator on the communicator's topology:
// calls of one communicator add up, different communicators' (ranks one thread drives) overlap,
// so the estimate is the largest per-communicator sum, in microseconds.
Status estimateQueuedCalls(const std::vector<QueuedCall>& calls, double* estimatedUs);

}  // namespace trib
