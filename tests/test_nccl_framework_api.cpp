// The C API pieces frameworks and the NCCL-compatible library rely on (issue 15, part 3):
// pre-multiplied sums on every reduction collective, with their bad input.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tributary/tributary.h"

namespace {

std::string lastError() { return tribGetLastError(nullptr); }

struct Comms {
  explicit Comms(int n) : c(n) {
    EXPECT_EQ(tribCommInitAll(c.data(), n, nullptr), tribSuccess) << lastError();
  }
  ~Comms() {
    for (tribComm_t x : c) EXPECT_EQ(tribCommDestroy(x), tribSuccess) << lastError();
  }
  std::vector<tribComm_t> c;
};

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
  // Stream-ordered calls do not take it yet (refused before anything is enqueued).
  int fakeStream = 0;
  EXPECT_EQ(tribAllReduce(buf, buf, 4, tribFloat32, op, c, &fakeStream), tribNotSupported);
  EXPECT_NE(lastError().find("not supported stream-ordered"), std::string::npos) << lastError();
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
