// The formulas the algorithms' prices share (cost_formulas.hpp): chunk sizes, ring rounds in
// chunks, a two-level schedule's levels and pipeline slices, the rail ring. Derivations:
// docs/PLANNER.md "Cost model".
#include "plan/cost_formulas.hpp"

#include <algorithm>
#include <cmath>

namespace trib::cost {

uint64_t clampChunk(double c, const CostConstants& k) {
  c = std::max<double>(k.minChunkBytes, std::min<double>(k.maxChunkBytes, c));
  return static_cast<uint64_t>(std::ceil(c));
}

// Pipelined chunk that balances fill (depth x chunk / bw) against per-chunk overhead.
uint64_t pipelineChunk(double S, double bwBpu, int depth, const CostConstants& k) {
  return clampChunk(std::sqrt(S * k.chunkOverheadUs * bwBpu / std::max(1, depth)), k);
}

double pipelineCost(double S, double c, double bwBpu, int depth, const CostConstants& k) {
  c = std::max(1.0, std::min(c, S));  // a message smaller than a chunk fills the pipe with itself
  return depth * c / bwBpu + std::ceil(S / c) * k.chunkOverheadUs;
}

int ceilLog2(int n) {
  int l = 0;
  while ((1 << l) < n) ++l;
  return l;
}

// Ring rounds in which every rank passes a block of v bytes to its neighbour, cut into chunks of c
// that pipeline (the hierarchical schedules slice every round; a chunk goes on once the same chunk
// of the previous round has arrived): `reduceRounds` at bReduce, then `copyRounds` at bCopy.
// Either the link paces them (every round's bytes back to back, one hop's latency at the end) or
// one chunk's chain of hops does (a latency and a chunk-time per round, the block's other chunks
// one chunk-time behind). One chunk per block: rounds x (a + v/b).
double pipelinedRing(int reduceRounds, int copyRounds, double v, double c, double a, double bReduce,
                     double bCopy) {
  if (reduceRounds + copyRounds <= 0 || v <= 0) return 0;
  c = std::clamp(c, 1.0, v);
  const double link = reduceRounds * v / bReduce + copyRounds * v / bCopy + a;
  const double chain = reduceRounds * (a + c / bReduce) + copyRounds * (a + c / bCopy) +
                       (std::ceil(v / c) - 1) * c / std::min(bReduce, bCopy);
  return std::max(link, chain);
}

// The flat ring (ring.cpp without rails): n-1 rounds reducing a block of v into the next rank,
// n-1 copying it on, or both, each block sent in slices of `chunk` that pipeline as the
// hierarchical levels' rings do (pipelinedRing): either the busiest link paces the rounds (their
// bytes back to back, one hop's latency at the end) or one slice's chain of hops does (a latency
// and a slice-time per hop, the block's other slices one slice-time behind at the slowest hop's
// rate). Across domains the chain crosses the network on m of every n hops. One slice a block:
// rounds x (a + v/b). A block of several slices hides all but one hop's latency behind its bytes
// (one GB200 rack at 256 MiB on 36 GPUs, two slices a block: the latencies in series priced it
// 1.34x its replay).
double flatRing(const Ctx& c, double v, double chunk, bool reduce, bool copy) {
  const int n = c.f.n, reduceRounds = reduce ? n - 1 : 0, copyRounds = copy ? n - 1 : 0;
  const double bInR = std::min(c.bIn, c.R);
  if (!c.multi) return pipelinedRing(reduceRounds, copyRounds, v, chunk, c.aIn, bInR, c.bIn);
  if (n < 2 || v <= 0) return 0;
  const double bOutR = std::min(c.bOut, c.R), cb = std::clamp(chunk, 1.0, v);
  const double across = static_cast<double>(c.f.domains) / n;
  const bool inside = c.f.perDomain > 1;
  auto hop = [&](double bIn, double bOut) {
    return (1 - across) * (inside ? c.aIn + cb / bIn : 0) + across * (c.aOut + cb / bOut);
  };
  // The block's other slices follow at the slowest hop's rate (a reducing one where any reduces).
  const double slowest =
      reduce ? (inside ? std::min(bInR, bOutR) : bOutR) : (inside ? std::min(c.bIn, c.bOut) : c.bOut);
  const double chain = reduceRounds * hop(bInR, bOutR) + copyRounds * hop(c.bIn, c.bOut) +
                       (std::ceil(v / cb) - 1) * cb / slowest;
  const double link = reduceRounds * v / bOutR + copyRounds * v / c.bOut + c.aOut;
  return std::max(chain, link);
}

// The domain all-gather of a two-level schedule (hierarchical, hier_switch) overlapped with the
// level across domains, which takes `across` in all, returns its first final piece after
// `firstFinal` and its last of c0 bytes at its end: the all-gather, on the NVLink that level does
// not use, starts on the first piece and ends after the last one's d-1 hops, or after its own
// pipelined time from the first, whichever is later. The executor starts steps at most a window past its
// first unfinished one: while the level across has `acrossSteps` steps pending, only the all-gather's rounds
// that fit in the rest of the window overlap it; the others run after it (and the last chunk's hops with
// them).
double domainAllGatherAfter(const Ctx& c, int d, double v, double cb, double c0, double across,
                            double firstFinal, double acrossSteps) {
  const double ag = pipelinedRing(0, d - 1, v, cb, c.aIn, c.bIn, c.bIn);
  const double lastChunkAg = pipelinedRing(0, d - 1, c0, cb, c.aIn, c.bIn, c.bIn);
  const double agSteps = 2.0 * (d - 1) * std::ceil(v / std::min(cb, v));
  const double seen = std::clamp((c.k.executorWindowSteps - acrossSteps) / agSteps, 0.0, 1.0);
  return std::max(across + std::max(lastChunkAg, (1 - seen) * ag), firstFinal + ag);
}

// A two-level schedule in pipeline slices (hierarchical, hier_switch: docs/PLANNER.md
// "hierarchical: pipeline slices"), each slice d blocks of w through the levels before the next,
// `rs` one slice's reduce-scatter: the busier of the NVLink port and the level across paces them.
// The port (every slice's reduce-scatter and all-gather) is busy from the start and idle at the
// end while the last slice crosses (`acrossOne`) and its last chunk (c0) goes round the domain.
// The level across (`acrossSlice` of work a slice) waits at the start: every slice in the window
// offers its first round at once and the port serves sends in the order they are ready, so the
// first slice's reduce-scatter ends with the window's others; after its last chunk, its latency
// and that chunk's round. `fedWork`: the window's slices' work on the busier link.
SliceBounds pipelineSlices(const Ctx& c, int d, double w, double cb, double c0, double slices,
                           double sliceSteps, double rs, double acrossOne, double acrossSlice,
                           double acrossLat) {
  const double reduceIn = std::min(c.bIn, c.R);
  const double inWindow = std::clamp(c.k.executorWindowSteps / sliceSteps, 1.0, slices);
  const double nvlinkSlice = (d - 1) * w * (1 / reduceIn + 1 / c.bIn), rsPort = (d - 1) * w / reduceIn;
  const double lastChunkAg = pipelinedRing(0, d - 1, c0, cb, c.aIn, c.bIn, c.bIn);
  const double byNvlink = slices * nvlinkSlice + acrossOne + lastChunkAg;
  const double byAcross = std::max(rs, inWindow * rsPort) + slices * acrossSlice + acrossLat + lastChunkAg;
  return {std::max(byNvlink, byAcross), inWindow * std::max(nvlinkSlice, acrossSlice)};
}

// The rail ring all-reduce (ring.cpp with ranksPerDomain = d making m >= 2 domains): d channels,
// each a ring of all n ranks over S/d that enters every domain at a different local rank, so per
// round (every rank passes one block of v = S/(dn) on each channel) a rank's NVLink port carries
// d-1 blocks and its NIC (the loaded share: every rank of a host sends at once) one. The rounds
// pipeline chunk by chunk (pipelinedRing's two bounds): either the busier link paces them (2(n-1)
// rounds of its share back to back, one network hop's latency at the end), or one chunk's chain
// does: 2(n-1) hops, m/n of them across domains (a network latency and the chunk on the NIC), the
// others inside (a latency and the chunk on NVLink), then the block's other chunks one
// busiest-link chunk-time each. The chain's chunk meets the port's other channels only in the
// link bound: in a round a rank's channels arrive at different times (each channel crosses at a
// different rank), so on the chain a chunk finds the port mostly free (dgx-a100:2 16 MiB, one
// chunk a block: with d-1 chunks a hop the model was 1.35x the replay).
double railRing(const Ctx& c, int d, double v, double chunk) {
  const int n = c.f.n;
  if (n < 2 || v <= 0) return 0;
  const double cb = std::clamp(chunk, 1.0, v);
  const double bInR = std::min(c.bIn, c.R), bOutR = std::min(c.bLoaded, c.R);
  // Through PXN relays the step between domains also crosses the entering rank's NVLink port (one
  // more block a round there) and lands whole in the relay before its NIC sends it.
  const int relayed = c.f.ringInterRelayed ? 1 : 0;
  auto share = [&](double x, double bIn, double bOut) {
    return std::max((d - 1 + relayed) * x / bIn, x / bOut);
  };
  const double link = (n - 1) * (share(v, bInR, bOutR) + share(v, c.bIn, c.bLoaded)) + c.aOut;
  const double fr = static_cast<double>(c.f.domains) / n;
  auto hop = [&](double bIn, double bOut) {
    return (1 - fr) * (c.aIn + cb / bIn) + fr * (c.aOut + relayed * cb / bIn + cb / bOut);
  };
  const double chain =
      (n - 1) * (hop(bInR, bOutR) + hop(c.bIn, c.bLoaded)) + (std::ceil(v / cb) - 1) * share(cb, bInR, bOutR);
  return std::max(link, chain);
}

}  // namespace trib::cost
