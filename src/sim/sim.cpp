// The step replay (simulate): dataflow over each rank's steps, messages transmitted in departure
// order over the links' servers (links.hpp). NVLS plans replay in nvls_sim.cpp. See sim.hpp.
#include "sim/sim.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <queue>
#include <span>
#include <unordered_map>

#include "sim/links.hpp"
#include "sim/sim_result.hpp"
#include "topo/route.hpp"

namespace trib {

using namespace replay;

namespace {

// Per-buffer times: w = when the data is ready (last write done), a = last access (read start or
// write done) -- a write must wait for it. Segments cover [begin, next begin); capped in number by
// merging neighbours (conservatively taking the later times).
class TimeMap {
 public:
  double maxW(const Region& r) const { return scan(r, false); }
  double maxA(const Region& r) const { return scan(r, true); }
  void read(const Region& r, double t) {
    if (!r.count) return;
    for (size_t i = find(r.offset); i < segs_.size() && segs_[i].begin < r.offset + r.count; ++i)
      segs_[i].a = std::max(segs_[i].a, t);
  }
  void write(const Region& r, double t) {
    if (!r.count) return;
    size_t i = split(r.offset);
    size_t end = split(r.offset + r.count);
    for (; i < end; ++i) {
      segs_[i].w = t;
      segs_[i].a = std::max(segs_[i].a, t);
    }
    if (segs_.size() > kMaxSegs) compact();
  }

 private:
  struct Seg {
    uint64_t begin;
    double w, a;
  };
  static constexpr size_t kMaxSegs = 128;
  std::vector<Seg> segs_{{0, 0, 0}};

 public:
  // The most a map holds: kMaxSegs + 2 segments before compact(), in a vector grown by doubling.
  static constexpr size_t kCapBytes = std::bit_ceil(kMaxSegs + 2) * sizeof(Seg);

 private:
  size_t find(uint64_t off) const {
    auto it = std::upper_bound(segs_.begin(), segs_.end(), off,
                               [](uint64_t o, const Seg& s) { return o < s.begin; });
    return static_cast<size_t>(it - segs_.begin()) - 1;
  }
  double scan(const Region& r, bool access) const {
    if (!r.count) return 0;
    double m = 0;
    for (size_t i = find(r.offset); i < segs_.size() && segs_[i].begin < r.offset + r.count; ++i)
      m = std::max(m, access ? segs_[i].a : segs_[i].w);
    return m;
  }
  size_t split(uint64_t off) {  // index of the segment starting at off (created if needed)
    size_t i = find(off);
    if (segs_[i].begin == off) return i;
    Seg s = segs_[i];
    s.begin = off;
    segs_.insert(segs_.begin() + static_cast<long>(i) + 1, s);
    return i + 1;
  }
  // Merges segments into their right neighbours, the pairs whose times differ least first, down
  // to three quarters of the cap: a merged segment takes the later times, which delays a step
  // that touches it by that difference. (Merging fixed pairs could join a slice the switch still
  // reads with the next one just written, and hold the next slice's SwitchReduce until the
  // first's result: hier_switch on 8 DGX H100 at 16 MiB, 19 slices in each of 8 blocks.)
  void compact() {
    const size_t n = segs_.size();
    std::vector<std::pair<double, uint32_t>> cost(n - 1);
    for (size_t i = 0; i + 1 < n; ++i)
      cost[i] = {std::max(std::abs(segs_[i].w - segs_[i + 1].w), std::abs(segs_[i].a - segs_[i + 1].a)),
                 static_cast<uint32_t>(i)};
    std::sort(cost.begin(), cost.end());
    std::vector<uint8_t> merged(n, 0);  // 1: joins its left neighbour; 2: takes its right one in
    size_t merges = 0;
    for (const auto& [c, i] : cost) {
      if (n - merges <= kMaxSegs * 3 / 4) break;
      if (merged[i] || merged[i + 1]) continue;
      merged[i] = 2, merged[i + 1] = 1;
      ++merges;
    }
    size_t o = 0;
    for (size_t i = 0; i < n; ++i) {
      if (merged[i] == 1) {
        segs_[o - 1].w = std::max(segs_[o - 1].w, segs_[i].w);
        segs_[o - 1].a = std::max(segs_[o - 1].a, segs_[i].a);
      } else {
        segs_[o++] = segs_[i];
      }
    }
    segs_.resize(o);
  }
};

// What a step touches, for conflicts: a space (a local buffer, or peer p's window) and a range.
// Signal/Wait count as writes of the rank's own window and the peer's, whole (as the executor
// runs them): that is the ordering rule of schedule.hpp, a little stronger.
struct Access {
  int space;
  uint64_t begin, end;
  bool write;
};
constexpr uint64_t kWhole = std::numeric_limits<uint64_t>::max();
int peerSpace(int peer) { return kNumBufs + peer; }

int accesses(const Step& s, Access out[2]) {
  if (s.isSync()) {
    out[0] = {static_cast<int>(Buf::Window), 0, kWhole, true};
    out[1] = {peerSpace(s.peer), 0, kWhole, true};
    return 2;
  }
  int n = 0;
  auto add = [&](const Region& r, bool peers, bool write) {
    if (r.count)
      out[n++] = {peers ? peerSpace(s.peer) : static_cast<int>(r.buf), r.offset, r.offset + r.count, write};
  };
  if (s.readsSrc()) add(s.src, s.srcIsPeers(), false);
  if (s.writesDst()) add(s.dst, s.dstIsPeers(), true);  // a read of dst (Reduce) is covered by the write
  return n;
}

// Two steps conflict when one writes what the other touches.
bool conflicts(const Step& s, const Step& b) {
  Access x[2], y[2];
  const int nx = accesses(s, x), ny = accesses(b, y);
  for (int i = 0; i < nx; ++i)
    for (int j = 0; j < ny; ++j)
      if ((x[i].write || y[j].write) && x[i].space == y[j].space && x[i].begin < y[j].end &&
          y[j].begin < x[i].end)
        return true;
  return false;
}

struct Arrival {
  double at = 0, first = 0;
  bool done = false, consumed = false;
};
// The slots of one queue (messages of a pair, signals, a rank's transfers) by sequence number,
// first in first out. Slots are found by number, never held by address, so the queue is a plain
// vector holding only what is outstanding: on a direct schedule every rank pair has one, n² of
// them (a std::deque allocated ~600 bytes each, 12 GB at 4,608 ranks).
struct PairQ {
  uint64_t base = 0;  // the sequence number of q[head]
  size_t head = 0;
  std::vector<Arrival> q;
  Arrival& get(uint64_t seq) {
    const size_t i = head + static_cast<size_t>(seq - base);
    if (i >= q.size()) q.resize(i + 1);
    return q[i];
  }
  // Drops the consumed slots at the front; release: give the memory back once empty (queues of
  // ranks with many peers, each used a few times).
  void pop(bool release = false) {
    while (head < q.size() && q[head].consumed) ++head, ++base;
    if (head == q.size()) {
      head = 0;
      if (release)
        std::vector<Arrival>().swap(q);
      else
        q.clear();
    } else if (head >= 64 && 2 * head >= q.size()) {
      q.erase(q.begin(), q.begin() + static_cast<std::ptrdiff_t>(head));
      head = 0;
    }
  }
};

// Routes between nodes, computed once per rank pair and stored back to back (a rank pair of a
// direct schedule among n² keeps 4-8 links, not the Router cache's hash node and vector).
class RoutePool {
 public:
  std::span<const DirLink> add(const std::vector<DirLink>& r) {
    if (r.empty()) return {};
    if (blocks_.empty() || used_ + r.size() > cap_) {
      cap_ = std::max<size_t>(kBlock, r.size());
      blocks_.push_back(std::make_unique<DirLink[]>(cap_));
      used_ = 0;
    }
    DirLink* at = blocks_.back().get() + used_;
    std::copy(r.begin(), r.end(), at);
    used_ += r.size();
    return {at, r.size()};
  }

 private:
  static constexpr size_t kBlock = size_t{1} << 20;
  std::vector<std::unique_ptr<DirLink[]>> blocks_;
  size_t used_ = 0, cap_ = 0;
};
// A route looked up once: `known` tells an empty route (two ranks on one node) from none yet.
struct RouteRef {
  const DirLink* links = nullptr;
  uint32_t size = 0;
  bool known = false;
  std::span<const DirLink> span() const { return {links, size}; }
};

// One SwitchReduce of a group (every rank, or a slice group): it completes once every member
// has arrived, each member's result then arriving down the aggregation tree.
struct Rendezvous {
  std::vector<double> ready, up, down, result;  // per member: data ready, bytes up / down, result
  size_t arrived = 0;
  bool complete = false;
};

constexpr int kMaxSimChannels = 256;  // Step::channel (8 bits; the rail ring has one per rank of a domain)

// A Step as a blocked step keeps it: the regions' offsets and counts without Region's padding, the
// kind and buffers in one byte and the Pending flags with the channel in the 16 bits left over (40
// bytes, not 56 + 3). A replay holds up to a window of these per rank (432 at 131,040 ranks for the
// tree), most of its memory.
struct PackedStep {
  static_assert(kNumBufs <= 4);
  uint64_t srcOffset = 0, srcCount = 0, dstOffset = 0, dstCount = 0;
  int32_t peer = -1;
  uint8_t kind_ : 4 = 0, srcBuf_ : 2 = 0, dstBuf_ : 2 = 0;  // StepKind, Buf, Buf
  uint16_t fused : 1 = 0, issued : 1 = 0, done : 1 = 0;     // Pending's flags
  uint16_t channel : 8 = 0;                                 // Step::channel
  PackedStep() = default;
  explicit PackedStep(const Step& s)
      : srcOffset(s.src.offset),
        srcCount(s.src.count),
        dstOffset(s.dst.offset),
        dstCount(s.dst.count),
        peer(s.peer),
        kind_(static_cast<uint8_t>(s.kind)),
        srcBuf_(static_cast<uint8_t>(s.src.buf)),
        dstBuf_(static_cast<uint8_t>(s.dst.buf)),
        channel(s.channel) {}
  Step step() const {
    return {static_cast<StepKind>(kind_),
            static_cast<uint8_t>(channel),
            peer,
            {static_cast<Buf>(srcBuf_), srcOffset, srcCount},
            {static_cast<Buf>(dstBuf_), dstOffset, dstCount}};
  }
};
static_assert(sizeof(PackedStep) == 40);

struct Pending {
  PackedStep ps;  // the step (step()) and the flags below
  // Receives, waits: the queue of messages (signals) from the peer, its slot number seq; an issued
  // Put/Get/GetReduce: the rank's transfers, its transfer's slot (queues live in stable nodes).
  // SwitchReduce (no queue): seq is this rank's index in the group (member()).
  uint64_t seq = 0;
  PairQ* q = nullptr;
  Rendezvous* rv = nullptr;  // SwitchReduce: its group's instance (map nodes are stable)
  uint64_t id = 0;           // position in the rank's program
  uint64_t waitOn = 0;  // id+1 of the earlier blocked step it conflicted with at the last check (0: none)
  Step step() const { return ps.step(); }
  Arrival& slot() const { return q->get(seq); }
  size_t member() const { return static_cast<size_t>(seq); }
  // A reduce right after a copy into the same region: the executor runs the pair as one reduce of
  // both sources (Execution::fuseCopyReduce), so this one costs only what that adds to the copy.
  bool fused() const { return ps.fused; }
  // Started, not finished: a SwitchReduce waiting for its group, a transfer to or from a peer's
  // window on its way.
  bool issued() const { return ps.issued; }
  bool done() const { return ps.done; }  // executed; removed from the blocked list at the end of the pass
};
static_assert(sizeof(Pending) == 80);

struct RankState {
  Generator<Step> gen;
  bool genDone = false;
  bool queued = false;
  std::vector<Pending> blocked;
  TimeMap maps[kNumBufs];
  bool windowWork = false;  // its schedule has touched its window (a peer-memory schedule)
  bool prevCopies = false;  // the step pulled last is a copy or get into prevDst (fusion, Pending::fused)
  Region prevDst;
  // Per peer: message counters, the queue of messages from it, the route to it. Few peers per rank
  // for every schedule but direct and all-to-all, so a short list searched from the last hit, then
  // a hash index, and an index by rank once the peers are a sixteenth of the ranks. Kept small: a
  // direct schedule at 4,608 ranks has 21 M of them.
  struct Peer {
    int peer = -1;
    uint64_t sent = 0, received = 0;
    PairQ in;            // messages from the peer
    RouteRef route;      // to the peer
    double fairTag = 0;  // its next message's start tag on the source link (Engine::submit)
    // Peer-memory schedules: their signals, the route back and this rank's view of the window.
    struct Window {
      uint64_t signalled = 0, waited = 0;
      PairQ signals;     // signals from the peer
      RouteRef routeIn;  // from the peer
      TimeMap window;    // this rank's accesses to the peer's window
    };
    std::unique_ptr<Window> win;
    Window& w() {
      if (!win) win = std::make_unique<Window>();
      return *win;
    }
  };
  std::deque<Peer> peers;  // stable: pending receives hold their queue's address
  size_t lastPeer = 0;
  std::unordered_map<int, size_t> peerIndex;  // used once the list grows long
  std::vector<int32_t> peerByRank;            // then this, by rank (-1: none yet)
  uint64_t pulled = 0;
  double reduceBpu = 0, copyBpu = 0;
  int node = -1;
  bool host = false;    // a CPU process: its window work runs on its own core, one step at a time
  double coreFree = 0;  // host: when that core is next free
  PairQ transfers;      // its Put/Get/GetReduce transfers over links, in the order issued
  uint64_t issuedTransfers = 0;
  std::unordered_map<int, uint64_t> switchSteps;  // SwitchReduce steps pulled, per stride
};

// A message in flight, 56 bytes (a direct schedule posts n² at once).
struct Msg {
  double depart;
  uint64_t order;  // tie-break: deterministic
  int src, dst;
  uint64_t bytes;
  // A message: its number on the pair. A Put/Get/GetReduce's transfer (transfer set; src: the
  // rank that runs it, dst: the window's owner): its slot in the source's transfers, and its
  // route is the one from the owner (inbound: Get/GetReduce) or to it. 51 bits (2e15 messages a
  // pair) leave the flags below one word: the event heap holds these by the million.
  uint64_t seq : 50 = 0;
  uint64_t channel : 8 = 0;  // Step::channel (a message)
  uint64_t transfer : 1 = 0, inbound : 1 = 0;
  // Not a message: the event that source link `src` is free at `head` (Engine::drain).
  uint64_t drain : 1 = 0;
  // A message whose head reached the port of its route's last switch (Engine::egressOf) at
  // `head`, its tail `tail` behind on the link before: it waits there for its turn.
  uint64_t egress : 1 = 0;
  // Queued at its source behind earlier messages: it left its first link's queue at `depart`,
  // and its head and tail are there (Links::Cursor after the first link; see leave).
  uint64_t leaving : 1 = 0;
  // The second leg of a message relayed by a GPU (PXN, route.hpp): from the relay, which got the
  // first leg over NVLink, through its NIC to the destination (Engine::pathOf).
  uint64_t relayed : 1 = 0;
  double head = 0, tail = 0;
  bool operator>(const Msg& o) const { return depart != o.depart ? depart > o.depart : order > o.order; }
};
static_assert(sizeof(Msg) == 56);

// Look-ahead: wide enough on small communicators for slice j+1 to overlap slice j of a ring,
// narrow on huge ones (where a block is one slice and ranks move in lockstep) to bound work.
int defaultWindow(int nranks) { return std::max(8, std::min(1024, 32768 / std::max(1, nranks))); }

class Engine {
 public:
  Engine(const Topology& t, const CollArgs& args, size_t esize, const std::vector<int>& nodes,
         const SimOptions& o)
      : t_(t), router_(t), args_(args), esize_(esize), opt_(o), links_(t, opt_.k) {
    window_ = o.window > 0 ? o.window : defaultWindow(args.nranks);
    first_ = o.replayRanks > 0 ? o.replayFirst : 0;
    ranks_.resize(o.replayRanks > 0 ? o.replayRanks : args.nranks);
    for (int r = 0; r < static_cast<int>(ranks_.size()); ++r) {
      RankState& rs = ranks_[r];
      rs.node = nodes[first_ + r];
      rs.reduceBpu = rs.copyBpu = reduceBpu(t.node(rs.node), o.k);
      rs.host = t.node(rs.node).type != NodeType::Gpu;
    }
    nodes_ = nodes;
    relays_ = router_.relays();
    rankEnd_.assign(ranks_.size(), 0);
    if (o.rankCeilingGBps > 0)
      for (int node : nodes) links_.capAt(node, o.rankCeilingGBps);
  }

  Status run(const AlgoInfo& algo, SimResult* out) {
    channels_ = channelsOf(algo, args_);
    interleave_ = opt_.linkOrder == SimOptions::LinkOrder::Peers ||
                  (opt_.linkOrder == SimOptions::LinkOrder::Channels && channels_ > 1);
    const int replayed = static_cast<int>(ranks_.size());
    for (int r = 0; r < replayed; ++r) ranks_[r].gen = algo.generate(args_, first_ + r);
    for (int r = 0; r < replayed; ++r) progress(r);
    for (;;) {  // ranks woken (by a message, a signal, a completed rendezvous), then the next message
      while (!work_.empty()) {
        int r = work_.back();
        work_.pop_back();
        ranks_[r].queued = false;
        progress(r);
      }
      if (heap_.empty()) break;
      Msg m = heap_.top();
      heap_.pop();
      transmit(m);
    }
    if (!bad_.empty()) return errorf(tribInvalidArgument, "simulation: %s", bad_.c_str());
    for (int r = 0; r < replayed; ++r) {
      const RankState& rs = ranks_[r];
      if (!rs.blocked.empty()) {
        const Step s = rs.blocked.front().step();
        return errorf(
            tribInternalError,
            "simulation stuck: rank %d waits at %s with no message coming (the schedule's sends and "
            "receives, signals and waits, or switch steps do not match)",
            first_ + r, describeStep(s).c_str());
      }
    }
    const double end = rankEnd_.empty() ? 0 : *std::max_element(rankEnd_.begin(), rankEnd_.end());
    out->timeUs = end + opt_.k.launchUs;
    out->rankEndUs.resize(rankEnd_.size());
    for (size_t r = 0; r < rankEnd_.size(); ++r) out->rankEndUs[r] = rankEnd_[r] + opt_.k.launchUs;
    out->rankEndFirst = first_;
    out->steps = steps_;
    out->messages = messages_;
    links_.report(opt_.topLinks, out);
    return Status::Ok();
  }

 private:
  // True when `p` conflicts with a not-yet-run blocked step before position `upto`; remembers which.
  static bool conflictsBefore(Pending& p, const std::vector<Pending>& blocked, size_t upto) {
    const Step s = p.step();
    for (size_t j = 0; j < upto; ++j) {
      if (!blocked[j].done() && conflicts(s, blocked[j].step())) {
        p.waitOn = blocked[j].id + 1;
        return true;
      }
    }
    p.waitOn = 0;
    return false;
  }

  void progress(int r) {
    RankState& rs = ranks_[r];
    // Retry blocked steps in order. A step stays blocked, without a full re-check, while its message
    // has not arrived or the earlier step it conflicted with has not run: that step precedes it in
    // the list, so if it runs it does so earlier in this same pass (ran_ holds those).
    ran_.clear();
    for (size_t i = 0; i < rs.blocked.size(); ++i) {
      Pending& p = rs.blocked[i];
      if (p.waitOn && std::find(ran_.begin(), ran_.end(), p.waitOn - 1) != ran_.end())
        p.waitOn = 0;  // it ran
      if (!ready(p) || p.waitOn) continue;
      if (!p.issued() && conflictsBefore(p, rs.blocked, i)) continue;
      if (!execute(r, p)) continue;  // a SwitchReduce waiting for its group
      p.ps.done = 1;
      ran_.push_back(p.id);
    }
    if (!ran_.empty())
      rs.blocked.erase(
          std::remove_if(rs.blocked.begin(), rs.blocked.end(), [](const Pending& p) { return p.done(); }),
          rs.blocked.end());
    // The executor starts a step only within kExecutorWindowSteps of its first unfinished one
    // (algo/schedule.hpp), as the replay sees steps finish (in causal order, not in time: its
    // reach is at least the executor's); the replay's own window bounds the blocked steps it holds.
    const uint64_t executorReach = (rs.blocked.empty() ? rs.pulled : rs.blocked.front().id) +
                                   static_cast<uint64_t>(opt_.k.executorWindowSteps);
    while (!rs.genDone && static_cast<int>(rs.blocked.size()) < window_ && rs.pulled < executorReach) {
      if (!rs.gen.next()) {
        rs.genDone = true;
        break;
      }
      const Step& s = rs.gen.value();
      if (s.channel >= channels_) {
        bad_ = strprintf("rank %d: %s is on channel %d, past the schedule's %d", r, describeStep(s).c_str(),
                         s.channel, channels_);
        rs.genDone = true;
        return;
      }
      Pending p;
      p.ps = PackedStep(s);
      p.id = rs.pulled++;
      const bool reduces = s.kind == StepKind::Reduce || s.kind == StepKind::GetReduce;
      p.ps.fused = reduces && rs.prevCopies && rs.prevDst.buf == s.dst.buf &&
                   rs.prevDst.offset == s.dst.offset && rs.prevDst.count == s.dst.count && s.dst.count > 0;
      rs.prevCopies = !p.fused() && (s.kind == StepKind::Copy || s.kind == StepKind::Get);
      rs.prevDst = s.dst;
      ++steps_;
      if (s.isComm() || s.isPeerMemory() || s.isSync()) {
        if (s.peer < 0 || s.peer >= args_.nranks || (s.peer == first_ + r && !s.isComm())) {
          bad_ = strprintf(
              "rank %d: %s names a peer outside [0, %d)%s", first_ + r, describeStep(s).c_str(), args_.nranks,
              s.peer == first_ + r ? " or itself (its own window is reached by copy/reduce)" : "");
          rs.genDone = true;
          return;
        }
        if (quotient() && !s.isComm()) {
          bad_ = strprintf(
              "rank %d: %s: a replay of some ranks (SimOptions::replayRanks) takes point-to-point "
              "steps only",
              first_ + r, describeStep(s).c_str());
          rs.genDone = true;
          return;
        }
        RankState::Peer& pe = peer(r, s.peer);
        if (s.kind == StepKind::Send) {
          p.seq = pe.sent++;
        } else if (s.kind == StepKind::Signal) {
          p.seq = pe.w().signalled++;
        } else if (s.kind == StepKind::Wait) {
          p.seq = pe.w().waited++;  // the k-th wait for the peer matches its k-th signal to this rank
          p.q = &pe.w().signals;
          p.q->get(p.seq);
        } else if (s.isComm()) {
          p.seq = pe.received++;
          p.q = &pe.in;
          p.q->get(p.seq);
        }
      } else if (s.kind == StepKind::SwitchReduce) {
        if (quotient()) {
          bad_ = "a replay of some ranks (SimOptions::replayRanks) takes point-to-point steps only";
          rs.genDone = true;
          return;
        }
        joinRendezvous(r, p);
      }
      bool free = ready(p) && !conflictsBefore(p, rs.blocked, rs.blocked.size());
      if (!free || !execute(r, p)) {
        // Grown by doubling, but never past the window: the blocked steps never number more.
        if (rs.blocked.size() == rs.blocked.capacity())
          rs.blocked.reserve(
              std::min(std::max<size_t>(8, 2 * rs.blocked.capacity()), static_cast<size_t>(window_)));
        rs.blocked.push_back(p);
      }
    }
    // A finished rank gives its blocked steps' memory back.
    if (rs.genDone && rs.blocked.empty()) std::vector<Pending>().swap(rs.blocked);
  }

  static bool ready(const Pending& p) {
    if (p.rv) return !p.issued() || p.rv->complete;
    return !p.q || p.slot().done;  // a Put/Get/GetReduce has a slot once it is issued
  }

  // The SwitchReduce's group instance: the k-th step of its stride among the group's members
  // (schedule.hpp: every member runs them in the same order). Stride d >= 2: the ranks congruent
  // to this one modulo d, member index rank / d; else every rank (d = 1).
  static int strideOf(const Step& s) { return s.peer >= 2 ? s.peer : 1; }
  void joinRendezvous(int r, Pending& p) {
    const int n = args_.nranks, d = strideOf(p.step());
    const int group = r % d;
    const uint64_t k = ranks_[r].switchSteps[d]++;
    Rendezvous& rv = rendezvous_[{static_cast<uint64_t>(d), static_cast<uint64_t>(group), k}];
    if (rv.ready.empty()) {
      const size_t members = static_cast<size_t>((n - 1 - group) / d + 1);
      rv.ready.assign(members, 0);
      rv.up.assign(members, 0);
      rv.down.assign(members, 0);
    }
    p.rv = &rv;
    p.seq = static_cast<uint64_t>(r / d);  // member()
  }

  // The aggregation tree of a group (built on first use): slice group g on the topology's tree g,
  // as the communicator spreads its slice groups (different GPUs, different SHARP trees).
  AggGroup* aggGroup(int d, int group) {
    auto key = static_cast<uint64_t>(d) << 32 | static_cast<uint32_t>(group);
    auto it = groups_.find(key);
    if (it != groups_.end()) return &it->second;
    std::vector<int> members;
    for (int j = group; j < args_.nranks; j += d) members.push_back(nodes_[j]);
    AggGroup g;
    Status st = g.init(t_, members, group);
    if (!st.ok()) {
      bad_ = "switch reduction: " + st.message();
      return nullptr;
    }
    return &groups_.emplace(key, std::move(g)).first->second;
  }

  // Every member has arrived: stream each member's data up the tree and the result down, in chunks
  // of the plan's slice (the switch client pipelines them), and wake the members.
  void completeRendezvous(Rendezvous& rv, int r, const Step& s) {
    const int d = strideOf(s), group = r % d;
    AggGroup* g = aggGroup(d, group);
    if (!g) return;
    const double most = std::max(*std::max_element(rv.up.begin(), rv.up.end()),
                                 *std::max_element(rv.down.begin(), rv.down.end()));
    const double chunk = static_cast<double>(std::max<uint64_t>(1, args_.chunkElems) * esize_);
    const double chunks = std::max(1.0, std::ceil(most / chunk));
    std::vector<double> up(rv.up.size()), down(rv.down.size());
    for (size_t i = 0; i < up.size(); ++i) up[i] = rv.up[i] / chunks, down[i] = rv.down[i] / chunks;
    rv.result.assign(rv.ready.size(), 0);
    for (double j = 0; j < chunks; ++j) {
      std::vector<double> at = g->run(links_, opt_.k, up, down, rv.ready);
      for (size_t i = 0; i < at.size(); ++i) rv.result[i] = std::max(rv.result[i], at[i]);
      messages_ += 2 * up.size();
    }
    rv.complete = true;
    for (int j = group; j < args_.nranks; j += d) wake(j);
  }

  void wake(int r) {
    RankState& rs = ranks_[r];
    if (!rs.queued) {
      rs.queued = true;
      work_.push_back(r);
    }
  }

  RankState::Peer& peer(int r, int peer) {
    RankState& rs = ranks_[r];
    if (rs.lastPeer < rs.peers.size() && rs.peers[rs.lastPeer].peer == peer) return rs.peers[rs.lastPeer];
    if (!rs.peerByRank.empty()) {
      if (const int32_t i = rs.peerByRank[peer]; i >= 0)
        return rs.peers[rs.lastPeer = static_cast<size_t>(i)];
    } else if (rs.peers.size() <= 16) {
      for (size_t i = 0; i < rs.peers.size(); ++i)
        if (rs.peers[i].peer == peer) return rs.peers[rs.lastPeer = i];
    } else if (auto it = rs.peerIndex.find(peer); it != rs.peerIndex.end()) {
      return rs.peers[rs.lastPeer = it->second];
    }
    const size_t i = rs.peers.size();
    rs.peers.emplace_back().peer = peer;
    if (!rs.peerByRank.empty()) {
      rs.peerByRank[peer] = static_cast<int32_t>(i);
    } else if (i + 1 > 16 && (i + 1) * 16 > static_cast<size_t>(args_.nranks)) {
      // The peers are a sixteenth of the ranks: an index by rank costs no more than they do.
      rs.peerByRank.assign(args_.nranks, -1);
      for (size_t j = 0; j <= i; ++j) rs.peerByRank[rs.peers[j].peer] = static_cast<int32_t>(j);
      std::unordered_map<int, size_t>().swap(rs.peerIndex);
    } else {
      rs.peerIndex[peer] = i;
    }
    return rs.peers[rs.lastPeer = i];
  }

  // Window work done in the rank's memory: copies (2 bytes of traffic per byte: read, write) and
  // reductions (3: two reads, a write). A host rank's run on its one core, one after another, at the
  // cost model's cache-resident rate (window cells were just written: CostConstants::boardCacheSpeedup);
  // a GPU's at its copy/reduce rate, as other local steps.
  // A fused reduce (Pending::fused) adds one byte of traffic per byte to its copy's two.
  double localWindowWork(RankState& rs, double start, double bytes, bool reduce, bool fused) {
    if (!rs.host) return start + (fused ? 0.5 : 1.0) * bytes / (reduce ? rs.reduceBpu : rs.copyBpu);
    const double begin = std::max(start, rs.coreFree);
    rs.coreFree = begin + (fused ? 1 : reduce ? 3 : 2) * bytes / (rs.reduceBpu * opt_.k.boardCacheSpeedup);
    return rs.coreFree;
  }

  // A Put (to the peer's window) or Get/GetReduce (from it): a transfer over the route between the
  // two ranks' nodes, one-sided (no software step: the rank's own loads and stores), in departure
  // order with the messages; the reduction fused with it as for a RecvReduce. Between processes of
  // one host: window work in memory. Returns whether it finished (*done), else it is on its way.
  bool peerMemory(int r, Pending& p, RankState::Peer& pe, double start, double* done) {
    RankState& rs = ranks_[r];
    const Step s = p.step();
    const double bytes = static_cast<double>(s.dst.count * esize_);
    const bool reduce = s.kind == StepKind::GetReduce;
    if (p.issued()) {  // its transfer has arrived
      Arrival& a = p.slot();
      *done = a.at;
      if (reduce) *done = std::max(*done, a.first + bytes / rs.reduceBpu);
      a.consumed = true;
      rs.transfers.pop();
      return true;
    }
    const int other = ranks_[pe.peer].node;
    if (other == rs.node) {
      *done = localWindowWork(rs, start, bytes, reduce, p.fused());
      return true;
    }
    const bool inbound = s.kind != StepKind::Put;
    if (route(inbound ? pe.w().routeIn : pe.route, inbound ? other : rs.node, inbound ? rs.node : other)
            .empty()) {
      bad_ = strprintf("no route between %s and %s for %s", t_.node(rs.node).name.c_str(),
                       t_.node(other).name.c_str(), describeStep(s).c_str());
      *done = start;
      return true;
    }
    p.q = &rs.transfers;
    p.seq = rs.issuedTransfers++;
    p.q->get(p.seq);
    p.ps.issued = 1;
    Msg m{start, order_++, r, pe.peer, s.dst.count * esize_};
    m.seq = p.seq;
    m.transfer = 1;
    m.inbound = inbound;
    heap_.push(m);
    return false;
  }

  // The route from node `from` to `to`, looked up once into ref (kept in the pool).
  std::span<const DirLink> route(RouteRef& ref, int from, int to) {
    if (!ref.known) {
      if (opt_.spreadRoutes) {
        router_.paths(from, to, &routeScratch_, &altScratch_);
        for (size_t i = 0; i < routeScratch_.size(); ++i)
          if (altScratch_[i].size() > 1) routeScratch_[i] = spines_.spread(altScratch_[i], routeScratch_[i]);
      } else {
        router_.path(from, to, &routeScratch_);
      }
      const std::span<const DirLink> kept = routes_.add(routeScratch_);
      ref = {kept.data(), static_cast<uint32_t>(kept.size()), true};
    }
    return ref.span();
  }

  // Signal: a small message, its arrival delayed by the route's latency and a software step.
  double signalArrival(const RankState& rs, RankState::Peer& pe, double start) {
    const int other = ranks_[pe.peer].node;
    if (other == rs.node) return start + opt_.k.stepOverheadUs;
    const std::span<const DirLink> path = route(pe.route, rs.node, other);
    double at = start + links_.overhead(path);
    for (DirLink d : path) at += links_.latency(d);
    return at;
  }

  // Runs p (its regions are ready); false when it has not finished (a SwitchReduce whose group has
  // not all arrived: it stays blocked).
  bool execute(int r, Pending& p) {
    RankState& rs = ranks_[r];
    const Step s = p.step();
    RankState::Peer* pe = s.isPeerMemory() || s.isSync() ? &peer(r, s.peer) : nullptr;
    TimeMap& srcMap = s.srcIsPeers() ? pe->w().window : rs.maps[static_cast<int>(s.src.buf)];
    TimeMap& dstMap = s.dstIsPeers() ? pe->w().window : rs.maps[static_cast<int>(s.dst.buf)];
    double done = 0;
    switch (s.kind) {
      case StepKind::Send: {
        double start = srcMap.maxW(s.src);
        srcMap.read(s.src, start);
        if (s.peer < 0 || s.peer >= args_.nranks) {
          bad_ =
              strprintf("rank %d: %s names a peer outside [0, %d)", r, describeStep(s).c_str(), args_.nranks);
          return true;
        }
        Msg m{start, order_++, r, s.peer, s.src.count * esize_};
        m.seq = p.seq;
        m.channel = s.channel;
        heap_.push(m);
        return true;
      }
      case StepKind::Recv:
      case StepKind::RecvReduce: {
        PairQ& q = *p.q;
        Arrival& a = p.slot();
        double start = dstMap.maxA(s.dst);
        if (s.kind == StepKind::Recv) {
          done = std::max(a.at, start);
        } else {
          start = std::max(start, srcMap.maxW(s.src));
          srcMap.read(s.src, start);
          done = std::max(a.at, std::max(start, a.first) + s.dst.count * esize_ / rs.reduceBpu);
        }
        a.consumed = true;
        q.pop(!rs.peerByRank.empty());
        break;
      }
      case StepKind::Copy:
      case StepKind::Expose:  // priced as the copy it is where the executor cannot map the source
      case StepKind::Reduce: {
        double start = std::max(srcMap.maxW(s.src), dstMap.maxA(s.dst));
        srcMap.read(s.src, start);
        const double bytes = static_cast<double>(s.dst.count * esize_);
        // A host rank's local work in a peer-memory schedule (its own term of a fold read from its
        // input, say) runs among the window work on its core, as the cost model counts it.
        rs.windowWork |= s.touchesOwnWindow();
        if (rs.windowWork) {
          done = localWindowWork(rs, start, bytes, s.kind == StepKind::Reduce, p.fused());
          srcMap.read(s.src, done);  // a window is read until the step ends (a Signal releases it)
        } else {
          done = start +
                 (p.fused() ? 0.5 : 1.0) * bytes / (s.kind != StepKind::Reduce ? rs.copyBpu : rs.reduceBpu);
        }
        break;
      }
      case StepKind::Put:
      case StepKind::Get:
      case StepKind::GetReduce: {
        const double start = p.issued() ? 0 : std::max(srcMap.maxW(s.src), dstMap.maxA(s.dst));
        if (!peerMemory(r, p, *pe, start, &done)) return false;
        srcMap.read(s.src, done);
        break;
      }
      case StepKind::Signal:
      case StepKind::Wait: {
        // Both windows as written (see accesses): after every earlier access to them, before any
        // later one; a Wait ends when the matching signal has arrived.
        const Region whole{Buf::Window, 0, kWhole};
        TimeMap& window = pe->w().window;
        done = std::max(rs.maps[static_cast<int>(Buf::Window)].maxA(whole), window.maxA(whole));
        if (s.kind == StepKind::Signal) {
          Arrival& a = peer(s.peer, r).w().signals.get(p.seq);
          a.at = a.first = signalArrival(rs, *pe, done);
          a.done = true;
          ++messages_;
          wake(s.peer);
        } else {
          Arrival& a = p.slot();
          done = std::max(done, a.at);
          a.consumed = true;
          p.q->pop();
        }
        rs.maps[static_cast<int>(Buf::Window)].write(whole, done);
        window.write(whole, done);
        finishAt(r, done);
        return true;
      }
      case StepKind::SwitchReduce: {
        Rendezvous& rv = *p.rv;
        if (!p.issued()) {
          const double start = std::max(srcMap.maxW(s.src), dstMap.maxA(s.dst));
          srcMap.read(s.src, start);
          rv.ready[p.member()] = start;
          rv.up[p.member()] = static_cast<double>(s.src.count * esize_);
          rv.down[p.member()] = static_cast<double>(s.dst.count * esize_);
          p.ps.issued = 1;
          if (++rv.arrived == rv.ready.size()) completeRendezvous(rv, r, s);
          if (!rv.complete) return false;
        }
        done = rv.result[p.member()];
        srcMap.read(s.src, done);  // the switch reads the source until the result is back
        break;
      }
    }
    dstMap.write(s.dst, done);
    finishAt(r, done);
    return true;
  }

  // A message leaves its source's first link in the order posted, one after another (the
  // transport's queue), and is booked on the rest of its route only once it actually leaves: a
  // link downstream (a switch's port to a destination) then serves messages from different
  // sources in the order they reach it, not in the order they were posted. Booking the whole
  // route at posting let a rank's messages posted at once claim their destinations' ports far
  // ahead and leave them idle meanwhile (direct at 16 ranks: the ports busy 57% of the replay).
  // Returns false when the message was put back to leave later.
  bool leave(const Msg& m, std::span<const DirLink> path, double ready, double bytes, double* at,
             double* first) {
    // A leaving message's cursor: past its first link (the only one sendFirst books).
    Links::Cursor c{m.head, m.tail, links_.latency(path[0]), 1};
    if (!m.leaving) {
      links_.sendFirst(path, ready, bytes, &c);
      const double starts = c.head - c.prevLat;
      if (path.size() > 1 && starts > ready) {
        Msg later = m;
        later.leaving = 1;
        later.head = c.head;
        later.tail = c.tail;
        later.depart = m.depart + (starts - ready);  // keyed like the others: before its overhead
        heap_.push(later);
        return false;
      }
    }
    *at = links_.sendRest(path, bytes, c, first);
    return true;
  }

  // The path of message m (a transfer's from the window's owner when inbound). A message whose
  // route passes a PXN relay (a GPU past its first hop) goes in two legs, as NCCL's PXN does: over
  // NVLink into the relay's memory, then from there, by the relay's proxy, through its NIC; each
  // leg takes its links' turns as any message does.
  std::span<const DirLink> pathOf(const Msg& m) {
    if (m.transfer && m.inbound)
      return route(peer(m.src, m.dst).w().routeIn, nodes_[m.dst], ranks_[m.src].node);
    const std::span<const DirLink> full = routeOf(m);
    const size_t k = relayOf(m, full);
    if (k == 0) return full;
    return m.relayed ? full.subspan(k) : full.first(k);
  }
  // m's whole route, source to destination (m.dst: the real rank).
  std::span<const DirLink> routeOf(const Msg& m) {
    return route(peer(m.src, m.dst).route, ranks_[m.src].node, nodes_[m.dst]);
  }
  // The index in m's full route of the hop out of its PXN relay (0: none; a window's transfers
  // stay in their NVLink domain).
  size_t relayOf(const Msg& m, std::span<const DirLink> full) const {
    return relays_ && !m.transfer ? relayHop(t_, full) : 0;
  }

  // m has arrived: its last byte at `at`, its first at `first`.
  void deliver(const Msg& m, double at, double first) {
    if (!m.relayed && relayOf(m, routeOf(m)) > 0) {
      Msg leg = m;  // at the relay: its proxy sends the second leg once the first is in
      leg.relayed = 1, leg.leaving = 0, leg.egress = 0, leg.head = leg.tail = 0;
      leg.depart = at;
      leg.order = order_++;
      return heap_.push(leg);
    }
    if (m.transfer) {
      Arrival& a = ranks_[m.src].transfers.get(m.seq);
      a.at = at, a.first = first, a.done = true;
      finishAt(m.src, at);
      return wake(m.src);
    }
    // The receiver: m.dst itself, or in a quotient the replayed rank a multiple of the replayed
    // ranks away, which sees the sender shifted by as much.
    const int n = args_.nranks, k = static_cast<int>(ranks_.size());
    const int to = ((m.dst - first_) % k + k) % k, shift = m.dst - (first_ + to);
    Arrival& a = peer(to, ((first_ + m.src - shift) % n + n) % n).in.get(m.seq);
    a.at = at;
    a.first = first;
    a.done = true;
    finishAt(to, at);
    wake(to);
  }

  void transmit(const Msg& m) {
    if (m.drain) return drain(static_cast<DirLink>(m.src), m.head);
    if (m.egress) return queueAtEgress(m);
    if (!m.leaving && !m.relayed) ++messages_;
    const std::span<const DirLink> path = pathOf(m);
    const double bytes = static_cast<double>(m.bytes);
    double at, first;
    if (path.empty()) {  // two ranks on one node: a local copy
      first = m.depart + opt_.k.stepOverheadUs;
      at = first + bytes / ranks_[m.src].copyBpu;
      return deliver(m, at, first);
    }
    // A relayed leg pays the network's share of a step at the relay (its proxy); the source paid
    // the step itself before the first leg.
    const double ready = m.transfer  ? m.depart
                         : m.relayed ? m.depart + opt_.k.netStepOverheadUs
                                     : m.depart + links_.overhead(path);
    if (interleave_) return submit(m, path[0], ready);
    if (!leave(m, path, ready, bytes, &at, &first)) return;
    deliver(m, at, first);
  }

  // Source links that interleave their streams (SimOptions::linkOrder: the schedule's channels,
  // or every (source, destination) pair) and the ports of routes' last switches: FairQueues. A
  // stream's tag grows by one with each message (round robin: a schedule's messages are its
  // chunks, alike in size; by bytes, a block 4 bytes larger would reorder a direct schedule's rack
  // order); within a stream, posting order.
  struct SourceLink : FairQueue<Msg> {
    double keyLead = 0;              // ready - depart of its messages: a drain event's key is that much early
    std::vector<double> channelTag;  // LinkOrder::Channels: each channel's next start tag
  };
  SourceLink& sourceLink(DirLink d) {
    if (static_cast<size_t>(d) >= sourceLinks_.size()) sourceLinks_.resize(static_cast<size_t>(d) + 1);
    return sourceLinks_[d];
  }
  void submit(const Msg& m, DirLink d, double ready) {
    SourceLink& q = sourceLink(d);
    double* next = &peer(m.src, m.dst).fairTag;
    if (opt_.linkOrder == SimOptions::LinkOrder::Channels) {
      if (q.channelTag.size() <= m.channel) q.channelTag.resize(m.channel + 1, 0.0);
      next = &q.channelTag[m.channel];
    }
    const double tag = std::max(q.vtime, *next);
    *next = tag + 1;
    if (q.offer(links_, d, tag, m.order, ready, m)) return start(m, ready);
    q.keyLead = ready - m.depart;
    if (!q.scheduled) scheduleDrain(d, std::max(links_.freeAt(d), ready));
  }
  void scheduleDrain(DirLink d, double at) {
    SourceLink& q = sourceLinks_[d];
    Msg ev{at - q.keyLead, order_++, static_cast<int>(d), 0, 0};
    ev.drain = 1;
    ev.head = at;
    q.scheduled = true;
    heap_.push(ev);
  }
  // Link d is free at `now`: the waiting message with the smallest tag takes it.
  void drain(DirLink d, double now) {
    sourceLinks_[d].serveNext(
        links_, d, now,
        [&](const Msg& m, double at) {
          if (m.egress)
            leaveEgress(m, at);
          else
            start(m, at);
        },
        [&](double at) { scheduleDrain(d, at); });
  }
  size_t egressOf(std::span<const DirLink> path) const { return egressIndex(t_, path); }
  // m takes its first link at `at` (free then) and the rest of its route from there, up to the
  // last switch: that switch's port serves the senders whose messages wait for it round robin, a
  // message at a time, as a switch arbitrates among its input ports (a lossless fabric's small
  // buffers push the backlog back to the senders). Booked on arrival in one queue, a port into a
  // NIC that two children's partial sums flood kept the parent's results behind all of their
  // backlog (the tree across racks: 155 us at 64 MiB, docs/PLANNER.md).
  void start(const Msg& m, double at) {
    const std::span<const DirLink> path = pathOf(m);
    const double bytes = static_cast<double>(m.bytes);
    Links::Cursor c;
    links_.sendFirst(path, at, bytes, &c);
    if (const size_t e = egressOf(path); e > 0) {
      links_.advance(path.first(e), bytes, &c);
      Msg x = m;
      x.egress = 1;
      x.head = c.head;
      x.tail = c.tail;
      x.depart = c.head;
      heap_.push(x);
      return;
    }
    double first;
    const double arrived = links_.sendRest(path, bytes, c, &first);
    deliver(m, arrived, first);
  }

  // m's head is at its last switch's port (Msg::egress): it takes the port now if the port is
  // free and nobody waits, else it queues with a tag from its sender's round-robin turn.
  void queueAtEgress(const Msg& m) {
    const std::span<const DirLink> path = pathOf(m);
    const DirLink d = path[egressOf(path)];
    SourceLink& q = sourceLink(d);
    if (q.offer(links_, d, q.tagFor(m.src), m.order, m.head, m)) return leaveEgress(m, m.head);
    q.keyLead = 0;
    if (!q.scheduled) scheduleDrain(d, std::max(links_.freeAt(d), m.head));
  }
  // m takes its last switch's port at `at`, and the rest of its route from there.
  void leaveEgress(const Msg& m, double at) {
    const std::span<const DirLink> path = pathOf(m);
    const size_t e = egressOf(path);
    Links::Cursor c{at, m.tail, links_.latency(path[e - 1]), e};
    double first;
    const double arrived = links_.sendRest(path, static_cast<double>(m.bytes), c, &first);
    deliver(m, arrived, first);
  }

  const Topology& t_;
  Router router_;
  CollArgs args_;
  uint64_t esize_;
  SimOptions opt_;
  std::vector<RankState> ranks_;
  RoutePool routes_;
  std::vector<DirLink> routeScratch_;
  std::vector<std::vector<DirLink>> altScratch_;
  std::vector<int> nodes_;
  std::map<std::array<uint64_t, 3>, Rendezvous> rendezvous_;  // (stride, group, k)
  std::unordered_map<uint64_t, AggGroup> groups_;
  std::priority_queue<Msg, std::vector<Msg>, std::greater<>> heap_;
  std::vector<int> work_;
  Links links_;
  SpineGroups spines_{links_};           // equal-cost hops' servers (spread)
  std::vector<SourceLink> sourceLinks_;  // by directed link, as used
  bool relays_ = false;                  // some route has a PXN relay (Router::relays)
  bool interleave_ = false;              // source links queue through submit (SimOptions::linkOrder)
  int channels_ = 1;                     // AlgoInfo::channels
  uint64_t order_ = 0, steps_ = 0, messages_ = 0;
  int window_ = 32;
  int first_ = 0;  // the real rank of replayed rank 0 (SimOptions::replayFirst)
  bool quotient() const { return static_cast<int>(ranks_.size()) != args_.nranks; }
  std::vector<uint64_t> ran_;
  std::string bad_;
  std::vector<double> rankEnd_;  // per replayed rank: when its last step or message ended
  void finishAt(int r, double t) { rankEnd_[r] = std::max(rankEnd_[r], t); }
};

}  // namespace

namespace replay {

Status rankNodes(const Topology& t, int nranks, const std::vector<int>& given, std::vector<int>* out) {
  if (!given.empty()) {
    if (static_cast<int>(given.size()) < nranks)
      return errorf(tribInvalidArgument, "rank-to-node mapping has %zu entries for %d ranks", given.size(),
                    nranks);
    for (int r = 0; r < nranks; ++r)
      if (given[r] < 0 || given[r] >= t.numNodes())
        return errorf(tribInvalidArgument, "rank %d maps to node %d, not in the topology", r, given[r]);
    out->assign(given.begin(), given.begin() + nranks);
    return Status::Ok();
  }
  if (static_cast<int>(t.rankNodes().size()) < nranks)
    return errorf(tribInvalidArgument, "topology '%s' has %zu GPUs/CPUs for ranks but %d ranks were asked",
                  t.name.c_str(), t.rankNodes().size(), nranks);
  out->assign(t.rankNodes().begin(), t.rankNodes().begin() + nranks);
  return Status::Ok();
}

// nccl-tests S for the request.
double sizeOf(const CollArgs& a, size_t esize) {
  double c = static_cast<double>(a.count) * esize;
  switch (a.coll) {
    case Coll::AllGather:
    case Coll::ReduceScatter:
    case Coll::AlltoAll:
      return c * a.nranks;
    default:
      return c;
  }
}

void finish(const CollArgs& args, size_t esize, SimResult* out, std::chrono::steady_clock::time_point t0) {
  double S = sizeOf(args, esize);
  out->algbwGBps = out->timeUs > 0 ? S / out->timeUs / kB : 0;
  out->busbwGBps = out->algbwGBps * busBandwidthFactor(args.coll, args.nranks);
  out->wallSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace replay

namespace {

// What a replay holds at its peak, estimated before it runs from a few ranks' schedules (all of
// them would cost as much as the replay): per rank its state and a window of blocked steps; per
// rank and peer it exchanges with, the peer entry, the route, a message in flight and its slot (a
// direct schedule posts all its sends at once: nvl72-cluster:16 measured 190 bytes per pair).
struct ReplayEstimate {
  double bytes = 0, pairs = 0, steps = 0;
};
ReplayEstimate estimateReplay(const AlgoInfo& algo, const CollArgs& args, int window) {
  const int n = args.nranks;
  const int root = args.root >= 0 && args.root < n ? args.root : 0;
  // The root (a rooted collective's may talk to everybody), then up to 8 others evenly spread.
  std::vector<int> sample{root};
  const int others = std::min(8, n - 1);
  for (int i = 0; i < others; ++i)
    sample.push_back((root + 1 + static_cast<int>(int64_t{i} * (n - 1) / others)) % n);
  double peers[2] = {0, 0}, steps[2] = {0, 0};
  std::vector<int> seen;
  for (size_t i = 0; i < sample.size(); ++i) {
    const int r = sample[i];
    seen.clear();
    Generator<Step> g = algo.generate(args, r);
    while (g.next()) {
      const Step& s = g.value();
      steps[i > 0] += 1;
      if ((s.isComm() || s.isPeerMemory() || s.isSync()) && s.peer != r) seen.push_back(s.peer);
    }
    std::sort(seen.begin(), seen.end());
    peers[i > 0] += static_cast<double>(std::unique(seen.begin(), seen.end()) - seen.begin());
  }
  ReplayEstimate e;
  const double rest = others ? (n - 1.0) / others : 0;
  e.pairs = peers[0] + rest * peers[1];
  e.steps = steps[0] + rest * steps[1];
  // The schedule's coroutine and queues; and its time maps at their cap (each a vector grown by
  // doubling to at most 256 segments: TimeMap::kMaxSegs), which the 131,040-rank tree fills (it
  // reached 6.4 GiB of address space where this counted 4 KiB a rank for all of it: 4.9 GiB).
  const double kPerRank = 2048 + kNumBufs * TimeMap::kCapBytes;
  const double perPair =
      sizeof(RankState::Peer) + sizeof(Msg) + sizeof(Arrival) + 8 * sizeof(DirLink) + 2 * sizeof(void*);
  // A rank's blocked steps: a vector grown by doubling but capped at the window, so at most the
  // window's places (Engine::progress), each a packed step and its state (80 bytes).
  const double blocked = static_cast<double>(std::max(1, window));
  // Messages in flight, in the event heap (a vector grown by doubling): as many as a place of the
  // window each, a rough bound, not a strict one (nvl72-cluster:256's tree grew from 0.92 to 1.11
  // GiB of address space after its windows had filled, past an estimate without them).
  const double inFlight = blocked * sizeof(Msg);
  e.bytes = n * (sizeof(RankState) + kPerRank + blocked * sizeof(Pending) + inFlight) + e.pairs * perPair;
  return e;
}

// The memory a replay may use: SimOptions::memoryLimitBytes, else the address-space limit
// (ulimit -v) or the machine's memory, whichever is less.
double replayMemoryLimit(const SimOptions& o) {
  if (o.memoryLimitBytes > 0) return o.memoryLimitBytes;
  double limit = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
  rlimit as{};
  if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY)
    limit = std::min(limit, static_cast<double>(as.rlim_cur));
  return limit > 0 ? limit : 0;
}

}  // namespace

Status simulate(const Topology& t, const AlgoInfo& algo, const CollArgs& args, DataType dtype, SimResult* out,
                const std::vector<int>& rankToNode, const SimOptions& opt) {
  auto t0 = std::chrono::steady_clock::now();
  size_t esize = dataTypeSize(dtype);
  if (esize == 0)
    return errorf(tribInvalidArgument, "simulate: invalid datatype %d", static_cast<int>(dtype));
  if (args.nranks < 1) return errorf(tribInvalidArgument, "simulate: nranks %d < 1", args.nranks);
  if (!algo.supports(args))
    return errorf(tribInvalidArgument,
                  "simulate: %s %s does not support this request (nranks %d, chunk %llu)",
                  algoName(algo.algo), collName(args.coll), args.nranks,
                  static_cast<unsigned long long>(args.chunkElems));
  if (channelsOf(algo, args) < 1 || channelsOf(algo, args) > kMaxSimChannels)
    return errorf(tribInvalidArgument, "simulate: %s %s has %d channels (1 to %d replayed)",
                  algoName(algo.algo), collName(args.coll), channelsOf(algo, args), kMaxSimChannels);
  std::vector<int> nodes;
  TRIB_RETURN_IF_ERROR(rankNodes(t, args.nranks, rankToNode, &nodes));
  *out = SimResult{};
  SimOptions o = opt;
  const int replayed = o.replayRanks > 0 ? o.replayRanks : args.nranks;
  if (o.replayRanks > 0 &&
      (args.nranks % o.replayRanks != 0 || o.replayFirst < 0 || o.replayFirst + o.replayRanks > args.nranks))
    return errorf(tribInvalidArgument, "simulate: replaying ranks [%d, %d) of %d: the count must divide %d",
                  o.replayFirst, o.replayFirst + o.replayRanks, args.nranks, args.nranks);
  if (o.window <= 0 && algo.algo == Algo::Tree) {
    // The executor runs every step whose data is ready within 512 steps of its first unfinished
    // one (executor.cpp kWindow), which holds what follows up to 2^20 ranks (12 x 42 = 504); the
    // simulator's window bounds its own work. A tree slice is 12 steps per rank (3 up and 3 down in
    // each tree) and is back from the root 2 x depth hops later, so for slices to pipeline the
    // window must hold 12 x (2 x depth + 2) steps; the default (8 at 4,608 ranks) serialised the
    // slices and made the tree 7-14x its closed form at 64 racks.
    int depth = 0;
    while ((1 << depth) < args.nranks) ++depth;
    o.window = std::max(defaultWindow(args.nranks), 12 * (2 * depth + 2));
  }
  // Refuse up front what cannot fit rather than grow until the machine kills the process.
  ReplayEstimate est = estimateReplay(algo, args, o.window > 0 ? o.window : defaultWindow(args.nranks));
  est.bytes *= static_cast<double>(replayed) / args.nranks;
  const double limit = replayMemoryLimit(o);
  if (limit > 0 && est.bytes > limit)
    return errorf(tribNotSupported,
                  "simulate: %s %s on %d ranks would need about %.1f GiB (%.3g rank pairs that exchange, "
                  "%.3g steps), more than the %.1f GiB allowed (SimOptions::memoryLimitBytes, else ulimit -v "
                  "or the machine's memory)",
                  algoName(algo.algo), collName(args.coll), args.nranks, est.bytes / (1 << 30), est.pairs,
                  est.steps, limit / (1 << 30));
  Engine e(t, args, esize, nodes, o);
  TRIB_RETURN_IF_ERROR(e.run(algo, out));
  if (o.replayRanks > 0) out->replayedRanks = replayed;
  finish(args, esize, out, t0);
  return Status::Ok();
}

}  // namespace trib
