// The executor: runs one rank's schedule over transports.
//
// Steps are started in schedule order as far as memory allows: a step may start once every
// earlier, unfinished step touches memory it does not conflict with (read/write or
// write/write overlap on real addresses, so in-place calls are handled exactly). This
// scoreboard over a bounded window is all the pipelining machinery there is: slice k of the
// next round starts when slice k of this round has landed. Communication steps are posted to
// the transport, local copies and reductions (and op avg's division) to the engine
// (exec/engine.hpp); both complete asynchronously, so every step is posted, then done.
// Peer-memory steps are loads and stores on the peer's mapped window, posted to the engine like
// local copies; Signal and Wait order them by the rule in algo/schedule.hpp, which the scoreboard
// enforces by giving each a write of the whole of both windows it orders.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "algo/schedule.hpp"
#include "common/dtype.hpp"
#include "common/status.hpp"
#include "exec/engine.hpp"
#include "transports/transport.hpp"

namespace trib {

struct ExecBuffers {
  const void* input = nullptr;
  void* output = nullptr;
  void* scratch = nullptr;
  uint64_t inputCount = 0, outputCount = 0, scratchCount = 0;  // elements, for bounds checks
};

// Message tags: [32 bits sequence (top bit set for point-to-point)][32 bits message index
// within the ordered pair of ranks]. Both sides derive the same index from the schedule.
inline uint64_t makeTag(uint32_t seq, uint32_t msgIndex) { return (uint64_t{seq} << 32) | msgIndex; }
constexpr uint32_t kP2pSeqBit = 0x80000000u;

struct ExecOptions {
  DataType dtype = tribFloat32;
  RedOp op = tribSum;
  uint32_t seq = 0;         // the tag sequence of this operation
  uint64_t avgDivisor = 0;  // >0: divide avgRegion by it at the end (op avg)
  Region avgRegion;         // where this rank holds reduced results
  int rank = 0;             // for messages
  // Runs SwitchReduce steps (the communicator's aggregation-switch client); nullptr: none.
  CollectiveOffload* offload = nullptr;
  // The collective those steps run (schedule.hpp: SwitchReduce).
  Coll coll = Coll::AllReduce;
  int root = 0;
  int nranks = 1;
  // Runs the local steps; nullptr: the host engine.
  Engine* engine = nullptr;
  // Every rank's window and the signals between them, for peer-memory steps; nullptr: none.
  // Executions that use windows must not overlap on one communicator (their cells and signal
  // counts follow each other, algo/schedule.hpp).
  PeerWindows* windows = nullptr;
  // What this call is (collective, algorithm, count, dtype, op, root: the communicator hashes
  // them), carried by its signals: a Wait that receives another call's signal fails the call with
  // tribInvalidUsage on every rank, as a message of the wrong size does.
  uint32_t callFingerprint = 0;
};

class Execution {
 public:
  // `peers[p]` is the transport that reaches rank p (nullptr for self); the vector must outlive
  // the execution (it is the communicator's).
  // `plan` is shared: the communicator's plan cache hands the same steps to repeated calls.
  Execution(std::shared_ptr<const std::vector<Step>> plan, const ExecBuffers& buffers,
            const std::vector<Transport*>& peers, ExecOptions opts);
  ~Execution();
  Execution(const Execution&) = delete;
  Execution& operator=(const Execution&) = delete;

  // Validates regions against buffer sizes and posts what can start.
  Status start();
  // Advances; *done = true when every step finished. Returns the first error (naming the
  // step) once a step failed.
  Status progress(bool* done);
  // A description of what this rank still waits for (used in timeout messages).
  std::string describePending() const;
  // Every step is done (op avg's division may still be running: progress() says when it all is).
  bool finished() const { return first_ == steps_.size(); }
  // Grows as steps finish (for waiters' back-off: an unchanged value means no progress).
  size_t progressMark() const { return first_ + (opts_.offload ? opts_.offload->progressCount() : 0); }
  bool stepDone(size_t i) const { return i < slots_.size() && slots_[i].state == State::Done; }
  // Lets every posted send copy its data aside and complete (the execution is being given up
  // while peers may still receive from it).
  void detachPostedSends();
  // Whether a transport, offload or engine may still hold one of its operations (posted, not
  // complete): then it, and the memory they point into, must outlive them.
  bool holdsPostedOps() const;

 private:
  enum class State : uint8_t { NotStarted, Posted, Done };
  struct Range {
    uintptr_t lo = 0, hi = 0;
    bool overlaps(const Range& o) const { return lo < o.hi && o.lo < hi; }
  };
  struct Slot {
    State state = State::NotStarted;
    Range read1, read2, write, write2;
    uint64_t tag = 0;
    // A copy followed by a reduce into the same region run as one reduce of both sources (one
    // pass instead of two): the copy's slot carries the reduce's source, the reduce's is done with it.
    const char* fusedSrc = nullptr;
    bool fusedAway = false;
    TransferOp op;
  };

  // `owner`: whose window a Window region is (-1: this rank's).
  char* address(const Region& r, int owner = -1) const;
  Range range(const Region& r, int owner = -1) const;
  Range windowRange(int owner) const;
  Status pollWait(size_t i);
  void fuseCopyReduce();
  bool conflicts(size_t earlier, size_t later) const;
  Status startStep(size_t i);
  Status finishLocal();
  Status stepError(size_t i, const Status& cause) const;

  std::shared_ptr<const std::vector<Step>> plan_;
  const std::vector<Step>& steps_;
  std::vector<Slot> slots_;
  ExecBuffers buf_;
  const std::vector<Transport*>& peers_;
  std::vector<Transport*> distinctTransports_;
  ExecOptions opts_;
  size_t elemSize_;
  size_t first_ = 0;    // first step not done
  bool rescan_ = true;  // something completed since the last scan
  bool finalized_ = false;
  Engine* engine_;
  TransferOp finalOp_;  // op avg's division, posted once every step is done
  std::vector<size_t> activeScratch_;
};

}  // namespace trib
