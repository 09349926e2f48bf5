// Group calls: between tribGroupStart and tribGroupEnd a thread's blocking operations are
// launched without waiting, and tribGroupEnd waits for all of them together. This is what lets
// one thread drive several ranks of a communicator (the loopback case).
#pragma once
#include "core/comm.hpp"

namespace trib {

Status groupStart();
Status groupEnd();
bool inGroup();
// A blocking call's tail: wait now, or (inside a group) hand the request to the group.
Status finishBlocking(tribRequest* req);
// Split inside or outside a group (it needs an all-gather of (color, key) first).
Status groupSplit(Communicator* comm, int color, int key, const tribConfig_t* cfg, tribComm** out);
Status finishSplit(Communicator* parent, const int32_t* table, uint32_t splitSeq, int color,
                   const tribConfig_t* cfg, tribComm** out);

}  // namespace trib
