// Loopback transport: ranks that are threads of one process.
//
// Each receiving rank has a mailbox of posted receives and of sends that arrived first. Whoever
// comes second performs the transfer straight from the sender's buffer into the receiver's
// (one copy; for a reducing receive, one fused read-read-write pass). A send waits in the
// mailbox by reference until matched, or until detachSend() copies it out.
#pragma once
#include <memory>
#include <vector>

#include "transports/transport.hpp"

namespace trib {

class LoopbackFabric;

// The shared state of one communicator's ranks in this process.
std::shared_ptr<LoopbackFabric> makeLoopbackFabric(int nranks);
// The transport endpoint of `rank` on `fabric`.
std::unique_ptr<Transport> makeLoopbackTransport(std::shared_ptr<LoopbackFabric> fabric, int rank);

}  // namespace trib
