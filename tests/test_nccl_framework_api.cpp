// The C API pieces frameworks and the NCCL-compatible library rely on (issue 15, part 3):
// pre-multiplied sums on every reduction collective, with their bad input.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fork_util.hpp"
#include "thread_comms.hpp"
#include "tributary/tributary.h"
#include "tributary/tributary.hpp"

namespace {

std::string lastError() { return tribGetLastError(nullptr); }

// `n` ranks (threads) whose every wait times out after `ms`.
std::vector<tribComm_t> commsWithTimeout(int n, int ms) {
  tribUniqueId id;
  EXPECT_EQ(tribGetUniqueId(&id), tribSuccess);
  std::vector<tribComm_t> c(n);
  std::vector<std::thread> t;
  for (int r = 0; r < n; ++r)
    t.emplace_back([&, r] {
      tribConfig_t cfg = TRIB_CONFIG_INITIALIZER;
      cfg.timeoutMs = ms;
      EXPECT_EQ(tribCommInitRankConfig(&c[r], n, id, r, &cfg), tribSuccess) << lastError();
    });
  for (auto& th : t) th.join();
  return c;
}

using Comms = ThreadComms;

// One operator per rank with that rank's scalar (NCCL's are per communicator handle).
std::vector<tribRedOp_t> makeOps(Comms& comms, tribDataType_t dt, const std::vector<double>& scalars,
                                 tribScalarResidence_t where, std::vector<std::vector<uint8_t>>* storage) {
  std::vector<tribRedOp_t> ops(comms.c.size());
  size_t es = 0;
  EXPECT_EQ(tribDataTypeSize(dt, &es), tribSuccess);
  storage->assign(comms.c.size(), std::vector<uint8_t>(es));
  for (size_t r = 0; r < comms.c.size(); ++r) {
    if (dt == tribFloat32) {
      float f = static_cast<float>(scalars[r]);
      std::memcpy((*storage)[r].data(), &f, es);
    } else if (dt == tribFloat64) {
      std::memcpy((*storage)[r].data(), &scalars[r], es);
    } else {  // tribInt32
      int32_t i = static_cast<int32_t>(scalars[r]);
      std::memcpy((*storage)[r].data(), &i, es);
    }
    EXPECT_EQ(tribRedOpCreatePreMulSum(&ops[r], (*storage)[r].data(), dt, where, comms.c[r]), tribSuccess)
        << lastError();
    EXPECT_GE(static_cast<int>(ops[r]), static_cast<int>(tribNumOps));
  }
  return ops;
}

// Every reduction collective, in a group from one thread, on float32: rank r contributes
// (r + 1) * (i + 1), scaled by 0.5 * (r + 1).
TEST(PreMulSum, EveryReductionCollective) {
  const int n = 3;
  const size_t count = 1001;
  Comms comms(n);
  std::vector<std::vector<uint8_t>> storage;
  std::vector<double> scalars = {0.5, 1.0, 1.5};
  auto ops = makeOps(comms, tribFloat32, scalars, tribScalarHostImmediate, &storage);
  auto expect = [&](size_t i) {
    double s = 0;
    for (int r = 0; r < n; ++r) s += scalars[r] * (r + 1) * static_cast<double>(i + 1);
    return s;
  };
  std::vector<std::vector<float>> in(n, std::vector<float>(n * count)), out(n, std::vector<float>(n * count));
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < n * count; ++i) in[r][i] = static_cast<float>((r + 1) * (i % count + 1));
  auto reset = [&] {
    for (auto& o : out) std::fill(o.begin(), o.end(), -1.0f);
  };
  reset();
  ASSERT_EQ(tribGroupStart(), tribSuccess);
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(tribAllReduce(in[r].data(), out[r].data(), count, tribFloat32, ops[r], comms.c[r], nullptr),
              tribSuccess)
        << lastError();
  ASSERT_EQ(tribGroupEnd(), tribSuccess) << lastError();
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i)
      ASSERT_FLOAT_EQ(out[r][i], expect(i)) << "allreduce rank " << r << " [" << i << "]";
  reset();
  ASSERT_EQ(tribGroupStart(), tribSuccess);
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(tribReduce(in[r].data(), out[r].data(), count, tribFloat32, ops[r], 1, comms.c[r], nullptr),
              tribSuccess)
        << lastError();
  ASSERT_EQ(tribGroupEnd(), tribSuccess) << lastError();
  for (size_t i = 0; i < count; ++i) ASSERT_FLOAT_EQ(out[1][i], expect(i)) << "reduce [" << i << "]";
  EXPECT_EQ(out[0][0], -1.0f) << "reduce wrote off the root";
  reset();
  ASSERT_EQ(tribGroupStart(), tribSuccess);
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(tribReduceScatter(in[r].data(), out[r].data(), count, tribFloat32, ops[r], comms.c[r], nullptr),
              tribSuccess)
        << lastError();
  ASSERT_EQ(tribGroupEnd(), tribSuccess) << lastError();
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) ASSERT_FLOAT_EQ(out[r][i], expect(i)) << "reducescatter rank " << r;
  // Non-blocking, in place: the input is scaled once into the request's own copy.
  std::vector<tribRequest_t> reqs(n);
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(tribIallReduce(in[r].data(), in[r].data(), count, tribFloat32, ops[r], comms.c[r], &reqs[r]),
              tribSuccess)
        << lastError();
  for (int r = 0; r < n; ++r) ASSERT_EQ(tribWait(&reqs[r], TRIB_TIMEOUT_DEFAULT), tribSuccess) << lastError();
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i)
      ASSERT_FLOAT_EQ(in[r][i], expect(i)) << "in-place iallreduce rank " << r;
  for (int r = 0; r < n; ++r) EXPECT_EQ(tribRedOpDestroy(ops[r], comms.c[r]), tribSuccess) << lastError();
}

// Integer and float64 arithmetic in the type itself; tribScalarDevice reads the scalar at each call.
TEST(PreMulSum, TypesAndResidence) {
  const int n = 2;
  Comms comms(n);
  std::vector<std::vector<uint8_t>> storage;
  auto ops = makeOps(comms, tribInt32, {3, -2}, tribScalarDevice, &storage);
  std::vector<std::vector<int32_t>> in = {{1, 2, 3}, {10, 20, 30}}, out(n, std::vector<int32_t>(3));
  auto run = [&] {
    std::vector<std::thread> t;
    for (int r = 0; r < n; ++r)
      t.emplace_back([&, r] {
        EXPECT_EQ(tribAllReduce(in[r].data(), out[r].data(), 3, tribInt32, ops[r], comms.c[r], nullptr),
                  tribSuccess)
            << lastError();
      });
    for (auto& th : t) th.join();
  };
  run();
  EXPECT_EQ(out[0], (std::vector<int32_t>{3 - 20, 6 - 40, 9 - 60}));
  // The scalar's memory is read again by the next call.
  int32_t five = 5;
  std::memcpy(storage[1].data(), &five, sizeof five);
  run();
  EXPECT_EQ(out[1], (std::vector<int32_t>{3 + 50, 6 + 100, 9 + 150}));
  for (int r = 0; r < n; ++r) EXPECT_EQ(tribRedOpDestroy(ops[r], comms.c[r]), tribSuccess);

  auto dops = makeOps(comms, tribFloat64, {0.25, 0.75}, tribScalarHostImmediate, &storage);
  std::memset(storage[0].data(), 0, storage[0].size());  // copied at creation: no effect
  std::vector<std::vector<double>> din = {{4.0, 8.0}, {4.0, -8.0}}, dout(n, std::vector<double>(2));
  std::vector<std::thread> t;
  for (int r = 0; r < n; ++r)
    t.emplace_back([&, r] {
      EXPECT_EQ(tribAllReduce(din[r].data(), dout[r].data(), 2, tribFloat64, dops[r], comms.c[r], nullptr),
                tribSuccess)
          << lastError();
    });
  for (auto& th : t) th.join();
  EXPECT_EQ(dout[0], (std::vector<double>{4.0, -4.0}));
}

TEST(PreMulSum, BadInput) {
  Comms comms(1);
  tribComm_t c = comms.c[0];
  float scalar = 2.0f, buf[4] = {1, 2, 3, 4};
  tribRedOp_t op;
  EXPECT_EQ(tribRedOpCreatePreMulSum(&op, nullptr, tribFloat32, tribScalarHostImmediate, c),
            tribInvalidArgument);
  EXPECT_NE(lastError().find("scalar is NULL"), std::string::npos) << lastError();
  EXPECT_EQ(tribRedOpCreatePreMulSum(nullptr, &scalar, tribFloat32, tribScalarHostImmediate, c),
            tribInvalidArgument);
  EXPECT_EQ(
      tribRedOpCreatePreMulSum(&op, &scalar, static_cast<tribDataType_t>(99), tribScalarHostImmediate, c),
      tribInvalidArgument);
  EXPECT_NE(lastError().find("unknown datatype 99"), std::string::npos) << lastError();
  EXPECT_EQ(tribRedOpCreatePreMulSum(&op, &scalar, tribFloat32, static_cast<tribScalarResidence_t>(7), c),
            tribInvalidArgument);
  EXPECT_NE(lastError().find("residence 7"), std::string::npos) << lastError();
  EXPECT_EQ(tribRedOpCreatePreMulSum(&op, &scalar, tribFloat32, tribScalarHostImmediate, nullptr),
            tribInvalidArgument);

  ASSERT_EQ(tribRedOpCreatePreMulSum(&op, &scalar, tribFloat32, tribScalarHostImmediate, c), tribSuccess);
  // For float32 only.
  double d[4] = {0};
  EXPECT_EQ(tribAllReduce(d, d, 4, tribFloat64, op, c, nullptr), tribInvalidArgument);
  EXPECT_NE(lastError().find("made for float32, but the call is on float64"), std::string::npos)
      << lastError();
  // Not an operator of another communicator.
  Comms other(1);
  EXPECT_EQ(tribAllReduce(buf, buf, 4, tribFloat32, op, other.c[0], nullptr), tribInvalidArgument);
  EXPECT_NE(lastError().find("unknown reduction operator"), std::string::npos) << lastError();
  EXPECT_EQ(tribRedOpDestroy(op, other.c[0]), tribInvalidArgument);
  // (Stream-ordered calls take it: test_stream_progress's PreMulSumScalesWhenTheStreamReachesTheCall.)
  // One rank: the scaled input.
  ASSERT_EQ(tribAllReduce(buf, buf, 4, tribFloat32, op, c, nullptr), tribSuccess) << lastError();
  EXPECT_EQ(buf[3], 8.0f);
  EXPECT_EQ(tribRedOpDestroy(tribSum, c), tribInvalidArgument);
  EXPECT_NE(lastError().find("built-in"), std::string::npos) << lastError();
  EXPECT_EQ(tribRedOpDestroy(op, c), tribSuccess);
  EXPECT_EQ(tribRedOpDestroy(op, c), tribInvalidArgument);
  EXPECT_NE(lastError().find("already destroyed"), std::string::npos) << lastError();
  EXPECT_EQ(tribAllReduce(buf, buf, 4, tribFloat32, op, c, nullptr), tribInvalidArgument);
}

}  // namespace

namespace {

// config.blocking = 0: init returns tribInProgress at once; the communicator is usable once
// tribCommGetAsyncError stops reporting tribInProgress. Rank 1 joins late, so rank 0's handle is
// seen in progress (and refuses calls) for a while.
TEST(NonBlockingInit, ReportsInProgressUntilJoined) {
  tribUniqueId id;
  ASSERT_EQ(tribGetUniqueId(&id), tribSuccess);
  tribConfig_t cfg = TRIB_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  std::string name = "nonblocking";
  cfg.commName = name.c_str();
  tribComm_t c0 = nullptr, c1 = nullptr;
  ASSERT_EQ(tribCommInitRankConfig(&c0, 2, id, 0, &cfg), tribInProgress) << lastError();
  ASSERT_NE(c0, nullptr);
  name = "overwritten";  // the join keeps its own copy of the config's strings
  tribResult_t state = tribSuccess;
  ASSERT_EQ(tribCommGetAsyncError(c0, &state), tribSuccess);
  EXPECT_EQ(state, tribInProgress);
  float x = 1.0f;
  EXPECT_EQ(tribAllReduce(&x, &x, 1, tribFloat32, tribSum, c0, nullptr), tribInProgress);
  EXPECT_NE(lastError().find("still being initialised"), std::string::npos) << lastError();
  int rank = -1;
  EXPECT_EQ(tribCommUserRank(c0, &rank), tribInProgress);
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ(tribCommInitRankConfig(&c1, 2, id, 1, &cfg), tribInProgress);
  });
  late.join();
  auto waitReady = [](tribComm_t c) {
    tribResult_t s = tribInProgress;
    for (int i = 0; i < 30000 && s == tribInProgress; ++i) {
      EXPECT_EQ(tribCommGetAsyncError(c, &s), tribSuccess);
      if (s == tribInProgress) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return s;
  };
  EXPECT_EQ(waitReady(c0), tribSuccess);
  EXPECT_EQ(waitReady(c1), tribSuccess);
  ASSERT_EQ(tribCommUserRank(c1, &rank), tribSuccess);
  EXPECT_EQ(rank, 1);
  float a = 1.0f, b = 2.0f;
  std::thread t([&] { EXPECT_EQ(tribAllReduce(&b, &b, 1, tribFloat32, tribSum, c1, nullptr), tribSuccess); });
  EXPECT_EQ(tribAllReduce(&a, &a, 1, tribFloat32, tribSum, c0, nullptr), tribSuccess) << lastError();
  t.join();
  EXPECT_EQ(a, 3.0f);
  EXPECT_EQ(b, 3.0f);
  EXPECT_EQ(tribCommDestroy(c0), tribSuccess);
  EXPECT_EQ(tribCommDestroy(c1), tribSuccess);
}

// A join that cannot complete (the other rank never comes) ends with the timeout's error; an abort
// meanwhile returns at once; destroy waits for the join.
TEST(NonBlockingInit, FailedJoinAndAbort) {
  tribUniqueId id;
  ASSERT_EQ(tribGetUniqueId(&id), tribSuccess);
  tribConfig_t cfg = TRIB_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  cfg.timeoutMs = 300;
  tribComm_t c = nullptr;
  ASSERT_EQ(tribCommInitRankConfig(&c, 2, id, 0, &cfg), tribInProgress);
  tribResult_t s = tribInProgress;
  const auto start = std::chrono::steady_clock::now();
  while (s == tribInProgress && std::chrono::steady_clock::now() - start < std::chrono::seconds(30)) {
    ASSERT_EQ(tribCommGetAsyncError(c, &s), tribSuccess);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_NE(s, tribInProgress);
  EXPECT_NE(s, tribSuccess);
  float x = 1.0f;
  EXPECT_EQ(tribAllReduce(&x, &x, 1, tribFloat32, tribSum, c, nullptr), s);
  EXPECT_NE(lastError().find("non-blocking init failed"), std::string::npos) << lastError();
  EXPECT_EQ(tribCommDestroy(c), tribSuccess);

  // An abort while the join waits for its peer: the abort returns at once and ends the join's
  // wait in the store, so the join fails with tribAborted and destroy does not wait out the
  // join's timeout. The timeout is long (60 s) so that either wait stands out from a descheduled
  // thread on a loaded machine (the bounds: 5 s).
  tribComm_t d = nullptr;
  cfg.timeoutMs = 60000;
  ASSERT_EQ(tribGetUniqueId(&id), tribSuccess);
  ASSERT_EQ(tribCommInitRankConfig(&d, 2, id, 0, &cfg), tribInProgress);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // let the join reach its wait (either way)
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(tribCommAbort(d), tribSuccess);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5)) << "abort waited for the join";
  s = tribInProgress;
  while (s == tribInProgress && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60)) {
    ASSERT_EQ(tribCommGetAsyncError(d, &s), tribSuccess);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(s, tribAborted);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5))
      << "the join ran on after the abort";
  EXPECT_EQ(tribAllReduce(&x, &x, 1, tribFloat32, tribSum, d, nullptr), tribAborted);
  EXPECT_NE(lastError().find("aborted (tribCommAbort) during its init"), std::string::npos) << lastError();
  EXPECT_EQ(tribCommDestroy(d), tribSuccess);
}

// The tribConfig_t versioning rule (tributary.h).
TEST(ConfigVersioning, MinimumSizeVersionAndNewerFields) {
  tribUniqueId id;
  ASSERT_EQ(tribGetUniqueId(&id), tribSuccess);
  tribComm_t c = nullptr;
  tribConfig_t cfg = TRIB_CONFIG_INITIALIZER;
  cfg.size = TRIB_CONFIG_MIN_SIZE - 1;
  EXPECT_EQ(tribCommInitRankConfig(&c, 1, id, 0, &cfg), tribInvalidArgument);
  EXPECT_NE(lastError().find("TRIB_CONFIG_INITIALIZER"), std::string::npos) << lastError();
  cfg = tribConfig_t TRIB_CONFIG_INITIALIZER;
  cfg.magic = 0;
  EXPECT_EQ(tribCommInitRankConfig(&c, 1, id, 0, &cfg), tribInvalidArgument);
  cfg = tribConfig_t TRIB_CONFIG_INITIALIZER;
  cfg.version = 7;
  EXPECT_EQ(tribCommInitRankConfig(&c, 1, id, 0, &cfg), tribInvalidArgument);
  EXPECT_NE(lastError().find("config.version 7"), std::string::npos) << lastError();
  cfg = tribConfig_t TRIB_CONFIG_INITIALIZER;
  cfg.blocking = 2;
  EXPECT_EQ(tribCommInitRankConfig(&c, 1, id, 0, &cfg), tribInvalidArgument);
  EXPECT_NE(lastError().find("config.blocking 2"), std::string::npos) << lastError();
  EXPECT_EQ(c, nullptr);
  // An older header's struct ends before shareTransports: the garbage past its size is not read.
  cfg = tribConfig_t TRIB_CONFIG_INITIALIZER;
  cfg.size = TRIB_CONFIG_MIN_SIZE;
  cfg.shareTransports = 12345;
  ASSERT_EQ(tribCommInitRankConfig(&c, 1, id, 0, &cfg), tribSuccess) << lastError();
  EXPECT_EQ(tribCommDestroy(c), tribSuccess);
  // A non-blocking init reads no more of an older, smaller struct than its size (ASan would see it).
  {
    tribConfig_t full = TRIB_CONFIG_INITIALIZER;
    full.size = TRIB_CONFIG_MIN_SIZE;
    full.blocking = 0;
    std::unique_ptr<uint8_t[]> old(new uint8_t[TRIB_CONFIG_MIN_SIZE]);
    std::memcpy(old.get(), &full, TRIB_CONFIG_MIN_SIZE);
    tribComm_t nb = nullptr;
    ASSERT_EQ(tribGetUniqueId(&id), tribSuccess);
    ASSERT_EQ(tribCommInitRankConfig(&nb, 1, id, 0, reinterpret_cast<const tribConfig_t*>(old.get())),
              tribInProgress)
        << lastError();
    tribResult_t st = tribInProgress;
    for (int i = 0; i < 10000 && st == tribInProgress; ++i) {
      ASSERT_EQ(tribCommGetAsyncError(nb, &st), tribSuccess);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_EQ(st, tribSuccess) << lastError();
    EXPECT_EQ(tribCommDestroy(nb), tribSuccess);
  }
  // ... and the same value in a current struct is refused, so the size is what decided.
  cfg.size = sizeof(tribConfig_t);
  ASSERT_EQ(tribGetUniqueId(&id), tribSuccess);
  EXPECT_EQ(tribCommInitRankConfig(&c, 1, id, 0, &cfg), tribInvalidArgument);
  EXPECT_NE(lastError().find("shareTransports"), std::string::npos) << lastError();
}

}  // namespace

namespace {

TEST(CxxApi, AlltoAllRefusesSizesNotDivisibleByRanks) {
  auto comms = tributary::Communicator::createLocal(3);
  std::vector<float> send(10, 1.0f), recv(10, 0.0f);
  try {
    comms[0].alltoAll<float>(send, recv);
    FAIL() << "alltoAll of 10 elements over 3 ranks was accepted";
  } catch (const tributary::Error& e) {
    EXPECT_EQ(e.code(), tribInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("10 elements do not divide into equal blocks for 3 ranks"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(recv[0], 0.0f);
  // Divisible sizes run (each rank from its own thread).
  std::vector<std::vector<int32_t>> in(3), out(3, std::vector<int32_t>(6));
  for (int r = 0; r < 3; ++r)
    for (int i = 0; i < 6; ++i) in[r].push_back(r * 10 + i);
  std::vector<std::thread> t;
  for (int r = 0; r < 3; ++r) t.emplace_back([&, r] { comms[r].alltoAll<int32_t>(in[r], out[r]); });
  for (auto& th : t) th.join();
  EXPECT_EQ(out[1], (std::vector<int32_t>{2, 3, 12, 13, 22, 23}));
}

// A Request destroyed while its peer never comes: a warning after a second, not a silent wait for
// the whole timeout.
TEST(CxxApi, RequestDestructorSaysWhenItWaits) {
  std::vector<tribComm_t> c = commsWithTimeout(2, 2500);
  tributary::Communicator c0(c[0]), c1(c[1]);
  std::vector<float> a(4, 1.0f), b(4, 0.0f);
  testing::internal::CaptureStderr();
  const auto start = std::chrono::steady_clock::now();
  { tributary::Request r = c0.iallReduce<float>(a, b); }  // rank 1 never joins
  const auto waited = std::chrono::steady_clock::now() - start;
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("tributary::Request destroyed while its operation is still running"), std::string::npos)
      << err;
  EXPECT_GE(waited, std::chrono::milliseconds(900));
  EXPECT_LT(waited, std::chrono::seconds(20));
  tribResult_t s = tribSuccess;
  ASSERT_EQ(tribCommGetAsyncError(c[0], &s), tribSuccess);
  EXPECT_NE(s, tribSuccess) << "the communicator's timeout broke it";
}

}  // namespace

namespace {

// Ranks 0, 1 and 3 of 4 (threads) make a communicator without rank 2, which never calls anything.
TEST(CommShrink, ThreadsWithoutAnAbsentRank) {
  Comms comms(4);
  const int exclude[] = {2};
  std::vector<tribComm_t> sub(4, nullptr);
  std::vector<std::thread> t;
  for (int r : {0, 1, 3})
    t.emplace_back([&, r] {
      EXPECT_EQ(tribCommShrink(comms.c[r], exclude, 1, &sub[r], nullptr, TRIB_SHRINK_DEFAULT), tribSuccess)
          << lastError();
    });
  for (auto& th : t) th.join();
  t.clear();
  std::vector<int> ranks(4, -1);
  for (int r : {0, 1, 3}) {
    ASSERT_NE(sub[r], nullptr);
    int n = 0;
    EXPECT_EQ(tribCommCount(sub[r], &n), tribSuccess);
    EXPECT_EQ(n, 3);
    EXPECT_EQ(tribCommUserRank(sub[r], &ranks[r]), tribSuccess);
  }
  EXPECT_EQ(ranks[0], 0);
  EXPECT_EQ(ranks[1], 1);
  EXPECT_EQ(ranks[3], 2);
  std::vector<float> v(4);
  for (int r : {0, 1, 3})
    t.emplace_back([&, r] {
      v[r] = static_cast<float>(r);
      EXPECT_EQ(tribAllReduce(&v[r], &v[r], 1, tribFloat32, tribSum, sub[r], nullptr), tribSuccess)
          << lastError();
    });
  for (auto& th : t) th.join();
  EXPECT_EQ(v[0], 4.0f);
  EXPECT_EQ(v[3], 4.0f);
  for (int r : {0, 1, 3}) EXPECT_EQ(tribCommDestroy(sub[r]), tribSuccess);
}

TEST(CommShrink, BadInput) {
  Comms comms(3);
  tribComm_t c = comms.c[0], out = nullptr;
  const int self[] = {0}, twice[] = {1, 1}, range[] = {5}, all[] = {1, 2};
  EXPECT_EQ(tribCommShrink(c, self, 1, &out, nullptr, 0), tribInvalidArgument);
  EXPECT_NE(lastError().find("excludes itself"), std::string::npos) << lastError();
  EXPECT_EQ(tribCommShrink(c, twice, 2, &out, nullptr, 0), tribInvalidArgument);
  EXPECT_NE(lastError().find("excluded twice"), std::string::npos) << lastError();
  EXPECT_EQ(tribCommShrink(c, range, 1, &out, nullptr, 0), tribInvalidArgument);
  EXPECT_NE(lastError().find("out of range"), std::string::npos) << lastError();
  EXPECT_EQ(tribCommShrink(c, nullptr, 1, &out, nullptr, 0), tribInvalidArgument);
  EXPECT_EQ(tribCommShrink(c, all, 3, &out, nullptr, 0), tribInvalidArgument);
  EXPECT_EQ(tribCommShrink(c, all, 1, &out, nullptr, 7), tribInvalidArgument);
  EXPECT_NE(lastError().find("flags 7"), std::string::npos) << lastError();
  EXPECT_EQ(tribCommShrink(c, all, 1, nullptr, nullptr, 0), tribInvalidArgument);
  EXPECT_EQ(out, nullptr);
  // Every other rank excluded: a communicator of one.
  ASSERT_EQ(tribCommShrink(c, all, 2, &out, nullptr, TRIB_SHRINK_ABORT), tribSuccess) << lastError();
  int n = 0;
  EXPECT_EQ(tribCommCount(out, &n), tribSuccess);
  EXPECT_EQ(n, 1);
  float x = 2.0f;
  EXPECT_EQ(tribAllReduce(&x, &x, 1, tribFloat32, tribSum, out, nullptr), tribSuccess);
  EXPECT_EQ(tribCommDestroy(out), tribSuccess);
  // TRIB_SHRINK_ABORT aborted the parent.
  EXPECT_EQ(tribAllReduce(&x, &x, 1, tribFloat32, tribSum, c, nullptr), tribAborted);
}

// Processes: rank 2 dies; the others see the failure on their communicator, shrink without it,
// and go on.
TEST(CommShrink, ProcessesAfterARankDied) {
  tribUniqueId id;
  ASSERT_EQ(tribGetUniqueId(&id), tribSuccess);
  auto pids = trib::testing::forkChildren(3, 60, [&](int r) {
    tribConfig_t cfg = TRIB_CONFIG_INITIALIZER;
    cfg.timeoutMs = 3000;
    tribComm_t c = nullptr;
    if (tribCommInitRankConfig(&c, 3, id, r, &cfg) != tribSuccess) return 1;
    if (r == 2) _exit(0);  // dies without a word
    float x = 1.0f;
    if (tribAllReduce(&x, &x, 1, tribFloat32, tribSum, c, nullptr) == tribSuccess) return 2;
    const int dead[] = {2};
    tribComm_t s = nullptr;
    if (tribCommShrink(c, dead, 1, &s, nullptr, TRIB_SHRINK_ABORT) != tribSuccess) {
      std::fprintf(stderr, "rank %d shrink: %s\n", r, tribGetLastError(nullptr));
      return 3;
    }
    float y = static_cast<float>(r + 1);
    if (tribAllReduce(&y, &y, 1, tribFloat32, tribSum, s, nullptr) != tribSuccess) {
      std::fprintf(stderr, "rank %d allreduce: %s\n", r, tribGetLastError(nullptr));
      return 4;
    }
    if (y != 3.0f) return 5;
    tribCommDestroy(s);
    tribCommAbort(c);
    tribCommDestroy(c);
    return 0;
  });
  for (const auto& res : trib::testing::waitChildren(pids, 60)) EXPECT_EQ(res.code, 0) << "pid " << res.pid;
}

}  // namespace

namespace {

// The thread-safety contract (tributary.h): different communicators from different threads at
// once, while a third thread polls tribCommGetAsyncError on all of them.
TEST(ThreadSafety, DifferentCommunicatorsConcurrently) {
  Comms a(2), b(2);
  std::vector<tribComm_t> all = {a.c[0], a.c[1], b.c[0], b.c[1]};
  std::atomic<bool> stop{false};
  std::atomic<int> badAsync{0};
  std::thread poller([&] {
    while (!stop.load()) {
      for (tribComm_t c : all) {
        tribResult_t s = tribInternalError;
        if (tribCommGetAsyncError(c, &s) != tribSuccess || s != tribSuccess) badAsync.fetch_add(1);
      }
      std::this_thread::yield();
    }
  });
  std::vector<int> wrong(4, 0);
  std::vector<std::thread> t;
  for (int i = 0; i < 4; ++i)
    t.emplace_back([&, i] {
      std::vector<int32_t> v(257);
      for (int iter = 0; iter < 100; ++iter) {
        for (size_t k = 0; k < v.size(); ++k) v[k] = i * 1000 + iter + static_cast<int32_t>(k);
        if (tribAllReduce(v.data(), v.data(), v.size(), tribInt32, tribSum, all[i], nullptr) != tribSuccess) {
          ++wrong[i];
          return;
        }
        const int peer = i ^ 1;  // ranks 0/1 of a, 2/3 of b
        for (size_t k = 0; k < v.size(); ++k)
          if (v[k] != (i + peer) * 1000 + 2 * (iter + static_cast<int32_t>(k))) ++wrong[i];
      }
    });
  for (auto& th : t) th.join();
  stop.store(true);
  poller.join();
  EXPECT_EQ(wrong, (std::vector<int>{0, 0, 0, 0}));
  EXPECT_EQ(badAsync.load(), 0);
}

// tribCommAbort from another thread releases a call blocked on the communicator long before its
// timeout, and tribCommGetAsyncError from a third thread then reports the abort.
TEST(ThreadSafety, AbortFromAnotherThreadReleasesABlockedCall) {
  std::vector<tribComm_t> c = commsWithTimeout(2, 60000);
  tribResult_t blocked = tribSuccess;
  const auto start = std::chrono::steady_clock::now();
  std::thread caller([&] {
    float x = 1.0f;  // rank 1 never joins: blocks until aborted
    blocked = tribAllReduce(&x, &x, 1, tribFloat32, tribSum, c[0], nullptr);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  tribResult_t s = tribInternalError;
  std::thread observer([&] { EXPECT_EQ(tribCommGetAsyncError(c[0], &s), tribSuccess); });
  observer.join();
  EXPECT_EQ(s, tribSuccess) << "not broken while the call waits";
  std::thread aborter([&] { EXPECT_EQ(tribCommAbort(c[0]), tribSuccess); });
  aborter.join();
  caller.join();
  EXPECT_EQ(blocked, tribAborted);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  std::thread observer2([&] { EXPECT_EQ(tribCommGetAsyncError(c[0], &s), tribSuccess); });
  observer2.join();
  EXPECT_EQ(s, tribAborted);
  EXPECT_EQ(tribCommDestroy(c[0]), tribSuccess);
  EXPECT_EQ(tribCommDestroy(c[1]), tribSuccess);
}

}  // namespace
