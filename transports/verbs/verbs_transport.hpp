// The verbs transport: ranks on other hosts over RDMA (InfiniBand, RoCE) through libibverbs, one
// reliable-connected queue pair per pair of ranks (docs/VERBS.md).
//
// Small messages go eagerly: copied into a registered send buffer and SENT into one of the
// peer's pre-posted receive buffers, with credits (the peer writes how many buffers it reposted
// into our memory by RDMA, so credits never wait on a credit message). Large ones go zero-copy:
// a ready-to-send notice, then the receiver, once it has matched it with a posted receive, writes
// a clear-to-send entry (where, rkey, length) into the sender's FIFO by RDMA, and the sender
// RDMA-WRITEs the data from the caller's buffer straight into the receiver's, the last chunk
// WRITE_WITH_IMM so the receiver learns it landed. Matching by (source, tag) is the shared match
// queue's. Errors on a queue pair (a dead peer: retries exhausted; a probe goes out while work
// waits on a peer) fail that peer's operations with a message naming it.
#pragma once
#include <memory>

#include "transports/transport.hpp"

namespace trib {

struct TransportDescriptor;
// The registry's entry: ranks on other hosts when every rank has an active RDMA port
// (RankLocation::rdma), above UCX; TRIB_TRANSPORT=verbs forces it for ranks on one host too.
TransportDescriptor verbsTransportDescriptor();
// Whether this process has an RDMA port it would use (published in its RankLocation).
bool verbsPortAvailable();
// Test hook (tests/test_verbs.cpp): while on, this process's verbs transports advertise a wrong
// remote key in the clear-to-send entries of their large receives, so their senders' RDMA
// WRITEs are refused with a remote access error. Off unless a test turns it on.
void verbsTestCorruptAdvertisedRkeys(bool on);
// Test hook: while on, verbs transports connected from then on advertise a wrong remote key for
// their window, so their peers' RDMA READs and WRITEs of it are refused.
void verbsTestCorruptWindowRkeys(bool on);

}  // namespace trib
