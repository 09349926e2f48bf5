// Datatypes and reduction operators: sizes, names, validation, and the exact scalar
// conversions for the 16- and 8-bit floating formats (shared by CPU kernels and tests).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "tributary/tributary.h"

namespace trib {

using DataType = tribDataType_t;
using RedOp = tribRedOp_t;

inline bool validDataType(int t) { return t >= 0 && t < tribNumTypes; }
inline bool validRedOp(int op) { return op >= 0 && op < tribNumOps; }

inline size_t dataTypeSize(DataType t) {
  switch (t) {
    case tribInt8:
    case tribUint8:
    case tribFp8E4M3:
    case tribFp8E5M2:
      return 1;
    case tribFloat16:
    case tribBfloat16:
      return 2;
    case tribInt32:
    case tribUint32:
    case tribFloat32:
      return 4;
    case tribInt64:
    case tribUint64:
    case tribFloat64:
      return 8;
    default:
      return 0;
  }
}
inline bool isFloatType(DataType t) {
  return t == tribFloat16 || t == tribBfloat16 || t == tribFloat32 || t == tribFloat64 || t == tribFp8E4M3 ||
         t == tribFp8E5M2;
}
const char* dataTypeName(DataType t);  // "float32"; "invalid" when out of range
const char* redOpName(RedOp op);       // "sum"; "invalid"
// Parse "float32", "f32", "float", "half", "bf16", "int32", ... Returns false if unknown.
bool parseDataType(const char* s, DataType* out);
bool parseRedOp(const char* s, RedOp* out);

// ---- exact scalar conversions (round to nearest even; NaN preserved) ----
inline float bitsToFloat(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
inline uint32_t floatToBits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
inline float bf16ToFloat(uint16_t h) { return bitsToFloat(static_cast<uint32_t>(h) << 16); }
uint16_t floatToBf16(float f);
float fp8e4m3ToFloat(uint8_t v);
uint8_t floatToFp8e4m3(float f);  // saturates to ±448 (and ±inf); NaN -> S.1111.111, sign kept
float fp8e5m2ToFloat(uint8_t v);
uint8_t floatToFp8e5m2(float f);  // overflow -> ±inf (IEEE-like)

// Element i of a buffer of `t`, as a double (exact for every type but 64-bit integers beyond 2^53),
// and the reverse (rounding to nearest even for the small floats). For tests, benchmarks, tools.
double loadElement(const void* base, uint64_t i, DataType t);
void storeElement(void* base, uint64_t i, DataType t, double v);

}  // namespace trib
