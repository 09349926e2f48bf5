// Expose on threads: the loopback fabric's windows expose any host buffer by its address (one
// address space), so mapped two-shot runs between threads, where ThreadSanitizer sees every read
// of a peer's buffer against that peer's and its caller's writes (label tsan).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "transports/loopback/loopback.hpp"
#include "window_util.hpp"

namespace trib {
namespace {

using testing::WindowRank;

// Several calls (three chunks of 4 KiB cells, one chunk, a short one; in and out of place; buffers
// reused by the caller at once): each the copy-only run's bits, with every rank reading its peers'
// buffers directly; one-shot between them (same fold, same bits) reads the cells as copies again.
TEST(Expose, TwoShotOnThreadsReadsPeersBuffersAndMatchesTheCopies) {
  setenv("TRIB_WINDOW_BYTES", "8192", 1);
  for (int n : {2, 3, 4}) {
    auto fabric = makeLoopbackFabric(n, true);
    std::vector<std::unique_ptr<Transport>> ts;
    for (int r = 0; r < n; ++r) ts.push_back(makeLoopbackTransport(fabric, r));
    ASSERT_TRUE(ts[0]->windows() && ts[0]->windows()->windowBytes() == 8192);
    std::vector<std::thread> threads;
    std::vector<int> failed(n, 0);
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        PeerWindows* windows = ts[r]->windows();
        WindowRank w(windows, r, n);
        int step = 0;
        auto check = [&](bool ok) {
          ++step;
          if (!ok && !failed[r]) failed[r] = step;
        };
        for (int round = 0; round < 4; ++round) {
          for (uint64_t count : {3000, 1024, 77}) {
            for (bool inPlace : {false, true}) {
              std::vector<float> x(count), in(count), out(count, -1.0f), ref(count);
              for (uint64_t e = 0; e < count; ++e)
                x[e] = 1.0f / static_cast<float>(r + 3 + e % 13) + 1e-7f * static_cast<float>(e + round);
              float* src = inPlace ? out.data() : in.data();
              std::memcpy(src, x.data(), count * sizeof(float));
              check(w.allReduce(Algo::TwoShot, src, out.data(), count, tribFloat32, tribSum, 0, 20000, false)
                        .ok());
              ref = out;
              std::memcpy(src, x.data(), count * sizeof(float));
              const uint64_t before = windows->exposedReads();
              check(w.allReduce(Algo::TwoShot, src, out.data(), count, tribFloat32, tribSum).ok());
              check(std::memcmp(ref.data(), out.data(), count * sizeof(float)) == 0);
              check(windows->exposedReads() > before);
              if (count <= 1024) {  // one-shot (one 4 KiB cell) reads cells two-shot exposed: copies now
                std::memcpy(src, x.data(), count * sizeof(float));
                check(w.allReduce(Algo::OneShot, src, out.data(), count, tribFloat32, tribSum).ok());
                check(std::memcmp(ref.data(), out.data(), count * sizeof(float)) == 0);
              }
              // The caller owns its buffers again: rewriting them races with no peer's read.
              std::fill(in.begin(), in.end(), 0.0f);
              std::fill(out.begin(), out.end(), 0.0f);
            }
          }
        }
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < n; ++r)
      EXPECT_EQ(failed[r], 0) << n << " ranks: rank " << r << "'s check " << failed[r];
  }
  unsetenv("TRIB_WINDOW_BYTES");
}

// One-shot exposes its input out of place from kOneShotExposeFromElems (and ends with one more
// exchange): peers fold straight from it, with the copy-only run's bits; below that size, or in
// place, it copies into the cell and nothing is read through an exposure.
TEST(Expose, OneShotOnThreadsExposesLargeInputsOutOfPlace) {
  setenv("TRIB_WINDOW_BYTES", "262144", 1);  // cells of 32768 floats
  for (int n : {2, 3}) {
    auto fabric = makeLoopbackFabric(n, true);
    std::vector<std::unique_ptr<Transport>> ts;
    for (int r = 0; r < n; ++r) ts.push_back(makeLoopbackTransport(fabric, r));
    std::vector<std::thread> threads;
    std::vector<int> failed(n, 0);
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        PeerWindows* windows = ts[r]->windows();
        WindowRank w(windows, r, n);
        int step = 0;
        auto check = [&](bool ok) {
          ++step;
          if (!ok && !failed[r]) failed[r] = step;
        };
        for (int round = 0; round < 3; ++round) {
          for (uint64_t count : {kOneShotExposeFromElems + 5, kOneShotExposeFromElems - 1, uint64_t{100}}) {
            for (bool inPlace : {false, true}) {
              std::vector<float> x(count), in(count), out(count, -1.0f), ref(count);
              for (uint64_t e = 0; e < count; ++e)
                x[e] = 1.0f / static_cast<float>(r + 2 + e % 11) + 1e-7f * static_cast<float>(e + round);
              float* src = inPlace ? out.data() : in.data();
              std::memcpy(src, x.data(), count * sizeof(float));
              check(w.allReduce(Algo::OneShot, src, out.data(), count, tribFloat32, tribSum, 0, 20000, false)
                        .ok());
              ref = out;
              std::memcpy(src, x.data(), count * sizeof(float));
              const uint64_t before = windows->exposedReads();
              check(w.allReduce(Algo::OneShot, src, out.data(), count, tribFloat32, tribSum).ok());
              check(std::memcmp(ref.data(), out.data(), count * sizeof(float)) == 0);
              const bool exposed = count >= kOneShotExposeFromElems && !inPlace;
              check((windows->exposedReads() > before) == exposed);
              std::fill(in.begin(), in.end(), 0.0f);  // the caller's again: no peer reads it now
              std::fill(out.begin(), out.end(), 0.0f);
            }
          }
        }
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < n; ++r)
      EXPECT_EQ(failed[r], 0) << n << " ranks: rank " << r << "'s check " << failed[r];
  }
  unsetenv("TRIB_WINDOW_BYTES");
}

}  // namespace
}  // namespace trib
