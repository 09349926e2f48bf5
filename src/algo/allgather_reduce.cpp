// All-gather-reduce all-reduce (Open MPI's "allgather_reduce"): every rank sends its whole input
// to every peer at once, then folds the n inputs in rank order into its output, so every rank gets
// the same bits as the other algorithms' rank-order folds. One round of messages where ring, rhd
// and direct take two or more dependent ones: the latency-bound choice for small vectors on a
// network (over shm, one-shot does the same through the windows). It moves (n-1)S per rank and
// keeps the n-1 received inputs in scratch, hence the size limit.
#include <stdexcept>

#include "algo/algo_util.hpp"
#include "algo/algorithms.hpp"

namespace trib::algo {
namespace {

// Scratch elements (n slots of count: the n-1 received inputs, and in place the own) and ranks
// beyond which it is not offered: its traffic grows as (n-1)S per rank, never the faster choice.
constexpr uint64_t kMaxScratchElems = uint64_t{1} << 18;
constexpr int kMaxRanks = 256;

// Scratch slot q holds rank q's input; out of place this rank's own slot is not used (its input
// stays where it is), in place it keeps a copy (the output is written by the fold).
uint64_t slots(const CollArgs& a) { return static_cast<uint64_t>(a.nranks); }

bool supports(const CollArgs& a) {
  return validArgs(a) && a.coll == Coll::AllReduce && a.nranks <= kMaxRanks &&
         a.count <= kMaxScratchElems / slots(a);
}

uint64_t scratch(const CollArgs& a, int) { return supports(a) && a.nranks > 1 ? slots(a) * a.count : 0; }

Generator<Step> allgatherReduce(CollArgs a, int rank) {
  const int n = a.nranks;
  const uint64_t c = a.count;
  if (n == 1 || c == 0) {
    TRIB_YIELD_ALL(localCopy(a, rank));
    co_return;
  }
  if (!supports(a)) throw std::invalid_argument("allgather_reduce: too many ranks or elements");
  // Slice by slice (messages stay within the planner's chunk), each folded once it is in.
  const uint64_t chunk = chunkOf(a);
  const PeerOrder order(a);  // direct's: no rank of a domain meets the same remote rank first
  for (uint64_t j = 0; j < numSlices(c, chunk); ++j) {
    const uint64_t off = j * chunk, len = sliceLen(c, chunk, j);
    const auto slot = [&](int q) { return scrR(static_cast<uint64_t>(q) * c + off, len); };
    // In place, the fold overwrites the own input: keep it in its slot first (the sends read the
    // input too; the executor orders the fold's writes after them).
    if (a.inPlace) co_yield Step::copy(inR(off, len), slot(rank));
    for (int k = 1; k < order.steps(); ++k)
      if (const int p = order.sendPeer(rank, k); p >= 0) co_yield Step::send(p, inR(off, len));
    for (int k = 1; k < order.steps(); ++k)
      if (const int q = order.recvPeer(rank, k); q >= 0) co_yield Step::recv(q, slot(q));
    for (int q = 0; q < n; ++q) {
      const Region term = q == rank && !a.inPlace ? inR(off, len) : slot(q);
      co_yield q == 0 ? Step::copy(term, outR(off, len)) : Step::reduce(term, outR(off, len));
    }
  }
}

}  // namespace

const AlgoInfo kAllgatherReduceAllReduce = {Algo::AllgatherReduce, Coll::AllReduce, supports,
                                            checkedScratch<scratch>, checked<allgatherReduce>};

}  // namespace trib::algo
