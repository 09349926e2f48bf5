// UCX transport micro-benchmarks between two processes: one-way bandwidth (a window of sends,
// one acknowledgement) and 8-byte ping-pong latency, per UCX transport list.
//   build/bench/bm_ucx                      # tcp and sm
//   BM_UCX_TLS=tcp,sm,all build/bench/bm_ucx --benchmark_filter=Bandwidth
// Each entry is a UCX_TLS value ("all": UCX's default). Sends go from the caller's buffer.
// This process is rank 0; for each transport list a forked child is rank 1 and follows the
// commands rank 0 sends before each benchmark (iteration counts are fixed, so both sides know them).
#include <benchmark/benchmark.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "transports/ucx/ucx_transport.hpp"

using namespace trib;

namespace {

enum Op : uint64_t { kBandwidth = 1, kPingPong = 2, kQuit = 3 };
struct Command {
  uint64_t op, bytes, window, iters;
};
constexpr uint64_t kCmdTag = 1, kAckTag = 2, kDataTag = 3;

// Two-rank all-gather over a socketpair: write mine (length-prefixed), read the other's.
Status socketOob(int fd, int rank, const std::vector<uint8_t>& mine, std::vector<std::vector<uint8_t>>& all) {
  uint64_t n = mine.size();
  if (write(fd, &n, sizeof n) != sizeof n || write(fd, mine.data(), n) != static_cast<ssize_t>(n))
    return errorf(tribSystemError, "oob: write failed");
  uint64_t m = 0;
  if (read(fd, &m, sizeof m) != sizeof m || m > (1u << 20))
    return errorf(tribSystemError, "oob: read failed");
  std::vector<uint8_t> other(m);
  for (size_t got = 0; got < m;) {
    ssize_t r = read(fd, other.data() + got, m - got);
    if (r <= 0) return errorf(tribSystemError, "oob: short read");
    got += static_cast<size_t>(r);
  }
  all.assign(2, {});
  all[rank] = mine;
  all[1 - rank] = std::move(other);
  return Status::Ok();
}

// Spins (yielding: this machine's cores are shared); `idle` waits (a follower between
// benchmarks) sleep after a while so they do not steal a core from the pair being measured.
Status waitAll(Transport& t, TransferOp* ops, size_t n, int timeoutSec = 60, bool idle = false) {
  auto start = std::chrono::steady_clock::now();
  auto deadline = start + std::chrono::seconds(timeoutSec);
  for (;;) {
    TRIB_RETURN_IF_ERROR(t.progress());
    size_t done = 0;
    for (size_t i = 0; i < n; ++i) done += ops[i].done();
    if (done == n) break;
    if (std::chrono::steady_clock::now() > deadline) {
      Status s = errorf(tribTimeout, "bm_ucx: operations not done after %d s", timeoutSec);
      t.abort(s);
      return s;
    }
    if (idle && std::chrono::steady_clock::now() - start > std::chrono::milliseconds(20))
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    else
      std::this_thread::yield();
  }
  for (size_t i = 0; i < n; ++i)
    if (ops[i].state.load() == TransferOp::kFailed) return ops[i].error;
  return Status::Ok();
}

// One iteration of each side. Rank 0 drives; rank 1 mirrors.
Status bandwidthIter(Transport& t, int rank, std::vector<uint8_t>& buf, size_t bytes, size_t window) {
  std::vector<TransferOp> ops(window + 1);
  uint64_t ack = 0;
  for (size_t i = 0; i < window; ++i) {
    Status s = rank == 0 ? t.postSend(1, kDataTag, buf.data(), bytes, &ops[i])
                         : t.postRecv(0, kDataTag, buf.data(), bytes, nullptr, &ops[i]);
    TRIB_RETURN_IF_ERROR(s);
  }
  Status s = rank == 0 ? t.postRecv(1, kAckTag, &ack, sizeof ack, nullptr, &ops[window])
                       : t.postSend(0, kAckTag, &ack, sizeof ack, &ops[window]);
  TRIB_RETURN_IF_ERROR(s);
  if (rank == 1) {  // acknowledge only once the whole window has arrived
    TRIB_RETURN_IF_ERROR(waitAll(t, ops.data(), window));
  }
  return waitAll(t, ops.data(), ops.size());
}

Status pingPongIter(Transport& t, int rank, uint64_t* word) {
  TransferOp ops[2];
  if (rank == 0) {
    TRIB_RETURN_IF_ERROR(t.postRecv(1, kDataTag, word, 8, nullptr, &ops[1]));
    TRIB_RETURN_IF_ERROR(t.postSend(1, kDataTag, word, 8, &ops[0]));
    return waitAll(t, ops, 2);
  }
  TRIB_RETURN_IF_ERROR(t.postRecv(0, kDataTag, word, 8, nullptr, &ops[0]));
  TRIB_RETURN_IF_ERROR(waitAll(t, ops, 1));
  TRIB_RETURN_IF_ERROR(t.postSend(0, kDataTag, word, 8, &ops[1]));
  return waitAll(t, ops + 1, 1);
}

UcxOptions optionsFor(const std::string& entry) {
  UcxOptions o;
  std::string tls = entry.substr(0, entry.find(':'));
  o.tls = tls == "all" ? "" : tls;
  return o;
}

[[noreturn]] void follower(int fd, const std::string& tls) {
  alarm(900);
  UcxOptions o = optionsFor(tls);
  std::unique_ptr<Transport> t;
  Status s = createUcxTransport(
      1, 2, [&](auto& m, auto& a) { return socketOob(fd, 1, m, a); }, o, &t);
  if (!s.ok()) {
    std::fprintf(stderr, "bm_ucx rank 1 (%s): %s\n", tls.c_str(), s.message().c_str());
    _exit(1);
  }
  std::vector<uint8_t> buf;
  uint64_t word = 0;
  for (;;) {
    Command c{};
    TransferOp op;
    if (!(s = t->postRecv(0, kCmdTag, &c, sizeof c, nullptr, &op)).ok() ||
        !(s = waitAll(*t, &op, 1, 850, true)).ok())
      break;
    if (c.op == kQuit) break;
    if (c.op == kBandwidth && buf.size() < c.bytes) buf.assign(c.bytes, 1);
    for (uint64_t i = 0; i < c.iters && s.ok(); ++i)
      s = c.op == kBandwidth ? bandwidthIter(*t, 1, buf, c.bytes, c.window) : pingPongIter(*t, 1, &word);
    if (!s.ok()) break;
  }
  if (!s.ok()) std::fprintf(stderr, "bm_ucx rank 1 (%s): %s\n", tls.c_str(), s.message().c_str());
  t.reset();
  _exit(s.ok() ? 0 : 1);
}

struct Pair {
  std::string tls;
  pid_t child = -1;
  std::unique_ptr<Transport> t;
  Status command(Command c) {
    TransferOp op;
    TRIB_RETURN_IF_ERROR(t->postSend(1, kCmdTag, &c, sizeof c, &op));
    return waitAll(*t, &op, 1);
  }
};

void BM_Bandwidth(benchmark::State& state, Pair* p, size_t bytes, size_t window) {
  std::vector<uint8_t> buf(bytes, 7);
  Status s = p->command({kBandwidth, bytes, window, static_cast<uint64_t>(state.max_iterations) + 1});
  if (s.ok()) s = bandwidthIter(*p->t, 0, buf, bytes, window);  // warm-up (connections, page faults)
  for (auto _ : state) {
    if (s.ok()) s = bandwidthIter(*p->t, 0, buf, bytes, window);
  }
  if (!s.ok()) state.SkipWithError(s.message().c_str());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes * window));
}

void BM_PingPong(benchmark::State& state, Pair* p) {
  uint64_t word = 42;
  Status s = p->command({kPingPong, 8, 1, static_cast<uint64_t>(state.max_iterations) + 100});
  for (int i = 0; i < 100 && s.ok(); ++i) s = pingPongIter(*p->t, 0, &word);  // warm-up
  for (auto _ : state) {
    if (s.ok()) s = pingPongIter(*p->t, 0, &word);
  }
  if (!s.ok()) state.SkipWithError(s.message().c_str());
  // Half a round trip: the one-way latency.
  state.counters["one_way_latency"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * 2, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

}  // namespace

int main(int argc, char** argv) {
  const char* env = std::getenv("BM_UCX_TLS");
  std::vector<std::unique_ptr<Pair>> pairs;
  std::stringstream list(env ? env : "tcp,sm");
  // Every follower is forked before this process initialises UCX: UCX is not fork-safe.
  std::vector<std::string> entries;
  std::vector<int> fds;
  std::vector<pid_t> pids;
  for (std::string tls; std::getline(list, tls, ',');) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 1;
    pid_t pid = fork();
    if (pid == 0) {
      close(sv[0]);
      follower(sv[1], tls);
    }
    close(sv[1]);
    entries.push_back(tls);
    fds.push_back(sv[0]);
    pids.push_back(pid);
  }
  for (size_t e = 0; e < entries.size(); ++e) {
    const std::string& tls = entries[e];
    pid_t pid = pids[e];
    auto p = std::make_unique<Pair>();
    p->tls = tls;
    p->child = pid;
    UcxOptions o = optionsFor(tls);
    int fd = fds[e];
    Status s = createUcxTransport(
        0, 2, [&](auto& m, auto& a) { return socketOob(fd, 0, m, a); }, o, &p->t);
    close(fd);
    if (!s.ok()) {
      std::fprintf(stderr, "bm_ucx: skipping UCX_TLS=%s: %s\n", tls.c_str(), s.message().c_str());
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      continue;
    }
    Pair* raw = p.get();
    // Fixed iteration counts: the follower must know how many iterations to mirror.
    benchmark::RegisterBenchmark(("Ucx/" + tls + "/Bandwidth/1MiB").c_str(), BM_Bandwidth, raw,
                                 size_t{1} << 20, 16)
        ->Iterations(200)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("Ucx/" + tls + "/Bandwidth/64MiB").c_str(), BM_Bandwidth, raw,
                                 size_t{64} << 20, 2)
        ->Iterations(12)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("Ucx/" + tls + "/PingPong/8B").c_str(), BM_PingPong, raw)
        ->Iterations(20000)
        ->UseRealTime();
    pairs.push_back(std::move(p));
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  int rc = 0;
  for (auto& p : pairs) {
    Status s = p->command({kQuit, 0, 0, 0});
    p->t.reset();
    int st = 0;
    waitpid(p->child, &st, 0);
    if (!s.ok() || !WIFEXITED(st) || WEXITSTATUS(st) != 0) rc = 1;
  }
  return rc;
}
