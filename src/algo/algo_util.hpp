// Internal helpers shared by the schedule generators (not part of the schedule interface).
#pragma once
#include <algorithm>
#include <cstdint>

#include "algo/schedule.hpp"

namespace trib::algo {

inline Region inR(uint64_t off, uint64_t n) { return {Buf::Input, off, n}; }
inline Region outR(uint64_t off, uint64_t n) { return {Buf::Output, off, n}; }
inline Region scrR(uint64_t off, uint64_t n) { return {Buf::Scratch, off, n}; }
inline Region shift(Region r, uint64_t by, uint64_t n) { return {r.buf, r.offset + by, n}; }

// Pipelining: a range of `len` elements is cut into slices of `chunk` elements.
inline uint64_t chunkOf(const CollArgs& a) { return a.chunkElems == 0 ? 1 : a.chunkElems; }
inline uint64_t numSlices(uint64_t len, uint64_t chunk) { return len == 0 ? 0 : (len - 1) / chunk + 1; }
inline uint64_t sliceBegin(uint64_t j, uint64_t chunk) { return j * chunk; }
// Length of slice j of a range of `len` (0 when the range has fewer slices).
inline uint64_t sliceLen(uint64_t len, uint64_t chunk, uint64_t j) {
  if (j >= numSlices(len, chunk)) return 0;
  return std::min(chunk, len - j * chunk);
}

// Ring-like schedules run a group of this many slices through all rounds before the next group
// (as NCCL's FIFO of 8 steps): within a round the group's slices are independent, so the
// executor's window keeps several in flight while round r+1 of slice k waits only for round r
// of slice k.
constexpr uint64_t kGroupSlices = 8;

inline int mod(int64_t a, int n) { return static_cast<int>(((a % n) + n) % n); }

// The order in which a rank meets its peers when it talks to all of them (direct, allgather_reduce): step k
// = 1..steps()-1 sends to sendPeer(rank, k) and receives from recvPeer(rank, k), the rank whose sendPeer at
// step k is this one (so a rank posts its receives in the order its peers send); -1: none at this step. Each
// k is a permutation of the ranks (of the slots, padded, below). A rank's sends to its own domain are quick
// (NVLink); those to other domains queue at its network port, so what matters is whom the ranks of one domain
// meet outside it. With rank + k they all met the same first rank outside their domain once their in-domain
// sends were posted, and that rank's port took their messages one after another (incast: nvl72-cluster:2, 16
// MiB, the replay 1.44x the model; dgx-h100:2 1.38x before the XOR order).
//  - Rack order, when args.ranksPerDomain = d >= 2 makes m = ceil(n / d) >= 2 contiguous domains
//    (the planner sets it so), all of d ranks but the last, which may hold fewer: rank = R d + l and
//    k = dr d + dl go to ((R + dr) mod m) d + (l + dl) mod d. Steps with dr = 0 stay in the domain;
//    at each dr >= 1 the d ranks of a domain all go to one remote domain, each to a different rank
//    of it. On powers of two it replaces XOR too: the same replay on 2 and 4 DGX nodes, 1.09x the
//    model against 1.13x on 8 (which spine routes collide; docs/PLANNER.md).
//    A last domain of fewer ranks is padded to d: the order runs over m d slots, slot i holding
//    rank i, and a step to a slot past the last rank is skipped (peer -1). Each step stays a
//    permutation of the slots, so every pair of ranks meets once, and the ranks of a full domain
//    still meet the small one's ranks each at a different one: 8 + 6 GPUs (two DGX H100), 16 MiB,
//    the replay 1.28x the model in the flat order (every rank of the full node met ranks 8, 9, ...
//    13 in that order, and rank 13 got all eight blocks last), 1.00x padded.
//    The remote domains come first (step k runs k' = (k + d - 2) mod (m d - 1) + 1 = dr d + dl
//    above: dr = 1, 2, ..., m - 1, then dr = 0, each from dl = 0): a rank's sends are posted
//    at once and leave each link in posting order, so the network's (slower, and through a PXN
//    relay stored and forwarded) start while the domain's own go over the faster NVLink. Domain
//    first, a relay's NIC waited for its legs behind the senders' local blocks: direct/LL on two
//    DGX A100 on rails, 64 KiB, the replay 1.12x the model (1 MiB 1.34x), remote first 0.98x.
//  - Without domains, rank XOR k for n a power of two (every step pairs the ranks off, and an
//    aligned block of 2^j ranks meets another block each at a different rank), else rank + k.
struct PeerOrder {
  int n, d, m;  // d = 0: no domains
  explicit PeerOrder(const CollArgs& a)
      : n(a.nranks),
        d(a.ranksPerDomain >= 2 && a.ranksPerDomain < a.nranks ? a.ranksPerDomain : 0),
        m(d ? (n + d - 1) / d : 1) {}
  int steps() const { return d ? m * d : n; }
  int sendPeer(int rank, int k) const { return peer(rank, remoteFirst(k), 1); }
  int recvPeer(int rank, int k) const { return peer(rank, remoteFirst(k), -1); }

 private:
  int remoteFirst(int k) const { return d && k > 0 ? (k + d - 2) % (m * d - 1) + 1 : k; }
  int peer(int rank, int k, int sign) const {
    if (d) {
      const int slot = mod(rank / d + sign * (k / d), m) * d + mod(rank % d + sign * (k % d), d);
      return slot < n ? slot : -1;
    }
    return (n & (n - 1)) == 0 ? rank ^ k : mod(rank + sign * k, n);
  }
};

// Requests every generator accepts: a sane communicator, root and slice size.
bool validArgs(const CollArgs& a);
uint64_t noScratch(const CollArgs& a, int rank);

// Generators and scratch functions assume supports(args) and 0 <= rank < nranks. The registry
// wraps them so that other requests cannot divide by zero or emit a wrong schedule: generators
// throw std::invalid_argument (from Generator::next) and scratch sizes are 0.
void requireValid(const CollArgs& a, int rank);
template <Generator<Step> (*G)(CollArgs, int)>
Generator<Step> checked(CollArgs a, int rank) {
  requireValid(a, rank);
  auto g = G(a, rank);
  while (g.next()) co_yield g.value();
}
template <uint64_t (*F)(const CollArgs&, int)>
uint64_t checkedScratch(const CollArgs& a, int rank) {
  return validArgs(a) && rank >= 0 && rank < a.nranks ? F(a, rank) : 0;
}

// Single-rank collectives: the output is the input (a copy unless in-place).
Generator<Step> localCopy(CollArgs a, int rank);

// Forwards every step of `g` (to compose generators).
#define TRIB_YIELD_ALL(gen_expr)                     \
  do {                                               \
    auto trib_g_ = (gen_expr);                       \
    while (trib_g_.next()) co_yield trib_g_.value(); \
  } while (0)

}  // namespace trib::algo
