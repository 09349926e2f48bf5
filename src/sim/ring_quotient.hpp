// The ring all-reduce replayed on one period of alike ranks (a rack) instead of all of them: a
// quotient of the replay by the shift of that period, exact where every period's ranks, hops and
// steps are alike, else a bracket (docs/PLANNER.md, "Symmetry: the ring"). simulatePlanned
// (sim_plan.cpp) finds it and runs it through SimOptions::replayFirst / replayRanks.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "algo/schedule.hpp"
#include "sim/sim.hpp"
#include "topo/topology.hpp"

namespace trib {

// A quotient of the ring all-reduce by the shift of `period` ranks (SimOptions::replayRanks).
struct RingQuotient {
  int period = 0;
  bool exact = false;
  int lowFirst = 0, highFirst = 0;  // windows whose hop out is the fastest / slowest class
  uint64_t lowCount = 0, highCount = 0;
  size_t classes = 0, hopsOut = 0;
  // Where no class is the slowest (a partial pod's hops in and out of it, each slower on another
  // link): the topology with the upper window's hop out slowed to the slowest of each of its hops.
  std::optional<Topology> upper;
  std::string why;  // what was found (sound or not)
};

// The ring moves equal blocks from each rank to the next (algo/ring.cpp: every rank runs rank 0's
// steps shifted). Where every hop r -> r+1 costs what hop r+K -> r+K+1 costs, the hops share no
// link and the ranks' nodes are alike, the replay is invariant under shifting every rank by K: by
// induction over its events each rank's times are those of the rank K further on, so replaying K
// ranks, the hop out of the last landing at the first, gives the same times. Where the hops out
// of the K-rank windows differ (a fat tree's pods), the windows with the fastest and the slowest
// of them bracket the replay (a bound, not exact), as do blocks rounded down and up to a multiple
// of n elements where n does not divide the count.
constexpr double kMaxBracket = 0.01;  // the widest bracket (upper - lower) / upper reported

// Whether the ring's replay has such a quotient for these ranks' nodes; *q says what was found
// (q->why: why not, when false).
bool findRingQuotient(const Topology& t, const std::vector<int>& nodes, const AlgoInfo& algo,
                      const CollArgs& args, const SimOptions& opt, RingQuotient* q);

}  // namespace trib
