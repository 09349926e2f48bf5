// Expose on threads: the loopback fabric's windows expose any host buffer by its address (one
// address space), so mapped two-shot runs between threads, where ThreadSanitizer sees every read
// of a peer's buffer against that peer's and its caller's writes (label tsan).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "transports/loopback/loopback.hpp"
#include "window_util.hpp"

namespace trib {
namespace {

using testing::WindowRank;

// Each of n ranks, a thread over one loopback fabric with windows of `windowBytes`, runs
// body(rank, windows, check); check(false) records the first failing check per rank.
using Check = std::function<void(bool)>;
void onThreads(int n, const char* windowBytes,
               const std::function<void(int, PeerWindows*, WindowRank&, const Check&)>& body) {
  setenv("TRIB_WINDOW_BYTES", windowBytes, 1);
  auto fabric = makeLoopbackFabric(n, true);
  std::vector<std::unique_ptr<Transport>> ts;
  for (int r = 0; r < n; ++r) ts.push_back(makeLoopbackTransport(fabric, r));
  ASSERT_TRUE(ts[0]->windows() && ts[0]->windows()->windowBytes() == std::stoull(windowBytes));
  std::vector<std::thread> threads;
  std::vector<int> failed(n, 0);
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      WindowRank w(ts[r]->windows(), r, n);
      int step = 0;
      const Check check = [&](bool ok) {
        ++step;
        if (!ok && !failed[r]) failed[r] = step;
      };
      body(r, ts[r]->windows(), w, check);
    });
  }
  for (auto& t : threads) t.join();
  unsetenv("TRIB_WINDOW_BYTES");
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(failed[r], 0) << n << " ranks: rank " << r << "'s check " << failed[r];
}

// Rank r's input for a round: distinct per rank, element and round, not exactly representable sums.
std::vector<float> inputOf(int r, uint64_t count, int round) {
  std::vector<float> x(count);
  for (uint64_t e = 0; e < count; ++e)
    x[e] = 1.0f / static_cast<float>(r + 3 + e % 13) + 1e-7f * static_cast<float>(e + round);
  return x;
}

// One call of `algo` on rank r's input for `round`, first copy-only (the reference), then allowed to
// expose: checks both succeed with the same bits and returns whether this rank read an exposure.
// The buffers are rewritten at once after (the caller's again: that must race with no peer's read).
bool againstTheCopies(Algo algo, int r, uint64_t count, int round, bool inPlace, PeerWindows* windows,
                      WindowRank& w, const Check& check) {
  const std::vector<float> x = inputOf(r, count, round);
  std::vector<float> in(count), out(count, -1.0f), ref(count);
  float* src = inPlace ? out.data() : in.data();
  std::memcpy(src, x.data(), count * sizeof(float));
  check(w.allReduce(algo, src, out.data(), count, tribFloat32, tribSum, 0, 20000, false).ok());
  ref = out;
  std::memcpy(src, x.data(), count * sizeof(float));
  const uint64_t before = windows->exposedReads();
  check(w.allReduce(algo, src, out.data(), count, tribFloat32, tribSum).ok());
  check(std::memcmp(ref.data(), out.data(), count * sizeof(float)) == 0);
  const bool read = windows->exposedReads() > before;
  if (algo == Algo::TwoShot && count <= 1024) {  // one-shot (one 4 KiB cell) reads cells two-shot exposed
    std::memcpy(src, x.data(), count * sizeof(float));
    check(w.allReduce(Algo::OneShot, src, out.data(), count, tribFloat32, tribSum).ok());
    check(std::memcmp(ref.data(), out.data(), count * sizeof(float)) == 0);
  }
  std::fill(in.begin(), in.end(), 0.0f);
  std::fill(out.begin(), out.end(), 0.0f);
  return read;
}

// Several calls (three chunks of 4 KiB cells, one chunk, a short one; in and out of place; buffers
// reused by the caller at once): each the copy-only run's bits, with every rank reading its peers'
// buffers directly; one-shot between them (same fold, same bits) reads the cells as copies again.
TEST(Expose, TwoShotOnThreadsReadsPeersBuffersAndMatchesTheCopies) {
  for (int n : {2, 3, 4}) {
    onThreads(n, "8192", [&](int r, PeerWindows* windows, WindowRank& w, const Check& check) {
      for (int round = 0; round < 4; ++round) {
        for (uint64_t count : {3000, 1024, 77}) {
          for (bool inPlace : {false, true})
            check(againstTheCopies(Algo::TwoShot, r, count, round, inPlace, windows, w, check));
        }
      }
    });
  }
}

// One-shot exposes its input from kOneShotExposeFromElems (and ends with one more exchange; in
// place it folds into scratch first): peers fold straight from it, with the copy-only run's bits;
// below that size it copies into the cell and nothing is read through an exposure.
TEST(Expose, OneShotOnThreadsExposesLargeInputs) {
  for (int n : {2, 3}) {
    onThreads(n, "262144", [&](int r, PeerWindows* windows, WindowRank& w, const Check& check) {
      for (int round = 0; round < 3; ++round) {
        for (uint64_t count : {kOneShotExposeFromElems + 5, kOneShotExposeFromElems - 1, uint64_t{100}}) {
          for (bool inPlace : {false, true})
            check(againstTheCopies(Algo::OneShot, r, count, round, inPlace, windows, w, check) ==
                  (count >= kOneShotExposeFromElems));
        }
      }
    });
  }
}

}  // namespace
}  // namespace trib
