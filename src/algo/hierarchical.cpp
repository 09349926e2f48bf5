// Hierarchical all-reduce: ring reduce-scatter inside each domain -> ring all-reduce of each
// rank's block across domains (all local ranks at once, each with its own network path) -> ring
// all-gather inside each domain. Domains are contiguous ranges of args.ranksPerDomain ranks (the
// planner sets it from the topology's NVLink domains). Network traffic per rank: 2(m-1)/m · S/d
// instead of the flat ring's 2(n-1)/n · S through one NIC.
#include <algorithm>
#include <optional>
#include <stdexcept>

#include "algo/algo_util.hpp"
#include "algo/algorithms.hpp"
#include "algo/domain_ring.hpp"

namespace trib::algo {
namespace {

// Every all-reduce (the registry's rule: an algorithm runs every shape of its collective). Without
// equal domains of >= 2 ranks (ranksPerDomain 0 = flat, 1, or not dividing nranks) the whole
// communicator is one domain: a sliced ring. The planner sets ranksPerDomain when it picks this.
bool hierSupports(const CollArgs& a) { return validArgs(a) && a.coll == Coll::AllReduce; }

// One ring round in slices of the chunk (both sides cut a block the same way): block `out` of
// `from` to `right`, block `in` from `left` into the output, reduced with the same slice of `fold`
// when there is one (else copied). Slice by slice, a send and then a receive: the executor starts
// steps only within a window past its first unfinished one, and with every send of a round before
// its receives, a round of more slices than the window left the receives out of reach while the
// sends waited for them (a hang at 64 MiB on two hosts of two ranks, with 64 KiB slices).
Generator<Step> ringRound(int right, Buf from, Range out, int left, Range in, std::optional<Buf> fold,
                          uint64_t chunk) {
  for (uint64_t j = 0; j < std::max(numSlices(out.len, chunk), numSlices(in.len, chunk)); ++j) {
    if (const uint64_t l = sliceLen(out.len, chunk, j))
      co_yield Step::send(right, {from, out.off + j * chunk, l});
    if (const uint64_t l = sliceLen(in.len, chunk, j)) {
      const uint64_t o = in.off + j * chunk;
      co_yield fold ? Step::recvReduce(left, {*fold, o, l}, outR(o, l)) : Step::recv(left, outR(o, l));
    }
  }
}

}  // namespace

int domainSize(const CollArgs& a) {
  const int r = a.ranksPerDomain;
  return r >= 2 && a.nranks % r == 0 ? r : a.nranks;
}

Range domainBlock(const CollArgs& a, int b, Range whole) {
  const int d = domainSize(a);
  return Range{whole.off + blockBegin(whole.len, d, mod(b, d)), blockSize(whole.len, d, mod(b, d))};
}

// Round s sends block L-s, folds in block L-s-1; rank L ends with block L+1 summed over its
// domain (in the output).
Generator<Step> domainReduceScatter(CollArgs a, int rank, Buf src, Range whole) {
  const int d = domainSize(a), D = rank / d, L = rank % d;
  const int right = D * d + mod(L + 1, d), left = D * d + mod(L - 1, d);
  for (int s = 0; s < d - 1; ++s) {
    TRIB_YIELD_ALL(ringRound(right, s == 0 ? src : Buf::Output, domainBlock(a, L - s, whole), left,
                             domainBlock(a, L - s - 1, whole), src, chunkOf(a)));
  }
}

// Rank L holds block L+1; round s passes on block L+1-s.
Generator<Step> domainAllGather(CollArgs a, int rank, Range whole) {
  const int d = domainSize(a), D = rank / d, L = rank % d;
  const int right = D * d + mod(L + 1, d), left = D * d + mod(L - 1, d);
  for (int s = 0; s < d - 1; ++s) {
    TRIB_YIELD_ALL(ringRound(right, Buf::Output, domainBlock(a, L + 1 - s, whole), left,
                             domainBlock(a, L - s, whole), std::nullopt, chunkOf(a)));
  }
}

uint64_t hierarchicalSliceSteps(int d, int m) { return 4ull * (d - 1) * m + 4ull * (m - 1); }

uint64_t hierarchicalSliceElems(const CollArgs& a) {
  const int d = domainSize(a), m = a.nranks / d;
  const uint64_t unit = static_cast<uint64_t>(d) * m, chunk = chunkOf(a);
  // Slices only where the window holds kHierSlicesInWindow of them (a slice's rounds are ring
  // chains, so one alone keeps neither the NVLink port nor the NIC busy), and d*m*chunk neither
  // overflows nor passes the count; else the whole count, the levels one pass each.
  if (m < 2 || !hierSlicesFitTheWindow(hierarchicalSliceSteps(d, m))) return a.count;
  return chunk > a.count / unit ? a.count : unit * chunk;
}

namespace {

// The three levels over one pipeline slice of the count.
Generator<Step> hierSlice(CollArgs a, int rank, Range whole) {
  const int n = a.nranks, d = domainSize(a), m = n / d;
  const int D = rank / d, L = rank % d;
  const uint64_t chunk = chunkOf(a);
  // 1. Reduce-scatter in the domain.
  TRIB_YIELD_ALL(domainReduceScatter(a, rank, Buf::Input, whole));
  // 2. All-reduce of that block across domains, among the ranks with the same local index.
  const Range own = domainBlock(a, L + 1, whole);
  auto sub = [&](int k) {
    const uint64_t b = mod(k, m);
    return Range{own.off + blockBegin(own.len, m, b), blockSize(own.len, m, b)};
  };
  const int gRight = mod(D + 1, m) * d + L, gLeft = mod(D - 1, m) * d + L;
  for (int s = 0; s < m - 1; ++s) {
    TRIB_YIELD_ALL(ringRound(gRight, Buf::Output, sub(D - s), gLeft, sub(D - s - 1), Buf::Output, chunk));
  }
  for (int s = 0; s < m - 1; ++s) {
    TRIB_YIELD_ALL(ringRound(gRight, Buf::Output, sub(D + 1 - s), gLeft, sub(D - s), std::nullopt, chunk));
  }
  // 3. All-gather in the domain.
  TRIB_YIELD_ALL(domainAllGather(a, rank, whole));
}

// The count in pipeline slices of hierarchicalSliceElems, each through all three levels before the
// next in the rank's list: the executor runs a slice's reduce-scatter while earlier slices cross
// the network and gather, where one pass over the whole count would start the network level only
// after the last reduce-scatter steps came within the executor's window.
Generator<Step> hierAllReduce(CollArgs a, int rank) {
  if (a.nranks == 1) {
    TRIB_YIELD_ALL(localCopy(a, rank));
    co_return;
  }
  const uint64_t slice = hierarchicalSliceElems(a);
  for (uint64_t j = 0; j < numSlices(a.count, slice); ++j)
    TRIB_YIELD_ALL(hierSlice(a, rank, Range{j * slice, sliceLen(a.count, slice, j)}));
}

}  // namespace

const AlgoInfo kHierarchicalAllReduce = {Algo::Hierarchical, Coll::AllReduce, hierSupports, noScratch,
                                         checked<hierAllReduce>};

}  // namespace trib::algo
