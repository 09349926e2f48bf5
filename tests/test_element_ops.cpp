// The shared element arithmetic (reduce/element_ops.hpp: what the CUDA kernels run) against the CPU
// reducer on every instruction set it dispatches, bit for bit, for every dtype x op with edge values
// (NaN payloads, infinities, signed zeros, subnormals, fp8 saturation, integer extremes), and the
// avg division.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/dtype.hpp"
#include "reduce/element_ops.hpp"
#include "reduce/reduce.hpp"
#include "reduce/reduce_internal.hpp"
#include "reduce_util.hpp"

namespace trib {
namespace {

// Every ordered pair of the dtype's edge values as two arrays (a[i], b[i]).
void pairs(DataType dt, std::vector<uint8_t>* a, std::vector<uint8_t>* b) {
  const std::vector<uint8_t> e = edgeValues(dt);
  const size_t sz = dataTypeSize(dt), n = e.size() / sz;
  a->clear();
  b->clear();
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j) {
      a->insert(a->end(), e.begin() + i * sz, e.begin() + (i + 1) * sz);
      b->insert(b->end(), e.begin() + j * sz, e.begin() + (j + 1) * sz);
    }
}

// The shared functions, one element at a time (the reduceLoop of the scalar path is bypassed).
std::vector<uint8_t> sharedReduce(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, DataType dt,
                                  RedOp op) {
  std::vector<uint8_t> out(a.size());
  const size_t sz = dataTypeSize(dt);
  EXPECT_TRUE(elem::withElement(dt, [&](auto e) {
    using E = decltype(e);
    using T = typename E::Storage;
    elem::withOp(elem::opOf(op), [&](auto tag) {
      for (size_t i = 0; i < a.size() / sz; ++i) {
        T x, y;
        std::memcpy(&x, &a[i * sz], sz);
        std::memcpy(&y, &b[i * sz], sz);
        const T r = E::template combine<decltype(tag)::value>(x, y);
        std::memcpy(&out[i * sz], &r, sz);
      }
    });
  }));
  return out;
}

std::string hexElem(const uint8_t* p, size_t sz) {
  uint64_t v = 0;
  std::memcpy(&v, p, sz);
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

TEST(ElementOps, EveryDtypeOpAndIsaMatchesTheCpuReducerBitForBit) {
  for (int t = 0; t < tribNumTypes; ++t) {
    const DataType dt = static_cast<DataType>(t);
    const size_t sz = dataTypeSize(dt);
    std::vector<uint8_t> a, b;
    pairs(dt, &a, &b);
    ASSERT_GT(a.size(), 0u);
    for (int o = 0; o < tribNumOps; ++o) {
      const RedOp op = static_cast<RedOp>(o);
      const std::vector<uint8_t> want = sharedReduce(a, b, dt, op);
      for (const std::string& isa : reduceAvailableIsas()) {
        IsaScope scope(isa);
        std::vector<uint8_t> got(a.size());
        reduce(got.data(), a.data(), b.data(), a.size() / sz, dt, op);
        for (size_t i = 0; i < a.size() / sz; ++i)
          ASSERT_EQ(0, std::memcmp(&got[i * sz], &want[i * sz], sz))
              << dataTypeName(dt) << " " << redOpName(op) << " isa=" << isa << ": " << hexElem(&a[i * sz], sz)
              << " op " << hexElem(&b[i * sz], sz) << " -> reducer " << hexElem(&got[i * sz], sz)
              << ", shared " << hexElem(&want[i * sz], sz);
      }
    }
  }
}

TEST(ElementOps, AvgDivisionMatchesTheCpuReducerBitForBit) {
  const uint64_t divisors[] = {2, 3, 7, 1000, (uint64_t{1} << 32) + 1, uint64_t{1} << 63, ~uint64_t{0}};
  for (int t = 0; t < tribNumTypes; ++t) {
    const DataType dt = static_cast<DataType>(t);
    const size_t sz = dataTypeSize(dt);
    const std::vector<uint8_t> values = edgeValues(dt);
    const size_t n = values.size() / sz;
    for (uint64_t d : divisors) {
      std::vector<uint8_t> want(values.size());
      elem::withElement(dt, [&](auto e) {
        using E = decltype(e);
        using T = typename E::Storage;
        for (size_t i = 0; i < n; ++i) {
          T x;
          std::memcpy(&x, &values[i * sz], sz);
          x = E::divide(x, d);
          std::memcpy(&want[i * sz], &x, sz);
        }
      });
      for (const std::string& isa : reduceAvailableIsas()) {
        IsaScope scope(isa);
        std::vector<uint8_t> got = values;
        avgFinalize(got.data(), n, dt, d);
        for (size_t i = 0; i < n; ++i)
          ASSERT_EQ(0, std::memcmp(&got[i * sz], &want[i * sz], sz))
              << dataTypeName(dt) << " / " << d << " isa=" << isa << ": " << hexElem(&values[i * sz], sz)
              << " -> reducer " << hexElem(&got[i * sz], sz) << ", shared " << hexElem(&want[i * sz], sz);
      }
    }
  }
}

// The documented edge semantics, stated on the shared functions themselves.
TEST(ElementOps, DocumentedEdgeSemantics) {
  using elem::Element;
  using elem::Op;
  using F32 = Element<tribFloat32>;
  const float negZero = bitsToFloat(0x80000000u), sNan = bitsToFloat(0x7f800001u),
              qNan = bitsToFloat(0xffc00002u);
  EXPECT_EQ(floatToBits(F32::combine<Op::kSum>(negZero, negZero)), 0x80000000u) << "-0 + -0 = -0";
  EXPECT_EQ(floatToBits(F32::combine<Op::kSum>(negZero, 0.0f)), 0u) << "-0 + +0 = +0";
  EXPECT_EQ(floatToBits(F32::combine<Op::kMin>(0.0f, negZero)), 0x80000000u) << "min(+0, -0) = -0";
  EXPECT_EQ(floatToBits(F32::combine<Op::kMax>(negZero, 0.0f)), 0u) << "max(-0, +0) = +0";
  EXPECT_EQ(floatToBits(F32::combine<Op::kSum>(sNan, 1.0f)), 0x7fc00001u) << "a's NaN, quietened";
  EXPECT_EQ(floatToBits(F32::combine<Op::kProd>(2.0f, qNan)), 0xffc00002u) << "b's NaN when only b is";
  EXPECT_EQ(floatToBits(F32::combine<Op::kSum>(qNan, sNan)), 0xffc00002u) << "a's NaN when both are";
  EXPECT_EQ(floatToBits(F32::combine<Op::kMin>(sNan, 1.0f)), 0x7f800001u) << "min/max pass the NaN as it is";
  EXPECT_EQ(floatToBits(F32::divide(sNan, 3)), 0x7fc00001u);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(floatToBits(F32::combine<Op::kSum>(inf, -inf)), 0xffc00000u) << "inf - inf: the default NaN";
  EXPECT_EQ(floatToBits(F32::combine<Op::kProd>(0.0f, inf)), 0xffc00000u) << "0 * inf: the default NaN";
  const double dnan = Element<tribFloat64>::combine<Op::kSum>(-INFINITY, INFINITY);
  uint64_t dbits;
  std::memcpy(&dbits, &dnan, 8);
  EXPECT_EQ(dbits, 0xfff8000000000000ull) << "float64 too";
  EXPECT_EQ(F32::combine<Op::kSum>(bitsToFloat(1), bitsToFloat(1)), bitsToFloat(2)) << "subnormals kept";

  using E4 = Element<tribFp8E4M3>;  // 0x7e = 448, the largest finite; 0x7f = NaN; no infinity
  EXPECT_EQ(E4::combine<Op::kSum>(0x7e, 0x7e), 0x7e) << "E4M3 saturates to 448";
  EXPECT_EQ(E4::combine<Op::kProd>(0xfe, 0x7e), 0xfe) << "and to -448";
  EXPECT_EQ(E4::combine<Op::kSum>(0xff, 0x38), 0xff) << "NaN keeps its sign";
  EXPECT_EQ(E4::combine<Op::kSum>(0x80, 0x80), 0x80) << "-0 + -0 = -0";
  using E5 = Element<tribFp8E5M2>;  // 0x7b = 57344, the largest finite; 0x7c = inf
  EXPECT_EQ(E5::combine<Op::kSum>(0x7b, 0x7b), 0x7c) << "E5M2 overflows to inf";
  EXPECT_EQ(E5::combine<Op::kSum>(0x7c, 0xfc), 0xfe) << "inf - inf = the default NaN (negative)";
  using H = Element<tribFloat16>;
  EXPECT_EQ(H::combine<Op::kSum>(0x7bff, 0x7bff), 0x7c00) << "half overflows to inf";
  EXPECT_EQ(H::combine<Op::kSum>(0x0001, 0x8001), 0x0000) << "smallest subnormals cancel to +0";
  EXPECT_EQ(H::combine<Op::kSum>(0x3c00, 0x0001), 0x3c00) << "1 + 2^-24 rounds to 1";
  using B = Element<tribBfloat16>;
  EXPECT_EQ(B::combine<Op::kSum>(0x3f80, 0x3b80), 0x3f80) << "1 + 2^-8: a tie, to even";
  EXPECT_EQ(B::combine<Op::kSum>(0x3f81, 0x3b80), 0x3f82) << "1+2^-7 + 2^-8: a tie, to even (up)";

  using I8 = Element<tribInt8>;
  EXPECT_EQ(I8::combine<Op::kSum>(0x7f, 0x01), 0x80) << "int8 sum wraps";
  EXPECT_EQ(I8::combine<Op::kMin>(0x80, 0x7f), 0x80) << "int8 min is signed";
  EXPECT_EQ(Element<tribUint8>::combine<Op::kMin>(0x80, 0x7f), 0x7f) << "uint8 min is unsigned";
  EXPECT_EQ(I8::divide(0xf9, 2), 0xfd) << "-7 / 2 = -3: toward zero";
  using I64 = Element<tribInt64>;
  EXPECT_EQ(I64::divide(uint64_t{1} << 63, uint64_t{1} << 63), ~uint64_t{0}) << "INT64_MIN / 2^63 = -1";
  EXPECT_EQ(I64::divide(uint64_t{1} << 63, ~uint64_t{0}), 0u);
}

}  // namespace
}  // namespace trib
