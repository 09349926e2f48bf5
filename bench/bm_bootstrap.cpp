// Initialisation time for 2..16 local processes: connect to the TCP store, exchange through the
// Bootstrap, build the shm transport (two allGathers) and pass a barrier. Also prints the store's
// message and byte counts, which docs/BOOTSTRAP.md states as formulas.
// With --threads N[,N...] it measures the store itself at larger rank counts: N ranks as threads of
// this process, each with its own connection, run one allGather of --blob B bytes; it prints the
// allGather's time and the server's messages and bytes, and a fit of time = a*messages + b*bytes
// that docs/BOOTSTRAP.md uses to estimate 4,608 and 131,072 ranks.
// Run: build/bench/bm_bootstrap [--max N] | [--threads 64,256,1024 --blob 256]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <thread>

#include "tests/shm_util.hpp"
#include "tests/store_util.hpp"

using namespace trib;
using namespace trib::testing;

namespace {

// One allGather of `blob` bytes per rank among n thread ranks; 0 on success.
int threadRanks(int n, size_t blob) {
  std::unique_ptr<TcpStoreServer> server;
  StoreServerOptions so = storeOptions("bench");
  if (Status st = TcpStoreServer::start(so, &server); !st.ok()) {
    std::fprintf(stderr, "store: %s\n", st.message().c_str());
    return 1;
  }
  std::vector<std::unique_ptr<Bootstrap>> boots(n);
  std::vector<Status> status(n, Status::Ok());
  std::vector<std::thread> threads;
  double gatherMs = 0;
  StoreServerStats before{};
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      std::unique_ptr<TcpStore> c;
      status[r] = TcpStore::connect(server->address(), "bench", 120000, &c);
      if (!status[r].ok()) return;
      boots[r] = std::make_unique<Bootstrap>(std::move(c), r, n, "scale", 600000);
      if (!(status[r] = boots[r]->barrier()).ok()) return;
      if (r == 0) before = server->stats();
      if (!(status[r] = boots[r]->barrier()).ok()) return;  // every rank saw rank 0's snapshot
      const auto t0 = std::chrono::steady_clock::now();
      std::vector<Blob> all;
      status[r] = boots[r]->allGather(Blob(blob, static_cast<uint8_t>(r)), &all);
      if (status[r].ok() && (all.size() != static_cast<size_t>(n) || all[n - 1].size() != blob))
        status[r] = errorf(tribInternalError, "allGather returned %zu blobs", all.size());
      if (!status[r].ok()) return;
      if (!(status[r] = boots[r]->barrier()).ok()) return;
      if (r == 0)
        gatherMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r)
    if (!status[r].ok()) {
      std::fprintf(stderr, "rank %d: %s\n", r, status[r].message().c_str());
      return 1;
    }
  // The second barrier's messages are counted with the gather's (a few per rank).
  const StoreServerStats after = server->stats();
  std::printf("%6d %8zu %12.2f %12.3f %12llu %14llu %14llu\n", n, blob, gatherMs,
              after.cpuSeconds - before.cpuSeconds,
              static_cast<unsigned long long>(after.messagesIn - before.messagesIn),
              static_cast<unsigned long long>(after.bytesIn - before.bytesIn),
              static_cast<unsigned long long>(after.bytesOut - before.bytesOut));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int maxRanks = 16;
  std::vector<int> threadCounts;
  size_t blob = 256;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--max") && i + 1 < argc) {
      maxRanks = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) {
      std::stringstream list(argv[++i]);
      for (std::string item; std::getline(list, item, ',');) threadCounts.push_back(std::atoi(item.c_str()));
    } else if (!std::strcmp(argv[i], "--blob") && i + 1 < argc) {
      blob = static_cast<size_t>(std::atoll(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--max N] | [--threads N[,N...] [--blob B]]\n", argv[0]);
      return 2;
    }
  }
  if (!threadCounts.empty()) {
    std::printf("%6s %8s %12s %12s %12s %14s %14s\n", "ranks", "blob", "gather(ms)", "server(cpu s)",
                "msgs in", "bytes in", "bytes out");
    for (int n : threadCounts) {
      if (n < 2 || n > 16384) {
        std::fprintf(stderr, "--threads: %d is not in 2..16384\n", n);
        return 2;
      }
      if (threadRanks(n, blob) != 0) return 1;
    }
    return 0;
  }
  std::printf("%6s %12s %12s %12s %14s\n", "ranks", "init(ms)", "msgs in", "msgs out", "bytes out");
  int failures = 0;
  for (int n = 2; n <= maxRanks; n *= 2) {
    StoreRun run = runWithStore(n, 120, storeOptions("bench"), [&](int rank, const std::string& addr) {
      std::unique_ptr<TcpStore> c;
      CHILD_OK(TcpStore::connect(addr, "bench", 10000, &c), 1);
      Bootstrap bs(std::move(c), rank, n, "init", 60000);
      std::vector<int> local(n);
      for (int i = 0; i < n; ++i) local[i] = i;
      std::unique_ptr<ShmTransport> t;
      CHILD_OK(ShmTransport::create(rank, n, local, bs.oobAllGather(), ShmOptions{}, &t), 2);
      CHILD_OK(bs.barrier(), 3);
      return 0;
    });
    if (!run.error.empty()) {
      std::fprintf(stderr, "%s\n", run.error.c_str());
      return 1;
    }
    for (auto& r : run.results) failures += r.code != 0;
    double ms = run.ms;
    StoreServerStats st = run.stats;
    std::printf("%6d %12.2f %12llu %12llu %14llu\n", n, ms, static_cast<unsigned long long>(st.messagesIn),
                static_cast<unsigned long long>(st.messagesOut),
                static_cast<unsigned long long>(st.bytesOut));
  }
  return failures ? 1 : 0;
}
