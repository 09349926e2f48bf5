// The symbolic verifier: runs every rank's schedule without data and proves that each output
// element ends up with exactly the right contributions.
//
// Every element ("cell") carries what it holds: the source element index it derives from and
// the set of ranks whose inputs were reduced into it (an interval set, so 4,608 ranks cost a
// few words per cell, and runs of equal cells are stored once). Ranks run their generators
// lazily in round-robin order, each rank sequentially; sends are eager into per-(src,dst) FIFO
// channels, exactly the semantics in algo/schedule.hpp.
//
// Peer-memory steps: every rank's window (CollArgs::windowElems cells) holds symbolic contents like
// any buffer; put/get/get_reduce move and reduce them across ranks, and signals are matched in
// order per ordered pair like messages (a wait whose signal never comes is a deadlock; a signal
// nobody waits for is reported). Window accesses are checked for data races under the executor's
// rule (verify/causal.hpp): a read of a window cell must causally follow the cell's last write,
// and a write must follow the previous write and every read since, where "follows" means through
// the writer's or reader's release (its first later signal/wait that the schedule.hpp rule orders
// after it) and a chain of signals to the other step. Accesses by one rank to one cell are always
// ordered (the scoreboard sees the same addresses). Orderings that reach a window only through
// messages or local data are not credited, so such a schedule is reported as racy: conservative.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

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
  uint64_t windowSteps = 0;   // put, get and get_reduce steps
  uint64_t signals = 0;       // signal steps (== wait steps when the schedule is correct)
  double seconds = 0;         // wall time of the verification
};

// Checks the schedule `algo` produces for `args` on every rank. Returns OK or an error whose
// message names the rank, the step number and describeStep() of the failing step.
// A single call starts with every window free: never written, no pending readers or signals.
Status verifySchedule(const AlgoInfo& algo, const CollArgs& args, VerifyStats* stats = nullptr);

// Calls one after another on one communicator (each rank starts call t+1 once its call t is
// complete; windows, their contents and signal counts carry over): proves that reusing windows
// across calls is race-free. Every call needs the same nranks and windowElems. The windowCell of
// call 0 is taken as given; each later call's is the communicator's: the previous call's plus
// windowChunks(algo, args), modulo 2. Errors name the call ("call 1: rank 3, step ...").
struct VerifyCall {
  const AlgoInfo* algo = nullptr;
  CollArgs args;
};
Status verifySequence(const std::vector<VerifyCall>& calls, VerifyStats* stats = nullptr);

}  // namespace trib
