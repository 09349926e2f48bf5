#include "exec/executor.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "common/log.hpp"
#include "common/text.hpp"
#include "reduce/reduce.hpp"

namespace trib {

namespace {
constexpr size_t kWindow = kExecutorWindowSteps;  // algo/schedule.hpp

// A communication step's own memory (what it sends from, or receives into) and how its
// transport reaches it. `reachable`: directly (a reduce-receive: it combines there, its local
// operand included). Otherwise, on a device engine, device memory goes through staging: a send
// from a copy in host staging; a receive lands in host staging and the engine copies it into
// place; a reduce-receive lands plain bytes in staging, of the engine's memory where the
// transport receives into that (GPUDirect: a NIC writing device memory), else host staging, and
// the engine reduces them into place. Anything else it cannot reach is refused.
struct MessageMemory {
  uint64_t count;
  MemoryKind kind;     // the step's own buffer's
  bool reachable;      // the transport moves it in place
  bool engineReduces;  // a reduce-receive the transport receives plain into staging
  bool hostStaged;     // through host staging (the transport does not reach the engine's memory)
};
MemoryKind regionKind(const Region& r, const ExecOptions& opts, const Engine& engine) {
  return r.buf == Buf::Input ? opts.inputKind : r.buf == Buf::Output ? opts.outputKind : engine.memory();
}
MessageMemory messageMemory(const Step& s, const ExecOptions& opts, const Engine& engine,
                            const Transport& t) {
  const bool sending = s.kind == StepKind::Send;
  const bool reducing = s.kind == StepKind::RecvReduce;
  const Region& mine = sending ? s.src : s.dst;
  const MemoryKind kind = regionKind(mine, opts, engine);
  const MemoryKind local = reducing ? regionKind(s.src, opts, engine) : kind;
  MessageMemory m{mine.count, kind, false, false, false};
  m.reachable = sending    ? t.sendsFrom(kind)
                : reducing ? t.reducesInto(kind) && t.reducesInto(local)
                           : t.receivesInto(kind);
  const bool device = kind == MemoryKind::Device || local == MemoryKind::Device;
  if (m.reachable || m.count == 0 || !device || engine.memory() != MemoryKind::Device) return m;
  m.engineReduces = reducing;
  m.hostStaged = !(reducing && t.receivesInto(engine.memory()));
  return m;
}
}  // namespace

void addHostStagingNeeds(const std::vector<Step>& steps, const std::vector<Transport*>& peers,
                         const ExecOptions& opts, std::vector<size_t>* needs) {
  const Engine& engine = opts.engine ? *opts.engine : hostEngine();
  if (engine.memory() != MemoryKind::Device) return;  // only a device engine stages through host memory
  const size_t elemSize = dataTypeSize(opts.dtype);
  for (const Step& s : steps) {
    if (!s.isComm() || s.peer < 0 || s.peer >= static_cast<int>(peers.size()) || !peers[s.peer]) continue;
    const MessageMemory m = messageMemory(s, opts, engine, *peers[s.peer]);
    if (m.hostStaged) needs->push_back(m.count * elemSize);
  }
}

Execution::Execution(std::shared_ptr<const std::vector<Step>> plan, const ExecBuffers& buffers,
                     const std::vector<Transport*>& peers, ExecOptions opts)
    : plan_(std::move(plan)),
      steps_(*plan_),
      slots_(steps_.size()),
      buf_(buffers),
      peers_(peers),
      opts_(opts),
      elemSize_(dataTypeSize(opts.dtype)),
      engine_(opts.engine ? opts.engine : &hostEngine()),
      hostEngine_(engine_ == &hostEngine()) {}

bool Execution::rearm(const ExecBuffers& buffers, const ExecOptions& opts) {
  if (holdsPostedOps() || opts.dtype != opts_.dtype || (opts.engine ? opts.engine : &hostEngine()) != engine_)
    return false;
  // What start() derived holds for the same buffers, windows and rank (the steps are the same).
  prepared_ = prepared_ && buffers.input == buf_.input && buffers.output == buf_.output &&
              buffers.scratch == buf_.scratch && buffers.inputCount == buf_.inputCount &&
              buffers.outputCount == buf_.outputCount && buffers.scratchCount == buf_.scratchCount &&
              opts.windows == opts_.windows && opts.offload == opts_.offload && opts.rank == opts_.rank &&
              opts.nranks == opts_.nranks;
  buf_ = buffers;
  opts_ = opts;
  resetRun();
  return true;
}

bool Execution::rerun(uint32_t seq, void* scratch) {
  if (scratch != buf_.scratch || holdsPostedOps()) return false;
  opts_.seq = seq;
  resetRun();
  return true;
}

void Execution::resetRun() {
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& slot = slots_[i];
    slot.state = State::NotStarted;
    if (!prepared_) {
      slot.read1 = slot.read2 = slot.write = slot.write2 = Range{};
      slot.fusedSrc = nullptr;
      slot.fusedAway = false;
      slot.hostStaged = slot.engineReduces = slot.hostStaging = false;
      slot.memory = MemoryKind::Host;
      slot.srcAt = slot.dstAt = nullptr;
      slot.readsCopy = false;
    } else if (slot.fusedAway) {
      slot.state = State::Done;   // as fuseCopyReduce left it
    } else if (slot.readsCopy) {  // the same buffers: its source is what it read before the copy
      slot.read1 = range(steps_[i].src);
      slot.readsCopy = false;
    }
    slot.tag = 0;
    slot.blockedBy = kNone;
    slot.phase = Phase::Direct;
    slot.op.state.store(TransferOp::kPending, std::memory_order_relaxed);
    if (!slot.op.error.ok()) slot.op.error = Status::Ok();
    slot.staging.release();
  }
  if (!prepared_) distinctTransports_.clear();
  first_ = 0;
  ownExposures_.clear();
  postedEnd_ = 0;
  rescan_ = true;
  finalized_ = false;
  finalOp_.state.store(TransferOp::kPending, std::memory_order_relaxed);
  if (!finalOp_.error.ok()) finalOp_.error = Status::Ok();
  stagedBytes_ = 0;
  if (!prepared_) streamOut_ = false;
}

Execution::~Execution() {
  for (const Spare& e : spareStaging_)
    e.host ? engine_->freeHostStaging(e.data, e.bytes) : engine_->freeScratch(e.data, e.bytes);
}

char* Execution::address(const Region& r, int owner) const {
  const void* base = nullptr;
  switch (r.buf) {
    case Buf::Input:
      base = buf_.input;
      break;
    case Buf::Output:
      base = buf_.output;
      break;
    case Buf::Scratch:
      base = buf_.scratch;
      break;
    case Buf::Window:
      base = opts_.windows->windowOf(owner < 0 ? opts_.rank : owner);
      break;
  }
  return static_cast<char*>(const_cast<void*>(base)) + r.offset * elemSize_;
}

Execution::Range Execution::range(const Region& r, int owner) const {
  if (r.count == 0) return {};
  auto lo = reinterpret_cast<uintptr_t>(address(r, owner));
  return {lo, lo + r.count * elemSize_};
}

Execution::Range Execution::windowRange(int owner) const {
  auto lo = reinterpret_cast<uintptr_t>(opts_.windows->windowOf(owner));
  return {lo, lo + opts_.windows->windowBytes()};
}

Status Execution::sourceAddress(size_t i, const char** at, int which) {
  const Step& s = steps_[i];
  if (!s.srcIsPeers()) {
    // (Without exposures of its own, a window range is the window.)
    if (s.src.buf == Buf::Window && s.src.count > 0 && !ownExposures_.empty())
      return ownWindowAddress(s.src, at);
    *at = slots_[i].srcAt;
    return Status::Ok();
  }
  if (readCarried(s, carried_[which])) {
    *at = carried_[which];
    return Status::Ok();
  }
  uint8_t* p = nullptr;
  TRIB_RETURN_IF_ERROR(
      opts_.windows->peerAddress(s.peer, s.src.offset * elemSize_, s.src.count * elemSize_, &p));
  *at = reinterpret_cast<const char*>(p);
  return Status::Ok();
}

// A peer-window source of at most kCarryBytes copied into `into` from a signal that carried it
// (PeerWindows::readCarried; host engine only: it is done with the copy when its post returns).
bool Execution::readCarried(const Step& s, void* into) {
  const uint64_t bytes = s.src.count * elemSize_;
  return bytes > 0 && bytes <= PeerWindows::kCarryBytes && hostEngine_ &&
         opts_.windows->readCarried(s.peer, s.src.offset * elemSize_, bytes, into);
}

Status Execution::putAddress(const Step& s, char** at) {
  uint8_t* p = nullptr;
  TRIB_RETURN_IF_ERROR(
      opts_.windows->peerAddress(s.peer, s.dst.offset * elemSize_, s.dst.count * elemSize_, &p));
  *at = reinterpret_cast<char*>(p);
  return Status::Ok();
}

Status Execution::ownWindowAddress(const Region& r, const char** at) const {
  const uint64_t offset = r.offset * elemSize_, bytes = r.count * elemSize_;
  for (const OwnExposure& x : ownExposures_) {
    if (x.offset >= offset + bytes || offset >= x.offset + x.bytes) continue;
    if (x.offset > offset || x.offset + x.bytes < offset + bytes)
      return errorf(tribInternalError, "the schedule reads its window [%llu, +%llu) exposed only in part",
                    static_cast<unsigned long long>(offset), static_cast<unsigned long long>(bytes));
    *at = x.src + (offset - x.offset);
    return Status::Ok();
  }
  *at = address(r);
  return Status::Ok();
}

void Execution::dropOwnExposures(uint64_t offset, uint64_t bytes) {
  std::erase_if(ownExposures_, [&](const OwnExposure& x) {
    return x.offset < offset + bytes && offset < x.offset + x.bytes;
  });
}

bool Execution::exposeOrUnexpose(size_t i) {
  const Step& s = steps_[i];
  const uint64_t offset = s.dst.offset * elemSize_, bytes = s.dst.count * elemSize_;
  dropOwnExposures(offset, bytes);
  // Only the caller's buffers: they outlive the call, which ends after every peer's reads.
  const char* src = slots_[i].srcAt;
  if (s.kind == StepKind::Expose && (s.src.buf == Buf::Input || s.src.buf == Buf::Output) &&
      opts_.windows->expose(offset, src, bytes,
                            s.src.buf == Buf::Input ? opts_.inputKind : opts_.outputKind)) {
    ownExposures_.push_back(OwnExposure{offset, bytes, src});
    return true;
  }
  opts_.windows->unexpose(offset, bytes);
  return false;
}

bool Execution::conflicts(size_t e, size_t l) const {
  const Slot& a = slots_[e];
  const Slot& b = slots_[l];
  for (const Range* w : {&a.write, &a.write2})
    if (w->overlaps(b.read1) || w->overlaps(b.read2) || w->overlaps(b.write) || w->overlaps(b.write2))
      return true;
  for (const Range* w : {&b.write, &b.write2})
    if (w->overlaps(a.read1) || w->overlaps(a.read2)) return true;
  return false;
}

Status Execution::stepError(size_t i, const Status& cause) const {
  // A switch_reduce runs on the offload (the aggregation switch client): name it.
  const bool offloaded = steps_[i].kind == StepKind::SwitchReduce && opts_.offload;
  return Status(cause.code(), strprintf("rank %d, step %zu of %zu %s%s%s: %s", opts_.rank, i, steps_.size(),
                                        describeStep(steps_[i]).c_str(), offloaded ? " on " : "",
                                        offloaded ? opts_.offload->name() : "", cause.message().c_str()));
}

Status Execution::start() {
  const uint64_t callBytes = buf_.inputCount * elemSize_;
  streamWindow_ = opts_.windowWrites && opts_.windows && opts_.windowWrites->choose(callBytes);
  timed_ = opts_.windowWrites && opts_.windowWrites->measures(callBytes);
  if (timed_) started_ = std::chrono::steady_clock::now();
  if (prepared_) {
    for (size_t i = 0; i < steps_.size(); ++i) {
      const Step& s = steps_[i];
      if (s.isComm()) slots_[i].tag = makeTag(opts_.seq, slots_[i].msgIndex);
      if (s.kind == StepKind::Wait) slots_[i].tag = ++opts_.windows->waitsPosted(s.peer);
    }
    bool done = false;
    return progress(&done);
  }
  // Memory the engine cannot touch (device memory on the host engine) is refused up front.
  const bool deviceEngine = engine_->memory() == MemoryKind::Device;
  if (!deviceEngine && (opts_.inputKind == MemoryKind::Device || opts_.outputKind == MemoryKind::Device))
    return errorf(tribInvalidUsage, "rank %d: the %s engine cannot touch device memory (input %s, output %s)",
                  opts_.rank, engine_->name(), memoryKindName(opts_.inputKind),
                  memoryKindName(opts_.outputKind));
  remoteWindows_ = opts_.windows && opts_.windows->remote();
  const uint64_t windowCount = opts_.windows ? opts_.windows->windowBytes() / elemSize_ : 0;
  const uint64_t limits[kNumBufs] = {buf_.inputCount, buf_.outputCount, buf_.scratchCount, windowCount};
  // Per-peer message counters give each message its tag; the peer derives the same index.
  std::vector<uint32_t> counters;                // [2p]: sent to p, [2p+1]: received from p
  std::vector<std::pair<Range, Range>> exposed;  // (source, window cells) of each expose so far
  for (size_t i = 0; i < steps_.size(); ++i) {
    const Step& s = steps_[i];
    for (const Region* r : {&s.src, &s.dst}) {
      bool used = (r == &s.src) ? s.readsSrc() : s.writesDst();
      if (used && r->count > 0 && r->offset + r->count > limits[static_cast<int>(r->buf)]) {
        return stepError(i, errorf(tribInternalError, "region exceeds its buffer of %llu elements",
                                   static_cast<unsigned long long>(limits[static_cast<int>(r->buf)])));
      }
    }
    Slot& slot = slots_[i];
    const bool windowStep = s.isPeerMemory() || s.isSync() || s.touchesOwnWindow();
    if (windowStep) {
      if (!opts_.windows) return stepError(i, errorf(tribInternalError, "no peer windows to run this step"));
      if ((s.isPeerMemory() || s.isSync()) && (s.peer < 0 || s.peer >= opts_.nranks || s.peer == opts_.rank))
        return stepError(i, errorf(tribInternalError, "peer %d has no window here", s.peer));
      if ((s.srcIsPeers() && s.src.buf != Buf::Window) || (s.dstIsPeers() && s.dst.buf != Buf::Window))
        return stepError(i,
                         errorf(tribInternalError, "a peer's memory is reachable only through its window"));
    }
    if (s.readsSrc()) slot.read1 = range(s.src, s.srcIsPeers() ? s.peer : -1);
    if (s.readsDst()) slot.read2 = range(s.dst);
    if (s.writesDst()) slot.write = range(s.dst, s.dstIsPeers() ? s.peer : -1);
    // Memory this schedule exposed is its window's alias until the call ends: writing it is writing
    // the window (the verifier's rule), ordered after the sync steps before it (peers' reads).
    if (s.kind == StepKind::Expose) {
      exposed.push_back({slot.read1, slot.write});
    } else if (s.writesDst() && !s.dstIsPeers() && s.dst.buf != Buf::Window) {
      for (const auto& [src, win] : exposed) {  // the window cells the written part aliases
        const uintptr_t lo = std::max(src.lo, slot.write.lo), hi = std::min(src.hi, slot.write.hi);
        if (lo >= hi) continue;
        const Range alias{win.lo + (lo - src.lo), win.lo + (hi - src.lo)};
        slot.write2 = slot.write2.lo == slot.write2.hi
                          ? alias
                          : Range{std::min(slot.write2.lo, alias.lo), std::max(slot.write2.hi, alias.hi)};
      }
    }
    if (s.isSync()) {  // the ordering rule (algo/schedule.hpp), as writes of both windows
      slot.write = windowRange(opts_.rank);
      slot.write2 = windowRange(s.peer);
      // The k-th Wait(p) of the communicator completes at p's k-th signal.
      if (s.kind == StepKind::Wait) slot.tag = ++opts_.windows->waitsPosted(s.peer);
    }
    if (s.kind == StepKind::SwitchReduce && !opts_.offload) {
      return stepError(i, errorf(tribInternalError, "no aggregation switch attached to run this step"));
    }
    if (s.isComm()) {
      if (s.peer < 0 || s.peer >= static_cast<int>(peers_.size()) || !peers_[s.peer]) {
        return stepError(i, errorf(tribInternalError, "no transport reaches peer %d", s.peer));
      }
      const Transport& peer = *peers_[s.peer];
      const MessageMemory m = messageMemory(s, opts_, *engine_, peer);
      slot.hostStaged = m.hostStaged;
      slot.engineReduces = m.engineReduces;
      slot.memory = m.kind;
      // Staging for any other reason (a landing, a send's copy) is host memory where the transport
      // does not reach the engine's.
      const MemoryKind e = engine_->memory();
      slot.hostStaging =
          m.hostStaged || (s.kind == StepKind::Send                      ? !peer.sendsFrom(e)
                           : s.kind == StepKind::Recv || m.engineReduces ? !peer.receivesInto(e)
                                                                         : !peer.reducesInto(e));
      if (m.count > 0 && !m.reachable && !m.hostStaged && !m.engineReduces)
        return stepError(i, errorf(tribInvalidUsage, "the %s transport cannot %s %s memory", peer.name(),
                                   s.kind == StepKind::Send         ? "send from"
                                   : s.kind == StepKind::RecvReduce ? "reduce-receive into"
                                                                    : "receive into",
                                   memoryKindName(m.kind)));
      if (counters.empty()) counters.assign(2 * peers_.size(), 0);
      slot.msgIndex = counters[2 * static_cast<size_t>(s.peer) + (s.kind == StepKind::Send ? 0 : 1)]++;
      slot.tag = makeTag(opts_.seq, slot.msgIndex);
      // Progress only the transports this schedule uses (a one-shot or switch plan uses none).
      Transport* t = peers_[s.peer];
      if (std::find(distinctTransports_.begin(), distinctTransports_.end(), t) == distinctTransports_.end())
        distinctTransports_.push_back(t);
    }
    // (A window region without windows was refused above where the step uses it.)
    const auto at = [&](const Region& r, bool peers) {
      return r.buf == Buf::Window && !opts_.windows ? nullptr : address(r, peers ? s.peer : -1);
    };
    slot.srcAt = at(s.src, s.srcIsPeers());
    slot.dstAt = at(s.dst, s.dstIsPeers());
  }
  fuseCopyReduce();
  // Copies into the output go around the cache once the ranks' inputs and outputs together (times
  // the ranks sharing a core: a switch between them evicts the other's lines) exceed the last-level
  // cache: those lines are only written now. (The shm board's rule, measured there: 2 ranks at
  // 16 MiB 6.4 vs 4.9 GB/s busbw streaming vs plain, plain faster up to ~4 MiB.)
  static const uint64_t cores = std::max<long>(1, sysconf(_SC_NPROCESSORS_ONLN));
  const uint64_t perCore = (static_cast<uint64_t>(opts_.nranks) + cores - 1) / cores;
  streamOut_ = buf_.input != buf_.output &&
               2 * static_cast<uint64_t>(opts_.nranks) * buf_.outputCount * elemSize_ * perCore >=
                   lastLevelCacheBytes();
  prepared_ = true;
  bool done = false;
  return progress(&done);
}

// dst = a; dst = dst op b  ->  dst = a op b: the same elements combined in the same order, so the
// same bits, with one pass over dst. The pair must be adjacent and name the same local region.
void Execution::fuseCopyReduce() {
  for (size_t i = 0; i + 1 < steps_.size(); ++i) {
    const Step& a = steps_[i];
    const Step& b = steps_[i + 1];
    const bool copies = a.kind == StepKind::Copy || a.kind == StepKind::Get;
    const bool reduces = b.kind == StepKind::Reduce || b.kind == StepKind::GetReduce;
    // Over remote windows a peer's bytes are not addressable here (a get lands them first).
    if (remoteWindows_ && (a.srcIsPeers() || b.srcIsPeers())) continue;
    if (!copies || !reduces || slots_[i].fusedAway || a.dst.buf != b.dst.buf ||
        a.dst.offset != b.dst.offset || a.dst.count != b.dst.count || a.dst.count == 0)
      continue;
    slots_[i].fusedSrc = address(b.src, b.srcIsPeers() ? b.peer : -1);
    slots_[i].read2 = slots_[i + 1].read1;  // so it waits for what the reduce would have
    slots_[i + 1].fusedAway = true;
    // Done from the start: the copy's ranges hold the reduce's (same destination, its source as
    // read2), so whatever would wait for the reduce, or the reduce for, waits for the copy.
    slots_[i + 1].state = State::Done;
  }
}

char* Execution::stage(Slot& slot, size_t bytes, bool host) {
  // A step starts once, so a slot stages at most once.
  slot.staging.engine = engine_;
  slot.staging.host = host;
  auto spare = std::find_if(spareStaging_.begin(), spareStaging_.end(),
                            [&](const Spare& e) { return e.bytes >= bytes && e.host == host; });
  if (spare != spareStaging_.end()) {
    slot.staging.bytes = spare->bytes;
    slot.staging.data = spare->data;
    spareStaging_.erase(spare);
  } else {
    slot.staging.data =
        static_cast<char*>(host ? engine_->allocHostStaging(bytes) : engine_->allocScratch(bytes));
    slot.staging.bytes = bytes;
  }
  if (slot.staging.data) stagedBytes_ += bytes;
  return slot.staging.data;
}

Status Execution::postSendFrom(size_t i, const void* from) {
  const Step& s = steps_[i];
  Slot& slot = slots_[i];
  slot.state = State::Posted;
  slot.op.state.store(TransferOp::kPending, std::memory_order_relaxed);
  slot.op.memory = from && from == slot.staging.data ? stagingKind(slot) : slot.memory;
  return peers_[s.peer]->postSend(s.peer, slot.tag, from, s.src.count * elemSize_, &slot.op);
}

Status Execution::startStep(size_t i, bool land) {
  const Step& s = steps_[i];
  Slot& slot = slots_[i];
  const size_t bytesOf = s.kind == StepKind::Send ? s.src.count * elemSize_ : s.dst.count * elemSize_;
  char* into = nullptr;  // where the step writes: its destination, or staging when it lands
  if (s.writesDst() && !s.dstIsPeers() && s.dst.buf == Buf::Window && s.dst.count > 0) {
    if (exposeOrUnexpose(i)) {
      slot.state = State::Done;  // published instead of copied
      return Status::Ok();
    }
    // What a peer reads next may be this: small enough, the next signals carry it.
    if (bytesOf <= PeerWindows::kCarryBytes) opts_.windows->carryNext(s.dst.offset * elemSize_, bytesOf);
  }
  // A received message the transport cannot put (or reduce) into place lands in staging and is
  // copied (or reduced) into place by the engine.
  const bool mustLand = (slot.hostStaged || slot.engineReduces) && s.kind != StepKind::Send;
  if (land || mustLand) {
    into = stage(slot, bytesOf, slot.hostStaging);
    if (!into) return errorf(tribSystemError, "out of memory staging %zu bytes", bytesOf);
    slot.phase = Phase::Landing;
  } else if (remoteWindows_ && s.isPeerMemory()) {
    return startRemote(i);
  } else if (s.dstIsPeers()) {
    TRIB_RETURN_IF_ERROR(putAddress(s, &into));
  } else if (s.writesDst()) {
    into = slot.dstAt;
  }
  switch (s.kind) {
    case StepKind::Send:
      if (slot.hostStaged || (opts_.mayAbandon && bytesOf > 0 && !peers_[s.peer]->detachesSends())) {
        // Given up mid-flight, this send could not let go of the caller's buffer: send a copy (in
        // host staging where the transport cannot read the buffer's device memory).
        char* copy = stage(slot, bytesOf, slot.hostStaging);
        if (!copy) return errorf(tribSystemError, "out of memory staging %zu bytes", bytesOf);
        slot.phase = Phase::SendStaging;
        slot.state = State::Posted;
        TRIB_RETURN_IF_ERROR(engine_->postCopy(copy, address(s.src), bytesOf, &slot.op, false));
        return slot.op.state.load(std::memory_order_acquire) == TransferOp::kDone ? opFinished(i)
                                                                                  : Status::Ok();
      }
      return postSendFrom(i, slot.srcAt);
    case StepKind::Recv:
    case StepKind::RecvReduce: {
      slot.state = State::Posted;
      ReduceSpec spec;
      const ReduceSpec* reduce = nullptr;
      if (s.kind == StepKind::RecvReduce && !slot.engineReduces) {  // else reduced at the commit
        spec.local = slot.srcAt;
        spec.dtype = opts_.dtype;
        spec.op = opts_.op == tribAvg ? tribSum : opts_.op;
        reduce = &spec;
      }
      slot.op.memory = into && into == slot.staging.data ? stagingKind(slot) : slot.memory;
      return peers_[s.peer]->postRecv(s.peer, slot.tag, into, bytesOf, reduce, &slot.op);
    }
    case StepKind::Copy:
    case StepKind::Expose:
    case StepKind::Reduce:
    case StepKind::Put:
    case StepKind::Get:
    case StepKind::GetReduce: {
      slot.state = State::Posted;
      char* dst = slot.dstAt;
      const bool reduce = s.kind == StepKind::Reduce || s.kind == StepKind::GetReduce;
      const RedOp op = opts_.op == tribAvg ? tribSum : opts_.op;
      const char* src = nullptr;
      const char* fusedSrc = slot.fusedSrc;
      TRIB_RETURN_IF_ERROR(sourceAddress(i, &src));
      if (fusedSrc) TRIB_RETURN_IF_ERROR(sourceAddress(i + 1, &fusedSrc, 1));
      if (!reduce && !fusedSrc && src == into) {  // a copy from the window range aliasing its destination
        slot.state = State::Done;
        return Status::Ok();
      }
      TRIB_RETURN_IF_ERROR(
          fusedSrc  ? engine_->postReduce(into, src, fusedSrc, s.dst.count, opts_.dtype, op, &slot.op)
          : !reduce ? engine_->postCopy(into, src, s.dst.count * elemSize_, &slot.op,
                                        into == dst && writesAroundCache(s.dst.buf))
                    : engine_->postReduce(into, dst, src, s.dst.count, opts_.dtype, op, &slot.op));
      // Work that finished inline (the host engine's) is done now: the next step may start at once.
      return slot.op.state.load(std::memory_order_acquire) == TransferOp::kDone ? opFinished(i)
                                                                                : Status::Ok();
    }
    case StepKind::Signal:
      // Every earlier step it orders is done (the scoreboard saw to it): publish them.
      opts_.windows->signal(s.peer, opts_.callFingerprint);
      slot.state = State::Done;
      return Status::Ok();
    case StepKind::Wait:
      slot.state = State::Posted;
      return pollWait(i);
    case StepKind::SwitchReduce: {
      slot.state = State::Posted;
      const RedOp op = opts_.op == tribAvg ? tribSum : opts_.op;
      if (opts_.coll == Coll::AllReduce)  // every offload runs all-reduce
        return opts_.offload->postAllReduce(address(s.src), address(s.dst), s.dst.count, opts_.dtype, op,
                                            &slot.op);
      OffloadCall call{opts_.coll};
      call.nranks = opts_.nranks;
      call.rank = opts_.rank;
      call.root = opts_.root;
      call.src = s.src.count ? address(s.src) : nullptr;
      call.dst = s.dst.count ? address(s.dst) : nullptr;
      call.count = switchStepCount(opts_.coll, opts_.root, opts_.rank, s);
      call.dtype = opts_.dtype;
      call.op = op;
      call.memory = opts_.inputKind == MemoryKind::Device || opts_.outputKind == MemoryKind::Device
                        ? MemoryKind::Device
                        : MemoryKind::Host;
      return opts_.offload->postCollective(call, &slot.op);
    }
  }
  return errorf(tribInternalError, "unknown step kind");
}

// A put, get or get-reduce over remote windows: posted to the provider (RDMA), completed through
// the slot's op. A get-reduce lands the peer's bytes in staging and reduces at the commit.
Status Execution::startRemote(size_t i) {
  const Step& s = steps_[i];
  Slot& slot = slots_[i];
  slot.state = State::Posted;
  if (s.kind == StepKind::Put)
    return opts_.windows->postPut(s.peer, s.dst.offset * elemSize_, slot.srcAt, s.dst.count * elemSize_,
                                  &slot.op);
  const uint64_t bytes = s.src.count * elemSize_;
  char* into = slot.dstAt;
  if (s.kind == StepKind::GetReduce && bytes > 0) {
    into = stage(slot, bytes);
    if (!into)
      return errorf(tribSystemError, "out of memory staging %llu bytes",
                    static_cast<unsigned long long>(bytes));
    slot.phase = Phase::Landing;
  }
  if (readCarried(s, into)) {  // no RDMA READ
    slot.op.error = Status();
    slot.op.complete();
    return Status::Ok();
  }
  return opts_.windows->postGet(s.peer, s.src.offset * elemSize_, into, bytes, &slot.op);
}

Status Execution::pollWait(size_t i) {
  Slot& slot = slots_[i];
  uint64_t received = 0;
  uint32_t fingerprint = 0;
  Status st = opts_.windows->pollSignals(steps_[i].peer, slot.tag, &received, &fingerprint);
  if (!st.ok()) {
    slot.op.fail(st);
    return Status::Ok();
  }
  if (received < slot.tag) return Status::Ok();
  // Only the signal this Wait matches says which call the peer is in (a later one may be the
  // peer's next call already).
  const uint32_t mine = opts_.callFingerprint & opts_.windows->fingerprintMask();
  if (received == slot.tag && fingerprint != mine) {
    slot.op.fail(errorf(tribInvalidUsage,
                        "rank %d signalled for another call (fingerprint %05x, this rank's %05x): "
                        "mismatched collective arguments across ranks?",
                        steps_[i].peer, fingerprint, mine));
    return Status::Ok();
  }
  slot.state = State::Done;
  return Status::Ok();
}

Status Execution::opFinished(size_t i) {
  Slot& slot = slots_[i];
  if (slot.op.state.load(std::memory_order_acquire) == TransferOp::kFailed) return slot.op.error;
  switch (slot.phase) {
    case Phase::SendStaging:
      // The copy is the send's source now: later writers of the caller's memory need not wait.
      slot.phase = Phase::Direct;
      slot.read1 = {};
      slot.readsCopy = true;
      rescan_ = true;
      return postSendFrom(i, slot.staging.data);
    case Phase::Landing:
      slot.phase = Phase::Landed;  // committed by the scan once nothing earlier reads the destination
      rescan_ = true;
      return Status::Ok();
    case Phase::Landed:
      return Status::Ok();
    case Phase::Commit:
    case Phase::Direct:
      break;
  }
  slot.state = State::Done;
  if (slot.staging.data) releaseStaging(slot);
  rescan_ = true;
  return Status::Ok();
}

void Execution::releaseStaging(Slot& slot) {
  if (!slot.staging.data) return;
  if (spareStaging_.size() < 4) {
    spareStaging_.push_back({slot.staging.bytes, slot.staging.data, slot.staging.host});
    slot.staging.data = nullptr;
  }
  slot.staging.release();
}

bool Execution::stillBlocked(const Slot& slot) const {
  if (slot.blockedBy == kNone) return false;
  const Slot& b = slots_[slot.blockedBy];
  // Finished or finishing (the scan collects it), or a send posted since (then this step may
  // land instead of waiting): look again.
  if (b.state == State::Done || (b.state == State::Posted && b.phase != Phase::Landed && b.op.done()) ||
      (b.state == State::Posted && steps_[slot.blockedBy].kind == StepKind::Send))
    return false;
  return true;
}

bool Execution::blockedByEarlier(const std::vector<size_t>& active, size_t a) const {
  for (size_t b = 0; b < a; ++b)
    if (slots_[active[b]].state != State::Done && conflicts(active[b], active[a])) return true;
  return false;
}

bool Execution::detachBlockingSends(const std::vector<size_t>& active, size_t a) {
  const size_t i = active[a];
  for (size_t b = 0; b < a; ++b) {
    const size_t j = active[b];
    if (slots_[j].state != State::Done && conflicts(j, i) && !peers_[steps_[j].peer]->detachesSends())
      return false;
  }
  for (size_t b = 0; b < a; ++b) {
    const size_t j = active[b];
    if (slots_[j].state != State::Done && conflicts(j, i)) peers_[steps_[j].peer]->detachSend(&slots_[j].op);
  }
  // No rescan of its own: the step starts once those ops complete (at once on loopback; a shm
  // slot-path send once the rest is in the ring, which needs no receive), like any other.
  return true;
}

void Execution::detachPostedSends() {
  for (size_t i = first_; i < slots_.size(); ++i) {
    if (slots_[i].state != State::Posted || steps_[i].kind != StepKind::Send) continue;
    Transport* t = peers_[steps_[i].peer];
    // A send to a transport that cannot detach reads this execution's staging (mayAbandon).
    if (t->detachesSends()) t->detachSend(&slots_[i].op);
  }
}

bool Execution::holdsPostedOps() const {
  if (finalized_ && !finalOp_.done()) return true;
  for (size_t i = first_; i < slots_.size(); ++i)
    if (slots_[i].state == State::Posted && !slots_[i].op.done()) return true;
  return false;
}

Status Execution::progress(bool* done) {
  *done = false;
  // Most polls of a small peer-memory call find it waiting for one signal with nothing else
  // posted (no transport, offload or engine work in flight): that poll is all the full pass below
  // would do, and the cheaper the poll, the sooner a wait sees its signal.
  if (!rescan_ && !remoteWindows_ && postedEnd_ == first_ + 1 && distinctTransports_.empty() &&
      !opts_.offload && steps_[first_].kind == StepKind::Wait && slots_[first_].state == State::Posted &&
      !slots_[first_].op.done()) {
    (void)pollWait(first_);
    if (slots_[first_].state == State::Posted && !slots_[first_].op.done()) return Status::Ok();
    rescan_ = slots_[first_].state == State::Done;  // the pass below goes on (or reports the failure)
  }
  for (Transport* t : distinctTransports_) TRIB_RETURN_IF_ERROR(t->progress());
  if (remoteWindows_) TRIB_RETURN_IF_ERROR(opts_.windows->progress());
  if (opts_.offload) TRIB_RETURN_IF_ERROR(opts_.offload->progress());
  TRIB_RETURN_IF_ERROR(engine_->progress());
  // Collect completions.
  size_t end = std::min(steps_.size(), first_ + kWindow);
  for (size_t i = first_; i < std::min(end, postedEnd_); ++i) {
    Slot& slot = slots_[i];
    if (slot.state == State::Posted && steps_[i].kind == StepKind::Wait && !slot.op.done()) {
      (void)pollWait(i);
      if (slot.state == State::Done) rescan_ = true;
    }
    if (slot.state != State::Posted || slot.phase == Phase::Landed || !slot.op.done()) continue;
    if (Status st = opFinished(i); !st.ok()) return stepError(i, st);
  }
  while (first_ < steps_.size() && slots_[first_].state == State::Done) ++first_;
  // Start every step in the window whose earlier unfinished steps do not conflict with it.
  // `active` lists the unfinished steps in the window, so a scan costs O(active^2), not O(window^2).
  std::vector<size_t>& active = activeScratch_;
  while (rescan_) {
    rescan_ = false;
    end = std::min(steps_.size(), first_ + kWindow);
    active.clear();
    for (size_t i = first_; i < end; ++i) {
      if (slots_[i].state != State::Done) active.push_back(i);
    }
    bool switchWaiting = false;  // SwitchReduce steps are posted in schedule order on every rank
    for (size_t a = 0; a < active.size(); ++a) {
      size_t i = active[a];
      Slot& slot = slots_[i];
      if (slot.phase == Phase::Landed) {
        // Staged data goes into place once nothing earlier still reads (or writes) it.
        if (blockedByEarlier(active, a)) continue;
        slot.phase = Phase::Commit;
        slot.op.state.store(TransferOp::kPending, std::memory_order_relaxed);
        const Step& s = steps_[i];
        const RedOp op = opts_.op == tribAvg ? tribSum : opts_.op;
        // A receive-reduce its transport does not combine, and a get-reduce over remote windows
        // (its peer's bytes landed by RDMA READ), combine here; every other landing was combined
        // on arrival. (A get-reduce's local operand is its destination.)
        const bool getReduce = s.kind == StepKind::GetReduce;
        Status st = (s.kind == StepKind::RecvReduce && slot.engineReduces) || getReduce
                        ? engine_->postReduce(address(s.dst), address(getReduce ? s.dst : s.src),
                                              slot.staging.data, s.dst.count, opts_.dtype, op, &slot.op)
                        : engine_->postCopy(address(s.dst), slot.staging.data, s.dst.count * elemSize_,
                                            &slot.op, false);
        if (st.ok() && slot.op.state.load(std::memory_order_acquire) == TransferOp::kDone) st = opFinished(i);
        if (!st.ok()) return stepError(i, st);
        continue;
      }
      if (slot.state != State::NotStarted) continue;
      const StepKind kind = steps_[i].kind;
      const bool isSwitch = kind == StepKind::SwitchReduce;
      if (isSwitch && switchWaiting) continue;
      if (slot.blockedBy != kNone && stillBlocked(slot)) {
        switchWaiting |= isSwitch;
        continue;
      }
      slot.blockedBy = kNone;
      bool blocked = false;
      bool onlyPostedSends = true;
      for (size_t b = 0; b < a; ++b) {
        size_t j = active[b];
        if (slots_[j].state == State::Done || !conflicts(j, i)) continue;
        // One that finished since it was posted (a send matched inline, or by another thread)
        // stands in nobody's way: collect it now rather than stage around it.
        if (slots_[j].state == State::Posted && slots_[j].phase != Phase::Landed && slots_[j].op.done()) {
          if (Status st = opFinished(j); !st.ok()) return stepError(j, st);
          if (slots_[j].state == State::Done) continue;
        }
        blocked = true;
        if (slots_[j].state != State::Posted || steps_[j].kind != StepKind::Send) {
          onlyPostedSends = false;
          slot.blockedBy = j;
          break;  // it waits, whatever else stands in its way: keep the scan short
        }
      }
      if (blocked) switchWaiting |= isSwitch;
      // Only in-flight sends of this memory stand in the way: waiting for them could deadlock an
      // in-place exchange (the header), so land the step in staging now, if it is one that can.
      const bool canLand = kind == StepKind::Recv || kind == StepKind::RecvReduce || kind == StepKind::Copy ||
                           kind == StepKind::Reduce;
      if (blocked && !(onlyPostedSends && canLand)) continue;
      if (blocked && detachBlockingSends(active, a)) continue;
      postedEnd_ = std::max(postedEnd_, i + 1);
      const bool rescanBefore = rescan_;
      Status st = startStep(i, blocked);
      if (!st.ok()) return stepError(i, st);
      // A step that finished at once can only unblock later steps (a step waits for earlier ones),
      // and this pass still reaches those in the window: another pass is needed only where the
      // window may grow past it (a landing, not done yet, has asked for one in opFinished).
      if (slot.state == State::Done) rescan_ = rescanBefore || end < steps_.size();
    }
    for (size_t i : active) {
      Slot& slot = slots_[i];
      if (slot.state != State::Posted || slot.phase == Phase::Landed || !slot.op.done()) continue;
      if (Status st = opFinished(i); !st.ok()) return stepError(i, st);
    }
    while (first_ < steps_.size() && slots_[first_].state == State::Done) ++first_;
  }
  if (first_ == steps_.size()) {
    if (!finalized_) TRIB_RETURN_IF_ERROR(finishLocal());
    if (!finalOp_.done()) return Status::Ok();
    if (finalOp_.state.load(std::memory_order_acquire) == TransferOp::kFailed) return finalOp_.error;
    if (timed_) {  // once per run
      const std::chrono::duration<double, std::nano> took = std::chrono::steady_clock::now() - started_;
      opts_.windowWrites->record(buf_.inputCount * elemSize_, streamWindow_, took.count());
      timed_ = false;
    }
    *done = true;
  }
  return Status::Ok();
}

Status Execution::finishLocal() {
  finalized_ = true;
  if (opts_.avgDivisor > 0 && opts_.avgRegion.count > 0)
    return engine_->postDivide(address(opts_.avgRegion), opts_.avgRegion.count, opts_.dtype, opts_.avgDivisor,
                               &finalOp_);
  finalOp_.complete();
  return Status::Ok();
}

std::string Execution::describePending() const {
  std::string out;
  std::vector<int> peers;  // the ranks those steps wait on, so a timeout names them as ranks
  bool offloadWaiting = false;
  int shown = 0;
  size_t end = std::min(steps_.size(), first_ + kWindow);
  for (size_t i = first_; i < end && shown < 4; ++i) {
    if (slots_[i].state != State::Posted) continue;
    if (!out.empty()) out += "; ";
    out += strprintf("step %zu %s", i, describeStep(steps_[i]).c_str());
    ++shown;
    // A switch step's peer field is its slice stride, not a rank.
    const Step& s = steps_[i];
    offloadWaiting |= s.kind == StepKind::SwitchReduce;
    if (s.kind != StepKind::SwitchReduce && s.peer >= 0 &&
        std::find(peers.begin(), peers.end(), s.peer) == peers.end())
      peers.push_back(s.peer);
  }
  if (out.empty() && first_ < steps_.size()) out = strprintf("step %zu not started", first_);
  if (!peers.empty()) out += " (on " + nameList("rank", "ranks", peers) + ")";
  // A step waiting on the offload names no peer: the offload knows whose contribution it lacks.
  if (offloadWaiting && opts_.offload) {
    // Briefly: the call has already used its whole timeout (a switch behind a dead link never answers).
    constexpr auto kAskFor = std::chrono::milliseconds(250);
    if (std::string why = opts_.offload->explainStall(kAskFor); !why.empty()) out += " (" + why + ")";
  }
  return out;
}

}  // namespace trib
