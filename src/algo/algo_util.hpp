// Internal helpers shared by the schedule generators (not part of the schedule interface).
#pragma once
#include <algorithm>
#include <cstdint>

#include "algo/schedule.hpp"

namespace trib::algo {

inline Region inR(uint64_t off, uint64_t n) { return {Buf::Input, off, n}; }
inline Region outR(uint64_t off, uint64_t n) { return {Buf::Output, off, n}; }
inline Region scrR(uint64_t off, uint64_t n) { return {Buf::Scratch, off, n}; }
inline Region shift(Region r, uint64_t by, uint64_t n) { return {r.buf, r.offset + by, n}; }

// Pipelining: a range of `len` elements is cut into slices of `chunk` elements.
inline uint64_t chunkOf(const CollArgs& a) { return a.chunkElems == 0 ? 1 : a.chunkElems; }
inline uint64_t numSlices(uint64_t len, uint64_t chunk) { return len == 0 ? 0 : (len - 1) / chunk + 1; }
inline uint64_t sliceBegin(uint64_t j, uint64_t chunk) { return j * chunk; }
// Length of slice j of a range of `len` (0 when the range has fewer slices).
inline uint64_t sliceLen(uint64_t len, uint64_t chunk, uint64_t j) {
  if (j >= numSlices(len, chunk)) return 0;
  return std::min(chunk, len - j * chunk);
}

// Ring-like schedules run a group of this many slices through all rounds before the next group
// (as NCCL's FIFO of 8 steps): within a round the group's slices are independent, so the
// executor's window keeps several in flight while round r+1 of slice k waits only for round r
// of slice k.
constexpr uint64_t kGroupSlices = 8;

inline int mod(int64_t a, int n) { return static_cast<int>(((a % n) + n) % n); }

// Requests every generator accepts: a sane communicator, root and slice size.
bool validArgs(const CollArgs& a);
uint64_t noScratch(const CollArgs& a, int rank);

// Generators and scratch functions assume supports(args) and 0 <= rank < nranks. The registry
// wraps them so that other requests cannot divide by zero or emit a wrong schedule: generators
// throw std::invalid_argument (from Generator::next) and scratch sizes are 0.
void requireValid(const CollArgs& a, int rank);
template <Generator<Step> (*G)(CollArgs, int)>
Generator<Step> checked(CollArgs a, int rank) {
  requireValid(a, rank);
  auto g = G(a, rank);
  while (g.next()) co_yield g.value();
}
template <uint64_t (*F)(const CollArgs&, int)>
uint64_t checkedScratch(const CollArgs& a, int rank) {
  return validArgs(a) && rank >= 0 && rank < a.nranks ? F(a, rank) : 0;
}

// Single-rank collectives: the output is the input (a copy unless in-place).
Generator<Step> localCopy(CollArgs a, int rank);

// Forwards every step of `g` (to compose generators).
#define TRIB_YIELD_ALL(gen_expr)                     \
  do {                                               \
    auto trib_g_ = (gen_expr);                       \
    while (trib_g_.next()) co_yield trib_g_.value(); \
  } while (0)

}  // namespace trib::algo
