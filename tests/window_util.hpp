// Shared by the window tests (test_shm_windows, test_expose): one rank's side of a communicator's
// sequence of peer-memory all-reduces, run by the executor over a transport's PeerWindows, and
// windows that never expose (the copy-only run that a mapped one must match bit for bit).
#pragma once
#include <sched.h>

#include <memory>
#include <vector>

#include "algo/schedule.hpp"
#include "bootstrap/net.hpp"
#include "common/shared_alloc.hpp"
#include "exec/executor.hpp"
#include "transports/transport.hpp"

namespace trib::testing {

// Delegates everything but expose: every expose step is a copy into the window.
class CopyOnlyWindows final : public PeerWindows {
 public:
  explicit CopyOnlyWindows(PeerWindows* w) : w_(w) {}
  uint64_t windowBytes() const override { return w_->windowBytes(); }
  uint8_t* windowOf(int rank) const override { return w_->windowOf(rank); }
  void signal(int peer, uint32_t fingerprint) override { w_->signal(peer, fingerprint); }
  uint32_t fingerprintMask() const override { return w_->fingerprintMask(); }
  Status pollSignals(int peer, uint64_t target, uint64_t* count, uint32_t* fingerprint) override {
    return w_->pollSignals(peer, target, count, fingerprint);
  }
  uint64_t& waitsPosted(int peer) override { return w_->waitsPosted(peer); }
  void unexpose(uint64_t offset, uint64_t bytes) override { w_->unexpose(offset, bytes); }
  Status peerAddress(int rank, uint64_t offset, uint64_t bytes, uint8_t** at) override {
    return w_->peerAddress(rank, offset, bytes, at);
  }
  uint64_t exposedReads() const override { return w_->exposedReads(); }

 private:
  PeerWindows* w_;
};

// The memory kind the API would classify `p` as (core/registration.cpp, minus registrations).
inline MemoryKind hostKindOf(const void* p, size_t bytes) {
  SharedRegion r;
  return bytes && findSharedRegion(p, bytes, &r) ? MemoryKind::HostShared : MemoryKind::Host;
}

class WindowRank {
 public:
  WindowRank(PeerWindows* windows, int rank, int n)
      : windows_(windows), copyOnly_(windows), rank_(rank), n_(n), peers_(n, nullptr) {}

  // Runs one all-reduce with `algo` to completion (or failure, or timeoutMs); the status is the
  // execution's. `fingerprint` stands for the call (the communicator hashes its arguments).
  // `mayExpose` false: expose steps copy (the reference run).
  Status allReduce(Algo algo, const void* src, void* dst, uint64_t count, DataType dtype, RedOp op,
                   uint32_t fingerprint = 0, int timeoutMs = 20000, bool mayExpose = true) {
    CollArgs a;
    a.coll = Coll::AllReduce;
    a.nranks = n_;
    a.count = count;
    a.inPlace = src == dst;
    a.windowElems = windows_ ? windows_->windowBytes() / dataTypeSize(dtype) : 0;
    a.windowCell = cell_;
    const AlgoInfo* info = findAlgorithm(Coll::AllReduce, algo);
    if (!info || !info->supports(a))
      return errorf(tribInvalidArgument, "%s does not take this call", algoName(algo));
    auto steps = std::make_shared<const std::vector<Step>>(materialize(*info, a, rank_));
    cell_ = static_cast<int>((cell_ + windowChunks(algo, a)) % 2);
    scratch_.resize(info->scratchCount(a, rank_) * dataTypeSize(dtype));  // one-shot in place
    ExecBuffers bufs{src, dst, scratch_.data(), count, count, info->scratchCount(a, rank_)};
    ExecOptions opts;
    opts.dtype = dtype;
    opts.op = op;
    opts.rank = rank_;
    opts.nranks = n_;
    opts.windows = mayExpose ? windows_ : &copyOnly_;
    opts.inputKind = hostKindOf(src, count * dataTypeSize(dtype));
    opts.outputKind = hostKindOf(dst, count * dataTypeSize(dtype));
    opts.callFingerprint =
        fingerprint ? fingerprint : static_cast<uint32_t>(count * 31 + static_cast<int>(algo));
    Execution exec(steps, bufs, peers_, opts);
    TRIB_RETURN_IF_ERROR(exec.start());
    auto deadline = net::deadlineAfter(timeoutMs);
    for (;;) {
      bool done = false;
      TRIB_RETURN_IF_ERROR(exec.progress(&done));
      if (done) return Status::Ok();
      if (net::Clock::now() > deadline)
        return errorf(tribTimeout, "still waiting: %s", exec.describePending().c_str());
      sched_yield();
    }
  }

 private:
  PeerWindows* windows_;
  CopyOnlyWindows copyOnly_;
  std::vector<uint8_t> scratch_;
  int rank_, n_;
  std::vector<Transport*> peers_;  // no two-sided steps in these schedules
  int cell_ = 0;
};

}  // namespace trib::testing
