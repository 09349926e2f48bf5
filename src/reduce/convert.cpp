// The exact scalar conversions declared in common/dtype.hpp. The algorithms live in
// convert_lanes.inc, shared with the SIMD kernels so both round identically.
#include <cstring>

#include "common/dtype.hpp"

namespace trib {
namespace conv_scalar {
using U32 = uint32_t;
using I32 = int32_t;
using F32 = float;
inline F32 convertToF32(I32 v) { return static_cast<float>(v); }
#include "reduce/convert_lanes.inc"
}  // namespace conv_scalar

using conv_scalar::Bf16Fmt;
using conv_scalar::E4M3Fmt;
using conv_scalar::E5M2Fmt;
using conv_scalar::HalfFmt;

float halfToFloat(uint16_t h) { return bitsToFloat(HalfFmt::widen(h)); }
uint16_t floatToHalf(float f) { return static_cast<uint16_t>(HalfFmt::narrow(floatToBits(f))); }
uint16_t floatToBf16(float f) { return static_cast<uint16_t>(Bf16Fmt::narrow(floatToBits(f))); }
// E4M3 has no infinity: finite values past 448 and ±inf saturate to ±448 (OCP "satfinite"
// behaviour, what training frameworks expect); NaN becomes S.1111.111 with its sign kept.
float fp8e4m3ToFloat(uint8_t v) { return bitsToFloat(E4M3Fmt::widen(v)); }
uint8_t floatToFp8e4m3(float f) { return static_cast<uint8_t>(E4M3Fmt::narrow(floatToBits(f))); }
// E5M2 is IEEE-like: overflow goes to ±inf, NaN stays a quiet NaN.
float fp8e5m2ToFloat(uint8_t v) { return bitsToFloat(E5M2Fmt::widen(v)); }
uint8_t floatToFp8e5m2(float f) { return static_cast<uint8_t>(E5M2Fmt::narrow(floatToBits(f))); }

}  // namespace trib
