// Initialisation time for 2..16 local processes: connect to the TCP store, exchange through the
// Bootstrap, build the shm transport (two allGathers) and pass a barrier. Also prints the store's
// message and byte counts, which docs/BOOTSTRAP.md states as formulas.
// Run: build/bench/bm_bootstrap [--max N]
#include <cstdio>
#include <cstring>

#include "tests/shm_util.hpp"
#include "tests/store_util.hpp"

using namespace trib;
using namespace trib::testing;

int main(int argc, char** argv) {
  int maxRanks = 16;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--max") && i + 1 < argc)
      maxRanks = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--max N]\n", argv[0]);
      return 2;
    }
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
