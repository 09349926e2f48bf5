#include "transports/loopback/loopback.hpp"

#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include <sys/mman.h>

#include "common/env.hpp"
#include "reduce/reduce.hpp"
#include "transports/expose_table.hpp"
#include "transports/match_queue.hpp"
#include "transports/registry.hpp"

namespace trib {

namespace {

struct PendingSend {
  const void* data = nullptr;  // the sender's buffer, or detached.data()
  size_t bytes = 0;
  TransferOp* op = nullptr;    // null once detached (the send already completed)
  std::vector<char> detached;  // owned copy after detachSend (an abandoned execution's send)
};

struct PendingRecv {
  void* dst = nullptr;
  size_t bytes = 0;
  bool reduce = false;
  ReduceSpec spec;
  TransferOp* op = nullptr;
};

// One per receiving rank: keyed by (source rank, tag).
struct Mailbox {
  std::mutex mu;
  MatchQueue<PendingRecv, PendingSend> queue;
};

// Moves the bytes of a matched pair and completes both. Runs outside any lock.
void deliver(const void* data, size_t sendBytes, TransferOp* sendOp, const PendingRecv& r, int src, int dst) {
  if (sendBytes != r.bytes) {
    Status err =
        errorf(tribInvalidUsage,
               "message size mismatch: rank %d sent %zu bytes but rank %d expected %zu (are the counts, "
               "dtypes and collectives the same on every rank?)",
               src, sendBytes, dst, r.bytes);
    if (sendOp) sendOp->fail(err);
    r.op->fail(err);
    return;
  }
  if (r.bytes > 0) {
    if (r.reduce) {
      reduce(r.dst, r.spec.local, data, r.bytes / dataTypeSize(r.spec.dtype), r.spec.dtype, r.spec.op);
    } else {
      std::memcpy(r.dst, data, r.bytes);
    }
  }
  if (sendOp) sendOp->complete();
  r.op->complete();
}

}  // namespace

// One signal counter per ordered pair of ranks, each on its own cache line.
struct alignas(64) SignalWord {
  std::atomic<uint64_t> word{0};  // count << 32 | the latest signal's fingerprint
};

class LoopbackFabric {
 public:
  // windowBytes > 0: every rank's window (the fabric holds every rank of the communicator).
  LoopbackFabric(int nranks, uint64_t windowBytes)
      : boxes_(nranks), dead_(nranks), windowBytes_(windowBytes) {
    if (!windowBytes_) return;
    // Untouched pages cost nothing: a window is only as big as the calls that use it.
    void* m = mmap(nullptr, windowBytes_ * nranks, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
      windowBytes_ = 0;  // no windows: peer-memory plans are not offered
      return;
    }
    windows_ = static_cast<uint8_t*>(m);
    signals_ = std::vector<SignalWord>(static_cast<size_t>(nranks) * nranks);
    exposes_ = std::vector<ExposeTable>(static_cast<size_t>(nranks));
  }
  ~LoopbackFabric() {
    if (windows_) munmap(windows_, windowBytes_ * boxes_.size());
  }
  int size() const { return static_cast<int>(boxes_.size()); }
  Mailbox& box(int rank) { return boxes_[rank]; }
  bool dead(int rank) const { return dead_[rank].load(std::memory_order_acquire); }
  void markDead(int rank) { dead_[rank].store(true, std::memory_order_release); }
  uint64_t windowBytes() const { return windowBytes_; }
  uint8_t* window(int rank) const { return windows_ + windowBytes_ * rank; }
  // Signals from `from` to `to`.
  SignalWord& signals(int from, int to) { return signals_[static_cast<size_t>(to) * boxes_.size() + from]; }
  // What rank's window exposes (its buffers' addresses: one address space).
  ExposeTable& exposes(int rank) { return exposes_[rank]; }

 private:
  std::vector<Mailbox> boxes_;
  std::vector<std::atomic<bool>> dead_;
  uint64_t windowBytes_;
  uint8_t* windows_ = nullptr;
  std::vector<SignalWord> signals_;
  std::vector<ExposeTable> exposes_;
};

std::shared_ptr<LoopbackFabric> makeLoopbackFabric(int nranks, bool windows) {
  const int64_t bytes = windows ? envInt("TRIB_WINDOW_BYTES") : 0;
  return std::make_shared<LoopbackFabric>(nranks,
                                          bytes > 0 ? (static_cast<uint64_t>(bytes) + 127) / 128 * 128 : 0);
}

namespace {

// One rank's view of the fabric's windows (transport.hpp: PeerWindows).
class LoopbackWindows final : public PeerWindows {
 public:
  LoopbackWindows(LoopbackFabric* fabric, int rank)
      : fabric_(fabric), rank_(rank), sent_(fabric->size()), waited_(fabric->size()) {}
  uint64_t windowBytes() const override { return fabric_->windowBytes(); }
  uint8_t* windowOf(int rank) const override { return fabric_->window(rank); }
  void signal(int peer, uint32_t fingerprint) override {
    fabric_->signals(rank_, peer).word.store((++sent_[peer] << 32) | fingerprint, std::memory_order_release);
  }
  uint32_t fingerprintMask() const override { return 0xffffffffu; }
  Status pollSignals(int peer, uint64_t target, uint64_t* count, uint32_t* fingerprint) override {
    uint64_t word = fabric_->signals(peer, rank_).word.load(std::memory_order_acquire);
    if ((word >> 32) < target) {
      if (fabric_->dead(rank_)) return errorf(tribAborted, "rank %d was aborted", rank_);
      // A peer that signalled and then failed is read first (it found mismatched arguments).
      if (fabric_->dead(peer) &&
          ((word = fabric_->signals(peer, rank_).word.load(std::memory_order_acquire)) >> 32) < target)
        return errorf(tribRemoteError, "rank %d aborted or failed; its signal will never arrive", peer);
    }
    *count = word >> 32;
    *fingerprint = static_cast<uint32_t>(word);
    return Status::Ok();
  }
  uint64_t& waitsPosted(int peer) override { return waited_[peer]; }
  // Threads share the address space: any host buffer is exposed by its address.
  bool expose(uint64_t offset, const void* src, uint64_t bytes, MemoryKind kind) override {
    ExposeHandle h;
    h.w[0] = reinterpret_cast<uintptr_t>(src);
    return kind != MemoryKind::Device && fabric_->exposes(rank_).publish(offset, bytes, h);
  }
  void unexpose(uint64_t offset, uint64_t bytes) override { fabric_->exposes(rank_).drop(offset, bytes); }
  Status peerAddress(int rank, uint64_t offset, uint64_t bytes, uint8_t** at) override {
    ExposeHandle h;
    uint64_t into = 0;
    const int found = fabric_->exposes(rank).find(offset, bytes, &h, &into);
    if (found < 0)
      return errorf(tribInternalError, "rank %d's window [%llu, +%llu) is exposed only in part", rank,
                    static_cast<unsigned long long>(offset), static_cast<unsigned long long>(bytes));
    if (found == 0) return PeerWindows::peerAddress(rank, offset, bytes, at);
    // A rank that failed returned to its caller, who may free what it exposed (a read already
    // past this check is not stopped: see docs/DESIGN.md "Peer memory").
    if (fabric_->dead(rank))
      return errorf(tribRemoteError, "rank %d aborted or failed; the buffer it exposed is its caller's again",
                    rank);
    if (rank != rank_) exposedReads_.fetch_add(1, std::memory_order_relaxed);
    *at = reinterpret_cast<uint8_t*>(h.w[0]) + into;
    return Status::Ok();
  }
  uint64_t exposedReads() const override { return exposedReads_.load(std::memory_order_relaxed); }

 private:
  LoopbackFabric* fabric_;
  int rank_;
  std::vector<uint64_t> sent_, waited_;
  std::atomic<uint64_t> exposedReads_{0};
};

class LoopbackTransport final : public Transport {
 public:
  LoopbackTransport(std::shared_ptr<LoopbackFabric> fabric, int rank)
      : fabric_(std::move(fabric)), rank_(rank) {
    if (fabric_->windowBytes()) windows_ = std::make_unique<LoopbackWindows>(fabric_.get(), rank_);
  }
  const char* name() const override { return "loopback"; }
  PeerWindows* windows() override { return windows_.get(); }

  Status postSend(int peer, uint64_t tag, const void* buf, size_t bytes, TransferOp* op) override {
    TRIB_RETURN_IF_ERROR(checkPeer(peer));
    Mailbox& box = fabric_->box(peer);
    std::unique_lock<std::mutex> lock(box.mu);
    PendingRecv r;
    if (box.queue.takeRecv(rank_, tag, &r)) {
      lock.unlock();
      deliver(buf, bytes, op, r, rank_, peer);
      return Status::Ok();
    }
    // Waits by reference: the caller keeps `buf` unchanged until the op completes.
    box.queue.addMessage(rank_, tag, PendingSend{buf, bytes, op, {}});
    return Status::Ok();
  }

  Status postRecv(int peer, uint64_t tag, void* buf, size_t bytes, const ReduceSpec* reduce,
                  TransferOp* op) override {
    TRIB_RETURN_IF_ERROR(checkPeer(peer));
    PendingRecv r{buf, bytes, reduce != nullptr, reduce ? *reduce : ReduceSpec{}, op};
    Mailbox& box = fabric_->box(rank_);
    std::unique_lock<std::mutex> lock(box.mu);
    PendingSend s;
    if (box.queue.takeMessage(peer, tag, &s)) {
      lock.unlock();
      deliver(s.data, s.bytes, s.op, r, peer, rank_);
      return Status::Ok();
    }
    if (fabric_->dead(peer)) {
      op->fail(peerLost(peer));
      return Status::Ok();
    }
    box.queue.addRecv(peer, tag, r);
    return Status::Ok();
  }

  bool detachesSends() const override { return true; }
  void detachSend(TransferOp* op) override {
    for (int peer = 0; peer < fabric_->size(); ++peer) {
      Mailbox& box = fabric_->box(peer);
      std::lock_guard<std::mutex> lock(box.mu);
      PendingSend* s = box.queue.findMessageIf(
          [&](int src, uint64_t, const PendingSend& m) { return src == rank_ && m.op == op; });
      if (!s) continue;
      s->detached.assign(static_cast<const char*>(s->data), static_cast<const char*>(s->data) + s->bytes);
      s->data = s->detached.data();
      s->op = nullptr;
      op->complete();
      return;
    }
  }

  Status progress() override { return Status::Ok(); }

  // This rank is gone: fail its own pending operations and every receive waiting on it.
  void abort(const Status& why) override {
    fabric_->markDead(rank_);
    for (int peer = 0; peer < fabric_->size(); ++peer) {
      Mailbox& box = fabric_->box(peer);
      std::lock_guard<std::mutex> lock(box.mu);
      box.queue.eraseMessagesIf([&](int src, uint64_t, PendingSend& s) {
        if (src != rank_) return false;
        if (s.op) s.op->fail(why);
        return true;
      });
      box.queue.eraseRecvsIf([&](int src, uint64_t, PendingRecv& r) {
        if (peer == rank_)
          r.op->fail(why);
        else if (src == rank_)
          r.op->fail(peerLost(rank_));
        else
          return false;
        return true;
      });
    }
  }

 private:
  Status checkPeer(int peer) const {
    if (peer < 0 || peer >= fabric_->size()) return errorf(tribInternalError, "loopback: no rank %d", peer);
    if (fabric_->dead(rank_)) return errorf(tribAborted, "rank %d was aborted", rank_);
    return Status::Ok();
  }
  static Status peerLost(int peer) {
    return errorf(tribRemoteError, "rank %d aborted or failed; its data will never arrive", peer);
  }

  std::shared_ptr<LoopbackFabric> fabric_;
  int rank_;
  std::unique_ptr<LoopbackWindows> windows_;
};

}  // namespace

std::unique_ptr<Transport> makeLoopbackTransport(std::shared_ptr<LoopbackFabric> fabric, int rank) {
  return std::make_unique<LoopbackTransport>(std::move(fabric), rank);
}

namespace {

// ---- In-process worlds ----------------------------------------------------------------------
// Ranks of one communicator that live in this process share a loopback fabric, found here by
// the communicator id. An entry lives until all of this process's ranks have joined, or until
// every rank that joined has let go of the fabric (an init that failed part-way): a retry with the
// same id then starts afresh instead of finding its ranks "joined twice".
struct World {
  int nranks = 0;
  int localCount = 0;
  std::weak_ptr<LoopbackFabric> fabric;  // owned by the joined ranks' transports
  std::vector<bool> joined;
  int joinedCount = 0;
};

struct WorldRegistry {
  std::mutex mu;
  std::map<uint64_t, std::shared_ptr<World>> worlds;
};
WorldRegistry& worlds() {
  static WorldRegistry r;
  return r;
}

bool loopbackCanConnect(const RankLocation& self, const RankLocation& peer) {
  return sameProcess(self, peer);
}

Status loopbackConnect(const TransportConnectArgs& args, std::unique_ptr<Transport>* out) {
  const RankLocation& me = (*args.locations)[args.rank];
  int local = 0;
  for (const RankLocation& l : *args.locations) local += sameProcess(me, l);
  std::shared_ptr<LoopbackFabric> fabric;
  TRIB_RETURN_IF_ERROR(joinLoopbackFabric(args.commId, args.nranks, local, args.rank, &fabric));
  *out = makeLoopbackTransport(std::move(fabric), args.rank);
  return Status::Ok();
}

}  // namespace

Status joinLoopbackFabric(uint64_t id, int nranks, int localCount, int rank,
                          std::shared_ptr<LoopbackFabric>* out) {
  WorldRegistry& reg = worlds();
  std::lock_guard<std::mutex> lock(reg.mu);
  auto& w = reg.worlds[id];
  std::shared_ptr<LoopbackFabric> fabric = w ? w->fabric.lock() : nullptr;
  if (!fabric) {
    w = std::make_shared<World>();
    w->nranks = nranks;
    w->localCount = localCount;
    fabric = makeLoopbackFabric(nranks, localCount == nranks);  // windows only with every rank here
    w->fabric = fabric;
    w->joined.assign(nranks, false);
  }
  if (w->nranks != nranks) {
    return errorf(tribInvalidUsage,
                  "rank %d was told nranks=%d but another rank of this communicator said %d", rank, nranks,
                  w->nranks);
  }
  if (w->joined[rank]) return errorf(tribInvalidUsage, "rank %d joined this communicator twice", rank);
  w->joined[rank] = true;
  *out = std::move(fabric);
  if (++w->joinedCount == w->localCount) reg.worlds.erase(id);  // complete: nobody else will look it up
  return Status::Ok();
}

TransportDescriptor loopbackTransportDescriptor() {
  TransportDescriptor d{};
  d.name = "loopback";
  d.reaches = "ranks in the same process";
  d.caps.reads = d.caps.writes = d.caps.reduces = kHostMemoryKinds;
  d.caps.twoSided = true;
  d.caps.windows = true;   // every rank's, when all are in this process
  d.caps.zeroCopy = true;  // the second of a matched pair copies straight from the sender's buffer
  d.priority = 300;
  d.needsExchange = false;
  d.canConnect = loopbackCanConnect;
  d.connect = loopbackConnect;
  return d;
}

}  // namespace trib
