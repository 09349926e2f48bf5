#include "common/dtype.hpp"

#include <strings.h>

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

}  // namespace trib
