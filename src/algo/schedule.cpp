// Buffer sizes per collective, in-place aliasing, and the algorithm registry.
#include "algo/schedule.hpp"

#include <stdexcept>

#include "algo/algo_util.hpp"
#include "algo/algorithms.hpp"
#include "common/status.hpp"

namespace trib {

uint64_t inputCount(const CollArgs& a, int rank) {
  const uint64_t n = static_cast<uint64_t>(a.nranks);
  switch (a.coll) {
    case Coll::AllReduce:
    case Coll::Reduce:
    case Coll::AllGather:
    case Coll::Gather:
      return a.count;
    case Coll::Broadcast:
      return rank == a.root ? a.count : 0;
    case Coll::ReduceScatter:
    case Coll::AlltoAll:
      return n * a.count;
    case Coll::Scatter:
      return rank == a.root ? n * a.count : 0;
    case Coll::Barrier:
      return 1;  // the arrival token
  }
  return 0;
}

uint64_t outputCount(const CollArgs& a, int rank) {
  const uint64_t n = static_cast<uint64_t>(a.nranks);
  switch (a.coll) {
    case Coll::AllReduce:
    case Coll::Broadcast:
    case Coll::ReduceScatter:
    case Coll::Scatter:
      return a.count;
    case Coll::Reduce:
      return rank == a.root ? a.count : 0;
    case Coll::AllGather:
    case Coll::AlltoAll:
      return n * a.count;
    case Coll::Gather:
      return rank == a.root ? n * a.count : 0;
    case Coll::Barrier:
      return 0;
  }
  return 0;
}

int64_t inPlaceInputOffset(const CollArgs& a, int rank) {
  const int64_t c = static_cast<int64_t>(a.count);
  switch (a.coll) {
    case Coll::AllGather:
    case Coll::Gather:
      return static_cast<int64_t>(rank) * c;  // input is the rank's block of output
    case Coll::ReduceScatter:
    case Coll::Scatter:
      return -static_cast<int64_t>(rank) * c;  // output is the rank's block of input
    default:
      return 0;
  }
}

bool supportsInPlace(Coll c) { return c != Coll::AlltoAll; }

uint64_t switchStepCount(Coll c, int root, int rank, const Step& s) {
  switch (c) {
    case Coll::Reduce:
    case Coll::AllGather:
      return s.src.count;
    case Coll::Broadcast:
      return rank == root ? s.src.count : s.dst.count;
    case Coll::Barrier:
      return 0;
    default:  // allreduce, reducescatter
      return s.dst.count;
  }
}

namespace {

using namespace algo;

// Preference order within each collective = the default choice when nothing else decides.
// clang-format off
const AlgoInfo* const kRegistry[] = {
    &kRingAllReduce, &kTreeAllReduce, &kRhdAllReduce, &kDirectAllReduce, &kHierarchicalAllReduce,
    &kAllgatherReduceAllReduce,
    &kRingReduceScatter, &kDirectReduceScatter,
    &kRingAllGather, &kRhdAllGather, &kDirectAllGather,
    &kBinomialBroadcast, &kChainBroadcast,
    &kBinomialReduce, &kChainReduce,
    &kDirectAlltoAll,
    &kDirectGather, &kBinomialGather,
    &kDirectScatter, &kBinomialScatter,
    &kDirectBarrier,
    // Chosen only when the communicator has a usable aggregation switch (plan_select.cpp).
    &kSwitchAllReduce, &kSwitchReduce, &kSwitchBroadcast, &kSwitchAllGather, &kSwitchReduceScatter,
    &kSwitchBarrier,
    // Chosen only when every rank's window is mapped (needsWindows: one host, or one process).
    &kOneShotAllReduce, &kTwoShotAllReduce,
    &kHierSwitchAllReduce,
};
// clang-format on

}  // namespace

std::vector<const AlgoInfo*> algorithmsFor(Coll c) {
  std::vector<const AlgoInfo*> out;
  for (const AlgoInfo* info : kRegistry) {
    if (info->coll == c) out.push_back(info);
  }
  return out;
}

const AlgoInfo* findAlgorithm(Coll c, Algo a) {
  for (const AlgoInfo* info : kRegistry) {
    if (info->coll == c && info->algo == a) return info;
  }
  return nullptr;
}

std::vector<Step> materialize(const AlgoInfo& algo, const CollArgs& args, int rank) {
  if (!algo.supports(args)) {
    throw std::invalid_argument(strprintf("%s %s cannot run this request (check AlgoInfo::supports first)",
                                          algoName(algo.algo), collName(algo.coll)));
  }
  std::vector<Step> steps;
  auto gen = algo.generate(args, rank);
  while (gen.next()) steps.push_back(gen.value());
  return steps;
}

namespace algo {

bool validArgs(const CollArgs& a) {
  // nranks * count must fit with room to spare (buffer sizes and offsets are computed from it).
  return a.nranks >= 1 && a.root >= 0 && a.root < a.nranks && a.chunkElems >= 1 &&
         a.count <= (UINT64_MAX / 4) / static_cast<uint64_t>(a.nranks) &&
         (!a.inPlace || supportsInPlace(a.coll));
}

void requireValid(const CollArgs& a, int rank) {
  if (!validArgs(a) || rank < 0 || rank >= a.nranks) {
    throw std::invalid_argument(
        strprintf("schedule requested for an unsupported request: %s, rank %d of %d, root %d, count %llu, "
                  "chunkElems %llu%s "
                  "(check AlgoInfo::supports first)",
                  collName(a.coll), rank, a.nranks, a.root, static_cast<unsigned long long>(a.count),
                  static_cast<unsigned long long>(a.chunkElems), a.inPlace ? ", in place" : ""));
  }
}

uint64_t noScratch(const CollArgs&, int) { return 0; }

Generator<Step> localCopy(CollArgs a, int rank) {
  if (a.inPlace) co_return;
  const uint64_t n = std::min(inputCount(a, rank), outputCount(a, rank));
  const uint64_t chunk = chunkOf(a);
  for (uint64_t j = 0; j < numSlices(n, chunk); ++j) {
    co_yield Step::copy(inR(j * chunk, sliceLen(n, chunk, j)), outR(j * chunk, sliceLen(n, chunk, j)));
  }
}

}  // namespace algo
}  // namespace trib
