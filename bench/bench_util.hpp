// What the benchmark programs (trib-perf, trib-soak) share: strict command-line values (sizes with
// K/M/G suffixes, whole numbers), the
// buffer shapes of each collective, one call per collective, the check pattern's collective kind,
// the cores' cache-line round trip, and running this program as the ranks of a one-host job (or
// finding it runs as one).
#pragma once
#include <pthread.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "algo/schedule.hpp"
#include "bootstrap/store.hpp"
#include "bootstrap/unique_id.hpp"
#include "common/perf_pattern.hpp"
#include "common/random.hpp"
#include "plan/planner.hpp"
#include "tributary/tributary.h"

namespace trib::bench {

// Command-line values: a bad one ends the program with a usage error (exit 2) that names the option
// and what it wants, never a silent 0 (atoi("abc")) or a size read up to its first bad character.
[[noreturn]] inline void badArg(const char* prog, const char* opt, const char* v, const std::string& want) {
  std::fprintf(stderr, "%s: %s '%s': %s\n", prog, opt, v, want.c_str());
  std::exit(2);
}
inline long long intArg(const char* prog, const char* opt, const char* v, long long lo, long long hi) {
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v, &end, 10);
  if (end == v || *end || errno == ERANGE || x < lo || x > hi)
    badArg(prog, opt, v, "want a whole number from " + std::to_string(lo) + " to " + std::to_string(hi));
  return x;
}
// A finite number, at least `min`.
inline double numberArg(const char* prog, const char* opt, const char* v, double min) {
  char* end = nullptr;
  const double x = std::strtod(v, &end);
  if (end == v || *end || !std::isfinite(x) || !(x >= min)) {
    char want[64];
    std::snprintf(want, sizeof want, "want a number of at least %g", min);
    badArg(prog, opt, v, want);
  }
  return x;
}
// A byte count with an optional K/M/G/T suffix (trib::parseSize's grammar, not "inf").
inline uint64_t sizeArg(const char* prog, const char* opt, const char* v) {
  uint64_t b = 0;
  const Status s = parseSize(v, &b);
  if (!s.ok()) badArg(prog, opt, v, s.message());
  if (b == UINT64_MAX) badArg(prog, opt, v, "want a byte count (e.g. 8, 64K, 1M, 1G)");
  return b;
}

// nccl-tests' S: the bytes of the full array (the per-rank count for allreduce, the total for
// allgather/reducescatter).
struct Shape {
  uint64_t count;  // the count argument of the call
  uint64_t inElems, outElems;
};
inline Shape shapeFor(Coll c, uint64_t elems, int n) {
  switch (c) {
    case Coll::AllGather:
      return {elems / n, elems / n, (elems / n) * n};
    case Coll::ReduceScatter:
      return {elems / n, (elems / n) * n, elems / n};
    case Coll::AlltoAll:
      return {elems / n, (elems / n) * n, (elems / n) * n};
    default:
      return {elems, elems, elems};
  }
}

inline tribResult_t call(Coll c, const void* s, void* r, uint64_t count, tribDataType_t dt, tribRedOp_t op,
                         int root, tribComm_t comm, tribStream_t stream) {
  switch (c) {
    case Coll::AllReduce:
      return tribAllReduce(s, r, count, dt, op, comm, stream);
    case Coll::ReduceScatter:
      return tribReduceScatter(s, r, count, dt, op, comm, stream);
    case Coll::AllGather:
      return tribAllGather(s, r, count, dt, comm, stream);
    case Coll::Broadcast:
      return tribBroadcast(s, r, count, dt, root, comm, stream);
    case Coll::Reduce:
      return tribReduce(s, r, count, dt, op, root, comm, stream);
    case Coll::AlltoAll:
      return tribAlltoAll(s, r, count, dt, comm, stream);
    default:
      return tribNotSupported;
  }
}

// The check pattern's name for a collective (common/perf_pattern.hpp).
inline perf::Kind perfKind(Coll c) {
  using perf::Kind;
  switch (c) {
    case Coll::AllReduce:
      return Kind::AllReduce;
    case Coll::Reduce:
      return Kind::Reduce;
    case Coll::ReduceScatter:
      return Kind::ReduceScatter;
    case Coll::AllGather:
      return Kind::AllGather;
    case Coll::Broadcast:
      return Kind::Broadcast;
    case Coll::AlltoAll:
      return Kind::AlltoAll;
    default:
      return Kind::Other;
  }
}

// Round trip of a cache line between two threads pinned to the first two CPUs this process may
// use (0 when it may use only one). On this project's VMs it is ~100 ns while the two virtual
// CPUs share a cache and ~340 ns while they do not, and the host switches between the two every
// few minutes; every cross-core copy slows down with it, so each run records which it had.
inline double coreRoundTripNs() {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) < 2) return 0;
  int cpus[2], found = 0;
  for (int c = 0; c < CPU_SETSIZE && found < 2; ++c)
    if (CPU_ISSET(c, &allowed)) cpus[found++] = c;
  constexpr int kTrips = 20000;
  std::atomic<int> flag{0};
  double ns = 0;
  auto pin = [](int cpu) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
  };
  // Both sides bounded in time: a side that never sees the other (a CPU taken away) gives up.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  auto waitFor = [&](int v) {
    for (unsigned spins = 0; flag.load(std::memory_order_acquire) != v; ++spins)
      if (spins % 4096 == 0 && std::chrono::steady_clock::now() > deadline) return false;
    return true;
  };
  std::thread echo([&] {
    pin(cpus[1]);
    for (int i = 0; i < kTrips; ++i) {
      if (!waitFor(2 * i + 1)) return;
      flag.store(2 * i + 2, std::memory_order_release);
    }
  });
  std::thread ping([&] {
    pin(cpus[0]);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kTrips; ++i) {
      flag.store(2 * i + 1, std::memory_order_release);
      if (!waitFor(2 * i + 2)) return;
    }
    ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / kTrips;
  });
  ping.join();
  echo.join();
  return ns;
}

// Whether a launcher (this program's spawnRanks, mpirun, srun, torchrun, PMI) started this process
// as one rank (src/bootstrap/launcher.hpp reads the same variables).
inline bool underLauncher() {
  return std::getenv("TRIB_RANK") || std::getenv("OMPI_COMM_WORLD_RANK") || std::getenv("PMI_RANK") ||
         std::getenv("SLURM_PROCID") || std::getenv("RANK");
}

// Runs `nranks` copies of this program (argv again), each one rank of a job on this host
// (TRIB_RANK/TRIB_NRANKS/TRIB_LOCAL_*), meeting at a store this process serves with a fresh key;
// returns the worst exit code. `prog` names the program in messages and the job id.
inline int spawnRanks(const char* prog, int nranks, char** argv) {
  uint8_t keyBytes[16];
  if (!randomBytes(keyBytes, sizeof keyBytes).ok()) return 1;
  StoreServerOptions so;
  so.authKey = toHex(keyBytes, sizeof keyBytes);
  std::unique_ptr<TcpStoreServer> server;
  if (Status st = TcpStoreServer::start(so, &server); !st.ok()) {
    std::fprintf(stderr, "%s: cannot start the rendezvous store: %s\n", prog, st.message().c_str());
    return 1;
  }
  std::vector<pid_t> pids;
  for (int r = 0; r < nranks; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      setenv("TRIB_RANK", std::to_string(r).c_str(), 1);
      setenv("TRIB_NRANKS", std::to_string(nranks).c_str(), 1);
      setenv("TRIB_LOCAL_RANK", std::to_string(r).c_str(), 1);
      setenv("TRIB_LOCAL_SIZE", std::to_string(nranks).c_str(), 1);
      setenv("TRIB_STORE", server->address().c_str(), 1);
      setenv("TRIB_AUTH_KEY", so.authKey.c_str(), 1);
      setenv("TRIB_JOB_ID", (std::string(prog) + "-" + std::to_string(getppid())).c_str(), 1);
      execv("/proc/self/exe", argv);
      std::perror("exec");
      _exit(127);
    }
    if (pid < 0) {
      std::perror("fork");
      break;
    }
    pids.push_back(pid);
  }
  int worst = pids.size() == static_cast<size_t>(nranks) ? 0 : 1;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    worst = std::max(worst, rc);
  }
  return worst;
}

}  // namespace trib::bench
