// Zero-copy two-sided sends (transports/transport.hpp, src/exec/executor.hpp): the executor posts
// every send from the caller's memory, never overwrites it before the send completes, lands an
// in-place overwrite in its own staging instead of deadlocking, and sends copies only from
// executions it may give up, over transports that cannot detach a send. Ranks are loopback
// endpoints driven from one thread, so the order of posts, and what gets staged, is exact.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "algo/schedule.hpp"
#include "exec/executor.hpp"
#include "transports/loopback/loopback.hpp"
#include "verify_util.hpp"

namespace trib {
namespace {

// Loopback, recording where each send reads from; `detaches` says what detachesSends() answers
// (false: like UCX, whose posted sends cannot let go of their buffer).
class Recording final : public Transport {
 public:
  Recording(std::unique_ptr<Transport> inner, bool detaches)
      : inner_(std::move(inner)), detaches_(detaches) {}
  const char* name() const override { return "recording"; }
  Status postSend(int peer, uint64_t tag, const void* buf, size_t bytes, TransferOp* op) override {
    if (bytes) sendsFrom.push_back(static_cast<const char*>(buf));
    return inner_->postSend(peer, tag, buf, bytes, op);
  }
  Status postRecv(int peer, uint64_t tag, void* buf, size_t bytes, const ReduceSpec* reduce,
                  TransferOp* op) override {
    return inner_->postRecv(peer, tag, buf, bytes, reduce, op);
  }
  bool detachesSends() const override { return detaches_; }
  void detachSend(TransferOp* op) override {
    ASSERT_TRUE(detaches_) << "detachSend called where detachesSends() is false";
    inner_->detachSend(op);
  }
  Status progress() override { return inner_->progress(); }
  void abort(const Status& why) override { inner_->abort(why); }

  std::vector<const char*> sendsFrom;

 private:
  std::unique_ptr<Transport> inner_;
  bool detaches_;
};

struct World {
  std::vector<std::unique_ptr<Recording>> transports;
  std::vector<std::vector<Transport*>> peers;  // peers[r][p]: how rank r reaches p
  World(int n, bool detaches) {
    auto fabric = makeLoopbackFabric(n, false);
    for (int r = 0; r < n; ++r)
      transports.push_back(std::make_unique<Recording>(makeLoopbackTransport(fabric, r), detaches));
    peers.assign(n, std::vector<Transport*>(n));
    for (int r = 0; r < n; ++r)
      for (int p = 0; p < n; ++p) peers[r][p] = p == r ? nullptr : transports[r].get();
  }
};

// Starts every execution in rank order, then progresses them in turn until all are done.
std::string runAll(std::vector<std::unique_ptr<Execution>>& ex) {
  for (auto& e : ex)
    if (Status s = e->start(); !s.ok()) return s.message();
  for (int round = 0; round < 100000; ++round) {
    bool all = true;
    for (auto& e : ex) {
      bool done = false;
      if (Status s = e->progress(&done); !s.ok()) return s.message();
      all = all && done;
    }
    if (all) return "";
  }
  std::string pending;
  for (auto& e : ex) pending += e->describePending() + "; ";
  return "no progress: " + pending;
}

bool within(const char* p, const void* base, uint64_t bytes) {
  return base && p >= static_cast<const char*>(base) && p < static_cast<const char*>(base) + bytes;
}

TEST(ZeroCopy, InPlaceExchangeNeverWaitsForItsOwnSend) {
  // Both ranks send X and receive the other's X into X. Rank 0 starts first: its send waits for a
  // receive (loopback sends are rendezvous), so its receive is blocked only by that send. Waiting
  // would deadlock (rank 1's receive then waits for its own send, which waits for rank 0's
  // receive). Over a transport that cannot detach sends (UCX) the receive lands in staging and is
  // copied into X once the send is done; one that can (loopback) copies the send's rest aside.
  const uint64_t n = 100003;
  for (bool inPlace : {true, false})
    for (bool detaches : {false, true}) {
      SCOPED_TRACE(std::string(inPlace ? "in place" : "out of place") + (detaches ? ", detaching" : ""));
      World w(2, detaches);
      std::vector<std::vector<uint8_t>> in(2), out(2);
      std::vector<std::unique_ptr<Execution>> ex;
      for (int r = 0; r < 2; ++r) {
        in[r].assign(n, static_cast<uint8_t>(r + 1));
        out[r].assign(n, 0);
        const Buf dst = inPlace ? Buf::Input : Buf::Output;
        auto steps = std::make_shared<const std::vector<Step>>(
            std::vector<Step>{Step::send(1 - r, {Buf::Input, 0, n}), Step::recv(1 - r, {dst, 0, n})});
        ExecOptions o;
        o.dtype = tribUint8;
        o.rank = r;
        o.seq = 1;
        ex.push_back(std::make_unique<Execution>(
            steps, ExecBuffers{in[r].data(), out[r].data(), nullptr, n, n, 0}, w.peers[r], o));
      }
      ASSERT_EQ(runAll(ex), "");
      for (int r = 0; r < 2; ++r) {
        const auto& got = inPlace ? in[r] : out[r];
        EXPECT_EQ(got, std::vector<uint8_t>(n, static_cast<uint8_t>(2 - r))) << "rank " << r;
        ASSERT_EQ(w.transports[r]->sendsFrom.size(), 1u);
        EXPECT_EQ(w.transports[r]->sendsFrom[0], reinterpret_cast<const char*>(in[r].data()));
      }
      // Only rank 0's receive met its own send in flight; rank 1's send had a receive waiting.
      EXPECT_EQ(ex[0]->stagedBytes(), inPlace && !detaches ? n : 0);
      EXPECT_EQ(ex[1]->stagedBytes(), 0u);
    }
}

TEST(ZeroCopy, AllReduceSendsFromTheCallersBuffers) {
  // Every host all-reduce, in and out of place: sends read the caller's (or the schedule's
  // scratch) memory, except in an execution that may be given up over a transport that cannot
  // detach sends, where every send reads the execution's own copy.
  const int n = 3;
  const uint64_t count = 40009;
  int ran = 0;
  for (const AlgoInfo* algo : algorithmsFor(Coll::AllReduce)) {
    if (needsOffload(algo->algo)) continue;
    for (bool inPlace : {false, true})
      for (int mode = 0; mode < 3; ++mode) {  // 0: plain; 1: mayAbandon, detaching; 2: mayAbandon, not
        const CollArgs args = trib::testing::allReduceArgs(n, count, inPlace, 4099);
        if (!algo->supports(args)) continue;
        std::vector<std::vector<Step>> plans;
        bool peerMemory = false;
        for (int r = 0; r < n; ++r) {
          plans.push_back(materialize(*algo, args, r));
          for (const Step& s : plans.back()) peerMemory |= s.isPeerMemory() || s.isSync();
        }
        if (peerMemory) continue;  // window schedules: no two-sided sends
        SCOPED_TRACE(std::string(algoName(algo->algo)) + (inPlace ? " in place" : " out of place") +
                     " mode " + std::to_string(mode));
        World w(n, mode != 2);
        std::vector<std::vector<float>> in(n), out(n), scratch(n);
        std::vector<std::unique_ptr<Execution>> ex;
        for (int r = 0; r < n; ++r) {
          in[r].resize(count);
          for (uint64_t i = 0; i < count; ++i) in[r][i] = static_cast<float>((i + 5 * r) % 13);
          out[r] = inPlace ? in[r] : std::vector<float>(count, -1.0f);
          scratch[r].resize(algo->scratchCount(args, r));
          ExecOptions o;
          o.rank = r;
          o.seq = 7;
          o.nranks = n;
          o.mayAbandon = mode != 0;
          ExecBuffers b{inPlace ? out[r].data() : in[r].data(),
                        out[r].data(),
                        scratch[r].data(),
                        count,
                        count,
                        scratch[r].size()};
          ex.push_back(std::make_unique<Execution>(std::make_shared<const std::vector<Step>>(plans[r]), b,
                                                   w.peers[r], o));
        }
        ASSERT_EQ(runAll(ex), "");
        for (int r = 0; r < n; ++r) {
          for (uint64_t i = 0; i < count; i += 997) {
            float want = 0;
            for (int k = 0; k < n; ++k) want += static_cast<float>((i + 5 * k) % 13);
            ASSERT_EQ(out[r][i], want) << "rank " << r << " element " << i;
          }
          const auto& from = w.transports[r]->sendsFrom;
          EXPECT_FALSE(from.empty());
          for (const char* p : from) {
            const bool user = within(p, in[r].data(), count * 4) || within(p, out[r].data(), count * 4) ||
                              within(p, scratch[r].data(), scratch[r].size() * 4);
            ASSERT_EQ(user, mode != 2) << "rank " << r;
          }
          // Sent copies are all it staged there; elsewhere staging is rare (landed overwrites).
          if (mode == 2) {
            EXPECT_GT(ex[r]->stagedBytes(), 0u);
          }
        }
        ++ran;
      }
  }
  EXPECT_GE(ran, 6);
}

TEST(ZeroCopy, AbandonedSendsLetGoOfTheCallersBuffer) {
  // Rank 0 gives up an execution whose send rank 1 has not received yet, then overwrites its
  // buffer: rank 1 still receives the original bytes, from the transport's detached copy or from
  // the copy the execution sent (kept alive while the op is pending).
  const uint64_t n = 65537;
  for (bool detaches : {true, false}) {
    SCOPED_TRACE(detaches ? "transport detaches" : "transport cannot detach");
    World w(2, detaches);
    std::vector<uint8_t> buf(n, 0x5a);
    ExecOptions o;
    o.dtype = tribUint8;
    o.seq = 3;
    o.mayAbandon = true;
    auto steps =
        std::make_shared<const std::vector<Step>>(std::vector<Step>{Step::send(1, {Buf::Input, 0, n})});
    auto ex =
        std::make_unique<Execution>(steps, ExecBuffers{buf.data(), nullptr, nullptr, n, 0, 0}, w.peers[0], o);
    ASSERT_TRUE(ex->start().ok());
    ASSERT_TRUE(ex->holdsPostedOps());
    ex->detachPostedSends();
    EXPECT_EQ(ex->holdsPostedOps(), !detaches);  // a detached send completed; a sent copy still waits
    std::fill(buf.begin(), buf.end(), 0xab);
    std::vector<uint8_t> got(n);
    TransferOp r;
    ASSERT_TRUE(w.peers[1][0]->postRecv(0, makeTag(3, 0), got.data(), n, nullptr, &r).ok());
    ASSERT_EQ(r.state.load(), TransferOp::kDone);
    EXPECT_EQ(got, std::vector<uint8_t>(n, 0x5a));
    EXPECT_FALSE(ex->holdsPostedOps());
  }
}

}  // namespace
}  // namespace trib

namespace trib {
namespace {

// Direct all-reduce over rendezvous sends (loopback's: a send is done only once its receive is
// posted) on more ranks than fit its phases in the executor's 512-step window. Every rank posts
// its n-1 sends first and its receives after them (src/algo/direct.cpp); a send's receive may lie
// past its receiver's window, and the window does not move past an unfinished send. Fails past
// the bound (found 2026-12-05, issue 16): 256, 258 and 300 ranks finish (in 2, 5 and 89 rounds),
// 400, 480, 511 and 512 stop in the all-gather and 513 at step 0 (no progress in 1,500 rounds).
// Eager sends (done once posted) do not meet it; the verbs transport sends device memory by
// rendezvous. So the planner runs direct on at most 256 ranks (AlgoInfo::maxRunRanks); this test
// drives the executor without it, to show why. Run by hand: TRIB_PROBE_RANKS=N (default 400),
// TRIB_PROBE_ROUNDS (default 1500); ~1 s per 300 rounds.
TEST(ZeroCopy, DISABLED_DirectPastTheWindowFinishesOverRendezvousSends) {
  const char* ranks = std::getenv("TRIB_PROBE_RANKS");
  const char* rounds = std::getenv("TRIB_PROBE_ROUNDS");
  const int n = ranks ? std::atoi(ranks) : 400, cap = rounds ? std::atoi(rounds) : 1500;
  const uint64_t count = static_cast<uint64_t>(n) * 2;
  const AlgoInfo* algo = nullptr;
  for (const AlgoInfo* a : algorithmsFor(Coll::AllReduce))
    if (a->algo == Algo::Direct) algo = a;
  ASSERT_NE(algo, nullptr);
  const CollArgs args = trib::testing::allReduceArgs(n, count, false, 1 << 20);
  World w(n, true);
  std::vector<std::vector<float>> in(n), out(n), scratch(n);
  std::vector<std::unique_ptr<Execution>> ex;
  for (int r = 0; r < n; ++r) {
    in[r].assign(count, 1.0f);
    out[r].assign(count, -1.0f);
    scratch[r].resize(algo->scratchCount(args, r));
    ExecOptions o;
    o.rank = r;
    o.seq = 7;
    o.nranks = n;
    ExecBuffers b{in[r].data(), out[r].data(), scratch[r].data(), count, count, scratch[r].size()};
    ex.push_back(std::make_unique<Execution>(
        std::make_shared<const std::vector<Step>>(materialize(*algo, args, r)), b, w.peers[r], o));
  }
  for (auto& e : ex) ASSERT_TRUE(e->start().ok());
  bool all = false;
  int round = 0;
  for (; round < cap && !all; ++round) {
    all = true;
    for (auto& e : ex) {
      bool done = false;
      ASSERT_TRUE(e->progress(&done).ok());
      all = all && done;
    }
  }
  ASSERT_TRUE(all) << n << " ranks: no end after " << round << " rounds; rank 0 waits at "
                   << ex[0]->describePending();
  std::printf("%d ranks: done in %d rounds\n", n, round);
  for (int r = 0; r < n; r += 97) EXPECT_EQ(out[r][0], static_cast<float>(n)) << "rank " << r;
}

}  // namespace
}  // namespace trib
