// The executor over remote windows (PeerWindows::remote(): the peers' windows are not mapped, as
// over verbs across hosts): every peer-memory schedule runs through a provider whose puts and gets
// complete late and out of order (remote_window_util.hpp), with exact results, and no signal ever
// overtakes the puts and gets it releases.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "remote_window_util.hpp"
#include "window_util.hpp"

namespace trib {
namespace {

using testing::RemoteWindowGroup;
using testing::WindowRank;

constexpr uint64_t kWindowBytes = 64 * 1024;  // cells of 32 KiB: 8192 int32 elements

int32_t value(int rank, int call, uint64_t i) {
  return static_cast<int32_t>(rank * 1000 + call * 7 + i % 977);
}

// Runs `calls` all-reduces (int32 sum) with `algo` on n threads over one group; checks every
// element. Returns the first failure's text ("" when all were exact).
std::string runCalls(RemoteWindowGroup& g, int n, Algo algo, uint64_t count, bool inPlace, int calls) {
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      WindowRank wr(g.rank(r), r, n);
      std::vector<int32_t> in(count), out(count);
      for (int c = 0; c < calls && errors[r].empty(); ++c) {
        for (uint64_t i = 0; i < count; ++i) in[i] = value(r, c, i);
        void* dst = inPlace ? in.data() : out.data();
        Status st = wr.allReduce(algo, in.data(), dst, count, tribInt32, tribSum, 0, 20000);
        if (!st.ok()) {
          errors[r] = st.message();
          return;
        }
        const int32_t* got = static_cast<const int32_t*>(dst);
        for (uint64_t i = 0; i < count; ++i) {
          int32_t want = 0;
          for (int q = 0; q < n; ++q) want += value(q, c, i);
          if (got[i] != want) {
            errors[r] = strprintf("rank %d call %d element %llu: %d, expected %d", r, c,
                                  static_cast<unsigned long long>(i), got[i], want);
            return;
          }
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const std::string& e : errors)
    if (!e.empty()) return e;
  return "";
}

struct Case {
  Algo algo;
  int n;
  uint64_t count;
  bool inPlace;
};

class RemoteWindows : public ::testing::TestWithParam<Case> {};

TEST_P(RemoteWindows, AllReduceExactAndOrdered) {
  const Case c = GetParam();
  RemoteWindowGroup g(c.n, kWindowBytes, /*maxDelay=*/8, /*seed=*/static_cast<uint32_t>(c.count + c.n));
  EXPECT_EQ(runCalls(g, c.n, c.algo, c.count, c.inPlace, 5), "");
  // The peers' bytes moved through puts and gets, or (up to 16 bytes) with the signals.
  uint64_t carried = 0;
  for (int r = 0; r < c.n; ++r) carried += g.rank(r)->carriedReads();
  EXPECT_GT(g.transfersDone() + carried, 0u);
  EXPECT_EQ(g.signalsOvertaking(), 0u);
}

// Reads of up to 16 bytes of a peer's window take the copy its signal carried
// (PeerWindows::readCarried) instead of a get, once the signal was waited for; the provider's
// gets complete late and out of order, so a copy taken from the wrong signal gives a wrong sum.
// Larger reads never take one.
TEST(RemoteWindowsCarried, SmallOneShotsReadWhatTheSignalsCarried) {
  for (int n : {2, 3})
    for (uint64_t count : {uint64_t{1}, uint64_t{3}, uint64_t{4}, uint64_t{5}, uint64_t{100}}) {
      RemoteWindowGroup g(n, kWindowBytes, /*maxDelay=*/8, /*seed=*/static_cast<uint32_t>(7 * n + count));
      const int calls = 20;
      EXPECT_EQ(runCalls(g, n, Algo::OneShot, count, /*inPlace=*/count % 2 == 1, calls), "")
          << n << " " << count;
      uint64_t carried = 0;
      for (int r = 0; r < n; ++r) carried += g.rank(r)->carriedReads();
      if (count * sizeof(int32_t) <= PeerWindows::kCarryBytes) {
        EXPECT_GT(carried, 0u) << n << " ranks, " << count << " elements";
        EXPECT_LE(carried, static_cast<uint64_t>(calls) * n * (n - 1)) << n << " " << count;
      } else {
        EXPECT_EQ(carried, 0u) << n << " ranks, " << count << " elements";
      }
    }
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (Algo a : {Algo::OneShot, Algo::TwoShot})
    for (int n : {2, 3, 4})
      // 1 and 1000 elements; 20000 is past one-shot's expose size (exposes copy here) and, for
      // two-shot, past a cell (several chunks, cells alternating).
      for (uint64_t count : {uint64_t{1}, uint64_t{1000}, uint64_t{5000}, uint64_t{20000}})
        for (bool inPlace : {false, true}) {
          if (a == Algo::OneShot && count * 4 > kWindowBytes / 2) continue;  // one-shot: one cell
          out.push_back({a, n, count, inPlace});
        }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Executor, RemoteWindows, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return strprintf("%s_n%d_c%llu_%s", algoName(i.param.algo), i.param.n,
                                            static_cast<unsigned long long>(i.param.count),
                                            i.param.inPlace ? "inplace" : "outofplace");
                         });

// The overtaking check itself: a signal posted while a put to that peer is pending is counted.
TEST(RemoteWindowGroupTest, CountsASignalPostedBeforeItsPut) {
  RemoteWindowGroup g(2, kWindowBytes, /*maxDelay=*/4);
  int32_t x = 42;
  TransferOp op;
  ASSERT_TRUE(g.rank(0)->postPut(1, 0, &x, sizeof x, &op).ok());
  g.rank(0)->signal(1, 0);
  EXPECT_EQ(g.signalsOvertaking(), 1u);
  for (int i = 0; i < 10 && !op.done(); ++i) ASSERT_TRUE(g.rank(0)->progress().ok());
  ASSERT_EQ(op.state.load(), TransferOp::kDone);
  int32_t seen = 0;
  std::memcpy(&seen, g.rank(1)->windowOf(1), sizeof seen);
  EXPECT_EQ(seen, 42);
  uint64_t count = 0;
  uint32_t fp = 0;
  ASSERT_TRUE(g.rank(1)->pollSignals(0, 1, &count, &fp).ok());
  EXPECT_EQ(count, 1u);
}

// A put or get outside the peer's window is refused with the window's size.
TEST(RemoteWindowGroupTest, RefusesOutOfRange) {
  RemoteWindowGroup g(2, kWindowBytes);
  std::vector<uint8_t> buf(16);
  TransferOp op;
  Status st = g.rank(0)->postGet(1, kWindowBytes - 8, buf.data(), 16, &op);
  EXPECT_EQ(st.code(), tribInvalidArgument);
  EXPECT_NE(st.message().find("65536-byte window"), std::string::npos) << st.message();
}

// A peer lost mid-call: its rank's get fails and the execution's error names the step and the peer.
TEST(RemoteWindowGroupTest, LostPeerFailsTheCallNamingIt) {
  RemoteWindowGroup g(2, kWindowBytes);
  g.failPeer(1);
  WindowRank r0(g.rank(0), 0, 2);
  std::vector<int32_t> in(100, 1), out(100);
  Status st = r0.allReduce(Algo::OneShot, in.data(), out.data(), in.size(), tribInt32, tribSum, 0, 5000);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("rank 1 is gone"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace trib
