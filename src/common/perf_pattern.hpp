// The values trib-perf's ranks send and the results it expects, in one header for the host check
// (bench/trib-perf.cpp) and the device-side check (src/cuda/cuda_check.cu): one formula, both sides.
// Small integers, so every result is exact in every dtype.
#pragma once
#include <cmath>
#include <cstdint>

#include "tributary/tributary.h"

#if defined(__CUDACC__)
#define TRIB_PERF_HD __host__ __device__
#else
#define TRIB_PERF_HD
#endif

namespace trib::perf {

// The collectives trib-perf checks (trib::Coll is not available to device code).
enum class Kind : int { AllReduce, Reduce, ReduceScatter, AllGather, Broadcast, AlltoAll, Other };

// What one rank's output must hold.
struct Check {
  Kind coll = Kind::Other;
  int n = 1, rank = 0, root = 0;
  uint64_t count = 0;  // the call's count argument
  tribRedOp_t op = tribSum;
  bool floatType = true;  // avg divides exactly (else truncates)
};

// Input element i on rank r.
TRIB_PERF_HD inline double inputValue(int r, uint64_t i, tribRedOp_t op) {
  if (op == tribProd) return ((r + i) % 7 == 0) ? 2.0 : 1.0;
  return static_cast<double>((r * 3 + i) % 5);
}

TRIB_PERF_HD inline double reducedValue(const Check& c, uint64_t i) {
  double acc = inputValue(0, i, c.op);
  for (int r = 1; r < c.n; ++r) {
    double v = inputValue(r, i, c.op);
    acc = c.op == tribProd  ? acc * v
          : c.op == tribMin ? fmin(acc, v)
          : c.op == tribMax ? fmax(acc, v)
                            : acc + v;
  }
  if (c.op == tribAvg) acc = c.floatType ? acc / c.n : trunc(acc / c.n);
  return acc;
}

// Expected output element i (NaN = not defined on this rank).
TRIB_PERF_HD inline double expected(const Check& c, uint64_t i) {
  switch (c.coll) {
    case Kind::AllReduce:
      return reducedValue(c, i);
    case Kind::Reduce:
      return c.rank == c.root ? reducedValue(c, i) : NAN;
    case Kind::ReduceScatter:
      return reducedValue(c, c.rank * c.count + i);
    case Kind::AllGather:
      return inputValue(static_cast<int>(i / c.count), i % c.count, c.op);
    case Kind::Broadcast:
      return inputValue(c.root, i, c.op);
    case Kind::AlltoAll:
      return inputValue(static_cast<int>(i / c.count), c.rank * c.count + i % c.count, c.op);
    default:
      return NAN;
  }
}

// Whether `got` counts as right for element i: exact, but for avg in a float type (rounding of
// the division in fp8/fp16/bf16).
TRIB_PERF_HD inline bool wrong(const Check& c, uint64_t i, double got) {
  const double want = expected(c, i);
  if (want != want) return false;  // not defined here
  const double tol = c.op == tribAvg && c.floatType ? 1e-2 * fmax(1.0, fabs(want)) : 0;
  return !(fabs(got - want) <= tol);
}

}  // namespace trib::perf
