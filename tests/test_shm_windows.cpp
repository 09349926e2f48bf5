// The shm transport's peer windows, driven as the communicator drives them: one-shot and two-shot
// all-reduce schedules (algo/oneshot.cpp) run by the executor over ShmTransport::windows() between
// forked processes. Exact sums, identical bits on every rank, cell reuse across calls, mismatched
// calls caught on every rank, and dead or aborted peers named promptly.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>

#include <cstring>

#include "algo/schedule.hpp"
#include "core/registration.hpp"
#include "exec/executor.hpp"
#include "shm_util.hpp"
#include "transports/shm/shm_layout.hpp"
#include "window_util.hpp"

using namespace trib;
using namespace trib::testing;

namespace {

ShmOptions windowOptions(int64_t windowBytes) {
  ShmOptions o;
  o.slotBytes = 16 << 10;
  o.nslots = 8;
  o.windowBytes = windowBytes;
  return o;
}

void expectAllOk(const std::vector<ChildResult>& res, const std::vector<pid_t>& pids) {
  ASSERT_FALSE(res.empty()) << "could not start the store server";
  for (auto& r : res) EXPECT_EQ(r.code, 0) << "child pid " << r.pid << " failed (code " << r.code << ")";
  for (pid_t p : pids) EXPECT_TRUE(shmLeftovers(p).empty()) << "leaked /dev/shm segment of pid " << p;
}

int64_t expectedSum(int n, uint64_t e, int round) {
  int64_t want = 0;
  for (int r = 0; r < n; ++r) want += r * 1000 + static_cast<int64_t>(e) * 3 + round;
  return want;
}

}  // namespace

// Many back-to-back all-reduces, one-shot (0 .. the whole 4 KiB cell) mixed with two-shot (0 ..
// three cells and a bit: several chunks, unequal slices, odd and even chunk counts, so the cells
// alternate both ways), in and out of place: every rank gets exactly the sum, and for floats the
// same bits on every rank and from either algorithm.
TEST(ShmWindows, ConsecutiveAllReducesAreExactAndIdenticalOnEveryRank) {
  for (int n : {2, 3, 4}) {
    std::vector<pid_t> pids;
    auto res = runShmRanks(
        n, windowOptions(8192), 60,
        [n](int rank, ShmTransport& t, Bootstrap& bs) {
          CHILD_CHECK(t.windows() != nullptr && t.windows()->windowBytes() == 8192, 1);
          WindowRank w(t.windows(), rank, n);
          const uint64_t counts[] = {0, 1, 7, 1000, 1024};            // int32: up to the whole 4 KiB cell
          const uint64_t twoShotCounts[] = {0, 5, 1024, 2500, 3073};  // up to 3 cells + 1 element
          for (int round = 0; round < 40; ++round) {
            for (int i = 0; i < 5; ++i) {
              const bool twoShot = (i + round) % 3 == 0;
              const uint64_t count = (twoShot ? twoShotCounts : counts)[(i + round) % 5];
              std::vector<int32_t> in(count);
              for (uint64_t e = 0; e < count; ++e) in[e] = static_cast<int32_t>(rank * 1000 + e * 3 + round);
              const bool inPlace = (i + round) % 2 == 1;
              std::vector<int32_t> out = inPlace ? in : std::vector<int32_t>(count, -1);
              CHILD_OK(w.allReduce(twoShot ? Algo::TwoShot : Algo::OneShot, inPlace ? out.data() : in.data(),
                                   out.data(), count, tribInt32, tribSum),
                       2);
              for (uint64_t e = 0; e < count; ++e) CHILD_CHECK(out[e] == expectedSum(n, e, round), 3);
            }
          }
          std::vector<float> x(1000), y(1000), z(1000);
          for (size_t e = 0; e < x.size(); ++e)
            x[e] = 1.0f / static_cast<float>(rank + 3 + e % 7) + 1e-7f * e;
          CHILD_OK(w.allReduce(Algo::OneShot, x.data(), y.data(), x.size(), tribFloat32, tribSum), 4);
          CHILD_OK(w.allReduce(Algo::TwoShot, x.data(), z.data(), x.size(), tribFloat32, tribSum), 5);
          CHILD_CHECK(std::memcmp(y.data(), z.data(), y.size() * sizeof(float)) == 0, 6);
          std::vector<uint8_t> mine(reinterpret_cast<uint8_t*>(y.data()),
                                    reinterpret_cast<uint8_t*>(y.data()) + y.size() * sizeof(float));
          std::vector<std::vector<uint8_t>> everyone;
          CHILD_OK(bs.allGather(mine, &everyone), 7);
          for (auto& other : everyone) CHILD_CHECK(other == mine, 8);
          return 0;
        },
        &pids);
    expectAllOk(res, pids);
  }
}

// Three disagreements, each caught on every rank as tribInvalidUsage (never a silently wrong sum):
// one-shot sizes, one rank running one-shot and the other two-shot, and two-shot sizes whose
// first chunks agree.
TEST(ShmWindows, MismatchedCallsFailOnEveryRank) {
  for (int variant = 0; variant < 3; ++variant) {
    std::vector<pid_t> pids;
    auto res = runShmRanks(
        2, windowOptions(8192), 30,
        [variant](int rank, ShmTransport& t, Bootstrap&) {
          WindowRank w(t.windows(), rank, 2);
          std::vector<float> a(4096, 1.0f), b(4096);
          const Algo algo = variant == 0 || (variant == 1 && rank == 0) ? Algo::OneShot : Algo::TwoShot;
          const uint64_t counts[3][2] = {{64, 32}, {512, 512}, {4096, 2048}};  // 1024 floats a cell
          const uint64_t count = counts[variant][rank];
          // As the communicator does: the fingerprint hashes what the ranks must agree on.
          const uint32_t fp = static_cast<uint32_t>(count * 2654435761u) ^ static_cast<uint32_t>(algo);
          Status st = w.allReduce(algo, a.data(), b.data(), count, tribFloat32, tribSum, fp, 10000);
          CHILD_CHECK(st.code() == tribInvalidUsage, 1);
          CHILD_CHECK(st.message().find("mismatched") != std::string::npos, 2);
          return 0;
        },
        &pids);
    expectAllOk(res, pids);
  }
}

// Large enough for ~130 chunks of 64 KiB cells, into a destination that is not 8-byte aligned.
TEST(ShmWindows, TwoShotLargeUnalignedOutOfPlace) {
  std::vector<pid_t> pids;
  auto res = runShmRanks(
      2, windowOptions(128 << 10), 60,
      [](int rank, ShmTransport& t, Bootstrap&) {
        WindowRank w(t.windows(), rank, 2);
        const size_t count = (8u << 20) / 8 + 3;  // int64: 8 MiB + 24 bytes
        std::vector<int64_t> in(count);
        std::vector<int64_t> outStore(count + 1, -1);
        auto* out = reinterpret_cast<int64_t*>(reinterpret_cast<uint8_t*>(outStore.data()) + 4);
        for (size_t e = 0; e < count; ++e) in[e] = static_cast<int64_t>(e) * (rank + 1);
        CHILD_OK(w.allReduce(Algo::TwoShot, in.data(), out, count, tribInt64, tribSum), 1);
        for (size_t e = 0; e < count; ++e) {
          int64_t v;
          std::memcpy(&v, out + e, sizeof v);
          CHILD_CHECK(v == static_cast<int64_t>(e) * 3, 2);
        }
        return 0;
      },
      &pids);
  expectAllOk(res, pids);
}

// One-shot takes one cell; no windows when they are turned off.
TEST(ShmWindows, WhatTheyTakeAndWhenThereAreNone) {
  std::vector<pid_t> pids;
  auto res = runShmRanks(
      2, windowOptions(1024), 30,
      [](int rank, ShmTransport& t, Bootstrap&) {
        WindowRank w(t.windows(), rank, 2);
        std::vector<double> a(256), b(256);
        CHILD_CHECK(w.allReduce(Algo::OneShot, a.data(), b.data(), 65, tribFloat64, tribSum).code() ==
                        tribInvalidArgument,
                    1);  // 512-byte cells hold 64 doubles
        CHILD_OK(w.allReduce(Algo::OneShot, a.data(), b.data(), 64, tribFloat64, tribSum), 2);
        CHILD_OK(w.allReduce(Algo::TwoShot, a.data(), b.data(), 256, tribFloat64, tribSum), 3);
        return 0;
      },
      &pids);
  expectAllOk(res, pids);
  auto off = runShmRanks(2, windowOptions(0), 30,
                         [](int, ShmTransport& t, Bootstrap&) { return t.windows() == nullptr ? 0 : 1; });
  for (auto& r : off) EXPECT_EQ(r.code, 0);
}

// Calls of up to 16 bytes read each peer's input from the signal that announced it
// (PeerWindows::readCarried), one read per peer and call; larger ones read the windows. Exact
// sums either way, in and out of place, on 2 and 3 ranks.
TEST(ShmWindows, SmallCallsReadWhatTheSignalsCarried) {
  for (int n : {2, 3}) {
    std::vector<pid_t> pids;
    auto res = runShmRanks(
        n, windowOptions(8192), 60,
        [n](int rank, ShmTransport& t, Bootstrap&) {
          WindowRank w(t.windows(), rank, n);
          for (int round = 0; round < 60; ++round) {
            const uint64_t count = 1 + round % 6;  // int32: 4 .. 24 bytes
            std::vector<int32_t> in(count);
            for (uint64_t e = 0; e < count; ++e) in[e] = static_cast<int32_t>(rank * 1000 + e * 3 + round);
            const bool inPlace = round % 4 >= 2;
            std::vector<int32_t> out = inPlace ? in : std::vector<int32_t>(count, -1);
            const uint64_t before = t.windows()->carriedReads();
            CHILD_OK(w.allReduce(Algo::OneShot, inPlace ? out.data() : in.data(), out.data(), count,
                                 tribInt32, tribSum),
                     1);
            for (uint64_t e = 0; e < count; ++e) CHILD_CHECK(out[e] == expectedSum(n, e, round), 2);
            const uint64_t reads = t.windows()->carriedReads() - before;
            CHILD_CHECK(reads == (count * 4 <= PeerWindows::kCarryBytes ? static_cast<uint64_t>(n - 1) : 0),
                        3);
          }
          return 0;
        },
        &pids);
    expectAllOk(res, pids);
  }
}

// The provider's rule, driven by hand: a carried copy is taken only for the range it carried and
// only from a signal no older than the latest one waited for; otherwise the reader reads the window.
TEST(ShmWindows, ACarriedCopyIsTakenOnlyFromTheLatestSignalWaitedFor) {
  std::vector<pid_t> pids;
  auto res = runShmRanks(
      2, windowOptions(1024), 30,
      [](int rank, ShmTransport& t, Bootstrap& bs) {
        PeerWindows* w = t.windows();
        const uint64_t first = 0x1122334455667788ull, second = 0x99aabbccddeeff00ull;
        uint64_t got = 0, count = 0;
        uint32_t fingerprint = 0;
        auto waitFor = [&](uint64_t target) {  // polls at least once, as a Wait step does
          for (int i = 0; i < 2000000; ++i) {
            if (!w->pollSignals(0, target, &count, &fingerprint).ok()) return false;
            if (count >= target) return true;
            sched_yield();
          }
          return false;
        };
        if (rank == 1) CHILD_CHECK(!w->readCarried(0, 0, 8, &got), 1);  // no signal yet
        CHILD_OK(bs.barrier(), 14);
        if (rank == 0) {
          std::memcpy(w->windowOf(0), &first, 8);
          w->carryNext(0, 8);
          w->signal(1, 7);
        } else {
          CHILD_CHECK(waitFor(1), 2);
          CHILD_CHECK(w->readCarried(0, 0, 8, &got) && got == first, 3);
          CHILD_CHECK(w->readCarried(0, 4, 4, &got), 4);    // a part of the carried range
          CHILD_CHECK(!w->readCarried(0, 8, 8, &got), 5);   // another range
          CHILD_CHECK(!w->readCarried(0, 0, 24, &got), 6);  // more than a signal carries
        }
        CHILD_OK(bs.barrier(), 7);
        if (rank == 0) {
          std::memcpy(w->windowOf(0) + 64, &second, 8);
          w->carryNext(64, 8);
          w->signal(1, 7);
          w->carryNext(0, 0);
          w->signal(1, 7);  // carries nothing
        } else {
          CHILD_CHECK(waitFor(2), 8);
          CHILD_CHECK(!w->readCarried(0, 0, 8, &got), 9);  // carried by signal 1, older than signal 2
          CHILD_CHECK(w->readCarried(0, 64, 8, &got) && got == second, 10);
          CHILD_CHECK(waitFor(3), 11);
          CHILD_CHECK(!w->readCarried(0, 64, 8, &got), 12);  // signal 3 carried nothing
          CHILD_CHECK(w->carriedReads() == 3, 13);
          // A peer's tag that claims more bytes than a slot holds (signal 3, 31 bytes at 0) is
          // refused, never copied past the slot.
          const shm::SegLayout l = shm::segLayout(2, 8, 16 << 10, 1024);
          auto* line = reinterpret_cast<shm::SignalLine*>(w->windowOf(1) - l.windowOffset + l.signalsOffset);
          line->carry[1].tag.store((uint64_t{3} << 48) | (uint64_t{31} << 43));
          uint64_t wide[2] = {0, 0};
          CHILD_CHECK(!w->readCarried(0, 15, 16, wide) && !w->readCarried(0, 0, 8, &got), 15);
        }
        return 0;
      },
      &pids);
  expectAllOk(res, pids);
}

// A peer killed before its next call: the others' waits fail with tribRemoteError naming it, within
// the liveness interval, not at the timeout.
TEST(ShmWindows, PeerKilledBeforeSignallingFailsTheOthersNamingIt) {
  for (bool twoShot : {false, true}) {
    const int n = 3, victim = 1;
    std::vector<pid_t> pids;
    auto res = runShmRanks(
        n, windowOptions(8192), 30,
        [twoShot](int rank, ShmTransport& t, Bootstrap& bs) {
          WindowRank w(t.windows(), rank, n);
          const Algo algo = twoShot ? Algo::TwoShot : Algo::OneShot;
          std::vector<int32_t> a(5000, rank), b(5000);
          const uint64_t count = twoShot ? 5000 : 16;
          CHILD_OK(w.allReduce(algo, a.data(), b.data(), count, tribInt32, tribSum), 1);
          CHILD_CHECK(b[0] == 0 + 1 + 2, 2);
          CHILD_OK(bs.barrier(), 3);
          if (rank == victim) kill(getpid(), SIGKILL);
          auto t0 = net::Clock::now();
          Status st = w.allReduce(algo, a.data(), b.data(), count, tribInt32, tribSum, 0, 10000);
          double ms = std::chrono::duration<double, std::milli>(net::Clock::now() - t0).count();
          CHILD_CHECK(ms < 3000, 4);
          CHILD_CHECK(st.code() == tribRemoteError, 5);
          CHILD_CHECK(st.message().find("rank 1") != std::string::npos, 6);
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

// A rank whose transport is aborted (alive, but it will not signal again) says so in its segment
// header: the others fail at once with an error naming it, instead of at a timeout.
TEST(ShmWindows, AbortedPeerFailsTheOthersPromptly) {
  for (bool twoShot : {false, true}) {
    std::vector<pid_t> pids;
    auto res = runShmRanks(
        3, windowOptions(8192), 30,
        [twoShot](int rank, ShmTransport& t, Bootstrap& bs) {
          WindowRank w(t.windows(), rank, 3);
          const Algo algo = twoShot ? Algo::TwoShot : Algo::OneShot;
          std::vector<int32_t> a(3000, rank), b(3000);
          const uint64_t count = twoShot ? 3000 : 16;
          CHILD_OK(w.allReduce(algo, a.data(), b.data(), count, tribInt32, tribSum), 1);
          CHILD_OK(bs.barrier(), 2);
          if (rank == 1) {
            t.abort(errorf(tribAborted, "test abort"));
            CHILD_OK(bs.barrier(), 9);  // alive while the others wait: not a dead peer
            return 0;
          }
          auto t0 = net::Clock::now();
          Status st = w.allReduce(algo, a.data(), b.data(), count, tribInt32, tribSum, 0, 10000);
          double ms = std::chrono::duration<double, std::milli>(net::Clock::now() - t0).count();
          CHILD_CHECK(ms < 2000, 3);
          CHILD_CHECK(st.code() == tribRemoteError, 4);
          CHILD_CHECK(st.message().find("rank 1") != std::string::npos, 5);
          CHILD_OK(bs.barrier(), 9);
          return 0;
        },
        &pids);
    expectAllOk(res, pids);
  }
}

namespace {

// Where a rank's all-reduce buffer comes from: the heap (copied into windows), tribMemAlloc, or a
// shared mapping the caller made and registered (both exposable: peers map them).
enum class Source { Heap, MemAlloc, RegisteredMapping };

class Buffer {
 public:
  Buffer(size_t bytes, Source source) : source_(source), bytes_(bytes), regs_(99) {
    if (source == Source::MemAlloc) {
      if (!sharedAlloc(bytes, &p_).ok()) p_ = nullptr;
    } else if (source == Source::RegisteredMapping) {
      p_ = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
      if (p_ == MAP_FAILED || !regs_.add(p_, bytes, &handle_).ok() ||
          classifyMemory(p_, bytes, &regs_) != MemoryKind::HostShared)
        p_ = nullptr;  // the test fails on it (adoption must have happened)
    } else {
      heap_.resize(bytes);
      p_ = heap_.data();
    }
  }
  ~Buffer() {
    if (source_ == Source::MemAlloc) (void)sharedFree(p_);
    if (source_ == Source::RegisteredMapping && p_) {  // deregistered (the adoption ends) before unmapped
      (void)regs_.remove(handle_);
      munmap(p_, bytes_);
    }
  }
  float* f() const { return static_cast<float*>(p_); }

 private:
  Source source_;
  size_t bytes_;
  void* p_ = nullptr;
  std::vector<uint8_t> heap_;
  Registrations regs_;
  void* handle_ = nullptr;
};

}  // namespace

// Mapped two-shot: ranks whose buffers come from tribMemAlloc, or are shared mappings the caller
// registered (every rank's, or rank 0's only), expose them and their peers read them in place of
// staged copies; over several chunks (4 KiB cells), in and out of place, the results are the
// copy-only run's bits, and the exposed-read counter shows who read mapped (it would stay 0 if
// expose silently fell back to copies).
TEST(ShmWindows, MappedTwoShotMatchesTheCopiesBitForBit) {
  if (!fdTakingAllowed()) GTEST_SKIP() << "Yama ptrace_scope > 1: peers cannot take each other's fds";
  for (Source source : {Source::MemAlloc, Source::RegisteredMapping}) {
    for (int n : {2, 3}) {
      for (int sharedRanks : {n, 1}) {
        std::vector<pid_t> pids;
        auto res = runShmRanks(
            n, windowOptions(8192), 60,
            [n, sharedRanks, source](int rank, ShmTransport& t, Bootstrap&) {
              CHILD_CHECK(t.exposes(), 1);
              WindowRank w(t.windows(), rank, n);
              const Source mine = rank < sharedRanks ? source : Source::Heap;
              // Some peer's buffers are shared: this rank reads mapped.
              const bool readsMapped = sharedRanks > 1 || rank != 0;
              for (uint64_t count : {3000, 1024, 77}) {  // 3 chunks, 1 chunk, slices of 16-element grains
                for (bool inPlace : {false, true}) {
                  const size_t bytes = count * sizeof(float);
                  Buffer in(bytes, mine), out(bytes, mine);
                  CHILD_CHECK(in.f() && out.f(), 2);
                  std::vector<float> x(count), ref(count);
                  for (uint64_t e = 0; e < count; ++e)
                    x[e] = 1.0f / static_cast<float>(rank + 3 + e % 11) + 1e-7f * static_cast<float>(e);
                  float* src = inPlace ? out.f() : in.f();
                  std::memcpy(src, x.data(), bytes);
                  CHILD_OK(
                      w.allReduce(Algo::TwoShot, src, out.f(), count, tribFloat32, tribSum, 0, 20000, false),
                      3);
                  std::memcpy(ref.data(), out.f(), bytes);
                  std::memcpy(src, x.data(), bytes);
                  if (!inPlace) std::memset(out.f(), 0xff, bytes);
                  const uint64_t before = t.windows()->exposedReads();
                  CHILD_OK(w.allReduce(Algo::TwoShot, src, out.f(), count, tribFloat32, tribSum), 4);
                  CHILD_CHECK(std::memcmp(ref.data(), out.f(), bytes) == 0, 5);
                  CHILD_CHECK((t.windows()->exposedReads() > before) == readsMapped, 6);
                }
              }
              return 0;
            },
            &pids);
        expectAllOk(res, pids);
      }
    }
  }
}

// Two communicators of the same processes (a parent and its split, as two shm transports) read the
// same tribMemAlloc buffers: the second maps none of them again, and still reads them after the
// first is gone, with the same bits.
TEST(ShmWindows, TransportsOfOneProcessShareTheirPeersMappings) {
  if (!fdTakingAllowed()) GTEST_SKIP() << "Yama ptrace_scope > 1: peers cannot take each other's fds";
  const int n = 3;
  std::vector<pid_t> pids;
  auto res = runShmRanks(
      n, windowOptions(8192), 60,
      [](int rank, ShmTransport&, Bootstrap& b) {
        std::vector<int> local(n);
        for (int i = 0; i < n; ++i) local[i] = i;
        std::unique_ptr<ShmTransport> first, second;
        CHILD_OK(ShmTransport::create(rank, n, local, b.oobAllGather(), windowOptions(8192), &first), 1);
        CHILD_OK(ShmTransport::create(rank, n, local, b.oobAllGather(), windowOptions(8192), &second), 2);
        CHILD_CHECK(first->exposes() && second->exposes(), 3);
        const uint64_t count = 3000;
        const size_t bytes = count * sizeof(float);
        Buffer in(bytes, Source::MemAlloc), out(bytes, Source::MemAlloc);
        CHILD_CHECK(in.f() && out.f(), 4);
        for (uint64_t e = 0; e < count; ++e) in.f()[e] = 1.0f / static_cast<float>(rank + 3 + e % 11);
        {
          WindowRank w(first->windows(), rank, n);
          CHILD_OK(w.allReduce(Algo::TwoShot, in.f(), out.f(), count, tribFloat32, tribSum), 5);
        }
        std::vector<float> ref(out.f(), out.f() + count);
        const uint64_t mapped = shmPeerMappingsMade(), reads = second->windows()->exposedReads();
        CHILD_CHECK(mapped > 0, 6);
        CHILD_OK(b.barrier(), 7);
        first.reset();  // the first communicator is gone; what it mapped stays for the second
        std::memset(out.f(), 0, bytes);
        WindowRank w(second->windows(), rank, n);
        CHILD_OK(w.allReduce(Algo::TwoShot, in.f(), out.f(), count, tribFloat32, tribSum), 8);
        CHILD_CHECK(second->windows()->exposedReads() > reads, 9);
        CHILD_CHECK(shmPeerMappingsMade() == mapped, 10);
        CHILD_CHECK(std::memcmp(ref.data(), out.f(), bytes) == 0, 11);
        CHILD_OK(b.barrier(), 12);
        return 0;
      },
      &pids);
  expectAllOk(res, pids);
}

// TRIB_SHM_MAPPED=0 (ShmOptions::mapped 0): nothing is exposed, tribMemAlloc buffers are copied.
TEST(ShmWindows, MappedOffCopiesTribMemAllocBuffers) {
  ShmOptions o = windowOptions(8192);
  o.mapped = 0;
  std::vector<pid_t> pids;
  auto res = runShmRanks(
      2, o, 30,
      [](int rank, ShmTransport& t, Bootstrap&) {
        CHILD_CHECK(!t.exposes(), 1);
        WindowRank w(t.windows(), rank, 2);
        Buffer in(3000 * 4, Source::MemAlloc), out(3000 * 4, Source::MemAlloc);
        CHILD_CHECK(in.f() && out.f(), 2);
        for (int e = 0; e < 3000; ++e) in.f()[e] = static_cast<float>(e + rank);
        CHILD_OK(w.allReduce(Algo::TwoShot, in.f(), out.f(), 3000, tribFloat32, tribSum), 3);
        for (int e = 0; e < 3000; ++e) CHILD_CHECK(out.f()[e] == static_cast<float>(2 * e + 1), 4);
        CHILD_CHECK(t.windows()->exposedReads() == 0, 5);
        return 0;
      },
      &pids);
  expectAllOk(res, pids);
}

// A peer's exposure whose allocation is gone by the time this rank maps it (its caller freed the
// buffer too early, or the descriptor is garbage) fails that read with an error naming the peer,
// never this process; the windows stay usable.
TEST(ShmWindows, AnExposureThatCannotBeMappedFailsTheReadClearly) {
  if (!fdTakingAllowed()) GTEST_SKIP() << "Yama ptrace_scope > 1: peers cannot take each other's fds";
  std::vector<pid_t> pids;
  auto res = runShmRanks(
      2, windowOptions(8192), 30,
      [](int rank, ShmTransport& t, Bootstrap& bs) {
        PeerWindows* w = t.windows();
        CHILD_CHECK(t.exposes(), 1);
        if (rank == 0) {
          void* p = nullptr;
          CHILD_OK(sharedAlloc(4096, &p), 2);
          CHILD_CHECK(w->expose(0, p, 4096, MemoryKind::HostShared), 3);
          CHILD_OK(sharedFree(p), 4);  // its memfd is closed: nothing left to take
          w->signal(1, 7);
          CHILD_OK(bs.barrier(), 5);
          return 0;
        }
        uint64_t count = 0;
        uint32_t fp = 0;
        auto deadline = net::deadlineAfter(10000);
        while (count < 1 && net::Clock::now() < deadline) CHILD_OK(w->pollSignals(0, 1, &count, &fp), 6);
        CHILD_CHECK(count == 1, 7);
        const uint8_t* at = nullptr;
        Status st = w->readAddress(0, 0, 4096, &at);
        CHILD_CHECK(!st.ok() && st.code() == tribSystemError, 8);
        CHILD_CHECK(st.message().find("rank 0's buffer") != std::string::npos, 9);
        CHILD_CHECK(w->exposedReads() == 0, 10);
        // A range nobody exposed is still read from the window.
        CHILD_OK(w->readAddress(0, 4096, 64, &at), 11);
        CHILD_CHECK(at == w->windowOf(0) + 4096, 12);
        CHILD_OK(bs.barrier(), 13);
        return 0;
      },
      &pids);
  expectAllOk(res, pids);
}
