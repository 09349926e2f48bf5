// Pipelined chains through the root: root -> root+1 -> ... -> root+n-1 (broadcast) and the
// reverse (reduce). Every slice moves one hop per step, so a long message costs about one
// message time plus n-1 slice times.
#include "algo/algo_util.hpp"
#include "algo/algorithms.hpp"

namespace trib::algo {
namespace {

constexpr uint64_t kSlots = 4;  // scratch slots of one slice each for pass-through reductions

Generator<Step> chainBroadcast(CollArgs a, int rank) {
  const int n = a.nranks, v = mod(rank - a.root, n);
  const uint64_t chunk = chunkOf(a), c = a.count;
  for (uint64_t j = 0; j < numSlices(c, chunk); ++j) {
    const uint64_t off = j * chunk, len = sliceLen(c, chunk, j);
    Region src = outR(off, len);
    if (v == 0) {
      src = inR(off, len);
      if (!a.inPlace) co_yield Step::copy(src, outR(off, len));
    } else {
      co_yield Step::recv(mod(rank - 1, n), outR(off, len));
    }
    if (v + 1 < n) co_yield Step::send(mod(rank + 1, n), src);
  }
}

// Reduce: the chain starts at root-1 (relative n-1) and ends at the root; every rank folds its
// input into the partial sum coming from behind.
uint64_t chainReduceScratch(const CollArgs& a, int rank) {
  const int v = mod(rank - a.root, a.nranks);
  return v != 0 && v + 1 < a.nranks ? std::min(a.count, kSlots * chunkOf(a)) : 0;
}

Generator<Step> chainReduce(CollArgs a, int rank) {
  const int n = a.nranks, v = mod(rank - a.root, n);
  const uint64_t chunk = chunkOf(a), c = a.count;
  for (uint64_t j = 0; j < numSlices(c, chunk); ++j) {
    const uint64_t off = j * chunk, len = sliceLen(c, chunk, j);
    const Region mine = inR(off, len);
    const Region acc = v == 0 ? outR(off, len) : scrR((j % kSlots) * chunk, len);
    const bool last = v + 1 == n;
    if (!last) co_yield Step::recvReduce(mod(rank + 1, n), mine, acc);
    if (v != 0) {
      co_yield Step::send(mod(rank - 1, n), last ? mine : acc);
    } else if (last && !a.inPlace) {
      co_yield Step::copy(mine, acc);  // a single rank
    }
  }
}

}  // namespace

const AlgoInfo kChainBroadcast = {Algo::Chain, Coll::Broadcast, validArgs, noScratch,
                                  checked<chainBroadcast>};
const AlgoInfo kChainReduce = {Algo::Chain, Coll::Reduce, validArgs, checkedScratch<chainReduceScratch>,
                               checked<chainReduce>};

}  // namespace trib::algo
