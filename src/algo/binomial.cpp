// Binomial-tree schedules rooted at args.root. Ranks are renumbered relative to the root
// (v = rank - root mod n); v's parent is v minus its lowest set bit, its children are v + m
// for powers of two m below that bit. Subtree of v = relative ranks [v, v + lowbit(v)).
#include "algo/algo_util.hpp"
#include "algo/algorithms.hpp"

namespace trib::algo {
namespace {

constexpr uint64_t kSlots = 4;  // scratch slots of one slice each for pass-through reductions

int rel(const CollArgs& a, int rank) { return mod(rank - a.root, a.nranks); }
int real(const CollArgs& a, int v) { return mod(v + a.root, a.nranks); }
int64_t lowbit(int64_t v) { return v & -v; }
// The largest power of two not above n-1 (the root's first child distance), 0 for n == 1.
int64_t topMask(int n) {
  int64_t m = 1;
  while (m * 2 < n) m *= 2;
  return n > 1 ? m : 0;
}
// Children of v, largest subtree first (the order data goes down).
std::vector<int> childrenDown(int n, int v) {
  std::vector<int> out;
  for (int64_t m = v == 0 ? topMask(n) : lowbit(v) / 2; m >= 1; m /= 2) {
    if (v + m < n) out.push_back(static_cast<int>(v + m));
  }
  return out;
}
uint64_t subtreeSize(int n, int v) { return v == 0 ? n : std::min<int64_t>(lowbit(v), n - v); }
int parentOf(int v) { return static_cast<int>(v - lowbit(v)); }

// Broadcast: receive each slice from the parent, pass it to the children.
Generator<Step> binomialBroadcast(CollArgs a, int rank) {
  const int v = rel(a, rank);
  const uint64_t chunk = chunkOf(a), c = a.count;
  const std::vector<int> kids = childrenDown(a.nranks, v);
  for (uint64_t j = 0; j < numSlices(c, chunk); ++j) {
    const uint64_t off = j * chunk, len = sliceLen(c, chunk, j);
    Region src = outR(off, len);
    if (v == 0) {
      src = inR(off, len);
      if (!a.inPlace) co_yield Step::copy(src, outR(off, len));
    } else {
      co_yield Step::recv(real(a, parentOf(v)), outR(off, len));
    }
    for (int k : kids) co_yield Step::send(real(a, k), src);
  }
}

// Reduce: fold the children in (smallest subtree first, they finish first), pass the sum up.
uint64_t binomialReduceScratch(const CollArgs& a, int rank) {
  const int v = rel(a, rank);
  return v != 0 && !childrenDown(a.nranks, v).empty() ? std::min(a.count, kSlots * chunkOf(a)) : 0;
}

Generator<Step> binomialReduce(CollArgs a, int rank) {
  const int v = rel(a, rank);
  const uint64_t chunk = chunkOf(a), c = a.count;
  std::vector<int> kids = childrenDown(a.nranks, v);
  std::reverse(kids.begin(), kids.end());
  for (uint64_t j = 0; j < numSlices(c, chunk); ++j) {
    const uint64_t off = j * chunk, len = sliceLen(c, chunk, j);
    const Region mine = inR(off, len);
    const Region acc = v == 0 ? outR(off, len) : scrR((j % kSlots) * chunk, len);
    for (size_t i = 0; i < kids.size(); ++i) {
      co_yield Step::recvReduce(real(a, kids[i]), i == 0 ? mine : acc, acc);
    }
    if (v != 0) {
      co_yield Step::send(real(a, parentOf(v)), kids.empty() ? mine : acc);
    } else if (kids.empty() && !a.inPlace) {
      co_yield Step::copy(mine, acc);  // a single rank
    }
  }
}

// Where a rank keeps relative blocks [v, v + subtree): the root in the real rank layout of its
// output (gather) or input (scatter), other ranks in scratch in relative order.
struct Place {
  Buf buf;
  bool realLayout;
  int base;  // relative block at offset 0 (non-root)
};
Region placeOf(const CollArgs& a, const Place& p, int v, uint64_t elem, uint64_t len) {
  const uint64_t block = p.realLayout ? static_cast<uint64_t>(real(a, v)) : static_cast<uint64_t>(v - p.base);
  return {p.buf, block * a.count + elem, len};
}

// Moves relative blocks [v0, v1) between this rank (at `p`) and `peer`, in slices. Ranges are
// cut where the real rank wraps to 0 so each message is contiguous in the root's layout too.
Generator<Step> moveBlocks(CollArgs a, int peer, bool send, int v0, int v1, Place p) {
  const uint64_t chunk = chunkOf(a), c = a.count;
  const int wrap = a.nranks - a.root;  // first relative rank whose real rank is 0
  while (v0 < v1) {
    const int end = v0 < wrap && wrap < v1 ? wrap : v1;
    const uint64_t elems = static_cast<uint64_t>(end - v0) * c;
    for (uint64_t j = 0; j < numSlices(elems, chunk); ++j) {
      const Region r = placeOf(a, p, v0, j * chunk, sliceLen(elems, chunk, j));
      co_yield send ? Step::send(peer, r) : Step::recv(peer, r);
    }
    v0 = end;
  }
}

uint64_t binomialGatherScratch(const CollArgs& a, int rank) {
  const int v = rel(a, rank);
  return v != 0 && !childrenDown(a.nranks, v).empty() ? subtreeSize(a.nranks, v) * a.count : 0;
}

// Gather: collect the subtree's blocks (children in order of growing subtrees), send them up.
Generator<Step> binomialGather(CollArgs a, int rank) {
  const int n = a.nranks, v = rel(a, rank);
  const uint64_t chunk = chunkOf(a), c = a.count;
  std::vector<int> kids = childrenDown(n, v);
  std::reverse(kids.begin(), kids.end());
  const Place here = v == 0 ? Place{Buf::Output, true, 0} : Place{Buf::Scratch, false, v};
  if (v != 0 && kids.empty()) {  // a leaf sends its input
    for (uint64_t j = 0; j < numSlices(c, chunk); ++j)
      co_yield Step::send(real(a, parentOf(v)), inR(j * chunk, sliceLen(c, chunk, j)));
    co_return;
  }
  if (!(v == 0 && a.inPlace)) {
    for (uint64_t j = 0; j < numSlices(c, chunk); ++j) {
      co_yield Step::copy(inR(j * chunk, sliceLen(c, chunk, j)),
                          placeOf(a, here, v, j * chunk, sliceLen(c, chunk, j)));
    }
  }
  for (int k : kids) {
    TRIB_YIELD_ALL(moveBlocks(a, real(a, k), false, k, k + static_cast<int>(subtreeSize(n, k)), here));
  }
  if (v != 0)
    TRIB_YIELD_ALL(
        moveBlocks(a, real(a, parentOf(v)), true, v, v + static_cast<int>(subtreeSize(n, v)), here));
}

// Scatter: receive the subtree's blocks, hand the children theirs (largest first), keep one.
Generator<Step> binomialScatter(CollArgs a, int rank) {
  const int n = a.nranks, v = rel(a, rank);
  const uint64_t chunk = chunkOf(a), c = a.count;
  const std::vector<int> kids = childrenDown(n, v);
  if (v != 0 && kids.empty()) {  // a leaf receives straight into its output
    for (uint64_t j = 0; j < numSlices(c, chunk); ++j)
      co_yield Step::recv(real(a, parentOf(v)), outR(j * chunk, sliceLen(c, chunk, j)));
    co_return;
  }
  const Place here = v == 0 ? Place{Buf::Input, true, 0} : Place{Buf::Scratch, false, v};
  if (v != 0)
    TRIB_YIELD_ALL(
        moveBlocks(a, real(a, parentOf(v)), false, v, v + static_cast<int>(subtreeSize(n, v)), here));
  for (int k : kids) {
    TRIB_YIELD_ALL(moveBlocks(a, real(a, k), true, k, k + static_cast<int>(subtreeSize(n, k)), here));
  }
  if (!(v == 0 && a.inPlace)) {
    for (uint64_t j = 0; j < numSlices(c, chunk); ++j) {
      co_yield Step::copy(placeOf(a, here, v, j * chunk, sliceLen(c, chunk, j)),
                          outR(j * chunk, sliceLen(c, chunk, j)));
    }
  }
}

uint64_t binomialScatterScratch(const CollArgs& a, int rank) { return binomialGatherScratch(a, rank); }

}  // namespace

const AlgoInfo kBinomialBroadcast = {Algo::Binomial, Coll::Broadcast, validArgs, noScratch,
                                     checked<binomialBroadcast>};
const AlgoInfo kBinomialReduce = {Algo::Binomial, Coll::Reduce, validArgs,
                                  checkedScratch<binomialReduceScratch>, checked<binomialReduce>};
const AlgoInfo kBinomialGather = {Algo::Binomial, Coll::Gather, validArgs,
                                  checkedScratch<binomialGatherScratch>, checked<binomialGather>};
const AlgoInfo kBinomialScatter = {Algo::Binomial, Coll::Scatter, validArgs,
                                   checkedScratch<binomialScatterScratch>, checked<binomialScatter>};

}  // namespace trib::algo
