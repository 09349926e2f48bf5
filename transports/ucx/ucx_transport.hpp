// UCX transport: ranks in different processes or hosts, over UCP tag matching.
//
// One UCP context + worker per transport instance; worker addresses are exchanged through the
// bootstrap's OobAllGather at creation and an endpoint is created to every rank. UCX picks the
// wire (TCP, shared memory, CMA, InfiniBand, RoCE) from what the host has and UCX_TLS / tls.
//
// Tag layout. UCP matches receives by tag only (not by sender), so the 64-bit UCP tag carries,
// from the most significant bit down:
//   [ comm : commBits ][ source rank : rankBits ][ executor tag : 64 - commBits - rankBits ]
// `comm` is a hash of UcxOptions::commId folded to commBits, so communicators sharing a process
// (and, in future, a worker) never match each other's messages. The executor's tag (its sequence
// number and message index) must fit the low bits; a wider tag or rank is refused with
// tribInvalidArgument. Defaults: 8 comm bits, 20 rank bits (about 1M ranks), 36 executor bits.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "transports/transport.hpp"

namespace trib {

struct UcxOptions {
  uint64_t commId = 0;  // distinguishes communicators; hashed into commBits
  int commBits = 8;
  int rankBits = 20;
  // UCX transports to use, as UCX_TLS ("tcp", "sm", "rc,sm", ...); empty: UCX_TLS or UCX's default.
  std::string tls;
  // How often UCX checks that peers are alive (UCX KEEPALIVE_INTERVAL); a peer that dies is
  // reported within a few intervals. <= 0 keeps UCX's default (20 s).
  double keepaliveSec = 0.5;
  // Clean shutdown flushes and closes every endpoint, waiting at most this long, then forces.
  double closeTimeoutSec = 5.0;
  // detachSend waits this long for a pending send to complete (UCP cannot retarget a posted send).
  double detachTimeoutSec = 30.0;
};

// Number of executor-tag bits the layout leaves: 64 - commBits - rankBits.
inline int ucxUserTagBits(const UcxOptions& o) { return 64 - o.commBits - o.rankBits; }

// Creates the transport for `rank` of `nranks`: initialises UCP, exchanges worker addresses
// through `oob` (every rank must call it), and connects to every rank. Errors:
// tribNotSupported when UCX has no usable transport for `tls`, tribInvalidArgument for bad
// rank/options, tribSystemError/tribRemoteError when UCX or the exchange fails.
Status createUcxTransport(int rank, int nranks, const OobAllGather& oob, const UcxOptions& opts,
                          std::unique_ptr<Transport>* out);

}  // namespace trib
