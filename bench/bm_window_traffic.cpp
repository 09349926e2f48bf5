// What one-shot's memory traffic costs without the library: two threads on two CPUs run the
// pattern of a 2-rank one-shot all-reduce per call (the library's reduce kernel, a flag exchange
// where the schedule signals).
//   exposed:   out of place, each reads both inputs where they lie and writes its output;
//              the inputs never change, so after the first call no line crosses between the cores
//              (what trib-perf's out-of-place loop measures: it never touches its buffers between calls)
//   fresh:     the same, but each rank rewrites its input first (a training step's new gradients),
//              by one copy
//   copied:    in place: copy the buffer into a window cell, exchange, fold both cells into the
//              buffer (the board's and one-shot's in-place pattern: every line crosses every call)
// Run: build/bench/bm_window_traffic [--bytes N] [--iters N]   (docs/BENCHMARKS.md, issue 12)
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "bench_util.hpp"
#include "reduce/reduce.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct alignas(64) Flag {
  std::atomic<long> value{0};
};

// Publishes this side's k-th arrival and waits for the other's, yielding; false after 10 s.
bool exchange(Flag* flags, int me, long k) {
  flags[me].value.store(k, std::memory_order_release);
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  for (unsigned spins = 0; flags[1 - me].value.load(std::memory_order_acquire) < k; ++spins) {
    if (spins % 64 == 63) sched_yield();
    if (spins % 4096 == 0 && Clock::now() > deadline) return false;
  }
  return true;
}

void pin(int cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  pthread_setaffinity_np(pthread_self(), sizeof one, &one);
}

enum class Pattern { Exposed, Fresh, Copied };

double run(Pattern p, size_t elems, int iters) {
  struct Rank {
    std::vector<float> in, out, cell[2];
  } ranks[2];
  for (int r = 0; r < 2; ++r) {
    ranks[r].in.assign(elems, static_cast<float>(r + 1));
    ranks[r].out.assign(elems, 0);
    for (auto& c : ranks[r].cell) c.assign(elems, 0);
  }
  Flag flags[2];
  double us[2] = {0, 0};
  bool ok[2] = {true, true};
  auto body = [&](int me) {
    pin(me);
    Rank& mine = ranks[me];
    long k = 0;
    const auto t0 = Clock::now();
    for (int it = 0; it < iters && ok[me]; ++it) {
      float* dst = mine.out.data();
      const float *a = nullptr, *b = nullptr;
      if (p == Pattern::Copied) {
        std::vector<float>& cell = mine.cell[it & 1];
        std::memcpy(cell.data(), dst, elems * sizeof(float));
        a = ranks[0].cell[it & 1].data(), b = ranks[1].cell[it & 1].data();
      } else {
        if (p == Pattern::Fresh)  // one copy, as "copied" makes: the difference is where lines lie
          std::memcpy(mine.in.data(), mine.cell[it & 1].data(), elems * sizeof(float));
        a = ranks[0].in.data(), b = ranks[1].in.data();
      }
      ok[me] = exchange(flags, me, ++k);
      trib::reduce(dst, a, b, elems, tribFloat32, tribSum);  // the library's kernel
      ok[me] = ok[me] && exchange(flags, me, ++k);           // the peer has read what this rank exposed
    }
    us[me] = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / iters;
  };
  std::thread other(body, 1);
  body(0);
  other.join();
  return ok[0] && ok[1] ? std::max(us[0], us[1]) : -1;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<size_t> sizes = {16 << 10, 64 << 10, 256 << 10, 1 << 20};
  int iters = 2000;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--bytes") && i + 1 < argc)
      sizes = {static_cast<size_t>(std::atoll(argv[++i]))};
    else if (!std::strcmp(argv[i], "--iters") && i + 1 < argc)
      iters = std::max(1, std::atoi(argv[++i]));
    else {
      std::fprintf(stderr, "usage: %s [--bytes N] [--iters N]\n", argv[0]);
      return 2;
    }
  }
  if (std::thread::hardware_concurrency() < 2) {
    std::printf("needs two CPUs\n");
    return 0;
  }
  // The phase of these VMs' CPUs (docs/BENCHMARKS.md "Two machine phases") decides every figure.
  std::printf("# core-to-core round trip: %.0f ns\n", trib::bench::coreRoundTripNs());
  std::printf("%10s %12s %12s %12s   (us per call, the slower thread; minimum of 5 runs)\n", "bytes",
              "exposed", "fresh", "copied");
  for (size_t bytes : sizes) {
    double best[3] = {1e30, 1e30, 1e30};
    for (int rep = 0; rep < 5; ++rep)
      for (int p = 0; p < 3; ++p) {
        const double t = run(static_cast<Pattern>(p), bytes / sizeof(float), iters);
        if (t < 0) {
          std::fprintf(stderr, "a thread waited 10 s for the other: the CPUs are taken\n");
          return 1;
        }
        best[p] = std::min(best[p], t);
      }
    std::printf("%10zu %12.2f %12.2f %12.2f\n", bytes, best[0], best[1], best[2]);
  }
  return 0;
}
