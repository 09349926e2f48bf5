// The communicator's side of in-network reduction: attaching the aggregation switch, and running
// an Algo::Switch collective with its failover.
//
// A switch collective runs in up to three phases on the same request:
//   1. the switch schedule (SwitchReduce steps handed to the switch client);
//   2. an agreement: a 1-element min all-reduce of "my switch phase succeeded" over the host
//      transports, so that every rank takes the same decision even when the switch died after
//      some ranks already had their results;
//   3. only if some rank failed: the same collective again with a host algorithm, from the
//      untouched input (in place: from the copy the switch schedule made first). The
//      communicator then stops using the switch and logs one WARN line.
// The switch itself fails a group as soon as one member disconnects or leaves, so no rank waits
// in phase 1 for a peer that has given up.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/comm.hpp"

namespace trib {

// The communicator's aggregation tree from every rank's leaf switch address (by rank): ranks that
// share a leaf are its children in rank order; with several leaves, the leaves (in order of their
// first rank) are the children of one spine -- the tree trib-switchd --parent builds.
struct SwitchTree {
  std::vector<std::pair<uint32_t, uint32_t>> path;  // per level: (children, my index); level 0 = leaf
  int fanIn = 0;                                    // most children at one switch
  int leaves = 0;
  std::string describe() const;  // "level 0: child 1 of 2, level 1: child 0 of 2"
};
SwitchTree switchTreeOf(const std::vector<std::string>& leafOfRank, int rank);

// Connects this rank to its leaf switch (TRIB_SWITCH, else the topology's switch above the rank
// with an addr=) and registers the communicator as a group, with the path switchTreeOf gives.
// Never fails the communicator: without a usable switch it logs one WARN and plans without one.
// With `agree` (the bootstrap's all-gather), the ranks then agree: unless every rank attached,
// none uses the switch (a rank that alone cannot reach it must not plan differently).
void attachSwitch(Communicator* comm, const OobAllGather& agree = nullptr);
// The same agreement for the ranks of one process created together (tribCommInitAll).
void agreeSwitchLocal(tribComm** comms, int n);
bool switchUsable(const Communicator* comm);
// hier_switch can run: the switch is usable and this rank's slice group is registered.
bool sliceUsable(const Communicator* comm);
inline bool isSwitchAlgo(Algo a) { return a == Algo::Switch || a == Algo::HierSwitch; }

// For a switch plan (isSwitchAlgo), before the request starts: reserves the sequence numbers of
// phases 2 and 3 (every rank reserves the same ones) and sets opts->offload (the communicator's
// group for Algo::Switch, the rank's slice group for Algo::HierSwitch).
void prepareSwitchRun(Communicator* comm, const CollCall& call, const CollArgs& args, Algo algo,
                      tribRequest* req, ExecOptions* opts);
// Called when the request's current execution finished (`result` OK) or failed: starts the next
// phase. *done becomes true once the request's outcome is final, which is returned.
Status advanceSwitchRun(tribRequest* req, Status result, bool* done);

// Payload bytes this rank's switch clients (its communicator group and, with hier_switch, its
// slice group) sent and received so far (false: no switch client).
bool switchTraffic(const Communicator* comm, uint64_t* sent, uint64_t* received);

}  // namespace trib
