// The symbolic verifier: runs every rank's schedule without data and proves that each output
// element ends up with exactly the right contributions.
//
// Every element ("cell") carries what it holds: the source element index it derives from and
// the set of ranks whose inputs were reduced into it (an interval set, so 4,608 ranks cost a
// few words per cell, and runs of equal cells are stored once). Ranks run their generators
// lazily in round-robin order, each rank sequentially; sends are eager into per-(src,dst) FIFO
// channels, exactly the semantics in algo/schedule.hpp.
#pragma once
#include <cstdint>
#include <string>

#include "algo/schedule.hpp"
#include "common/status.hpp"

namespace trib {

struct VerifyStats {
  uint64_t steps = 0;         // all ranks' steps
  uint64_t messages = 0;      // sends (== receives when the schedule is correct)
  uint64_t elementsSent = 0;  // summed over all messages
  uint64_t maxRankSteps = 0;  // the busiest rank's step count
  uint64_t maxRankSent = 0;   // the most elements any one rank sends
  uint64_t maxRankRecv = 0;   // the most elements any one rank receives
  uint64_t peakSegments = 0;  // storage high-water mark (runs of equal cells, all ranks)
  double seconds = 0;         // wall time of the verification
};

// Checks the schedule `algo` produces for `args` on every rank. Returns OK or an error whose
// message names the rank, the step number and describeStep() of the failing step.
Status verifySchedule(const AlgoInfo& algo, const CollArgs& args, VerifyStats* stats = nullptr);

}  // namespace trib
