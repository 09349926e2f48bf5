// The exact scalar conversions declared in common/dtype.hpp: the shared element arithmetic
// (element_ops.hpp, convert_lanes.inc), the very code the SIMD and device kernels run.
#include "common/dtype.hpp"
#include "reduce/element_ops.hpp"

namespace trib {

using elem::Bf16Fmt;
using elem::E4M3Fmt;
using elem::E5M2Fmt;
using elem::HalfFmt;

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
