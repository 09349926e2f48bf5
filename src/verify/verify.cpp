// Symbolic execution of a schedule. See verify.hpp for the model.
//
// Storage: each rank has one "memory" per call holding input, output and scratch side by side (or
// input and output overlapping when the call is in place), and one window that outlives calls. Memory is cut
// into pages; a page is a list of runs ("segments") of cells that share a contributor set and have
// consecutive source indices, so the cost of a step is proportional to the runs it touches, not to its
// length.
#include "verify/verify.hpp"

#include <algorithm>
#include <chrono>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

#include "verify/causal.hpp"
#include "verify/rankset.hpp"

namespace trib {
namespace {

using verify::CausalMemory;
using verify::RankSet;
using ull = unsigned long long;
constexpr uint64_t kNone = ~uint64_t{0};

// A run of `len` cells; cell k holds source index idx+k reduced over `set`. An empty set means
// the cells were never written.
// `origin` names the reduction that produced the cells (0 = an input value): a hash of the
// operation tree (which values were combined, in which order), so the verifier can tell one sum
// distributed to all ranks, or the same fold repeated bit for bit on every rank (one-shot), from
// sums computed in different orders, which may differ in the last bits. `maker` is the step that
// made it (makeMaker), for messages.
struct Seg {
  uint64_t len = 0;
  uint64_t idx = 0;
  uint64_t origin = 0;
  uint64_t maker = 0;
  RankSet set;
};

uint64_t makeMaker(int rank, uint64_t stepNo) { return (static_cast<uint64_t>(rank) + 1) << 40 | stepNo; }
int makerRank(uint64_t o) { return static_cast<int>((o >> 40) - 1); }
uint64_t makerStep(uint64_t o) { return o & ((uint64_t{1} << 40) - 1); }

uint64_t mix(uint64_t h, uint64_t v) {  // splitmix64 over h ^ v
  uint64_t z = (h ^ v) + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
// What a reduction operand is: its own tree, or for an input value the ranks it comes from.
uint64_t operandKey(const Seg& s) {
  if (s.origin != 0) return s.origin;
  uint64_t h = 0x5ca1ab1e;
  for (uint32_t i = 0; i < 2 * s.set.intervals(); ++i) h = mix(h, s.set.flat()[i]);
  return h;
}
// The origin of x op y (operands in that order); never 0.
uint64_t reductionOrigin(const Seg& x, const Seg& y) {
  return mix(operandKey(x), mix(operandKey(y), 0x0b5)) | 1;
}

bool mergeable(const Seg& a, const Seg& b) {
  if (a.set.empty() || b.set.empty()) return a.set.empty() && b.set.empty();
  return a.idx + a.len == b.idx && a.origin == b.origin && a.set == b.set;
}

// Appends `s`, merging it into the last run when possible.
void pushSeg(std::vector<Seg>& v, Seg&& s) {
  if (s.len == 0) return;
  if (!v.empty() && mergeable(v.back(), s)) {
    v.back().len += s.len;
    return;
  }
  v.push_back(std::move(s));
}

// A piece [from, from+len) of run `s` which starts at cell `start`.
Seg clip(const Seg& s, uint64_t start, uint64_t from, uint64_t len) {
  Seg out;
  out.len = len;
  out.idx = s.set.empty() ? 0 : s.idx + (from - start);
  out.origin = s.origin;
  out.maker = s.maker;
  out.set = s.set;
  return out;
}

class Memory {
 public:
  void init(uint64_t total) {
    total_ = total;
    pageSize_ = std::max<uint64_t>(32, total / 256 + 1);
    const uint64_t pages = total == 0 ? 0 : (total - 1) / pageSize_ + 1;
    pages_.resize(pages);
    for (uint64_t p = 0; p < pages; ++p) {
      Seg s;
      s.len = std::min(pageSize_, total - p * pageSize_);
      pages_[p].push_back(std::move(s));
    }
  }
  uint64_t segments() const {
    uint64_t n = 0;
    for (auto& p : pages_) n += p.size();
    return n;
  }

  // Appends cells [off, off+len) to `out`; returns the first never-written cell or kNone.
  uint64_t read(uint64_t off, uint64_t len, std::vector<Seg>& out) const {
    uint64_t firstUninit = kNone;
    const uint64_t end = off + len;
    uint64_t p = off / pageSize_;
    while (off < end) {
      uint64_t pos = p * pageSize_;
      for (const Seg& s : pages_[p]) {
        const uint64_t segEnd = pos + s.len;
        if (segEnd > off && pos < end) {
          const uint64_t from = std::max(pos, off), to = std::min(segEnd, end);
          if (s.set.empty() && firstUninit == kNone) firstUninit = from;
          pushSeg(out, clip(s, pos, from, to - from));
        }
        pos = segEnd;
        if (pos >= end) break;
      }
      off = std::min(end, (p + 1) * pageSize_);
      ++p;
    }
    return firstUninit;
  }

  // Overwrites cells [off, off + total length of segs) with `segs`. Returns the change in the
  // number of stored runs.
  int64_t write(uint64_t off, const std::vector<Seg>& segs) {
    int64_t delta = 0;
    size_t si = 0;      // current input run
    uint64_t sOff = 0;  // cells of it already written
    uint64_t len = 0;
    for (const Seg& s : segs) len += s.len;
    const uint64_t end = off + len;
    uint64_t p = off / pageSize_;
    while (off < end) {
      std::vector<Seg>& page = pages_[p];
      const uint64_t pageBegin = p * pageSize_, pageEnd = std::min(total_, pageBegin + pageSize_);
      const uint64_t a = off, b = std::min(end, pageEnd);
      tmp_.clear();
      uint64_t pos = pageBegin;
      size_t k = 0;
      // Runs before a.
      for (; k < page.size() && pos < a; ++k) {
        const uint64_t segEnd = pos + page[k].len;
        if (segEnd <= a) {
          pushSeg(tmp_, std::move(page[k]));
        } else {
          pushSeg(tmp_, clip(page[k], pos, pos, a - pos));
          break;  // this run continues past a; handled below
        }
        pos = segEnd;
      }
      // The new cells.
      for (uint64_t at = a; at < b;) {
        const Seg& s = segs[si];
        const uint64_t take = std::min(s.len - sOff, b - at);
        pushSeg(tmp_, clip(s, 0, sOff, take));
        sOff += take;
        at += take;
        if (sOff == s.len) {
          ++si;
          sOff = 0;
        }
      }
      // Runs after b.
      for (; k < page.size(); ++k) {
        const uint64_t segEnd = pos + page[k].len;
        if (segEnd > b) {
          if (pos >= b) {
            pushSeg(tmp_, std::move(page[k]));
          } else {
            pushSeg(tmp_, clip(page[k], pos, b, segEnd - b));
          }
        }
        pos = segEnd;
      }
      delta += static_cast<int64_t>(tmp_.size()) - static_cast<int64_t>(page.size());
      // Move back rather than swap: the page keeps its own (cache-warm) buffer.
      if (tmp_.size() > page.capacity()) page.reserve(tmp_.size() + tmp_.size() / 8 + 1);  // not 2x: memory
      page.resize(tmp_.size());
      std::move(tmp_.begin(), tmp_.end(), page.begin());
      off = b;
      ++p;
    }
    return delta;
  }

  // Calls f(start, seg) for every run intersecting [off, off+len), clipped to it.
  template <typename F>
  void forEach(uint64_t off, uint64_t len, F&& f) const {
    std::vector<Seg> v;
    read(off, len, v);
    uint64_t pos = off;
    for (const Seg& s : v) {
      f(pos, s);
      pos += s.len;
    }
  }

 private:
  uint64_t total_ = 0, pageSize_ = 32;
  std::vector<std::vector<Seg>> pages_;
  static thread_local std::vector<Seg> tmp_;
};
thread_local std::vector<Seg> Memory::tmp_;

// Where a rank's buffers lie in its memory (one call's input, output and scratch).
struct Layout {
  uint64_t count[3] = {0, 0, 0};  // Input, Output, Scratch
  uint64_t base[3] = {0, 0, 0};
  bool alias = false;  // in place: Input overlaps Output
  uint64_t total = 0;
};

// Input element indices carry their call (call << kCallShift | index), so that a result built from
// a previous call's data in a window is not mistaken for this call's.
constexpr int kCallShift = 40;

// Where a region lies: in the rank's own buffers (owner -1) or in the window of rank `owner`; `off`
// is the cell in that memory, `addr` its address in the acting rank's causal memory, where every
// window has its own range [owner * W, (owner + 1) * W) and the rank's buffers follow all of them.
struct Place {
  int owner = -1;
  uint64_t off = 0;
  uint64_t addr = 0;
};

struct Message {
  std::vector<Seg> segs;
  uint64_t len = 0;
  Step step;            // the send, for error messages
  uint64_t stepNo = 0;  // its number in the sender's schedule
  RankSet heard;        // the ranks whose entry the send causally follows (causal.hpp)
  uint32_t next = UINT32_MAX;
};

struct Channel {
  uint32_t head = UINT32_MAX, tail = UINT32_MAX;
  uint32_t size = 0;
};

// A signal in flight: what the signalling step knew. `clock` is the sender's sync chain (which of
// every other rank's sync steps it follows; shared until the sender learns more) and `self` the
// sender's own sync index.
struct SignalMsg {
  RankSet entries;
  std::shared_ptr<const std::vector<uint32_t>> clock;
  uint32_t self = 0;
  uint32_t call = 0;
  uint64_t stepNo = 0;
  Step step;
};

// One step's access to window cells, for the race check. Its release is the rank's first later
// sync step the ordering rule puts after it (0: none yet), so another rank's step follows it iff
// it follows that sync step.
struct WinEvent {
  int32_t rank = 0;
  uint32_t release = 0;
  uint32_t call = 0;
  StepKind kind = StepKind::Copy;
  uint64_t stepNo = 0;
};
constexpr uint32_t kNoEvent = UINT32_MAX;
constexpr uint64_t kCallEnd = UINT64_MAX;  // WinEvent::stepNo of the caller's write once a call returned

// Per window cell: the access that last wrote it and those that read it since, as runs.
class WinHistory {
 public:
  struct Run {
    uint64_t end;
    uint32_t writer = kNoEvent;
    std::vector<uint32_t> readers;
  };
  void init(uint64_t total) {
    runs_.clear();
    if (total > 0) runs_.emplace(0, Run{total, kNoEvent, {}});
  }
  // Calls f(run) for the runs tiling [u, u+len), split at its ends.
  template <typename F>
  void forRange(uint64_t u, uint64_t len, F&& f) {
    splitAt(u + len);
    for (auto it = splitAt(u); it != runs_.end() && it->first < u + len; ++it) f(it->second);
  }
  // [u, u+len) was just written by event e: one run, no readers.
  void written(uint64_t u, uint64_t len, uint32_t e) {
    auto first = splitAt(u), last = first;
    while (last != runs_.end() && last->first < u + len) ++last;
    runs_.erase(first, last);
    runs_.emplace(u, Run{u + len, e, {}});
  }

 private:
  std::map<uint64_t, Run>::iterator splitAt(uint64_t at) { return verify::splitRunAt(runs_, at); }
  std::map<uint64_t, Run> runs_;
};

struct RankState {
  Generator<Step> gen;
  Step pending;
  bool hasPending = false;
  bool done = false;
  bool queued = false;
  int waitingOn = -1;
  uint32_t call = 0;        // the call the rank is in (verifySequence)
  uint64_t stepNo = 0;      // within the call
  uint64_t totalSteps = 0;  // over all calls
  uint64_t sent = 0, recvd = 0;
  RankSet heard;                 // whose entry the rank's completion causally follows: all its steps'
  CausalMemory causal;           // the executor's ordering of the rank's steps, cell by cell
  uint64_t switchSteps = 0;      // SwitchReduce steps completed
  bool switchDeposited = false;  // the pending SwitchReduce's contribution is in
  // The sync chain: the rank's signal/wait steps are totally ordered (each writes the own window,
  // schedule.hpp), so what its s-th one knows of another rank w is one number, the last of w's
  // sync steps it follows. `clock` holds that for the latest one (allocated at the first change);
  // clockLog[w] lists (s, value) where it changed, for the knowledge of earlier ones.
  uint32_t syncs = 0;
  std::shared_ptr<std::vector<uint32_t>> clock;
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> clockLog;
  // Window accesses awaiting their release: to the own window (any sync step releases them) and
  // to each peer's (a sync step with that peer does).
  std::vector<uint32_t> pendingOwn;
  std::unordered_map<int, std::vector<uint32_t>> pendingPeer;
  // Expose as an alias (Verifier::aliasExpose_): own window cells [off, off+len) are the rank's
  // buffer cells from `src` on, until the rank writes any of them.
  struct Exposure {
    uint64_t off, len, src;
  };
  std::vector<Exposure> exposed;
  // Every expose of the current call (copy or alias): a write of its source is ordered as a write
  // of its window cells (the executor's rule, exec/executor.cpp).
  std::vector<Exposure> exposedSources;
};

// Cells [off, off+len) of the run list `v`, appended to `out`.
void sliceSegs(const std::vector<Seg>& v, uint64_t off, uint64_t len, std::vector<Seg>& out) {
  uint64_t pos = 0;
  const uint64_t end = off + len;
  for (const Seg& s : v) {
    const uint64_t segEnd = pos + s.len;
    if (segEnd > off && pos < end) {
      const uint64_t from = std::max(pos, off), to = std::min(segEnd, end);
      pushSeg(out, clip(s, pos, from, to - from));
    }
    pos = segEnd;
    if (pos >= end) break;
  }
}

// One SwitchReduce rendezvous: what the switch computes from every rank's contribution (the
// reduction, the root's data, or the gathered slices), handed to each rank as its collective says.
struct SwitchOp {
  std::vector<Seg> acc;
  std::vector<std::vector<Seg>> pieces;  // all-gather: each rank's contribution
  uint64_t len = 0;                      // m, elements per rank
  int arrived = 0, taken = 0;
  int firstRank = -1;
  RankSet heard;  // what the members knew when they joined: completing it follows all of it
  std::vector<int> waiters;
};
constexpr int kWaitingOnSwitch = -2;

// What output cell `pos` of `rank` must hold, valid for cells [pos, end).
struct Expect {
  uint64_t start;  // first cell described; it holds element index idx
  uint64_t idx;
  RankSet set;
  uint64_t end;
};

// One call of the sequence: its request and each rank's buffers (kept to check the outputs).
struct CallCtx {
  const AlgoInfo* algo = nullptr;
  CollArgs a;
  std::vector<Layout> layouts;
  std::vector<Memory> mem;
  std::vector<RankSet> heard;  // each rank's knowledge when it finished the call
};

std::string elemName(uint64_t idx) {
  const uint64_t call = idx >> kCallShift, i = idx & ((uint64_t{1} << kCallShift) - 1);
  if (call == 0) return strprintf("element index %llu", static_cast<ull>(i));
  return strprintf("element index %llu of call %llu", static_cast<ull>(i), static_cast<ull>(call));
}

class Verifier {
 public:
  Verifier(const std::vector<VerifyCall>& calls, bool aliasExpose)
      : n_(calls.empty() ? 0 : calls[0].args.nranks), aliasExpose_(aliasExpose) {
    for (const VerifyCall& c : calls) {
      calls_.emplace_back();
      calls_.back().algo = c.algo;
      calls_.back().a = c.args;
    }
  }

  bool sawExpose() const { return sawExpose_; }

  Status run(VerifyStats* stats) {
    TRIB_RETURN_IF_ERROR(setup());
    std::deque<int> ready;
    for (int r = 0; r < n_; ++r) {
      ready.push_back(r);
      ranks_[r].queued = true;
    }
    while (!ready.empty()) {
      const int r = ready.front();
      ready.pop_front();
      ranks_[r].queued = false;
      TRIB_RETURN_IF_ERROR(runRank(r, ready));
    }
    TRIB_RETURN_IF_ERROR(checkFinished());
    for (uint32_t t = 0; t < calls_.size(); ++t) {
      Status st = checkOutputs(t);
      if (!st.ok()) return calls_.size() == 1 ? st : Status(st.code(), callPrefix(t) + st.message());
    }
    if (stats) {
      stats->steps = steps_;
      stats->messages = messages_;
      stats->elementsSent = elementsSent_;
      stats->peakSegments = peakSegs_;
      stats->windowSteps = windowSteps_;
      stats->signals = signals_;
      for (const RankState& s : ranks_) {
        stats->maxRankSteps = std::max(stats->maxRankSteps, s.totalSteps);
        stats->maxRankSent = std::max(stats->maxRankSent, s.sent);
        stats->maxRankRecv = std::max(stats->maxRankRecv, s.recvd);
      }
    }
    return Status::Ok();
  }

 private:
  std::string callPrefix(uint32_t t) const {
    return calls_.size() > 1 ? strprintf("call %u: ", t) : std::string();
  }
  const CollArgs& A(int r) const { return calls_[ranks_[r].call].a; }
  const Layout& L(int r) const { return calls_[ranks_[r].call].layouts[r]; }
  Memory& M(int r) { return calls_[ranks_[r].call].mem[r]; }
  const Memory& M(int r) const { return calls_[ranks_[r].call].mem[r]; }

  Status checkCall(uint32_t t) {
    CollArgs& a = calls_[t].a;
    const AlgoInfo* algo = calls_[t].algo;
    if (!algo) return errorf(tribInvalidArgument, "verify: %sno algorithm given", callPrefix(t).c_str());
    if (a.nranks < 1 || a.root < 0 || a.root >= a.nranks || a.chunkElems == 0) {
      return errorf(tribInvalidArgument,
                    "verify: %sinvalid request (nranks %d, root %d, chunkElems %llu); need nranks >= 1, "
                    "0 <= root < nranks, chunkElems >= 1",
                    callPrefix(t).c_str(), a.nranks, a.root, static_cast<ull>(a.chunkElems));
    }
    if (a.nranks != n_ || a.windowElems != calls_[0].a.windowElems) {
      return errorf(tribInvalidArgument,
                    "verify: call %u has %d ranks and windows of %llu elements, call 0 %d and %llu: one "
                    "communicator's calls share both",
                    t, a.nranks, static_cast<ull>(a.windowElems), n_,
                    static_cast<ull>(calls_[0].a.windowElems));
    }
    if (t > 0) {  // the communicator alternates the cells (schedule.hpp)
      const CallCtx& prev = calls_[t - 1];
      a.windowCell = static_cast<int>(
          (static_cast<uint64_t>(prev.a.windowCell) + windowChunks(prev.algo->algo, prev.a)) % 2);
    }
    if (a.coll != algo->coll) {
      return errorf(tribInvalidArgument, "verify: %salgorithm %s implements %s, not %s",
                    callPrefix(t).c_str(), algoName(algo->algo), collName(algo->coll), collName(a.coll));
    }
    if (a.inPlace && !supportsInPlace(a.coll)) {
      return errorf(tribInvalidArgument, "verify: %s%s has no in-place form", callPrefix(t).c_str(),
                    collName(a.coll));
    }
    if (!algo->supports(a)) {
      return errorf(tribNotSupported, "verify: %s%s %s does not support %d ranks, count %llu%s%s",
                    callPrefix(t).c_str(), algoName(algo->algo), collName(a.coll), a.nranks,
                    static_cast<ull>(a.count), a.inPlace ? " in place" : "",
                    needsWindows(algo->algo)
                        ? strprintf(", windows of %llu elements", static_cast<ull>(a.windowElems)).c_str()
                        : "");
    }
    calls_[t].layouts.resize(n_);
    calls_[t].mem.resize(n_);
    calls_[t].heard.resize(n_);
    return Status::Ok();
  }

  Status setup() {
    if (calls_.empty()) return errorf(tribInvalidArgument, "verify: no calls to verify");
    for (uint32_t t = 0; t < calls_.size(); ++t) TRIB_RETURN_IF_ERROR(checkCall(t));
    W_ = calls_[0].a.windowElems;
    winSpan_ = W_ * static_cast<uint64_t>(n_);
    ranks_.resize(n_);
    if (W_ > 0) {
      win_.resize(n_);
      hist_.resize(n_);
      for (int r = 0; r < n_; ++r) {
        win_[r].init(W_);
        hist_[r].init(W_);
        segs_ += static_cast<int64_t>(win_[r].segments());
      }
    }
    for (int r = 0; r < n_; ++r) TRIB_RETURN_IF_ERROR(startCall(r, 0));
    peakSegs_ = static_cast<uint64_t>(segs_);
    return Status::Ok();
  }

  // Rank r enters call t: fresh buffers, and (after call 0) every step follows the previous call.
  Status startCall(int r, uint32_t t) {
    RankState& st = ranks_[r];
    CallCtx& c = calls_[t];
    st.call = t;
    st.stepNo = 0;
    st.exposedSources.clear();
    Layout& L = c.layouts[r];
    L.count[0] = inputCount(c.a, r);
    L.count[1] = outputCount(c.a, r);
    L.count[2] = c.algo->scratchCount(c.a, r);
    L.alias = c.a.inPlace && L.count[0] > 0 && L.count[1] > 0;
    if (L.alias) {
      const int64_t off = inPlaceInputOffset(c.a, r);
      const int64_t lo = std::min<int64_t>(0, off);
      const int64_t hi =
          std::max<int64_t>(static_cast<int64_t>(L.count[1]), off + static_cast<int64_t>(L.count[0]));
      L.base[1] = static_cast<uint64_t>(-lo);
      L.base[0] = static_cast<uint64_t>(off - lo);
      L.base[2] = static_cast<uint64_t>(hi - lo);
    } else {
      L.base[0] = 0;
      L.base[1] = L.count[0];
      L.base[2] = L.count[0] + L.count[1];
    }
    L.total = L.base[2] + L.count[2];
    c.mem[r].init(L.total);
    if (L.count[0] > 0) {
      std::vector<Seg> in(1);
      in[0].len = L.count[0];
      in[0].idx = static_cast<uint64_t>(t) << kCallShift;
      in[0].set = RankSet::single(static_cast<uint32_t>(r));
      c.mem[r].write(L.base[0], in);
    }
    segs_ += static_cast<int64_t>(c.mem[r].segments());
    if (segs_ > static_cast<int64_t>(peakSegs_)) peakSegs_ = static_cast<uint64_t>(segs_);
    st.heard = RankSet::single(static_cast<uint32_t>(r));
    st.causal.init(winSpan_ + L.total);
    // The previous call is complete: as if one step had written everything, knowing its syncs.
    if (st.syncs > 0) st.causal.record(0, winSpan_ + L.total, true, verify::Know{{}, st.syncs});
    try {
      st.gen = c.algo->generate(c.a, r);
    } catch (const std::exception& e) {
      return errorf(tribInternalError, "verify: %srank %d: the generator failed to start: %s",
                    callPrefix(t).c_str(), r, e.what());
    }
    return Status::Ok();
  }

  Status fail(int r, const Step& s, const std::string& what) const {
    if (atCallEnd_)
      return errorf(tribInternalError,
                    "%srank %d, once its call returned (the caller may write its buffers): %s",
                    callPrefix(ranks_[r].call).c_str(), r, what.c_str());
    return errorf(tribInternalError, "%srank %d, step %llu %s: %s", callPrefix(ranks_[r].call).c_str(), r,
                  static_cast<ull>(ranks_[r].stepNo), describeStep(s).c_str(), what.c_str());
  }

  std::string cellName(int r, uint64_t u) const {
    static const char* const names[] = {"in", "out", "scratch"};
    const Layout& L = this->L(r);
    for (int b : {1, 2, 0}) {
      if (u >= L.base[b] && u - L.base[b] < L.count[b])
        return strprintf("%s[%llu]", names[b], static_cast<ull>(u - L.base[b]));
    }
    return strprintf("cell %llu", static_cast<ull>(u));
  }
  // "window[5] (cell 0)", "rank 2's window[5] (cell 0)", or a buffer cell, as rank r sees it.
  std::string placeName(int r, const Place& p, uint64_t at) const {
    if (p.owner < 0) return cellName(r, p.off + at);
    const uint64_t cellElems = W_ / 2, off = p.off + at;
    std::string cell = cellElems ? strprintf(" (cell %llu)", static_cast<ull>(off / cellElems)) : "";
    if (p.owner == r) return strprintf("window[%llu]%s", static_cast<ull>(off), cell.c_str());
    return strprintf("rank %d's window[%llu]%s", p.owner, static_cast<ull>(off), cell.c_str());
  }

  // Region -> place, checking bounds and (for writes) that the cells may be written. `peers`: the
  // region is in the step's peer's memory (put's dst, get's src).
  Status resolve(int r, const Step& s, const Region& g, bool peers, bool write, Place* p) const {
    static const char* const names[] = {"input", "output", "scratch"};
    const int b = static_cast<int>(g.buf);
    if (b < 0 || b >= kNumBufs) return fail(r, s, "region names an unknown buffer");
    if (peers && g.buf != Buf::Window)
      return fail(r, s, "a peer's memory is reachable only through its window");
    if (g.buf == Buf::Window) {
      if (W_ == 0) return fail(r, s, "uses peer windows, but the call has none (CollArgs::windowElems is 0)");
      const int owner = peers ? s.peer : r;
      if (g.offset > W_ || g.count > W_ - g.offset) {
        return fail(r, s,
                    strprintf("region [%llu, %llu) is out of bounds: the window of rank %d has %llu elements",
                              static_cast<ull>(g.offset), static_cast<ull>(g.offset + g.count), owner,
                              static_cast<ull>(W_)));
      }
      p->owner = owner;
      p->off = g.offset;
      p->addr = static_cast<uint64_t>(owner) * W_ + g.offset;
      return Status::Ok();
    }
    const Layout& L = this->L(r);
    if (g.offset > L.count[b] || g.count > L.count[b] - g.offset) {
      return fail(
          r, s,
          strprintf("region [%llu, %llu) is out of bounds: the %s buffer of rank %d has %llu elements",
                    static_cast<ull>(g.offset), static_cast<ull>(g.offset + g.count), names[b], r,
                    static_cast<ull>(L.count[b])));
    }
    const uint64_t u = L.base[b] + g.offset;
    if (write && g.count > 0) {
      const bool inOut = u >= L.base[1] && u + g.count <= L.base[1] + L.count[1];
      const bool inScratch = g.buf == Buf::Scratch;
      if (!inOut && !inScratch) {
        return fail(r, s,
                    g.buf == Buf::Input && !L.alias
                        ? std::string("writes the input buffer, which belongs to the caller and is read-only")
                        : std::string("writes input cells outside the output buffer"));
      }
    }
    p->owner = -1;
    p->off = u;
    p->addr = winSpan_ + u;
    return Status::Ok();
  }

  Memory& memOf(int r, const Place& p) { return p.owner < 0 ? M(r) : win_[p.owner]; }

  Status readChecked(int r, const Step& s, const Place& p, uint64_t len, std::vector<Seg>& out) {
    out.clear();
    if (len == 0) return Status::Ok();
    const uint64_t bad = memOf(r, p).read(p.off, len, out);
    if (bad == kNone) return Status::Ok();
    if (p.owner >= 0) {
      return fail(r, s,
                  strprintf("data race: reads %s, which nobody has written yet: no write of it causally "
                            "precedes this read (a window read must follow its writer's signal)",
                            placeName(r, p, bad - p.off).c_str()));
    }
    return fail(r, s,
                strprintf("reads %s, which was never written (uninitialised)", cellName(r, bad).c_str()));
  }

  void writeCells(int r, const Place& p, const std::vector<Seg>& segs) {
    if (segs.empty()) return;
    segs_ += memOf(r, p).write(p.off, segs);
    if (segs_ > static_cast<int64_t>(peakSegs_)) peakSegs_ = static_cast<uint64_t>(segs_);
    if (p.owner >= 0 && p.owner != r && !ranks_[p.owner].exposed.empty())
      mirrorPutIntoExposures(p.owner, p.off, segs);
    if (p.owner >= 0 || ranks_[r].exposed.empty()) return;
    // Under the alias, peers reading an exposed range see these cells too.
    uint64_t len = 0;
    for (const Seg& g : segs) len += g.len;
    std::vector<Seg> part;
    for (const RankState::Exposure& x : ranks_[r].exposed) {
      const uint64_t from = std::max(x.src, p.off), to = std::min(x.src + x.len, p.off + len);
      if (from >= to) continue;
      part.clear();
      sliceSegs(segs, from - p.off, to - from, part);
      segs_ += win_[r].write(x.off + (from - x.src), part);
    }
  }

  // out = x op y cell by cell; both cover the same length. `dst` names cells in errors.
  Status combine(int r, const Step& s, const std::vector<Seg>& x, const std::vector<Seg>& y, const Place& dst,
                 std::vector<Seg>& out) {
    out.clear();
    size_t i = 0, j = 0;
    uint64_t xo = 0, yo = 0, pos = 0;
    RankSet u, overlap;
    const uint64_t maker = makeMaker(r, ranks_[r].stepNo);
    while (i < x.size() && j < y.size()) {
      const Seg& sx = x[i];
      const Seg& sy = y[j];
      const uint64_t take = std::min(sx.len - xo, sy.len - yo);
      const uint64_t ix = sx.idx + xo, iy = sy.idx + yo;
      if (ix != iy) {
        return fail(r, s,
                    strprintf("reduces %s with %s into %s: blocks are misaligned", elemName(ix).c_str(),
                              elemName(iy).c_str(), placeName(r, dst, pos).c_str()));
      }
      if (!RankSet::disjointUnion(sx.set, sy.set, &u, &overlap)) {
        return fail(r, s,
                    strprintf("ranks %s would contribute twice to %s (%s): %s + %s",
                              overlap.toString().c_str(), placeName(r, dst, pos).c_str(),
                              elemName(ix).c_str(), sx.set.toString().c_str(), sy.set.toString().c_str()));
      }
      Seg piece;
      piece.len = take;
      piece.idx = ix;
      piece.origin = reductionOrigin(sx, sy);
      piece.maker = maker;
      piece.set = std::move(u);
      pushSeg(out, std::move(piece));
      xo += take;
      yo += take;
      pos += take;
      if (xo == sx.len) {
        ++i;
        xo = 0;
      }
      if (yo == sy.len) {
        ++j;
        yo = 0;
      }
    }
    return Status::Ok();
  }

  uint32_t allocMessage() {
    if (freeMsg_ != UINT32_MAX) {
      const uint32_t m = freeMsg_;
      freeMsg_ = pool_[m].next;
      return m;
    }
    pool_.emplace_back();
    return static_cast<uint32_t>(pool_.size() - 1);
  }

  // Messages match within a call (the executor's tags carry the call's sequence number); signals
  // over the communicator's life. Ranks fit in 24 bits (the tools' limit).
  static uint64_t pairKey(int src, int dst) {
    return (static_cast<uint64_t>(src) << 24) | static_cast<uint64_t>(dst);
  }
  static uint64_t chanKey(uint32_t call, int src, int dst) {
    return (static_cast<uint64_t>(call) << 48) | pairKey(src, dst);
  }

  Status checkPeer(int r, const Step& s) const {
    if (s.peer < 0 || s.peer >= n_)
      return fail(r, s, strprintf("peer %d is not a rank (0..%d)", s.peer, n_ - 1));
    if (s.peer == r) {
      if (s.isPeerMemory()) return fail(r, s, "a rank's own window is local: use copy or reduce on it");
      if (s.isSync()) return fail(r, s, "a rank cannot signal or wait for itself");
      return fail(r, s, "a rank cannot message itself; use copy");
    }
    if (s.isSync() && W_ == 0)
      return fail(r, s, "uses peer windows, but the call has none (CollArgs::windowElems is 0)");
    return Status::Ok();
  }

  Status checkOverlap(int r, const Step& s, const Place& ps, const Place& pd, uint64_t len) const {
    if (len == 0 || ps.owner != pd.owner || ps.off == pd.off) return Status::Ok();
    if (ps.off < pd.off + len && pd.off < ps.off + len) {
      return fail(r, s, "source and destination partly overlap (they must be identical or disjoint)");
    }
    return Status::Ok();
  }

  // What step `s` of rank r (its regions at ps, pd) waits for under the executor's rule: the rank's
  // own entry and the earlier steps whose cells it conflicts with (causal.hpp).
  verify::Know dependsOn(int r, const Step& s, const Place& ps, const Place& pd) const {
    const CausalMemory& c = ranks_[r].causal;
    verify::Know known;
    known.entries = RankSet::single(static_cast<uint32_t>(r));
    if (s.readsSrc()) c.inherit(ps.addr, s.src.count, false, &known);
    if (s.readsDst()) c.inherit(pd.addr, s.dst.count, false, &known);
    if (s.writesDst()) c.inherit(pd.addr, s.dst.count, true, &known);
    forExposedCells(r, s, pd, [&](uint64_t addr, uint64_t len) { c.inherit(addr, len, true, &known); });
    return known;
  }
  // Step `s` finished knowing `known`: its cells remember it, and the rank's completion follows it.
  void settle(int r, const Step& s, const Place& ps, const Place& pd, const verify::Know& known) {
    RankState& st = ranks_[r];
    if (s.readsSrc()) st.causal.record(ps.addr, s.src.count, false, known);
    if (s.readsDst()) st.causal.record(pd.addr, s.dst.count, false, known);
    if (s.writesDst()) st.causal.record(pd.addr, s.dst.count, true, known);
    forExposedCells(r, s, pd, [&](uint64_t addr, uint64_t len) { st.causal.record(addr, len, true, known); });
    if (s.kind == StepKind::Expose && s.dst.count > 0)
      st.exposedSources.push_back(RankState::Exposure{pd.off, s.dst.count, ps.off});
    st.heard = RankSet::unite(st.heard, known.entries);
  }
  // f(address, length) for the window cells that the part of step s's buffer write (at pd) falling
  // in an earlier expose's source aliases.
  template <typename F>
  void forExposedCells(int r, const Step& s, const Place& pd, F&& f) const {
    if (!s.writesDst() || pd.owner >= 0 || s.dst.count == 0) return;
    for (const RankState::Exposure& x : ranks_[r].exposedSources) {
      const uint64_t from = std::max(x.src, pd.off), to = std::min(x.src + x.len, pd.off + s.dst.count);
      if (from < to) f(static_cast<uint64_t>(r) * W_ + x.off + (from - x.src), to - from);
    }
  }

  // ---- Windows: races and the sync chain ----

  // The last of rank w's sync steps that a step of rank r with knowledge k follows.
  uint32_t knows(int r, const verify::Know& k, int w) const {
    if (w == r) return k.sync;
    const RankState& st = ranks_[r];
    if (k.sync == 0 || st.clockLog.empty()) return 0;
    const auto& log = st.clockLog[w];
    auto it = std::upper_bound(log.begin(), log.end(), std::pair<uint32_t, uint32_t>{k.sync, UINT32_MAX});
    return it == log.begin() ? 0 : std::prev(it)->second;
  }

  // Whether a step of rank r knowing k follows window access e. One rank's accesses to one cell
  // always conflict, so the scoreboard orders them in program order.
  bool follows(int r, const verify::Know& k, uint32_t e) const {
    const WinEvent& ev = events_[e];
    return ev.rank == r || (ev.release != 0 && knows(r, k, ev.rank) >= ev.release);
  }

  std::string eventName(uint32_t e) const {
    const WinEvent& ev = events_[e];
    if (ev.stepNo == kCallEnd)
      return strprintf("rank %d's caller, once its call%s returned,", ev.rank,
                       calls_.size() > 1 ? strprintf(" %u", ev.call).c_str() : "");
    return strprintf("rank %d's step %llu (%s%s)", ev.rank, static_cast<ull>(ev.stepNo),
                     stepKindName(ev.kind), calls_.size() > 1 ? strprintf(", call %u", ev.call).c_str() : "");
  }

  // Checks one access of step s (event e) to window cells [p.off, p.off+len) and records it.
  Status windowAccess(int r, const Step& s, const Place& p, uint64_t len, bool write, const verify::Know& k,
                      uint32_t e) {
    Status bad;
    uint64_t at = 0;
    const char* const noChain =
        "no chain of signals leads from its release (its next signal or wait that the ordering rule "
        "puts after it) to this step";
    hist_[p.owner].forRange(p.off, len, [&](WinHistory::Run& run) {
      const uint64_t runLen = run.end - (p.off + at);
      if (bad.ok() && run.writer != kNoEvent && !follows(r, k, run.writer)) {
        bad = fail(r, s,
                   strprintf("data race: %s %s, which %s wrote, and %s: %s", write ? "writes" : "reads",
                             placeName(r, p, at).c_str(), eventName(run.writer).c_str(), noChain,
                             write ? "the two writes may land in either order"
                                   : "it may see the cell before or while it is written"));
      }
      if (bad.ok() && write) {
        for (uint32_t q : run.readers) {
          if (follows(r, k, q)) continue;
          bad = fail(r, s,
                     strprintf("data race: writes %s while %s may still be reading it: %s",
                               placeName(r, p, at).c_str(), eventName(q).c_str(), noChain));
          break;
        }
      }
      if (!write && (run.readers.empty() || run.readers.back() != e)) run.readers.push_back(e);
      at += runLen;
    });
    TRIB_RETURN_IF_ERROR(bad);
    if (write) hist_[p.owner].written(p.off, len, e);
    return Status::Ok();
  }

  // Race-checks and records the window cells step s reads and writes, as one event that waits for
  // its release.
  Status windowAccesses(int r, const Step& s, const Place& ps, const Place& pd, const verify::Know& k) {
    const bool rs = s.readsSrc() && ps.owner >= 0 && s.src.count > 0;
    const bool rd = s.readsDst() && pd.owner >= 0 && s.dst.count > 0;
    const bool wd = s.writesDst() && pd.owner >= 0 && s.dst.count > 0;
    RankState& st = ranks_[r];
    // Under the alias, a write of an exposed source is a write of its window cells, and a read of
    // it a read of them (which a peer's put into them must not race).
    aliasTmp_.clear();
    aliasReadTmp_.clear();
    auto aliased = [&](const Place& p, uint64_t len, std::vector<std::pair<uint64_t, uint64_t>>& out) {
      for (const RankState::Exposure& x : st.exposed) {
        const uint64_t from = std::max(x.src, p.off), to = std::min(x.src + x.len, p.off + len);
        if (from < to) out.emplace_back(x.off + (from - x.src), to - from);
      }
    };
    if (s.writesDst() && pd.owner < 0 && s.dst.count > 0) aliased(pd, s.dst.count, aliasTmp_);
    if (s.readsSrc() && ps.owner < 0 && s.src.count > 0) aliased(ps, s.src.count, aliasReadTmp_);
    if (s.readsDst() && pd.owner < 0 && s.dst.count > 0) aliased(pd, s.dst.count, aliasReadTmp_);
    if (!rs && !rd && !wd && aliasTmp_.empty() && aliasReadTmp_.empty()) return Status::Ok();
    if (aliasExpose_)
      TRIB_RETURN_IF_ERROR(exposureRules(r, s, rs ? &ps : nullptr, rd ? &pd : nullptr, wd ? &pd : nullptr));
    const uint32_t e = static_cast<uint32_t>(events_.size());
    events_.push_back(WinEvent{r, 0, st.call, s.kind, st.stepNo});
    if (rs) TRIB_RETURN_IF_ERROR(windowAccess(r, s, ps, s.src.count, false, k, e));
    if (rd) TRIB_RETURN_IF_ERROR(windowAccess(r, s, pd, s.dst.count, false, k, e));
    if (wd) TRIB_RETURN_IF_ERROR(windowAccess(r, s, pd, s.dst.count, true, k, e));
    for (const auto& [off, len] : aliasReadTmp_) {
      const Place w{r, off, static_cast<uint64_t>(r) * W_ + off};
      TRIB_RETURN_IF_ERROR(windowAccess(r, s, w, len, false, k, e));
    }
    for (const auto& [off, len] : aliasTmp_) {
      const Place w{r, off, static_cast<uint64_t>(r) * W_ + off};
      TRIB_RETURN_IF_ERROR(windowAccess(r, s, w, len, true, k, e));
    }
    if (aliasExpose_ && wd && pd.owner == r) endExposures(r, pd.off, s.dst.count);
    if (aliasExpose_ && s.kind == StepKind::Expose && s.dst.count > 0)
      st.exposed.push_back(RankState::Exposure{pd.off, s.dst.count, ps.off});
    if ((!aliasTmp_.empty() || !aliasReadTmp_.empty()) &&
        (st.pendingOwn.empty() || st.pendingOwn.back() != e))
      st.pendingOwn.push_back(e);
    for (int owner : {rs ? ps.owner : -1, (rd || wd) ? pd.owner : -1}) {
      if (owner < 0) continue;
      std::vector<uint32_t>& pending = owner == r ? st.pendingOwn : st.pendingPeer[owner];
      if (pending.empty() || pending.back() != e) pending.push_back(e);
    }
    return Status::Ok();
  }

  // The rules an alias imposes (schedule.hpp): a window access that touches an exposed range (other
  // than its owner's write, which ends the exposure) lies in one exposure (the executor resolves it to that
  // exposure's buffer or to the window), and a put through a peer's exposure writes that peer's buffer, which
  // must be one it may write.
  Status exposureRules(int r, const Step& s, const Place* src, const Place* dstRead, const Place* dstWrite) {
    for (const Place* p : {src, dstRead, dstWrite}) {
      if (!p) continue;
      const uint64_t len = p == src ? s.src.count : s.dst.count;
      for (const RankState::Exposure& x : ranks_[p->owner].exposed) {
        if (x.off >= p->off + len || p->off >= x.off + x.len) continue;
        const std::string range =
            strprintf("%s..%llu", placeName(r, *p, x.off > p->off ? x.off - p->off : 0).c_str(),
                      static_cast<ull>(std::min(x.off + x.len, p->off + len)));
        if (p == dstWrite && p->owner == r) continue;  // the rank's own write ends the exposure
        if (x.off > p->off || x.off + x.len < p->off + len)
          return fail(r, s,
                      strprintf("%s %s, which rank %d exposed only in part: an access of an exposed "
                                "range lies in one exposure, or in none",
                                p == dstWrite ? "writes" : "reads", range.c_str(), p->owner));
        if (p == dstWrite && p->owner != r && !writableByPeer(p->owner, x.src + (p->off - x.off), len))
          return fail(r, s,
                      strprintf("puts into %s, which rank %d exposed from its input buffer: the put "
                                "would write the caller's read-only input",
                                range.c_str(), p->owner));
      }
    }
    return Status::Ok();
  }
  // Whether rank o's cells [u, u+len) of its own memory are its output or scratch.
  bool writableByPeer(int o, uint64_t u, uint64_t len) const {
    const Layout& L = this->L(o);
    const bool inOut = u >= L.base[1] && u + len <= L.base[1] + L.count[1];
    const bool inScratch = u >= L.base[2] && u + len <= L.base[2] + L.count[2];
    return inOut || inScratch;
  }
  // Under the alias, a put into peer o's window cells [off, off+len) that o exposed writes o's
  // buffer cells there too.
  void mirrorPutIntoExposures(int o, uint64_t off, const std::vector<Seg>& segs) {
    uint64_t len = 0;
    for (const Seg& g : segs) len += g.len;
    std::vector<Seg> part;
    for (const RankState::Exposure& x : ranks_[o].exposed) {
      const uint64_t from = std::max(x.off, off), to = std::min(x.off + x.len, off + len);
      if (from >= to) continue;
      part.clear();
      sliceSegs(segs, from - off, to - from, part);
      segs_ += M(o).write(x.src + (from - x.off), part);
    }
  }
  // Rank r writes its window cells [off, off+len): the exposures overlapping them end, whole (as
  // the executor drops them), and the cells of theirs not written hold nothing a reader may use.
  void endExposures(int r, uint64_t off, uint64_t len) {
    auto& xs = ranks_[r].exposed;
    for (size_t i = 0; i < xs.size();) {
      const RankState::Exposure x = xs[i];
      if (x.off >= off + len || off >= x.off + x.len) {
        ++i;
        continue;
      }
      xs.erase(xs.begin() + static_cast<ptrdiff_t>(i));
      std::vector<Seg> none(1);
      if (x.off < off) {
        none[0].len = off - x.off;
        segs_ += win_[r].write(x.off, none);
      }
      if (x.off + x.len > off + len) {
        none[0].len = x.off + x.len - (off + len);
        segs_ += win_[r].write(off + len, none);
      }
    }
  }
  // Rank r's call ended: the caller may write its buffers now, which under the alias writes every
  // range still exposed; each must follow its peers' reads.
  Status endCallExposures(int r) {
    RankState& st = ranks_[r];
    if (st.exposed.empty()) return Status::Ok();
    const uint32_t e = static_cast<uint32_t>(events_.size());
    events_.push_back(WinEvent{r, 0, st.call, StepKind::Expose, kCallEnd});
    const verify::Know k{st.heard, st.syncs};
    for (const RankState::Exposure& x : st.exposed) {
      const Place w{r, x.off, static_cast<uint64_t>(r) * W_ + x.off};
      atCallEnd_ = true;
      Status bad = windowAccess(r, Step{}, w, x.len, true, k, e);
      atCallEnd_ = false;
      if (!bad.ok()) return Status(bad.code(), bad.message() + " (its buffer is still exposed there)");
    }
    st.exposed.clear();
    st.pendingOwn.push_back(e);
    return Status::Ok();
  }

  // Signal/wait(p) are, to the executor, writes of the own window and p's (schedule.hpp).
  verify::Know syncDepends(int r, int p) const {
    verify::Know known;
    known.entries = RankSet::single(static_cast<uint32_t>(r));
    ranks_[r].causal.inherit(static_cast<uint64_t>(r) * W_, W_, true, &known);
    ranks_[r].causal.inherit(static_cast<uint64_t>(p) * W_, W_, true, &known);
    return known;
  }
  // Sync step number `idx` of rank r with peer p finished knowing `known`: it orders later window
  // steps, and it releases the pending accesses to the own window and p's.
  void syncSettle(int r, int p, const verify::Know& known) {
    RankState& st = ranks_[r];
    st.causal.record(static_cast<uint64_t>(r) * W_, W_, true, known);
    st.causal.record(static_cast<uint64_t>(p) * W_, W_, true, known);
    st.heard = RankSet::unite(st.heard, known.entries);
    auto release = [&](std::vector<uint32_t>& pending) {
      for (uint32_t e : pending) {
        if (events_[e].release == 0) events_[e].release = known.sync;
      }
      pending.clear();
    };
    release(st.pendingOwn);
    auto it = st.pendingPeer.find(p);
    if (it != st.pendingPeer.end()) {
      release(it->second);
      st.pendingPeer.erase(it);
    }
  }

  // Rank r's sync chain now also knows rank w's sync step v (as of r's sync step idx).
  void learn(RankState& st, int r, uint32_t idx, int w, uint32_t v) {
    if (w == r || v == 0) return;
    if (st.clock && (*st.clock)[w] >= v) return;
    if (!st.clock) {
      st.clock = std::make_shared<std::vector<uint32_t>>(n_, 0);
    } else if (st.clock.use_count() > 1) {  // signals in flight hold the old one
      st.clock = std::make_shared<std::vector<uint32_t>>(*st.clock);
    }
    if (st.clockLog.empty()) st.clockLog.resize(n_);
    (*st.clock)[w] = v;
    st.clockLog[w].emplace_back(idx, v);
  }

  Status signalStep(int r, const Step& s, std::deque<int>& ready) {
    TRIB_RETURN_IF_ERROR(checkPeer(r, s));
    RankState& st = ranks_[r];
    verify::Know known = syncDepends(r, s.peer);
    known.sync = ++st.syncs;
    syncSettle(r, s.peer, known);
    std::deque<SignalMsg>& q = sigs_[pairKey(r, s.peer)];
    q.push_back(SignalMsg{known.entries, st.clock, known.sync, st.call, st.stepNo, s});
    ++signals_;
    wake(s.peer, r, ready);
    return Status::Ok();
  }

  // The wait takes the oldest signal from its peer (runRank found one): it knows what that
  // signal's step knew.
  Status waitStep(int r, const Step& s, std::unordered_map<uint64_t, std::deque<SignalMsg>>::iterator inbox) {
    RankState& st = ranks_[r];
    SignalMsg sig = std::move(inbox->second.front());
    inbox->second.pop_front();
    if (inbox->second.empty()) sigs_.erase(inbox);
    verify::Know known = syncDepends(r, s.peer);
    known.entries = RankSet::unite(known.entries, sig.entries);
    known.sync = ++st.syncs;
    if (sig.clock) {
      for (int w = 0; w < n_; ++w) learn(st, r, known.sync, w, (*sig.clock)[w]);
    }
    learn(st, r, known.sync, s.peer, sig.self);
    syncSettle(r, s.peer, known);
    return Status::Ok();
  }

  // Re-queues `peer` if it is blocked on a message or signal from `from`.
  void wake(int peer, int from, std::deque<int>& ready) {
    RankState& p = ranks_[peer];
    if (p.waitingOn != from) return;
    p.waitingOn = -1;
    if (!p.queued) {
      p.queued = true;
      ready.push_back(peer);
    }
  }

  using ChanMap = std::unordered_map<uint64_t, Channel>;
  using SigMap = std::unordered_map<uint64_t, std::deque<SignalMsg>>;
  Status execute(int r, const Step& s, std::deque<int>& ready, ChanMap::iterator inbox) {
    RankState& st = ranks_[r];
    Place ps, pd;
    switch (s.kind) {
      case StepKind::Send: {
        TRIB_RETURN_IF_ERROR(checkPeer(r, s));
        TRIB_RETURN_IF_ERROR(resolve(r, s, s.src, false, false, &ps));
        const uint32_t m = allocMessage();
        Message& msg = pool_[m];
        TRIB_RETURN_IF_ERROR(readChecked(r, s, ps, s.src.count, msg.segs));
        msg.len = s.src.count;
        msg.step = s;
        msg.stepNo = st.stepNo;
        msg.next = UINT32_MAX;
        const verify::Know known = dependsOn(r, s, ps, pd);
        TRIB_RETURN_IF_ERROR(windowAccesses(r, s, ps, pd, known));
        msg.heard = known.entries;
        settle(r, s, ps, pd, known);
        Channel& ch = chans_[chanKey(st.call, r, s.peer)];
        if (ch.tail == UINT32_MAX) {
          ch.head = m;
        } else {
          pool_[ch.tail].next = m;
        }
        ch.tail = m;
        ++ch.size;
        ++messages_;
        elementsSent_ += s.src.count;
        st.sent += s.src.count;
        wake(s.peer, r, ready);
        return Status::Ok();
      }
      case StepKind::Recv:
      case StepKind::RecvReduce: {
        const bool reduce = s.kind == StepKind::RecvReduce;
        TRIB_RETURN_IF_ERROR(resolve(r, s, s.dst, false, true, &pd));
        if (reduce) {
          TRIB_RETURN_IF_ERROR(resolve(r, s, s.src, false, false, &ps));
          if (s.src.count != s.dst.count) {
            return fail(r, s,
                        strprintf("local operand has %llu elements but the destination %llu",
                                  static_cast<ull>(s.src.count), static_cast<ull>(s.dst.count)));
          }
          TRIB_RETURN_IF_ERROR(checkOverlap(r, s, ps, pd, s.dst.count));
        }
        auto it = inbox;  // runRank found the channel non-empty
        const uint32_t m = it->second.head;
        Message& msg = pool_[m];
        if (msg.len != s.dst.count) {
          return fail(
              r, s,
              strprintf("size mismatch: the message from rank %d has %llu elements (its step %llu %s) but "
                        "this receive expects %llu",
                        s.peer, static_cast<ull>(msg.len), static_cast<ull>(msg.stepNo),
                        describeStep(msg.step).c_str(), static_cast<ull>(s.dst.count)));
        }
        if (reduce) TRIB_RETURN_IF_ERROR(readChecked(r, s, ps, s.src.count, tmpA_));
        verify::Know known = dependsOn(r, s, ps, pd);
        known.entries = RankSet::unite(known.entries, msg.heard);
        TRIB_RETURN_IF_ERROR(windowAccesses(r, s, ps, pd, known));
        if (reduce) TRIB_RETURN_IF_ERROR(combine(r, s, tmpA_, msg.segs, pd, tmpB_));
        writeCells(r, pd, reduce ? tmpB_ : msg.segs);
        settle(r, s, ps, pd, known);
        st.recvd += msg.len;
        // Pop the message and recycle it.
        Channel& ch = it->second;
        ch.head = msg.next;
        if (--ch.size == 0) chans_.erase(it);
        msg.segs.clear();
        msg.next = freeMsg_;
        freeMsg_ = m;
        return Status::Ok();
      }
      case StepKind::SwitchReduce:
        return fail(r, s, "internal: switch_reduce is a rendezvous (switchStep), not a local step");
      case StepKind::Signal:
      case StepKind::Wait:
        return fail(r, s, "internal: signal and wait are matched in runRank, not local steps");
      case StepKind::Put:
      case StepKind::Get:
      case StepKind::GetReduce:
      case StepKind::Copy:
      case StepKind::Expose:
      case StepKind::Reduce: {
        if (s.isPeerMemory()) TRIB_RETURN_IF_ERROR(checkPeer(r, s));
        if (s.kind == StepKind::Expose && (s.src.buf == Buf::Window || s.dst.buf != Buf::Window))
          return fail(r, s, "expose publishes the rank's own buffer cells in its own window");
        sawExpose_ |= s.kind == StepKind::Expose;
        TRIB_RETURN_IF_ERROR(resolve(r, s, s.src, s.srcIsPeers(), false, &ps));
        TRIB_RETURN_IF_ERROR(resolve(r, s, s.dst, s.dstIsPeers(), true, &pd));
        if (s.src.count != s.dst.count) {
          return fail(r, s,
                      strprintf("source has %llu elements but the destination %llu",
                                static_cast<ull>(s.src.count), static_cast<ull>(s.dst.count)));
        }
        TRIB_RETURN_IF_ERROR(checkOverlap(r, s, ps, pd, s.dst.count));
        TRIB_RETURN_IF_ERROR(readChecked(r, s, ps, s.src.count, tmpA_));
        const bool reduce = s.readsDst();
        if (reduce) TRIB_RETURN_IF_ERROR(readChecked(r, s, pd, s.dst.count, tmpC_));
        // Races first: a racy read's contents are whatever the simulation order left there.
        const verify::Know known = dependsOn(r, s, ps, pd);
        TRIB_RETURN_IF_ERROR(windowAccesses(r, s, ps, pd, known));
        if (reduce) TRIB_RETURN_IF_ERROR(combine(r, s, tmpC_, tmpA_, pd, tmpB_));
        writeCells(r, pd, reduce ? tmpB_ : tmpA_);
        settle(r, s, ps, pd, known);
        if (s.isPeerMemory()) {
          ++windowSteps_;
          elementsSent_ += s.src.count;
          (s.kind == StepKind::Put ? st.sent : st.recvd) += s.src.count;
        }
        return Status::Ok();
      }
    }
    return fail(r, s, "unknown step kind");
  }

  Status runRank(int r, std::deque<int>& ready) {
    RankState& st = ranks_[r];
    for (int q = 0; q < kQuantum; ++q) {
      if (!st.hasPending) {
        bool more = false;
        try {
          more = st.gen.next();
        } catch (const std::exception& e) {
          return errorf(tribInternalError, "%srank %d: the schedule generator failed after step %llu: %s",
                        callPrefix(st.call).c_str(), r, static_cast<ull>(st.stepNo), e.what());
        }
        if (!more) {
          st.gen = Generator<Step>();  // frees the coroutine frame
          TRIB_RETURN_IF_ERROR(endCallExposures(r));
          calls_[st.call].heard[r] = st.heard;
          if (st.call + 1 < calls_.size()) {
            TRIB_RETURN_IF_ERROR(startCall(r, st.call + 1));
            continue;
          }
          st.done = true;
          return Status::Ok();
        }
        st.pending = st.gen.value();
        st.hasPending = true;
      }
      const Step& s = st.pending;
      if (s.kind == StepKind::SwitchReduce) {
        bool blocked = false;
        TRIB_RETURN_IF_ERROR(switchStep(r, s, ready, &blocked));
        if (blocked) return Status::Ok();
      } else if (s.kind == StepKind::Signal) {
        TRIB_RETURN_IF_ERROR(signalStep(r, s, ready));
      } else if (s.kind == StepKind::Wait) {
        TRIB_RETURN_IF_ERROR(checkPeer(r, s));
        auto inbox = sigs_.find(pairKey(s.peer, r));
        if (inbox == sigs_.end()) {
          st.waitingOn = s.peer;  // a signal from the peer re-queues us
          return Status::Ok();
        }
        TRIB_RETURN_IF_ERROR(waitStep(r, s, inbox));
      } else {
        auto inbox = chans_.end();
        if (s.kind == StepKind::Recv || s.kind == StepKind::RecvReduce) {
          TRIB_RETURN_IF_ERROR(checkPeer(r, s));
          inbox = chans_.find(chanKey(st.call, s.peer, r));
          if (inbox == chans_.end()) {
            st.waitingOn = s.peer;  // a send from the peer re-queues us
            return Status::Ok();
          }
        }
        TRIB_RETURN_IF_ERROR(execute(r, s, ready, inbox));
      }
      st.hasPending = false;
      ++st.stepNo;
      ++st.totalSteps;
      ++steps_;
    }
    st.queued = true;
    ready.push_back(r);
    return Status::Ok();
  }

  // The k-th SwitchReduce of every rank is one rendezvous of the schedule's collective
  // (schedule.hpp gives the region shapes): each rank's src cells join the switch's accumulator
  // (reduced: a rank contributing twice to a cell, or misaligned blocks, fail as in a reduction;
  // broadcast: the root's; all-gather: placed by rank), and once all ranks are in, each rank's
  // dst receives its part. Completing it means every rank has heard from every other.
  Status switchStep(int r, const Step& s, std::deque<int>& ready, bool* blocked) {
    RankState& st = ranks_[r];
    const uint64_t k = st.switchSteps;
    const CollArgs& a = A(r);
    // A stride d >= 2 names the slice group of the ranks congruent to r mod d (an all-reduce among
    // them); each group's k-th step is its own rendezvous.
    if (s.peer >= 0 && (s.peer < 2 || s.peer > n_))
      return fail(r, s, strprintf("switch_reduce stride %d is not in 2..%d", s.peer, n_));
    if (s.peer >= 2 && a.coll != Coll::AllReduce)
      return fail(r, s,
                  strprintf("a strided switch_reduce is an all-reduce, not part of a %s", collName(a.coll)));
    const int members = switchMembers(r, s);
    SwitchOp& op = switchOps_[{switchGroup(r, s), k}];
    const uint64_t n = static_cast<uint64_t>(n_);
    Place ps, pd;
    TRIB_RETURN_IF_ERROR(resolve(r, s, s.dst, false, true, &pd));
    if (!st.switchDeposited) {
      TRIB_RETURN_IF_ERROR(resolve(r, s, s.src, false, false, &ps));
      const uint64_t m = switchStepCount(a.coll, a.root, r, s);
      const bool root = r == a.root;
      uint64_t wantS = m, wantD = m;
      switch (a.coll) {
        case Coll::AllReduce:
        case Coll::Barrier:
          break;
        case Coll::Reduce:
          wantD = root ? m : 0;
          break;
        case Coll::Broadcast:
          wantS = root ? m : 0;
          wantD = root ? 0 : m;
          break;
        case Coll::AllGather:
          wantD = n * m;
          break;
        case Coll::ReduceScatter:
          wantS = n * m;
          break;
        default:
          return fail(r, s, strprintf("the switch does not run %s", collName(a.coll)));
      }
      if (s.src.count != wantS || s.dst.count != wantD) {
        return fail(
            r, s,
            strprintf("a %s switch_reduce of %llu elements per rank contributes %llu and receives "
                      "%llu elements here, not %llu and %llu",
                      collName(a.coll), static_cast<ull>(m), static_cast<ull>(s.src.count),
                      static_cast<ull>(s.dst.count), static_cast<ull>(wantS), static_cast<ull>(wantD)));
      }
      if (op.arrived > 0 && op.len != m) {
        return fail(
            r, s,
            strprintf("switch_reduce #%llu has %llu elements here but %llu on rank %d", static_cast<ull>(k),
                      static_cast<ull>(m), static_cast<ull>(op.len), op.firstRank));
      }
      TRIB_RETURN_IF_ERROR(readChecked(r, s, ps, s.src.count, tmpA_));
      if (op.arrived == 0) {
        op.len = m;
        op.firstRank = r;
      }
      if (a.coll == Coll::AllGather) {
        op.pieces.resize(n_);
        op.pieces[r] = tmpA_;
      } else if (a.coll == Coll::Broadcast) {
        if (root) op.acc = tmpA_;
      } else if (op.arrived == 0) {
        op.acc = tmpA_;
      } else {
        TRIB_RETURN_IF_ERROR(combine(r, s, op.acc, tmpA_, ps, tmpB_));
        op.acc.swap(tmpB_);
      }
      ++op.arrived;
      op.heard = RankSet::unite(op.heard, dependsOn(r, s, ps, pd).entries);
      st.switchDeposited = true;
      st.sent += s.src.count;
      if (op.arrived == members) {
        if (a.coll == Coll::AllGather) {
          for (auto& piece : op.pieces) {
            for (Seg& g : piece) pushSeg(op.acc, std::move(g));
          }
          std::vector<std::vector<Seg>>().swap(op.pieces);
        }
        for (int w : op.waiters) {
          ranks_[w].waitingOn = -1;
          if (!ranks_[w].queued) {
            ranks_[w].queued = true;
            ready.push_back(w);
          }
        }
        op.waiters.clear();
      }
    }
    if (op.arrived < members) {
      op.waiters.push_back(r);
      st.waitingOn = kWaitingOnSwitch;
      *blocked = true;
      return Status::Ok();
    }
    if (a.coll == Coll::ReduceScatter) {
      tmpB_.clear();
      sliceSegs(op.acc, static_cast<uint64_t>(r) * op.len, s.dst.count, tmpB_);
    }
    TRIB_RETURN_IF_ERROR(resolve(r, s, s.src, false, false, &ps));
    verify::Know known = dependsOn(r, s, ps, pd);
    known.entries = RankSet::unite(known.entries, op.heard);
    TRIB_RETURN_IF_ERROR(windowAccesses(r, s, ps, pd, known));
    if (a.coll == Coll::ReduceScatter) {
      writeCells(r, pd, tmpB_);
    } else if (s.dst.count > 0) {
      writeCells(r, pd, op.acc);
    }
    settle(r, s, ps, pd, known);
    st.recvd += s.dst.count;
    st.switchDeposited = false;
    ++st.switchSteps;
    if (++op.taken == members) std::vector<Seg>().swap(op.acc);
    *blocked = false;
    return Status::Ok();
  }

  Status checkFinished() const {
    std::vector<int> blocked;
    for (int r = 0; r < n_; ++r) {
      if (!ranks_[r].done) blocked.push_back(r);
    }
    if (!blocked.empty()) {
      std::string msg =
          strprintf("deadlock: no rank can progress; %zu of %d ranks are blocked:", blocked.size(), n_);
      for (size_t i = 0; i < blocked.size() && i < 8; ++i) {
        const int r = blocked[i];
        const RankState& st = ranks_[r];
        const std::string where = strprintf("\n  %srank %d at step %llu %s", callPrefix(st.call).c_str(), r,
                                            static_cast<ull>(st.stepNo), describeStep(st.pending).c_str());
        if (st.pending.kind == StepKind::SwitchReduce) {
          const auto it = switchOps_.find({switchGroup(r, st.pending), st.switchSteps});
          const int arrived = it == switchOps_.end() ? 0 : it->second.arrived;
          msg += strprintf("%s waits for the other ranks' switch_reduce #%llu (%d of %d in)", where.c_str(),
                           static_cast<ull>(st.switchSteps), arrived, switchMembers(r, st.pending));
          continue;
        }
        const int p = st.pending.peer;
        const RankState& ps = ranks_[p];
        std::string peerState =
            ps.done ? "which has finished its schedule"
                    : strprintf("which is itself blocked at %sstep %llu %s", callPrefix(ps.call).c_str(),
                                static_cast<ull>(ps.stepNo), describeStep(ps.pending).c_str());
        msg += strprintf("%s waits for a %s from rank %d, %s", where.c_str(),
                         st.pending.kind == StepKind::Wait ? "signal" : "message", p, peerState.c_str());
      }
      if (blocked.size() > 8) msg += strprintf("\n  ... and %zu more", blocked.size() - 8);
      return Status(tribInternalError, msg);
    }
    if (!chans_.empty()) {
      std::vector<std::pair<uint64_t, Channel>> left(chans_.begin(), chans_.end());
      std::sort(left.begin(), left.end(), [](auto& x, auto& y) { return x.first < y.first; });
      std::string msg = strprintf("%zu channels hold messages nobody received:", left.size());
      for (size_t i = 0; i < left.size() && i < 8; ++i) {
        const Message& m = pool_[left[i].second.head];
        const uint64_t key = left[i].first;
        msg += strprintf(
            "\n  %srank %d sent %u message(s) to rank %d that were never received, the first at its step "
            "%llu %s",
            callPrefix(static_cast<uint32_t>(key >> 48)).c_str(), static_cast<int>((key >> 24) & 0xffffffu),
            left[i].second.size, static_cast<int>(key & 0xffffffu), static_cast<ull>(m.stepNo),
            describeStep(m.step).c_str());
      }
      return Status(tribInternalError, msg);
    }
    if (!sigs_.empty()) {
      std::vector<std::pair<uint64_t, const std::deque<SignalMsg>*>> left;
      for (const auto& [key, q] : sigs_) left.emplace_back(key, &q);
      std::sort(left.begin(), left.end(), [](auto& x, auto& y) { return x.first < y.first; });
      std::string msg = strprintf("%zu pairs of ranks hold signals nobody waited for:", left.size());
      for (size_t i = 0; i < left.size() && i < 8; ++i) {
        const SignalMsg& first = left[i].second->front();
        msg += strprintf(
            "\n  rank %d signalled rank %d %zu time(s) more than it waited, the first at its %sstep %llu %s",
            static_cast<int>(left[i].first >> 24), static_cast<int>(left[i].first & 0xffffffu),
            left[i].second->size(), callPrefix(first.call).c_str(), static_cast<ull>(first.stepNo),
            describeStep(first.step).c_str());
      }
      return Status(tribInternalError, msg);
    }
    return Status::Ok();
  }

  Expect expectAt(uint32_t t, int r, uint64_t pos) const {
    const CollArgs& a = calls_[t].a;
    const uint64_t c = a.count, out = calls_[t].layouts[r].count[1];
    const RankSet all = RankSet::range(0, static_cast<uint32_t>(n_));
    const uint64_t ur = static_cast<uint64_t>(r), base = static_cast<uint64_t>(t) << kCallShift;
    switch (a.coll) {
      case Coll::AllReduce:
      case Coll::Reduce:
        return {0, base, all, out};
      case Coll::Broadcast:
        return {0, base, RankSet::single(static_cast<uint32_t>(a.root)), out};
      case Coll::ReduceScatter:
        return {0, base + ur * c, all, out};
      case Coll::Scatter:
        return {0, base + ur * c, RankSet::single(static_cast<uint32_t>(a.root)), out};
      case Coll::AllGather:
      case Coll::Gather: {
        const uint64_t p = pos / c;
        return {p * c, base, RankSet::single(static_cast<uint32_t>(p)), (p + 1) * c};
      }
      case Coll::AlltoAll: {
        const uint64_t p = pos / c;
        return {p * c, base + ur * c, RankSet::single(static_cast<uint32_t>(p)), (p + 1) * c};
      }
      case Coll::Barrier:
        break;
    }
    return {0, base, RankSet(), out};
  }

  // The rank's exit must causally follow the entry of every rank its result depends on (every
  // rank, for a barrier): through messages, signals and the memory conflicts that order its steps.
  Status checkSynchronised(uint32_t t, int r) const {
    RankSet needed;
    const CollArgs& a = calls_[t].a;
    if (a.coll == Coll::Barrier) needed = RankSet::range(0, static_cast<uint32_t>(n_));
    for (uint64_t pos = 0; pos < calls_[t].layouts[r].count[1];) {
      const Expect e = expectAt(t, r, pos);
      needed = RankSet::unite(needed, e.set);
      pos = e.end;
    }
    const RankSet missing = RankSet::minus(needed, calls_[t].heard[r]);
    if (missing.empty()) return Status::Ok();
    return errorf(tribInternalError,
                  "rank %d can finish the %s before ranks %s have entered it: no chain of messages, signals "
                  "and memory dependencies leads from their entry to its exit (the executor orders a rank's "
                  "steps only by the memory they share; a message without data orders nothing)",
                  r, collName(a.coll), missing.toString().c_str());
  }

  Status checkOutputs(uint32_t t) const {
    const CallCtx& call = calls_[t];
    for (int r = 0; r < n_; ++r) {
      const Layout& L = call.layouts[r];
      if (L.count[1] == 0) continue;
      Status bad;
      Expect e = expectAt(t, r, 0);
      call.mem[r].forEach(L.base[1], L.count[1], [&](uint64_t u, const Seg& s) {
        if (!bad.ok()) return;
        uint64_t pos = u - L.base[1];
        const uint64_t end = pos + s.len;
        while (pos < end) {
          if (pos >= e.end) e = expectAt(t, r, pos);
          const uint64_t take = std::min(end, e.end) - pos;
          const uint64_t got = s.idx + (pos - (u - L.base[1]));
          const uint64_t wantIdx = e.idx + (pos - e.start);
          if (s.set.empty()) {
            bad = errorf(tribInternalError,
                         "rank %d: output out[%llu] was never written (expected %s from ranks %s)", r,
                         static_cast<ull>(pos), elemName(wantIdx).c_str(), e.set.toString().c_str());
            return;
          }
          if (got != wantIdx || s.set != e.set) {
            std::string diff;
            RankSet missing = RankSet::minus(e.set, s.set), extra = RankSet::minus(s.set, e.set);
            if (!missing.empty()) diff += " missing contributions from ranks " + missing.toString() + ";";
            if (!extra.empty()) diff += " unexpected contributions from ranks " + extra.toString() + ";";
            if (got != wantIdx)
              diff += strprintf(" %s instead of %s;", elemName(got).c_str(), elemName(wantIdx).c_str());
            diff.pop_back();
            bad = errorf(
                tribInternalError,
                "rank %d: wrong result in out[%llu]: holds %s from ranks %s, expected %s from ranks %s:%s", r,
                static_cast<ull>(pos), elemName(got).c_str(), s.set.toString().c_str(),
                elemName(wantIdx).c_str(), e.set.toString().c_str(), diff.c_str());
            return;
          }
          pos += take;
        }
      });
      TRIB_RETURN_IF_ERROR(bad);
    }
    // After the data: a wrong result names its cells; a right one implies these for all but barriers.
    for (int r = 0; r < n_; ++r) TRIB_RETURN_IF_ERROR(checkSynchronised(t, r));
    if (call.a.coll == Coll::AllReduce) return checkSameReduction(t);
    return Status::Ok();
  }

  // All-reduce: every rank must hold the very same reduction of each element (computed once,
  // then distributed); separately computed sums may differ in the last bits between ranks.
  Status checkSameReduction(uint32_t t) const {
    const CallCtx& call = calls_[t];
    const uint64_t c = call.a.count;
    std::vector<Seg> ref, got;
    call.mem[0].read(call.layouts[0].base[1], c, ref);
    for (int r = 1; r < n_; ++r) {
      got.clear();
      call.mem[r].read(call.layouts[r].base[1], c, got);
      size_t i = 0, j = 0;
      uint64_t io = 0, jo = 0, pos = 0;
      while (i < ref.size() && j < got.size()) {
        const uint64_t take = std::min(ref[i].len - io, got[j].len - jo);
        if (ref[i].origin != got[j].origin) {
          const uint64_t o0 = ref[i].maker, o1 = got[j].maker;
          return errorf(
              tribInternalError,
              "rank %d: out[%llu] holds its own reduction of element index %llu (made by rank %d at step "
              "%llu), not the one rank 0 holds (made by rank %d at step %llu), nor the same operations in "
              "the same order: ranks could end with different floating-point results; reduce each element "
              "once and distribute the result, or fold in one order everywhere",
              r, static_cast<ull>(pos), static_cast<ull>(pos), makerRank(o1), static_cast<ull>(makerStep(o1)),
              makerRank(o0), static_cast<ull>(makerStep(o0)));
        }
        io += take;
        jo += take;
        pos += take;
        if (io == ref[i].len) {
          ++i;
          io = 0;
        }
        if (jo == got[j].len) {
          ++j;
          jo = 0;
        }
      }
    }
    return Status::Ok();
  }

  static constexpr int kQuantum = 256;
  std::map<std::pair<int, uint64_t>, SwitchOp> switchOps_;  // (slice group or -1, k-th step)
  int switchGroup(int r, const Step& s) const { return s.peer >= 2 ? r % s.peer : -1; }
  int switchMembers(int r, const Step& s) const {
    if (s.peer < 2) return n_;
    int m = 0;
    for (int q = r % s.peer; q < n_; q += s.peer) ++m;
    return m;
  }
  int n_;
  bool aliasExpose_;        // expose makes its window range an alias of its source (else a copy)
  bool sawExpose_ = false;  // an expose step ran
  bool atCallEnd_ = false;  // errors are of a rank's call end, not a step (endCallExposures)
  std::vector<std::pair<uint64_t, uint64_t>> aliasTmp_;      // own window cells a local write reaches
  std::vector<std::pair<uint64_t, uint64_t>> aliasReadTmp_;  // and a local read
  std::vector<CallCtx> calls_;
  uint64_t W_ = 0;                // window elements per rank (0: none)
  uint64_t winSpan_ = 0;          // n * W: where a rank's own buffers begin in its causal memory
  std::vector<Memory> win_;       // each rank's window contents, over all calls
  std::vector<WinHistory> hist_;  // each rank's window accesses, for the race check
  std::vector<WinEvent> events_;
  std::vector<RankState> ranks_;
  ChanMap chans_;
  SigMap sigs_;  // signals in flight per ordered pair (pairKey)
  std::vector<Message> pool_;
  uint32_t freeMsg_ = UINT32_MAX;
  std::vector<Seg> tmpA_, tmpB_, tmpC_;
  uint64_t steps_ = 0, messages_ = 0, elementsSent_ = 0, peakSegs_ = 0, windowSteps_ = 0, signals_ = 0;
  int64_t segs_ = 0;
};

}  // namespace

Status verifySequence(const std::vector<VerifyCall>& calls, VerifyStats* stats) {
  const auto t0 = std::chrono::steady_clock::now();
  Status st;
  try {
    // Expose as a copy first; a schedule that exposed is proven again with expose as an alias.
    Verifier copy(calls, false);
    st = copy.run(stats);
    if (st.ok() && copy.sawExpose()) {
      Verifier alias(calls, true);
      st = alias.run(nullptr);
      if (!st.ok()) st = Status(st.code(), "with expose as an alias of its source: " + st.message());
    }
  } catch (const std::bad_alloc&) {
    const VerifyCall* c = calls.empty() ? nullptr : &calls[0];
    st = errorf(tribSystemError, "verify: out of memory verifying %s %s at %d ranks",
                c && c->algo ? algoName(c->algo->algo) : "?", c ? collName(c->args.coll) : "?",
                c ? c->args.nranks : 0);
  }
  if (stats) stats->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return st;
}

Status verifySchedule(const AlgoInfo& algo, const CollArgs& args, VerifyStats* stats) {
  return verifySequence({VerifyCall{&algo, args}}, stats);
}

}  // namespace trib
