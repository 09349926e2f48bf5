// UCX transport: ranks in different processes or hosts, over UCP tag matching.
//
// One UCP context per process and configuration (options and UCX_* environment), shared by the
// transports of every communicator that asks for it, and one worker shared by up to 2^commBits of
// them (UcxOptions::shareWorker), so a split neither initialises UCX nor opens its interfaces
// again; each communicator has its own endpoints on the worker. Worker addresses (with the
// communicator's slot on its worker) are exchanged through the bootstrap's OobAllGather at
// creation and an endpoint is created to every rank. UCX picks the
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
// with commBits + rankBits + seqBits + indexBits = 64 (defaults 8 + 20 + 16 + 20):
//  - comm: the receiving communicator's slot on its worker (sent in its address), so communicators
//    sharing a worker never match each other's messages. Slots are handed out round robin, and a
//    communicator that closes first takes its unreceived messages off the worker;
//  - seq: the point-to-point bit, then the low seqBits-1 bits of the sequence number. Sequence
//    numbers wrap there, which is safe while fewer than 2^(seqBits-1) operations (32768 by
//    default) between the same two ranks have messages in flight at once;
//  - index: the message index, which must be below 2^indexBits (1M messages per pair per
//    operation by default); a larger one, or a rank >= 2^rankBits, is refused with
//    tribInvalidArgument, never folded.
// Tag secret. UCX accepts messages from any endpoint that reaches a worker, and a receive does not
// say which one sent a message. So each transport draws a random 64-bit secret (randomBytes) and
// publishes it in its address blob, which only ranks that passed the store's authentication see;
// every tag sent to it is XOR-ed with its secret below the comm field, and its receives expect
// that: (incoming ^ S) & m == t & m exactly when incoming & m == (t ^ S) & m, so masked probes
// still match. A host outside the job must guess rankBits + seqBits + indexBits bits of it to
// land a message in a receive. Not cryptographic: tags travel in clear (ucx_address.hpp).
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
  int commBits = 8;  // 2^commBits communicators share a worker
  int rankBits = 20;
  int seqBits = 16;
  int indexBits = 20;
  // Share a worker with this process's other communicators of the same options (a free slot on
  // one); false: a worker of its own (TRIB_SHARE_TRANSPORTS=0).
  bool shareWorker = true;
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

// The UCP tag for a message to communicator slot `comm` from `src` carrying executor tag `tag`
// under layout `o` (see above); tribInvalidArgument when the layout does not add up to 64 bits or
// a field does not fit.
Status ucxTagFor(const UcxOptions& o, uint32_t comm, int src, uint64_t tag, uint64_t* out);

// Creates the transport for `rank` of `nranks`: initialises UCP, exchanges worker addresses
// through `oob` (every rank must call it), and connects to every rank. Errors:
// tribNotSupported when UCX has no usable transport for `tls`, tribInvalidArgument for bad
// rank/options, tribSystemError/tribRemoteError when UCX or the exchange fails.
Status createUcxTransport(int rank, int nranks, const OobAllGather& oob, const UcxOptions& opts,
                          std::unique_ptr<Transport>* out);
// How many UCP contexts this process has created. Transports with the same options and UCX_*
// environment share one (a split reuses its parent's); each has its own endpoints.
uint64_t ucxContextsCreated();
// How many UCP workers this process has created (a split on a shared worker creates none).
uint64_t ucxWorkersCreated();

}  // namespace trib
