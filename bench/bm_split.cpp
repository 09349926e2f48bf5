// Cost of tribCommSplit between processes of one host, with the transports' contexts shared by
// the communicators of a process (TRIB_SHARE_TRANSPORTS=1, the default) and without (0), in the
// same run: a split, one 4-byte all-reduce on it, and its destroy, repeated. The UCX transport is
// forced over TCP (what it carries between hosts); the default choice (shm) is shown for scale.
// Run: build/bench/bm_split [--ranks N] [--iters K]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tests/store_util.hpp"
#include "tributary/tributary.h"

using namespace trib;
using namespace trib::testing;
using Clock = std::chrono::steady_clock;

namespace {

// Median milliseconds per split + all-reduce + destroy on every rank, or < 0 on failure.
double medianSplitMs(int ranks, int iters, const char* transport, bool share) {
  std::string file = "/tmp/trib-bm-split." + std::to_string(getpid());
  StoreRun run = runWithStore(ranks, 120, storeOptions("bm-split"), [&](int rank, const std::string& addr) {
    setenv("TRIB_STORE", addr.c_str(), 1);
    setenv("TRIB_AUTH_KEY", "bm-split", 1);
    setenv("TRIB_RANK", std::to_string(rank).c_str(), 1);
    setenv("TRIB_NRANKS", std::to_string(ranks).c_str(), 1);
    setenv("TRIB_SHARE_TRANSPORTS", share ? "1" : "0", 1);
    if (transport) setenv("TRIB_TRANSPORT", transport, 1);
    if (transport && !std::strcmp(transport, "ucx")) setenv("UCX_TLS", "tcp", 1);
    tribComm_t world = nullptr;
    if (tribCommInitFromEnv(&world, nullptr) != tribSuccess) {
      std::fprintf(stderr, "rank %d: init: %s\n", rank, tribGetLastError(nullptr));
      return 1;
    }
    std::vector<double> ms;
    for (int i = 0; i < iters; ++i) {
      float in = 1, out = 0;
      if (tribBarrier(world, nullptr) != tribSuccess) return 2;
      auto t0 = Clock::now();
      tribComm_t sub = nullptr;
      if (tribCommSplit(world, 0, rank, &sub, nullptr) != tribSuccess ||
          tribAllReduce(&in, &out, 1, tribFloat32, tribSum, sub, nullptr) != tribSuccess ||
          out != static_cast<float>(ranks) || tribCommDestroy(sub) != tribSuccess) {
        std::fprintf(stderr, "rank %d: split %d: %s\n", rank, i, tribGetLastError(nullptr));
        return 3;
      }
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    if (rank == 0) {
      FILE* f = std::fopen(file.c_str(), "w");
      if (!f) return 4;
      std::fprintf(f, "%f\n", ms[ms.size() / 2]);
      std::fclose(f);
    }
    return tribCommDestroy(world) == tribSuccess ? 0 : 5;
  });
  double median = -1;
  bool ok = run.error.empty() && !run.results.empty();
  for (const ChildResult& r : run.results) ok = ok && r.code == 0;
  if (FILE* f = std::fopen(file.c_str(), "r")) {
    if (ok && std::fscanf(f, "%lf", &median) != 1) median = -1;
    std::fclose(f);
    std::remove(file.c_str());
  }
  if (!ok) {
    std::fprintf(stderr, "%s run failed %s\n", transport ? transport : "default", run.error.c_str());
    return -1;
  }
  return median;
}

}  // namespace

int main(int argc, char** argv) {
  int ranks = 4, iters = 30;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--ranks") && i + 1 < argc)
      ranks = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--iters") && i + 1 < argc)
      iters = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--ranks N] [--iters K]\n", argv[0]);
      return 2;
    }
  }
  if (ranks < 2 || iters < 1) {
    std::fprintf(stderr, "need --ranks >= 2 and --iters >= 1\n");
    return 2;
  }
  std::printf("split + 4-byte all-reduce + destroy, %d processes, median of %d (ms)\n", ranks, iters);
  std::printf("%-10s %10s %10s %8s\n", "transport", "shared", "own", "ratio");
  int failures = 0;
  for (const char* t : {"ucx", static_cast<const char*>(nullptr)}) {
    double shared = medianSplitMs(ranks, iters, t, true), own = medianSplitMs(ranks, iters, t, false);
    if (shared < 0 || own < 0) ++failures;
    std::printf("%-10s %10.2f %10.2f %8.2f\n", t ? t : "default", shared, own,
                shared > 0 ? own / shared : 0.0);
  }
  return failures ? 1 : 0;
}
