// The verbs transport on a real RDMA device, through the public API: forked ranks forced onto
// TRIB_TRANSPORT=verbs, each "host" a device of its own where there are two (the RDMA test guest's
// rxe0 and rxe1: TRIB_VM_HCA0/1, tests/vm/). Without an active RDMA port every test skips.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/status.hpp"
#include "core/comm.hpp"
#include "cuda/cuda_api.hpp"
#include "support/launcher.hpp"
#include "tributary/tributary.h"
#ifdef TRIB_HAVE_VERBS
#include "topo/locality.hpp"
#include "transports/verbs/verbs_device.hpp"
#include "transports/verbs/verbs_transport.hpp"
#endif

namespace {

using Clock = std::chrono::steady_clock;
using trib::strprintf;

#define REQUIRE_RDMA_PORT()                                                                                  \
  do {                                                                                                       \
    if (!haveDevice()) GTEST_SKIP() << "needs an RDMA device (no active RDMA port here; tests/vm/ has one)"; \
  } while (0)

bool haveDevice() {
#ifdef TRIB_HAVE_VERBS
  return trib::verbsPortAvailable();
#else
  return false;
#endif
}

// Rank r's device: alternating between the guest's two, so each pair of neighbours spans "hosts".
void pickDevice(int rank) {
  const char* hca = std::getenv(rank % 2 ? "TRIB_VM_HCA1" : "TRIB_VM_HCA0");
  if (hca) setenv("TRIB_IB_HCA", hca, 1);
}

// The fault tests' TRIB_TIMEOUT, and how late past it a failure may come: the guest is emulated
// on a shared machine, where a process can wait a second or more for a CPU once its deadline has
// passed. A hang still fails: it never returns.
constexpr int kFaultTimeoutMs = 20000;
constexpr double kLateSec = 5;
bool tooLate(double sec) { return sec > kFaultTimeoutMs / 1000.0 + kLateSec; }

struct Comm {
  tribComm_t comm = nullptr;
  std::string error;
};

Comm join(int nranks, int rank, const tribUniqueId& id, int timeoutMs = 30000) {
  tribConfig_t cfg = TRIB_CONFIG_INITIALIZER;
  cfg.timeoutMs = timeoutMs;
  cfg.transport = "verbs";
  Comm c;
  if (tribCommInitRankConfig(&c.comm, nranks, id, rank, &cfg) != tribSuccess) {
    c.error = tribGetLastError(nullptr);
    c.comm = nullptr;
  }
  return c;
}

uint8_t pattern(int src, size_t i, size_t n) {
  return static_cast<uint8_t>(i * 131 + src * 17 + n * 7 + (i >> 12));
}

// Runs body(rank, ids, report) in nranks processes, handing each `ids` fresh unique ids.
std::string run(int nranks, int ids,
                const std::function<int(int, const std::vector<tribUniqueId>&, std::string&)>& body,
                const std::function<void(const std::vector<int>&)>& whileRunning = {}) {
  trib::testing::ParentChannel channel(nranks);
  auto results = trib::testing::runProcesses(
      nranks,
      [&](int rank, std::string& report) {
        pickDevice(rank);
        std::vector<tribUniqueId> got(ids);
        for (auto& id : got)
          if (!channel.receive(rank, &id, sizeof id, 30000)) return report = "no unique id", 1;
        return body(rank, got, report);
      },
      std::chrono::minutes(4),
      [&](const std::vector<int>& pids) {
        for (int i = 0; i < ids; ++i) {
          tribUniqueId id;
          ASSERT_EQ(tribGetUniqueId(&id), tribSuccess) << tribGetLastError(nullptr);
          for (int r = 0; r < nranks; ++r) channel.send(r, &id, sizeof id);
        }
        if (whileRunning) whileRunning(pids);
      });
  // Said here too, in a line of its own: a failed EXPECT_EQ(run(...), ...) prints the whole lambda
  // first, and a log cut for length may keep only that.
  const std::string failures = trib::testing::describeFailures(results);
  if (!failures.empty()) std::fprintf(stderr, "ranks that did not exit 0:\n%s", failures.c_str());
  return failures;
}

// Each size both ways between two ranks, both orders of post and arrival, with `env` set in both.
std::string exchangeSizes(const std::vector<size_t>& sizes,
                          const std::vector<std::pair<const char*, const char*>>& env = {}) {
  return run(2, 1, [&](int rank, const std::vector<tribUniqueId>& ids, std::string& report) {
    for (const auto& [name, value] : env) setenv(name, value, 1);
    Comm c = join(2, rank, ids[0]);
    if (!c.comm) return report = "init: " + c.error, 1;
    const int other = 1 - rank;
    for (size_t n : sizes) {
      std::vector<uint8_t> out(n), in(n, 0xee);
      for (size_t i = 0; i < n; ++i) out[i] = pattern(rank, i, n);
      // Rank 0 sends first, rank 1 receives first: both orders of post and arrival.
      for (int step = 0; step < 2; ++step) {
        tribResult_t r = (step == rank) ? tribSend(out.data(), n, tribUint8, other, c.comm, nullptr)
                                        : tribRecv(in.data(), n, tribUint8, other, c.comm, nullptr);
        if (r != tribSuccess)
          return report = "size " + std::to_string(n) + ": " + tribGetLastError(c.comm), 1;
      }
      for (size_t i = 0; i < n; ++i)
        if (in[i] != pattern(other, i, n))
          return report = "size " + std::to_string(n) + ": byte " + std::to_string(i) + " differs", 1;
    }
    tribCommDestroy(c.comm);
    return 0;
  });
}

// Every size class both ways: empty, eager, just past the eager buffer, zero-copy in one chunk
// and in several.
TEST(Verbs, SendRecvEverySize) {
  REQUIRE_RDMA_PORT();
  EXPECT_EQ(exchangeSizes({0, 1, 8000, 8200, (1u << 20) + 3, (5u << 20) + 1}), "");
}

// TRIB_IB_QPS_PER_CONNECTION=4: large messages split across the queue pairs (several chunks on
// each), the receiver told only once every part has landed.
TEST(Verbs, SeveralQueuePairsPerConnection) {
  REQUIRE_RDMA_PORT();
  EXPECT_EQ(exchangeSizes({1, 8200, (1u << 20) + 3, (5u << 20) + 1},
                          {{"TRIB_IB_QPS_PER_CONNECTION", "4"}, {"TRIB_IB_CHUNK_BYTES", "262144"}}),
            "");
}

TEST(Verbs, AllReduceEagerAndZeroCopy) {
  REQUIRE_RDMA_PORT();
  EXPECT_EQ(run(3, 1,
                [&](int rank, const std::vector<tribUniqueId>& ids, std::string& report) {
                  Comm c = join(3, rank, ids[0]);
                  if (!c.comm) return report = "init: " + c.error, 1;
                  for (size_t count : {size_t{1}, size_t{1000}, size_t{1} << 20}) {
                    std::vector<double> x(count), y(count, -1);
                    for (size_t i = 0; i < count; ++i) x[i] = static_cast<double>(rank + 1) * (i % 97);
                    if (tribAllReduce(x.data(), y.data(), count, tribFloat64, tribSum, c.comm, nullptr) !=
                        tribSuccess)
                      return report = tribGetLastError(c.comm), 1;
                    for (size_t i = 0; i < count; ++i)
                      if (y[i] != 6.0 * (i % 97))
                        return report = "count " + std::to_string(count) + ": wrong sum", 1;
                  }
                  tribCommDestroy(c.comm);
                  return 0;
                }),
            "");
}

// GPUDirect RDMA: device buffers all-reduced (sends from device memory, receive-reduces landing in
// the engine's device scratch) and sent point to point, small and large, over verbs: straight to
// the NIC where this process can register device memory with it, else staged through host
// memory. Needs a GPU beside the RDMA port; skips without one (the test guest has none).
TEST(Verbs, DeviceMemoryAllReduceAndSendRecv) {
  REQUIRE_RDMA_PORT();
  if (!trib::cuda::built()) GTEST_SKIP() << "this build has no CUDA";
  // (Not cuda::deviceStatus(): the parent must not initialise CUDA before it forks the ranks.)
  if (access("/dev/nvidiactl", F_OK) != 0) GTEST_SKIP() << "needs a CUDA device (no /dev/nvidiactl)";
  EXPECT_EQ(run(2, 1,
                [&](int rank, const std::vector<tribUniqueId>& ids, std::string& report) {
                  if (trib::Status s = trib::cuda::setDevice(0); !s.ok()) return report = s.message(), 1;
                  Comm c = join(2, rank, ids[0]);
                  if (!c.comm) return report = "init: " + c.error, 1;
                  void* stream = nullptr;
                  if (trib::Status s = trib::cuda::streamCreate(0, &stream); !s.ok())
                    return report = s.message(), 1;
                  for (size_t count : {size_t{1}, size_t{1000}, (size_t{1} << 20) + 3}) {
                    const size_t bytes = count * sizeof(float);
                    std::vector<float> x(count), y(count, -1);
                    for (size_t i = 0; i < count; ++i) x[i] = static_cast<float>((rank + 1) * (i % 97));
                    void *dx = nullptr, *dy = nullptr;
                    if (!trib::cuda::deviceAlloc(0, bytes, &dx).ok() ||
                        !trib::cuda::deviceAlloc(0, bytes, &dy).ok())
                      return report = "device allocation failed", 1;
                    const std::string at = "count " + std::to_string(count) + ": ";
                    if (!trib::cuda::copy(dx, x.data(), bytes, stream).ok())
                      return report = at + "copy in", 1;
                    if (tribAllReduce(dx, dy, count, tribFloat32, tribSum, c.comm, stream) != tribSuccess)
                      return report = at + tribGetLastError(c.comm), 1;
                    if (!trib::cuda::copy(y.data(), dy, bytes, stream).ok())
                      return report = at + "copy out", 1;
                    for (size_t i = 0; i < count; ++i)
                      if (y[i] != 3.0f * (i % 97)) return report = at + "wrong sum", 1;
                    // Rank 0's input to rank 1's output, device to device.
                    const tribResult_t r = rank == 0 ? tribSend(dx, count, tribFloat32, 1, c.comm, stream)
                                                     : tribRecv(dy, count, tribFloat32, 0, c.comm, stream);
                    if (r != tribSuccess) return report = at + tribGetLastError(c.comm), 1;
                    if (!trib::cuda::copy(y.data(), dy, bytes, stream).ok())
                      return report = at + "copy out", 1;
                    for (size_t i = 0; rank == 1 && i < count; ++i)
                      if (y[i] != static_cast<float>(i % 97)) return report = at + "wrong bytes received", 1;
                    trib::cuda::deviceFree(dx);
                    trib::cuda::deviceFree(dy);
                  }
                  trib::cuda::streamDestroy(stream);
                  tribCommDestroy(c.comm);
                  return 0;
                }),
            "");
}

// Both ranks send more small messages than the other has pre-posted buffers before either
// receives: each runs out of credits with sends queued, and the credit writes that free them must
// not wait behind those sends. All arrive, in order, well within the timeout.
TEST(Verbs, BothRanksOutOfCreditsStillProgress) {
  REQUIRE_RDMA_PORT();
  EXPECT_EQ(run(2, 1,
                [&](int rank, const std::vector<tribUniqueId>& ids, std::string& report) {
                  Comm c = join(2, rank, ids[0], 20000);
                  if (!c.comm) return report = "init: " + c.error, 1;
                  const int n = 300, other = 1 - rank;  // 64 buffers a peer
                  std::vector<int32_t> out(n), in(n, -1);
                  std::vector<tribRequest_t> reqs(2 * n);
                  for (int i = 0; i < n; ++i) {
                    out[i] = rank * 100000 + i;
                    if (tribIsend(&out[i], 1, tribInt32, other, c.comm, &reqs[i]) != tribSuccess)
                      return report = "isend: " + std::string(tribGetLastError(c.comm)), 1;
                  }
                  for (int i = 0; i < n; ++i)
                    if (tribIrecv(&in[i], 1, tribInt32, other, c.comm, &reqs[n + i]) != tribSuccess)
                      return report = "irecv: " + std::string(tribGetLastError(c.comm)), 1;
                  for (tribRequest_t& r : reqs)
                    if (tribWait(&r, TRIB_TIMEOUT_DEFAULT) != tribSuccess)
                      return report = "wait: " + std::string(tribGetLastError(c.comm)), 1;
                  for (int i = 0; i < n; ++i)
                    if (in[i] != other * 100000 + i)
                      return report = strprintf("message %d: got %d", i, in[i]), 1;
                  tribCommDestroy(c.comm);
                  return 0;
                }),
            "");
}

// A message longer or shorter than the posted receive, eager and zero-copy: both ranks get a
// clear error (tribInvalidUsage, naming the sizes), nothing is written past the buffer.
TEST(Verbs, SizeMismatchIsAClearError) {
  REQUIRE_RDMA_PORT();
  struct Case {
    size_t sent, posted;
  };
  const std::vector<Case> cases = {
      {100, 64}, {64, 100}, {2u << 20, 1u << 20}, {1u << 20, 2u << 20}, {4000, 1u << 20}};
  EXPECT_EQ(run(2, static_cast<int>(cases.size()),
                [&](int rank, const std::vector<tribUniqueId>& ids, std::string& report) {
                  for (size_t k = 0; k < cases.size(); ++k) {
                    Comm c = join(2, rank, ids[k], 15000);
                    if (!c.comm) return report = "init: " + c.error, 1;
                    const auto [sent, posted] = cases[k];
                    tribResult_t r;
                    std::vector<uint8_t> buf(std::max(sent, posted) + 64, 0x5a);
                    if (rank == 0) {
                      r = tribSend(buf.data(), sent, tribUint8, 1, c.comm, nullptr);
                    } else {
                      r = tribRecv(buf.data(), posted, tribUint8, 0, c.comm, nullptr);
                      for (size_t i = posted; i < buf.size(); ++i)
                        if (buf[i] != 0x5a) return report = "written past the receive buffer", 1;
                    }
                    const std::string err = tribGetLastError(c.comm);
                    // A sender learns of the mismatch only when its message is large (the receiver answers
                    // it).
                    const bool mustFail = rank == 1 || sent + 24 > 8192;
                    if (mustFail && r == tribSuccess)
                      return report = strprintf("%zu into %zu: rank %d succeeded", sent, posted, rank), 1;
                    if (r != tribSuccess && (err.find(std::to_string(posted)) == std::string::npos ||
                                             err.find(std::to_string(sent)) == std::string::npos))
                      return report = strprintf("%zu into %zu: rank %d: unclear error: %s", sent, posted,
                                                rank, err.c_str()),
                             1;
                    tribCommDestroy(c.comm);
                  }
                  return 0;
                }),
            "");
}

// Where the victim says it is ready: named in the parent, before the fork.
std::string& readyFile() {
  static std::string path = "/tmp/trib_verbs_victim." + std::to_string(getpid());
  return path;
}

// A rank killed mid-job: the survivors' operations with it fail within the timeout with an error
// naming it, and no hang.
TEST(Verbs, KilledPeerFailsWithinTheTimeout) {
  REQUIRE_RDMA_PORT();
  unlink(readyFile().c_str());
  const std::string failures = run(
      3, 1,
      [&](int rank, const std::vector<tribUniqueId>& ids, std::string& report) {
        Comm c = join(3, rank, ids[0], kFaultTimeoutMs);
        if (!c.comm) return report = "init: " + c.error, 1;
        float x = 1, y = 0;
        if (tribAllReduce(&x, &y, 1, tribFloat32, tribSum, c.comm, nullptr) != tribSuccess || y != 3)
          return report = "warm-up: " + std::string(tribGetLastError(c.comm)), 1;
        if (rank == 2) {
          std::FILE* f = std::fopen(readyFile().c_str(), "w");
          if (f) std::fclose(f);
          for (;;) pause();  // until SIGKILL
        }
        std::vector<uint8_t> in(3u << 20);
        const auto start = Clock::now();
        tribResult_t r = tribRecv(in.data(), in.size(), tribUint8, 2, c.comm, nullptr);
        const double sec = std::chrono::duration<double>(Clock::now() - start).count();
        const std::string err = tribGetLastError(c.comm);
        if (r == tribSuccess) return report = "a receive from the killed rank succeeded", 1;
        if (err.find("rank 2") == std::string::npos) return report = "error does not name rank 2: " + err, 1;
        if (tooLate(sec)) return report = strprintf("failing took %.1f s: %s", sec, err.c_str()), 1;
        std::printf("rank %d: %s after %.1f s\n", rank, err.c_str(), sec);
        tribCommAbort(c.comm);
        tribCommDestroy(c.comm);
        return 0;
      },
      [](const std::vector<int>& pids) {
        const auto deadline = Clock::now() + std::chrono::seconds(90);
        while (access(readyFile().c_str(), F_OK) != 0 && Clock::now() < deadline)
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the survivors post
        kill(pids[2], SIGKILL);
        unlink(readyFile().c_str());
      });
  EXPECT_EQ(failures, "rank 2: signal 9\n");
}

// A remote key that does not match: the receiver advertises a corrupted one (the transport's test
// hook), so the receiver's NIC refuses the sender's RDMA WRITE. Both ranks fail within the timeout
// with an error naming the other (the sender's says the key or address did not match); no hang.
// What a mismatched remote key must give each rank of two: an error that names the peer, says so
// on the rank that used the key (`user`: rank 0), and comes within the timeout. "" when it does
// (printed).
std::string keyMismatchProblem(int rank, const std::string& err, double sec, const char* user) {
  if (err.find("rank " + std::to_string(1 - rank)) == std::string::npos)
    return "error does not name the peer: " + err;
  if (rank == 0 && err.find("remote key") == std::string::npos)
    return std::string("the ") + user + "'s error does not say the remote key did not match: " + err;
  if (tooLate(sec)) return strprintf("failing took %.1f s: %s", sec, err.c_str());
  std::printf("rank %d: %s after %.1f s\n", rank, err.c_str(), sec);
  return "";
}

TEST(Verbs, MismatchedRemoteKeyFailsBothSides) {
  REQUIRE_RDMA_PORT();
  EXPECT_EQ(
      run(2, 1,
          [&](int rank, const std::vector<tribUniqueId>& ids, std::string& report) {
#ifdef TRIB_HAVE_VERBS
            if (rank == 1) trib::verbsTestCorruptAdvertisedRkeys(true);
#endif
            Comm c = join(2, rank, ids[0], 20000);
            if (!c.comm) return report = "init: " + c.error, 1;
            float x = 1, y = 0;  // eager: no key involved
            if (tribAllReduce(&x, &y, 1, tribFloat32, tribSum, c.comm, nullptr) != tribSuccess || y != 2)
              return report = "warm-up: " + std::string(tribGetLastError(c.comm)), 1;
            std::vector<uint8_t> buf(2u << 20, 0x5a);
            const auto start = Clock::now();
            const tribResult_t r = rank == 0
                                       ? tribSend(buf.data(), buf.size(), tribUint8, 1, c.comm, nullptr)
                                       : tribRecv(buf.data(), buf.size(), tribUint8, 0, c.comm, nullptr);
            const double sec = std::chrono::duration<double>(Clock::now() - start).count();
            const std::string err = tribGetLastError(c.comm);
            if (r == tribSuccess) return report = "a transfer with a mismatched remote key succeeded", 1;
            if (rank == 1 && buf[0] != 0x5a) return report = "data landed through a wrong key", 1;
            if (std::string p = keyMismatchProblem(rank, err, sec, "sender"); !p.empty())
              return report = p, 1;
            tribCommAbort(c.comm);
            tribCommDestroy(c.comm);
            return 0;
          }),
      "");
}

// One-shot and two-shot forced (strictly: the call fails if they cannot run) over verbs: the
// peer-memory steps are RDMA READs and WRITEs of registered remote windows (docs/VERBS.md). Exact
// sums (integers in float64), in and out of place, one-shot within a cell, two-shot over several;
// on one queue pair, and on four with 64 KiB chunks (a put or get larger than an eager message is split
// over them, and completes only when every part has).
TEST(Verbs, RemoteWindowsRunOneShotAndTwoShot) {
  REQUIRE_RDMA_PORT();
  for (const char* qps : {"1", "4"})
    for (const char* algo : {"oneshot", "twoshot"}) {
      EXPECT_EQ(
          run(3, 1,
              [&](int rank, const std::vector<tribUniqueId>& ids, std::string& report) {
                setenv("TRIB_ALGO", algo, 1);
                setenv("TRIB_ALGO_STRICT", "1", 1);
                setenv("TRIB_IB_QPS_PER_CONNECTION", qps, 1);
                setenv("TRIB_IB_CHUNK_BYTES", "65536", 1);
                Comm c = join(3, rank, ids[0]);
                if (!c.comm) return report = "init: " + c.error, 1;
                uint64_t carriedSmall = 0;
                const bool oneshot = std::string(algo) == "oneshot";
                const size_t big = oneshot ? 100000 : 600000;  // 2 MiB windows
                trib::PeerWindows* windows = c.comm->impl()->windows;
                if (!windows) return report = "no remote windows", 1;
                for (size_t count : {size_t{1}, size_t{2}, size_t{3}, size_t{1000}, size_t{20000}, big}) {
                  for (bool inPlace : {false, true}) {
                    const uint64_t carriedBefore = windows->carriedReads();
                    std::vector<double> x(count), y(count, -1);
                    for (size_t i = 0; i < count; ++i) x[i] = static_cast<double>(rank + 1) * (i % 97);
                    double* out = inPlace ? x.data() : y.data();
                    if (tribAllReduce(x.data(), out, count, tribFloat64, tribSum, c.comm, nullptr) !=
                        tribSuccess)
                      return report = std::string(algo) + ": " + tribGetLastError(c.comm), 1;
                    for (size_t i = 0; i < count; ++i)
                      if (out[i] != 6.0 * (i % 97))
                        return report = strprintf("%s count %zu%s: element %zu is %g", algo, count,
                                                  inPlace ? " in place" : "", i, out[i]),
                               1;
                    // Up to 16 bytes a one-shot reads each peer's input from the signal that
                    // announced it, unless that peer's next signal came first (then an RDMA READ);
                    // larger reads never.
                    const uint64_t carried = windows->carriedReads() - carriedBefore;
                    if (oneshot) carriedSmall += carried;
                    if (count >= 1000 ? carried != 0 : oneshot && count * 8 <= 16 && carried > 2)
                      return report = strprintf("%s count %zu: %llu carried reads", algo, count,
                                                static_cast<unsigned long long>(carried)),
                             1;
                  }
                }
                if (oneshot && carriedSmall == 0)
                  return report = "no one-shot of up to 16 bytes read a carried copy", 1;
                tribCommDestroy(c.comm);
                return 0;
              }),
          "")
          << algo << " on " << qps << " queue pairs";
    }
}

// Rank 1 advertises a wrong remote key for its window (verbsTestCorruptWindowRkeys): rank 0's
// RDMA READ of it is refused, and rank 0's one-shot fails naming rank 1 and the key; rank 1's
// calls fail naming rank 0 too, within the timeout, and no data of rank 1's was read.
TEST(Verbs, MismatchedWindowKeyFailsNamingThePeer) {
  REQUIRE_RDMA_PORT();
  EXPECT_EQ(run(2, 1,
                [&](int rank, const std::vector<tribUniqueId>& ids, std::string& report) {
#ifdef TRIB_HAVE_VERBS
                  if (rank == 1) trib::verbsTestCorruptWindowRkeys(true);
#endif
                  setenv("TRIB_ALGO", "oneshot", 1);
                  setenv("TRIB_ALGO_STRICT", "1", 1);
                  Comm c = join(2, rank, ids[0], 20000);
                  if (!c.comm) return report = "init: " + c.error, 1;
                  const auto start = Clock::now();
                  std::string err;
                  for (int call = 0; call < 3 && err.empty(); ++call) {
                    std::vector<float> x(1000, 1.0f), y(1000, 0.0f);
                    if (tribAllReduce(x.data(), y.data(), x.size(), tribFloat32, tribSum, c.comm, nullptr) !=
                        tribSuccess)
                      err = tribGetLastError(c.comm);
                    else if (rank == 0)
                      return report = "an RDMA READ through a mismatched remote key succeeded", 1;
                  }
                  const double sec = std::chrono::duration<double>(Clock::now() - start).count();
                  if (err.empty()) return report = "three calls succeeded with the peer's window refused", 1;
                  if (std::string p = keyMismatchProblem(rank, err, sec, "reader"); !p.empty())
                    return report = p, 1;
                  tribCommAbort(c.comm);
                  tribCommDestroy(c.comm);
                  return 0;
                }),
            "");
}

// An unknown device, a GID index out of range, queue pairs per connection out of range or not
// the same on every rank: init fails with a clear error.
TEST(Verbs, UnknownDeviceAndGidOutOfRangeAreClearErrors) {
  REQUIRE_RDMA_PORT();
  struct Bad {
    const char* var;
    const char* value;
    const char* expect;
  };
  for (const Bad& b :
       {Bad{"TRIB_IB_HCA", "nosuchdev", "TRIB_IB_HCA='nosuchdev'"},
        Bad{"TRIB_IB_GID_INDEX", "4000", "TRIB_IB_GID_INDEX=4000 is out of range"},
        Bad{"TRIB_IB_QPS_PER_CONNECTION", "17", "TRIB_IB_QPS_PER_CONNECTION=17 is out of range"},
        // Valid, but not what rank 1 uses.
        Bad{"TRIB_IB_QPS_PER_CONNECTION", "2", "queue pairs per connection"}}) {
    EXPECT_EQ(run(2, 1,
                  [&](int rank, const std::vector<tribUniqueId>& ids, std::string& report) {
                    if (rank == 0) setenv(b.var, b.value, 1);
                    Comm c = join(2, rank, ids[0], 4000);  // rank 1 waits for rank 0's blob: bounded
                    if (c.comm) {
                      tribCommDestroy(c.comm);
                      return report = std::string("init succeeded with ") + b.var + "=" + b.value, 1;
                    }
                    if (rank == 0 && c.error.find(b.expect) == std::string::npos)
                      return report = "unclear error: " + c.error, 1;
                    return 0;
                  }),
              "")
        << b.var;
  }
}

#ifdef TRIB_HAVE_VERBS
// The default choice says why; where no device's locality is known (the guest's rxe devices have
// no PCI parent) every local rank takes the first active port, as before the choice by locality.
TEST(Verbs, DefaultPortChoiceSaysWhy) {
  REQUIRE_RDMA_PORT();
  unsetenv("TRIB_IB_HCA");
  trib::verbs::PortChoice first, second;
  const trib::PciPlace me = trib::verbs::callerPlace();
  ASSERT_TRUE(trib::verbs::choosePort(&first, me, 0).ok());
  ASSERT_TRUE(trib::verbs::choosePort(&second, me, 1).ok());
  std::printf("rank place %s: local rank 0 uses %s:%d (%s), local rank 1 %s:%d (%s)\n", me.what.c_str(),
              first.device.c_str(), first.port, first.why.c_str(), second.device.c_str(), second.port,
              second.why.c_str());
  EXPECT_FALSE(first.why.empty());
  bool known = false;
  for (const std::string& dev : trib::sysfs::listDir("/sys/class/infiniband")) {
    const trib::PciPlace p = trib::sysfsRdmaPlace("/sys", dev);
    known |= !p.root.empty() || !p.numa.empty();
  }
  if (!known) {
    EXPECT_EQ(first.device, second.device);
    EXPECT_EQ(first.port, second.port);
    EXPECT_TRUE(first.why == "locality unknown: the first active port" || first.why == "the only active port")
        << first.why;
  }
}
#endif

// A link that goes down under a job (the guest's veth end, TRIB_VM_LINK): both ranks' receives
// fail within the timeout naming the other, and none hangs. Only in the RDMA test guest, which
// lets a test take its link down; the link comes back up afterwards.
TEST(Verbs, LinkDownFailsWithinTheTimeout) {
  REQUIRE_RDMA_PORT();
  const char* link = std::getenv("TRIB_VM_LINK");
  if (!link) GTEST_SKIP() << "needs the RDMA test guest's link to take down (TRIB_VM_LINK, tests/vm/)";
  const std::string down = std::string("ip link set ") + link + " down",
                    up = std::string("ip link set ") + link + " up";
  std::string failures = run(2, 1, [&](int rank, const std::vector<tribUniqueId>& ids, std::string& report) {
    Comm c = join(2, rank, ids[0], kFaultTimeoutMs);
    if (!c.comm) return report = "init: " + c.error, 1;
    float x = 1, y = 0;
    if (tribAllReduce(&x, &y, 1, tribFloat32, tribSum, c.comm, nullptr) != tribSuccess || y != 2)
      return report = "warm-up: " + std::string(tribGetLastError(c.comm)), 1;
    if (rank == 0 && std::system(down.c_str()) != 0) return report = "cannot run: " + down, 1;
    std::vector<uint8_t> in(3u << 20);
    const auto start = Clock::now();
    tribResult_t r = tribRecv(in.data(), in.size(), tribUint8, 1 - rank, c.comm, nullptr);
    const double sec = std::chrono::duration<double>(Clock::now() - start).count();
    const std::string err = tribGetLastError(c.comm);
    if (r == tribSuccess) return report = "a receive over the downed link succeeded", 1;
    if (err.find("rank " + std::to_string(1 - rank)) == std::string::npos)
      return report = "error does not name the peer: " + err, 1;
    if (tooLate(sec)) return report = strprintf("failing took %.1f s: %s", sec, err.c_str()), 1;
    std::printf("rank %d: %s after %.1f s\n", rank, err.c_str(), sec);
    tribCommAbort(c.comm);
    tribCommDestroy(c.comm);
    return 0;
  });
  EXPECT_EQ(std::system(up.c_str()), 0) << up;
  EXPECT_EQ(failures, "");
}

}  // namespace
