// Collectives by in-network reduction: one SwitchReduce step per rank (the switch client chunks
// and pipelines it); its regions follow schedule.hpp's per-collective shapes. In place, when the
// switch would write over the rank's input (all-reduce, the root's reduce, all-gather,
// reduce-scatter), the input is first copied to scratch, so that the user's buffer keeps the
// rank's contribution until the switch has delivered every result: if the switch fails mid-way,
// the host fallback re-runs from that copy (core/switch_coll.cpp). Broadcast never writes the
// root's input, and the other ranks' inputs are not used.
#include "algo/algo_util.hpp"
#include "algo/algorithms.hpp"

namespace trib::algo {

namespace {

bool switchSupports(const CollArgs& a) { return validArgs(a) && switchCollective(a.coll); }

// In place, whether the switch's result lands on this rank's input (then the input is saved).
bool savesInput(const CollArgs& a, int rank) {
  if (!a.inPlace || a.count == 0) return false;
  switch (a.coll) {
    case Coll::AllReduce:
    case Coll::AllGather:
    case Coll::ReduceScatter:
      return true;
    case Coll::Reduce:
      return rank == a.root;
    default:
      return false;
  }
}

uint64_t switchScratch(const CollArgs& a, int rank) { return savesInput(a, rank) ? inputCount(a, rank) : 0; }

Generator<Step> switchCollective(CollArgs a, int rank) {
  if (a.coll != Coll::Barrier && a.count == 0) co_return;
  // The switch's barrier is a rendezvous of its own: it sends no arrival token.
  const uint64_t in = a.coll == Coll::Barrier ? 0 : inputCount(a, rank), out = outputCount(a, rank);
  Region src = inR(0, in);
  if (savesInput(a, rank)) {
    co_yield Step::copy(inR(0, in), scrR(0, in));
    src = scrR(0, in);
  }
  Region dst = outR(0, out);
  if (a.coll == Coll::Broadcast && rank == a.root) {
    // The root keeps its data: a local copy out of place, nothing from the switch.
    if (!a.inPlace) co_yield Step::copy(inR(0, in), outR(0, out));
    dst = outR(0, 0);
  }
  co_yield Step::switchReduce(src, dst);
}

constexpr auto kScr = checkedScratch<switchScratch>;
constexpr auto kGen = checked<switchCollective>;
}  // namespace

const AlgoInfo kSwitchAllReduce{Algo::Switch, Coll::AllReduce, switchSupports, kScr, kGen};
const AlgoInfo kSwitchReduce{Algo::Switch, Coll::Reduce, switchSupports, kScr, kGen};
const AlgoInfo kSwitchBroadcast{Algo::Switch, Coll::Broadcast, switchSupports, kScr, kGen};
const AlgoInfo kSwitchAllGather{Algo::Switch, Coll::AllGather, switchSupports, kScr, kGen};
const AlgoInfo kSwitchReduceScatter{Algo::Switch, Coll::ReduceScatter, switchSupports, kScr, kGen};
const AlgoInfo kSwitchBarrier{Algo::Switch, Coll::Barrier, switchSupports, kScr, kGen};

}  // namespace trib::algo
