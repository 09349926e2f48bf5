// All-reduce by in-network reduction: one SwitchReduce step (the switch client chunks and
// pipelines it). In place, the input is first copied to scratch, so that the user's buffer keeps
// the rank's contribution until the switch has delivered every result: if the switch fails
// mid-way, the host fallback re-runs from that copy (core/switch_coll.cpp).
#include "algo/algo_util.hpp"
#include "algo/algorithms.hpp"

namespace trib::algo {

namespace {

bool switchSupports(const CollArgs& a) { return validArgs(a) && a.coll == Coll::AllReduce; }

uint64_t switchScratch(const CollArgs& a, int) { return a.inPlace ? a.count : 0; }

Generator<Step> switchAllReduce(CollArgs a, int) {
  if (a.count == 0) co_return;
  if (a.inPlace) {
    co_yield Step::copy(inR(0, a.count), scrR(0, a.count));
    co_yield Step::switchReduce(scrR(0, a.count), outR(0, a.count));
  } else {
    co_yield Step::switchReduce(inR(0, a.count), outR(0, a.count));
  }
}

}  // namespace

const AlgoInfo kSwitchAllReduce{Algo::Switch, Coll::AllReduce, switchSupports, checkedScratch<switchScratch>,
                                checked<switchAllReduce>};

}  // namespace trib::algo
