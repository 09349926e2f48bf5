// Shared by the reduction tests (CPU reducer, shared element arithmetic, CUDA engine): forcing an
// instruction set for a scope, and edge values of every dtype (NaN payloads, infinities, signed
// zeros, subnormals, largest finite values, integer extremes; every code of the 8-bit types).
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/dtype.hpp"
#include "reduce/reduce.hpp"
#include "reduce/reduce_internal.hpp"

namespace trib {

// Runs the reducer on `isa` until the end of the scope.
class IsaScope {
 public:
  explicit IsaScope(const std::string& isa) : saved_(reduceIsa()) {
    EXPECT_TRUE(reduceForceIsa(isa.c_str()));
  }
  ~IsaScope() { reduceForceIsa(saved_.c_str()); }

 private:
  std::string saved_;
};

template <class T>
std::vector<uint8_t> bytesOf(const std::vector<T>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(T));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// Edge values of a dtype, as raw element bytes.
inline std::vector<uint8_t> edgeValues(DataType dt) {
  switch (dt) {
    case tribInt8:
    case tribUint8:
    case tribFp8E4M3:
    case tribFp8E5M2: {  // every code
      std::vector<uint8_t> v(256);
      for (int i = 0; i < 256; ++i) v[i] = static_cast<uint8_t>(i);
      return v;
    }
    case tribFloat16:
    case tribBfloat16: {
      // Zeros, ones, smallest subnormals, largest finite, inf, quiet and signalling NaNs with
      // payloads, near-overflow, both signs; then a spread of ordinary codes.
      std::vector<uint16_t> v = {0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400, 0x3c00, 0xbc00, 0x7bff,
                                 0xfbff, 0x7c00, 0xfc00, 0x7e00, 0xfe01, 0x7c01, 0x7d55, 0x7f80, 0xff80,
                                 0x7fc0, 0xffc1, 0x7f81, 0x7f7f, 0xff7f, 0x0080, 0x007f, 0x3f80, 0x4000};
      for (uint32_t c = 0; c < 0x10000; c += 257) v.push_back(static_cast<uint16_t>(c));
      return bytesOf(v);
    }
    case tribInt32:
    case tribUint32: {
      std::vector<uint32_t> v = {0,           1,           2,           3,        0xffffffffu,
                                 0x7fffffffu, 0x80000000u, 0x80000001u, 0x10000u, 0xfffeu};
      return bytesOf(v);
    }
    case tribInt64:
    case tribUint64: {
      std::vector<uint64_t> v = {0,
                                 1,
                                 3,
                                 ~uint64_t{0},
                                 uint64_t{1} << 63,
                                 (uint64_t{1} << 63) - 1,
                                 (uint64_t{1} << 63) + 1,
                                 uint64_t{1} << 32,
                                 0xfffffffffull};
      return bytesOf(v);
    }
    case tribFloat32: {
      std::vector<uint32_t> v = {0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007fffff, 0x00800000,
                                 0x3f800000, 0xbf800000, 0x7f7fffff, 0xff7fffff, 0x7f800000, 0xff800000,
                                 0x7fc00000, 0xffc00001, 0x7f800001, 0xffa00005, 0x3eaaaaab, 0x4b800001};
      return bytesOf(v);
    }
    case tribFloat64: {
      std::vector<uint64_t> v = {0,
                                 0x8000000000000000ull,
                                 1,
                                 0x800fffffffffffffull,
                                 0x3ff0000000000000ull,
                                 0xbff0000000000000ull,
                                 0x7fefffffffffffffull,
                                 0x7ff0000000000000ull,
                                 0xfff0000000000000ull,
                                 0x7ff8000000000000ull,
                                 0xfff8000000000003ull,
                                 0x7ff0000000000001ull,
                                 0x3fd5555555555555ull};
      return bytesOf(v);
    }
    default:
      return {};
  }
}

}  // namespace trib
