// One-shot and two-shot all-reduce (the names NVIDIA's symmetric-memory kernels use), as
// peer-memory schedules: every rank copies its input into its own window, signals its peers, and
// reads theirs. They need every rank's window mapped (one host: the shm transport's windows;
// later CUDA IPC or NVLS), and make up for it with few synchronisations.
//
// One-shot (small messages): after one signal exchange every rank folds all n inputs, in rank
// order, straight from the windows into its output, so every rank gets the same bits. From
// kOneShotExposeFromElems it exposes its input, and ends with one more exchange; in place it then
// folds into scratch and copies that to the output after the exchange (its input is read until
// then), which leaves its peers reading the input where it is instead of waiting for a copy.
// Two-shot (any size, in cell-sized chunks): each rank stages the slices its peers reduce in its
// cell and folds slice `rank` of every input in rank order. Out of place it publishes the result
// in its own cell and, after a second signal exchange, gets the others' results. In place it folds
// where its slice lies (foldInRankOrderInPlace, the same bits) and puts the result into every
// peer's cell, where the peer's own copy of that slice lay: written, not read, so each slice's
// lines stay with the rank that reduces it, and after the second exchange every rank has all
// results. Two synchronisations per chunk either way.
// Chunks alternate between the window's two cells (schedule.hpp), so consecutive chunks and calls
// need no acknowledgement. In place needs no scratch: peers read the input before anyone writes it.
// Two-shot puts what peers read into its cell with expose (schedule.hpp): where the executor can
// map a rank's buffers for its peers (tribMemAlloc memory on shm, any memory on loopback threads),
// peers read the input slices and the reduced slice straight from that rank's buffers, and put
// into them, and nothing is staged. Out of place the alias is why a call ends with one more
// signal exchange: a rank's buffers are the caller's again only once every peer has read its
// reduced slice from them. In place nobody reads a rank's buffers after the second exchange.
#include "algo/algo_util.hpp"
#include "algo/algorithms.hpp"

namespace trib::algo {

namespace {

// Slices of a chunk begin on multiples of this many elements (a cache line for 4-byte types),
// so that no two ranks write one line.
constexpr uint64_t kSliceGrain = 16;

Region winR(uint64_t off, uint64_t n) { return {Buf::Window, off, n}; }

bool oneShotSupports(const CollArgs& a) {
  return validArgs(a) && a.coll == Coll::AllReduce && windowCellElems(a) > 0 && a.count <= windowCellElems(a);
}
bool twoShotSupports(const CollArgs& a) {
  return validArgs(a) && a.coll == Coll::AllReduce && windowCellElems(a) > 0;
}

void signalAll(int n, int rank, std::vector<Step>& out) {
  for (int p = 1; p < n; ++p) out.push_back(Step::signal(mod(rank + p, n)));
}
void waitAll(int n, int rank, std::vector<Step>& out) {
  for (int p = 1; p < n; ++p) out.push_back(Step::wait(mod(rank - p, n)));
}

// dst <- window(0)[at] op window(1)[at] op ... op window(n-1)[at], in rank order, this rank's own
// term from `own` (its window, or its input where that still holds it). The executor (and the
// simulator) run the first two steps as one: a copy followed by a reduce into the same region is
// one reduce of both sources.
void foldInRankOrder(int n, int rank, uint64_t at, Region own, Region dst, std::vector<Step>& out) {
  for (int j = 0; j < n; ++j) {
    const Region src = winR(at, dst.count);
    if (j == 0)
      out.push_back(j == rank ? Step::copy(own, dst) : Step::get(j, src, dst));
    else
      out.push_back(j == rank ? Step::reduce(own, dst) : Step::getReduce(j, src, dst));
  }
}

// The same fold in place, where dst holds this rank's own term: nothing is copied aside. The
// terms before it are folded into `prefix` (a range of the own window nobody reads) and then
// combined with it, as dst op prefix: the ops commute, so the bits are rank order's.
void foldInRankOrderInPlace(int n, int rank, uint64_t at, Region dst, Region prefix, std::vector<Step>& out) {
  if (rank == 1) out.push_back(Step::getReduce(0, winR(at, dst.count), dst));
  if (rank >= 2) {
    foldInRankOrder(rank, -1, at, Region{}, prefix, out);
    out.push_back(Step::reduce(prefix, dst));
  }
  for (int j = rank + 1; j < n; ++j) out.push_back(Step::getReduce(j, winR(at, dst.count), dst));
}

Generator<Step> oneShotAllReduce(CollArgs a, int rank) {
  if (a.count == 0) co_return;
  const int n = a.nranks;
  const uint64_t cell = windowCellBegin(a, a.windowCell);
  std::vector<Step> steps;
  // A large enough input is exposed (peers may read it where it is) and this rank reads its own
  // term from it; in place the fold goes to scratch, since the output is that input.
  const bool exposes = oneShotExposes(a);
  steps.push_back(exposes ? Step::expose(inR(0, a.count), winR(cell, a.count))
                          : Step::copy(inR(0, a.count), winR(cell, a.count)));
  signalAll(n, rank, steps);
  waitAll(n, rank, steps);
  const Region folded = exposes && a.inPlace ? scrR(0, a.count) : outR(0, a.count);
  foldInRankOrder(n, rank, cell, exposes ? inR(0, a.count) : winR(cell, a.count), folded, steps);
  if (exposes) {  // every peer has read this rank's input (as in two-shot)
    signalAll(n, rank, steps);
    waitAll(n, rank, steps);
    if (a.inPlace) steps.push_back(Step::copy(folded, outR(0, a.count)));
  }
  for (const Step& s : steps) co_yield s;
}

// Slice j of a chunk of `len` elements: [begin, begin + size), on kSliceGrain boundaries.
uint64_t sliceAt(uint64_t len, int n, int j) {
  const uint64_t grains = (len + kSliceGrain - 1) / kSliceGrain;
  return std::min(len, blockBegin(grains, static_cast<uint64_t>(n), static_cast<uint64_t>(j)) * kSliceGrain);
}

Generator<Step> twoShotAllReduce(CollArgs a, int rank) {
  const int n = a.nranks;
  const uint64_t cellElems = windowCellElems(a);
  std::vector<Step> steps;
  for (uint64_t k = 0, at = 0; at < a.count; ++k, at += cellElems) {
    const uint64_t len = std::min(cellElems, a.count - at);
    const uint64_t cell = windowCellBegin(a, a.windowCell + k);
    steps.clear();
    // Expose what the peers read: their slices of this chunk, before and after this rank's own,
    // which only this rank reads, straight from its input.
    const uint64_t mine = sliceAt(len, n, rank), mineLen = sliceAt(len, n, rank + 1) - mine;
    const uint64_t after = mine + mineLen, afterLen = len - after;
    if (mine > 0) steps.push_back(Step::expose(inR(at, mine), winR(cell, mine)));
    if (afterLen > 0) steps.push_back(Step::expose(inR(at + after, afterLen), winR(cell + after, afterLen)));
    signalAll(n, rank, steps);
    waitAll(n, rank, steps);
    if (mineLen > 0) {
      const Region dst = outR(at + mine, mineLen);
      if (a.inPlace) {
        // Reduce this rank's slice where it lies and put it where every peer's input slice lay:
        // through the peer's exposure straight into its buffer, else into its window.
        foldInRankOrderInPlace(n, rank, cell + mine, dst, winR(cell + mine, mineLen), steps);
        for (int p = 1; p < n; ++p)
          steps.push_back(Step::put(mod(rank + p, n), dst, winR(cell + mine, mineLen)));
      } else {
        // Reduce it into the output and expose it there, over the own slice of the cell (unread).
        foldInRankOrder(n, rank, cell + mine, inR(at + mine, mineLen), dst, steps);
        steps.push_back(Step::expose(dst, winR(cell + mine, mineLen)));
      }
    }
    signalAll(n, rank, steps);
    waitAll(n, rank, steps);
    if (a.inPlace) {
      // The peers' results are in this rank's buffer already where it was exposed (a copy onto
      // itself, which the executor skips), else in its window. Nobody reads its buffers now.
      if (mine > 0) steps.push_back(Step::copy(winR(cell, mine), outR(at, mine)));
      if (afterLen > 0) steps.push_back(Step::copy(winR(cell + after, afterLen), outR(at + after, afterLen)));
    } else {
      for (int p = 1; p < n; ++p) {
        const int j = mod(rank + p, n);
        const uint64_t b = sliceAt(len, n, j), e = sliceAt(len, n, j + 1);
        if (e > b) steps.push_back(Step::get(j, winR(cell + b, e - b), outR(at + b, e - b)));
      }
      if (at + len == a.count) {  // every peer has read this rank's buffers (see the header)
        signalAll(n, rank, steps);
        waitAll(n, rank, steps);
      }
    }
    for (const Step& s : steps) co_yield s;
  }
}

// In place from kOneShotExposeFromElems, one-shot folds into scratch (above).
uint64_t oneShotScratch(const CollArgs& a, int) {
  return a.nranks > 1 && a.inPlace && oneShotExposes(a) ? a.count : 0;
}

// A single rank: its window is its own; the schedules degenerate to copies.
template <Generator<Step> (*G)(CollArgs, int)>
Generator<Step> orLocalCopy(CollArgs a, int rank) {
  if (a.nranks == 1) {
    TRIB_YIELD_ALL(localCopy(a, rank));
    co_return;
  }
  TRIB_YIELD_ALL(G(a, rank));
}

}  // namespace

const AlgoInfo kOneShotAllReduce{Algo::OneShot, Coll::AllReduce, oneShotSupports,
                                 checkedScratch<oneShotScratch>, checked<orLocalCopy<oneShotAllReduce>>};
const AlgoInfo kTwoShotAllReduce{Algo::TwoShot, Coll::AllReduce, twoShotSupports, noScratch,
                                 checked<orLocalCopy<twoShotAllReduce>>};

}  // namespace trib::algo

namespace trib {
uint64_t windowChunks(Algo algo, const CollArgs& a) {
  if (!needsWindows(algo) || a.count == 0 || a.nranks == 1 || windowCellElems(a) == 0) return 0;
  return (a.count - 1) / windowCellElems(a) + 1;
}
}  // namespace trib
