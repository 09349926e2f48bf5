// Hierarchical all-reduce through the aggregation switch: ring reduce-scatter inside each domain
// (host: shared memory) -> switch all-reduce of each rank's block among its slice group (the
// ranks with the same local index, one per domain) -> ring all-gather inside each domain.
// Each rank sends only S/d to the switch, so a host's switch traffic is S instead of d x S
// (d = args.ranksPerDomain ranks per domain, contiguous). The slice groups are separate groups
// at the switch (core/switch_coll.cpp registers them), named in the step by its stride d.
//
// In place, the input is first copied to scratch and the schedule runs from the copy, so the
// user's buffer keeps the rank's contribution for the host fallback if the switch fails
// (core/switch_coll.cpp; the copy is step 0, as in switch.cpp).
#include "algo/algo_util.hpp"
#include "algo/algorithms.hpp"
#include "algo/domain_ring.hpp"

namespace trib::algo {

namespace {

bool hierSwitchSupports(const CollArgs& a) { return validArgs(a) && a.coll == Coll::AllReduce; }

uint64_t hierSwitchScratch(const CollArgs& a, int) { return a.inPlace ? a.count : 0; }

Generator<Step> hierSwitchAllReduce(CollArgs a, int rank) {
  if (a.count == 0) co_return;
  Buf src = Buf::Input;
  if (a.inPlace) {
    co_yield Step::copy(inR(0, a.count), scrR(0, a.count));
    src = Buf::Scratch;
  }
  const int d = domainSize(a);
  TRIB_YIELD_ALL(domainReduceScatter(a, rank, src));
  // Rank L's block L+1, summed over its domain, is in the output (with one rank per domain it is
  // still in the source); the switch sums it over the domains, in place in the output.
  const Range own = domainBlock(a, rank % d + 1);
  const Buf from = d > 1 ? Buf::Output : src;
  if (own.len > 0) co_yield Step::switchReduce({from, own.off, own.len}, outR(own.off, own.len), d);
  TRIB_YIELD_ALL(domainAllGather(a, rank));
}

}  // namespace

const AlgoInfo kHierSwitchAllReduce{Algo::HierSwitch, Coll::AllReduce, hierSwitchSupports,
                                    checkedScratch<hierSwitchScratch>, checked<hierSwitchAllReduce>};

}  // namespace trib::algo
