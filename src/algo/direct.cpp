// Direct schedules: every rank exchanges with every other rank, in a staggered order (PeerOrder)
// so no rank is everybody's first peer. Reductions happen once, at the block's owner, in
// ascending rank order: the result does not depend on timing.
#include "algo/algo_util.hpp"
#include "algo/algorithms.hpp"

namespace trib::algo {
namespace {

// Slot scratch for an owner that cannot accumulate in its output (in place, where the output
// still holds the rank's own contribution, which must be folded in at its turn in rank order).
bool ownerNeedsScratch(const CollArgs& a, int rank) { return a.inPlace && rank != 0 && a.nranks > 1; }

// Reduces slice [off, off+len) of the owner's block over all ranks in order 0..n-1.
// `mine` is the rank's own contribution, `dst` the result; `slot` scratch for ownerNeedsScratch.
Generator<Step> ownerReduce(CollArgs a, int rank, Region mine, Region dst, Region slot) {
  const bool viaScratch = ownerNeedsScratch(a, rank);
  const Region acc = viaScratch ? slot : dst;
  for (int q = 0; q < a.nranks; ++q) {
    if (q == rank) {
      if (q == 0) {                                      // !viaScratch, so acc == dst
        if (!a.inPlace) co_yield Step::copy(mine, acc);  // in place, rank 0's output already holds it
      } else {
        co_yield Step::reduce(mine, acc);
      }
    } else if (q == 0) {
      co_yield Step::recv(q, acc);
    } else {
      co_yield Step::recvReduce(q, acc, acc);
    }
  }
  if (viaScratch) co_yield Step::copy(acc, dst);
}

uint64_t directReduceScatterScratch(const CollArgs& a, int rank) {
  return ownerNeedsScratch(a, rank) ? 2 * std::min(chunkOf(a), a.count) : 0;
}

// Reduce-scatter: send block p to p, then reduce the own block at home.
Generator<Step> directReduceScatter(CollArgs a, int rank) {
  const PeerOrder order(a);
  const uint64_t chunk = chunkOf(a), c = a.count, slot = std::min(chunk, c);
  for (uint64_t j = 0; j < numSlices(c, chunk); ++j) {
    const uint64_t off = j * chunk, len = sliceLen(c, chunk, j);
    for (int k = 1; k < order.steps(); ++k) {
      const int p = order.sendPeer(rank, k);
      if (p >= 0) co_yield Step::send(p, inR(static_cast<uint64_t>(p) * c + off, len));
    }
    TRIB_YIELD_ALL(ownerReduce(a, rank, inR(static_cast<uint64_t>(rank) * c + off, len), outR(off, len),
                               scrR((j % 2) * slot, len)));
  }
}

// All-reduce: a direct reduce-scatter of n balanced blocks, then every owner sends its block to
// everybody (a direct all-gather), slice by slice.
uint64_t directAllReduceScratch(const CollArgs& a, int rank) {
  return ownerNeedsScratch(a, rank) ? 2 * std::min(chunkOf(a), blockSize(a.count, a.nranks, 0)) : 0;
}

Generator<Step> directAllReduce(CollArgs a, int rank) {
  const int n = a.nranks;
  if (n == 1) {
    TRIB_YIELD_ALL(localCopy(a, rank));
    co_return;
  }
  const PeerOrder order(a);
  const uint64_t chunk = chunkOf(a), c = a.count;
  const uint64_t slot = std::min(chunk, blockSize(c, n, 0));
  const uint64_t mineBegin = blockBegin(c, n, rank), mineSize = blockSize(c, n, rank);
  for (uint64_t j = 0; j < numSlices(blockSize(c, n, 0), chunk); ++j) {
    const uint64_t off = j * chunk;
    for (int k = 1; k < order.steps(); ++k) {
      const int p = order.sendPeer(rank, k);
      const uint64_t len = p < 0 ? 0 : sliceLen(blockSize(c, n, p), chunk, j);
      if (len) co_yield Step::send(p, inR(blockBegin(c, n, p) + off, len));
    }
    const uint64_t len = sliceLen(mineSize, chunk, j);
    if (len) {
      TRIB_YIELD_ALL(ownerReduce(a, rank, inR(mineBegin + off, len), outR(mineBegin + off, len),
                                 scrR((j % 2) * slot, len)));
      for (int k = 1; k < order.steps(); ++k)
        if (const int p = order.sendPeer(rank, k); p >= 0) co_yield Step::send(p, outR(mineBegin + off, len));
    }
    for (int k = 1; k < order.steps(); ++k) {
      const int q = order.recvPeer(rank, k);
      const uint64_t qlen = q < 0 ? 0 : sliceLen(blockSize(c, n, q), chunk, j);
      if (qlen) co_yield Step::recv(q, outR(blockBegin(c, n, q) + off, qlen));
    }
  }
}

// All-gather: send the own block to everybody, receive everybody's.
Generator<Step> directAllGather(CollArgs a, int rank) {
  const PeerOrder order(a);
  const uint64_t chunk = chunkOf(a), c = a.count;
  for (uint64_t j = 0; j < numSlices(c, chunk); ++j) {
    const uint64_t off = j * chunk, len = sliceLen(c, chunk, j);
    if (!a.inPlace) co_yield Step::copy(inR(off, len), outR(static_cast<uint64_t>(rank) * c + off, len));
    for (int k = 1; k < order.steps(); ++k)
      if (const int p = order.sendPeer(rank, k); p >= 0) co_yield Step::send(p, inR(off, len));
    for (int k = 1; k < order.steps(); ++k)
      if (const int q = order.recvPeer(rank, k); q >= 0)
        co_yield Step::recv(q, outR(static_cast<uint64_t>(q) * c + off, len));
  }
}

// All-to-all, pairwise exchange: in round k rank r sends to r+k and receives from r-k.
Generator<Step> directAlltoAll(CollArgs a, int rank) {
  const int n = a.nranks;
  const uint64_t chunk = chunkOf(a), c = a.count;
  for (int k = 0; k < n; ++k) {
    const int to = mod(rank + k, n), from = mod(rank - k, n);
    for (uint64_t j = 0; j < numSlices(c, chunk); ++j) {
      const uint64_t off = j * chunk, len = sliceLen(c, chunk, j);
      if (k == 0) {
        co_yield Step::copy(inR(static_cast<uint64_t>(rank) * c + off, len),
                            outR(static_cast<uint64_t>(rank) * c + off, len));
      } else {
        co_yield Step::send(to, inR(static_cast<uint64_t>(to) * c + off, len));
        co_yield Step::recv(from, outR(static_cast<uint64_t>(from) * c + off, len));
      }
    }
  }
}

// Gather: everybody sends to the root, which receives in rank order.
Generator<Step> directGather(CollArgs a, int rank) {
  const int n = a.nranks;
  const uint64_t chunk = chunkOf(a), c = a.count;
  if (rank != a.root) {
    for (uint64_t j = 0; j < numSlices(c, chunk); ++j)
      co_yield Step::send(a.root, inR(j * chunk, sliceLen(c, chunk, j)));
    co_return;
  }
  for (int q = 0; q < n; ++q) {
    for (uint64_t j = 0; j < numSlices(c, chunk); ++j) {
      const uint64_t off = j * chunk, len = sliceLen(c, chunk, j);
      const Region dst = outR(static_cast<uint64_t>(q) * c + off, len);
      if (q != rank) {
        co_yield Step::recv(q, dst);
      } else if (!a.inPlace) {
        co_yield Step::copy(inR(off, len), dst);
      }
    }
  }
}

// Scatter: the root sends block q to q.
Generator<Step> directScatter(CollArgs a, int rank) {
  const int n = a.nranks;
  const uint64_t chunk = chunkOf(a), c = a.count;
  if (rank != a.root) {
    for (uint64_t j = 0; j < numSlices(c, chunk); ++j)
      co_yield Step::recv(a.root, outR(j * chunk, sliceLen(c, chunk, j)));
    co_return;
  }
  for (int k = 0; k < n; ++k) {
    const int q = mod(rank + k, n);
    for (uint64_t j = 0; j < numSlices(c, chunk); ++j) {
      const uint64_t off = j * chunk, len = sliceLen(c, chunk, j);
      const Region src = inR(static_cast<uint64_t>(q) * c + off, len);
      if (q != rank) {
        co_yield Step::send(q, src);
      } else if (!a.inPlace) {
        co_yield Step::copy(src, outR(off, len));
      }
    }
  }
}

// Dissemination barrier: in round i rank r signals r+2^i and waits for r-2^i; after
// ceil(log2 n) rounds every rank has heard, directly or not, from every other rank — provided each
// signal leaves only after every signal the rank received before it. The executor orders steps
// only by the memory they share, so that order is written as data: a signal is a one-element
// token sent from an accumulator cell, round 0's the rank's arrival token (its input); each token
// received is copied into the accumulator, and each copy waits for the one before it.
int barrierRounds(int n) {
  int rounds = 0;
  for (int64_t d = 1; d < n; d *= 2) ++rounds;
  return rounds;
}

// scratch[0] is the accumulator, scratch[1 + i] the token received in round i.
uint64_t disseminationScratch(const CollArgs& a, int) {
  const int rounds = barrierRounds(a.nranks);
  return rounds ? 1 + static_cast<uint64_t>(rounds) : 0;
}

Generator<Step> disseminationBarrier(CollArgs a, int rank) {
  const int n = a.nranks, rounds = barrierRounds(n);
  const Region acc = scrR(0, 1);
  for (int i = 0, d = 1; i < rounds; ++i, d *= 2) {
    const Region got = scrR(1 + static_cast<uint64_t>(i), 1);
    co_yield Step::send(mod(rank + d, n), i == 0 ? inR(0, 1) : acc);
    co_yield Step::recv(mod(rank - d, n), got);
    if (i + 1 < rounds) co_yield Step::copy(got, acc);
  }
}

// Ranks up to which the executor runs the direct reduce-scatter, all-gather and all-reduce. A
// send that is not eager (loopback, UCX's rendezvous, verbs from device memory) finishes only once
// its receiver posts the receive, and the executor starts steps only within its window
// (kExecutorWindowSteps, 512, past the rank's first unfinished one). A slice's reduce-scatter part is the n-1
// sends and the owner's n steps (2n), its all-gather part n-1 sends and n-1 receives: with 2n <= 512 each
// part is whole in the window of every rank that has reached it, and neither waits on a later
// slice, so every slice finishes. Past it a send's receive may lie beyond its receiver's window
// while that receiver's own sends wait too: over loopback 400 ranks stall, 300 happen not to
// (test_zero_copy DirectPastTheWindow).
constexpr int kMaxRunRanks = static_cast<int>(kExecutorWindowSteps / 2);

}  // namespace

const AlgoInfo kDirectAllReduce = {.algo = Algo::Direct,
                                   .coll = Coll::AllReduce,
                                   .supports = validArgs,
                                   .scratchCount = checkedScratch<directAllReduceScratch>,
                                   .generate = checked<directAllReduce>,
                                   .maxRunRanks = kMaxRunRanks};
const AlgoInfo kDirectReduceScatter = {.algo = Algo::Direct,
                                       .coll = Coll::ReduceScatter,
                                       .supports = validArgs,
                                       .scratchCount = checkedScratch<directReduceScatterScratch>,
                                       .generate = checked<directReduceScatter>,
                                       .maxRunRanks = kMaxRunRanks};
const AlgoInfo kDirectAllGather = {.algo = Algo::Direct,
                                   .coll = Coll::AllGather,
                                   .supports = validArgs,
                                   .scratchCount = noScratch,
                                   .generate = checked<directAllGather>,
                                   .maxRunRanks = kMaxRunRanks};
const AlgoInfo kDirectAlltoAll = {Algo::Direct, Coll::AlltoAll, validArgs, noScratch,
                                  checked<directAlltoAll>};
const AlgoInfo kDirectGather = {Algo::Direct, Coll::Gather, validArgs, noScratch, checked<directGather>};
const AlgoInfo kDirectScatter = {Algo::Direct, Coll::Scatter, validArgs, noScratch, checked<directScatter>};
const AlgoInfo kDirectBarrier = {Algo::Direct, Coll::Barrier, validArgs, checkedScratch<disseminationScratch>,
                                 checked<disseminationBarrier>};

}  // namespace trib::algo
