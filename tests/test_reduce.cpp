// Tests of the exact float conversions and the CPU reduction kernels, against references written
// here independently (double arithmetic with explicit round-to-nearest-even), on every ISA the
// machine runs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cfenv>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/dtype.hpp"
#include "reduce/reduce.hpp"
#include "reduce/reduce_internal.hpp"
#include "reduce_util.hpp"

namespace trib {
namespace {

// ---------------------------------------------------------------------------------------------
// Independent reference for the small float formats.

struct Format {
  const char* name;
  int e, m;
  bool finiteOnly;  // OCP E4M3: no inf, only S.1111.111 is NaN, saturating
  int bits() const { return 1 + e + m; }
  int bias() const { return (1 << (e - 1)) - 1; }
  uint32_t expMax() const { return (1u << e) - 1; }
  uint32_t mantMax() const { return (1u << m) - 1; }
  uint32_t maxCode() const {
    return finiteOnly ? (expMax() << m) | (mantMax() - 1) : ((expMax() - 1) << m) | mantMax();
  }
  uint32_t signBit() const { return 1u << (e + m); }
};
const Format kHalf{"float16", 5, 10, false};
const Format kBf16{"bfloat16", 8, 7, false};
const Format kE4M3{"fp8e4m3", 4, 3, true};
const Format kE5M2{"fp8e5m2", 5, 2, false};

double refDecode(const Format& f, uint32_t code) {
  const bool neg = (code & f.signBit()) != 0;
  const uint32_t e = (code >> f.m) & f.expMax(), m = code & f.mantMax();
  double v;
  if (!f.finiteOnly && e == f.expMax())
    v = m == 0 ? INFINITY : NAN;
  else if (f.finiteOnly && e == f.expMax() && m == f.mantMax())
    v = NAN;
  else if (e == 0)
    v = std::ldexp(static_cast<double>(m), 1 - f.bias() - f.m);
  else
    v = std::ldexp(static_cast<double>(m + (1u << f.m)), static_cast<int>(e) - f.bias() - f.m);
  return neg ? -v : v;
}

// Nearest representable value, ties to even (nearbyint in the default rounding mode); overflow
// goes to inf, or saturates to the largest finite value for finite-only formats. NaN input: the
// caller checks NaN-ness separately.
uint32_t refEncode(const Format& f, double x) {
  const uint32_t sign = std::signbit(x) ? f.signBit() : 0;
  const double a = std::fabs(x);
  const double maxFinite = refDecode(f, f.maxCode());
  const uint32_t overflow = f.finiteOnly ? f.maxCode() : f.expMax() << f.m;
  if (std::isinf(a)) return sign | overflow;
  if (a == 0) return sign;
  const int eMin = 1 - f.bias();
  const int e = std::max(std::ilogb(a), eMin);
  const double quantum = std::ldexp(1.0, e - f.m);
  const double v = std::nearbyint(a / quantum) * quantum;
  if (v > maxFinite) return sign | overflow;
  if (v < std::ldexp(1.0, eMin)) return sign | static_cast<uint32_t>(v / std::ldexp(1.0, eMin - f.m));
  const int e2 = std::ilogb(v);
  const uint32_t mant = static_cast<uint32_t>(v / std::ldexp(1.0, e2 - f.m)) - (1u << f.m);
  return sign | (static_cast<uint32_t>(e2 + f.bias()) << f.m) | mant;
}

float apiWiden(const Format& f, uint32_t code) {
  if (&f == &kHalf) return halfToFloat(static_cast<uint16_t>(code));
  if (&f == &kBf16) return bf16ToFloat(static_cast<uint16_t>(code));
  if (&f == &kE4M3) return fp8e4m3ToFloat(static_cast<uint8_t>(code));
  return fp8e5m2ToFloat(static_cast<uint8_t>(code));
}
uint32_t apiNarrow(const Format& f, float x) {
  if (&f == &kHalf) return floatToHalf(x);
  if (&f == &kBf16) return floatToBf16(x);
  if (&f == &kE4M3) return floatToFp8e4m3(x);
  return floatToFp8e5m2(x);
}
bool codeIsNan(const Format& f, uint32_t code) { return std::isnan(refDecode(f, code)); }

// Checks narrow(x) against the reference; NaN must stay NaN with its sign.
void expectNarrow(const Format& f, float x) {
  const uint32_t got = apiNarrow(f, x);
  if (std::isnan(x)) {
    ASSERT_TRUE(codeIsNan(f, got)) << f.name << " NaN input " << std::hex << floatToBits(x) << " gave "
                                   << got;
    ASSERT_EQ((got & f.signBit()) != 0, std::signbit(x)) << f.name << " NaN sign";
    return;
  }
  const uint32_t want = refEncode(f, x);
  ASSERT_EQ(got, want) << f.name << " narrowing float bits 0x" << std::hex << floatToBits(x) << " (" << x
                       << ")";
}

class ConvertTest : public ::testing::TestWithParam<const Format*> {};

TEST_P(ConvertTest, EveryCodeWidensExactlyAndRoundTrips) {
  const Format& f = *GetParam();
  for (uint32_t code = 0; code < (1u << f.bits()); ++code) {
    const double want = refDecode(f, code);
    const float got = apiWiden(f, code);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << f.name << " code 0x" << std::hex << code;
      ASSERT_EQ(std::signbit(got), (code & f.signBit()) != 0)
          << f.name << " NaN sign, code 0x" << std::hex << code;
      // bf16 widens by a shift (like hardware), keeping a signalling NaN; the others quieten.
      if (&f != &kBf16) {
        ASSERT_NE(floatToBits(got) & 0x400000u, 0u) << "widened NaN must be quiet";
      }
      // Back to the format: still NaN, same sign (IEEE-like formats keep the payload, quietened).
      const uint32_t back = apiNarrow(f, got);
      ASSERT_TRUE(codeIsNan(f, back));
      if (!f.finiteOnly)
        ASSERT_EQ(back, code | (1u << (f.m - 1))) << f.name << " code 0x" << std::hex << code;
      else
        ASSERT_EQ(back, code);
      continue;
    }
    ASSERT_EQ(static_cast<double>(got), want) << f.name << " code 0x" << std::hex << code;
    ASSERT_EQ(std::signbit(got), std::signbit(want)) << f.name << " code 0x" << std::hex << code;
    ASSERT_EQ(apiNarrow(f, got), code) << f.name << " round trip of code 0x" << std::hex << code;
  }
}

// Midpoints between neighbours are where rounding is decided: test each one, one float ulp on
// either side, both signs, and the region past the largest finite value.
TEST_P(ConvertTest, EveryMidpointRoundsToNearestEven) {
  const Format& f = *GetParam();
  for (uint32_t code = 0; code <= f.maxCode(); ++code) {
    const double lo = refDecode(f, code);
    const double hi = code < f.maxCode() ? refDecode(f, code + 1) : 2 * lo - refDecode(f, code - 1);
    const float mid = static_cast<float>((lo + hi) / 2);
    ASSERT_EQ(static_cast<double>(mid), (lo + hi) / 2) << "midpoint must be exact in float";
    for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
      expectNarrow(f, x);
      expectNarrow(f, -x);
    }
  }
  for (float x : {65504.0f, 65519.0f, 65520.0f, 448.0f, 464.0f, 465.0f, 1e6f, 57344.0f, 61440.0f, 3.4e38f,
                  INFINITY, -INFINITY, 0.0f, -0.0f, 1e-45f, -1e-45f, 1.17549435e-38f})
    expectNarrow(f, x);
}

// A sweep over the whole float range (every exponent, varied mantissas, NaNs included).
TEST_P(ConvertTest, FloatSweepMatchesReference) {
  const Format& f = *GetParam();
  for (uint32_t i = 0; i < (1u << 24); ++i) {
    const uint32_t bits = (i << 8) | ((i * 2654435761u) >> 24);
    expectNarrow(f, bitsToFloat(bits));
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, ConvertTest, ::testing::Values(&kHalf, &kBf16, &kE4M3, &kE5M2),
                         [](const auto& info) { return std::string(info.param->name); });

TEST(Convert, DocumentedSpecialValues) {
  EXPECT_EQ(floatToFp8e4m3(448.0f), 0x7e);
  EXPECT_EQ(floatToFp8e4m3(1e9f), 0x7e) << "E4M3 saturates";
  EXPECT_EQ(floatToFp8e4m3(-INFINITY), 0xfe) << "E4M3 has no inf; saturates";
  EXPECT_EQ(floatToFp8e4m3(NAN), 0x7f);
  EXPECT_EQ(floatToFp8e4m3(-NAN), 0xff);
  EXPECT_EQ(fp8e4m3ToFloat(0x7e), 448.0f);
  EXPECT_EQ(fp8e4m3ToFloat(0x01), std::ldexp(1.0f, -9));
  EXPECT_TRUE(std::isnan(fp8e4m3ToFloat(0x7f)));
  EXPECT_EQ(fp8e4m3ToFloat(0x78), 256.0f) << "the top exponent is normal in E4M3";
  EXPECT_EQ(floatToFp8e5m2(57344.0f), 0x7b);
  EXPECT_EQ(floatToFp8e5m2(1e9f), 0x7c) << "E5M2 overflows to inf";
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00) << "tie at the top rounds to even = inf";
  EXPECT_EQ(floatToHalf(65519.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(bitsToFloat(0x7f800001)), 0x7e00) << "signalling NaN comes back quiet";
  EXPECT_EQ(floatToBf16(bitsToFloat(0xff800001)), 0xffc0);
  EXPECT_EQ(floatToBf16(bitsToFloat(0x3f808000)), 0x3f80) << "tie to even (down)";
  EXPECT_EQ(floatToBf16(bitsToFloat(0x3f818000)), 0x3f82) << "tie to even (up)";
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -25)), 0x0000) << "half the smallest subnormal ties to 0";
  EXPECT_EQ(floatToHalf(std::ldexp(1.5f, -25)), 0x0001);
}

// ---------------------------------------------------------------------------------------------
// Reference reduction, element by element, written without the library's kernels.

const Format* smallFormat(DataType t) {
  switch (t) {
    case tribFloat16:
      return &kHalf;
    case tribBfloat16:
      return &kBf16;
    case tribFp8E4M3:
      return &kE4M3;
    case tribFp8E5M2:
      return &kE5M2;
    default:
      return nullptr;
  }
}

template <class T>
T refFloatOp(T a, T b, RedOp op) {
  switch (op) {
    case tribProd:
      return a * b;
    case tribMin:
    case tribMax: {
      if (std::isnan(a)) return a;
      if (std::isnan(b)) return b;
      if (a == b) return (std::signbit(a) == (op == tribMin)) ? a : b;  // -0 < +0
      return (a < b) == (op == tribMin) ? a : b;
    }
    default:
      return a + b;
  }
}

template <class T>
T refIntOp(T a, T b, RedOp op) {
  using U = std::make_unsigned_t<T>;
  switch (op) {
    case tribProd:
      return static_cast<T>(static_cast<uint64_t>(static_cast<U>(a)) * static_cast<U>(b));
    case tribMin:
      return a < b ? a : b;
    case tribMax:
      return a > b ? a : b;
    default:
      return static_cast<T>(static_cast<uint64_t>(static_cast<U>(a)) + static_cast<U>(b));
  }
}

template <class T>
T loadAt(const std::vector<uint8_t>& v, size_t i) {
  T x;
  std::memcpy(&x, v.data() + i * sizeof(T), sizeof(T));
  return x;
}
template <class T>
void storeAt(std::vector<uint8_t>& v, size_t i, T x) {
  std::memcpy(v.data() + i * sizeof(T), &x, sizeof(T));
}

template <class T>
void refIntLoop(std::vector<uint8_t>& d, const std::vector<uint8_t>& a, const std::vector<uint8_t>& b,
                size_t n, RedOp op) {
  for (size_t i = 0; i < n; ++i) storeAt<T>(d, i, refIntOp<T>(loadAt<T>(a, i), loadAt<T>(b, i), op));
}

std::vector<uint8_t> refReduce(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, size_t n,
                               DataType t, RedOp op) {
  std::vector<uint8_t> d(n * dataTypeSize(t));
  switch (t) {
    case tribInt8:
      refIntLoop<int8_t>(d, a, b, n, op);
      break;
    case tribUint8:
      refIntLoop<uint8_t>(d, a, b, n, op);
      break;
    case tribInt32:
      refIntLoop<int32_t>(d, a, b, n, op);
      break;
    case tribUint32:
      refIntLoop<uint32_t>(d, a, b, n, op);
      break;
    case tribInt64:
      refIntLoop<int64_t>(d, a, b, n, op);
      break;
    case tribUint64:
      refIntLoop<uint64_t>(d, a, b, n, op);
      break;
    case tribFloat32:
      for (size_t i = 0; i < n; ++i)
        storeAt<float>(d, i, refFloatOp(loadAt<float>(a, i), loadAt<float>(b, i), op));
      break;
    case tribFloat64:
      for (size_t i = 0; i < n; ++i)
        storeAt<double>(d, i, refFloatOp(loadAt<double>(a, i), loadAt<double>(b, i), op));
      break;
    default: {
      const Format& f = *smallFormat(t);
      const size_t sz = dataTypeSize(t);
      for (size_t i = 0; i < n; ++i) {
        uint32_t ca = 0, cb = 0;
        std::memcpy(&ca, a.data() + i * sz, sz);
        std::memcpy(&cb, b.data() + i * sz, sz);
        const float fa = static_cast<float>(refDecode(f, ca)), fb = static_cast<float>(refDecode(f, cb));
        const float r = refFloatOp(fa, fb, op);
        // NaN results: any NaN code of the right kind is checked by the comparison below.
        uint32_t cr = std::isnan(r) ? (f.finiteOnly ? 0x7fu : (f.expMax() << f.m) | (1u << (f.m - 1)))
                                    : refEncode(f, r);
        std::memcpy(d.data() + i * sz, &cr, sz);
      }
    }
  }
  return d;
}

// Element i of got equals want: bit for bit, except that NaN results only need to be NaN (the
// payload of a NaN sum depends on operand order, which the hardware may pick).
void expectSameElements(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want, size_t n,
                        DataType t, const std::string& what) {
  const size_t sz = dataTypeSize(t);
  size_t bad = 0;
  for (size_t i = 0; i < n && bad < 5; ++i) {
    uint64_t g = 0, w = 0;
    std::memcpy(&g, got.data() + i * sz, sz);
    std::memcpy(&w, want.data() + i * sz, sz);
    if (g == w) continue;
    bool bothNan = false;
    if (t == tribFloat32)
      bothNan = std::isnan(bitsToFloat(uint32_t(g))) && std::isnan(bitsToFloat(uint32_t(w)));
    else if (t == tribFloat64) {
      double dg, dw;
      std::memcpy(&dg, &g, 8);
      std::memcpy(&dw, &w, 8);
      bothNan = std::isnan(dg) && std::isnan(dw);
    } else if (const Format* f = smallFormat(t)) {
      bothNan = codeIsNan(*f, uint32_t(g)) && codeIsNan(*f, uint32_t(w));
    }
    if (bothNan) continue;
    ADD_FAILURE() << what << ": element " << i << " got 0x" << std::hex << g << " want 0x" << w;
    ++bad;
  }
}

// Inputs: random bit patterns, and for half the elements b close to a (same exponent region) so
// sums cancel and round rather than just returning the larger operand.
void makeInputs(size_t n, DataType t, uint32_t seed, std::vector<uint8_t>* a, std::vector<uint8_t>* b) {
  std::mt19937_64 rng(seed);
  const size_t sz = dataTypeSize(t);
  a->resize(n * sz);
  b->resize(n * sz);
  for (auto& x : *a) x = static_cast<uint8_t>(rng());
  for (auto& x : *b) x = static_cast<uint8_t>(rng());
  if (!isFloatType(t)) return;
  const uint64_t nearMask = sz == 1 ? 0x07 : sz == 2 ? 0x0fff : sz == 4 ? 0x00ffffff : 0x000fffffffffffffull;
  for (size_t i = 0; i < n; ++i) {
    if (rng() & 1) continue;
    uint64_t x = 0;
    std::memcpy(&x, a->data() + i * sz, sz);
    x ^= rng() & nearMask;
    std::memcpy(b->data() + i * sz, &x, sz);
  }
}

const size_t kCounts[] = {0, 1, 7, 31, 33, 4093, (size_t{1} << 20) + 3};
constexpr size_t kGuard = 64;

TEST(Reduce, EveryDtypeOpCountAndIsaMatchesReference) {
  const std::vector<std::string> isas = reduceAvailableIsas();
  for (int t = 0; t < tribNumTypes; ++t) {
    const DataType dt = static_cast<DataType>(t);
    const size_t sz = dataTypeSize(dt);
    for (int o = 0; o < tribNumOps; ++o) {
      const RedOp op = static_cast<RedOp>(o);
      for (size_t n : kCounts) {
        std::vector<uint8_t> a, b;
        makeInputs(n, dt, static_cast<uint32_t>(t * 131 + o * 17 + n), &a, &b);
        const std::vector<uint8_t> want = refReduce(a, b, n, dt, op);
        for (const std::string& isa : isas) {
          IsaScope scope(isa);
          const std::string what =
              std::string(dataTypeName(dt)) + " " + redOpName(op) + " n=" + std::to_string(n) + " isa=" + isa;
          // Out of place, with guard bytes after dst that must stay untouched.
          std::vector<uint8_t> d(n * sz + kGuard, 0xa5);
          reduce(d.data(), a.data(), b.data(), n, dt, op);
          expectSameElements(d, want, n, dt, what);
          for (size_t g = n * sz; g < d.size(); ++g) ASSERT_EQ(d[g], 0xa5) << what << ": wrote past the end";
          // In place: dst == a, then dst == b.
          std::vector<uint8_t> inA = a;
          reduce(inA.data(), inA.data(), b.data(), n, dt, op);
          expectSameElements(inA, want, n, dt, what + " dst==a");
          std::vector<uint8_t> inB = b;
          reduce(inB.data(), a.data(), inB.data(), n, dt, op);
          expectSameElements(inB, want, n, dt, what + " dst==b");
          if (HasFailure()) return;
        }
      }
    }
  }
}

// The vector paths and the scalar path agree bit for bit on every 16-bit pattern (both operand
// orders), NaN payloads included (the NaN a result gets is fixed: ops_lanes.inc).
TEST(Reduce, AllSixteenBitPatternsAgreeAcrossIsas) {
  const size_t n = 1u << 16;
  std::vector<uint16_t> a(n), b(n);
  std::mt19937 rng(7);
  for (size_t i = 0; i < n; ++i) {
    a[i] = static_cast<uint16_t>(i);
    b[i] = static_cast<uint16_t>(rng());
  }
  for (DataType dt : {tribFloat16, tribBfloat16}) {
    for (RedOp op : {tribMin, tribMax, tribSum, tribProd}) {
      std::vector<uint16_t> want(n);
      {
        IsaScope scope("scalar");
        reduce(want.data(), a.data(), b.data(), n, dt, op);
      }
      for (const std::string& isa : reduceAvailableIsas()) {
        IsaScope scope(isa);
        std::vector<uint16_t> got(n);
        reduce(got.data(), a.data(), b.data(), n, dt, op);
        for (size_t i = 0; i < n; ++i)
          ASSERT_EQ(got[i], want[i]) << dataTypeName(dt) << " " << redOpName(op) << " " << isa << " i=" << i;
      }
    }
  }
}

TEST(Reduce, FloatMinMaxSemantics) {
  const float qnan = bitsToFloat(0x7fc00001), other = bitsToFloat(0xffc00002);
  const float a[] = {qnan, 1.0f, qnan, -0.0f, 0.0f, -INFINITY, 2.0f};
  const float b[] = {1.0f, qnan, other, 0.0f, -0.0f, 5.0f, 2.0f};
  const uint32_t wantMin[] = {0x7fc00001, 0x7fc00001, 0x7fc00001, 0x80000000,
                              0x80000000, 0xff800000, 0x40000000};
  const uint32_t wantMax[] = {0x7fc00001, 0x7fc00001, 0x7fc00001, 0x00000000,
                              0x00000000, 0x40a00000, 0x40000000};
  for (const std::string& isa : reduceAvailableIsas()) {
    IsaScope scope(isa);
    float d[7];
    reduce(d, a, b, 7, tribFloat32, tribMin);
    for (int i = 0; i < 7; ++i) EXPECT_EQ(floatToBits(d[i]), wantMin[i]) << isa << " min " << i;
    reduce(d, a, b, 7, tribFloat32, tribMax);
    for (int i = 0; i < 7; ++i) EXPECT_EQ(floatToBits(d[i]), wantMax[i]) << isa << " max " << i;
  }
}

TEST(Reduce, IntegerSumAndProductWrap) {
  const int32_t a[] = {INT32_MAX, INT32_MIN, -1, 65536};
  const int32_t b[] = {1, -1, INT32_MIN, 65536};
  for (const std::string& isa : reduceAvailableIsas()) {
    IsaScope scope(isa);
    int32_t d[4];
    reduce(d, a, b, 4, tribInt32, tribSum);
    EXPECT_EQ(d[0], INT32_MIN);
    EXPECT_EQ(d[1], INT32_MAX);
    EXPECT_EQ(d[2], INT32_MAX);
    reduce(d, a, b, 4, tribInt32, tribProd);
    EXPECT_EQ(d[0], INT32_MAX);
    EXPECT_EQ(d[2], INT32_MIN);
    EXPECT_EQ(d[3], 0) << isa << ": 2^32 wraps to 0";
    const int8_t c[] = {-128, 127}, e[] = {-1, 1};
    int8_t r[2];
    reduce(r, c, e, 2, tribInt8, tribSum);
    EXPECT_EQ(r[0], 127);
    EXPECT_EQ(r[1], -128);
    reduce(r, c, e, 2, tribInt8, tribMin);
    EXPECT_EQ(r[0], -128) << "int8 min compares signed";
  }
}

// ---------------------------------------------------------------------------------------------

TEST(AvgFinalize, IntegersTruncateTowardZero) {
  int32_t i32[] = {-7, 7, -1, 5, INT32_MIN, 0};
  avgFinalize(i32, 6, tribInt32, 2);
  EXPECT_EQ(std::vector<int32_t>(i32, i32 + 6), (std::vector<int32_t>{-3, 3, 0, 2, INT32_MIN / 2, 0}));
  int8_t i8[] = {-128, 127, -3, 3};
  avgFinalize(i8, 4, tribInt8, 3);
  EXPECT_EQ(std::vector<int>(i8, i8 + 4), (std::vector<int>{-42, 42, -1, 1}));
  uint8_t u8[] = {255, 7};
  avgFinalize(u8, 2, tribUint8, 2);
  EXPECT_EQ(u8[0], 127);
  EXPECT_EQ(u8[1], 3);
  int64_t i64[] = {INT64_MIN, INT64_MIN, -5, 5};
  avgFinalize(i64, 1, tribInt64, uint64_t{1} << 63);
  EXPECT_EQ(i64[0], -1) << "divisor above INT64_MAX must not turn the division unsigned";
  avgFinalize(i64 + 1, 3, tribInt64, UINT64_MAX);
  EXPECT_EQ(i64[1], 0);
  EXPECT_EQ(i64[2], 0);
  EXPECT_EQ(i64[3], 0);
  uint64_t u64[] = {UINT64_MAX};
  avgFinalize(u64, 1, tribUint64, 2);
  EXPECT_EQ(u64[0], UINT64_MAX / 2);
  uint32_t u32[] = {10};
  avgFinalize(u32, 1, tribUint32, 1);
  EXPECT_EQ(u32[0], 10u) << "divisor 1 leaves values as they are";
}

TEST(AvgFinalize, FloatsDivideAndRoundOnEveryIsa) {
  const uint64_t divisor = 3;
  for (int t = 0; t < tribNumTypes; ++t) {
    const DataType dt = static_cast<DataType>(t);
    if (!isFloatType(dt)) continue;
    for (size_t n : {size_t{1}, size_t{33}, size_t{4093}}) {
      std::vector<uint8_t> in, unused;
      makeInputs(n, dt, 99 + t, &in, &unused);
      std::vector<uint8_t> want(in.size());
      const size_t sz = dataTypeSize(dt);
      for (size_t i = 0; i < n; ++i) {
        if (dt == tribFloat32)
          storeAt<float>(want, i, loadAt<float>(in, i) / 3.0f);
        else if (dt == tribFloat64)
          storeAt<double>(want, i, loadAt<double>(in, i) / 3.0);
        else {
          const Format& f = *smallFormat(dt);
          uint32_t c = 0;
          std::memcpy(&c, in.data() + i * sz, sz);
          const float q = static_cast<float>(refDecode(f, c)) / 3.0f;
          uint32_t r = std::isnan(q) ? c : refEncode(f, q);
          std::memcpy(want.data() + i * sz, &r, sz);
        }
      }
      for (const std::string& isa : reduceAvailableIsas()) {
        IsaScope scope(isa);
        std::vector<uint8_t> buf = in;
        buf.resize(n * sz + kGuard, 0x5a);
        avgFinalize(buf.data(), n, dt, divisor);
        expectSameElements(buf, want, n, dt, std::string(dataTypeName(dt)) + " avg " + isa);
        for (size_t g = n * sz; g < buf.size(); ++g) ASSERT_EQ(buf[g], 0x5a) << "wrote past the end";
      }
    }
  }
  // A whole average: sum then divide, negative values included.
  const float x[] = {-3.0f, 1.5f}, y[] = {-4.0f, 2.5f};
  float d[2];
  reduce(d, x, y, 2, tribFloat32, tribAvg);
  avgFinalize(d, 2, tribFloat32, 2);
  EXPECT_EQ(d[0], -3.5f);
  EXPECT_EQ(d[1], 2.0f);
}

// ---------------------------------------------------------------------------------------------

TEST(ReduceChecked, BadArgumentsGiveClearErrorsAndWriteNothing) {
  float a[4] = {1, 2, 3, 4}, b[4] = {1, 1, 1, 1}, d[4] = {9, 9, 9, 9};
  Status s = reduceChecked(d, a, b, 4, static_cast<DataType>(77), tribSum);
  EXPECT_EQ(s.code(), tribInvalidArgument);
  EXPECT_NE(s.message().find("datatype 77"), std::string::npos) << s.message();
  s = reduceChecked(d, a, b, 4, tribFloat32, static_cast<RedOp>(-1));
  EXPECT_EQ(s.code(), tribInvalidArgument);
  EXPECT_NE(s.message().find("op -1"), std::string::npos) << s.message();
  s = reduceChecked(d, nullptr, b, 4, tribFloat32, tribSum);
  EXPECT_EQ(s.code(), tribInvalidArgument);
  EXPECT_NE(s.message().find("null"), std::string::npos) << s.message();
  s = reduceChecked(a + 1, a, b, 3, tribFloat32, tribSum);
  EXPECT_EQ(s.code(), tribInvalidArgument);
  EXPECT_NE(s.message().find("partially overlaps"), std::string::npos) << s.message();
  s = reduceChecked(d, a, b, SIZE_MAX / 2, tribFloat32, tribSum);
  EXPECT_EQ(s.code(), tribInvalidArgument);
  for (float v : d) EXPECT_EQ(v, 9.0f) << "nothing written on error";
  EXPECT_EQ(a[1], 2.0f);
  s = avgFinalizeChecked(d, 4, tribFloat32, 0);
  EXPECT_EQ(s.code(), tribInvalidArgument);
  EXPECT_NE(s.message().find("divisor is 0"), std::string::npos) << s.message();
  EXPECT_EQ(d[0], 9.0f);

  ASSERT_TRUE(reduceChecked(a, a, b, 4, tribFloat32, tribSum).ok()) << "in place is allowed";
  EXPECT_EQ(a[3], 5.0f);
  ASSERT_TRUE(reduceChecked(nullptr, nullptr, nullptr, 0, tribFloat32, tribSum).ok())
      << "count 0 needs no buffers";
  ASSERT_TRUE(avgFinalizeChecked(a, 4, tribFloat32, 2).ok());
  EXPECT_EQ(a[3], 2.5f);
}

TEST(ReduceIsa, ForceSelectsEachAvailableIsa) {
  const std::vector<std::string> isas = reduceAvailableIsas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.front(), "scalar");
  const std::string saved = reduceIsa();
  for (const std::string& isa : isas) {
    ASSERT_TRUE(reduceForceIsa(isa.c_str()));
    EXPECT_EQ(std::string(reduceIsa()), isa);
  }
  EXPECT_FALSE(reduceForceIsa("sse9"));
  EXPECT_FALSE(reduceForceIsa(nullptr));
  EXPECT_EQ(std::string(reduceIsa()), isas.back()) << "a refused request changes nothing";
  if (isas.size() < 3) {
    EXPECT_FALSE(reduceForceIsa("avx512")) << "this CPU lacks AVX-512";
  }
  ASSERT_TRUE(reduceForceIsa(saved.c_str()));
}

// TRIB_REDUCE_ISA is read once, at first use, so each setting runs in a fresh child process.
TEST(ReduceIsa, EnvironmentVariableForcesLowerIsa) {
  if (const char* expect = std::getenv("TRIB_TEST_EXPECT_ISA")) {
    EXPECT_STREQ(reduceIsa(), expect);
    return;
  }
  char self[4096];
  const ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
  ASSERT_GT(len, 0) << "cannot find this test binary to re-run it";
  self[len] = 0;
  const std::vector<std::string> isas = reduceAvailableIsas();
  std::vector<std::pair<std::string, std::string>> cases;  // env value -> expected ISA
  for (const std::string& isa : isas) cases.emplace_back(isa, isa);
  cases.emplace_back("bogus", isas.back());
  for (const auto& [env, expect] : cases) {
    const std::string cmd = "TRIB_REDUCE_ISA=" + env + " TRIB_TEST_EXPECT_ISA=" + expect + " " + self +
                            " --gtest_filter=ReduceIsa.EnvironmentVariableForcesLowerIsa"
                            " >/dev/null 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
}

}  // namespace
}  // namespace trib

// copyStreaming copies exactly, whatever the alignment of either end and the length (its head,
// 64-byte body and tail are separate paths), and writes nothing outside the destination.
TEST(Reduce, CopyStreamingIsExactAtEveryAlignmentAndLength) {
  std::vector<uint8_t> src(70000), dst(70000 + 64);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 131 + (i >> 9));
  for (size_t srcOff : {0, 1, 8, 15}) {
    for (size_t dstOff : {0, 3, 16, 31}) {
      for (size_t len : {0, 1, 255, 256, 271, 4096, 4099, 65536 + 17}) {
        std::fill(dst.begin(), dst.end(), 0xEE);
        trib::copyStreaming(dst.data() + dstOff, src.data() + srcOff, len);
        ASSERT_EQ(std::memcmp(dst.data() + dstOff, src.data() + srcOff, len), 0)
            << "src+" << srcOff << " dst+" << dstOff << " len " << len;
        for (size_t i = 0; i < dstOff; ++i) ASSERT_EQ(dst[i], 0xEE) << "wrote before the destination";
        for (size_t i = dstOff + len; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xEE) << "wrote past the end";
      }
    }
  }
}
