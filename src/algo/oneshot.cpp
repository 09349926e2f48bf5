// One-shot all-reduce (the name NVIDIA's symmetric-memory kernels use): every rank posts its input
// on a shared-memory board and reduces all the inputs itself, in rank order, so every rank gets
// the same bits. One synchronisation instead of 2(n-1) messages: the small-message path on one
// host. Two-shot (the large-message path) posts in board-sized chunks; each rank reduces one
// slice of each chunk, in rank order, and copies the others' reduced slices: two synchronisations
// per chunk, every byte copied by user-space memcpy (no kernel single-copy). The schedule is one SwitchReduce
// step run by the communicator's board (ExecOptions:: offload; transports/shm), which copies the input before
// anyone reads it, so in place needs no scratch. Nothing fails over: a lost peer fails the call as on any
// transport.
#include "algo/algo_util.hpp"
#include "algo/algorithms.hpp"

namespace trib::algo {

namespace {

bool oneShotSupports(const CollArgs& a) { return validArgs(a) && a.coll == Coll::AllReduce; }

Generator<Step> oneShotAllReduce(CollArgs a, int) {
  if (a.count > 0) co_yield Step::switchReduce(inR(0, a.count), outR(0, a.count));
}

}  // namespace

const AlgoInfo kOneShotAllReduce{Algo::OneShot, Coll::AllReduce, oneShotSupports, noScratch,
                                 checked<oneShotAllReduce>};
// Two-shot is the same one step: the board, not the schedule, cuts it into slices and chunks.
const AlgoInfo kTwoShotAllReduce{Algo::TwoShot, Coll::AllReduce, oneShotSupports, noScratch,
                                 checked<oneShotAllReduce>};

}  // namespace trib::algo
