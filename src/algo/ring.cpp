// Ring schedules: all-reduce = reduce-scatter + all-gather around the ring 0 -> 1 -> ... -> n-1 -> 0.
// Data is cut into n balanced blocks; every block is further cut into slices of chunkElems, and
// groups of kGroupSlices slices go through all rounds in turn (slices inner, rounds outer).
#include "algo/algo_util.hpp"
#include "algo/algorithms.hpp"

namespace trib::algo {
namespace {

// Slice j of block b of a `count`-element buffer split into n blocks: {offset, length}.
struct Piece {
  uint64_t off, len;
};
Piece blockSlice(uint64_t count, int n, int b, uint64_t chunk, uint64_t j) {
  return {blockBegin(count, n, b) + j * chunk, sliceLen(blockSize(count, n, b), chunk, j)};
}

Generator<Step> ringAllReduce(CollArgs a, int rank) {
  const int n = a.nranks;
  if (n == 1) {
    TRIB_YIELD_ALL(localCopy(a, rank));
    co_return;
  }
  const int right = mod(rank + 1, n), left = mod(rank - 1, n);
  const uint64_t chunk = chunkOf(a);
  const uint64_t slices = numSlices(blockSize(a.count, n, 0), chunk);  // block 0 is the largest
  for (uint64_t g0 = 0; g0 < slices; g0 += kGroupSlices) {
    const uint64_t g1 = std::min(slices, g0 + kGroupSlices);
    // Reduce-scatter: in round s send block r-s, fold the incoming block r-s-1 into output.
    // Round 0 sends straight from the input; later rounds forward the partial sums in output.
    for (int s = 0; s < n - 1; ++s) {
      for (uint64_t j = g0; j < g1; ++j) {
        Piece snd = blockSlice(a.count, n, mod(rank - s, n), chunk, j);
        Piece rcv = blockSlice(a.count, n, mod(rank - s - 1, n), chunk, j);
        if (snd.len) co_yield Step::send(right, s == 0 ? inR(snd.off, snd.len) : outR(snd.off, snd.len));
        if (rcv.len) co_yield Step::recvReduce(left, inR(rcv.off, rcv.len), outR(rcv.off, rcv.len));
      }
    }
    // All-gather: rank r now holds block r+1 complete; pass completed blocks around.
    for (int s = 0; s < n - 1; ++s) {
      for (uint64_t j = g0; j < g1; ++j) {
        Piece snd = blockSlice(a.count, n, mod(rank + 1 - s, n), chunk, j);
        Piece rcv = blockSlice(a.count, n, mod(rank - s, n), chunk, j);
        if (snd.len) co_yield Step::send(right, outR(snd.off, snd.len));
        if (rcv.len) co_yield Step::recv(left, outR(rcv.off, rcv.len));
      }
    }
  }
}

// Reduce-scatter: rank r ends with block r, so round s sends block r-s-1 and folds in r-s-2.
// Partial sums travel through two scratch areas of one slice group each, used by alternate
// rounds (the output holds only the rank's own block); the last round folds into the output.
uint64_t ringReduceScatterScratch(const CollArgs& a, int) {
  return a.nranks > 2 ? 2 * std::min(kGroupSlices * chunkOf(a), a.count) : 0;
}

Generator<Step> ringReduceScatter(CollArgs a, int rank) {
  const int n = a.nranks;
  if (n == 1) {
    TRIB_YIELD_ALL(localCopy(a, rank));
    co_return;
  }
  const int right = mod(rank + 1, n), left = mod(rank - 1, n);
  const uint64_t chunk = chunkOf(a), c = a.count;
  const uint64_t area = std::min(kGroupSlices * chunk, c), slices = numSlices(c, chunk);
  for (uint64_t g0 = 0; g0 < slices; g0 += kGroupSlices) {
    const uint64_t g1 = std::min(slices, g0 + kGroupSlices);
    for (int s = 0; s < n - 1; ++s) {
      const uint64_t sndBlock = static_cast<uint64_t>(mod(rank - s - 1, n)) * c;
      const uint64_t rcvBlock = static_cast<uint64_t>(mod(rank - s - 2, n)) * c;
      for (uint64_t j = g0; j < g1; ++j) {
        const uint64_t off = j * chunk, len = sliceLen(c, chunk, j), inArea = (j - g0) * chunk;
        co_yield Step::send(right,
                            s == 0 ? inR(sndBlock + off, len) : scrR(((s - 1) % 2) * area + inArea, len));
        if (s == n - 2) {
          co_yield Step::recvReduce(left, inR(rcvBlock + off, len), outR(off, len));
        } else {
          co_yield Step::recvReduce(left, inR(rcvBlock + off, len), scrR((s % 2) * area + inArea, len));
        }
      }
    }
  }
}

// All-gather: rank r's block starts in its input; round s passes on block r-s.
Generator<Step> ringAllGather(CollArgs a, int rank) {
  const int n = a.nranks;
  const uint64_t chunk = chunkOf(a), c = a.count, slices = numSlices(c, chunk);
  const int right = mod(rank + 1, n), left = mod(rank - 1, n);
  if (!a.inPlace) {
    for (uint64_t j = 0; j < slices; ++j) {
      co_yield Step::copy(inR(j * chunk, sliceLen(c, chunk, j)),
                          outR(static_cast<uint64_t>(rank) * c + j * chunk, sliceLen(c, chunk, j)));
    }
  }
  for (uint64_t g0 = 0; g0 < slices; g0 += kGroupSlices) {
    const uint64_t g1 = std::min(slices, g0 + kGroupSlices);
    for (int s = 0; s < n - 1; ++s) {
      const uint64_t sndBlock = static_cast<uint64_t>(mod(rank - s, n)) * c;
      const uint64_t rcvBlock = static_cast<uint64_t>(mod(rank - s - 1, n)) * c;
      for (uint64_t j = g0; j < g1; ++j) {
        const uint64_t off = j * chunk, len = sliceLen(c, chunk, j);
        co_yield Step::send(right, s == 0 ? inR(off, len) : outR(sndBlock + off, len));
        co_yield Step::recv(left, outR(rcvBlock + off, len));
      }
    }
  }
}

}  // namespace

const AlgoInfo kRingAllReduce = {Algo::Ring, Coll::AllReduce, validArgs, noScratch, checked<ringAllReduce>};
const AlgoInfo kRingReduceScatter = {Algo::Ring, Coll::ReduceScatter, validArgs,
                                     checkedScratch<ringReduceScatterScratch>, checked<ringReduceScatter>};
const AlgoInfo kRingAllGather = {Algo::Ring, Coll::AllGather, validArgs, noScratch, checked<ringAllGather>};

}  // namespace trib::algo
