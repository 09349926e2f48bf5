// UCX transport: ranks in different processes or hosts, over UCP tag matching.
//
// One UCP context per process and configuration (options and UCX_* environment), shared by the
// transports of every communicator that asks for it, so a split does not initialise UCX again;
// one worker per transport instance. Worker addresses are exchanged through the bootstrap's
// OobAllGather at creation and an endpoint is created to every rank. UCX picks the
// wire (TCP, shared memory, CMA, InfiniBand, RoCE) from what the host has and UCX_TLS / tls.
// Sends are contiguous from the caller's buffer (transport.hpp): UCX sends small ones eagerly and
// large ones by rendezvous zero-copy (RDMA reads on InfiniBand and RoCE, CMA on one host), by its
// own thresholds. It cannot detach a posted send (detachesSends() is false), so the executor sends
// copies from executions it may give up.
//
// Tag layout. UCP matches receives by tag only (not by sender), so the 64-bit UCP tag must
// carry the sender's rank as well as the executor's tag, which is itself 64 bits:
// [32 bits sequence (top bit: point-to-point)][32 bits message index] (src/exec/executor.hpp).
// The UCP tag is therefore, from the most significant bit down:
//   [ comm : commBits ][ source rank : rankBits ][ seq : seqBits ][ message index : indexBits ]
// with commBits + rankBits + seqBits + indexBits = 64 (defaults 4 + 20 + 16 + 24):
//  - comm: a hash of UcxOptions::commId, so communicators never match each other's messages even
//    if they share a worker (today each transport has its own worker, which separates them too);
//  - seq: the point-to-point bit, then the low seqBits-1 bits of the sequence number. Sequence
//    numbers wrap there, which is safe while fewer than 2^(seqBits-1) operations (32768 by
//    default) between the same two ranks have messages in flight at once;
//  - index: the message index, which must be below 2^indexBits (16M messages per pair per
//    operation by default); a larger one, or a rank >= 2^rankBits, is refused with
//    tribInvalidArgument, never folded.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "transports/transport.hpp"

namespace trib {

struct TransportDescriptor;
// The registry's entry (transports/registry.hpp): ranks anywhere, preferred for other hosts.
TransportDescriptor ucxTransportDescriptor();

struct UcxOptions {
  uint64_t commId = 0;  // distinguishes communicators; hashed into commBits
  int commBits = 4;
  int rankBits = 20;
  int seqBits = 16;
  int indexBits = 24;
  // UCX transports to use, as UCX_TLS ("tcp", "sm", "rc,sm", ...); empty: UCX_TLS or UCX's default.
  std::string tls;
  // How often peers are checked for life: UCX's keepalive (KEEPALIVE_INTERVAL) for remote
  // peers, and a look at /proc for peers on this host (UCX does not notice those dying over
  // shared memory). A dead peer fails its pending operations within about one interval (TCP
  // notices a closed socket at once). <= 0 keeps UCX's default (20 s) and disables the /proc check.
  // A lost peer fails only what can no longer arrive: messages it sent before it exited (flushed
  // by its clean close) are first drained into their receives or UCX's unexpected queue, and a
  // receive posted later still finds its message there; the rest fail with tribRemoteError.
  double keepaliveSec = 0.5;
  // Clean shutdown flushes and closes every endpoint, waiting at most this long, then forces.
  double closeTimeoutSec = 5.0;
};

// The UCP tag for a message from `src` carrying executor tag `tag` under layout `o` (see above);
// tribInvalidArgument when the layout does not add up to 64 bits or a field does not fit.
Status ucxTagFor(const UcxOptions& o, int src, uint64_t tag, uint64_t* out);

// Creates the transport for `rank` of `nranks`: initialises UCP, exchanges worker addresses
// through `oob` (every rank must call it), and connects to every rank. Errors:
// tribNotSupported when UCX has no usable transport for `tls`, tribInvalidArgument for bad
// rank/options, tribSystemError/tribRemoteError when UCX or the exchange fails.
Status createUcxTransport(int rank, int nranks, const OobAllGather& oob, const UcxOptions& opts,
                          std::unique_ptr<Transport>* out);
// How many UCP contexts this process has created. Transports with the same options and UCX_*
// environment share one (a split reuses its parent's); each has its own worker and endpoints.
uint64_t ucxContextsCreated();

}  // namespace trib
