// Hierarchical all-reduce: ring reduce-scatter inside each domain -> ring all-reduce of each
// rank's block across domains (all local ranks at once, each with its own network path) -> ring
// all-gather inside each domain. Domains are contiguous ranges of args.ranksPerDomain ranks (the
// planner sets it from the topology's NVLink domains). Network traffic per rank: 2(m-1)/m · S/d
// instead of the flat ring's 2(n-1)/n · S through one NIC.
#include "algo/algo_util.hpp"
#include "algo/algorithms.hpp"

namespace trib::algo {
namespace {

bool hierSupports(const CollArgs& a) {
  const int d = a.ranksPerDomain;
  return validArgs(a) && a.coll == Coll::AllReduce && d >= 2 && a.nranks % d == 0 && a.nranks / d >= 2;
}

struct Range {
  uint64_t off, len;
};

// Sends/receives `r` in slices of the chunk size (both sides cut it the same way).
Generator<Step> sendSliced(int peer, Buf buf, Range r, uint64_t chunk) {
  for (uint64_t j = 0; j < numSlices(r.len, chunk); ++j)
    co_yield Step::send(peer, {buf, r.off + j * chunk, sliceLen(r.len, chunk, j)});
}
Generator<Step> recvReduceSliced(int peer, Buf local, Range r, uint64_t chunk) {
  for (uint64_t j = 0; j < numSlices(r.len, chunk); ++j) {
    const uint64_t o = r.off + j * chunk, l = sliceLen(r.len, chunk, j);
    co_yield Step::recvReduce(peer, {local, o, l}, outR(o, l));
  }
}
Generator<Step> recvSliced(int peer, Range r, uint64_t chunk) {
  for (uint64_t j = 0; j < numSlices(r.len, chunk); ++j)
    co_yield Step::recv(peer, outR(r.off + j * chunk, sliceLen(r.len, chunk, j)));
}

Generator<Step> hierAllReduce(CollArgs a, int rank) {
  const int n = a.nranks, d = a.ranksPerDomain, m = n / d;
  const int D = rank / d, L = rank % d;
  const uint64_t chunk = chunkOf(a), c = a.count;
  auto block = [&](int b) { return Range{blockBegin(c, d, mod(b, d)), blockSize(c, d, mod(b, d))}; };
  const int right = D * d + mod(L + 1, d), left = D * d + mod(L - 1, d);
  // 1. Reduce-scatter in the domain: round s sends block L-s, folds in block L-s-1; rank L ends
  //    with block L+1 summed over its domain (in the output).
  for (int s = 0; s < d - 1; ++s) {
    TRIB_YIELD_ALL(sendSliced(right, s == 0 ? Buf::Input : Buf::Output, block(L - s), chunk));
    TRIB_YIELD_ALL(recvReduceSliced(left, Buf::Input, block(L - s - 1), chunk));
  }
  // 2. All-reduce of that block across domains, among the ranks with the same local index.
  const Range own = block(L + 1);
  auto sub = [&](int k) {
    const uint64_t b = mod(k, m);
    return Range{own.off + blockBegin(own.len, m, b), blockSize(own.len, m, b)};
  };
  const int gRight = mod(D + 1, m) * d + L, gLeft = mod(D - 1, m) * d + L;
  for (int s = 0; s < m - 1; ++s) {
    TRIB_YIELD_ALL(sendSliced(gRight, Buf::Output, sub(D - s), chunk));
    TRIB_YIELD_ALL(recvReduceSliced(gLeft, Buf::Output, sub(D - s - 1), chunk));
  }
  for (int s = 0; s < m - 1; ++s) {
    TRIB_YIELD_ALL(sendSliced(gRight, Buf::Output, sub(D + 1 - s), chunk));
    TRIB_YIELD_ALL(recvSliced(gLeft, sub(D - s), chunk));
  }
  // 3. All-gather in the domain: rank L holds block L+1; round s passes on block L+1-s.
  for (int s = 0; s < d - 1; ++s) {
    TRIB_YIELD_ALL(sendSliced(right, Buf::Output, block(L + 1 - s), chunk));
    TRIB_YIELD_ALL(recvSliced(left, block(L - s), chunk));
  }
}

}  // namespace

const AlgoInfo kHierarchicalAllReduce = {Algo::Hierarchical, Coll::AllReduce, hierSupports, noScratch,
                                         checked<hierAllReduce>};

}  // namespace trib::algo
