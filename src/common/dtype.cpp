#include "common/dtype.hpp"

#include <strings.h>

#include <cstring>

namespace trib {

const char* dataTypeName(DataType t) {
  static const char* const names[tribNumTypes] = {"int8",    "uint8",   "int32",   "uint32",
                                                  "int64",   "uint64",  "float16", "bfloat16",
                                                  "float32", "float64", "fp8e4m3", "fp8e5m2"};
  return validDataType(t) ? names[t] : "invalid";
}

const char* redOpName(RedOp op) {
  static const char* const names[tribNumOps] = {"sum", "prod", "min", "max", "avg"};
  return validRedOp(op) ? names[op] : "invalid";
}

bool parseDataType(const char* s, DataType* out) {
  struct Alias {
    const char* name;
    DataType type;
  };
  static const Alias aliases[] = {
      {"int8", tribInt8},       {"char", tribInt8},       {"uint8", tribUint8},   {"int32", tribInt32},
      {"int", tribInt32},       {"uint32", tribUint32},   {"int64", tribInt64},   {"uint64", tribUint64},
      {"float16", tribFloat16}, {"half", tribFloat16},    {"fp16", tribFloat16},  {"bfloat16", tribBfloat16},
      {"bf16", tribBfloat16},   {"float32", tribFloat32}, {"float", tribFloat32}, {"fp32", tribFloat32},
      {"float64", tribFloat64}, {"double", tribFloat64},  {"fp64", tribFloat64},  {"fp8e4m3", tribFp8E4M3},
      {"e4m3", tribFp8E4M3},    {"fp8e5m2", tribFp8E5M2}, {"e5m2", tribFp8E5M2},
  };
  if (!s) return false;
  for (const Alias& a : aliases) {
    if (strcasecmp(s, a.name) == 0) {
      *out = a.type;
      return true;
    }
  }
  return false;
}

bool parseRedOp(const char* s, RedOp* out) {
  if (!s) return false;
  for (int op = 0; op < tribNumOps; ++op) {
    if (strcasecmp(s, redOpName(static_cast<RedOp>(op))) == 0) {
      *out = static_cast<RedOp>(op);
      return true;
    }
  }
  return false;
}

double loadElement(const void* base, uint64_t i, DataType t) {
  const char* p = static_cast<const char*>(base) + i * dataTypeSize(t);
  auto get = [p](auto x) {
    std::memcpy(&x, p, sizeof x);
    return x;
  };
  switch (t) {
    case tribInt8:
      return get(int8_t{});
    case tribUint8:
      return get(uint8_t{});
    case tribInt32:
      return get(int32_t{});
    case tribUint32:
      return get(uint32_t{});
    case tribInt64:
      return static_cast<double>(get(int64_t{}));
    case tribUint64:
      return static_cast<double>(get(uint64_t{}));
    case tribFloat16:
      return halfToFloat(get(uint16_t{}));
    case tribBfloat16:
      return bf16ToFloat(get(uint16_t{}));
    case tribFloat32:
      return get(float{});
    case tribFloat64:
      return get(double{});
    case tribFp8E4M3:
      return fp8e4m3ToFloat(get(uint8_t{}));
    case tribFp8E5M2:
      return fp8e5m2ToFloat(get(uint8_t{}));
    default:
      return 0.0 / 0.0;
  }
}

void storeElement(void* base, uint64_t i, DataType t, double v) {
  char* p = static_cast<char*>(base) + i * dataTypeSize(t);
  auto put = [p](auto x) { std::memcpy(p, &x, sizeof x); };
  switch (t) {
    case tribInt8:
      put(static_cast<int8_t>(v));
      break;
    case tribUint8:
      put(static_cast<uint8_t>(v));
      break;
    case tribInt32:
      put(static_cast<int32_t>(v));
      break;
    case tribUint32:
      put(static_cast<uint32_t>(v));
      break;
    case tribInt64:
      put(static_cast<int64_t>(v));
      break;
    case tribUint64:
      put(static_cast<uint64_t>(v));
      break;
    case tribFloat16:
      put(floatToHalf(static_cast<float>(v)));
      break;
    case tribBfloat16:
      put(floatToBf16(static_cast<float>(v)));
      break;
    case tribFloat32:
      put(static_cast<float>(v));
      break;
    case tribFloat64:
      put(v);
      break;
    case tribFp8E4M3:
      put(floatToFp8e4m3(static_cast<float>(v)));
      break;
    case tribFp8E5M2:
      put(floatToFp8e5m2(static_cast<float>(v)));
      break;
    default:
      break;
  }
}

}  // namespace trib
