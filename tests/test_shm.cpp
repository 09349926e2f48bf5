// The shared-memory transport between forked processes: sizes, reduce-on-receive, tag matching,
// size mismatches, detach, abort, a SIGKILLed peer, and no /dev/shm leaks.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "common/shared_alloc.hpp"
#include "reduce/reduce.hpp"
#include "shm_util.hpp"

using namespace trib;
using namespace trib::testing;

namespace {

uint8_t pattern(int src, int dst, size_t size, size_t i) {
  return static_cast<uint8_t>((src * 31 + dst * 17 + size * 7 + i * 13 + (i >> 8)) & 0xff);
}

ShmOptions options(bool cma) {
  ShmOptions o;
  o.cma = cma ? 1 : 0;
  o.slotBytes = 16 << 10;  // small slots so modest sizes span many slots and wrap the ring
  o.nslots = 8;
  return o;
}

void expectAllOk(const std::vector<ChildResult>& res, const std::vector<pid_t>& pids) {
  ASSERT_FALSE(res.empty()) << "could not start the store server";
  for (auto& r : res) EXPECT_EQ(r.code, 0) << "child pid " << r.pid << " failed (code " << r.code << ")";
  for (pid_t p : pids) EXPECT_TRUE(shmLeftovers(p).empty()) << "leaked /dev/shm segment of pid " << p;
}

const size_t kSizes[] = {0, 1, 7, 4093, (16 << 10), (64 << 10) + 3, (3 << 20) + 5};

}  // namespace

class ShmPairs : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(ShmPairs, AllPairsAllSizes) {
  auto [n, cma] = GetParam();
  std::vector<pid_t> pids;
  auto res = runShmRanks(
      n, options(cma), 60,
      [n = n, cma = cma](int rank, ShmTransport& t, Bootstrap&) {
        for (int p = 0; p < n; ++p)
          if (p != rank) CHILD_CHECK(t.usesCma(p) == cma, 1);
        for (size_t size : kSizes) {
          std::vector<std::vector<uint8_t>> sendBufs(n), recvBufs(n);
          std::vector<TransferOp> ops(2 * n);
          std::vector<TransferOp*> all;
          for (int p = 0; p < n; ++p) {
            sendBufs[p].resize(size);
            for (size_t i = 0; i < size; ++i) sendBufs[p][i] = pattern(rank, p, size, i);
            recvBufs[p].assign(size, 0xEE);
            // Self included: a rank may send to itself through its own ring.
            CHILD_OK(t.postRecv(p, 1000 + size, recvBufs[p].data(), size, nullptr, &ops[2 * p]), 2);
            CHILD_OK(t.postSend(p, 1000 + size, sendBufs[p].data(), size, &ops[2 * p + 1]), 3);
            all.push_back(&ops[2 * p]);
            all.push_back(&ops[2 * p + 1]);
          }
          CHILD_CHECK(waitOps(t, all, 20000), 4);
          for (auto* op : all) CHILD_OK(op->state == TransferOp::kDone ? Status::Ok() : op->error, 5);
          for (int p = 0; p < n; ++p)
            for (size_t i = 0; i < size; ++i) CHILD_CHECK(recvBufs[p][i] == pattern(p, rank, size, i), 6);
        }
        return 0;
      },
      &pids);
  expectAllOk(res, pids);
}

INSTANTIATE_TEST_SUITE_P(RanksCma, ShmPairs,
                         ::testing::Combine(::testing::Values(2, 3, 4), ::testing::Values(false, true)));

TEST(Shm, ReduceOnReceive) {
  for (bool cma : {false, true}) {
    const int n = 3;
    std::vector<pid_t> pids;
    auto res = runShmRanks(
        n, options(cma), 60,
        [](int rank, ShmTransport& t, Bootstrap&) {
          // Each rank receives from rank-1 and reduces into its own data; sizes cover one slot, many
          // slots with a short tail, and the single-copy range.
          int from = (rank + n - 1) % n, to = (rank + 1) % n;
          for (size_t count : {size_t{1}, size_t{1000}, size_t{(1 << 18) + 3}}) {
            std::vector<float> mine(count), got(count, -1.f), other(count);
            std::vector<int32_t> imine(count), igot(count);
            for (size_t i = 0; i < count; ++i) {
              mine[i] = static_cast<float>((rank + 1) * (i % 1000));
              other[i] = static_cast<float>((from + 1) * (i % 1000));
              imine[i] = static_cast<int32_t>((rank * 7919 + i * 31) % 1001) - 500;
            }
            std::vector<int32_t> iexpect(count), iinplace = imine;
            for (size_t i = 0; i < count; ++i)
              iexpect[i] = std::max(imine[i], static_cast<int32_t>((from * 7919 + i * 31) % 1001) - 500);
            TransferOp s1, s2, r1, r2;
            ReduceSpec sum{mine.data(), tribFloat32, tribSum};
            ReduceSpec mx{iinplace.data(), tribInt32, tribMax};  // in place: dst == local
            CHILD_OK(t.postRecv(from, 1, got.data(), count * 4, &sum, &r1), 1);
            CHILD_OK(t.postRecv(from, 2, iinplace.data(), count * 4, &mx, &r2), 2);
            CHILD_OK(t.postSend(to, 1, mine.data(), count * 4, &s1), 3);
            CHILD_OK(t.postSend(to, 2, imine.data(), count * 4, &s2), 4);
            CHILD_CHECK(waitOps(t, {&s1, &s2, &r1, &r2}, 20000), 5);
            for (auto* op : {&s1, &s2, &r1, &r2}) CHILD_CHECK(op->state == TransferOp::kDone, 6);
            for (size_t i = 0; i < count; ++i) CHILD_CHECK(got[i] == mine[i] + other[i], 7);
            CHILD_CHECK(iinplace == iexpect, 8);
          }
          return 0;
        },
        &pids);
    expectAllOk(res, pids);
  }
}

TEST(Shm, TagMatchingOutOfOrderAndUnexpected) {
  for (bool cma : {false, true}) {
    std::vector<pid_t> pids;
    auto res = runShmRanks(
        2, options(cma), 60,
        [](int rank, ShmTransport& t, Bootstrap& bs) {
          const size_t sizes[] = {5, 40000, 0, (1 << 20) + 1, 3};
          const int kMsgs = 5;
          if (rank == 0) {
            std::vector<std::vector<uint8_t>> bufs(kMsgs);
            std::vector<TransferOp> ops(kMsgs);
            std::vector<TransferOp*> all;
            for (int m = 0; m < kMsgs; ++m) {
              bufs[m].resize(sizes[m]);
              for (size_t i = 0; i < sizes[m]; ++i) bufs[m][i] = pattern(m, 0, sizes[m], i);
              CHILD_OK(t.postSend(1, 100 + m, bufs[m].data(), sizes[m], &ops[m]), 1);
              all.push_back(&ops[m]);
            }
            // Drive the sends into rank 1's ring and unexpected queue before it posts anything.
            for (int i = 0; i < 50; ++i) (void)t.progress();
            CHILD_OK(bs.barrier(), 2);
            CHILD_CHECK(waitOps(t, all, 20000), 3);
            for (auto* op : all) CHILD_CHECK(op->state == TransferOp::kDone, 4);
            CHILD_OK(bs.barrier(), 5);
            return 0;
          }
          CHILD_OK(bs.barrier(), 10);
          // Post in reverse order: the later tags are certainly unexpected; matching is by tag only.
          std::vector<std::vector<uint8_t>> bufs(kMsgs);
          std::vector<TransferOp> ops(kMsgs);
          std::vector<TransferOp*> all;
          for (int m = kMsgs - 1; m >= 0; --m) {
            bufs[m].assign(sizes[m], 0);
            CHILD_OK(t.postRecv(0, 100 + m, bufs[m].data(), sizes[m], nullptr, &ops[m]), 11);
            all.push_back(&ops[m]);
            if (m == 3) CHILD_CHECK(waitOps(t, {&ops[m]}, 20000), 12);  // a big one completes alone
          }
          CHILD_CHECK(waitOps(t, all, 20000), 13);
          for (int m = 0; m < kMsgs; ++m) {
            CHILD_CHECK(ops[m].state == TransferOp::kDone, 14);
            for (size_t i = 0; i < sizes[m]; ++i) CHILD_CHECK(bufs[m][i] == pattern(m, 0, sizes[m], i), 15);
          }
          CHILD_OK(bs.barrier(), 16);
          return 0;
        },
        &pids);
    expectAllOk(res, pids);
  }
}

TEST(Shm, SizeMismatchFailsThatReceiveOnly) {
  for (bool cma : {false, true}) {
    std::vector<pid_t> pids;
    auto res = runShmRanks(
        2, options(cma), 60,
        [](int rank, ShmTransport& t, Bootstrap& bs) {
          const size_t big = 2 << 20;  // several slots, or single-copy
          std::vector<uint8_t> a(big, 1), b(100, 2), c(50, 3);
          if (rank == 0) {
            TransferOp s1, s2, s3;
            CHILD_OK(t.postSend(1, 7, a.data(), big, &s1), 1);
            CHILD_OK(t.postSend(1, 8, b.data(), 100, &s2), 2);
            CHILD_OK(t.postSend(1, 9, c.data(), 50, &s3), 3);
            CHILD_OK(bs.barrier(), 4);  // rank 1 has posted its first receive
            CHILD_CHECK(waitOps(t, {&s1, &s2, &s3}, 20000), 5);
            CHILD_OK(bs.barrier(), 6);
            return 0;
          }
          std::vector<uint8_t> ra(1000), rb(64), rc(50, 0);
          TransferOp r1, r2, r3;
          CHILD_OK(t.postRecv(0, 7, ra.data(), ra.size(), nullptr, &r1), 10);  // posted before arrival
          CHILD_OK(bs.barrier(), 11);
          CHILD_OK(t.postRecv(0, 8, rb.data(), rb.size(), nullptr, &r2), 12);  // unexpected, too long
          CHILD_OK(t.postRecv(0, 9, rc.data(), rc.size(), nullptr, &r3), 13);
          CHILD_CHECK(waitOps(t, {&r1, &r2, &r3}, 20000), 14);
          CHILD_CHECK(r1.state == TransferOp::kFailed && r1.error.code() == tribInvalidUsage, 15);
          CHILD_CHECK(r1.error.message().find("2097152 bytes") != std::string::npos, 16);
          CHILD_CHECK(r1.error.message().find("expects 1000") != std::string::npos, 17);
          CHILD_CHECK(
              r2.state == TransferOp::kFailed && r2.error.message().find("expects 64") != std::string::npos,
              18);
          // The stream is intact: the next message arrives whole, and nothing wrote past the failures.
          CHILD_CHECK(r3.state == TransferOp::kDone && rc == c, 19);
          CHILD_CHECK(ra == std::vector<uint8_t>(1000, 0) && rb == std::vector<uint8_t>(64, 0), 20);
          CHILD_OK(bs.barrier(), 21);
          return 0;
        },
        &pids);
    expectAllOk(res, pids);
  }
}

TEST(Shm, DetachLetsTheSenderReuseItsBuffer) {
  for (bool cma : {false, true}) {
    std::vector<pid_t> pids;
    auto res = runShmRanks(
        2, options(cma), 60,
        [](int rank, ShmTransport& t, Bootstrap& bs) {
          const size_t size = 3 << 20;
          if (rank == 0) {
            std::vector<uint8_t> buf(size);
            for (size_t i = 0; i < size; ++i) buf[i] = pattern(0, 1, size, i);
            TransferOp s;
            CHILD_OK(t.postSend(1, 5, buf.data(), size, &s), 1);
            t.detachSend(&s);
            std::fill(buf.begin(), buf.end(), 0xAB);  // the receiver must still get the original bytes
            CHILD_OK(bs.barrier(), 2);
            CHILD_CHECK(waitOps(t, {&s}, 20000) && s.state == TransferOp::kDone, 3);
            CHILD_OK(bs.barrier(), 4);
            return 0;
          }
          CHILD_OK(bs.barrier(), 10);
          std::vector<uint8_t> got(size);
          TransferOp r;
          CHILD_OK(t.postRecv(0, 5, got.data(), size, nullptr, &r), 11);
          CHILD_CHECK(waitOps(t, {&r}, 20000) && r.state == TransferOp::kDone, 12);
          for (size_t i = 0; i < size; ++i) CHILD_CHECK(got[i] == pattern(0, 1, size, i), 13);
          CHILD_OK(bs.barrier(), 14);
          return 0;
        },
        &pids);
    expectAllOk(res, pids);
  }
}

TEST(Shm, AbortFromAnotherThreadFailsPendingOps) {
  std::vector<pid_t> pids;
  auto res = runShmRanks(
      2, options(true), 30,
      [](int rank, ShmTransport& t, Bootstrap& bs) {
        if (rank == 1) {
          CHILD_OK(bs.barrier(), 1);
          return 0;
        }
        std::vector<uint8_t> buf(1 << 20), big(8 << 20, 1);
        TransferOp r, s;
        CHILD_OK(t.postRecv(1, 1, buf.data(), buf.size(), nullptr, &r), 2);  // never sent
        CHILD_OK(t.postSend(1, 2, big.data(), big.size(), &s), 3);           // never received
        std::thread aborter([&t] {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
          t.abort(errorf(tribAborted, "test abort"));
        });
        bool done = waitOps(t, {&r, &s}, 5000);
        aborter.join();
        CHILD_CHECK(done, 4);
        CHILD_CHECK(r.state == TransferOp::kFailed && r.error.code() == tribAborted, 5);
        CHILD_CHECK(s.state == TransferOp::kFailed && s.error.code() == tribAborted, 6);
        TransferOp late;
        CHILD_CHECK(t.postSend(1, 3, big.data(), 8, &late).code() == tribAborted, 7);
        CHILD_CHECK(late.state == TransferOp::kFailed, 8);
        CHILD_OK(bs.barrier(), 9);
        return 0;
      },
      &pids);
  expectAllOk(res, pids);
}

TEST(Shm, KilledPeerFailsOthersOpsWithRemoteError) {
  for (bool cma : {false, true}) {
    const int n = 3, victim = 2;
    std::vector<pid_t> pids;
    auto res = runShmRanks(
        n, options(cma), 30,
        [](int rank, ShmTransport& t, Bootstrap& bs) {
          if (rank == victim) {
            CHILD_OK(bs.barrier(), 1);
            kill(getpid(), SIGKILL);  // dies mid-"collective", without any cleanup
            return 2;
          }
          std::vector<uint8_t> in(1 << 20), out(4 << 20, 9);
          TransferOp r, s, r2, s2;
          CHILD_OK(t.postRecv(victim, 1, in.data(), in.size(), nullptr, &r), 3);
          CHILD_OK(t.postSend(victim, 1, out.data(), out.size(), &s), 4);  // more than the ring holds
          CHILD_OK(bs.barrier(), 5);
          auto t0 = net::Clock::now();
          bool done = waitOps(t, {&r, &s}, 5000);
          double ms = std::chrono::duration<double, std::milli>(net::Clock::now() - t0).count();
          CHILD_CHECK(done, 6);
          CHILD_CHECK(ms < 3000, 7);
          for (auto* op : {&r, &s}) {
            CHILD_CHECK(op->state == TransferOp::kFailed && op->error.code() == tribRemoteError, 8);
            CHILD_CHECK(op->error.message().find("rank 2") != std::string::npos, 9);
          }
          // New ops with the dead rank fail at once; the survivors still talk to each other.
          TransferOp late;
          CHILD_CHECK(t.postRecv(victim, 2, in.data(), 8, nullptr, &late).code() == tribRemoteError, 10);
          int other = 1 - rank;
          std::vector<uint8_t> a(100000, static_cast<uint8_t>(rank)), b(100000);
          CHILD_OK(t.postRecv(other, 3, b.data(), b.size(), nullptr, &r2), 11);
          CHILD_OK(t.postSend(other, 3, a.data(), a.size(), &s2), 12);
          CHILD_CHECK(waitOps(t, {&r2, &s2}, 10000) && r2.state == TransferOp::kDone, 13);
          CHILD_CHECK(b == std::vector<uint8_t>(100000, static_cast<uint8_t>(other)), 14);
          return 0;
        },
        &pids);
    ASSERT_EQ(res.size(), 3u);
    EXPECT_EQ(res[0].code, 0);
    EXPECT_EQ(res[1].code, 0);
    EXPECT_EQ(res[2].code, 128 + SIGKILL);
    for (pid_t p : pids) EXPECT_TRUE(shmLeftovers(p).empty()) << "leaked segment of pid " << p;
  }
}

TEST(Shm, MessagesFromAnExitedSenderAreStillDelivered) {
  // A sender's op completes once its data is in the ring; it may then exit before the receiver
  // posts. The receiver must get the data, and only then see the peer as gone.
  std::vector<pid_t> pids;
  auto res = runShmRanks(
      2, options(true), 30,
      [](int rank, ShmTransport& t, Bootstrap& bs) {
        std::vector<uint8_t> small(5000), more(100);
        for (size_t i = 0; i < small.size(); ++i) small[i] = pattern(0, 1, 5000, i);
        if (rank == 0) {
          TransferOp s1, s2;
          CHILD_OK(t.postSend(1, 1, small.data(), small.size(), &s1), 1);
          CHILD_OK(t.postSend(1, 2, more.data(), more.size(), &s2), 2);
          CHILD_CHECK(waitOps(t, {&s1, &s2}, 10000), 3);
          CHILD_OK(bs.barrier(), 4);
          return 0;  // exits without waiting for the receiver
        }
        CHILD_OK(bs.barrier(), 10);
        // Let the liveness check see rank 0 gone (it drains the ring into the unexpected queue).
        auto until = net::deadlineAfter(400);
        while (net::Clock::now() < until) (void)t.progress();
        std::vector<uint8_t> got(5000);
        TransferOp r1, r2;
        Status st = t.postRecv(0, 1, got.data(), got.size(), nullptr, &r1);
        CHILD_OK(st, 11);
        CHILD_CHECK(r1.state == TransferOp::kDone && got == small, 12);
        // A message that never came fails at once, naming the rank.
        st = t.postRecv(0, 3, got.data(), 10, nullptr, &r2);
        CHILD_CHECK(st.code() == tribRemoteError && st.message().find("rank 0") != std::string::npos, 13);
        return 0;
      },
      &pids);
  expectAllOk(res, pids);
}

TEST(Shm, CmaSwitchedByEnvironment) {
  // With ShmOptions::cma = -1 the transport follows TRIB_SHM_CMA; "1" still needs the kernel's consent,
  // which the probe at connect gives on this machine (the other tests force it and check it).
  for (const char* value : {"0", "1"}) {
    setenv("TRIB_SHM_CMA", value, 1);
    ShmOptions o;
    o.cma = -1;
    std::vector<pid_t> pids;
    bool want = value[0] == '1';
    auto res = runShmRanks(
        2, o, 30,
        [want](int rank, ShmTransport& t, Bootstrap& bs) {
          CHILD_CHECK(t.usesCma(1 - rank) == want, 1);
          std::vector<uint8_t> a(1 << 20, static_cast<uint8_t>(rank)), b(1 << 20);
          TransferOp s, r;
          CHILD_OK(t.postRecv(1 - rank, 1, b.data(), b.size(), nullptr, &r), 2);
          CHILD_OK(t.postSend(1 - rank, 1, a.data(), a.size(), &s), 3);
          CHILD_CHECK(waitOps(t, {&s, &r}, 10000) && r.state == TransferOp::kDone, 4);
          CHILD_CHECK(b == std::vector<uint8_t>(1 << 20, static_cast<uint8_t>(1 - rank)), 5);
          CHILD_OK(bs.barrier(), 6);
          return 0;
        },
        &pids);
    unsetenv("TRIB_SHM_CMA");
    expectAllOk(res, pids);
  }
}

TEST(Shm, InvalidArgumentsAreRefused) {
  std::vector<pid_t> pids;
  auto res = runShmRanks(
      2, options(false), 30,
      [](int rank, ShmTransport& t, Bootstrap& bs) {
        std::vector<uint8_t> buf(10);
        TransferOp a, b, c, d;
        CHILD_CHECK(t.postSend(5, 0, buf.data(), 10, &a).code() == tribInvalidArgument, 1);
        CHILD_CHECK(a.state == TransferOp::kFailed, 2);
        ReduceSpec odd{buf.data(), tribFloat32, tribSum};
        Status st = t.postRecv(1 - rank, 0, buf.data(), 10, &odd, &b);  // 10 bytes is not whole floats
        CHILD_CHECK(st.code() == tribInvalidArgument && st.message().find("float32") != std::string::npos, 3);
        ReduceSpec bad{buf.data(), static_cast<DataType>(tribNumTypes + 1), tribSum};
        CHILD_CHECK(t.postRecv(1 - rank, 0, buf.data(), 8, &bad, &c).code() == tribInvalidArgument, 4);
        CHILD_CHECK(t.postSend(1 - rank, 0, nullptr, 8, &d).code() == tribInvalidArgument, 5);
        CHILD_OK(bs.barrier(), 6);
        return 0;
      },
      &pids);
  expectAllOk(res, pids);

  // Creation-time checks need no peers.
  std::unique_ptr<ShmTransport> t;
  OobAllGather never = [](const std::vector<uint8_t>&, std::vector<std::vector<uint8_t>>&) {
    return errorf(tribInternalError, "not reached");
  };
  ShmOptions o;
  EXPECT_EQ(ShmTransport::create(0, 2, {1}, never, o, &t).code(), tribInvalidArgument);
  EXPECT_EQ(ShmTransport::create(0, 2, {0, 0}, never, o, &t).code(), tribInvalidArgument);
  o.slotBytes = 100;
  EXPECT_EQ(ShmTransport::create(0, 2, {0, 1}, never, o, &t).code(), tribInvalidArgument);
  // A failed exchange leaves nothing in /dev/shm.
  ShmOptions ok;
  Status st = ShmTransport::create(0, 2, {0, 1}, never, ok, &t);
  EXPECT_EQ(st.code(), tribInternalError);
  EXPECT_TRUE(shmLeftovers(getpid()).empty());
}

// ---- the one-shot board ------------------------------------------------------------------------

namespace {

bool waitBoard(CollectiveOffload& b, const std::vector<TransferOp*>& ops, int timeoutMs) {
  auto deadline = net::deadlineAfter(timeoutMs);
  for (;;) {
    bool all = true;
    for (auto* op : ops) all = all && op->done();
    if (all) return true;
    if (net::Clock::now() > deadline) return false;
    (void)b.progress();
    sched_yield();
  }
}

ShmOptions boardOptions(int64_t boardBytes) {
  ShmOptions o = options(true);
  o.boardBytes = boardBytes;
  return o;
}

// int32 elements in one tribMemAlloc allocation (what the board maps), freed on scope exit.
class SharedInts {
 public:
  explicit SharedInts(size_t n) {
    void* p = nullptr;
    if (n && sharedAlloc(n * sizeof(int32_t), &p).ok()) p_ = static_cast<int32_t*>(p);
  }
  ~SharedInts() { (void)sharedFree(p_); }
  SharedInts(const SharedInts&) = delete;
  SharedInts& operator=(const SharedInts&) = delete;
  int32_t* data() const { return p_; }

 private:
  int32_t* p_ = nullptr;
};

}  // namespace

// Many back-to-back all-reduces through the board, posted several at a time (the cells are
// reused every second step), one-shot (sizes 0 .. the cell) mixed with two-shot (0 .. three cells
// and a bit, so several chunks, slices of unequal length), in and out of place: every rank gets
// exactly the sum, and the same bits for floats from either mode.
TEST(ShmBoard, ConsecutiveAllReducesAreExactAndIdenticalOnEveryRank) {
  for (int n : {1, 2, 3, 4}) {
    std::vector<pid_t> pids;
    auto res = runShmRanks(
        n, boardOptions(4096), 60,
        [n](int rank, ShmTransport& t, Bootstrap& bs) {
          CHILD_CHECK(t.board() != nullptr && t.twoShotBoard() != nullptr && t.boardBytes() == 4096, 1);
          const uint64_t counts[] = {0, 1, 7, 1000, 1024};            // int32: up to the whole 4 KiB cell
          const uint64_t twoShotCounts[] = {0, 5, 1024, 2500, 3073};  // up to 3 cells + 1 element
          std::vector<std::vector<int32_t>> in(5), out(5);
          std::vector<TransferOp> ops(5);
          for (int round = 0; round < 40; ++round) {
            std::vector<TransferOp*> all;
            for (int i = 0; i < 5; ++i) {
              const bool twoShot = (i + round) % 3 == 0;
              CollectiveOffload* board = twoShot ? t.twoShotBoard() : t.board();
              const uint64_t count = (twoShot ? twoShotCounts : counts)[(i + round) % 5];
              in[i].resize(count);
              for (uint64_t e = 0; e < count; ++e)
                in[i][e] = static_cast<int32_t>(rank * 1000 + e * 3 + round);
              const bool inPlace = (i + round) % 2 == 1;
              out[i] = inPlace ? in[i] : std::vector<int32_t>(count, -1);
              new (&ops[i]) TransferOp();
              CHILD_OK(board->postAllReduce(inPlace ? out[i].data() : in[i].data(), out[i].data(), count,
                                            tribInt32, tribSum, &ops[i]),
                       2);
              all.push_back(&ops[i]);
            }
            CHILD_CHECK(waitBoard(*t.board(), all, 20000), 3);
            for (int i = 0; i < 5; ++i) {
              CHILD_OK(ops[i].state == TransferOp::kDone ? Status::Ok() : ops[i].error, 4);
              const uint64_t count = out[i].size();
              for (uint64_t e = 0; e < count; ++e) {
                int64_t want = 0;
                for (int r = 0; r < n; ++r) want += r * 1000 + static_cast<int64_t>(e) * 3 + round;
                CHILD_CHECK(out[i][e] == want, 5);
              }
            }
          }
          // Floats: every rank must hold the same bits (the reduction order is the rank order),
          // and one-shot and two-shot the same bits as each other.
          std::vector<float> x(1000), y(1000), z(1000);
          for (size_t e = 0; e < x.size(); ++e)
            x[e] = 1.0f / static_cast<float>(rank + 3 + e % 7) + 1e-7f * e;
          TransferOp f, g;
          CHILD_OK(t.board()->postAllReduce(x.data(), y.data(), x.size(), tribFloat32, tribSum, &f), 6);
          CHILD_OK(t.twoShotBoard()->postAllReduce(x.data(), z.data(), x.size(), tribFloat32, tribSum, &g),
                   6);
          CHILD_CHECK(waitBoard(*t.board(), {&f, &g}, 20000), 7);
          CHILD_CHECK(f.state == TransferOp::kDone && g.state == TransferOp::kDone, 7);
          CHILD_CHECK(std::memcmp(y.data(), z.data(), y.size() * sizeof(float)) == 0, 10);
          std::vector<uint8_t> mine(reinterpret_cast<uint8_t*>(y.data()),
                                    reinterpret_cast<uint8_t*>(y.data()) + y.size() * sizeof(float));
          std::vector<std::vector<uint8_t>> everyone;
          CHILD_OK(bs.allGather(mine, &everyone), 8);
          for (auto& other : everyone) CHILD_CHECK(other == mine, 9);
          return 0;
        },
        &pids);
    expectAllOk(res, pids);
  }
}

// Three disagreements, each caught on every rank (never a silently wrong sum): one-shot sizes,
// one rank running one-shot and the other two-shot, and two-shot sizes whose first chunks agree.
TEST(ShmBoard, MismatchedArgumentsFailOnEveryRank) {
  for (int variant = 0; variant < 3; ++variant) {
    std::vector<pid_t> pids;
    auto res = runShmRanks(
        2, boardOptions(4096), 30,
        [variant](int rank, ShmTransport& t, Bootstrap&) {
          std::vector<float> a(4096, 1.0f), b(4096);
          CollectiveOffload* board =
              variant == 0 || (variant == 1 && rank == 0) ? t.board() : t.twoShotBoard();
          const uint64_t counts[3][2] = {{64, 32}, {512, 512}, {4096, 2048}};  // 1024 floats a cell
          TransferOp op;
          CHILD_OK(board->postAllReduce(a.data(), b.data(), counts[variant][rank], tribFloat32, tribSum, &op),
                   1);
          CHILD_CHECK(waitBoard(*board, {&op}, 10000), 2);
          CHILD_CHECK(op.state == TransferOp::kFailed && op.error.code() == tribInvalidUsage, 3);
          CHILD_CHECK(op.error.message().find("mismatched") != std::string::npos, 4);
          // The board is out of step now: later posts are refused, never silently wrong.
          TransferOp late;
          CHILD_CHECK(!t.board()->postAllReduce(a.data(), b.data(), 8, tribFloat32, tribSum, &late).ok(), 5);
          return 0;
        },
        &pids);
    expectAllOk(res, pids);
  }
}

// Large enough that two-shot streams its output around the cache (8 x ranks x bytes beyond the
// last-level cache), with a destination that is not 16-byte aligned; 64 KiB cells, so ~130 chunks.
TEST(ShmBoard, TwoShotLargeUnalignedOutOfPlace) {
  std::vector<pid_t> pids;
  auto res = runShmRanks(
      2, boardOptions(64 << 10), 60,
      [](int rank, ShmTransport& t, Bootstrap&) {
        const size_t count = (65u << 20) / 8 + 3;  // int64: 65 MiB + 24 bytes
        std::vector<int64_t> in(count);
        std::vector<int64_t> outStore(count + 1, -1);
        int64_t* out = reinterpret_cast<int64_t*>(reinterpret_cast<uint8_t*>(outStore.data()) + 4);
        for (size_t e = 0; e < count; ++e) in[e] = static_cast<int64_t>(e) * (rank + 1);
        TransferOp op;
        // Misaligned int64 destination: the board copies bytes, so it takes it.
        CHILD_OK(t.twoShotBoard()->postAllReduce(in.data(), out, count, tribInt64, tribSum, &op), 1);
        CHILD_CHECK(waitBoard(*t.twoShotBoard(), {&op}, 30000) && op.state == TransferOp::kDone, 2);
        for (size_t e = 0; e < count; ++e) {
          int64_t v;
          std::memcpy(&v, out + e, sizeof v);
          CHILD_CHECK(v == static_cast<int64_t>(e) * 3, 3);
        }
        return 0;
      },
      &pids);
  expectAllOk(res, pids);
}

TEST(ShmBoard, RefusesWhatItCannotTake) {
  std::vector<pid_t> pids;
  auto res = runShmRanks(
      2, boardOptions(1024), 30,
      [](int, ShmTransport& t, Bootstrap&) {
        std::vector<double> a(256), b(256);
        TransferOp big, avg, none;
        Status s = t.board()->postAllReduce(a.data(), b.data(), 129, tribFloat64, tribSum, &big);
        CHILD_CHECK(
            s.code() == tribInvalidArgument && s.message().find("TRIB_SHM_BOARD_BYTES") != std::string::npos,
            1);
        CHILD_CHECK(big.state == TransferOp::kFailed, 2);
        CHILD_CHECK(t.board()->postAllReduce(a.data(), b.data(), 8, tribFloat64, tribAvg, &avg).code() ==
                        tribInvalidArgument,
                    3);
        CHILD_CHECK(t.board()->postAllReduce(nullptr, b.data(), 8, tribFloat64, tribSum, &none).code() ==
                        tribInvalidArgument,
                    4);
        return 0;
      },
      &pids);
  expectAllOk(res, pids);
  // No board when it is turned off, or when some ranks are elsewhere (not all local).
  auto off = runShmRanks(2, boardOptions(0), 30,
                         [](int, ShmTransport& t, Bootstrap&) { return t.board() == nullptr ? 0 : 1; });
  for (auto& r : off) EXPECT_EQ(r.code, 0);
}

// One-shot, then two-shot over several chunks (the victim dies before its first post).
TEST(ShmBoard, PeerKilledBeforePostingFailsTheOthersNamingIt) {
  for (int variant : {0, 1, 2}) {  // one-shot, two-shot, two-shot of shared buffers (mapped)
    const bool twoShot = variant > 0;
    const int n = 3, victim = 1;
    std::vector<pid_t> pids;
    auto res = runShmRanks(
        n, boardOptions(4096), 30,
        [twoShot, variant](int rank, ShmTransport& t, Bootstrap& bs) {
          std::vector<int32_t> a(16, rank), b(16);
          SharedInts shared(variant == 2 ? 10000 : 0);
          TransferOp first;
          CHILD_OK(t.board()->postAllReduce(a.data(), b.data(), 16, tribInt32, tribSum, &first), 1);
          CHILD_CHECK(waitBoard(*t.board(), {&first}, 10000) && first.state == TransferOp::kDone, 2);
          CHILD_CHECK(b[0] == 0 + 1 + 2, 3);
          CHILD_OK(bs.barrier(), 4);
          if (rank == victim) kill(getpid(), SIGKILL);
          TransferOp second;
          std::vector<int32_t> heap(10000, rank);
          int32_t* big = variant == 2 ? shared.data() : heap.data();
          CHILD_OK(twoShot
                       ? t.twoShotBoard()->postAllReduce(big, big + 5000, 5000, tribInt32, tribSum, &second)
                       : t.board()->postAllReduce(a.data(), b.data(), 16, tribInt32, tribSum, &second),
                   5);
          auto t0 = net::Clock::now();
          CHILD_CHECK(waitBoard(*t.board(), {&second}, 10000), 6);
          double ms = std::chrono::duration<double, std::milli>(net::Clock::now() - t0).count();
          CHILD_CHECK(ms < 3000, 7);
          CHILD_CHECK(second.state == TransferOp::kFailed && second.error.code() == tribRemoteError, 8);
          CHILD_CHECK(second.error.message().find("rank 1") != std::string::npos, 9);
          return 0;
        },
        &pids);
    ASSERT_EQ(res.size(), 3u);
    EXPECT_EQ(res[0].code, 0);
    EXPECT_EQ(res[1].code, 128 + SIGKILL);
    EXPECT_EQ(res[2].code, 0);
    for (pid_t p : pids) EXPECT_TRUE(shmLeftovers(p).empty()) << "leaked segment of pid " << p;
  }
}

// Two-shot between shared buffers (mapped: every rank reduces its slice straight from the others'
// inputs into their outputs): exact, in and out of place, buffers at odd offsets inside their
// allocations, sizes from one element to several cells, n = 1..4, and for floats the same bits as
// one-shot and as staged two-shot.
TEST(ShmBoardMapped, ExactInAndOutOfPlaceAndTheSameBitsAsStaging) {
  for (int n : {1, 2, 3, 4}) {
    std::vector<pid_t> pids;
    auto res = runShmRanks(
        n, boardOptions(4096), 60,
        [n](int rank, ShmTransport& t, Bootstrap& bs) {
          CHILD_CHECK(t.mapsSharedBuffers(), 1);
          const uint64_t counts[] = {1, 5, 1024, 3073, 100003};
          SharedInts mem(2 * 100003 + 64);
          CHILD_CHECK(mem.data() != nullptr, 2);
          int ops = 0;
          for (int round = 0; round < 6; ++round) {
            for (uint64_t count : counts) {
              const bool inPlace = (round + count) % 2 == 1;
              int32_t* in = mem.data() + 1 + round;  // not 64-byte aligned, and moving
              int32_t* out = inPlace ? in : in + count + 3;
              for (uint64_t e = 0; e < count; ++e) in[e] = static_cast<int32_t>(rank * 1000 + e * 3 + round);
              TransferOp op;
              CHILD_OK(t.twoShotBoard()->postAllReduce(in, out, count, tribInt32, tribSum, &op), 3);
              CHILD_CHECK(waitBoard(*t.twoShotBoard(), {&op}, 20000) && op.state == TransferOp::kDone, 4);
              ++ops;
              for (uint64_t e = 0; e < count; ++e) {
                int64_t want = 0;
                for (int r = 0; r < n; ++r) want += r * 1000 + static_cast<int64_t>(e) * 3 + round;
                CHILD_CHECK(out[e] == want, 5);
              }
            }
          }
          CHILD_CHECK(t.mappedAllReduces() == static_cast<uint64_t>(ops), 6);
          // Floats: mapped, staged two-shot and one-shot give the same bits on every rank.
          const size_t fc = 1000;
          void* fmem = nullptr;
          CHILD_OK(sharedAlloc(2 * fc * sizeof(float), &fmem), 7);
          auto* x = static_cast<float*>(fmem);
          std::vector<float> heapX(fc), staged(fc), oneShot(fc);
          for (size_t e = 0; e < fc; ++e)
            heapX[e] = x[e] = 1.0f / static_cast<float>(rank + 3 + e % 7) + 1e-7f * e;
          TransferOp f, g, h;
          CHILD_OK(t.twoShotBoard()->postAllReduce(x, x + fc, fc, tribFloat32, tribSum, &f), 8);
          CHILD_OK(t.twoShotBoard()->postAllReduce(heapX.data(), staged.data(), fc, tribFloat32, tribSum, &g),
                   8);
          CHILD_OK(t.board()->postAllReduce(heapX.data(), oneShot.data(), fc, tribFloat32, tribSum, &h), 8);
          CHILD_CHECK(waitBoard(*t.board(), {&f, &g, &h}, 20000), 9);
          CHILD_CHECK(
              f.state == TransferOp::kDone && g.state == TransferOp::kDone && h.state == TransferOp::kDone,
              9);
          CHILD_CHECK(std::memcmp(x + fc, staged.data(), fc * sizeof(float)) == 0, 10);
          CHILD_CHECK(std::memcmp(x + fc, oneShot.data(), fc * sizeof(float)) == 0, 11);
          std::vector<uint8_t> mine(reinterpret_cast<uint8_t*>(x + fc),
                                    reinterpret_cast<uint8_t*>(x + 2 * fc));
          std::vector<std::vector<uint8_t>> everyone;
          CHILD_OK(bs.allGather(mine, &everyone), 12);
          for (auto& other : everyone) CHILD_CHECK(other == mine, 13);
          CHILD_OK(sharedFree(fmem), 14);
          return 0;
        },
        &pids);
    expectAllOk(res, pids);
  }
}

// Shared buffers on some ranks only (or only the input shared): those ranks stage after all, in
// the same step, and the result is exact; nothing runs mapped. Mapping turned off: the same.
TEST(ShmBoardMapped, RanksWithoutSharedBuffersMakeEveryoneStage) {
  for (int variant : {0, 1, 2}) {
    std::vector<pid_t> pids;
    ShmOptions opt = boardOptions(4096);
    if (variant == 2) opt.mapped = 0;
    auto res = runShmRanks(
        3, opt, 60,
        [variant](int rank, ShmTransport& t, Bootstrap&) {
          CHILD_CHECK(t.mapsSharedBuffers() == (variant != 2), 1);
          const uint64_t count = 5000;  // two-shot over two cells
          SharedInts mem(2 * count);
          std::vector<int32_t> heap(2 * count);
          int32_t* in = rank == 1 && variant != 2 ? heap.data() : mem.data();
          int32_t* out = rank == 2 && variant == 1 ? heap.data() + count : in + count;
          for (int round = 0; round < 3; ++round) {
            for (uint64_t e = 0; e < count; ++e) in[e] = static_cast<int32_t>(rank * 7 + e + round);
            TransferOp op;
            CHILD_OK(t.twoShotBoard()->postAllReduce(in, out, count, tribInt32, tribSum, &op), 2);
            CHILD_CHECK(waitBoard(*t.twoShotBoard(), {&op}, 20000) && op.state == TransferOp::kDone, 3);
            for (uint64_t e = 0; e < count; ++e)
              CHILD_CHECK(out[e] == static_cast<int32_t>(21 + 3 * (e + round)), 4);
          }
          CHILD_CHECK(t.mappedAllReduces() == 0, 5);
          return 0;
        },
        &pids);
    expectAllOk(res, pids);
  }
}

// More allocations than a peer keeps mapped (16): each all-reduce uses a fresh pair, the oldest
// mappings are dropped, and every result is exact.
TEST(ShmBoardMapped, FreshAllocationsEveryCall) {
  std::vector<pid_t> pids;
  auto res = runShmRanks(
      2, boardOptions(4096), 60,
      [](int rank, ShmTransport& t, Bootstrap&) {
        const uint64_t count = 3000;
        for (int round = 0; round < 40; ++round) {
          SharedInts in(count), out(count + round);
          for (uint64_t e = 0; e < count; ++e) in.data()[e] = static_cast<int32_t>(rank + e * round);
          TransferOp op;
          CHILD_OK(
              t.twoShotBoard()->postAllReduce(in.data(), out.data() + round, count, tribInt32, tribSum, &op),
              1);
          CHILD_CHECK(waitBoard(*t.twoShotBoard(), {&op}, 20000) && op.state == TransferOp::kDone, 2);
          for (uint64_t e = 0; e < count; ++e)
            CHILD_CHECK(out.data()[round + e] == static_cast<int32_t>(1 + 2 * e * round), 3);
        }
        CHILD_CHECK(t.mappedAllReduces() == 40, 4);
        return 0;
      },
      &pids);
  expectAllOk(res, pids);
}

// A rank whose board fails (here: aborted from its own thread before its post) says so in its
// cell: the others' all-reduce fails at once with an error naming it, instead of at a timeout.
TEST(ShmBoard, AbortedPeerFailsTheOthersPromptly) {
  for (bool twoShot : {false, true}) {
    std::vector<pid_t> pids;
    auto res = runShmRanks(
        3, boardOptions(4096), 30,
        [twoShot](int rank, ShmTransport& t, Bootstrap& bs) {
          CollectiveOffload* board = twoShot ? t.twoShotBoard() : t.board();
          std::vector<int32_t> a(3000, rank), b(3000);
          const uint64_t count = twoShot ? 3000 : 16;
          TransferOp first;
          CHILD_OK(board->postAllReduce(a.data(), b.data(), count, tribInt32, tribSum, &first), 1);
          CHILD_CHECK(waitBoard(*board, {&first}, 10000) && first.state == TransferOp::kDone, 2);
          CHILD_OK(bs.barrier(), 3);
          if (rank == 1) {  // stays alive (in the barrier) while the others wait: not a dead peer
            t.abort(errorf(tribAborted, "test abort"));
            CHILD_OK(bs.barrier(), 9);
            return 0;
          }
          TransferOp second;
          CHILD_OK(board->postAllReduce(a.data(), b.data(), count, tribInt32, tribSum, &second), 4);
          auto t0 = net::Clock::now();
          CHILD_CHECK(waitBoard(*board, {&second}, 10000), 5);
          double ms = std::chrono::duration<double, std::milli>(net::Clock::now() - t0).count();
          CHILD_CHECK(ms < 2000, 6);
          CHILD_CHECK(second.state == TransferOp::kFailed && second.error.code() == tribRemoteError, 7);
          CHILD_CHECK(second.error.message().find("rank 1") != std::string::npos, 8);
          CHILD_OK(bs.barrier(), 9);
          return 0;
        },
        &pids);
    expectAllOk(res, pids);
  }
}

// Two-shot's cells written with streaming stores (TRIB_SHM_STREAM_CELLS=1; auto picks it when the
// cores share no cache) and chosen per operation (auto: the 1st of every 32 large operations
// streams, the 2nd does not, then the faster): exact either way, several chunks, in and out of place.
TEST(ShmBoard, TwoShotStreamedCellsAreExact) {
  for (const char* mode : {"1", "auto"}) {
    setenv("TRIB_SHM_STREAM_CELLS", mode, 1);
    std::vector<pid_t> pids;
    auto res = runShmRanks(
        3, boardOptions(64 << 10), 60,
        [](int rank, ShmTransport& t, Bootstrap&) {
          const uint64_t count = (1u << 20) / 4 + 1001;  // int32: past 1 MiB (adaptive), ~17 chunks
          std::vector<int32_t> in(count), out(count);
          for (int round = 0; round < 40; ++round) {
            const bool inPlace = round % 3 == 0;
            for (uint64_t e = 0; e < count; ++e) in[e] = static_cast<int32_t>(rank * 5 + e + round);
            int32_t* dst = inPlace ? in.data() : out.data();
            TransferOp op;
            CHILD_OK(t.twoShotBoard()->postAllReduce(in.data(), dst, count, tribInt32, tribSum, &op), 1);
            CHILD_CHECK(waitBoard(*t.twoShotBoard(), {&op}, 20000) && op.state == TransferOp::kDone, 2);
            for (uint64_t e = 0; e < count; ++e)
              CHILD_CHECK(dst[e] == static_cast<int32_t>(15 + 3 * (e + round)), 3);
          }
          return 0;
        },
        &pids);
    unsetenv("TRIB_SHM_STREAM_CELLS");
    expectAllOk(res, pids);
  }
  // A value it does not know is refused when the transport is created.
  setenv("TRIB_SHM_STREAM_CELLS", "sometimes", 1);
  auto bad = runShmRanks(2, boardOptions(4096), 30, [](int, ShmTransport&, Bootstrap&) { return 0; });
  unsetenv("TRIB_SHM_STREAM_CELLS");
  for (auto& r : bad) EXPECT_EQ(r.code, 91);  // runShmRanks: create failed
}

// A rank whose transport is aborted (or fails) says so in its segment header: a peer waiting to
// receive from it fails within the liveness interval with an error naming it, not at a timeout,
// while what it sent before the abort is still delivered.
TEST(Shm, AbortedPeerFailsTheOthersPromptly) {
  std::vector<pid_t> pids;
  auto res = runShmRanks(
      2, options(true), 30,
      [](int rank, ShmTransport& t, Bootstrap& bs) {
        std::vector<uint8_t> first(1000, 7), never(1000);
        if (rank == 1) {
          TransferOp sent;
          CHILD_OK(t.postSend(0, 1, first.data(), first.size(), &sent), 1);
          CHILD_CHECK(waitOps(t, {&sent}, 10000) && sent.state == TransferOp::kDone, 2);
          t.abort(errorf(tribAborted, "test abort"));
          CHILD_OK(bs.barrier(), 3);  // alive while rank 0 waits: not a dead peer
          return 0;
        }
        std::vector<uint8_t> got(1000);
        TransferOp a, b;
        CHILD_OK(t.postRecv(1, 1, got.data(), got.size(), nullptr, &a), 4);
        CHILD_OK(t.postRecv(1, 2, never.data(), never.size(), nullptr, &b), 5);
        auto t0 = net::Clock::now();
        CHILD_CHECK(waitOps(t, {&a, &b}, 10000), 6);
        double ms = std::chrono::duration<double, std::milli>(net::Clock::now() - t0).count();
        CHILD_CHECK(ms < 2000, 7);
        CHILD_CHECK(a.state == TransferOp::kDone && got == first, 8);
        CHILD_CHECK(b.state == TransferOp::kFailed && b.error.code() == tribRemoteError, 9);
        CHILD_CHECK(b.error.message().find("rank 1") != std::string::npos, 10);
        CHILD_OK(bs.barrier(), 11);
        return 0;
      },
      &pids);
  expectAllOk(res, pids);
}
