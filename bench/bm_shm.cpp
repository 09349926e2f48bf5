// One-way bandwidth and 8-byte latency of the shm transport between two forked processes,
// slot path vs single-copy (CMA). Prints a table; run: build/bench/bm_shm [--iters N] [--spins N]
// [--slot-bytes B] [--nslots N] [--quick]. --copy-rates instead compares the two ways a byte can
// cross processes here: process_vm_readv from a child's buffer vs memcpy (what two-shot's window
// steps use), 16 MiB in 256 KiB pieces.
#include <signal.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "tests/shm_util.hpp"

using namespace trib;
using namespace trib::testing;

namespace {

struct Args {
  int iters = 100;
  size_t slotBytes = ShmOptions{}.slotBytes;
  uint32_t nslots = ShmOptions{}.nslots;
  int spins = 1;  // progress() polls per sched_yield() while waiting
  bool quick = false;
};

double secondsSince(net::Clock::time_point t0) {
  return std::chrono::duration<double>(net::Clock::now() - t0).count();
}

// Rank 0 streams `k` messages of `size` bytes to rank 1, which acknowledges with 8 bytes.
int streamRound(int rank, ShmTransport& t, size_t size, int k, uint64_t tagBase, std::vector<uint8_t>& buf) {
  std::vector<TransferOp> ops(k);
  std::vector<TransferOp*> all;
  uint64_t ack = 0;
  TransferOp ackOp;
  for (int i = 0; i < k; ++i) {
    if (rank == 0)
      CHILD_OK(t.postSend(1, tagBase + i, buf.data(), size, &ops[i]), 1);
    else
      CHILD_OK(t.postRecv(0, tagBase + i, buf.data(), size, nullptr, &ops[i]), 2);
    all.push_back(&ops[i]);
  }
  if (rank == 0) CHILD_OK(t.postRecv(1, tagBase + k, &ack, 8, nullptr, &ackOp), 3);
  CHILD_CHECK(waitOps(t, all, 60000), 4);
  if (rank == 1) CHILD_OK(t.postSend(0, tagBase + k, &ack, 8, &ackOp), 5);
  CHILD_CHECK(waitOps(t, {&ackOp}, 60000), 6);
  for (auto* op : all) CHILD_CHECK(op->state == TransferOp::kDone, 7);
  return 0;
}

int benchBody(int rank, ShmTransport& t, Bootstrap& bs, const Args& a, bool cma) {
  uint64_t tag = 1;
  const size_t sizes[] = {1 << 20, 64 << 20};
  for (size_t size : sizes) {
    std::vector<uint8_t> buf(size, static_cast<uint8_t>(rank + 1));
    int k = size >= (64u << 20) ? 2 : 16;
    int iters = a.quick ? 2 : (size >= (64u << 20) ? std::max(2, a.iters / 4) : a.iters);
    CHILD_OK(bs.barrier(), 20);
    if (int rc = streamRound(rank, t, size, k, tag, buf)) return rc;  // warm-up: page faults, caches
    tag += k + 1;
    auto t0 = net::Clock::now();
    for (int it = 0; it < iters; ++it) {
      if (int rc = streamRound(rank, t, size, k, tag, buf)) return rc;
      tag += k + 1;
    }
    double s = secondsSince(t0);
    if (rank == 0)
      std::printf("%-6s %10zu B  %8.2f GB/s  (%d x %d messages, %.3f s)\n", cma ? "cma" : "slots", size,
                  static_cast<double>(size) * k * iters / s / 1e9, iters, k, s);
  }
  // 8-byte ping-pong: one-way latency = round trip / 2.
  CHILD_OK(bs.barrier(), 21);
  int rounds = a.quick ? 2000 : 20000;
  const int spins = a.spins;
  uint64_t v = 0;
  auto t0 = net::Clock::now();
  for (int i = 0; i <= rounds; ++i) {
    if (i == 1) t0 = net::Clock::now();  // round 0 is warm-up
    TransferOp s, r;
    if (rank == 0) {
      CHILD_OK(t.postSend(1, tag, &v, 8, &s), 22);
      CHILD_OK(t.postRecv(1, tag + 1, &v, 8, nullptr, &r), 23);
    } else {
      CHILD_OK(t.postRecv(0, tag, &v, 8, nullptr, &r), 24);
      CHILD_CHECK(waitOps(t, {&r}, 10000, spins), 25);
      CHILD_OK(t.postSend(0, tag + 1, &v, 8, &s), 26);
    }
    CHILD_CHECK(waitOps(t, {&s, &r}, 10000, spins), 27);
    tag += 2;
  }
  double s = secondsSince(t0);
  if (rank == 0)
    std::printf("%-6s %10d B  %8.2f us one-way latency (%d round trips)\n", cma ? "cma" : "slots", 8,
                s / rounds / 2 * 1e6, rounds);
  std::fflush(stdout);
  return 0;
}

// GB/s of process_vm_readv from a forked child's buffer into a 256 KiB staging buffer and into a
// 16 MiB destination, and of memcpy between two 16 MiB buffers, each in 256 KiB pieces.
int copyRates() {
  const size_t bytes = 16 << 20, piece = 256 << 10;
  std::vector<uint8_t> src(bytes, 3), dst(bytes, 1), staging(piece, 0);
  pid_t child = fork();
  if (child < 0) return std::perror("fork"), 1;
  if (child == 0) {
    pause();  // holds `src` (the same virtual address as in the parent) until killed
    _exit(0);
  }
  int rc = 0;
  for (int mode = 0; mode < 3 && rc == 0; ++mode) {
    const int iters = 10;
    auto t0 = net::Clock::now();
    for (int i = 0; i < iters && rc == 0; ++i) {
      for (size_t off = 0; off < bytes; off += piece) {
        if (mode == 2) {
          std::memcpy(dst.data() + off, src.data() + off, piece);
          continue;
        }
        iovec local{mode == 0 ? staging.data() : dst.data() + off, piece};
        iovec remote{src.data() + off, piece};
        if (process_vm_readv(child, &local, 1, &remote, 1, 0) != static_cast<ssize_t>(piece)) {
          std::printf("process_vm_readv refused here (%s); no CMA rates\n", std::strerror(errno));
          rc = 1;
          break;
        }
      }
    }
    const char* names[] = {"process_vm_readv -> 256 KiB staging", "process_vm_readv -> 16 MiB destination",
                           "memcpy 16 MiB -> 16 MiB"};
    if (rc == 0) std::printf("%-40s %6.2f GB/s\n", names[mode], iters * bytes / secondsSince(t0) / 1e9);
  }
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--iters") && i + 1 < argc)
      a.iters = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--spins") && i + 1 < argc)
      a.spins = std::max(1, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--slot-bytes") && i + 1 < argc)
      a.slotBytes = std::strtoull(argv[++i], nullptr, 10);
    else if (!std::strcmp(argv[i], "--nslots") && i + 1 < argc)
      a.nslots = static_cast<uint32_t>(std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--quick"))
      a.quick = true;
    else if (!std::strcmp(argv[i], "--copy-rates"))
      return copyRates();
    else {
      std::fprintf(
          stderr,
          "usage: %s [--iters N] [--spins N] [--slot-bytes B] [--nslots N] [--quick] | --copy-rates\n",
          argv[0]);
      return 2;
    }
  }
  int failures = 0;
  for (bool cma : {false, true}) {
    ShmOptions opt;
    opt.cma = cma ? 1 : 0;
    opt.slotBytes = a.slotBytes;
    opt.nslots = a.nslots;
    auto res = runShmRanks(2, opt, 300, [&](int rank, ShmTransport& t, Bootstrap& bs) {
      if (cma && !t.usesCma(1 - rank)) {
        if (rank == 0) std::printf("cma    unavailable here (process_vm_readv refused); skipped\n");
        return 0;
      }
      return benchBody(rank, t, bs, a, cma);
    });
    for (auto& r : res)
      if (r.code != 0) {
        std::fprintf(stderr, "rank process %d failed with code %d\n", r.pid, r.code);
        ++failures;
      }
  }
  return failures ? 1 : 0;
}
