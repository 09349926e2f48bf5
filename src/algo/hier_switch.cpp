// Hierarchical all-reduce through the aggregation switch: ring reduce-scatter inside each domain
// (host: shared memory) -> switch all-reduce of each rank's block among its slice group (the
// ranks with the same local index, one per domain) -> ring all-gather inside each domain.
// The block goes to the switch in a few pieces of whole ring slices (algo/schedule.hpp
// hierSwitchPieces), a SwitchReduce each, so that the levels overlap: a piece leaves as soon as the
// reduce-scatter's last round has reduced its slices, and the all-gather passes its slices round the domain
// as soon as the switch has returned it (the executor runs any step whose data are ready; every member of a
// slice group cuts its block the same way). (The planner may pick slices large enough that the all-gather's
// steps fit in the executor's window: its later rounds need not wait for the switch.) Each rank sends only
// S/d to the switch, so a host's switch traffic is S instead of d x S (d = args.ranksPerDomain ranks per
// domain, contiguous). The slice groups are separate groups at the switch (core/switch_coll.cpp registers
// them), named in the step by its stride d. Where the executor's window holds five of them, the
// count runs in pipeline slices of d blocks (hierSwitchSliceElems), each through the three levels
// before the next, a block one SwitchReduce: later slices' reduce-scatters run while earlier
// blocks are at the switch.
//
// In place, the input is first copied to scratch and the schedule runs from the copy, so the
// user's buffer keeps the rank's contribution for the host fallback if the switch fails
// (core/switch_coll.cpp; the copy is step 0, as in switch.cpp).
#include <algorithm>

#include "algo/algo_util.hpp"
#include "algo/algorithms.hpp"
#include "algo/domain_ring.hpp"

namespace trib::algo {

uint64_t hierSwitchSliceChunks(uint64_t chunkElems) {
  const uint64_t c = std::max<uint64_t>(1, chunkElems);
  return (kHierSwitchPieceElems + c - 1) / c;
}

uint64_t hierSwitchSliceSteps(int d, uint64_t sliceChunks) { return 4ull * (d - 1) * sliceChunks + 1; }

uint64_t hierSwitchSliceElems(const CollArgs& a) {
  const int d = domainSize(a);
  const uint64_t chunk = chunkOf(a), q = hierSwitchSliceChunks(chunk);
  if (d < 2 || d == a.nranks || !hierSlicesFitTheWindow(hierSwitchSliceSteps(d, q))) return a.count;
  const uint64_t unit = static_cast<uint64_t>(d) * q;  // q <= 2^16: no overflow
  return chunk > a.count / unit ? a.count : unit * chunk;
}

namespace {

bool hierSwitchSupports(const CollArgs& a) { return validArgs(a) && a.coll == Coll::AllReduce; }

uint64_t hierSwitchScratch(const CollArgs& a, int) { return a.inPlace ? a.count : 0; }

// The three levels over one pipeline slice `whole` of the count (all of it, unsliced).
Generator<Step> hierSwitchSlice(CollArgs a, int rank, Buf src, Range whole) {
  const int d = domainSize(a);
  TRIB_YIELD_ALL(domainReduceScatter(a, rank, src, whole));
  // Rank L's block L+1, summed over its domain, is in the output (with one rank per domain it is
  // still in the source); the switch sums it over the domains, in place in the output.
  const Range own = domainBlock(a, rank % d + 1, whole);
  const Buf from = d > 1 ? Buf::Output : src;
  const uint64_t chunk = chunkOf(a), slices = numSlices(own.len, chunk);
  const uint64_t pieces = hierSwitchPieces(own.len, slices), piece = (slices + pieces - 1) / pieces * chunk;
  for (uint64_t j = 0; j < numSlices(own.len, piece); ++j) {
    const uint64_t o = own.off + j * piece, l = sliceLen(own.len, piece, j);
    co_yield Step::switchReduce({from, o, l}, outR(o, l), d);
  }
  TRIB_YIELD_ALL(domainAllGather(a, rank, whole));
}

Generator<Step> hierSwitchAllReduce(CollArgs a, int rank) {
  if (a.count == 0) co_return;
  Buf src = Buf::Input;
  if (a.inPlace) {
    co_yield Step::copy(inR(0, a.count), scrR(0, a.count));
    src = Buf::Scratch;
  }
  // In pipeline slices (hierSwitchSliceElems: each block one switch operation), so later slices'
  // domain reduce-scatters run while earlier ones are at the switch; else one pass, the block in
  // pieces.
  const uint64_t slice = hierSwitchSliceElems(a);
  for (uint64_t j = 0; j < numSlices(a.count, slice); ++j)
    TRIB_YIELD_ALL(hierSwitchSlice(a, rank, src, Range{j * slice, sliceLen(a.count, slice, j)}));
}

}  // namespace

const AlgoInfo kHierSwitchAllReduce{Algo::HierSwitch, Coll::AllReduce, hierSwitchSupports,
                                    checkedScratch<hierSwitchScratch>, checked<hierSwitchAllReduce>};

}  // namespace trib::algo
