// Remote windows without a NIC, for the executor's tests: a group of providers in one process, one
// per rank (threads), whose peers' windows are NOT mapped (PeerWindows::remote()), like verbs
// across hosts. A put or get is done only by the issuing rank's progress(), a random number of
// polls after it was posted, and completions come out of order, so a schedule or executor that
// relies on one before its completion reads or writes the wrong bytes. Signals land at once (as a
// NIC delivers a posted write): one posted while a put or get of the same rank to that peer is
// still pending has overtaken it, which the group counts (signalsOvertaking).
#pragma once
#include <sys/mman.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <vector>

#include "common/text.hpp"
#include "transports/transport.hpp"

namespace trib::testing {

class RemoteWindowGroup {
 public:
  // `maxDelay`: a put or get completes after 1 to maxDelay + 1 of its rank's progress() calls.
  RemoteWindowGroup(int n, uint64_t windowBytes, int maxDelay = 8, uint32_t seed = 1)
      : n_(n), bytes_(windowBytes), signals_(static_cast<size_t>(n) * n) {
    // The peers' windows' placeholder ranges: reserved, never accessible.
    reserved_ = static_cast<uint8_t*>(
        mmap(nullptr, bytes_ * n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
    for (int r = 0; r < n; ++r) {
      mem_.emplace_back((bytes_ + 7) / 8, 0);
      ranks_.emplace_back(new Rank(this, r, maxDelay, seed + r));
    }
  }
  ~RemoteWindowGroup() { munmap(reserved_, bytes_ * n_); }
  PeerWindows* rank(int r) { return ranks_[r].get(); }
  uint64_t signalsOvertaking() const { return overtaking_.load(); }
  uint64_t transfersDone() const { return transfers_.load(); }
  // Ops to `peer`'s window fail from now on, and its signals read as an error (a lost peer).
  void failPeer(int peer) { failed_.store(peer); }

 private:
  // What a signal carried (PeerWindows::carryNext): its count, the range and the bytes.
  struct Carry {
    uint64_t count = 0, offset = 0, bytes = 0;
    uint8_t data[PeerWindows::kCarryBytes] = {};
  };
  struct Pending {
    bool put;
    int peer;
    uint64_t offset;
    uint8_t* local;
    uint64_t bytes;
    TransferOp* op;
    int polls;
  };
  class Rank final : public PeerWindows {
   public:
    Rank(RemoteWindowGroup* g, int rank, int maxDelay, uint32_t seed)
        : g_(g), rank_(rank), maxDelay_(maxDelay), rng_(seed), waits_(g->n_, 0), sent_(g->n_, 0) {}
    uint64_t windowBytes() const override { return g_->bytes_; }
    uint8_t* windowOf(int r) const override {
      return r == rank_ ? g_->window(r) : g_->reserved_ + static_cast<uint64_t>(r) * g_->bytes_;
    }
    bool remote() const override { return true; }
    uint32_t fingerprintMask() const override { return (1u << 20) - 1; }
    void signal(int peer, uint32_t fingerprint) override {
      for (const Pending& p : pending_)
        if (p.peer == peer) ++g_->overtaking_;
      const uint64_t word = (++sent_[peer] << 20) | (fingerprint & fingerprintMask());
      const size_t at = static_cast<size_t>(peer) * g_->n_ + rank_;
      {
        // The carried range as the window holds it now, with the signal (one record, as verbs).
        std::lock_guard<std::mutex> lock(g_->carryMu_);
        Carry& c = g_->carrying_[at];
        c = {sent_[peer], carryOffset_, carryBytes_, {}};
        if (carryBytes_) std::memcpy(c.data, g_->window(rank_) + carryOffset_, carryBytes_);
      }
      g_->signals_[at].store(word, std::memory_order_release);
    }
    Status pollSignals(int peer, uint64_t, uint64_t* count, uint32_t* fingerprint) override {
      if (g_->failed_.load() == peer) return errorf(tribRemoteError, "rank %d is gone (test)", peer);
      const size_t at = static_cast<size_t>(rank_) * g_->n_ + peer;
      const uint64_t w = g_->signals_[at].load(std::memory_order_acquire);
      *count = w >> 20;
      *fingerprint = static_cast<uint32_t>(w & fingerprintMask());
      std::lock_guard<std::mutex> lock(g_->carryMu_);
      if (g_->carrying_[at].count > latest_[peer].count) latest_[peer] = g_->carrying_[at];
      return Status::Ok();
    }
    void carryNext(uint64_t offset, uint64_t bytes) override {
      const bool fits = bytes > 0 && bytes <= kCarryBytes && offset + bytes <= g_->bytes_;
      carryOffset_ = fits ? offset : 0;
      carryBytes_ = fits ? bytes : 0;
    }
    // From the latest record a poll read (no older than any signal a Wait accepted).
    bool readCarried(int peer, uint64_t offset, uint64_t bytes, void* into) override {
      const Carry& c = latest_[peer];
      if (bytes == 0 || c.bytes == 0 || offset < c.offset || offset - c.offset + bytes > c.bytes)
        return false;
      std::memcpy(into, c.data + (offset - c.offset), bytes);
      ++carriedReads_;
      return true;
    }
    uint64_t carriedReads() const override { return carriedReads_; }
    uint64_t& waitsPosted(int peer) override { return waits_[peer]; }
    Status postPut(int peer, uint64_t offset, const void* src, uint64_t bytes, TransferOp* op) override {
      return post(true, peer, offset, const_cast<void*>(src), bytes, op);
    }
    Status postGet(int peer, uint64_t offset, void* dst, uint64_t bytes, TransferOp* op) override {
      return post(false, peer, offset, dst, bytes, op);
    }
    Status progress() override {
      // Complete the ops whose delay ran out, in the order of their (random) delays.
      for (size_t i = 0; i < pending_.size();) {
        Pending& p = pending_[i];
        if (--p.polls > 0) {
          ++i;
          continue;
        }
        if (g_->failed_.load() == p.peer) {
          p.op->fail(errorf(tribRemoteError, "rank %d is gone (test)", p.peer));
        } else {
          uint8_t* window = g_->window(p.peer) + p.offset;
          // Whole with respect to a signal's copy of the window (carryMu_): a copy of a range a put
          // is writing is never read (the ordering rule), so tearing it would change nothing; the
          // lock keeps that benign race (a NIC's DMA, over verbs) out of ThreadSanitizer's reports.
          std::lock_guard<std::mutex> lock(g_->carryMu_);
          if (p.bytes) p.put ? std::memcpy(window, p.local, p.bytes) : std::memcpy(p.local, window, p.bytes);
          ++g_->transfers_;
          p.op->complete();
        }
        pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
      }
      return Status::Ok();
    }

   private:
    Status post(bool put, int peer, uint64_t offset, void* local, uint64_t bytes, TransferOp* op) {
      if (peer < 0 || peer >= g_->n_ || peer == rank_)
        return errorf(tribInvalidArgument, "remote windows: rank %d has no peer window %d", rank_, peer);
      if (offset > g_->bytes_ || bytes > g_->bytes_ - offset || (bytes && !local))
        return errorf(tribInvalidArgument, "remote windows: [%llu, +%llu) is outside a %llu-byte window",
                      static_cast<unsigned long long>(offset), static_cast<unsigned long long>(bytes),
                      static_cast<unsigned long long>(g_->bytes_));
      op->state.store(TransferOp::kPending, std::memory_order_relaxed);
      const int polls = 1 + static_cast<int>(rng_() % static_cast<uint32_t>(maxDelay_ + 1));
      pending_.push_back({put, peer, offset, static_cast<uint8_t*>(local), bytes, op, polls});
      return Status::Ok();
    }
    RemoteWindowGroup* g_;
    int rank_, maxDelay_;
    std::mt19937 rng_;
    std::vector<uint64_t> waits_, sent_;
    std::vector<Pending> pending_;
    uint64_t carryOffset_ = 0, carryBytes_ = 0, carriedReads_ = 0;
    std::vector<Carry> latest_ = std::vector<Carry>(g_->n_);  // per peer
  };

  int n_;
  uint64_t bytes_;
  uint8_t* reserved_ = nullptr;
  std::vector<std::vector<uint64_t>> mem_;  // each rank's window
  uint8_t* window(int r) { return reinterpret_cast<uint8_t*>(mem_[r].data()); }
  std::vector<std::unique_ptr<Rank>> ranks_;
  // signals_[to * n + from]: (count << 20) | fingerprint of the latest signal.
  std::vector<std::atomic<uint64_t>> signals_;
  std::mutex carryMu_;
  std::vector<Carry> carrying_ = std::vector<Carry>(signals_.size());  // [to * n + from], as signals_
  std::atomic<uint64_t> overtaking_{0}, transfers_{0};
  std::atomic<int> failed_{-1};
};

}  // namespace trib::testing
