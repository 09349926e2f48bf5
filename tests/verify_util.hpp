// Schedule arguments and algorithms shared by the tests that materialise, verify or run schedules.
#pragma once
#include <stdexcept>
#include <string>

#include "algo/schedule.hpp"

namespace trib::testing {

inline const AlgoInfo& allReduceAlgo(Algo algo) {
  const AlgoInfo* info = findAlgorithm(Coll::AllReduce, algo);
  if (!info) throw std::runtime_error(std::string("no all-reduce ") + algoName(algo));
  return *info;
}

// An all-reduce of `count` elements per rank in slices of `chunkElems`.
inline CollArgs allReduceArgs(int n, uint64_t count, bool inPlace = false, uint64_t chunkElems = 1 << 16) {
  CollArgs a;
  a.coll = Coll::AllReduce;
  a.nranks = n;
  a.count = count;
  a.inPlace = inPlace;
  a.chunkElems = chunkElems;
  return a;
}

// An all-reduce over windows of `windowElems` elements (two cells), the first chunk in `cell`.
inline CollArgs windowArgs(int n, uint64_t count, uint64_t windowElems, int cell = 0, bool inPlace = false) {
  CollArgs a;
  a.nranks = n;
  a.count = count;
  a.windowElems = windowElems;
  a.windowCell = cell;
  a.inPlace = inPlace;
  return a;
}

}  // namespace trib::testing
