// The schedule: Tributary's one representation of a collective algorithm.
//
// An algorithm does not communicate; it emits, for each rank, an ordered list of steps over
// regions of that rank's buffers. Three consumers run the same steps: the executor (real
// transports), the verifier (symbolic contributions) and the simulator (modelled network).
//
// Semantics (what the verifier checks and the executor preserves): each rank performs its
// steps one after another; a Send is eager (its data is captured when the step runs, and the
// sender never waits for the receiver); a Recv/RecvReduce takes the oldest unmatched message
// from that peer. Messages between a pair of ranks are matched in order. The executor runs
// steps concurrently when their memory regions do not conflict, which gives pipelining for
// free: slice k of round r+1 starts as soon as slice k of round r has arrived. So program order
// is only data order: a step waits for an earlier one only if it reads what that one writes, or
// writes what it reads or writes. A schedule that must order steps without data between them (a
// barrier's signals) makes the order data; the verifier proves every rank's exit causally follows
// the entry of every rank its result depends on (verify/causal.hpp).
//
// SwitchReduce is the one collective step (in-network reduction, docs/SWITCH.md): every rank of
// the communicator executes it, in the same order relative to its other SwitchReduce steps. It
// runs the schedule's collective (CollArgs::coll, root) over m elements per rank, the same m on
// every rank (switchStepCount), with these region sizes (S = src.count, D = dst.count, n ranks):
//   allreduce      S = D = m; dst = the reduction of all ranks' src
//   reduce         S = m, D = m on the root (the reduction), 0 elsewhere
//   broadcast      S = m on the root, 0 elsewhere; D = 0 on the root, m elsewhere (root's src)
//   allgather      S = m, D = n*m; dst block r = rank r's src
//   reducescatter  S = n*m, D = m; dst = block `rank` of the reduction
//   barrier        S = D = 0
// It is a rendezvous: it completes only once every rank has supplied its src. The executor
// hands it to the communicator's aggregation switch client.
// A SwitchReduce with a stride (peer = d >= 2) is an all-reduce over a slice group instead: the
// ranks whose rank is congruent to this one's modulo d (hier_switch: one member per domain, local
// index rank % d); the communicator registers those groups at its switch (core/switch_coll.cpp).
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "common/generator.hpp"

namespace trib {

enum class Coll : uint8_t {
  AllReduce,
  Reduce,
  Broadcast,
  AllGather,
  ReduceScatter,
  AlltoAll,
  Gather,
  Scatter,
  Barrier
};
constexpr int kNumColls = 9;
const char* collName(Coll c);  // "allreduce", ...
bool parseColl(const std::string& s, Coll* out);

// Which buffer a region lives in. Input = the user's sendbuff, Output = recvbuff,
// Scratch = library-owned temporary of scratchCount() elements, Window = a rank's peer-visible
// window of CollArgs::windowElems elements (see peer-memory steps below).
enum class Buf : uint8_t { Input, Output, Scratch, Window };
constexpr int kNumBufs = 4;

struct Region {
  Buf buf = Buf::Input;
  uint64_t offset = 0;  // elements
  uint64_t count = 0;   // elements
};

enum class StepKind : uint8_t {
  Send,          // peer <- src
  Recv,          // dst <- message from peer (its length must equal dst.count)
  RecvReduce,    // dst <- src (local) op message from peer
  Copy,          // dst <- src (local)
  Reduce,        // dst <- dst op src (local)
  SwitchReduce,  // the collective over every rank, in-network (see above). peer: -1, or a stride
  // Peer-memory steps (one-sided: the peer runs nothing for them).
  Put,        // peer's window at dst <- src (local)
  Get,        // dst (local) <- peer's window at src
  GetReduce,  // dst (local) <- dst op peer's window at src
  Signal,     // tell peer that this rank's earlier window work is done
  Wait,       // until peer's next Signal to this rank has arrived
  Expose,     // own window at dst <- src (local), or dst becomes an alias of src (see below)
};
const char* stepKindName(StepKind k);

// Peer-memory semantics. Every rank has one window (Buf::Window regions: in Copy/Reduce the
// rank's own, in Put/Get/GetReduce the peer's). Window steps are ordered by signals, not by data:
//  - Signal(p) runs after every earlier step of the rank that touches its own window or p's
//    (a release: what it wrote there, and what it read from p's window, is done);
//  - no later step that touches the rank's own window or p's starts before Wait(p) (an acquire);
//  - the k-th Signal from q to p matches p's k-th Wait(q), counted over the communicator's life
//    (windows and their signals outlive a call; a call starts with its peers' windows free).
// A window is reused by the next call: schedules alternate between its two halves, chunk k of a
// call using cell (windowCell + k) % 2 (CollArgs), so that a rank rewrites a cell only after every
// peer has signalled a later cell, which it did only after its last read of this one.
// The verifier reports a read of a peer's window that does not causally follow the write it must
// see, and a write that does not follow every earlier read of that cell (verify/verify.hpp).
// Expose(src -> own window dst) means a copy to every consumer, but an executor whose windows can
// map src for the peers may publish "dst is src" instead and skip the copy; peers' reads of that
// range then read src itself. So a schedule must be correct both ways: under the alias, a write of
// src (by a later step, or by the caller once the call returned) is a write of dst and must follow
// every peer's read of it; the rank does not read its own exposed range (it reads src); a peer reads
// an exposed range whole or not at all, and puts nothing into it. The verifier proves both.
struct Step {
  StepKind kind = StepKind::Copy;
  // Send/Recv/RecvReduce: the independent stream the message belongs to (NCCL's channel: the
  // double tree's two trees are two). A rank's messages on one channel leave its link in the order
  // posted; different channels share the link side by side (the simulator's source queue,
  // docs/PLANNER.md "Simulator"). Executors may ignore it: it orders nothing between steps.
  uint8_t channel = 0;
  int32_t peer = -1;  // Send/Recv/RecvReduce, Put/Get/GetReduce (the window's owner), Signal/Wait
  Region src;  // Send, RecvReduce (local operand), Copy, Reduce, Put, Get/GetReduce (peer window), Expose
  Region dst;  // Recv, RecvReduce, Copy, Reduce, Put (peer window), Get, GetReduce, Expose (own window)

  static Step send(int peer, Region src) { return {StepKind::Send, 0, peer, src, {}}; }
  static Step recv(int peer, Region dst) { return {StepKind::Recv, 0, peer, {}, dst}; }
  static Step recvReduce(int peer, Region local, Region dst) {
    return {StepKind::RecvReduce, 0, peer, local, dst};
  }
  static Step copy(Region src, Region dst) { return {StepKind::Copy, 0, -1, src, dst}; }
  static Step reduce(Region src, Region dst) { return {StepKind::Reduce, 0, -1, src, dst}; }
  static Step switchReduce(Region local, Region dst, int stride = -1) {
    return {StepKind::SwitchReduce, 0, stride >= 2 ? stride : -1, local, dst};
  }
  static Step put(int peer, Region local, Region window) { return {StepKind::Put, 0, peer, local, window}; }
  static Step get(int peer, Region window, Region local) { return {StepKind::Get, 0, peer, window, local}; }
  static Step getReduce(int peer, Region window, Region local) {
    return {StepKind::GetReduce, 0, peer, window, local};
  }
  static Step signal(int peer) { return {StepKind::Signal, 0, peer, {}, {}}; }
  static Step wait(int peer) { return {StepKind::Wait, 0, peer, {}, {}}; }
  static Step expose(Region local, Region window) { return {StepKind::Expose, 0, -1, local, window}; }
  Step onChannel(int c) const {
    Step s = *this;
    s.channel = static_cast<uint8_t>(c);
    return s;
  }
  bool isComm() const {
    return kind == StepKind::Send || kind == StepKind::Recv || kind == StepKind::RecvReduce;
  }
  // Put/Get/GetReduce: one region is the peer's window (dst for Put, src for the others).
  bool isPeerMemory() const {
    return kind == StepKind::Put || kind == StepKind::Get || kind == StepKind::GetReduce;
  }
  bool isSync() const { return kind == StepKind::Signal || kind == StepKind::Wait; }
  bool readsSrc() const { return kind != StepKind::Recv && !isSync(); }
  // Regions this step reads (up to 2) and writes (up to 1). Reduce and GetReduce read dst too.
  bool readsDst() const { return kind == StepKind::Reduce || kind == StepKind::GetReduce; }
  bool writesDst() const { return kind != StepKind::Send && !isSync(); }
  // Whether region src/dst is in the peer's memory (else it is this rank's).
  bool srcIsPeers() const { return kind == StepKind::Get || kind == StepKind::GetReduce; }
  bool dstIsPeers() const { return kind == StepKind::Put; }
  // Whether the step touches this rank's own window or peer p's (the Signal/Wait ordering rule).
  bool touchesOwnWindow() const {
    return (readsSrc() && !srcIsPeers() && src.buf == Buf::Window) ||
           (writesDst() && !dstIsPeers() && dst.buf == Buf::Window);
  }
  bool touchesWindowOf(int p) const { return isPeerMemory() && peer == p; }
};
std::string describeStep(const Step& s);  // "recv_reduce(peer 3, in[0+128] -> out[0+128])"

// The request a schedule implements. `count` follows NCCL: AllReduce/Reduce/Broadcast count
// elements; AllGather sendcount (output nranks*count); ReduceScatter recvcount (input
// nranks*count); AlltoAll, Gather, Scatter count per peer; Barrier 0, and its input is one element:
// the rank's arrival token, which the library supplies (a host barrier forwards tokens, so that
// each signal depends, through memory, on the signals the rank received before it).
struct CollArgs {
  Coll coll = Coll::AllReduce;
  int nranks = 1;
  int root = 0;
  uint64_t count = 0;
  bool inPlace = false;
  uint64_t chunkElems = 1 << 16;  // pipeline slice in elements (>= 1); the planner picks it
  // Hierarchical: ranks per domain; domains are contiguous rank ranges (the planner sets it from the
  // topology). Direct: the order it meets its peers in (direct.cpp). Ring all-reduce: one ring per
  // rank of a domain (rails, ring.cpp). 0 = flat; every other algorithm ignores it.
  int ranksPerDomain = 0;
  // Peer-memory schedules (one-shot, two-shot): each rank's window in elements (two cells of
  // windowElems / 2), and the cell this call's first chunk uses (0 or 1; the communicator
  // alternates it, see Step). 0: no windows; those algorithms do not support the request.
  uint64_t windowElems = 0;
  int windowCell = 0;
};
// The cell size of a peer-memory schedule, in elements, and where cell c begins in the window.
inline uint64_t windowCellElems(const CollArgs& a) { return a.windowElems / 2; }
inline uint64_t windowCellBegin(const CollArgs& a, uint64_t c) { return (c % 2) * windowCellElems(a); }

// The per-rank element count m of a SwitchReduce step of collective `c` on `rank` (see above).
uint64_t switchStepCount(Coll c, int root, int rank, const Step& s);

// nccl-tests' bus bandwidth factor: busbw = algbw x factor (2(n-1)/n for all-reduce, (n-1)/n for
// all-gather, reduce-scatter and all-to-all, 1 otherwise).
double busBandwidthFactor(Coll c, int nranks);

uint64_t inputCount(const CollArgs& a, int rank);
uint64_t outputCount(const CollArgs& a, int rank);
// For in-place calls: offset (elements) of Input relative to Output, e.g. +rank*count for
// AllGather, -rank*count for ReduceScatter (Output lies inside Input). Meaningful only on ranks
// where both buffers are used.
int64_t inPlaceInputOffset(const CollArgs& a, int rank);
bool supportsInPlace(Coll c);

// Balanced partition of `count` elements into `parts` blocks: block i = [begin, begin+size).
inline uint64_t blockBegin(uint64_t count, uint64_t parts, uint64_t i) {
  return (count / parts) * i + (i < count % parts ? i : count % parts);
}
inline uint64_t blockSize(uint64_t count, uint64_t parts, uint64_t i) {
  return count / parts + (i < count % parts ? 1 : 0);
}

// ---- Algorithm registry --------------------------------------------------------------------
enum class Algo : uint8_t {
  Ring,
  Tree,
  Rhd,
  Direct,
  Binomial,
  Chain,
  Hierarchical,
  Switch,
  OneShot,
  HierSwitch,
  TwoShot,
  AllgatherReduce
};
constexpr int kNumAlgos = 12;
// Schedules whose SwitchReduce steps run on a collective offload the communicator must have (the
// aggregation switch), and schedules of peer-memory steps, which need every rank's window mapped
// (a transport's PeerWindows: the shm transport's, one host).
inline bool needsOffload(Algo a) { return a == Algo::Switch || a == Algo::HierSwitch; }
inline bool needsWindows(Algo a) { return a == Algo::OneShot || a == Algo::TwoShot; }
// One-shot exposes its input out of place (Expose above), which costs one more signal exchange at
// the end of the call, from this many elements: below, the copy that exposing can save (2 ranks,
// shm: ~1 us at 16 KiB) is worth less than the exchange (~0.3 us, an 8-byte call's whole time).
// A size rule, so every rank's schedule has the same signals whatever its buffers.
constexpr uint64_t kOneShotExposeFromElems = 16384;
inline bool oneShotExposes(const CollArgs& a) { return a.count >= kOneShotExposeFromElems; }
// Window cells a peer-memory schedule's call uses, one per chunk (0 for other algorithms): the
// communicator advances CollArgs::windowCell by this many after the call.
uint64_t windowChunks(Algo a, const CollArgs& args);
// The collectives an aggregation switch runs (the others stay on host algorithms).
inline bool switchCollective(Coll c) {
  return c == Coll::AllReduce || c == Coll::Reduce || c == Coll::Broadcast || c == Coll::AllGather ||
         c == Coll::ReduceScatter || c == Coll::Barrier;
}
const char* algoName(Algo a);  // "ring", "tree", "rhd", "direct", "binomial", "chain", ...
// What a communicator needs before `a` can run (its offload, or the ranks' layout), as a phrase
// for tools and messages ("an attached aggregation switch: ..."); nullptr: nothing, it always runs.
const char* algoNeeds(Algo a);
bool parseAlgo(const std::string& s, Algo* out);

struct AlgoInfo {
  Algo algo;
  Coll coll;
  // False if this algorithm cannot run the request (e.g. a rank count it does not handle).
  bool (*supports)(const CollArgs& args);
  // Elements of scratch the rank needs.
  uint64_t (*scratchCount)(const CollArgs& args, int rank);
  // The rank's steps, lazily.
  Generator<Step> (*generate)(CollArgs args, int rank);
  // How many channels (Step::channel, 0 to channels - 1) its messages use: independent streams
  // that share a rank's links side by side; 1: every message of a rank in one stream, in order.
  int channels = 1;
  // Where the channels depend on the request (the ring: one per rank of a domain when
  // ranksPerDomain makes >= 2 domains, ring.cpp), the count for `args`; nullptr: `channels`.
  int (*channelsFor)(const CollArgs& args) = nullptr;
  // Most ranks the executor runs it on (0: any). Above it the schedule is still verified,
  // priced and simulated, but the planner marks it model only: its sends could wait on receives
  // beyond the receiver's executor window (docs/DESIGN.md "Executor").
  int maxRunRanks = 0;
};

// How far past a rank's first unfinished step the executor starts steps (its scoreboard's window):
// enough to keep every slice of a pipelined round in flight, small enough that a scan stays cheap.
// Schedules whose sends may wait on receives far down a peer's list are bounded by it (maxRunRanks),
// and the cost model prices the overlap it allows.
inline constexpr size_t kExecutorWindowSteps = 512;

// hier_switch hands the switch its block in this many pieces at most, of whole ring slices and at
// least kHierSwitchPieceElems elements each: the domain all-gather starts once the first is back,
// and a switch's cost per operation is paid a few times, not once per slice (trib-switchd over TCP
// loopback: eight 64 KiB pieces of a 512 KiB block took 1.5x one whole block, docs/SWITCH.md).
inline constexpr uint64_t kHierSwitchPieces = 8;
inline constexpr uint64_t kHierSwitchPieceElems = 1 << 16;  // the software switch's default slot of floats
// How many pieces hier_switch cuts a block of `elems` in ring slices of `slices`.
inline uint64_t hierSwitchPieces(uint64_t elems, uint64_t slices) {
  return std::max<uint64_t>(1,
                            std::min<uint64_t>({elems / kHierSwitchPieceElems, kHierSwitchPieces, slices}));
}

// Whether the executor runs `algo` on `args`: it supports them, within its rank bound.
inline bool executorRuns(const AlgoInfo& algo, const CollArgs& args) {
  return algo.supports(args) && (algo.maxRunRanks == 0 || args.nranks <= algo.maxRunRanks);
}

// Most channels of the ring all-reduce as rails (ring.cpp: one per rank of a domain). Larger domains
// (72-GPU racks) keep the one ring: the replay of 72 channels costs 15-40 s a cell, loses the ring's
// rack quotient and is 1.12-1.21x the model (docs/PLANNER.md, "Rails"); NCCL's MAXCHANNELS is 32 in
// the releases read.
constexpr int kMaxRailChannels = 32;

// How many channels `algo`'s schedule for `args` uses (AlgoInfo::channels, channelsFor).
inline int channelsOf(const AlgoInfo& algo, const CollArgs& args) {
  return algo.channelsFor ? algo.channelsFor(args) : algo.channels;
}

// All algorithms for a collective, in preference order for the default choice.
std::vector<const AlgoInfo*> algorithmsFor(Coll c);
const AlgoInfo* findAlgorithm(Coll c, Algo a);  // nullptr if none

// A rank's steps, materialised (the executor's input).
std::vector<Step> materialize(const AlgoInfo& algo, const CollArgs& args, int rank);

}  // namespace trib
