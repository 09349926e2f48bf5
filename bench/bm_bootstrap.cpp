// Initialisation time for 2..16 local processes: connect to the TCP store, exchange through the
// Bootstrap, build the shm transport (two allGathers) and pass a barrier. Also prints the store's
// message and byte counts, which docs/BOOTSTRAP.md states as formulas.
// With --threads N[,N...] it measures the store itself at larger rank counts: N ranks as threads of
// this process, each with its own connection, run one allGather of --blob B bytes; it prints the
// allGather's time and the server's messages and bytes, and a fit of time = a*messages + b*bytes
// that docs/BOOTSTRAP.md uses to estimate 4,608 and 131,072 ranks.
// --stores K[,K...] runs the same over K stores (tribCommInitRankScalable's rendezvous; 0 means
// the square root of the rank count), and --model N[,N...] prints what the protocol's formulas give
// for N ranks (sizes that do not fit this machine).
// --init with --threads times whole communicator inits (tribCommInitRankScalable) of thread ranks.
// Run: build/bench/bm_bootstrap [--max N] | [--threads 64,256,1024 --blob 256 --stores 1,0 --model 4608]
#include <algorithm>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <thread>

#include "tests/shm_util.hpp"
#include "tests/store_util.hpp"
#include "tributary/tributary.h"

using namespace trib;
using namespace trib::testing;

namespace {

// One allGather of `blob` bytes per rank among n thread ranks, each with its own connections,
// through `k` stores (1: one store, as tribCommInitRank; more: as tribCommInitRankScalable, ranks
// split evenly). Prints the time from every rank connected to its own store to the last one done
// (the leaders' connections to the other stores fall inside it) and, per store, the largest
// connection count, requests, bytes and serving CPU time; 0 on success.
int threadRanks(int n, int k, size_t blob) {
  std::vector<std::unique_ptr<TcpStoreServer>> servers(k);
  std::vector<StoreGroups::Root> roots;
  for (int s = 0; s < k; ++s) {
    StoreServerOptions so = storeOptions("bench");
    if (Status st = TcpStoreServer::start(so, &servers[s]); !st.ok()) {
      std::fprintf(stderr, "store: %s\n", st.message().c_str());
      return 1;
    }
    roots.push_back({servers[s]->address(), "bench", static_cast<uint64_t>(s + 1)});
  }
  std::vector<int> storeOf;
  for (int r = 0; r < n; ++r) storeOf.push_back(storeOfRank(r, n, k));
  std::vector<Status> status(n, Status::Ok());
  std::vector<std::thread> threads;
  std::barrier sync(n);
  std::chrono::steady_clock::time_point t0, t1;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      std::unique_ptr<Bootstrap> boot;
      if (k == 1) {
        std::unique_ptr<TcpStore> c;
        status[r] = TcpStore::connect(servers[0]->address(), "bench", 120000, &c);
        if (status[r].ok()) boot = std::make_unique<Bootstrap>(std::move(c), r, n, "scale", 600000);
      } else {
        auto groups = std::make_shared<StoreGroups>(roots, 120000);
        std::shared_ptr<Store> own;
        status[r] = groups->store(storeOf[r], &own);
        boot = std::make_unique<Bootstrap>(groups, storeOf, r, "scale", 600000);
      }
      sync.arrive_and_wait();  // every rank connected to its own store
      if (r == 0) t0 = std::chrono::steady_clock::now();
      sync.arrive_and_wait();
      std::vector<Blob> all;
      if (status[r].ok()) status[r] = boot->allGather(Blob(blob, static_cast<uint8_t>(r)), &all);
      if (status[r].ok() &&
          (all.size() != static_cast<size_t>(n) || all[n - 1] != Blob(blob, (n - 1) & 0xff)))
        status[r] = errorf(tribInternalError, "allGather returned %zu blobs, or wrong ones", all.size());
      sync.arrive_and_wait();
      if (r == 0) t1 = std::chrono::steady_clock::now();
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r)
    if (!status[r].ok()) {
      std::fprintf(stderr, "rank %d: %s\n", r, status[r].message().c_str());
      return 1;
    }
  StoreServerStats most{};
  uint64_t totalOut = 0;
  for (auto& server : servers) {
    const StoreServerStats st = server->stats();
    most.connections = std::max(most.connections, st.connections);
    most.messagesIn = std::max(most.messagesIn, st.messagesIn);
    most.bytesIn = std::max(most.bytesIn, st.bytesIn);
    most.bytesOut = std::max(most.bytesOut, st.bytesOut);
    most.cpuSeconds = std::max(most.cpuSeconds, st.cpuSeconds);
    totalOut += st.bytesOut;
  }
  std::printf("%6d %6d %6zu %10.1f %8llu %10llu %12llu %14llu %12.3f %14llu\n", n, k, blob,
              std::chrono::duration<double, std::milli>(t1 - t0).count(),
              static_cast<unsigned long long>(most.connections),
              static_cast<unsigned long long>(most.messagesIn), static_cast<unsigned long long>(most.bytesIn),
              static_cast<unsigned long long>(most.bytesOut), most.cpuSeconds,
              static_cast<unsigned long long>(totalOut));
  return 0;
}

// A whole communicator init through the public API (tribCommInitRankScalable with k ids; k = 1 is
// tribCommInitRank) of n thread ranks: the rendezvous, the transports' exchanges and finalize.
// Prints the time from all threads released to the last one's communicator ready; 0 on success.
int initRanks(int n, int k) {
  std::vector<tribUniqueId> ids(k);
  for (auto& id : ids)
    if (tribGetUniqueId(&id) != tribSuccess) {
      std::fprintf(stderr, "tribGetUniqueId: %s\n", tribGetLastError(nullptr));
      return 1;
    }
  std::vector<tribComm_t> comms(n, nullptr);
  std::vector<std::string> errors(n);
  std::barrier sync(n);
  std::chrono::steady_clock::time_point t0, t1;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      tribConfig_t cfg = TRIB_CONFIG_INITIALIZER;
      cfg.timeoutMs = 600000;
      sync.arrive_and_wait();
      if (r == 0) t0 = std::chrono::steady_clock::now();
      if (tribCommInitRankScalable(&comms[r], n, r, k, ids.data(), &cfg) != tribSuccess)
        errors[r] = tribGetLastError(nullptr);
      sync.arrive_and_wait();
      if (r == 0) t1 = std::chrono::steady_clock::now();
      if (comms[r]) tribCommDestroy(comms[r]);
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r)
    if (!errors[r].empty()) {
      std::fprintf(stderr, "rank %d: %s\n", r, errors[r].c_str());
      return 1;
    }
  std::printf("%6d %6d %10.1f\n", n, k, std::chrono::duration<double, std::milli>(t1 - t0).count());
  return 0;
}

// The same figures from the protocol's formulas (docs/BOOTSTRAP.md; the byte counts are exact,
// as Bootstrap.*Costs* test), for sizes that do not fit this machine: the largest store's.
void modelRanks(int n, int k, size_t blob) {
  const uint64_t N = n, B = blob, m = (N + k - 1) / k;  // the largest group
  const uint64_t handshake = 2 * (5 + 32), setReply = 5;
  uint64_t conns, in, out, totalOut = 0;
  if (k == 1) {
    conns = N;
    in = 2 * N + 2 * N;
    out = N * (handshake + setReply + 9 + N * (4 + B));
    totalOut = out;
  } else {
    uint64_t groupBlobs = 0;  // k group blobs as one rank's multi-get returns them
    for (int s = 0; s < k; ++s) {
      const uint64_t ms =
          static_cast<uint64_t>((static_cast<int64_t>(s) + 1) * n / k - static_cast<int64_t>(s) * n / k);
      groupBlobs += 4 + 4 + ms * (4 + B);
    }
    auto storeOut = [&](uint64_t ms) {
      return (ms + k - 1) * handshake + (ms + k) * setReply + 9 + ms * (4 + B) + ms * (9 + groupBlobs);
    };
    conns = m + k - 1;
    in = 2 * conns + 2 * m + 1 + k;
    out = storeOut(m);
    for (int s = 0; s < k; ++s)
      totalOut += storeOut(
          static_cast<uint64_t>((static_cast<int64_t>(s) + 1) * n / k - static_cast<int64_t>(s) * n / k));
  }
  std::printf("%6d %6d %6zu %10s %8llu %10llu %12s %14llu %12s %14llu\n", n, k, blob, "model",
              static_cast<unsigned long long>(conns), static_cast<unsigned long long>(in), "-",
              static_cast<unsigned long long>(out), "-", static_cast<unsigned long long>(totalOut));
}

}  // namespace

int main(int argc, char** argv) {
  int maxRanks = 16;
  std::vector<int> threadCounts, modelCounts, storeCounts{1};
  bool wholeInit = false;
  size_t blob = 256;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--max") && i + 1 < argc) {
      maxRanks = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) {
      std::stringstream list(argv[++i]);
      for (std::string item; std::getline(list, item, ',');) threadCounts.push_back(std::atoi(item.c_str()));
    } else if ((!std::strcmp(argv[i], "--model") || !std::strcmp(argv[i], "--stores")) && i + 1 < argc) {
      std::vector<int>& into = argv[i][2] == 'm' ? modelCounts : storeCounts;
      into.clear();
      std::stringstream list(argv[++i]);
      for (std::string item; std::getline(list, item, ',');) into.push_back(std::atoi(item.c_str()));
    } else if (!std::strcmp(argv[i], "--init")) {
      wholeInit = true;
    } else if (!std::strcmp(argv[i], "--blob") && i + 1 < argc) {
      blob = static_cast<size_t>(std::atoll(argv[++i]));
    } else {
      std::fprintf(
          stderr,
          "usage: %s [--max N] | [--threads N[,N...]] [--model N[,N...]] [--blob B] [--stores K[,K...]] "
          "[--init]\n",
          argv[0]);
      return 2;
    }
  }
  // --stores 0 means the square root of the rank count (rounded), the scalable init's sweet spot.
  auto storesFor = [](int k, int n) {
    return k > 0 ? k : std::max(1, static_cast<int>(std::lround(std::sqrt(n))));
  };
  if (wholeInit) {
    std::printf("%6s %6s %10s\n", "ranks", "ids", "init(ms)");
    for (int n : threadCounts)
      for (int k : storeCounts) {
        if (n < 2 || k < 0 || storesFor(k, n) > n) {
          std::fprintf(stderr, "--init: %d ranks over %d stores is not possible\n", n, k);
          return 2;
        }
        if (initRanks(n, storesFor(k, n)) != 0) return 1;
      }
    return 0;
  }
  if (!threadCounts.empty() || !modelCounts.empty()) {
    std::printf("%6s %6s %6s %10s %8s %10s %12s %14s %12s %14s\n", "ranks", "stores", "blob", "gather(ms)",
                "conns", "msgs in", "bytes in", "bytes out", "cpu (s)", "all stores out");
    std::printf("# conns .. cpu: the largest figure of any one store; handshakes included\n");
    for (int n : threadCounts) {
      if (n < 2 || n > 16384) {
        std::fprintf(stderr, "--threads: %d is not in 2..16384\n", n);
        return 2;
      }
      for (int k : storeCounts) {
        if (storesFor(k, n) > n || k < 0) {
          std::fprintf(stderr, "--stores: %d is not in 0..%d\n", k, n);
          return 2;
        }
        if (threadRanks(n, storesFor(k, n), blob) != 0) return 1;
      }
    }
    for (int n : modelCounts) {
      for (int k : storeCounts) {
        if (n < 2 || storesFor(k, n) > n || k < 0) {
          std::fprintf(stderr, "--model %d with --stores %d: need 2 <= ranks and 0 <= stores <= ranks\n", n,
                       k);
          return 2;
        }
        modelRanks(n, storesFor(k, n), blob);
      }
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
