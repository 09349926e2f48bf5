// Shared by the shm tests and benchmark: fork N ranks that rendezvous through a TCP store in the
// parent and build an ShmTransport, and wait helpers that drive progress() with a deadline.
#pragma once
#include <dirent.h>
#include <sched.h>

#include <fstream>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "store_util.hpp"
#include "transports/shm/shm_transport.hpp"

namespace trib::testing {

// Drive progress until every op is done or timeoutMs passes. Returns false on timeout.
// Polls `spinsPerYield` times between sched_yield() calls (1 = yield every time: kindest to a
// shared machine; more = lower latency when cores are free).
inline bool waitOps(Transport& t, const std::vector<TransferOp*>& ops, int timeoutMs, int spinsPerYield = 1) {
  auto deadline = net::deadlineAfter(timeoutMs);
  for (int spin = 1;; ++spin) {
    bool all = true;
    for (auto* op : ops) all = all && op->done();
    if (all) return true;
    if (net::Clock::now() > deadline) return false;
    (void)t.progress();
    if (spin % spinsPerYield == 0) sched_yield();
  }
}

// Whether Yama lets a process that called PR_SET_PTRACER be ptraced (and so pidfd_getfd'd) by
// its peers: ptrace_scope 0 or 1, or no Yama. Where it does, shm peers must map each other's
// tribMemAlloc buffers (expose); tests assert it.
inline bool fdTakingAllowed() {
  std::ifstream f("/proc/sys/kernel/yama/ptrace_scope");
  int scope = 0;
  return !(f >> scope) || scope <= 1;
}

// Names under /dev/shm that belong to segments created by `pid`.
inline std::vector<std::string> shmLeftovers(pid_t pid) {
  std::vector<std::string> out;
  std::string prefix = std::string(ShmTransport::kSegmentPrefix) + std::to_string(pid) + "-";
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d))
      if (std::string(e->d_name).rfind(prefix, 0) == 0) out.push_back(e->d_name);
    closedir(d);
  }
  return out;
}

using ShmBody = std::function<int(int rank, ShmTransport& t, Bootstrap& bs)>;

// Fork n ranks; each connects an ShmTransport over a bootstrap served by this process.
// Returns the children's results; *pids (optional) gets their pids for leak checks.
inline std::vector<ChildResult> runShmRanks(int n, const ShmOptions& opt, int timeoutSec, const ShmBody& body,
                                            std::vector<pid_t>* pids = nullptr) {
  StoreRun run =
      runWithStore(n, timeoutSec, storeOptions("shm-test"), [&](int rank, const std::string& addr) {
        std::unique_ptr<TcpStore> c;
        CHILD_OK(TcpStore::connect(addr, "shm-test", 10000, &c), 90);
        Bootstrap bs(std::move(c), rank, n, "shm", timeoutSec * 1000);
        std::vector<int> local(n);
        for (int i = 0; i < n; ++i) local[i] = i;
        std::unique_ptr<ShmTransport> t;
        CHILD_OK(ShmTransport::create(rank, n, local, bs.oobAllGather(), opt, &t), 91);
        return body(rank, *t, bs);
      });
  if (!run.error.empty()) std::fprintf(stderr, "runShmRanks: %s\n", run.error.c_str());
  if (pids) *pids = run.pids;
  return run.results;
}

}  // namespace trib::testing
