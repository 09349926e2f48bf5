// The element arithmetic of every reduction, in one header for host and device: the functions are
// __host__ __device__ under nvcc (the CUDA kernels run them) and plain inline otherwise (the CPU
// reducer's scalar path runs them; its SIMD kernels compile the same lane code, kernels.inc). So
// the CPU tests check the very functions the device kernels run, bit for bit.
//
// Element<dtype> gives, for one element of storage type Storage: combine<op>(a, b) (sum, prod, min,
// max; avg is a sum) and divide(x, divisor) (avg's last step). Semantics: docs/REDUCTION.md.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "common/dtype.hpp"

#if defined(__CUDACC__)
#define TRIB_HD __host__ __device__
#else
#define TRIB_HD
#endif

namespace trib::elem {

using U32 = uint32_t;
using I32 = int32_t;
using F32 = float;
TRIB_HD inline F32 convertToF32(I32 v) { return static_cast<float>(v); }
#include "reduce/convert_lanes.inc"
#include "reduce/ops_lanes.inc"

using F32Ops = FloatOps<float, int32_t, int32_t>;
using F64Ops = FloatOps<double, int64_t, int64_t>;

// Integers in unsigned storage T; S the signed type (T itself when unsigned); Wide holds every value
// and every divisor, and its '/' truncates toward zero.
template <class T, class S, class Wide>
struct IntElement {
  using Storage = T;
  using Ops = IntOps<T, S, static_cast<S>(-1) < 0>;
  template <Op kOp>
  TRIB_HD static T combine(T a, T b) {
    return apply<Ops, kOp>(a, b);
  }
  TRIB_HD static T divide(T x, uint64_t d) {
    return static_cast<T>(static_cast<Wide>(static_cast<S>(x)) / static_cast<Wide>(d));
  }
};

// float32 / float64: computed in the type.
template <class T, class Ops>
struct NativeFloatElement {
  using Storage = T;
  template <Op kOp>
  TRIB_HD static T combine(T a, T b) {
    return apply<Ops, kOp>(a, b);
  }
  TRIB_HD static T divide(T x, uint64_t d) { return Ops::div(x, static_cast<T>(d)); }
};

// fp16 / bf16 / fp8: widened exactly to float32, combined, rounded back to nearest even.
template <class S, class Fmt>
struct SmallFloatElement {
  using Storage = S;
  TRIB_HD static float widen(S x) { return bitcastLanes<float>(Fmt::widen(x)); }
  TRIB_HD static S narrow(float f) { return static_cast<S>(Fmt::narrow(bitcastLanes<uint32_t>(f))); }
  template <Op kOp>
  TRIB_HD static S combine(S a, S b) {
    return narrow(apply<F32Ops, kOp>(widen(a), widen(b)));
  }
  TRIB_HD static S divide(S x, uint64_t d) { return narrow(F32Ops::div(widen(x), static_cast<float>(d))); }
};

template <DataType D>
struct Element;
template <>
struct Element<tribInt8> : IntElement<uint8_t, int8_t, __int128> {};
template <>
struct Element<tribUint8> : IntElement<uint8_t, uint8_t, uint64_t> {};
template <>
struct Element<tribInt32> : IntElement<uint32_t, int32_t, __int128> {};
template <>
struct Element<tribUint32> : IntElement<uint32_t, uint32_t, uint64_t> {};
template <>
struct Element<tribInt64> : IntElement<uint64_t, int64_t, __int128> {};
template <>
struct Element<tribUint64> : IntElement<uint64_t, uint64_t, uint64_t> {};
template <>
struct Element<tribFloat32> : NativeFloatElement<float, F32Ops> {};
template <>
struct Element<tribFloat64> : NativeFloatElement<double, F64Ops> {};
template <>
struct Element<tribFloat16> : SmallFloatElement<uint16_t, HalfFmt> {};
template <>
struct Element<tribBfloat16> : SmallFloatElement<uint16_t, Bf16Fmt> {};
template <>
struct Element<tribFp8E4M3> : SmallFloatElement<uint8_t, E4M3Fmt> {};
template <>
struct Element<tribFp8E5M2> : SmallFloatElement<uint8_t, E5M2Fmt> {};

// The operator a reduction applies per element (avg sums; the division comes at the end).
TRIB_HD inline Op opOf(RedOp op) {
  switch (op) {
    case tribProd:
      return Op::kProd;
    case tribMin:
      return Op::kMin;
    case tribMax:
      return Op::kMax;
    default:
      return Op::kSum;
  }
}

template <Op kOp>
struct OpTag {
  static constexpr Op value = kOp;
};

// f(Element<dtype>{}) for a dtype known at run time; false (f not called) when it is unknown.
// Host only: it picks the kernel or loop to run.
template <class F>
bool withElement(DataType dtype, F&& f) {
  switch (dtype) {
    case tribInt8:
      return f(Element<tribInt8>{}), true;
    case tribUint8:
      return f(Element<tribUint8>{}), true;
    case tribInt32:
      return f(Element<tribInt32>{}), true;
    case tribUint32:
      return f(Element<tribUint32>{}), true;
    case tribInt64:
      return f(Element<tribInt64>{}), true;
    case tribUint64:
      return f(Element<tribUint64>{}), true;
    case tribFloat16:
      return f(Element<tribFloat16>{}), true;
    case tribBfloat16:
      return f(Element<tribBfloat16>{}), true;
    case tribFloat32:
      return f(Element<tribFloat32>{}), true;
    case tribFloat64:
      return f(Element<tribFloat64>{}), true;
    case tribFp8E4M3:
      return f(Element<tribFp8E4M3>{}), true;
    case tribFp8E5M2:
      return f(Element<tribFp8E5M2>{}), true;
    default:
      return false;
  }
}
// f(OpTag<op>{}) for an operator known at run time.
template <class F>
void withOp(Op op, F&& f) {
  switch (op) {
    case Op::kSum:
      return f(OpTag<Op::kSum>{});
    case Op::kProd:
      return f(OpTag<Op::kProd>{});
    case Op::kMin:
      return f(OpTag<Op::kMin>{});
    default:
      return f(OpTag<Op::kMax>{});
  }
}

// Host loops over the element functions: the CPU reducer's scalar path. Loads and stores by
// memcpy (any alignment); each element is read before it is written, so dst may alias a or b.
template <class E, Op kOp>
void reduceLoop(void* dst, const void* a, const void* b, size_t n) {
  using T = typename E::Storage;
  for (size_t i = 0; i < n; ++i) {
    T x, y;
    std::memcpy(&x, static_cast<const char*>(a) + i * sizeof(T), sizeof(T));
    std::memcpy(&y, static_cast<const char*>(b) + i * sizeof(T), sizeof(T));
    const T r = E::template combine<kOp>(x, y);
    std::memcpy(static_cast<char*>(dst) + i * sizeof(T), &r, sizeof(T));
  }
}
template <class E>
void divideLoop(void* buf, size_t n, uint64_t divisor) {
  using T = typename E::Storage;
  for (size_t i = 0; i < n; ++i) {
    T x;
    std::memcpy(&x, static_cast<char*>(buf) + i * sizeof(T), sizeof(T));
    x = E::divide(x, divisor);
    std::memcpy(static_cast<char*>(buf) + i * sizeof(T), &x, sizeof(T));
  }
}

}  // namespace trib::elem
