// Rabenseifner all-reduce: recursive-halving reduce-scatter, then recursive-doubling
// all-gather, over the largest power of two p <= n ranks. The n - p extra ranks are folded in
// first: of ranks 0..2(n-p)-1 each even rank hands its whole input to the odd rank above it, in
// the order that rank's first halving step uses it (rhdFoldSendsFirst), and gets the result back
// at the end.
#include "algo/algo_util.hpp"
#include "algo/algorithms.hpp"

#include <array>

namespace trib::algo {
namespace {

struct Rhd {
  int p = 1, rem = 0;
  explicit Rhd(int n) {
    while (p * 2 <= n) p *= 2;
    rem = n - p;
  }
  // Rank in the power-of-two group, or -1 for a folded-away rank.
  int inner(int r) const { return r < 2 * rem ? (r % 2 ? r / 2 : -1) : r - rem; }
  int outer(int v) const { return v < rem ? 2 * v + 1 : v + rem; }
};

// A folded-away rank's input reduced into the same elements of the output, slice by slice.
struct FoldIn {
  int peer = -1;
  uint64_t offset = 0, count = 0;
};

// Sends element range `snd` and folds element range `keep` in from `peer`, slice by slice; each
// slice after `fold`'s slice of as many elements, where it brings some of them.
Generator<Step> exchange(CollArgs a, int peer, Region snd, Region keepSrc, Region keepDst, bool reduce,
                         FoldIn fold = {}) {
  const uint64_t chunk = chunkOf(a);
  const uint64_t slices = std::max(numSlices(snd.count, chunk), numSlices(keepDst.count, chunk));
  for (uint64_t j = 0; j < slices; ++j) {
    const uint64_t sl = sliceLen(snd.count, chunk, j), kl = sliceLen(keepDst.count, chunk, j);
    if (const uint64_t fl = sliceLen(fold.count, chunk, j); fl) {
      const uint64_t at = fold.offset + j * chunk;
      co_yield Step::recvReduce(fold.peer, inR(at, fl), outR(at, fl));
    }
    if (sl) co_yield Step::send(peer, shift(snd, j * chunk, sl));
    if (kl && reduce)
      co_yield Step::recvReduce(peer, shift(keepSrc, j * chunk, kl), shift(keepDst, j * chunk, kl));
    if (kl && !reduce) co_yield Step::recv(peer, shift(keepDst, j * chunk, kl));
  }
}

Generator<Step> rhdAllReduce(CollArgs a, int rank) {
  const int n = a.nranks;
  if (n == 1) {
    TRIB_YIELD_ALL(localCopy(a, rank));
    co_return;
  }
  const Rhd g(n);
  const uint64_t c = a.count;
  const Region none{Buf::Output, 0, 0};
  const int v = g.inner(rank);
  auto range = [&](int b0, int b1) {  // elements of blocks [b0, b1) of p
    const uint64_t e0 = blockBegin(c, g.p, b0), e1 = blockBegin(c, g.p, b1);
    return std::pair<uint64_t, uint64_t>{e0, e1 - e0};
  };
  // The fold's halves, the one the folding partner (inner rank w) keeps in its first halving
  // step first when `keptFirst`, else the one it sends away first; and the result back, first
  // the half its last doubling step does not bring. Element ranges (offset, count).
  auto halves = [&](int w, bool keptFirst) {
    const bool lower = (w & (g.p / 2)) == 0;
    return lower == keptFirst ? std::array{range(0, g.p / 2), range(g.p / 2, g.p)}
                              : std::array{range(g.p / 2, g.p), range(0, g.p / 2)};
  };
  const bool foldKeptFirst = !rhdFoldSendsFirst(g.p, c, chunkOf(a));
  if (v < 0) {  // folded away: contribute, then wait for the result
    const int w = g.inner(rank + 1);
    for (const auto& [o, len] : halves(w, foldKeptFirst))
      TRIB_YIELD_ALL(exchange(a, rank + 1, inR(o, len), none, none, false));
    for (const auto& [o, len] : halves(w, true))
      TRIB_YIELD_ALL(exchange(a, rank + 1, none, none, outR(o, len), false));
    co_return;
  }
  bool inOutput = false;  // where the rank's running sums live (in place: the same memory)
  FoldIn secondHalf;      // the fold's second half, taken in slice by slice by the first step
  if (rank < 2 * g.rem) {
    const auto h = halves(v, foldKeptFirst);
    TRIB_YIELD_ALL(
        exchange(a, rank - 1, none, inR(h[0].first, h[0].second), outR(h[0].first, h[0].second), true));
    secondHalf = {rank - 1, h[1].first, h[1].second};
    inOutput = true;
  }
  // Reduce-scatter: halve the window each round; keep the half containing block v.
  int lo = 0, hi = g.p;
  for (int mask = g.p / 2; mask >= 1; mask /= 2) {
    const int peer = g.outer(v ^ mask), mid = lo + mask;
    const bool lower = (v & mask) == 0;
    auto [ko, kn] = lower ? range(lo, mid) : range(mid, hi);
    auto [so, sn] = lower ? range(mid, hi) : range(lo, mid);
    const Region src = inOutput ? outR(so, sn) : inR(so, sn);
    const Region keepSrc = inOutput ? outR(ko, kn) : inR(ko, kn);
    TRIB_YIELD_ALL(exchange(a, peer, src, keepSrc, outR(ko, kn), true, secondHalf));
    secondHalf = {};
    inOutput = true;
    if (lower) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  // All-gather: double the window each round.
  for (int mask = 1; mask < g.p; mask *= 2) {
    const int peerV = v ^ mask;
    const int mine0 = v & ~(mask - 1), theirs0 = peerV & ~(mask - 1);
    auto [mo, mn] = range(mine0, mine0 + mask);
    auto [to, tn] = range(theirs0, theirs0 + mask);
    TRIB_YIELD_ALL(exchange(a, g.outer(peerV), outR(mo, mn), none, outR(to, tn), false));
  }
  if (rank < 2 * g.rem)
    for (const auto& [o, len] : halves(v, true))
      TRIB_YIELD_ALL(exchange(a, rank - 1, outR(o, len), none, none, false));
}

// All-gather by recursive doubling over the same power-of-two group. Inner rank v stands for
// the real ranks it folded in ({2v, 2v+1} or {v+rem}); a window of inner ranks is then a
// contiguous run of real blocks, so every exchange is one contiguous range of the output.
Generator<Step> rhdAllGather(CollArgs a, int rank) {
  const int n = a.nranks;
  const Rhd g(n);
  const uint64_t c = a.count;
  const Region none{Buf::Output, 0, 0};
  const uint64_t mine = static_cast<uint64_t>(rank) * c;
  if (!a.inPlace) {
    const uint64_t chunk = chunkOf(a);
    for (uint64_t j = 0; j < numSlices(c, chunk); ++j) {
      co_yield Step::copy(inR(j * chunk, sliceLen(c, chunk, j)),
                          outR(mine + j * chunk, sliceLen(c, chunk, j)));
    }
  }
  if (n == 1) co_return;
  const int v = g.inner(rank);
  if (v < 0) {  // folded away: hand the block over, get everything back
    TRIB_YIELD_ALL(exchange(a, rank + 1, inR(0, c), none, none, false));
    TRIB_YIELD_ALL(exchange(a, rank + 1, none, none, outR(0, mine), false));
    TRIB_YIELD_ALL(exchange(a, rank + 1, none, none, outR(mine + c, (n - rank - 1) * c), false));
    co_return;
  }
  if (rank < 2 * g.rem) TRIB_YIELD_ALL(exchange(a, rank - 1, none, none, outR(mine - c, c), false));
  auto firstBlock = [&](int w) { return static_cast<uint64_t>(w < g.rem ? 2 * w : w + g.rem); };
  for (int mask = 1; mask < g.p; mask *= 2) {
    const int peerV = v ^ mask;
    const int m0 = v & ~(mask - 1), t0 = peerV & ~(mask - 1);
    const Region snd = outR(firstBlock(m0) * c, (firstBlock(m0 + mask) - firstBlock(m0)) * c);
    const Region rcv = outR(firstBlock(t0) * c, (firstBlock(t0 + mask) - firstBlock(t0)) * c);
    TRIB_YIELD_ALL(exchange(a, g.outer(peerV), snd, none, rcv, false));
  }
  if (rank < 2 * g.rem) {
    const uint64_t theirs = mine - c;  // the folded rank already has its own block
    TRIB_YIELD_ALL(exchange(a, rank - 1, outR(0, theirs), none, none, false));
    TRIB_YIELD_ALL(exchange(a, rank - 1, outR(mine, (n - rank) * c), none, none, false));
  }
}

}  // namespace

// The half the first halving step sends, first, lets that step start as the fold begins instead
// of halfway through it (5-7 ranks on one switch at 16 MiB: the replay 10-13% faster). With two
// inner ranks the kept half is final after the one halving step and goes straight back out both
// ways (the doubling and the unfold), so it comes first (3 ranks at 256 MiB: 24% faster so). And
// where the folding rank's list (about six steps a slice of the vector: the fold, both phases'
// sends and receptions, the unfold) passes the executor's window, the replay lost 7-14% with the
// sent half first and about 2% with the kept half first (1 GiB, 6-48 ranks; docs/PLANNER.md).
static bool sixStepsASliceFitTheWindow(uint64_t len, uint64_t chunkElems) {
  return 6 * numSlices(len, std::max<uint64_t>(1, chunkElems)) <= kExecutorWindowSteps;
}

bool rhdFoldSendsFirst(int pof2, uint64_t count, uint64_t chunkElems) {
  return pof2 > 2 && sixStepsASliceFitTheWindow(count, chunkElems);
}

// Two inner ranks: the folding rank's list before its unfold is six steps a slice of a half (the
// fold's first half; the halving's fold, send and reception; the doubling's send and reception).
bool rhdUnfoldInWindow(int pof2, uint64_t count, uint64_t chunkElems) {
  return pof2 == 2 && sixStepsASliceFitTheWindow(count - count / 2, chunkElems);
}

const AlgoInfo kRhdAllGather = {Algo::Rhd, Coll::AllGather, validArgs, noScratch, checked<rhdAllGather>};
const AlgoInfo kRhdAllReduce = {Algo::Rhd, Coll::AllReduce, validArgs, noScratch, checked<rhdAllReduce>};

}  // namespace trib::algo
