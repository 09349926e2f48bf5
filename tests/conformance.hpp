// The conformance suite's core, independent of how ranks are launched: a Case describes one
// call; fillInputs/runCase/checkOutputs run it on one rank of any communicator (threads over
// loopback, processes over shm/UCX) and compare against values computed here, independently of
// the library, from inputs chosen so every float result is exact (as nccl-tests does).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "algo/schedule.hpp"
#include "common/dtype.hpp"
#include "tributary/tributary.h"

namespace trib::conformance {

struct Case {
  Coll coll = Coll::AllReduce;
  std::string algo;  // forced through the config ("" = library's choice)
  DataType dtype = tribFloat32;
  RedOp op = tribSum;
  int nranks = 1;
  uint64_t count = 0;
  bool inPlace = false;
  int root = 0;
  bool sharedBuffers = false;  // buffers from tribMemAlloc (shm peers map them where two-shot exposes)

  std::string name() const;
};

inline bool hasOp(Coll c) { return c == Coll::AllReduce || c == Coll::Reduce || c == Coll::ReduceScatter; }
inline bool hasRoot(Coll c) {
  return c == Coll::Reduce || c == Coll::Broadcast || c == Coll::Gather || c == Coll::Scatter;
}

// ---- values ---------------------------------------------------------------------------------
// Largest |integer| the type holds exactly and that every partial result stays within.
inline double dataRange(DataType t) {
  switch (t) {
    case tribInt8:
      return 100;
    case tribUint8:
      return 200;
    case tribFp8E4M3:
    case tribFp8E5M2:
      return 8;
    case tribBfloat16:
      return 256;
    case tribFloat16:
      return 2048;
    default:
      return 1 << 20;
  }
}
inline bool isUnsigned(DataType t) { return t == tribUint8 || t == tribUint32 || t == tribUint64; }

// Input element `idx` of `rank`, chosen so every sum/prod/min/max of up to 16 ranks is exact.
inline double inputValue(const Case& c, int rank, uint64_t idx) {
  const bool uns = isUnsigned(c.dtype);
  const uint64_t h = static_cast<uint64_t>(rank) * 7 + idx * 3 + 1;
  if (!hasOp(c.coll)) {  // data movement: values identify (rank, idx) as far as the type allows
    double m = dataRange(c.dtype);
    double v =
        static_cast<double>((static_cast<uint64_t>(rank) * 977 + idx) % static_cast<uint64_t>(2 * m + 1));
    return uns ? v / 2 : v - m;
  }
  switch (c.op) {
    case tribSum:
    case tribAvg:
      if (c.dtype == tribFp8E4M3 || c.dtype == tribFp8E5M2) return ((rank + idx) % 2) ? -1 : 1;
      return uns ? static_cast<double>(h % 9) : static_cast<double>(h % 9) - 4;
    case tribProd:
      if ((rank + idx) % 5 == 0) return 2;
      return (!uns && (rank + 2 * idx) % 3 == 0) ? -1 : 1;
    default: {  // min, max
      double v = static_cast<double>((static_cast<uint64_t>(rank) * 13 + idx * 7) % 17);
      return uns ? v : v - 8;
    }
  }
}

// Expected output element `idx` on `rank` (NaN if the element is not defined for this rank).
double expectedValue(const Case& c, int rank, uint64_t idx);

// Bytes from the heap or, for sharedBuffers cases, from tribMemAlloc.
class CaseBytes {
 public:
  CaseBytes() = default;
  CaseBytes(const CaseBytes&) = delete;
  CaseBytes& operator=(const CaseBytes&) = delete;
  ~CaseBytes() { release(); }
  void assign(size_t n, unsigned char fill, bool shared);
  unsigned char* data() { return shared_ ? shared_ : heap_.data(); }
  const unsigned char* data() const { return shared_ ? shared_ : heap_.data(); }
  unsigned char operator[](size_t i) const { return data()[i]; }

 private:
  void release();
  std::vector<unsigned char> heap_;
  unsigned char* shared_ = nullptr;
};

// Buffers of one rank for one case, with guard zones that must stay untouched.
struct RankBuffers {
  CaseBytes send, recv;  // include guards
  const void* sendPtr = nullptr;
  void* recvPtr = nullptr;
  uint64_t inCount = 0, outCount = 0;
};
void prepare(const Case& c, int rank, RankBuffers* b);
tribResult_t runCase(const Case& c, tribComm_t comm, RankBuffers* b);
// Returns "" if everything matched, else a description of the first mismatches.
std::string check(const Case& c, int rank, const RankBuffers& b);

// The case lists the suites iterate over.
std::vector<Case> structuralCases(const std::vector<int>& rankCounts, const std::vector<uint64_t>& counts);
std::vector<Case> arithmeticCases(const std::vector<int>& rankCounts, const std::vector<uint64_t>& counts);

}  // namespace trib::conformance
