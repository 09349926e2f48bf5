// Symbolic execution of a schedule. See verify.hpp for the model.
//
// Storage: each rank has one "memory" holding input, output and scratch side by side (or input
// and output overlapping when the call is in place). Memory is cut into pages; a page is a list
// of runs ("segments") of cells that share a contributor set and have consecutive source
// indices, so the cost of a step is proportional to the runs it touches, not to its length.
#include "verify/verify.hpp"

#include <algorithm>
#include <chrono>
#include <deque>
#include <exception>
#include <map>
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
// `origin` names the reduction that produced the cells (see makeOrigin; 0 = an input value), so
// the verifier can tell one sum distributed to all ranks from several sums computed separately.
struct Seg {
  uint64_t len = 0;
  uint64_t idx = 0;
  uint64_t origin = 0;
  RankSet set;
};

uint64_t makeOrigin(int rank, uint64_t stepNo) { return (static_cast<uint64_t>(rank) + 1) << 40 | stepNo; }
int originRank(uint64_t o) { return static_cast<int>((o >> 40) - 1); }
uint64_t originStep(uint64_t o) { return o & ((uint64_t{1} << 40) - 1); }

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

// Where a rank's buffers lie in its memory.
struct Layout {
  uint64_t count[3] = {0, 0, 0};  // Input, Output, Scratch
  uint64_t base[3] = {0, 0, 0};
  bool alias = false;  // in place: Input overlaps Output
  uint64_t total = 0;
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

struct RankState {
  Generator<Step> gen;
  Step pending;
  bool hasPending = false;
  bool done = false;
  bool queued = false;
  int waitingOn = -1;
  uint64_t stepNo = 0;
  uint64_t sent = 0, recvd = 0;
  RankSet heard;                 // whose entry the rank's completion causally follows: all its steps'
  CausalMemory causal;           // the executor's ordering of the rank's steps, cell by cell
  uint64_t switchSteps = 0;      // SwitchReduce steps completed
  bool switchDeposited = false;  // the pending SwitchReduce's contribution is in
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

class Verifier {
 public:
  Verifier(const AlgoInfo& algo, const CollArgs& args) : algo_(algo), a_(args), n_(args.nranks) {}

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
    TRIB_RETURN_IF_ERROR(checkOutputs());
    if (stats) {
      stats->steps = steps_;
      stats->messages = messages_;
      stats->elementsSent = elementsSent_;
      stats->peakSegments = peakSegs_;
      for (const RankState& s : ranks_) {
        stats->maxRankSteps = std::max(stats->maxRankSteps, s.stepNo);
        stats->maxRankSent = std::max(stats->maxRankSent, s.sent);
        stats->maxRankRecv = std::max(stats->maxRankRecv, s.recvd);
      }
    }
    return Status::Ok();
  }

 private:
  Status setup() {
    if (a_.nranks < 1 || a_.root < 0 || a_.root >= a_.nranks || a_.chunkElems == 0) {
      return errorf(tribInvalidArgument,
                    "verify: invalid request (nranks %d, root %d, chunkElems %llu); need nranks >= 1, "
                    "0 <= root < nranks, chunkElems >= 1",
                    a_.nranks, a_.root, static_cast<ull>(a_.chunkElems));
    }
    if (a_.coll != algo_.coll) {
      return errorf(tribInvalidArgument, "verify: algorithm %s implements %s, not %s", algoName(algo_.algo),
                    collName(algo_.coll), collName(a_.coll));
    }
    if (a_.inPlace && !supportsInPlace(a_.coll)) {
      return errorf(tribInvalidArgument, "verify: %s has no in-place form", collName(a_.coll));
    }
    if (!algo_.supports(a_)) {
      return errorf(tribNotSupported, "verify: %s %s does not support %d ranks, count %llu%s",
                    algoName(algo_.algo), collName(a_.coll), a_.nranks, static_cast<ull>(a_.count),
                    a_.inPlace ? " in place" : "");
    }
    barrier_ = a_.coll == Coll::Barrier;
    layouts_.resize(n_);
    mem_.resize(n_);
    ranks_.resize(n_);
    for (int r = 0; r < n_; ++r) {
      Layout& L = layouts_[r];
      L.count[0] = inputCount(a_, r);
      L.count[1] = outputCount(a_, r);
      L.count[2] = algo_.scratchCount(a_, r);
      L.alias = a_.inPlace && L.count[0] > 0 && L.count[1] > 0;
      if (L.alias) {
        const int64_t off = inPlaceInputOffset(a_, r);
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
      mem_[r].init(L.total);
      if (L.count[0] > 0) {
        std::vector<Seg> in(1);
        in[0].len = L.count[0];
        in[0].idx = 0;
        in[0].set = RankSet::single(static_cast<uint32_t>(r));
        mem_[r].write(L.base[0], in);
      }
      segs_ += static_cast<int64_t>(mem_[r].segments());
      ranks_[r].heard = RankSet::single(static_cast<uint32_t>(r));
      ranks_[r].causal.init(L.total);
      try {
        ranks_[r].gen = algo_.generate(a_, r);
      } catch (const std::exception& e) {
        return errorf(tribInternalError, "verify: rank %d: the generator failed to start: %s", r, e.what());
      }
    }
    peakSegs_ = static_cast<uint64_t>(segs_);
    return Status::Ok();
  }

  Status fail(int r, const Step& s, const std::string& what) const {
    return errorf(tribInternalError, "rank %d, step %llu %s: %s", r, static_cast<ull>(ranks_[r].stepNo),
                  describeStep(s).c_str(), what.c_str());
  }

  std::string cellName(int r, uint64_t u) const {
    static const char* const names[] = {"in", "out", "scratch"};
    const Layout& L = layouts_[r];
    for (int b : {1, 2, 0}) {
      if (u >= L.base[b] && u - L.base[b] < L.count[b])
        return strprintf("%s[%llu]", names[b], static_cast<ull>(u - L.base[b]));
    }
    return strprintf("cell %llu", static_cast<ull>(u));
  }

  // Region -> memory offset, checking bounds and (for writes) that the cells may be written.
  Status resolve(int r, const Step& s, const Region& g, bool write, uint64_t* u) const {
    static const char* const names[] = {"input", "output", "scratch"};
    const int b = static_cast<int>(g.buf);
    if (b < 0 || b > 2) return fail(r, s, "region names an unknown buffer");
    const Layout& L = layouts_[r];
    if (g.offset > L.count[b] || g.count > L.count[b] - g.offset) {
      return fail(
          r, s,
          strprintf("region [%llu, %llu) is out of bounds: the %s buffer of rank %d has %llu elements",
                    static_cast<ull>(g.offset), static_cast<ull>(g.offset + g.count), names[b], r,
                    static_cast<ull>(L.count[b])));
    }
    *u = L.base[b] + g.offset;
    if (write && g.count > 0) {
      const bool inOut = *u >= L.base[1] && *u + g.count <= L.base[1] + L.count[1];
      const bool inScratch = g.buf == Buf::Scratch;
      if (!inOut && !inScratch) {
        return fail(r, s,
                    g.buf == Buf::Input && !L.alias
                        ? std::string("writes the input buffer, which belongs to the caller and is read-only")
                        : std::string("writes input cells outside the output buffer"));
      }
    }
    return Status::Ok();
  }

  Status readChecked(int r, const Step& s, uint64_t u, uint64_t len, std::vector<Seg>& out) {
    out.clear();
    if (len == 0) return Status::Ok();
    const uint64_t bad = mem_[r].read(u, len, out);
    if (bad != kNone) {
      return fail(r, s,
                  strprintf("reads %s, which was never written (uninitialised)", cellName(r, bad).c_str()));
    }
    return Status::Ok();
  }

  void writeCells(int r, uint64_t u, const std::vector<Seg>& segs) {
    if (segs.empty()) return;
    segs_ += mem_[r].write(u, segs);
    if (segs_ > static_cast<int64_t>(peakSegs_)) peakSegs_ = static_cast<uint64_t>(segs_);
  }

  // out = x op y cell by cell; both cover the same length. `dstU` names cells in errors.
  Status combine(int r, const Step& s, const std::vector<Seg>& x, const std::vector<Seg>& y, uint64_t dstU,
                 std::vector<Seg>& out) {
    out.clear();
    size_t i = 0, j = 0;
    uint64_t xo = 0, yo = 0, pos = 0;
    RankSet u, overlap;
    const uint64_t origin = makeOrigin(r, ranks_[r].stepNo);
    while (i < x.size() && j < y.size()) {
      const Seg& sx = x[i];
      const Seg& sy = y[j];
      const uint64_t take = std::min(sx.len - xo, sy.len - yo);
      const uint64_t ix = sx.idx + xo, iy = sy.idx + yo;
      if (ix != iy) {
        return fail(
            r, s,
            strprintf("reduces element index %llu with element index %llu into %s: blocks are misaligned",
                      static_cast<ull>(ix), static_cast<ull>(iy), cellName(r, dstU + pos).c_str()));
      }
      if (!RankSet::disjointUnion(sx.set, sy.set, &u, &overlap)) {
        return fail(r, s,
                    strprintf("ranks %s would contribute twice to %s (element index %llu): %s + %s",
                              overlap.toString().c_str(), cellName(r, dstU + pos).c_str(),
                              static_cast<ull>(ix), sx.set.toString().c_str(), sy.set.toString().c_str()));
      }
      Seg piece;
      piece.len = take;
      piece.idx = ix;
      piece.origin = origin;
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

  static uint64_t chanKey(int src, int dst) {
    return (static_cast<uint64_t>(src) << 32) | static_cast<uint32_t>(dst);
  }

  Status checkPeer(int r, const Step& s) const {
    if (s.peer < 0 || s.peer >= n_)
      return fail(r, s, strprintf("peer %d is not a rank (0..%d)", s.peer, n_ - 1));
    if (s.peer == r) return fail(r, s, "a rank cannot message itself; use copy");
    return Status::Ok();
  }

  Status checkOverlap(int r, const Step& s, uint64_t us, uint64_t ud, uint64_t len) const {
    if (len == 0 || us == ud) return Status::Ok();
    if (us < ud + len && ud < us + len) {
      return fail(r, s, "source and destination partly overlap (they must be identical or disjoint)");
    }
    return Status::Ok();
  }

  // What step `s` of rank r (its regions at cells us, ud) waits for under the executor's rule:
  // the rank's own entry and the earlier steps whose cells it conflicts with (causal.hpp).
  RankSet dependsOn(int r, const Step& s, uint64_t us, uint64_t ud) const {
    const CausalMemory& c = ranks_[r].causal;
    RankSet known = RankSet::single(static_cast<uint32_t>(r));
    if (s.readsSrc()) c.inherit(us, s.src.count, false, &known);
    if (s.readsDst()) c.inherit(ud, s.dst.count, false, &known);
    if (s.writesDst()) c.inherit(ud, s.dst.count, true, &known);
    return known;
  }
  // Step `s` finished knowing `known`: its cells remember it, and the rank's completion follows it.
  void settle(int r, const Step& s, uint64_t us, uint64_t ud, const RankSet& known) {
    RankState& st = ranks_[r];
    if (s.readsSrc()) st.causal.record(us, s.src.count, false, known);
    if (s.readsDst()) st.causal.record(ud, s.dst.count, false, known);
    if (s.writesDst()) st.causal.record(ud, s.dst.count, true, known);
    st.heard = RankSet::unite(st.heard, known);
  }

  using ChanMap = std::unordered_map<uint64_t, Channel>;
  Status execute(int r, const Step& s, std::deque<int>& ready, ChanMap::iterator inbox) {
    RankState& st = ranks_[r];
    uint64_t us = 0, ud = 0;
    switch (s.kind) {
      case StepKind::Send: {
        TRIB_RETURN_IF_ERROR(checkPeer(r, s));
        TRIB_RETURN_IF_ERROR(resolve(r, s, s.src, false, &us));
        const uint32_t m = allocMessage();
        Message& msg = pool_[m];
        TRIB_RETURN_IF_ERROR(readChecked(r, s, us, s.src.count, msg.segs));
        msg.len = s.src.count;
        msg.step = s;
        msg.stepNo = st.stepNo;
        msg.next = UINT32_MAX;
        msg.heard = dependsOn(r, s, us, ud);
        settle(r, s, us, ud, msg.heard);
        Channel& ch = chans_[chanKey(r, s.peer)];
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
        RankState& peer = ranks_[s.peer];
        if (peer.waitingOn == r) {
          peer.waitingOn = -1;
          if (!peer.queued) {
            peer.queued = true;
            ready.push_back(s.peer);
          }
        }
        return Status::Ok();
      }
      case StepKind::Recv:
      case StepKind::RecvReduce: {
        const bool reduce = s.kind == StepKind::RecvReduce;
        TRIB_RETURN_IF_ERROR(resolve(r, s, s.dst, true, &ud));
        if (reduce) {
          TRIB_RETURN_IF_ERROR(resolve(r, s, s.src, false, &us));
          if (s.src.count != s.dst.count) {
            return fail(r, s,
                        strprintf("local operand has %llu elements but the destination %llu",
                                  static_cast<ull>(s.src.count), static_cast<ull>(s.dst.count)));
          }
          TRIB_RETURN_IF_ERROR(checkOverlap(r, s, us, ud, s.dst.count));
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
        if (reduce) {
          TRIB_RETURN_IF_ERROR(readChecked(r, s, us, s.src.count, tmpA_));
          TRIB_RETURN_IF_ERROR(combine(r, s, tmpA_, msg.segs, ud, tmpB_));
          writeCells(r, ud, tmpB_);
        } else {
          writeCells(r, ud, msg.segs);
        }
        settle(r, s, us, ud, RankSet::unite(dependsOn(r, s, us, ud), msg.heard));
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
      case StepKind::Put:
      case StepKind::Get:
      case StepKind::GetReduce:
      case StepKind::Signal:
      case StepKind::Wait:
        return fail(r, s, "peer-memory steps are not verified yet");
      case StepKind::Copy:
      case StepKind::Reduce: {
        TRIB_RETURN_IF_ERROR(resolve(r, s, s.src, false, &us));
        TRIB_RETURN_IF_ERROR(resolve(r, s, s.dst, true, &ud));
        if (s.src.count != s.dst.count) {
          return fail(r, s,
                      strprintf("source has %llu elements but the destination %llu",
                                static_cast<ull>(s.src.count), static_cast<ull>(s.dst.count)));
        }
        TRIB_RETURN_IF_ERROR(checkOverlap(r, s, us, ud, s.dst.count));
        TRIB_RETURN_IF_ERROR(readChecked(r, s, us, s.src.count, tmpA_));
        if (s.kind == StepKind::Copy) {
          writeCells(r, ud, tmpA_);
        } else {
          TRIB_RETURN_IF_ERROR(readChecked(r, s, ud, s.dst.count, tmpC_));
          TRIB_RETURN_IF_ERROR(combine(r, s, tmpC_, tmpA_, ud, tmpB_));
          writeCells(r, ud, tmpB_);
        }
        settle(r, s, us, ud, dependsOn(r, s, us, ud));
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
          return errorf(tribInternalError, "rank %d: the schedule generator failed after step %llu: %s", r,
                        static_cast<ull>(st.stepNo), e.what());
        }
        if (!more) {
          st.done = true;
          st.gen = Generator<Step>();  // frees the coroutine frame
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
      } else {
        auto inbox = chans_.end();
        if (s.kind == StepKind::Recv || s.kind == StepKind::RecvReduce) {
          TRIB_RETURN_IF_ERROR(checkPeer(r, s));
          inbox = chans_.find(chanKey(s.peer, r));
          if (inbox == chans_.end()) {
            st.waitingOn = s.peer;  // a send from the peer re-queues us
            return Status::Ok();
          }
        }
        TRIB_RETURN_IF_ERROR(execute(r, s, ready, inbox));
      }
      st.hasPending = false;
      ++st.stepNo;
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
    // A stride d >= 2 names the slice group of the ranks congruent to r mod d (an all-reduce among
    // them); each group's k-th step is its own rendezvous.
    if (s.peer >= 0 && (s.peer < 2 || s.peer > n_))
      return fail(r, s, strprintf("switch_reduce stride %d is not in 2..%d", s.peer, n_));
    if (s.peer >= 2 && a_.coll != Coll::AllReduce)
      return fail(r, s,
                  strprintf("a strided switch_reduce is an all-reduce, not part of a %s", collName(a_.coll)));
    const int members = switchMembers(r, s);
    SwitchOp& op = switchOps_[{switchGroup(r, s), k}];
    const uint64_t n = static_cast<uint64_t>(n_);
    uint64_t us = 0, ud = 0;
    TRIB_RETURN_IF_ERROR(resolve(r, s, s.dst, true, &ud));
    if (!st.switchDeposited) {
      TRIB_RETURN_IF_ERROR(resolve(r, s, s.src, false, &us));
      const uint64_t m = switchStepCount(a_.coll, a_.root, r, s);
      const bool root = r == a_.root;
      uint64_t wantS = m, wantD = m;
      switch (a_.coll) {
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
          return fail(r, s, strprintf("the switch does not run %s", collName(a_.coll)));
      }
      if (s.src.count != wantS || s.dst.count != wantD) {
        return fail(
            r, s,
            strprintf("a %s switch_reduce of %llu elements per rank contributes %llu and receives "
                      "%llu elements here, not %llu and %llu",
                      collName(a_.coll), static_cast<ull>(m), static_cast<ull>(s.src.count),
                      static_cast<ull>(s.dst.count), static_cast<ull>(wantS), static_cast<ull>(wantD)));
      }
      if (op.arrived > 0 && op.len != m) {
        return fail(
            r, s,
            strprintf("switch_reduce #%llu has %llu elements here but %llu on rank %d", static_cast<ull>(k),
                      static_cast<ull>(m), static_cast<ull>(op.len), op.firstRank));
      }
      TRIB_RETURN_IF_ERROR(readChecked(r, s, us, s.src.count, tmpA_));
      if (op.arrived == 0) {
        op.len = m;
        op.firstRank = r;
      }
      if (a_.coll == Coll::AllGather) {
        op.pieces.resize(n_);
        op.pieces[r] = tmpA_;
      } else if (a_.coll == Coll::Broadcast) {
        if (root) op.acc = tmpA_;
      } else if (op.arrived == 0) {
        op.acc = tmpA_;
      } else {
        TRIB_RETURN_IF_ERROR(combine(r, s, op.acc, tmpA_, us, tmpB_));
        op.acc.swap(tmpB_);
      }
      ++op.arrived;
      op.heard = RankSet::unite(op.heard, dependsOn(r, s, us, ud));
      st.switchDeposited = true;
      st.sent += s.src.count;
      if (op.arrived == members) {
        if (a_.coll == Coll::AllGather) {
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
    if (a_.coll == Coll::ReduceScatter) {
      tmpB_.clear();
      sliceSegs(op.acc, static_cast<uint64_t>(r) * op.len, s.dst.count, tmpB_);
      writeCells(r, ud, tmpB_);
    } else if (s.dst.count > 0) {
      writeCells(r, ud, op.acc);
    }
    TRIB_RETURN_IF_ERROR(resolve(r, s, s.src, false, &us));
    settle(r, s, us, ud, op.heard);
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
        if (st.pending.kind == StepKind::SwitchReduce) {
          const auto it = switchOps_.find({switchGroup(r, st.pending), st.switchSteps});
          const int arrived = it == switchOps_.end() ? 0 : it->second.arrived;
          msg += strprintf(
              "\n  rank %d at step %llu %s waits for the other ranks' switch_reduce #%llu (%d of %d in)", r,
              static_cast<ull>(st.stepNo), describeStep(st.pending).c_str(), static_cast<ull>(st.switchSteps),
              arrived, switchMembers(r, st.pending));
          continue;
        }
        const int p = st.pending.peer;
        std::string peerState = ranks_[p].done ? "which has finished its schedule"
                                               : strprintf("which is itself blocked at step %llu %s",
                                                           static_cast<ull>(ranks_[p].stepNo),
                                                           describeStep(ranks_[p].pending).c_str());
        msg += strprintf("\n  rank %d at step %llu %s waits for a message from rank %d, %s", r,
                         static_cast<ull>(st.stepNo), describeStep(st.pending).c_str(), p, peerState.c_str());
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
        msg += strprintf(
            "\n  rank %d sent %u message(s) to rank %d that were never received, the first at its step "
            "%llu %s",
            static_cast<int>(left[i].first >> 32), left[i].second.size,
            static_cast<int>(left[i].first & 0xffffffffu), static_cast<ull>(m.stepNo),
            describeStep(m.step).c_str());
      }
      return Status(tribInternalError, msg);
    }
    return Status::Ok();
  }

  Expect expectAt(int r, uint64_t pos) const {
    const uint64_t c = a_.count, out = layouts_[r].count[1];
    const RankSet all = RankSet::range(0, static_cast<uint32_t>(n_));
    const uint64_t ur = static_cast<uint64_t>(r);
    switch (a_.coll) {
      case Coll::AllReduce:
      case Coll::Reduce:
        return {0, 0, all, out};
      case Coll::Broadcast:
        return {0, 0, RankSet::single(static_cast<uint32_t>(a_.root)), out};
      case Coll::ReduceScatter:
        return {0, ur * c, all, out};
      case Coll::Scatter:
        return {0, ur * c, RankSet::single(static_cast<uint32_t>(a_.root)), out};
      case Coll::AllGather:
      case Coll::Gather: {
        const uint64_t p = pos / c;
        return {p * c, 0, RankSet::single(static_cast<uint32_t>(p)), (p + 1) * c};
      }
      case Coll::AlltoAll: {
        const uint64_t p = pos / c;
        return {p * c, ur * c, RankSet::single(static_cast<uint32_t>(p)), (p + 1) * c};
      }
      case Coll::Barrier:
        break;
    }
    return {0, 0, RankSet(), out};
  }

  // The rank's exit must causally follow the entry of every rank its result depends on (every
  // rank, for a barrier): through messages and the memory conflicts that order its steps.
  Status checkSynchronised(int r) const {
    RankSet needed;
    if (barrier_) needed = RankSet::range(0, static_cast<uint32_t>(n_));
    for (uint64_t pos = 0; pos < layouts_[r].count[1];) {
      const Expect e = expectAt(r, pos);
      needed = RankSet::unite(needed, e.set);
      pos = e.end;
    }
    const RankSet missing = RankSet::minus(needed, ranks_[r].heard);
    if (missing.empty()) return Status::Ok();
    return errorf(tribInternalError,
                  "rank %d can finish the %s before ranks %s have entered it: no chain of messages and "
                  "memory dependencies leads from their entry to its exit (the executor orders a rank's "
                  "steps only by the memory they share; a message without data orders nothing)",
                  r, collName(a_.coll), missing.toString().c_str());
  }

  Status checkOutputs() const {
    for (int r = 0; r < n_; ++r) {
      const Layout& L = layouts_[r];
      if (L.count[1] == 0) continue;
      Status bad;
      Expect e = expectAt(r, 0);
      mem_[r].forEach(L.base[1], L.count[1], [&](uint64_t u, const Seg& s) {
        if (!bad.ok()) return;
        uint64_t pos = u - L.base[1];
        const uint64_t end = pos + s.len;
        while (pos < end) {
          if (pos >= e.end) e = expectAt(r, pos);
          const uint64_t take = std::min(end, e.end) - pos;
          const uint64_t got = s.idx + (pos - (u - L.base[1]));
          const uint64_t wantIdx = e.idx + (pos - e.start);
          if (s.set.empty()) {
            bad = errorf(
                tribInternalError,
                "rank %d: output out[%llu] was never written (expected element index %llu from ranks %s)", r,
                static_cast<ull>(pos), static_cast<ull>(wantIdx), e.set.toString().c_str());
            return;
          }
          if (got != wantIdx || s.set != e.set) {
            std::string diff;
            RankSet missing = RankSet::minus(e.set, s.set), extra = RankSet::minus(s.set, e.set);
            if (!missing.empty()) diff += " missing contributions from ranks " + missing.toString() + ";";
            if (!extra.empty()) diff += " unexpected contributions from ranks " + extra.toString() + ";";
            if (got != wantIdx)
              diff += strprintf(" element index %llu instead of %llu;", static_cast<ull>(got),
                                static_cast<ull>(wantIdx));
            diff.pop_back();
            bad = errorf(tribInternalError,
                         "rank %d: wrong result in out[%llu]: holds element index %llu from ranks %s, "
                         "expected index %llu "
                         "from ranks %s:%s",
                         r, static_cast<ull>(pos), static_cast<ull>(got), s.set.toString().c_str(),
                         static_cast<ull>(wantIdx), e.set.toString().c_str(), diff.c_str());
            return;
          }
          pos += take;
        }
      });
      TRIB_RETURN_IF_ERROR(bad);
    }
    // After the data: a wrong result names its cells; a right one implies these for all but barriers.
    for (int r = 0; r < n_; ++r) TRIB_RETURN_IF_ERROR(checkSynchronised(r));
    if (a_.coll == Coll::AllReduce) return checkSameReduction();
    return Status::Ok();
  }

  // All-reduce: every rank must hold the very same reduction of each element (computed once,
  // then distributed); separately computed sums may differ in the last bits between ranks.
  Status checkSameReduction() const {
    const uint64_t c = a_.count;
    std::vector<Seg> ref, got;
    mem_[0].read(layouts_[0].base[1], c, ref);
    for (int r = 1; r < n_; ++r) {
      got.clear();
      mem_[r].read(layouts_[r].base[1], c, got);
      size_t i = 0, j = 0;
      uint64_t io = 0, jo = 0, pos = 0;
      while (i < ref.size() && j < got.size()) {
        const uint64_t take = std::min(ref[i].len - io, got[j].len - jo);
        if (ref[i].origin != got[j].origin) {
          const uint64_t o0 = ref[i].origin, o1 = got[j].origin;
          return errorf(
              tribInternalError,
              "rank %d: out[%llu] holds its own reduction of element index %llu (made by rank %d at step "
              "%llu), not the one rank 0 holds (made by rank %d at step %llu): ranks could end with "
              "different floating-point results; reduce each element once and distribute the result",
              r, static_cast<ull>(pos), static_cast<ull>(pos), originRank(o1),
              static_cast<ull>(originStep(o1)), originRank(o0), static_cast<ull>(originStep(o0)));
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
  const AlgoInfo& algo_;
  CollArgs a_;
  int n_;
  bool barrier_ = false;
  std::vector<Layout> layouts_;
  std::vector<Memory> mem_;
  std::vector<RankState> ranks_;
  ChanMap chans_;
  std::vector<Message> pool_;
  uint32_t freeMsg_ = UINT32_MAX;
  std::vector<Seg> tmpA_, tmpB_, tmpC_;
  uint64_t steps_ = 0, messages_ = 0, elementsSent_ = 0, peakSegs_ = 0;
  int64_t segs_ = 0;
};

}  // namespace

Status verifySchedule(const AlgoInfo& algo, const CollArgs& args, VerifyStats* stats) {
  const auto t0 = std::chrono::steady_clock::now();
  Status st;
  try {
    Verifier v(algo, args);
    st = v.run(stats);
  } catch (const std::bad_alloc&) {
    st = errorf(tribSystemError, "verify: out of memory verifying %s %s at %d ranks", algoName(algo.algo),
                collName(args.coll), args.nranks);
  }
  if (stats) stats->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return st;
}

}  // namespace trib
