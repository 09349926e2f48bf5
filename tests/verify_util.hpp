// Helpers shared by the verifier's window tests (test_verify_windows, test_verify_scale).
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
