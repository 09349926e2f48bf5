// Ring schedules: all-reduce = reduce-scatter + all-gather around the ring 0 -> 1 -> ... -> n-1 -> 0.
// Data is cut into n balanced blocks; every block is further cut into slices of chunkElems, and
// groups of kGroupSlices slices go through all rounds in turn (slices inner, rounds outer).
//
// Rails (all-reduce only): when args.ranksPerDomain = d >= 2 makes m = n / d >= 2 equal contiguous
// domains (the planner sets it from the topology's NVLink domains, as for hierarchical), the
// all-reduce runs d rings at once, as NCCL's multi-node ring runs one per NIC (its channels):
// channel c carries block c of d of the buffer, and its ring visits the local ranks c, c+1, ...,
// c-1 (mod d) of every domain in turn, crossing from the last of domain j to the first of domain
// j+1. So each local rank leaves its domain on one channel (c = L+1) and enters it on one (c = L):
// every rank's NIC carries one channel's cross-domain stream each way, and its NVLink the other
// d-1 channels' hops. Messages carry Step::channel = c. Without such domains, or with domains of
// more than kMaxRailChannels ranks (schedule.hpp): the one ring above.
#include <vector>

#include "algo/algo_util.hpp"
#include "algo/algorithms.hpp"

namespace trib::algo {
namespace {

// Slice j of block b of a `count`-element buffer split into n blocks: {offset, length}.
struct Piece {
  uint64_t off, len;
};
Piece blockSlice(uint64_t count, int n, int b, uint64_t chunk, uint64_t j) {
  return {blockBegin(count, n, b) + j * chunk, sliceLen(blockSize(count, n, b), chunk, j)};
}

// The rail ring's domain size d (2 to kMaxRailChannels, with >= 2 domains), or 0: one flat ring.
int railDomain(const CollArgs& a) {
  const int d = a.ranksPerDomain, n = a.nranks;
  return a.coll == Coll::AllReduce && d >= 2 && d <= kMaxRailChannels && d < n && n % d == 0 ? d : 0;
}
int ringChannels(const CollArgs& a) { return std::max(1, railDomain(a)); }

// Channel c's ring: position p is rank (p / d) d + (p + c) mod d, so each domain's stretch starts at
// local rank c (d = n with one channel: position p is rank p).
struct RailRing {
  int n, d, c;
  int rankAt(int p) const {
    p = mod(p, n);
    return p / d * d + mod(p % d + c, d);
  }
  int posOf(int rank) const { return rank / d * d + mod(rank % d - c, d); }
};

Generator<Step> ringAllReduce(CollArgs a, int rank) {
  const int n = a.nranks;
  if (n == 1) {
    TRIB_YIELD_ALL(localCopy(a, rank));
    co_return;
  }
  const int rails = railDomain(a), channels = std::max(1, rails), d = rails ? rails : n;
  // Per channel, this rank's position on its ring and its neighbours there (the same every round).
  struct Place {
    int p, left, right;
  };
  std::vector<Place> places(channels);
  for (int ch = 0; ch < channels; ++ch) {
    const RailRing ring{n, d, ch};
    const int p = ring.posOf(rank);
    places[ch] = {p, ring.rankAt(p - 1), ring.rankAt(p + 1)};
  }
  const uint64_t chunk = chunkOf(a);
  // Channel 0's block 0 is the largest block of any channel.
  const uint64_t slices = numSlices(blockSize(blockSize(a.count, channels, 0), n, 0), chunk);
  // Slice j of block b of channel ch: {offset, length}.
  auto piece = [&](int ch, int b, uint64_t j) {
    const uint64_t off = blockBegin(a.count, channels, ch), len = blockSize(a.count, channels, ch);
    const Piece p = blockSlice(len, n, b, chunk, j);
    return Piece{off + p.off, p.len};
  };
  for (uint64_t g0 = 0; g0 < slices; g0 += kGroupSlices) {
    const uint64_t g1 = std::min(slices, g0 + kGroupSlices);
    // Reduce-scatter: in round s send block p-s, fold the incoming block p-s-1 into output (p: the
    // rank's position on the channel's ring). Round 0 sends straight from the input; later rounds
    // forward the partial sums in output. The channels go side by side, round by round.
    for (int s = 0; s < n - 1; ++s) {
      for (int ch = 0; ch < channels; ++ch) {
        const auto [p, left, right] = places[ch];
        for (uint64_t j = g0; j < g1; ++j) {
          Piece snd = piece(ch, mod(p - s, n), j);
          Piece rcv = piece(ch, mod(p - s - 1, n), j);
          if (snd.len)
            co_yield Step::send(right, s == 0 ? inR(snd.off, snd.len) : outR(snd.off, snd.len)).onChannel(ch);
          if (rcv.len)
            co_yield Step::recvReduce(left, inR(rcv.off, rcv.len), outR(rcv.off, rcv.len)).onChannel(ch);
        }
      }
    }
    // All-gather: position p now holds block p+1 complete; pass completed blocks around.
    for (int s = 0; s < n - 1; ++s) {
      for (int ch = 0; ch < channels; ++ch) {
        const auto [p, left, right] = places[ch];
        for (uint64_t j = g0; j < g1; ++j) {
          Piece snd = piece(ch, mod(p + 1 - s, n), j);
          Piece rcv = piece(ch, mod(p - s, n), j);
          if (snd.len) co_yield Step::send(right, outR(snd.off, snd.len)).onChannel(ch);
          if (rcv.len) co_yield Step::recv(left, outR(rcv.off, rcv.len)).onChannel(ch);
        }
      }
    }
  }
}

// Reduce-scatter: rank r ends with block r, so round s sends block r-s-1 and folds in r-s-2.
// Partial sums travel through two scratch areas of one slice group each, used by alternate
// rounds (the output holds only the rank's own block); the last round folds into the output.
uint64_t ringReduceScatterScratch(const CollArgs& a, int) {
  return a.nranks > 2 ? 2 * std::min(kGroupSlices * chunkOf(a), a.count) : 0;
}

Generator<Step> ringReduceScatter(CollArgs a, int rank) {
  const int n = a.nranks;
  if (n == 1) {
    TRIB_YIELD_ALL(localCopy(a, rank));
    co_return;
  }
  const int right = mod(rank + 1, n), left = mod(rank - 1, n);
  const uint64_t chunk = chunkOf(a), c = a.count;
  const uint64_t area = std::min(kGroupSlices * chunk, c), slices = numSlices(c, chunk);
  for (uint64_t g0 = 0; g0 < slices; g0 += kGroupSlices) {
    const uint64_t g1 = std::min(slices, g0 + kGroupSlices);
    for (int s = 0; s < n - 1; ++s) {
      const uint64_t sndBlock = static_cast<uint64_t>(mod(rank - s - 1, n)) * c;
      const uint64_t rcvBlock = static_cast<uint64_t>(mod(rank - s - 2, n)) * c;
      for (uint64_t j = g0; j < g1; ++j) {
        const uint64_t off = j * chunk, len = sliceLen(c, chunk, j), inArea = (j - g0) * chunk;
        co_yield Step::send(right,
                            s == 0 ? inR(sndBlock + off, len) : scrR(((s - 1) % 2) * area + inArea, len));
        if (s == n - 2) {
          co_yield Step::recvReduce(left, inR(rcvBlock + off, len), outR(off, len));
        } else {
          co_yield Step::recvReduce(left, inR(rcvBlock + off, len), scrR((s % 2) * area + inArea, len));
        }
      }
    }
  }
}

// All-gather: rank r's block starts in its input; round s passes on block r-s.
Generator<Step> ringAllGather(CollArgs a, int rank) {
  const int n = a.nranks;
  const uint64_t chunk = chunkOf(a), c = a.count, slices = numSlices(c, chunk);
  const int right = mod(rank + 1, n), left = mod(rank - 1, n);
  if (!a.inPlace) {
    for (uint64_t j = 0; j < slices; ++j) {
      co_yield Step::copy(inR(j * chunk, sliceLen(c, chunk, j)),
                          outR(static_cast<uint64_t>(rank) * c + j * chunk, sliceLen(c, chunk, j)));
    }
  }
  for (uint64_t g0 = 0; g0 < slices; g0 += kGroupSlices) {
    const uint64_t g1 = std::min(slices, g0 + kGroupSlices);
    for (int s = 0; s < n - 1; ++s) {
      const uint64_t sndBlock = static_cast<uint64_t>(mod(rank - s, n)) * c;
      const uint64_t rcvBlock = static_cast<uint64_t>(mod(rank - s - 1, n)) * c;
      for (uint64_t j = g0; j < g1; ++j) {
        const uint64_t off = j * chunk, len = sliceLen(c, chunk, j);
        co_yield Step::send(right, s == 0 ? inR(off, len) : outR(sndBlock + off, len));
        co_yield Step::recv(left, outR(rcvBlock + off, len));
      }
    }
  }
}

}  // namespace

const AlgoInfo kRingAllReduce = {.algo = Algo::Ring,
                                 .coll = Coll::AllReduce,
                                 .supports = validArgs,
                                 .scratchCount = noScratch,
                                 .generate = checked<ringAllReduce>,
                                 .channelsFor = ringChannels};
const AlgoInfo kRingReduceScatter = {Algo::Ring, Coll::ReduceScatter, validArgs,
                                     checkedScratch<ringReduceScatterScratch>, checked<ringReduceScatter>};
const AlgoInfo kRingAllGather = {Algo::Ring, Coll::AllGather, validArgs, noScratch, checked<ringAllGather>};

}  // namespace trib::algo
