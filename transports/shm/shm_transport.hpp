// Shared-memory transport for ranks that are processes on one host.
//
// Each rank creates one POSIX shm segment holding the rings its local peers send into (one ring
// per ordered pair, fixed-size slots, head/tail atomics on separate cache lines) and a table of
// single-copy descriptors for its own large sends. Segment names travel through the bootstrap's
// OobAllGather; once every peer has mapped a segment, its owner shm_unlinks it, so a crash (even
// SIGKILL) leaks nothing in /dev/shm.
//
// Messages are chunked into slots (header: tag, total bytes, offset); the receiver matches by
// (source, tag), buffers unexpected messages, and with a ReduceSpec reduces straight from the
// slot into the destination. Messages of cmaThreshold bytes or more go single-copy: the sender
// publishes {address, bytes} and the receiver pulls with process_vm_readv (CMA), when the kernel
// allows it (probed at connect); otherwise, or with TRIB_SHM_CMA=0, the slot path carries them.
//
// When every rank of the communicator is local, each segment also holds the rank's window (two
// cells for peer-memory schedules: one-shot and two-shot all-reduce, algo/oneshot.cpp) and one
// signal line per local rank: PeerWindows (transport.hpp), which the executor runs those
// schedules over. The transport only maps and signals; the algorithm is the schedule's.
//
// What a process holds of a peer process (a pidfd, the peer's tribMemAlloc buffers mapped here) is
// shared by every shm transport connected to that process: a split maps nothing its parent mapped.
// Segments stay per transport (docs/DESIGN.md says why).
//
// A peer whose process is gone (kill(pid, 0) fails, or it is a zombie) fails every pending op
// with that peer with tribRemoteError naming its rank, within livenessIntervalMs of progress().
#pragma once
#include <memory>
#include <vector>

#include "transports/transport.hpp"

namespace trib {

struct TransportDescriptor;
// The registry's entry (transports/registry.hpp): processes on the same host.
TransportDescriptor shmTransportDescriptor();

struct ShmOptions {
  size_t slotBytes = 64 << 10;  // payload bytes per slot; a multiple of 64
  uint32_t nslots = 16;         // slots per ring
  int cma = -1;                 // -1: TRIB_SHM_CMA (0/1; default 1 = use when the kernel allows), 0/1 force
  size_t cmaThreshold = 256 << 10;
  int livenessIntervalMs = 50;  // how often progress() checks that peers are alive
  int detachTimeoutMs = 30000;  // bound on detachSend (giving up an execution) waiting for a reader
  int64_t windowBytes = -1;     // each rank's window (two cells); -1: TRIB_WINDOW_BYTES; 0: none
  int mapped = -1;  // expose tribMemAlloc buffers to peers; -1: TRIB_SHM_MAPPED (default 1), 0/1 force
};

// How many peers' shared allocations this process has mapped (pidfd_getfd + mmap). The mappings
// are kept per peer process, shared by every shm transport connected to it.
uint64_t shmPeerMappingsMade();

class ShmTransport final : public Transport {
 public:
  // Collective over all `nranks` ranks (it calls `oob` twice). `localRanks` lists the ranks on this
  // host, including `rank`, identical on every local rank; other ranks pass through the exchange.
  static Status create(int rank, int nranks, const std::vector<int>& localRanks, const OobAllGather& oob,
                       const ShmOptions& options, std::unique_ptr<ShmTransport>* out);
  ~ShmTransport() override;

  const char* name() const override { return "shm"; }
  Status postSend(int peer, uint64_t tag, const void* buf, size_t bytes, TransferOp* op) override;
  Status postRecv(int peer, uint64_t tag, void* buf, size_t bytes, const ReduceSpec* reduce,
                  TransferOp* op) override;
  bool detachesSends() const override { return true; }
  void detachSend(TransferOp* op) override;
  Status progress() override;
  void abort(const Status& why) override;
  // Every rank's window, when every rank is local and windows are enabled; else nullptr.
  PeerWindows* windows() override;

  // Whether large sends to `peer` go single-copy (CMA enabled and the peer can read this process).
  bool usesCma(int peer) const;
  // Whether this rank's peers map its tribMemAlloc buffers (expose; every peer passed the probe).
  bool exposes() const;
  // The segment name prefix under /dev/shm (for leak checks).
  static constexpr const char* kSegmentPrefix = "trib-";

  struct Impl;

 private:
  explicit ShmTransport(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<PeerWindows> windows_;
};

// Before a peer's segment (opened as `fd`) is mapped: it must be this user's alone (owner the
// effective uid, no group/other bits: what shm_open(0600) made) and at least `bytes` long, since
// mapping past its end faults on first touch. docs/SECURITY.md.
Status checkPeerSegment(int fd, uint64_t bytes, int peerRank, const std::string& name);

}  // namespace trib
