// The transport interface: the small contract every way of moving bytes implements
// (loopback threads, shared memory, UCX, verbs, NVLink, the switch client).
//
// Addressing is by communicator rank. Messages are matched by (source rank, tag) exactly; the
// executor derives tags from the collective's sequence number and the message's index within
// that pair of ranks, so a transport never needs to order messages itself. All posts are
// non-blocking: completion is reported through TransferOp, driven by progress().
#pragma once
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/dtype.hpp"
#include "common/memory_kind.hpp"
#include "common/status.hpp"

namespace trib {

// Completion record for one posted send or receive. Owned by the caller, which must keep it
// alive (and not move it) until done() or until the transport is aborted/closed.
struct TransferOp {
  enum State : int { kPending = 0, kDone = 1, kFailed = 2 };
  std::atomic<int> state{kPending};
  Status error;  // set before state becomes kFailed
  // The kind of the buffer posted with it, as the caller knows it (the executor sets it for every
  // message): a transport that reaches device memory reads it instead of asking the driver per
  // operation. Host unless the caller says otherwise; transports of host memory ignore it.
  MemoryKind memory = MemoryKind::Host;

  bool done() const { return state.load(std::memory_order_acquire) != kPending; }
  void complete() { state.store(kDone, std::memory_order_release); }
  void fail(Status s) {
    error = std::move(s);
    state.store(kFailed, std::memory_order_release);
  }
};

// A receive that reduces as it lands: dst = local op incoming (local may alias dst).
// Transports that can read the sender's bytes directly (loopback, shm) reduce without a
// staging copy; others receive into a bounce buffer and call the reducer.
struct ReduceSpec {
  const void* local = nullptr;
  DataType dtype = tribFloat32;
  RedOp op = tribSum;
};
// The checks every transport's postRecv makes of a reduce-receive of `bytes` ("UCX: invalid ...").
inline Status checkReduceSpec(const char* transport, const ReduceSpec& r, size_t bytes) {
  if (!validDataType(r.dtype) || !validRedOp(r.op))
    return errorf(tribInvalidArgument, "%s: invalid reduction (dtype %d, op %d)", transport,
                  static_cast<int>(r.dtype), static_cast<int>(r.op));
  if (bytes % dataTypeSize(r.dtype) != 0)
    return errorf(tribInvalidArgument, "%s: reduce-receive of %zu bytes is not a whole number of %s elements",
                  transport, bytes, dataTypeName(r.dtype));
  if (!r.local && bytes > 0)
    return errorf(tribInvalidArgument, "%s: reduce-receive with null local operand", transport);
  return Status::Ok();
}

// Out-of-band exchange used while connecting (the bootstrap provides it): every rank passes its
// blob (e.g. a UCX worker address or a shm segment name) and receives all ranks' blobs, in rank order.
using OobAllGather =
    std::function<Status(const std::vector<uint8_t>& mine, std::vector<std::vector<uint8_t>>& all)>;

// Peer memory: every rank's window, mapped into this process, and counted signals between ranks
// (the provider of a schedule's peer-memory steps, algo/schedule.hpp; shm now, CUDA IPC later).
// The executor does the loads and stores itself, through its engine; the provider only maps.
class PeerWindows {
 public:
  virtual ~PeerWindows() = default;
  // Every rank's window has this many bytes (aligned to 64).
  virtual uint64_t windowBytes() const = 0;
  // Where communicator rank r's window is mapped here (this rank's own included).
  virtual uint8_t* windowOf(int rank) const = 0;
  // Sends the next signal to `peer`, after everything this thread stored before (release). It
  // carries the low bits of `fingerprint` (fingerprintMask), which the executor derives from the
  // call, so that ranks running different calls find out instead of reading wrong data.
  virtual void signal(int peer, uint32_t fingerprint) = 0;
  virtual uint32_t fingerprintMask() const = 0;
  // Loads how many signals `peer` has sent this rank and the latest one's fingerprint (acquire:
  // what it stored before them is visible). Below `target`, it also checks the peer: an error
  // once the peer is gone or broken (tribRemoteError naming it) or the windows were aborted.
  virtual Status pollSignals(int peer, uint64_t target, uint64_t* count, uint32_t* fingerprint) = 0;
  // Signals from `peer` that this rank's executions have waited for (or will, once posted): the
  // executor numbers its Wait steps from it, so that it continues across calls.
  virtual uint64_t& waitsPosted(int peer) = 0;

  // Expose (algo/schedule.hpp): instead of copying `bytes` of this rank's memory at `src` (of
  // kind `kind`) into its own window at byte `offset`, publish that peers read that range from src
  // itself; false: these windows cannot map src for the peers, and the executor copies. Called
  // before the signal that releases it; src stays unchanged until every reader is done (the
  // schedule's proof). Default: never.
  virtual bool expose(uint64_t /*offset*/, const void* /*src*/, uint64_t /*bytes*/, MemoryKind /*kind*/) {
    return false;
  }
  // This rank writes its own window's [offset, offset+bytes): the exposures overlapping it end.
  virtual void unexpose(uint64_t /*offset*/, uint64_t /*bytes*/) {}
  // Where this rank reads or writes (get or put) [offset, offset+bytes) of `rank`'s window: the
  // buffer that peer exposed there, or the window itself (errors: the exposed buffer cannot be
  // mapped here). A rank resolves its own window's exposures itself (the executor knows them).
  virtual Status peerAddress(int rank, uint64_t offset, uint64_t /*bytes*/, uint8_t** at) {
    *at = windowOf(rank) + offset;
    return Status::Ok();
  }
  Status readAddress(int rank, uint64_t offset, uint64_t bytes, const uint8_t** at) {
    uint8_t* p = nullptr;
    TRIB_RETURN_IF_ERROR(peerAddress(rank, offset, bytes, &p));
    *at = p;
    return Status::Ok();
  }
  // Reads and writes peerAddress resolved to a peer's exposed buffer so far (tests, trib-perf).
  virtual uint64_t exposedReads() const { return 0; }

  // Carried bytes (NCCL's LL idea, for the smallest calls): a signal may carry a copy of up to
  // kCarryBytes of its sender's window in the signal's own cache line, so a peer that waited for
  // it reads them without fetching the sender's window line (one cache-line transfer instead of
  // two). Only a copy and a hint: the window holds the bytes as before, and every read that
  // cannot use the copy reads the window.
  static constexpr uint64_t kCarryBytes = 16;
  // The signals this rank sends next carry [offset, offset+bytes) of its own window, as it is
  // when each is sent. Default: nothing is carried.
  virtual void carryNext(uint64_t /*offset*/, uint64_t /*bytes*/) {}
  // Copies [offset, offset+bytes) of `rank`'s window into `into` from a signal of `rank`'s that
  // carried it and is no older than the latest signal from `rank` this rank has waited for (so
  // the copy is what the window holds for a read that the schedule orders after that wait);
  // false: none such, read the window.
  virtual bool readCarried(int /*rank*/, uint64_t /*offset*/, uint64_t /*bytes*/, void* /*into*/) {
    return false;
  }
  // Reads readCarried answered so far (tests, trib-perf).
  virtual uint64_t carriedReads() const { return 0; }
  // The CUDA device the windows are on (device memory, the nvlink provider's); -1: host memory.
  virtual int device() const { return -1; }

  // ---- remote windows (the peers' are not mapped here: verbs across hosts) ----
  // A remote provider maps only this rank's own window; windowOf(peer) is then an address range
  // reserved for that peer's window and never accessed (the executor's scoreboard orders steps by
  // address ranges, so every window needs one). The executor moves peer-window bytes only through
  // postPut/postGet, which complete through the TransferOp, driven by progress(); peerAddress and
  // expose are not used. Signal(p) is called only once every earlier put and get of the rank has
  // completed (the scoreboard's release rule), so the provider need not order it after them
  // itself; it must be delivered after them, and pollSignals reads this rank's own memory.
  virtual bool remote() const { return false; }
  // Writes `bytes` from this rank's `src` into `peer`'s window at byte `offset`; src stays
  // unchanged until op completes (then the bytes are in the peer's window).
  virtual Status postPut(int /*peer*/, uint64_t /*offset*/, const void* /*src*/, uint64_t /*bytes*/,
                         TransferOp* /*op*/) {
    return Status(tribInternalError, "these windows are mapped: put through windowOf");
  }
  // Reads `bytes` of `peer`'s window at byte `offset` into this rank's `dst`.
  virtual Status postGet(int /*peer*/, uint64_t /*offset*/, void* /*dst*/, uint64_t /*bytes*/,
                         TransferOp* /*op*/) {
    return Status(tribInternalError, "these windows are mapped: get through windowOf");
  }
  // Drives posted puts, gets and signals (remote providers). Errors: transport-wide failures only.
  virtual Status progress() { return Status::Ok(); }
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;

  // Send `bytes` from `buf` to `peer`, from the caller's buffer itself: the transport may read
  // `buf` at any time until op->done() (eagerly into its own buffers, or by rendezvous, RDMA or
  // CMA once the receiver matched), and the caller keeps it valid and unchanged until then (or
  // until detachSend). The executor guarantees that (src/exec/executor.hpp: a step that would
  // overwrite a send's source waits for it, lands in the executor's staging, or detaches it).
  // A send may complete before or only after its receive is posted (eager or rendezvous).
  virtual Status postSend(int peer, uint64_t tag, const void* buf, size_t bytes, TransferOp* op) = 0;
  // Receive exactly `bytes` from `peer` into `buf` (a different length fails the op with a
  // message naming both sizes). With `reduce`, combine instead of overwrite. `buf` (and
  // reduce->local) must stay valid until op->done(). The caller gives a reduce-receive only memory
  // the transport reducesInto (buf and local alike), and any message only memory it reaches.
  virtual Status postRecv(int peer, uint64_t tag, void* buf, size_t bytes, const ReduceSpec* reduce,
                          TransferOp* op) = 0;
  // Whether detachSend works here: the transport holds an unmatched send's data by reference in
  // memory it manages (loopback's mailbox, shm's rings and CMA descriptors), so it can copy the
  // rest aside; not one whose posted send the network reads directly (UCX: a rendezvous or RDMA).
  virtual bool detachesSends() const { return false; }
  // A posted send stops referencing the caller's buffer: what is left of it is copied aside (a
  // receiver reading it at that moment is waited for, bounded) and the op completes; the message
  // is still delivered. The executor calls it only where detachesSends(), in two cases: a later
  // step of an in-place schedule must overwrite the buffer and waits only for this send (one copy
  // now, cheaper than landing that step in staging and copying it into place after the exchange),
  // and an execution given up mid-flight (Execution::detachPostedSends).
  virtual void detachSend(TransferOp* /*op*/) {}
  // Drive pending operations. Returns an error only for a transport-wide failure.
  virtual Status progress() = 0;
  // Fail every pending operation with `why` (abort, timeout, peer loss). Safe from any thread.
  virtual void abort(const Status& why) = 0;
  // The memory it sends from, receives into, and reduce-receives into (its ReduceSpec's local
  // operand included): its registry descriptor's caps as this process's probe narrows them
  // (transportMemoryReach), given by core when it connects (one statement of them); host memory
  // of every kind until then. Without `reducesInto`, it reduces into whatever it receives into.
  void setMemoryReach(MemoryKindSet sendsFrom, MemoryKindSet receivesInto) {
    setMemoryReach(sendsFrom, receivesInto, receivesInto);
  }
  void setMemoryReach(MemoryKindSet sendsFrom, MemoryKindSet receivesInto, MemoryKindSet reducesInto) {
    sendsFrom_ = sendsFrom;
    receivesInto_ = receivesInto;
    reducesInto_ = reducesInto & receivesInto;
  }
  bool sendsFrom(MemoryKind k) const { return sendsFrom_ & memoryKindBit(k); }
  bool receivesInto(MemoryKind k) const { return receivesInto_ & memoryKindBit(k); }
  bool reducesInto(MemoryKind k) const { return reducesInto_ & memoryKindBit(k); }
  // Every rank's window, when this transport maps them all (one host); nullptr: it does not.
  // Owned by the transport; its abort() makes signalsFrom() fail.
  virtual PeerWindows* windows() { return nullptr; }

 private:
  MemoryKindSet sendsFrom_ = kHostMemoryKinds, receivesInto_ = kHostMemoryKinds,
                reducesInto_ = kHostMemoryKinds;
};

class CollectiveOffload;
enum class Coll : uint8_t;  // algo/schedule.hpp

// One collective handed to an offload. `count` has the schedule's meaning (CollArgs): elements per
// rank for all-reduce/reduce/broadcast, the slice each rank sends for all-gather (dst holds nranks
// slices in rank order), the block each rank receives for reduce-scatter (src holds nranks
// blocks); barrier 0. Buffers a rank does not use may be null (reduce: dst off the root;
// broadcast: src off the root, dst on it).
struct OffloadCall {
  Coll coll;
  int nranks = 1, rank = 0, root = 0;
  const void* src = nullptr;
  void* dst = nullptr;
  uint64_t count = 0;
  DataType dtype = tribFloat32;
  RedOp op = tribSum;                    // sum/prod/min/max (avg is posted as sum and divided by the caller)
  MemoryKind memory = MemoryKind::Host;  // the weaker of src's and dst's kinds
};

// An in-network reduction service (the aggregation-switch client): every member of its group
// posts the same sequence of collectives; for an all-reduce each receives in `dst` the reduction
// of all members' `src`. Posts are non-blocking and complete through TransferOp, driven by
// progress(). Members must post in the same order (the executor posts SwitchReduce steps in
// schedule order).
class CollectiveOffload {
 public:
  virtual ~CollectiveOffload() = default;
  virtual const char* name() const = 0;
  // `op` is sum/prod/min/max (avg is posted as sum and divided by the caller). `src` and `dst` may
  // be equal; both must stay valid until op->done().
  virtual Status postAllReduce(const void* src, void* dst, uint64_t count, DataType dtype, RedOp op,
                               TransferOp* done) = 0;
  // Any other collective (see OffloadCall); one it cannot run fails with tribNotSupported and the
  // reason. Default: all-reduce is the only one (posted through postAllReduce).
  virtual Status postCollective(const OffloadCall& /*call*/, TransferOp* /*done*/) {
    return Status(tribNotSupported, std::string(name()) + " runs only all-reduce");
  }
  virtual Status progress() = 0;
  // A count that moves whenever an operation advances without completing (a chunk of a long
  // one): waiters that see it move keep polling instead of backing off into sleeps.
  virtual uint64_t progressCount() const { return 0; }
  // Payload bytes it has sent to and received from the network so far, for an offload that
  // counts them (the switch client); false: it does not count.
  virtual bool payloadTraffic(uint64_t* /*sent*/, uint64_t* /*received*/) const { return false; }
  // Fail pending operations and leave the group (the other members' operations fail too, so
  // nobody waits for this one). Safe to call more than once.
  virtual void abort(const Status& why) = 0;
  // After a wait ran out: what the service says its oldest pending operation lacks, naming the
  // ranks it waits for, or whom the step waits on when it cannot tell within `budget` ("": no
  // idea), for the timeout's message.
  virtual std::string explainStall(std::chrono::milliseconds /*budget*/) { return ""; }
};

}  // namespace trib
