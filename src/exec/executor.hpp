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
// enforces by giving each a write of the whole of both windows it orders. Over remote windows
// (PeerWindows::remote(): verbs across hosts) puts and gets are posted to the provider instead
// (RDMA WRITE/READ) and a get-reduce lands its bytes in staging, reduced at the commit; a Signal
// still starts only once every earlier put and get has completed, so it never overtakes them.
//
// Sends go from the schedule's own memory (zero-copy: transport.hpp's postSend contract), so a
// send's source stays untouched until the send completes: a later step that writes it waits.
// With rendezvous sends (complete only once the receiver has the data) that wait could deadlock
// an in-place exchange (both ranks send X, then receive into X), so a writing step whose only
// obstacles are posted sends of its memory does not wait: where their transports can detach them
// (loopback, shm: Transport::detachesSends) they copy the rest aside at once; elsewhere (UCX) the
// step starts into executor-owned staging and its result is copied into place once those sends
// complete. Either copies only what is overwritten while still in flight (out of place, sources
// are rarely rewritten). Detaching is preferred where possible: its copy happens at once, while a
// landing's copy into place comes after the exchange, on the critical path (2-rank in-place ring
// over loopback, 16 MiB: ~9.8 GB/s detaching vs ~5-6 landing).
// This is sound when a send's matching receive never waits, through memory, for the sender's
// later writes of the sent region, which holds for every schedule in the registry (a message's
// receive depends only on earlier rounds; tests/conformance.cpp runs them all over loopback,
// whose sends are rendezvous).
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "algo/schedule.hpp"
#include "common/dtype.hpp"
#include "common/status.hpp"
#include "exec/engine.hpp"
#include "exec/window_write_modes.hpp"
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
  // Chooses plain or streaming stores for this run's writes into windows, and learns from how
  // long the run took (the communicator's); nullptr: plain.
  WindowWriteModes* windowWrites = nullptr;
  // What this call is (collective, algorithm, count, dtype, op, root: the communicator hashes
  // them), carried by its signals: a Wait that receives another call's signal fails the call with
  // tribInvalidUsage on every rank, as a message of the wrong size does.
  uint32_t callFingerprint = 0;
  // What memory the input and output are (classified at the API): start() refuses a step whose
  // engine, transport or offload cannot reach it, instead of letting it fault.
  MemoryKind inputKind = MemoryKind::Host, outputKind = MemoryKind::Host;
  // The execution may be given up while its sends are in flight (detachPostedSends): sends to a
  // transport that cannot detach them (Transport::detachesSends) then go from a copy the
  // execution owns, so nothing reads the caller's buffers once the call has returned.
  bool mayAbandon = false;
};

// Appends the host staging (bytes, one entry per message) that running `steps` with `opts` takes
// from its engine: device memory a transport cannot reach. A stream-ordered call reserves it
// (Engine::reserveHostStaging) before its stream is held.
void addHostStagingNeeds(const std::vector<Step>& steps, const std::vector<Transport*>& peers,
                         const ExecOptions& opts, std::vector<size_t>* needs);

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
  // Makes a finished execution (nothing of it posted: !holdsPostedOps()) ready to run the same
  // steps again over other buffers and options (same dtype and engine), without reallocating;
  // start() follows. false: it cannot be reused.
  bool rearm(const ExecBuffers& buffers, const ExecOptions& opts);
  // rearm() with the buffers and options of its last run, but the tag sequence `seq`, for a caller
  // that knows nothing else of them changed (ops.cpp: a repeat of the same call): nothing is
  // rebuilt or compared. false (nothing changed): `scratch` is not the last run's, or an op is
  // still posted; rearm() then decides.
  bool rerun(uint32_t seq, void* scratch);
  // Advances; *done = true when every step finished. Returns the first error (naming the
  // step) once a step failed.
  Status progress(bool* done);
  // A description of what this rank still waits for (used in timeout messages). For a pending
  // offload step it asks the offload whom it lacks: up to 250 ms of waiting for an answer.
  std::string describePending() const;
  // Every step is done (op avg's division may still be running: progress() says when it all is).
  bool finished() const { return first_ == steps_.size(); }
  // Grows as steps finish (for waiters' back-off: an unchanged value means no progress).
  size_t progressMark() const { return first_ + (opts_.offload ? opts_.offload->progressCount() : 0); }
  bool stepDone(size_t i) const { return i < slots_.size() && slots_[i].state == State::Done; }
  // The execution is being given up while peers may still receive from it (only with
  // ExecOptions::mayAbandon): every posted send stops reading the caller's memory (the transport
  // detaches it, or it already reads the execution's own copy). The execution must then outlive
  // holdsPostedOps(), since its sends may read its staging.
  void detachPostedSends();
  // Bytes this execution copied into its own staging (in-place overwrites of data in flight,
  // sends of an abandonable execution): 0 when every send went from the caller's buffer.
  uint64_t stagedBytes() const { return stagedBytes_; }
  // Staging it keeps for its next run (a few buffers, freed with it).
  size_t spareStagingBytes() const {
    size_t n = 0;
    for (const Spare& e : spareStaging_) n += e.bytes;
    return n;
  }
  // Whether a transport, offload or engine may still hold one of its operations (posted, not
  // complete): then it, and the memory they point into, must outlive them.
  bool holdsPostedOps() const;

 private:
  enum class State : uint8_t { NotStarted, Posted, Done };
  // What a posted step's op is doing. Direct: the step itself. SendStaging: copying a send's
  // source into staging (the send is posted from it next). Landing: a write step writing into
  // staging; Landed: done, waiting for the sends that read its destination; Commit: copying
  // staging into the destination.
  enum class Phase : uint8_t { Direct, SendStaging, Landing, Landed, Commit };
  // Executor-owned memory of the engine's kind (or, `host`, its host staging), freed with the slot.
  struct Staging {
    Engine* engine = nullptr;
    char* data = nullptr;
    size_t bytes = 0;
    bool host = false;
    Staging() = default;
    Staging(const Staging&) = delete;
    Staging& operator=(const Staging&) = delete;
    ~Staging() { release(); }
    void release() {
      if (data && host)
        engine->freeHostStaging(data, bytes);
      else if (data)
        engine->freeScratch(data, bytes);
      data = nullptr;
    }
  };
  struct Range {
    uintptr_t lo = 0, hi = 0;
    bool overlaps(const Range& o) const { return lo < o.hi && o.lo < hi; }
  };
  static constexpr size_t kNone = ~size_t{0};
  struct Slot {
    State state = State::NotStarted;
    Range read1, read2, write, write2;
    uint64_t tag = 0;
    uint32_t msgIndex = 0;  // a message's index within its ordered pair of ranks (its tag's low half)
    // A copy followed by a reduce into the same region run as one reduce of both sources (one
    // pass instead of two): the copy's slot carries the reduce's source, the reduce's is done with it.
    const char* fusedSrc = nullptr;
    bool fusedAway = false;
    // The earlier step that last kept this one from starting, when that was not a posted send:
    // while it is unfinished the scan skips this step without comparing ranges again (a window
    // schedule's steps queue behind its waits, and rescans after each completion were ~20% of a
    // 64 MiB two-shot on 4 ranks).
    size_t blockedBy = kNone;
    Phase phase = Phase::Direct;
    // A message of device memory over a transport that reaches only host memory: it goes through
    // the engine's host staging (sent from a copy; received there, then copied or reduced into place).
    bool hostStaged = false;
    // A receive-reduce its transport cannot combine in place (device memory): it lands plain
    // bytes in staging and the engine reduces them into place at the commit.
    bool engineReduces = false;
    // Where this message stages when it does (hostStaged, engineReduces, a landing, a send's
    // copy): host staging where the transport does not reach the engine's memory.
    bool hostStaging = false;
    MemoryKind memory = MemoryKind::Host;  // the kind of the step's own buffer (messages)
    // Where the step's source and destination are (a peer's window for a peer's region), fixed
    // once prepared: the buffers and windows are the same for every run of a prepared execution.
    char* srcAt = nullptr;
    char* dstAt = nullptr;
    // A send now reads its copy in staging, not read1 (cleared): rearm restores read1.
    bool readsCopy = false;
    TransferOp op;
    Staging staging;
  };

  // `owner`: whose window a Window region is (-1: this rank's).
  char* address(const Region& r, int owner = -1) const;
  Range range(const Region& r, int owner = -1) const;
  Range windowRange(int owner) const;
  // Copies into `b` go around the cache (streamOut_, streamWindow_).
  bool writesAroundCache(Buf b) const {
    return (b == Buf::Output && streamOut_) || (b == Buf::Window && streamWindow_);
  }
  // Where step i reads its source now: a window range may be its owner's exposed buffer (a
  // peer's, which the windows resolve, or this rank's own, from ownExposures_), or a copy of a
  // peer's range its signal carried (carried_[which]: two, for a fused pair's two sources).
  bool readCarried(const Step& s, void* into);
  Status sourceAddress(size_t i, const char** at, int which = 0);
  // Where a put writes the peer's window range now: the same resolution.
  Status putAddress(const Step& s, char** at);
  // This rank's exposures of this run: own-window byte range -> the buffer it aliases.
  struct OwnExposure {
    uint64_t offset, bytes;
    const char* src;
  };
  void dropOwnExposures(uint64_t offset, uint64_t bytes);
  Status ownWindowAddress(const Region& r, const char** at) const;
  // Step i writes its own window: an expose publishes its source there if the windows can map it
  // (true: nothing to copy); any other write ends the exposures it overlaps.
  bool exposeOrUnexpose(size_t i);
  Status pollWait(size_t i);
  Status startRemote(size_t i);
  void fuseCopyReduce();
  bool conflicts(size_t earlier, size_t later) const;
  // `land`: write into staging (Phase::Landing) instead of the destination.
  Status startStep(size_t i, bool land = false);
  Status postSendFrom(size_t i, const void* from);
  // `host`: the engine's host staging (Slot::hostStaging), else its scratch.
  char* stage(Slot& slot, size_t bytes, bool host = false);
  MemoryKind stagingKind(const Slot& slot) const {
    return slot.hostStaging ? MemoryKind::Host : engine_->memory();
  }
  // A posted step's op finished: the step is done, or moves on to its next phase.
  Status opFinished(size_t i);
  bool blockedByEarlier(const std::vector<size_t>& active, size_t a) const;
  // Slot's blockedBy still stands in its way.
  bool stillBlocked(const Slot& slot) const;
  // Step active[a] is blocked only by posted sends: when their transports hold those sends in
  // memory they own until matched (detachesSends), they copy the rest aside and complete, which
  // costs one copy at once instead of a landing's copy into place after the exchange.
  bool detachBlockingSends(const std::vector<size_t>& active, size_t a);
  Status finishLocal();
  // rearm()'s part that every run needs: the slots and the run's own state back to not started.
  void resetRun();
  Status stepError(size_t i, const Status& cause) const;

  std::shared_ptr<const std::vector<Step>> plan_;
  const std::vector<Step>& steps_;
  std::vector<Slot> slots_;
  ExecBuffers buf_;
  const std::vector<Transport*>& peers_;
  std::vector<Transport*> distinctTransports_;
  ExecOptions opts_;
  size_t elemSize_;
  size_t first_ = 0;      // first step not done
  size_t postedEnd_ = 0;  // one past the last step started: completions are collected below it
  bool rescan_ = true;    // something completed since the last scan
  bool finalized_ = false;
  Engine* engine_;
  // engine_ is the host engine (set once: a rearm keeps the engine), which carried reads need.
  const bool hostEngine_;
  TransferOp finalOp_;          // op avg's division, posted once every step is done
  bool streamOut_ = false;      // copies into the output write around the cache (start())
  bool streamWindow_ = false;   // copies into windows do (WindowWriteModes, chosen per run)
  bool timed_ = false;          // this run's time goes to windowWrites once it finishes
  bool remoteWindows_ = false;  // opts_.windows->remote(): peer-window steps post to the provider
  std::chrono::steady_clock::time_point started_;
  // start() has checked the steps and derived their ranges, fusion and message indices for these
  // buffers; a rearm over the same ones keeps them (only tags and wait targets are per call).
  bool prepared_ = false;
  std::vector<size_t> activeScratch_;
  std::vector<OwnExposure> ownExposures_;
  // Bytes of peers' windows that their signals carried (PeerWindows::readCarried), read here by
  // the host engine, which is done with a source when its post returns.
  alignas(16) char carried_[2][PeerWindows::kCarryBytes];
  uint64_t stagedBytes_ = 0;
  // Staging of finished steps, for the next to land (pipelined slices have equal sizes).
  struct Spare {
    size_t bytes;
    char* data;
    bool host;
  };
  std::vector<Spare> spareStaging_;
  void releaseStaging(Slot& slot);
};

}  // namespace trib
