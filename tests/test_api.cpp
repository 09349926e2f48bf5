// The C ABI's contracts: bad input gets a clear error and leaves buffers untouched; group
// calls, split, non-blocking requests, abort from another thread, timeouts and peer loss.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/log.hpp"
#include "tributary/tributary.h"
#include "tributary/tributary.hpp"

namespace {

using Clock = std::chrono::steady_clock;

std::vector<tribComm_t> makeComms(int n) {
  std::vector<tribComm_t> comms(n);
  EXPECT_EQ(tribCommInitAll(comms.data(), n, nullptr), tribSuccess);
  return comms;
}

void destroyAll(std::vector<tribComm_t>& comms) {
  for (tribComm_t c : comms) EXPECT_EQ(tribCommDestroy(c), tribSuccess) << tribGetLastError(nullptr);
}

// A communicator of `n` ranks (threads) whose every wait times out after `ms`.
std::vector<tribComm_t> makeCommsWithTimeout(int n, int ms) {
  tribUniqueId id;
  EXPECT_EQ(tribGetUniqueId(&id), tribSuccess);
  std::vector<tribComm_t> comms(n);
  std::vector<std::thread> t;
  for (int r = 0; r < n; ++r) {
    t.emplace_back([&, r] {
      tribConfig_t cfg = TRIB_CONFIG_INITIALIZER;
      cfg.timeoutMs = ms;
      EXPECT_EQ(tribCommInitRankConfig(&comms[r], n, id, r, &cfg), tribSuccess);
    });
  }
  for (auto& th : t) th.join();
  return comms;
}

std::string lastError() { return tribGetLastError(nullptr); }

TEST(Api, VersionAndStrings) {
  int v = 0;
  ASSERT_EQ(tribGetVersion(&v), tribSuccess);
  EXPECT_EQ(v, TRIB_VERSION_CODE);
  EXPECT_EQ(tribGetVersion(nullptr), tribInvalidArgument);
  for (int r = 0; r < tribNumResults; ++r) EXPECT_STRNE(tribGetErrorString(static_cast<tribResult_t>(r)), "");
  EXPECT_STREQ(tribDataTypeName(tribBfloat16), "bfloat16");
  size_t bytes = 0;
  EXPECT_EQ(tribDataTypeSize(tribFloat16, &bytes), tribSuccess);
  EXPECT_EQ(bytes, 2u);
  EXPECT_EQ(tribDataTypeSize(static_cast<tribDataType_t>(99), &bytes), tribInvalidArgument);
}

TEST(Api, BadArgumentsGetClearErrorsAndLeaveBuffersUntouched) {
  auto comms = makeComms(1);
  tribComm_t c = comms[0];
  std::vector<float> send(16, 1.0f), recv(16, 7.0f);
  auto untouched = [&] {
    for (float x : recv) ASSERT_EQ(x, 7.0f);
  };
  EXPECT_EQ(tribAllReduce(nullptr, recv.data(), 16, tribFloat32, tribSum, c, nullptr), tribInvalidArgument);
  EXPECT_NE(lastError().find("sendbuff is NULL"), std::string::npos) << lastError();
  untouched();
  EXPECT_EQ(tribAllReduce(send.data(), nullptr, 16, tribFloat32, tribSum, c, nullptr), tribInvalidArgument);
  EXPECT_NE(lastError().find("recvbuff is NULL"), std::string::npos) << lastError();
  EXPECT_EQ(tribAllReduce(send.data(), recv.data(), SIZE_MAX / 2, tribFloat32, tribSum, c, nullptr),
            tribInvalidArgument);
  EXPECT_NE(lastError().find("too large"), std::string::npos) << lastError();
  untouched();
  EXPECT_EQ(tribAllReduce(send.data(), recv.data(), 16, static_cast<tribDataType_t>(42), tribSum, c, nullptr),
            tribInvalidArgument);
  EXPECT_NE(lastError().find("unknown datatype 42"), std::string::npos) << lastError();
  EXPECT_EQ(tribAllReduce(send.data(), recv.data(), 16, tribFloat32, static_cast<tribRedOp_t>(9), c, nullptr),
            tribInvalidArgument);
  EXPECT_NE(lastError().find("unknown reduction operator 9"), std::string::npos) << lastError();
  EXPECT_EQ(tribBroadcast(send.data(), recv.data(), 16, tribFloat32, 1, c, nullptr), tribInvalidArgument);
  EXPECT_NE(lastError().find("root 1 is out of range"), std::string::npos) << lastError();
  EXPECT_EQ(tribReduce(send.data(), recv.data(), 16, tribFloat32, tribSum, -1, c, nullptr),
            tribInvalidArgument);
  // Misaligned float pointer.
  auto* misaligned = reinterpret_cast<float*>(reinterpret_cast<char*>(recv.data()) + 1);
  EXPECT_EQ(tribAllReduce(send.data(), misaligned, 8, tribFloat32, tribSum, c, nullptr), tribInvalidArgument);
  EXPECT_NE(lastError().find("not aligned"), std::string::npos) << lastError();
  // Overlapping buffers that are not the in-place layout.
  EXPECT_EQ(tribAllReduce(recv.data(), recv.data() + 1, 8, tribFloat32, tribSum, c, nullptr),
            tribInvalidArgument);
  EXPECT_NE(lastError().find("overlap"), std::string::npos) << lastError();
  untouched();
  EXPECT_EQ(tribAlltoAll(recv.data(), recv.data(), 16, tribFloat32, c, nullptr), tribInvalidArgument);
  EXPECT_EQ(tribAllReduce(send.data(), recv.data(), 16, tribFloat32, tribSum, nullptr, nullptr),
            tribInvalidArgument);
  EXPECT_NE(lastError().find("comm is NULL"), std::string::npos);
  // A stream makes the call stream-ordered (test_stream_progress: what it does without a device).
  EXPECT_EQ(tribSend(send.data(), 4, tribFloat32, 3, c, nullptr), tribInvalidArgument);
  EXPECT_NE(lastError().find("peer 3 is out of range"), std::string::npos) << lastError();
  untouched();
  // Zero count with NULL buffers is legal.
  EXPECT_EQ(tribAllReduce(nullptr, nullptr, 0, tribFloat32, tribSum, c, nullptr), tribSuccess) << lastError();
  destroyAll(comms);
}

// tributary.h's NULL rules: a rank may pass NULL for a buffer it does not use (NCCL's rule), and
// only for one it does not use.
TEST(Api, NullIsAcceptedForBuffersTheRankDoesNotUse) {
  constexpr int n = 2, root = 1;
  auto comms = makeComms(n);
  struct Out {
    int32_t reduce[4], broadcast[4], gather[8], scatter[4];
  };
  std::vector<Out> out(n);
  std::vector<tribResult_t> rc(4 * n, tribInternalError);
  std::vector<std::thread> t;
  for (int r = 0; r < n; ++r) {
    t.emplace_back([&, r] {
      std::vector<int32_t> in(2 * 4);
      for (int i = 0; i < 8; ++i) in[i] = 10 * (r + 1) + i;
      const bool isRoot = r == root;
      Out& o = out[r];
      std::fill_n(reinterpret_cast<int32_t*>(&o), sizeof(Out) / sizeof(int32_t), -1);
      rc[4 * r + 0] =
          tribReduce(in.data(), isRoot ? o.reduce : nullptr, 4, tribInt32, tribSum, root, comms[r], nullptr);
      rc[4 * r + 1] =
          tribBroadcast(isRoot ? in.data() : nullptr, o.broadcast, 4, tribInt32, root, comms[r], nullptr);
      rc[4 * r + 2] =
          tribGather(in.data(), isRoot ? o.gather : nullptr, 4, tribInt32, root, comms[r], nullptr);
      rc[4 * r + 3] =
          tribScatter(isRoot ? in.data() : nullptr, o.scatter, 4, tribInt32, root, comms[r], nullptr);
    });
  }
  for (auto& th : t) th.join();
  for (int i = 0; i < 4 * n; ++i) EXPECT_EQ(rc[i], tribSuccess) << "call " << i % 4 << " on rank " << i / 4;
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(out[root].reduce[i], (10 + i) + (20 + i));
    EXPECT_EQ(out[0].reduce[i], -1);  // off the root nothing is written
    EXPECT_EQ(out[root].gather[i], 10 + i);
    EXPECT_EQ(out[root].gather[4 + i], 20 + i);
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(out[r].broadcast[i], 20 + i) << "rank " << r;
      EXPECT_EQ(out[r].scatter[i], 20 + 4 * r + i) << "rank " << r;
    }
  }
  // Count 0: every buffer may be NULL.
  t.clear();
  for (int r = 0; r < n; ++r) {
    t.emplace_back([&, r] {
      rc[r] = tribAllGather(nullptr, nullptr, 0, tribInt32, comms[r], nullptr);
      rc[n + r] = tribReduceScatter(nullptr, nullptr, 0, tribInt32, tribSum, comms[r], nullptr);
    });
  }
  for (auto& th : t) th.join();
  for (int i = 0; i < 2 * n; ++i) EXPECT_EQ(rc[i], tribSuccess) << i;
  // A buffer the rank uses may not be NULL: the root's reduce output, the root's broadcast input.
  int32_t x[4] = {};
  EXPECT_EQ(tribReduce(x, nullptr, 4, tribInt32, tribSum, 0, comms[0], nullptr), tribInvalidArgument);
  EXPECT_NE(lastError().find("recvbuff is NULL"), std::string::npos) << lastError();
  EXPECT_EQ(tribBroadcast(nullptr, x, 4, tribInt32, 0, comms[0], nullptr), tribInvalidArgument);
  EXPECT_NE(lastError().find("sendbuff is NULL"), std::string::npos) << lastError();
  destroyAll(comms);
}

// tributary.h: integer avg is the wrapped sum divided by the rank count, truncated toward zero.
TEST(Api, IntegerAvgTruncatesTowardZero) {
  constexpr int n = 2;
  auto comms = makeComms(n);
  const int32_t in[n][3] = {{-4, 4, INT32_MAX}, {-3, 3, 1}};  // sums -7, 7, and INT32_MIN (wrapped)
  int32_t out[n][3] = {};
  std::vector<tribResult_t> rc(n, tribInternalError);
  std::vector<std::thread> t;
  for (int r = 0; r < n; ++r)
    t.emplace_back(
        [&, r] { rc[r] = tribAllReduce(in[r], out[r], 3, tribInt32, tribAvg, comms[r], nullptr); });
  for (auto& th : t) th.join();
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(rc[r], tribSuccess);
    EXPECT_EQ(out[r][0], -3);
    EXPECT_EQ(out[r][1], 3);
    EXPECT_EQ(out[r][2], INT32_MIN / 2);
  }
  destroyAll(comms);
}

TEST(Api, InitErrors) {
  tribComm_t c = nullptr;
  tribUniqueId id;
  ASSERT_EQ(tribGetUniqueId(&id), tribSuccess);
  EXPECT_EQ(tribCommInitRank(&c, 0, id, 0), tribInvalidArgument);
  EXPECT_EQ(tribCommInitRank(&c, 2, id, 2), tribInvalidArgument);
  EXPECT_NE(lastError().find("rank 2 is out of range"), std::string::npos);
  tribUniqueId garbage;
  std::memset(&garbage, 0x5a, sizeof garbage);
  EXPECT_EQ(tribCommInitRank(&c, 1, garbage, 0), tribInvalidArgument);
  EXPECT_NE(lastError().find("unique id"), std::string::npos) << lastError();
  tribConfig_t bad;
  std::memset(&bad, 0, sizeof bad);
  EXPECT_EQ(tribCommInitRankConfig(&c, 1, id, 0, &bad), tribInvalidArgument);
  EXPECT_NE(lastError().find("TRIB_CONFIG_INITIALIZER"), std::string::npos);
  tribConfig_t share = TRIB_CONFIG_INITIALIZER;
  share.shareTransports = 7;
  EXPECT_EQ(tribCommInitRankConfig(&c, 1, id, 0, &share), tribInvalidArgument);
  EXPECT_NE(lastError().find("config.shareTransports must be 0 or 1"), std::string::npos) << lastError();
  // A struct from a header without the field: what lies past its size is not read.
  share.size = offsetof(tribConfig_t, shareTransports);
  ASSERT_EQ(tribCommInitRankConfig(&c, 1, id, 0, &share), tribSuccess) << lastError();
  EXPECT_EQ(tribCommDestroy(c), tribSuccess);
  c = nullptr;
  ASSERT_EQ(tribGetUniqueId(&id), tribSuccess);
  setenv("TRIB_WINDOW_STREAMING", "sometimes", 1);
  EXPECT_EQ(tribCommInitRank(&c, 1, id, 0), tribInvalidArgument);
  EXPECT_NE(lastError().find("TRIB_WINDOW_STREAMING='sometimes' must be auto, 0 or 1"), std::string::npos)
      << lastError();
  unsetenv("TRIB_WINDOW_STREAMING");
  // A rank that never arrives is reported as such, within the timeout.
  tribConfig_t cfg = TRIB_CONFIG_INITIALIZER;
  cfg.timeoutMs = 200;
  ASSERT_EQ(tribGetUniqueId(&id), tribSuccess);
  EXPECT_EQ(tribCommInitRankConfig(&c, 2, id, 0, &cfg), tribTimeout);
  EXPECT_NE(lastError().find("missing: rank 1"), std::string::npos) << lastError();
  EXPECT_EQ(c, nullptr);
  // Mismatched nranks between ranks.
  ASSERT_EQ(tribGetUniqueId(&id), tribSuccess);
  std::thread t([&] {
    tribComm_t c2 = nullptr;
    tribConfig_t cfg2 = TRIB_CONFIG_INITIALIZER;
    cfg2.timeoutMs = 300;
    tribCommInitRankConfig(&c2, 2, id, 0, &cfg2);  // times out: its partner disagrees
    if (c2) tribCommDestroy(c2);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(tribCommInitRankConfig(&c, 3, id, 1, &cfg), tribInvalidUsage);
  EXPECT_NE(lastError().find("nranks"), std::string::npos) << lastError();
  t.join();
}

TEST(Api, GroupLetsOneThreadDriveAllRanks) {
  const int n = 4;
  auto comms = makeComms(n);
  std::vector<std::vector<int32_t>> bufs(n, std::vector<int32_t>(1000));
  for (int r = 0; r < n; ++r) {
    for (int i = 0; i < 1000; ++i) bufs[r][i] = r * 1000 + i;
  }
  ASSERT_EQ(tribGroupStart(), tribSuccess);
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(tribAllReduce(bufs[r].data(), bufs[r].data(), 1000, tribInt32, tribSum, comms[r], nullptr),
              tribSuccess);
  }
  ASSERT_EQ(tribGroupEnd(), tribSuccess) << lastError();
  for (int r = 0; r < n; ++r) {
    for (int i = 0; i < 1000; ++i) ASSERT_EQ(bufs[r][i], 6000 + 4 * i);
  }
  EXPECT_EQ(tribGroupEnd(), tribInvalidUsage);
  destroyAll(comms);
}

// Peer-memory all-reduces on threads (the loopback fabric's windows): one-shot and two-shot, each
// forced, back to back with sizes that take one chunk, several, and an odd number (the window
// cells alternate both ways), blocking and non-blocking, in and out of place. Under TSan this is
// the check that a signal publishes the window writes before it.
TEST(Api, PeerWindowAllReducesOnThreads) {
  setenv("TRIB_ALGO_STRICT", "1", 1);  // a forced algorithm that cannot run fails the call
  // Window writes measured (auto) or always streaming: the same bytes either way.
  for (const char* streaming : {"auto", "1"})
    for (const char* algo : {"oneshot", "twoshot"}) {
      setenv("TRIB_WINDOW_STREAMING", streaming, 1);
      const int n = 3;
      tribUniqueId id;
      ASSERT_EQ(tribGetUniqueId(&id), tribSuccess);
      std::vector<std::thread> ranks;
      std::atomic<int> failures{0};
      for (int r = 0; r < n; ++r) {
        ranks.emplace_back([&, r] {
          tribConfig_t cfg = TRIB_CONFIG_INITIALIZER;
          cfg.algo = algo;
          cfg.timeoutMs = 60000;
          tribComm_t comm = nullptr;
          if (tribCommInitRankConfig(&comm, n, id, r, &cfg) != tribSuccess) {
            ++failures;
            return;
          }
          const uint64_t counts[] = {1, 4096, 262144 + 5, 7, 3 * 262144 + 1};  // int32; 1 MiB cells
          auto expect = [&](const std::vector<int32_t>& v, int round) {
            for (uint64_t e = 0; e < v.size(); ++e)
              if (v[e] != static_cast<int32_t>(300 + 3 * (e % 1000 + round))) return false;
            return true;
          };
          for (int round = 0; round < 12 && failures == 0; round += 2) {
            // Two calls in flight at once (non-blocking: the second starts once the first is done),
            // or two blocking ones; the first in place on odd rounds.
            std::vector<int32_t> a[2], b[2];
            tribRequest_t req[2] = {nullptr, nullptr};
            for (int k = 0; k < 2; ++k) {
              uint64_t count = counts[(round + k) % 5];
              if (std::string(algo) == "oneshot") count %= 200000;  // one cell
              a[k].resize(count);
              for (uint64_t e = 0; e < count; ++e)
                a[k][e] = static_cast<int32_t>(r * 100 + e % 1000 + round + k);
              const bool inPlace = (round / 2 + k) % 2 == 1;
              if (!inPlace) b[k].assign(count, -1);
              int32_t* dst = inPlace ? a[k].data() : b[k].data();
              tribResult_t res =
                  round % 4 == 0 ? tribAllReduce(a[k].data(), dst, count, tribInt32, tribSum, comm, nullptr)
                                 : tribIallReduce(a[k].data(), dst, count, tribInt32, tribSum, comm, &req[k]);
              if (res != tribSuccess) ++failures;
            }
            for (int k = 0; k < 2; ++k) {
              if (req[k] && tribWait(&req[k], -1) != tribSuccess) ++failures;
              if (!expect(b[k].empty() ? a[k] : b[k], round + k)) ++failures;
            }
          }
          tribCommDestroy(comm);
        });
      }
      for (auto& t : ranks) t.join();
      EXPECT_EQ(failures.load(), 0) << algo << ", streaming " << streaming << ": " << lastError();
    }
  unsetenv("TRIB_WINDOW_STREAMING");
  unsetenv("TRIB_ALGO_STRICT");
}

TEST(Api, SendRecvInGroupAndToSelf) {
  auto comms = makeComms(3);
  std::vector<double> a(5, 1.5), b(5, 0), self(5, 0);
  ASSERT_EQ(tribGroupStart(), tribSuccess);
  ASSERT_EQ(tribSend(a.data(), 5, tribFloat64, 2, comms[0], nullptr), tribSuccess);
  ASSERT_EQ(tribRecv(b.data(), 5, tribFloat64, 0, comms[2], nullptr), tribSuccess);
  ASSERT_EQ(tribSend(a.data(), 5, tribFloat64, 1, comms[1], nullptr), tribSuccess);
  ASSERT_EQ(tribRecv(self.data(), 5, tribFloat64, 1, comms[1], nullptr), tribSuccess);
  ASSERT_EQ(tribGroupEnd(), tribSuccess) << lastError();
  EXPECT_EQ(b, a);
  EXPECT_EQ(self, a);
  destroyAll(comms);
}

TEST(Api, SplitByColorAndKey) {
  const int n = 6;
  auto comms = makeComms(n);
  std::vector<tribComm_t> sub(n, nullptr);
  ASSERT_EQ(tribGroupStart(), tribSuccess);
  for (int r = 0; r < n; ++r) {
    int color = r == 5 ? TRIB_SPLIT_NOCOLOR : r % 2;
    ASSERT_EQ(tribCommSplit(comms[r], color, /*key=*/-r, &sub[r], nullptr), tribSuccess);
  }
  ASSERT_EQ(tribGroupEnd(), tribSuccess) << lastError();
  EXPECT_EQ(sub[5], nullptr);
  // Even ranks {0,2,4} keyed by -r: new ranks 4->0, 2->1, 0->2. Odd ranks {1,3}: 3->0, 1->1.
  int expectRank[5] = {2, 1, 1, 0, 0}, expectSize[5] = {3, 2, 3, 2, 3};
  for (int r = 0; r < 5; ++r) {
    ASSERT_NE(sub[r], nullptr);
    int rank = -1, size = -1;
    EXPECT_EQ(tribCommUserRank(sub[r], &rank), tribSuccess);
    EXPECT_EQ(tribCommCount(sub[r], &size), tribSuccess);
    EXPECT_EQ(rank, expectRank[r]) << "old rank " << r;
    EXPECT_EQ(size, expectSize[r]) << "old rank " << r;
  }
  // The sub-communicators work, independently of each other.
  std::vector<int64_t> v(5);
  ASSERT_EQ(tribGroupStart(), tribSuccess);
  for (int r = 0; r < 5; ++r) {
    v[r] = r;
    ASSERT_EQ(tribAllReduce(&v[r], &v[r], 1, tribInt64, tribSum, sub[r], nullptr), tribSuccess);
  }
  ASSERT_EQ(tribGroupEnd(), tribSuccess) << lastError();
  for (int r = 0; r < 5; ++r) EXPECT_EQ(v[r], r % 2 ? 1 + 3 : 0 + 2 + 4);
  for (int r = 0; r < 5; ++r) EXPECT_EQ(tribCommDestroy(sub[r]), tribSuccess);
  destroyAll(comms);
}

TEST(Api, NonBlockingRequests) {
  const int n = 3;
  auto comms = makeComms(n);
  std::vector<std::vector<float>> in(n, std::vector<float>(100000)), out(n, std::vector<float>(100000));
  std::vector<tribRequest_t> reqs(n);
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < in[r].size(); ++i) in[r][i] = static_cast<float>(r + (i % 7));
    ASSERT_EQ(
        tribIallReduce(in[r].data(), out[r].data(), in[r].size(), tribFloat32, tribMax, comms[r], &reqs[r]),
        tribSuccess);
  }
  // Poll with tribTest until all complete (bounded).
  auto deadline = Clock::now() + std::chrono::seconds(30);
  int left = n;
  while (left > 0 && Clock::now() < deadline) {
    for (int r = 0; r < n; ++r) {
      if (!reqs[r]) continue;
      int done = 0;
      ASSERT_EQ(tribTest(&reqs[r], &done), tribSuccess) << lastError();
      if (done) {
        EXPECT_EQ(reqs[r], nullptr);
        --left;
      }
    }
  }
  ASSERT_EQ(left, 0);
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < out[r].size(); i += 997) ASSERT_EQ(out[r][i], static_cast<float>(2 + (i % 7)));
  }
  // A short explicit wait that expires leaves the request valid; the peer then joins.
  tribRequest_t a = nullptr, b = nullptr;
  float x = 1, y = 2;
  ASSERT_EQ(tribIallReduce(&x, &x, 1, tribFloat32, tribSum, comms[0], &a), tribSuccess);
  EXPECT_EQ(tribWait(&a, 20), tribTimeout);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(tribCommDestroy(comms[0]), tribInvalidUsage);  // a request is outstanding
  float z = 3;
  tribRequest_t c = nullptr;
  ASSERT_EQ(tribIallReduce(&y, &y, 1, tribFloat32, tribSum, comms[1], &b), tribSuccess);
  ASSERT_EQ(tribIallReduce(&z, &z, 1, tribFloat32, tribSum, comms[2], &c), tribSuccess);
  // One thread drives the three ranks: waiting on any progresses its communicator only, so poll.
  std::vector<tribRequest_t*> all{&a, &b, &c};
  deadline = Clock::now() + std::chrono::seconds(30);
  while ((a || b || c) && Clock::now() < deadline) {
    for (auto* r : all) {
      int done = 0;
      if (*r) {
        ASSERT_EQ(tribTest(r, &done), tribSuccess) << lastError();
      }
    }
  }
  EXPECT_EQ(x, 6);
  EXPECT_EQ(y, 6);
  EXPECT_EQ(z, 6);
  destroyAll(comms);
}

// Polling with tribWait(&req, 0), or any wait of the caller's own length, is quiet; only the
// communicator's own timeout running out is worth a warning.
TEST(Api, PollingWaitIsQuietOnlyTheCommunicatorsTimeoutWarns) {
  const char* oldLevel = std::getenv("TRIB_DEBUG");
  const std::string saved = oldLevel ? oldLevel : "";
  setenv("TRIB_DEBUG", "WARN", 1);
  trib::logReconfigure();
  std::mutex mu;
  std::vector<std::string> warnings;
  trib::setLogSink([&](trib::LogLevel level, const char*, const std::string& line) {
    std::lock_guard<std::mutex> lock(mu);
    if (level == trib::LogLevel::kWarn) warnings.push_back(line);
  });
  auto warned = [&] {
    std::lock_guard<std::mutex> lock(mu);
    return warnings;
  };
  auto comms = makeCommsWithTimeout(2, 1500);
  float x = 1;
  tribRequest_t a = nullptr;
  ASSERT_EQ(tribIallReduce(&x, &x, 1, tribFloat32, tribSum, comms[0], &a), tribSuccess);
  // Rank 1 never calls, so every poll finds the request incomplete (well within 1.5 s).
  int polls = 0;
  for (auto until = Clock::now() + std::chrono::milliseconds(300); Clock::now() < until && polls < 2000;
       ++polls) {
    ASSERT_EQ(tribWait(&a, 0), tribTimeout) << lastError();
    ASSERT_NE(a, nullptr);
    std::this_thread::yield();
  }
  EXPECT_EQ(tribWait(&a, 30), tribTimeout);
  ASSERT_NE(a, nullptr);
  EXPECT_NE(lastError().find("not complete after 30 ms"), std::string::npos) << lastError();
  auto w = warned();
  EXPECT_TRUE(w.empty()) << polls << " polls logged " << w.size() << " warnings; the first: " << w[0];
  // The communicator's own timeout: a warning that says what is pending, and the request is done.
  EXPECT_EQ(tribWait(&a, TRIB_TIMEOUT_DEFAULT), tribTimeout);
  EXPECT_EQ(a, nullptr);
  w = warned();
  bool named = false;
  for (const auto& line : w) named = named || line.find("timed out after 1.5 s") != std::string::npos;
  EXPECT_TRUE(named) << w.size() << " warnings, none about the timeout";
  trib::setLogSink(nullptr);
  if (oldLevel)
    setenv("TRIB_DEBUG", saved.c_str(), 1);
  else
    unsetenv("TRIB_DEBUG");
  trib::logReconfigure();
  destroyAll(comms);
}

TEST(Api, FinalizeCompletesOutstandingWorkThenRefusesNewWork) {
  auto comms = makeCommsWithTimeout(2, 20000);
  std::vector<int32_t> a(1000, 1), b(1000, 2);
  tribRequest_t ra = nullptr, rb = nullptr;
  ASSERT_EQ(tribIallReduce(a.data(), a.data(), a.size(), tribInt32, tribSum, comms[0], &ra), tribSuccess);
  ASSERT_EQ(tribIallReduce(b.data(), b.data(), b.size(), tribInt32, tribSum, comms[1], &rb), tribSuccess);
  // Finalizing rank 1 drives its request while rank 0's thread waits on its own.
  std::thread rank0([&] { EXPECT_EQ(tribWait(&ra, TRIB_TIMEOUT_DEFAULT), tribSuccess) << lastError(); });
  ASSERT_EQ(tribCommFinalize(comms[1]), tribSuccess) << lastError();
  rank0.join();
  ASSERT_EQ(tribWait(&rb, TRIB_TIMEOUT_DEFAULT), tribSuccess) << lastError();
  EXPECT_EQ(a[999], 3);
  EXPECT_EQ(b[0], 3);
  EXPECT_EQ(tribBarrier(comms[1], nullptr), tribInvalidUsage);
  EXPECT_NE(lastError().find("finalized"), std::string::npos) << lastError();
  destroyAll(comms);
}

TEST(Api, TimeoutNamesWhatTheRankWaitsFor) {
  auto comms = makeCommsWithTimeout(2, 300);
  std::vector<float> v(64, 1);
  auto t0 = Clock::now();
  // Rank 1 never calls: rank 0 must fail with a timeout, not hang.
  EXPECT_EQ(tribAllReduce(v.data(), v.data(), v.size(), tribFloat32, tribSum, comms[0], nullptr),
            tribTimeout);
  auto elapsed = Clock::now() - t0;
  EXPECT_LT(elapsed, std::chrono::seconds(10));
  EXPECT_NE(lastError().find("timed out"), std::string::npos) << lastError();
  // What it waits for names rank 1: a receive "from 1", or one-shot's "wait(for 1)".
  EXPECT_TRUE(lastError().find("from 1") != std::string::npos ||
              lastError().find("for 1)") != std::string::npos)
      << lastError();
  // ... and says so in words a user searches for (the fault tests read it: docs/FAULTS.md).
  EXPECT_NE(lastError().find("(on rank 1)"), std::string::npos) << lastError();
  // The communicator is now broken and says why.
  EXPECT_NE(tribAllReduce(v.data(), v.data(), v.size(), tribFloat32, tribSum, comms[0], nullptr),
            tribSuccess);
  EXPECT_NE(lastError().find("earlier error"), std::string::npos) << lastError();
  tribResult_t async = tribSuccess;
  EXPECT_EQ(tribCommGetAsyncError(comms[0], &async), tribSuccess);
  EXPECT_EQ(async, tribTimeout);
  destroyAll(comms);
}

TEST(Api, AbortFromAnotherThreadUnblocksTheWaiter) {
  auto comms = makeCommsWithTimeout(2, 60000);
  std::vector<float> v(64, 1);
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_EQ(tribCommAbort(comms[0]), tribSuccess);
  });
  auto t0 = Clock::now();
  EXPECT_EQ(tribAllReduce(v.data(), v.data(), v.size(), tribFloat32, tribSum, comms[0], nullptr),
            tribAborted);
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(10));
  aborter.join();
  // Calling after abort: a clear error, no crash.
  EXPECT_EQ(tribBarrier(comms[0], nullptr), tribAborted);
  EXPECT_NE(lastError().find("aborted"), std::string::npos) << lastError();
  // The peer learns that rank 0 is gone instead of waiting for its timeout: at the latest on its
  // next call (a one-shot over the windows completes the call whose input rank 0 had posted).
  t0 = Clock::now();
  tribResult_t second = tribAllReduce(v.data(), v.data(), v.size(), tribFloat32, tribSum, comms[1], nullptr);
  if (second == tribSuccess) {
    EXPECT_EQ(v[0], 2.0f);  // and then with both ranks' data
    second = tribAllReduce(v.data(), v.data(), v.size(), tribFloat32, tribSum, comms[1], nullptr);
  }
  EXPECT_EQ(second, tribRemoteError);
  EXPECT_NE(lastError().find("rank 0"), std::string::npos) << lastError();
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(10));
  destroyAll(comms);
}

TEST(Api, MismatchedCountsAreReported) {
  auto comms = makeCommsWithTimeout(2, 2000);
  std::vector<float> a(100, 1), b(200, 1);
  std::atomic<int> r0{-1}, r1{-1};
  std::thread t(
      [&] { r1 = tribAllReduce(b.data(), b.data(), 200, tribFloat32, tribSum, comms[1], nullptr); });
  r0 = tribAllReduce(a.data(), a.data(), 100, tribFloat32, tribSum, comms[0], nullptr);
  t.join();
  EXPECT_TRUE(r0 != tribSuccess || r1 != tribSuccess);
  EXPECT_TRUE(r0 == tribInvalidUsage || r1 == tribInvalidUsage || r0 == tribTimeout || r1 == tribTimeout);
  destroyAll(comms);
}

// tribMemAlloc: usable memory any call accepts (threads here, so nothing maps it), and clear
// errors for what it cannot take.
TEST(Api, SharedMemoryAllocation) {
  void* p = reinterpret_cast<void*>(1);
  EXPECT_EQ(tribMemAlloc(nullptr, 64), tribInvalidArgument);
  EXPECT_EQ(tribMemAlloc(&p, 0), tribInvalidArgument);
  EXPECT_EQ(p, nullptr);
  EXPECT_NE(lastError().find("size 0"), std::string::npos) << lastError();
  EXPECT_EQ(tribMemAlloc(&p, SIZE_MAX), tribInvalidArgument);
  ASSERT_EQ(tribMemAlloc(&p, 1000), tribSuccess) << lastError();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u);
  auto comms = makeComms(2);
  auto* f = static_cast<float*>(p);
  for (int i = 0; i < 200; ++i) f[i] = static_cast<float>(i), f[200 + i] = 1.0f;
  std::vector<std::thread> t;
  for (int r = 0; r < 2; ++r)
    t.emplace_back([&, r] {
      EXPECT_EQ(tribAllReduce(f + 200 * r, f + 400 + 200 * r, 200, tribFloat32, tribSum, comms[r], nullptr),
                tribSuccess);
    });
  for (auto& th : t) th.join();
  for (int i = 0; i < 200; ++i) {
    EXPECT_EQ(f[400 + i], static_cast<float>(i) + 1.0f);
    EXPECT_EQ(f[600 + i], f[400 + i]);
  }
  destroyAll(comms);
  int local = 0;
  EXPECT_EQ(tribMemFree(&local), tribInvalidArgument);
  EXPECT_NE(lastError().find("not returned by tribMemAlloc"), std::string::npos) << lastError();
  EXPECT_EQ(tribMemFree(f + 1), tribInvalidArgument);  // inside, but not what tribMemAlloc returned
  EXPECT_EQ(tribMemFree(p), tribSuccess);
  EXPECT_EQ(tribMemFree(p), tribInvalidArgument);  // twice
  EXPECT_EQ(tribMemFree(nullptr), tribSuccess);
  // The C++ wrapper frees what it allocated, and refuses counts whose bytes overflow.
  tributary::SharedBuffer<double> buf(3);
  buf[2] = 1.5;
  EXPECT_EQ(buf.span().size(), 3u);
  EXPECT_EQ(buf.data()[2], 1.5);
  tributary::SharedBuffer<double> moved = std::move(buf);
  EXPECT_EQ(buf.data(), nullptr);
  EXPECT_EQ(moved[2], 1.5);
  EXPECT_THROW(tributary::SharedBuffer<double>(SIZE_MAX / 4), tributary::Error);
}

TEST(CxxApi, SpansTypesAndExceptions) {
  auto comms = tributary::Communicator::createLocal(2);
  ASSERT_EQ(comms.size(), 2u);
  EXPECT_EQ(comms[1].rank(), 1);
  EXPECT_EQ(comms[0].size(), 2);
  std::vector<double> a{1, 2, 3}, b{10, 20, 30}, ra(3), rb(3);
  {
    tributary::Group g;
    comms[0].allReduce<double>(a, ra, tributary::Op::Sum);
    comms[1].allReduce<double>(b, rb, tributary::Op::Sum);
    g.end();
  }
  EXPECT_EQ(ra, (std::vector<double>{11, 22, 33}));
  EXPECT_EQ(rb, ra);
  std::vector<int32_t> gathered(3);
  EXPECT_THROW(comms[0].allGather<int32_t>(std::span<const int32_t>(gathered.data(), 2), gathered),
               tributary::Error);
  try {
    comms[0].broadcast<double>(a, 5);
    FAIL() << "expected an exception";
  } catch (const tributary::Error& e) {
    EXPECT_EQ(e.code(), tribInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("root 5"), std::string::npos) << e.what();
  }
}

}  // namespace
