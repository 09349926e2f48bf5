// Ring phases inside domains, shared by the hierarchical schedules (hierarchical.cpp,
// hier_switch.cpp). Domains are contiguous ranges of domainSize(a) ranks; the count is cut into
// one block per local rank.
#pragma once
#include "algo/algo_util.hpp"

namespace trib::algo {

struct Range {
  uint64_t off, len;
};

// args.ranksPerDomain when it is >= 2 and divides nranks; else nranks (one domain).
int domainSize(const CollArgs& a);
// Block b (mod the domain size) of `whole`: the count, or one pipeline slice of it (hierarchical).
Range domainBlock(const CollArgs& a, int b, Range whole);
// Ring reduce-scatter in the rank's domain, reading the rank's data from `src` (Input, or a
// Scratch copy) and folding into the output: local rank L ends with block L+1 summed over its
// domain, in the output. The region of `src` outside block L+1 may be used as the fold input only.
// Both phases run over `whole` only, cut by domainBlock(a, b, whole).
Generator<Step> domainReduceScatter(CollArgs a, int rank, Buf src, Range whole);
// Ring all-gather in the domain: local rank L contributes output block L+1; all end with all.
Generator<Step> domainAllGather(CollArgs a, int rank, Range whole);

}  // namespace trib::algo
