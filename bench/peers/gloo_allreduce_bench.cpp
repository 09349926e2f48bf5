// Gloo ring all-reduce bus-bandwidth benchmark (gloo::allreduce with Algorithm::RING, the path
// PyTorch's ProcessGroupGloo takes), measured and reported as trib-perf does (see peer_common.h).
// Ranks are processes talking TCP over 127.0.0.1, rendezvous through a gloo::rendezvous::FileStore.
//   gloo_allreduce_bench --ranks 2 -b 8 -e 256M -J out.json          (forks the ranks itself)
//   RANK=r WORLD_SIZE=n GLOO_BENCH_STORE=/shared/dir gloo_allreduce_bench ...   (launched by others)
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/config.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include "peer_common.h"

namespace {

using Clock = std::chrono::steady_clock;

void allreduceFloat(const std::shared_ptr<gloo::Context>& ctx, float* in, float* out, size_t count) {
  gloo::AllreduceOptions opts(ctx);
  opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
  if (in != out) opts.setInput(in, count);
  opts.setOutput(out, count);
  opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
  gloo::allreduce(opts);
}

template <typename T>
T allreduceScalar(const std::shared_ptr<gloo::Context>& ctx, T v, bool max) {
  gloo::AllreduceOptions opts(ctx);
  opts.setOutput(&v, 1);
  if (max)
    opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::max<T>));
  else
    opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<T>));
  gloo::allreduce(opts);
  return v;
}

void barrier(const std::shared_ptr<gloo::Context>& ctx) {
  gloo::BarrierOptions opts(ctx);
  gloo::barrier(opts);
}

// One rank's whole run; rank 0 prints the report. Returns the process exit code.
int runRank(const PeerOpts& o, int rank, int nranks, const std::string& storeDir) {
  uint64_t sizes[PEER_MAX_SIZES];
  PeerRow rows[PEER_MAX_SIZES];
  int nsizes = peer_sizes(&o, sizes);
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";  // loopback only
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore store(storeDir);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, nranks);
    ctx->setTimeout(std::chrono::milliseconds(static_cast<long long>(o.timeoutS * 1000)));
    ctx->connectFullMesh(store, dev);

    std::vector<float> send(sizes[nsizes - 1] / 4), recv(sizes[nsizes - 1] / 4);
    for (int s = 0; s < nsizes; ++s) {
      size_t count = sizes[s] / 4;
      rows[s].bytes = sizes[s];
      for (int ip = 0; ip < 2; ++ip) {
        float* in = ip ? recv.data() : send.data();
        peer_fill(in, count, rank);
        for (int it = 0; it < o.warmup; ++it) allreduceFloat(ctx, in, recv.data(), count);
        barrier(ctx);
        auto t0 = Clock::now();
        for (int it = 0; it < o.iters; ++it) allreduceFloat(ctx, in, recv.data(), count);
        double local = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / o.iters;
        long wrong = 0;
        if (o.check) {
          // One more call on fresh inputs, then compare every element.
          peer_fill(in, count, rank);
          barrier(ctx);
          allreduceFloat(ctx, in, recv.data(), count);
          wrong = peer_count_wrong(recv.data(), count, nranks);
        }
        rows[s].timeUs[ip] = allreduceScalar<double>(ctx, local, true);
        rows[s].wrong[ip] = static_cast<long>(allreduceScalar<int64_t>(ctx, wrong, false));
      }
    }
    int rc = 0;
    if (rank == 0) {
      char library[64];
      std::snprintf(library, sizeof library, "Gloo %d.%d.%d allreduce ring, tcp 127.0.0.1",
                    GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR, GLOO_VERSION_PATCH);
      rc = peer_report(&o, library, nranks, rows, nsizes) != 0;
    }
    barrier(ctx);  // rank 0 reports before anyone tears the connections down
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gloo_allreduce_bench: rank %d of %d failed: %s\n", rank, nranks, e.what());
    return 1;
  }
}

void removeStoreDir(const std::string& dir) {
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, ".."))
        unlink((dir + "/" + e->d_name).c_str());
    closedir(d);
  }
  rmdir(dir.c_str());
}

// Forks o.ranks ranks and waits for them, at most o.timeoutS seconds; a failed rank ends the run.
int forkRanks(const PeerOpts& o) {
  char tmpl[] = "/tmp/gloo-bench-XXXXXX";
  if (!mkdtemp(tmpl)) {
    std::fprintf(stderr, "gloo_allreduce_bench: cannot create a rendezvous directory in /tmp: %s\n",
                 std::strerror(errno));
    return 1;
  }
  std::string dir = tmpl;
  std::fflush(stdout);
  std::vector<pid_t> pids;
  for (int r = 0; r < o.ranks; ++r) {
    pid_t pid = fork();
    if (pid == 0) _exit(runRank(o, r, o.ranks, dir));
    if (pid < 0) {
      std::fprintf(stderr, "gloo_allreduce_bench: fork failed: %s\n", std::strerror(errno));
      break;
    }
    pids.push_back(pid);
  }
  int rc = static_cast<int>(pids.size()) == o.ranks ? 0 : 1;
  auto deadline = Clock::now() + std::chrono::duration<double>(o.timeoutS + 10);
  size_t live = pids.size();
  while (live > 0 && rc == 0 && Clock::now() < deadline) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      --live;
      for (auto& p : pids)
        if (p == pid) p = 0;
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  if (live > 0 && rc == 0) {
    std::fprintf(stderr, "gloo_allreduce_bench: ranks still running after %.0f s; killing them\n",
                 o.timeoutS + 10);
    rc = 1;
  }
  for (pid_t p : pids) {
    if (p <= 0) continue;
    kill(p, SIGKILL);
    waitpid(p, nullptr, 0);
  }
  removeStoreDir(dir);
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  PeerOpts o;
  int parsed = peer_parse_args(argc, argv, 1, &o);
  if (parsed != 0) return parsed > 0 ? 0 : 2;
  uint64_t sizes[PEER_MAX_SIZES];
  int nsizes = peer_sizes(&o, sizes);
  const char* sizeEnv = std::getenv("WORLD_SIZE");
  if (peer_check_memory(argv[0], sizes[nsizes - 1], o.ranks > 0 ? o.ranks : sizeEnv ? std::atoi(sizeEnv) : 1))
    return 2;
  if (o.ranks > 0) return forkRanks(o);
  const char* rankEnv = std::getenv("RANK");
  const char* storeEnv = std::getenv("GLOO_BENCH_STORE");
  int rank = rankEnv ? std::atoi(rankEnv) : -1, nranks = sizeEnv ? std::atoi(sizeEnv) : 0;
  if (!rankEnv || !sizeEnv || !storeEnv || nranks < 1 || rank < 0 || rank >= nranks) {
    std::fprintf(stderr,
                 "gloo_allreduce_bench: give --ranks N, or set RANK, WORLD_SIZE (0 <= RANK < WORLD_SIZE) and "
                 "GLOO_BENCH_STORE (an empty directory all ranks see)\n");
    return 2;
  }
  return runRank(o, rank, nranks, storeEnv);
}
