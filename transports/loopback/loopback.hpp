// Loopback transport: ranks that are threads of one process.
//
// Each receiving rank has a mailbox (a MatchQueue, transports/match_queue.hpp) of posted
// receives and of sends that arrived first. Whoever comes second performs the transfer straight
// from the sender's buffer into the receiver's (one copy; for a reducing receive, one fused
// read-read-write pass). A send waits in the mailbox by reference until matched (a rendezvous:
// it completes only then), or until detachSend() copies it out (a step in place must overwrite
// its buffer, or its execution is given up).
// When every rank of the communicator is in this process, the fabric also holds their peer
// windows (PeerWindows).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "transports/transport.hpp"

namespace trib {

class LoopbackFabric;
struct TransportDescriptor;

// The registry's entry (transports/registry.hpp): ranks in the same process.
TransportDescriptor loopbackTransportDescriptor();

// The shared state of one communicator's ranks in this process; with `windows`, also every rank's
// peer window (TRIB_WINDOW_BYTES) and the signals between them (only when all ranks are here).
std::shared_ptr<LoopbackFabric> makeLoopbackFabric(int nranks, bool windows);
// The transport endpoint of `rank` on `fabric`.
std::unique_ptr<Transport> makeLoopbackTransport(std::shared_ptr<LoopbackFabric> fabric, int rank);
// The fabric shared by this process's `localCount` ranks of communicator `id` (the first to join
// makes it; it is forgotten once the last has joined, or once every rank that joined dropped it,
// so a later id reuse, or a retry after a failed init, starts afresh).
Status joinLoopbackFabric(uint64_t id, int nranks, int localCount, int rank,
                          std::shared_ptr<LoopbackFabric>* out);

}  // namespace trib
