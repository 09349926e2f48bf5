// Cost model: each algorithm's predicted time on a fabric summary (predict), from the shared
// formulas in cost_formulas.hpp. Units inside: µs and bytes; bandwidths converted from GB/s
// (10^9 B/s) to bytes/µs (x kB). Derivations and calibration: docs/PLANNER.md.
#include "plan/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>
#include <vector>

#include "algo/algorithms.hpp"
#include "plan/cost_formulas.hpp"

namespace trib {

using namespace cost;

Prediction predict(PlanAlgo a, Coll coll, uint64_t bytes, DataType dtype, RedOp op, const FabricView& f,
                   const CostConstants& k, double cutoffUs, PredictScratch* scratch) {
  Prediction p;
  int n = f.n;
  if (n < 1) {
    p.reason = "no ranks";
    return p;
  }
  if (f.protocol != Protocol::Simple) {
    if (f.hostRanks) {
      p.reason = "CPU ranks run Simple only";
      return p;
    }
    if (!protocolApplies(a)) {
      p.reason = strprintf("%s runs Simple only", planAlgoName(a));
      return p;
    }
  }
  double S = static_cast<double>(bytes);
  Ctx c{f,
        k,
        f.reduceGBps * kB,
        f.domains > 1,
        f.bwIntra * kB,
        f.bwInter * kB,
        f.bwInterLoaded * kB,
        f.latIntraUs,
        f.latInterUs};
  if (!c.multi) c.bOut = c.bIn, c.aOut = c.aIn;
  if (f.perDomain < 2 && c.multi) c.bIn = c.bOut, c.aIn = c.aOut;  // every rank alone: no NVLink
  Ctx ring = c;  // the ring's steps between domains are its own (FabricView::latRingInterUs)
  if (c.multi) ring.aOut = f.latRingInterUs;
  if (c.multi && f.perDomain < 2) ring.aIn = ring.aOut;
  double bMix = c.multi ? c.bOut : c.bIn;
  double aMix =
      c.multi ? (1 - static_cast<double>(f.domains) / n) * c.aIn + static_cast<double>(f.domains) / n * c.aOut
              : c.aIn;
  bool reduces = coll == Coll::AllReduce || coll == Coll::Reduce || coll == Coll::ReduceScatter;
  auto unsupported = [&](const char* why) {
    p.supported = false;
    p.reason = why;
    return p;
  };
  if (n == 1) {
    if (a != PlanAlgo::Ring) return unsupported("one rank: a local copy, the ring handles it");
    p.supported = true;
    p.reason = "one rank: a local copy";
    p.us = k.launchUs + (S > 0 ? S / (f.reduceGBps * kB) : 0);
    p.chunkBytes = clampChunk(S, k);
    return p;
  }
  double t = -1;
  uint64_t chunk = clampChunk(std::ceil(S / n), k);  // a whole block per slice when it fits
  const uint64_t count = bytes / std::max<size_t>(1, dataTypeSize(dtype));  // elements
  const RhdWalk rhd(c, n, count, dataTypeSize(dtype));
  const int pof2 = rhd.pof2, rem = rhd.rem;
  constexpr double kPrunedUs = RhdWalk::kPruned;  // rhdSteps reached the cutoff
  auto rhdSteps = [&](bool halve, bool dbl, double total, double foldIn, double foldOut, double foldLat,
                      bool foldCross) {
    return rhd.walk(halve, dbl, total, foldIn, foldOut, foldLat, foldCross, chunk, cutoffUs);
  };

  // One phase of a direct schedule (src/algo/direct.cpp): every rank sends a block of v, slice by
  // slice, to each of its n-1 peers. The executor posts every send in its window in one pass
  // without waiting for any (src/exec/executor.cpp), so their step overheads overlap: one step
  // latency, then the rank's bytes, its own domain's peers' over the domain link and the others'
  // over its network share, at once. The window (512 steps past the first unfinished one) slides:
  // send i + 512 starts when send i is done, not when the whole window is, and an eager send is
  // done once posted (the transport holds its bytes), so past 513 ranks the later sends still
  // follow at once and queue behind the first on the link; a latency per window, in series, priced
  // direct at 4,608 ranks twice its replay (docs/PLANNER.md, "Direct on a flat fabric"). Reducing, the
  // owner folds the n blocks of a slice in rank order (the same bits everywhere); the staggered
  // sends (direct.cpp PeerOrder) bring some owner an early block last (rank + k: rank 0 its block
  // from rank 1; rank ^ k and the rack order: rank n-1 its block from rank 0), so about n-2 folds
  // of the last slice follow it.
  // An ideal switch, as in the replay: the n-1 streams into a port add up to its rate and nothing
  // pushes back. Incast, congestion control and per-peer NIC costs are not priced: no published
  // figure to price them from (docs/PLANNER.md, "Direct on a flat fabric"). Past 256 ranks the
  // executor does not run direct (AlgoInfo::maxRunRanks: rendezvous sends could wait on receives
  // beyond their receiver's window); this prices the schedule there for the model-only choice.
  auto directPhase = [&](double v, bool reduce) {
    double bIn = c.bIn, bOut = c.multi ? c.bLoaded : c.bIn;
    if (reduce) bIn = std::min(bIn, c.R), bOut = std::min(bOut, c.R);
    double local = (c.multi ? f.perDomain : n) - 1, remote = n - 1 - local;
    // Through relays a GPU's NVLink port also carries first legs, and a NIC its domain's blocks
    // for its rail (relayedDirectBlocks).
    if (c.multi)
      local = std::max(local, f.relayedNvlinkBlocks), remote = std::max(remote, f.relayedNicBlocks);
    // One step to every peer at once: it waits on the farthest.
    // (On rails the farthest peers are on other rails: their route adds a relay's hop or a spine.)
    double t =
        (c.multi ? f.latFarUs + f.crossRailLatUs : c.aIn) + std::max(local * v / bIn, remote * v / bOut);
    if (reduce) t += (n - 2) * std::min(v, static_cast<double>(chunk)) / c.R;
    return t;
  };
  // GPU windows (transports/nvlink): every rank folds n terms of v bytes in rank order, reading
  // term j off rank j's window (one-sided: the route's latency, no software step), each read
  // after the last (it writes what the next one reduces into). They start together, so all read
  // rank 0 first and its link serves the n-1 reads one after another; the last rank then leads
  // the others by a read each, and its n-2 later reads find their links free:
  // (n-1) latencies + (2n-3) reads.
  const double windowReadUs = std::max(0.0, c.aIn - k.stepOverheadUs);  // a one-sided read's latency
  auto gpuWindowFold = [&](double v) {
    return (n - 1) * windowReadUs + (2.0 * n - 3) * v / std::min(c.bIn, c.R);
  };
  // NVLS in each domain (reduce-scatter into the NVSwitch, all-gather out of it) around a level
  // across domains that takes acrossUs for every GPU's S/d, acrossLatUs of latency and
  // acrossDepth pipeline stages (nvls_switch: the switches; nvls_ring: a ring of the domains),
  // pipelined chunk by chunk. The fill is the first chunk's trip through every stage at that
  // stage's size and rate: into the NVSwitch (reduced there) and out, a slice of c/d to each GPU
  // and back in, and acrossFill(c) for the slice across (not depth x the whole chunk at the
  // slowest rate: across domains each GPU carries only its slice). The slower level sets the
  // pace: the NVSwitch's (the GPUs drive its reduction chunk by chunk, each chunk's overhead on
  // that stage) with the last chunk's trip across after it, or acrossPaced(feedUs, overheads), the
  // level across with the latency its work does not hide. Sets `chunk`.
  auto nvlsAround = [&](double acrossUs, double acrossLatUs, int acrossDepth, auto acrossFill,
                        auto acrossPaced) {
    const double bn = std::min(c.bIn, f.nvlsGBps * kB), d = f.perDomain;
    chunk = pipelineChunk(S, S / std::max(S / bn, acrossUs), 2 + acrossDepth, k);
    const double cb = std::max(1.0, std::min(static_cast<double>(chunk), S));
    const double fill = 2 * cb / bn + 2 * cb / d / bn + acrossFill(cb);
    const double overheads = std::ceil(S / cb) * k.chunkOverheadUs, feedUs = S / bn + overheads;
    return 2 * c.aIn + fill + std::max(feedUs + acrossLatUs, acrossPaced(feedUs, overheads));
  };
  // The fold of a pair (2v, 2v + 1), v < rem, before the halving and after the doubling: over the
  // network only where some pair straddles two domains.
  bool foldCrosses = false;
  for (int v = 0; v < rem && !foldCrosses; ++v)
    foldCrosses = c.multi && (!rhd.knownDomains || rhd.domainOf(2 * v) != rhd.domainOf(2 * v + 1));
  const double foldLat = foldCrosses ? c.aOut : c.aIn;
  double rhdExtra = pof2 == n ? 0 : foldLat + S / (foldCrosses ? c.bOut : c.bIn);

  // v bytes a rank streams through the network switches at b in chunks of c: each chunk leaves
  // the rank's first hop (switchFeedGBps) a chunk overhead after the one before (the flag and
  // credit exchange per chunk, charged there by the simulator too), and the switch level takes
  // them at b, so the slower of the two paces the stream (a DGX GPU's PCIe link is faster than
  // its NIC: the overheads hide behind the NIC's bytes), then the last chunk's 2 x tiers stages.
  // switchPace: the stream's pace alone, given its chunks' overheads.
  auto switchPace = [&](double v, double overheads, double b) {
    const double feed = f.switchFeedGBps > 0 ? f.switchFeedGBps * kB : b;
    return std::max(v / b, v / feed + overheads);
  };
  auto throughSwitches = [&](double v, double cb, double b) {
    cb = std::max(1.0, std::min(cb, v));  // as pipelineCost: a message smaller than a chunk is one
    return switchPace(v, std::ceil(v / cb) * k.chunkOverheadUs, b) + 2 * f.switchTiers * cb / b;
  };

  // The other collectives through the switch (branch `switch` adds their schedules): each rank
  // sends `up` and receives `down` bytes; the larger sets the pace, as for all-reduce.
  if (a == PlanAlgo::Switch && coll != Coll::AllReduce) {
    double up = 0, down = 0;
    switch (coll) {
      case Coll::Reduce:
        up = S, down = S;  // the root's; the others receive nothing
        break;
      case Coll::Broadcast:
        up = S, down = S;
        break;
      case Coll::AllGather:
        up = S / n, down = S;
        break;
      case Coll::ReduceScatter:
        up = S, down = S / n;
        break;
      case Coll::Barrier:
        break;
      default:
        return unsupported("not for this collective");
    }
    if (f.switchGBps <= 0)
      return unsupported("no reduce-capable network switch with an aggregation tree over all ranks");
    if (reduces && !f.switchCap.supports(dtype, op))
      return unsupported("the switches do not reduce this dtype/op");
    const double v = std::max(up, down), b = f.switchGBps * kB;
    t = 2 * f.switchLatUs;
    if (v > 0) {
      chunk = pipelineChunk(v, b, 2 * f.switchTiers, k);
      if (f.switchCap.bufferBytes && chunk > f.switchCap.bufferBytes) chunk = f.switchCap.bufferBytes;
      t += throughSwitches(v, chunk, b);
    }
    p.reason = strprintf("through the switch: %s up, %s down per rank",
                         up == S  ? "S"
                         : up > 0 ? "S/n"
                                  : "0",
                         down == S  ? "S"
                         : down > 0 ? "S/n"
                                    : "0");
    p.supported = true;
    p.us = k.launchUs + t;
    p.chunkBytes = chunk;
    return p;
  }
  switch (coll) {
    case Coll::AllReduce:
      switch (a) {
        case PlanAlgo::Ring:
          if (c.multi && f.uniform && f.perDomain > 1 && f.perDomain <= kMaxRailChannels) {
            // Rails (ring.cpp; the planner sets ranksPerDomain): d rings of n ranks over S/d each,
            // channel c entering every domain at local rank c, so each rank's NIC carries one
            // channel's cross-domain stream each way and its NVLink the other d-1 channels' hops,
            // every round. v = S/(dn) a block; 2(n-1) rounds, pipelined chunk by chunk as the
            // hierarchical levels' rings (pipelinedRing): a round is the busier of the two links'
            // shares, and a chunk's trip crosses a domain on m of every n hops.
            const int d = f.perDomain;
            const double v = S / d / n;
            chunk = clampChunk(std::ceil(v), k);  // a whole block per slice when it fits
            t = railRing(ring, d, v, static_cast<double>(chunk));
            p.reason = strprintf("rails: %d rings (one per NIC) of 2(n-1) steps of S/%dn", d, d);
          } else {
            t = flatRing(ring, S / n, static_cast<double>(chunk), true, true);
            p.reason = "2(n-1) steps of S/n";
          }
          break;
        case PlanAlgo::Tree: {
          int D = ceilLog2(n);
          const double path = f.treePathUs;
          // Every edge carries S/2 each way (half the buffer per tree, up then down), pipelined, so
          // the busiest link paces the tree: the busiest rank's domain link (up to 4 edges: inner in
          // one tree, leaf in the other), its own network path, or its host's NICs when the host's
          // ranks share them.
          double bIn = std::min(c.bIn, c.R), bOut = std::min(c.bOut, c.R);
          double bwTime = f.treeEdgesIn * S / 2 / bIn;
          if (c.multi) {
            bwTime = std::max(bwTime, f.treeEdgesOut * S / 2 / bOut);
            if (f.hostEgressGBps > 0)
              bwTime = std::max(bwTime, f.treeHostEdgesOut * S / 2 / std::min(f.hostEgressGBps * kB, c.R));
          }
          double b = c.multi && f.perDomain < 2 ? bOut : bIn;  // one hop's link: the chunk, two ranks' trip
          chunk = pipelineChunk(S, b, 2 * D, k);
          if (n == 2) {
            // Each tree is one edge, and each direction of it carries one tree's leaf stream (the
            // input: ready at the start) and the other tree's root stream (fed by the leaf stream
            // of the opposite direction, a chunk behind): the link never waits for a pipeline to
            // fill, so it is busy from its first chunk to its last (its bytes back to back and one
            // trip), unless a slice's round trip, up and down, is longer (small buffers).
            t = std::max(path + bwTime, 2 * (path + std::min(static_cast<double>(chunk), S / 2) / b));
          } else {
            // Rank by rank on the two trees, as two channels sharing each link (treeAllReduceUs;
            // docs/PLANNER.md "The tree under two channels"), inside one domain and across.
            if (!f.treeShape) return unsupported("no tree shape in the fabric view (computeFabric makes it)");
            // Its time is at least the busiest link's bytes (treeAllReduceUs' busy bound) and a
            // slice's round trip on the costliest path (its trip bound): no need for the O(n)
            // walk when either alone reaches the cutoff.
            const double aIn = f.perDomain > 1 ? f.latIntraUs : f.latInterUs;
            if (k.launchUs + std::max(bwTime, 2 * treePathUs(f, aIn, f.latInterUs)) >= cutoffUs) {
              p.pruned = true;
              return unsupported("no faster than the cutoff: a bound on its time already reaches it");
            }
            t = treeAllReduceUs(f, S, static_cast<double>(chunk), aIn, f.latInterUs, bIn,
                                c.multi ? bOut : bIn, bwTime, scratch);
          }
          p.reason = "double binary tree: 2 log2(n) hops, pipelined";
          break;
        }
        case PlanAlgo::Rhd: {
          t = rhdSteps(true, true, S, rhdExtra, rhdExtra, foldLat, foldCrosses);
          if (t == kPrunedUs) p.pruned = true;
          p.reason = "2 log2(n) steps, halving/doubling";
          break;
        }
        case PlanAlgo::Direct:
          t = directPhase(S / n, true) + directPhase(S / n, false);
          p.reason = "direct reduce-scatter + all-gather: every peer at once";
          break;
        case PlanAlgo::AllgatherReduce:
          // One direct round of whole inputs (n-1 sends of S, as direct's all-gather phase with
          // blocks of S), then the fold of n terms in rank order: a copy fused with the first
          // reduction, then n-2 more, (n-1)S at the reduction rate.
          t = directPhase(S, false) + (n - 1) * S / c.R;
          p.reason = "one round: every rank sends S to every peer, then folds the n inputs in rank order";
          break;
        case PlanAlgo::Hierarchical: {
          if (!c.multi) return unsupported("needs more than one domain");
          if (f.perDomain < 2) return unsupported("one rank per domain: nothing to do inside domains");
          if (!f.uniform) return unsupported("needs equal, contiguous domains");
          const int d = f.perDomain, m = f.domains;
          const double v = S / d, bInR = std::min(c.bIn, c.R), bOutR = std::min(c.bLoaded, c.R);
          const double aX = f.latLevelInterUs;  // the level across: GPU l of each domain in a ring
          // The schedule cuts the count in pipeline slices of d x m chunks where the executor's
          // window holds enough of them (algo::hierarchicalSliceElems), each through the three
          // levels before the next in the list; else it is one slice.
          const double sliceSteps = static_cast<double>(algo::hierarchicalSliceSteps(d, m));
          const bool sliced = algo::hierSlicesFitTheWindow(algo::hierarchicalSliceSteps(d, m));
          struct Priced {
            double us;
            bool fed;  // the window's slices keep the busier link fed (below: the chunk search)
          };
          auto timeWith = [&](uint64_t ch) {
            const double cb = static_cast<double>(ch);
            const double P = sliced ? std::min(S, static_cast<double>(d) * m * cb) : S,
                         slices = std::ceil(S / P);
            const double w = P / d;  // a slice's block
            // One slice's levels overlap chunk by chunk where the data allow (docs/PLANNER.md
            // "Pipelining: ring rounds and levels"): the domain reduce-scatter first (its last round
            // alone makes the block, so at most a round overlaps the next level: not counted);
            // across domains a ring of 2(m-1) rounds of w/m, whose results appear from its (m-1)-th
            // round on; the domain all-gather, on the NVLink the network phase does not use, starts
            // on the first final chunk. It ends after the last final chunk's d-1 hops, or after its
            // own work from the first, whichever is later.
            const double rs = pipelinedRing(d - 1, 0, w, cb, c.aIn, bInR, c.bIn);
            const double across = pipelinedRing(m - 1, m - 1, w / m, cb, aX, bOutR, c.bLoaded);
            const double c0 = std::min(cb, w / m);
            const double firstFinal =
                std::max((m - 2) * w / m / bOutR, (m - 2) * (aX + c0 / bOutR)) + aX + c0 / bOutR;
            // The network level's all-gather rounds: a send and a receive per chunk.
            const double one = rs + domainAllGatherAfter(c, d, w, cb, c0, across, firstFinal,
                                                         2.0 * (m - 1) * std::ceil(w / m / c0));
            if (slices <= 1) return Priced{one, true};
            // Where a slice's levels take longer than the window's slices' work on the busier
            // link (small chunks), the window paces the slices instead, which this does not price:
            // the chunk search below stops there.
            const SliceBounds sb = pipelineSlices(c, d, w, cb, c0, slices, sliceSteps, rs, across,
                                                  (m - 1) * w / m * (1 / bOutR + 1 / c.bLoaded), aX);
            return Priced{std::max(one, sb.us), sb.fedWork >= one};
          };
          // The chunk: one a block across domains, or (sliced) smaller where shorter slices start the
          // network level sooner, halving while the window keeps the links fed, whichever is fastest.
          chunk = clampChunk(std::ceil(v / m), k);
          t = timeWith(chunk).us;
          for (uint64_t ch = chunk / 2; sliced && ch >= k.minChunkBytes; ch /= 2) {
            const Priced p2 = timeWith(ch);
            if (!p2.fed) break;
            if (p2.us < t) t = p2.us, chunk = ch;
          }
          p.reason = "ring reduce-scatter in domain, ring all-reduce of S/d across, all-gather in domain";
          break;
        }
        case PlanAlgo::Switch: {
          if (f.switchGBps <= 0)
            return unsupported("no reduce-capable network switch with an aggregation tree over all ranks");
          if (!f.switchCap.supports(dtype, op))
            return unsupported("the switches do not reduce this dtype/op");
          double b = f.switchGBps * kB;
          chunk = pipelineChunk(S, b, 2 * f.switchTiers, k);
          if (f.switchCap.bufferBytes && chunk > f.switchCap.bufferBytes) chunk = f.switchCap.bufferBytes;
          t = 2 * f.switchLatUs + throughSwitches(S, chunk, b);
          p.reason = "each rank sends S up and receives S down";
          break;
        }
        case PlanAlgo::HierSwitch: {
          if (!c.multi) return unsupported("needs more than one domain (see switch)");
          if (f.perDomain < 2) return unsupported("one rank per domain: the flat switch plan is the same");
          if (!f.uniform) return unsupported("needs equal, contiguous domains");
          if (f.switchGBps <= 0)
            return unsupported("no reduce-capable network switch with an aggregation tree over all ranks");
          if (!f.switchCap.supports(dtype, op))
            return unsupported("the switches do not reduce this dtype/op");
          // Every rank sends its S/d slice at once: the per-rank switch rate under full load
          // (f.switchGBps) applies to S/d, so a host moves S through the switch instead of d x S.
          const int d = f.perDomain;
          const double v = S / d, b = f.switchGBps * kB;
          // The block goes to the switch in pieces of whole ring slices (algo/schedule.hpp
          // hierSwitchPieces; a SwitchReduce each, streamed in slices), so the levels overlap as
          // hierarchical's do: the switch level from the first piece the reduce-scatter's last
          // round makes, the domain all-gather from the first piece back, ending after the last
          // piece's d-1 hops.
          auto timeWith = [&](uint64_t ch) {
            if (f.switchCap.bufferBytes && ch > f.switchCap.bufferBytes) ch = f.switchCap.bufferBytes;
            const double cb = static_cast<double>(ch);
            const double reduceIn = std::min(c.bIn, c.R);  // a reduce round's rate
            // Pipeline slices (algo::hierSwitchSliceElems): d blocks of q chunks, a block one switch
            // operation, each slice through the three levels before the next; priced as
            // hierarchical's (docs/PLANNER.md "hierarchical: pipeline slices"), the switch in place
            // of the ring across.
            const uint64_t q = algo::hierSwitchSliceChunks(chunkElemsOf(ch, dataTypeSize(dtype)));
            const double sliceSteps = static_cast<double>(algo::hierSwitchSliceSteps(d, q)), w = q * cb;
            if (algo::hierSlicesFitTheWindow(algo::hierSwitchSliceSteps(d, q)) && v > w) {
              const double rs = pipelinedRing(d - 1, 0, w, cb, c.aIn, reduceIn, c.bIn);
              const double trip = 2 * f.switchLatUs + throughSwitches(w, cb, b);
              const double one = rs + domainAllGatherAfter(c, d, w, cb, w, trip, trip, 1);
              const SliceBounds sb = pipelineSlices(c, d, w, cb, std::min(cb, w), std::ceil(v / w),
                                                    sliceSteps, rs, trip, w / b, 2 * f.switchLatUs);
              return std::pair{std::max(one, sb.us), ch};
            }
            const double slices = std::ceil(v / std::min(cb, v));
            const double pieces = static_cast<double>(hierSwitchPieces(
                static_cast<uint64_t>(v) / dataTypeSize(dtype), static_cast<uint64_t>(slices)));
            const double piece = std::min(v, std::ceil(slices / pieces) * cb);
            const double rs = pipelinedRing(d - 1, 0, v, cb, c.aIn, reduceIn, c.bIn);
            // The reduce-scatter's last round reduces the block slice by slice over v / rate, so the
            // first piece is ready (pieces - 1) / pieces of that round before its end; the last
            // piece leaves at the end and takes its own trip through the switch.
            const double early = (pieces - 1) / pieces * v / reduceIn;
            const double pieceTrip = 2 * f.switchLatUs + throughSwitches(piece, cb, b);
            const double across = std::max(2 * f.switchLatUs + throughSwitches(v, cb, b) - early, pieceTrip);
            return std::pair{rs + domainAllGatherAfter(c, d, v, cb, piece, across, pieceTrip - early, pieces),
                             ch};
          };
          // The ring slice: the switch's pipeline chunk, or the smallest that puts no more slices in
          // the block than the executor's window holds with the all-gather's 2(d-1) steps each
          // (with more, its later rounds wait for the switch to finish): whichever is faster.
          const double windowSlices = std::max(1.0, std::floor(k.executorWindowSteps / (2.0 * d - 1)));
          std::tie(t, chunk) = std::min(timeWith(pipelineChunk(v, b, 2 * f.switchTiers, k)),
                                        timeWith(clampChunk(std::ceil(v / windowSlices), k)));
          p.reason = "ring reduce-scatter in domain, switch all-reduce of S/d, all-gather in domain";
          break;
        }
        case PlanAlgo::Nvls: {
          if (c.multi) return unsupported("NVLS reduces within one NVLink domain (see nvls_switch)");
          if (f.nvlsGBps <= 0) return unsupported("no reduce-capable NVSwitch");
          if (!f.nvlsCap.supports(dtype, op))
            return unsupported("the NVSwitch does not reduce this dtype/op");
          double b = std::min(c.bIn, f.nvlsGBps * kB);
          chunk = pipelineChunk(S, b, 2, k);
          // One step (one kernel: reduce-load through the switch, multicast store): one software
          // step overhead and the path up and back (aIn holds both hops), as the simulator runs it.
          t = c.aIn + S / b + pipelineCost(S, chunk, b, 2, k);
          p.reason = "each GPU sends S to the NVSwitch and receives S";
          break;
        }
        case PlanAlgo::NvlsSwitch: {
          if (!c.multi) return unsupported("single domain (see nvls)");
          if (f.nvlsGBps <= 0 || f.switchGBps <= 0)
            return unsupported("needs reduce-capable NVSwitches and network switches");
          if (!f.uniform) return unsupported("needs equal, contiguous domains");
          if (!f.nvlsCap.supports(dtype, op) || !f.switchCap.supports(dtype, op))
            return unsupported("the switches do not reduce this dtype/op");
          // The level across: each GPU's S/d up and down the aggregation tree, a slice of a chunk per
          // tier each way.
          const double bs = f.switchGBps * kB, d = f.perDomain;
          // Paced by the switches: every chunk's slice up (its overhead on the GPU's first hop, as
          // throughSwitches), then the last one's trip up and down.
          const double acrossUs = S / d / bs, acrossLatUs = 2 * f.switchLatUs;
          t = nvlsAround(
              acrossUs, acrossLatUs, 2 * f.switchTiers,
              [&](double cb) { return 2 * f.switchTiers * cb / d / bs; },
              [&](double, double overheads) { return switchPace(S / d, overheads, bs) + acrossLatUs; });
          p.reason = "NVLS reduce-scatter, switch all-reduce of S/d, NVLS all-gather, pipelined";
          break;
        }
        case PlanAlgo::NvlsRing:
        case PlanAlgo::NvlsTree: {
          // nvls_switch with the m domains joined per GPU slice in place of the switch: GPU i of every
          // domain all-reduces slice i (c/d of each chunk) with its counterparts over its own NIC,
          // every slice beside the others (rails): by a ring of the domains (nvls_ring) or by NCCL's
          // double binary tree of them, half the slice on each tree (nvls_tree, algo::doubleTreeNode).
          if (!c.multi) return unsupported("single domain (see nvls)");
          if (f.nvlsGBps <= 0) return unsupported("no reduce-capable NVSwitch");
          if (!f.uniform) return unsupported("needs equal, contiguous domains");
          if (!f.nvlsCap.supports(dtype, op))
            return unsupported("the NVSwitch does not reduce this dtype/op");
          const bool ringAcross = a == PlanAlgo::NvlsRing;
          const double m = f.domains, d = f.perDomain, bNet = c.bLoaded, bRed = std::min(bNet, c.R);
          // The level across on the busiest NIC, its steps (a chunk's slice through them, each a step's
          // latency and its piece of the chunk: c/(dm) in the ring, c/(2d) in a tree) and their latency.
          // Ring: (m-1)/m of each GPU's S/d each way, 2(m-1) steps between neighbours. Tree
          // (FabricView::DomainTree): a GPU receives half its slice from each child (reduced) and from
          // each parent (the result), and sends half to each, inner in one tree and a leaf in the other;
          // up and back down, a step per level, each joining domains far apart (the farthest's hops).
          double acrossUs = 0, steps = 0, lat = 0, piece = 0;
          if (ringAcross) {
            acrossUs = (m - 1) / m * (S / d) * (1 / bRed + 1 / bNet);
            steps = 2 * (m - 1), lat = f.latLevelInterUs, piece = 1 / (d * m);
          } else {
            for (const auto& [kids, parents] : f.domainTree.loads)
              acrossUs = std::max(acrossUs, S / d / 2 * (kids / bRed + parents / bNet));
            steps = 2.0 * f.domainTree.depth, lat = f.latLevelInterUs + (f.latFarUs - f.latInterUs);
            piece = 1 / (2 * d);
          }
          // Paced by the NICs: a step's latency is not the NIC's time, so while one chunk's step is
          // under way the NIC sends the other chunks' steps. The chunks enter the level over feedUs
          // (the NVSwitch's pace), bringing acrossUs/feedUs of NIC work per us once every step is
          // under way; step s starts (s-1) latencies after the first chunk, so at t the NIC gets
          // t/(steps x lat) of that, and idles until it reaches 1 (the ramp: steps x lat x
          // feedUs/acrossUs): half the ramp in all. The last chunks leave the same way, their later
          // steps a latency apart, the NIC's load falling as it rose: half the ramp again (the last
          // step's latency in it), or where its work is shorter than the ramp (its load never full)
          // half its work. (Nor can it end before every latency and a step's share: step `steps` of
          // any chunk.)
          t = nvlsAround(
              acrossUs, steps * lat, static_cast<int>(steps),
              [&](double cb) { return steps / 2 * cb * piece * (1 / bRed + 1 / bNet); },
              [&](double feedUs, double) {
                const double ramp = steps * lat * std::min(1.0, feedUs / acrossUs);
                const double paced = acrossUs + ramp / 2 + std::min(acrossUs, ramp) / 2;
                return std::max(paced, (steps - 1) * lat + acrossUs / steps + lat);
              });
          p.reason = ringAcross
                         ? "NVLS reduce-scatter, ring all-reduce of S/d across the domains on each GPU's "
                           "NIC, NVLS all-gather, pipelined"
                         : "NVLS reduce-scatter, double binary tree of the domains for S/d on each "
                           "GPU's NIC, NVLS all-gather, pipelined";
          break;
        }
        case PlanAlgo::OneShot:
          if (f.remoteWindows) {  // (host memory: the windows are registered host memory)
            // Over remote windows (verbs): copy S into its window (2S), one signal exchange across
            // the network, the n-1 peers' windows read by RDMA (a round trip, then (n-1)S into the
            // rank's NIC at once) and folded (3S each, uncached: they came from the NIC); from
            // kOneShotExposeFromElems one more exchange ends the call.
            const double bNet = c.multi ? c.bLoaded : c.bIn;  // one host: verbs forced there
            t = ((S / dataTypeSize(dtype) >= kOneShotExposeFromElems ? 2 : 1) + 1) * c.aOut +
                (n - 1) * S / bNet + (3.0 * n - 1) * S / c.R;
            chunk = clampChunk(S, k);
            p.reason = "one exchange; every rank reads the n-1 peer windows by RDMA and reduces";
            break;
          }
          if (c.multi) return unsupported("one-shot needs every rank's window mapped (one host)");
          if (!f.hostRanks) {
            // GPU windows: copy (or expose, priced as a copy) S into its window, one exchange, the
            // fold off the windows (gpuWindowFold); from kOneShotExposeFromElems one more exchange.
            t = (S / dataTypeSize(dtype) >= kOneShotExposeFromElems ? 2 : 1) * c.aIn + S / c.R +
                gpuWindowFold(S);
            chunk = clampChunk(S, k);
            p.reason = "one exchange; every GPU reduces the n inputs off the peer windows";
            break;
          }
          // The window schedule (algo/oneshot.cpp), per rank: one signal exchange; copy S into its
          // window (2S of traffic: read, write); fold the n windows into the output in rank order,
          // the first two in one reduce (the executor fuses a copy and the reduce after it: 3S:
          // two reads, a write) and n-2 more reductions (3S each), against cache-resident cells:
          // (3n-1)S, one step after another on the rank's core.
          // From kOneShotExposeFromElems one more exchange ends the call (its input may be
          // exposed); priced with the expose a copy, as in two-shot.
          t = (S / dataTypeSize(dtype) >= kOneShotExposeFromElems ? 2 : 1) * c.aIn +
              (3.0 * n - 1) * S / (c.R * k.boardCacheSpeedup);
          chunk = clampChunk(S, k);
          p.reason = "one exchange; every rank reduces the n inputs off the windows";
          break;
        case PlanAlgo::TwoShot: {
          if (f.remoteWindows) {  // (host memory: the windows are registered host memory)
            // Over remote windows, per cell-sized chunk: two exchanges and a read round trip across
            // the network; over the call 2(n-1)/n S in and out of the rank's NIC (the peers' slices
            // written or read, the others' results read), and the local work of the mapped case
            // below, uncached. One more exchange ends the call.
            const double chunks = std::ceil(S / static_cast<double>(k.boardChunkBytes));
            const double bNet = c.multi ? c.bLoaded : c.bIn;
            t = (3 * chunks + 1) * c.aOut + 2.0 * (n - 1) / n * S / bNet + (7.0 * n - 5) / n * S / c.R;
            chunk = std::min<double>(S, static_cast<double>(k.boardChunkBytes));
            p.reason = "per window cell, by RDMA: each rank reduces its slice, then reads the others'";
            break;
          }
          if (c.multi) return unsupported("two-shot needs every rank's window mapped (one host)");
          if (!f.hostRanks) {
            // GPU windows, per cell-sized chunk c, one after another: two exchanges; the peers'
            // slices and then its result exposed (priced as copies: c/R); the fold of its slice
            // (c/n) off the windows (gpuWindowFold); the n-1 other slices got at once, each from its
            // owner (a latency, (n-1)c/n into the rank). One more exchange ends the call.
            const double chunks = std::ceil(S / static_cast<double>(k.boardChunkBytes));
            const double cb = std::min<double>(S, static_cast<double>(k.boardChunkBytes));
            t = c.aIn + chunks * (2 * c.aIn + cb / c.R + gpuWindowFold(cb / n) + windowReadUs +
                                  (n - 1) * cb / n / std::min(c.bIn, c.R));
            chunk = std::min<double>(S, static_cast<double>(k.boardChunkBytes));
            p.reason =
                "per window cell: each GPU reduces its slice off the peer windows, then gets the others'";
            break;
          }
          // The window schedule (algo/oneshot.cpp), out of place (the planner plans every rank
          // alike, and in-place-ness may differ), per cell-sized chunk: two signal exchanges; per
          // rank, copy the peers' slices into its window (2(n-1)/n S over all chunks), fold its
          // slice of the n inputs, its own from its input (the first two in one reduce, fused as in
          // one-shot, then n-2 more: 3(n-1)/n S), publish it in its window (2S/n) and get the n-1
          // other slices (2(n-1)/n S): (7n-5)/n S against cache-resident cells. (In place a rank
          // puts its slice into every peer's window instead, and the call needs no exchange at
          // the end.) Chunks run one after another (a chunk's copy waits for the previous
          // exchange). One more exchange ends the call (a peer may read a rank's exposed buffers
          // until then). Priced with every expose a copy (the simulator's choice: which ranks
          // map is known only at run time).
          double chunks = std::ceil(S / static_cast<double>(k.boardChunkBytes));
          t = (2 * chunks + 1) * c.aIn + (7.0 * n - 5) / n * S / (c.R * k.boardCacheSpeedup);
          chunk = std::min<double>(S, static_cast<double>(k.boardChunkBytes));
          p.reason = "per window cell: each rank reduces its slice, then gets the others' slices";
          break;
        }
        default:
          return unsupported("not for this collective");
      }
      break;
    case Coll::ReduceScatter:
    case Coll::AllGather:
      if (a == PlanAlgo::Ring) {
        t = flatRing(ring, S / n, static_cast<double>(chunk), reduces, !reduces);
        p.reason = "n-1 steps of S/n";
      } else if (a == PlanAlgo::Rhd) {
        t = rhdSteps(reduces, !reduces, S, 0, 0, 0, false) + rhdExtra;
        if (t == kPrunedUs) p.pruned = true;
        p.reason = "log2(n) steps";
      } else if (a == PlanAlgo::Direct) {
        t = directPhase(S / n, reduces);
        p.reason = "every peer at once";
      } else {
        return unsupported("not for this collective");
      }
      break;
    case Coll::Broadcast:
    case Coll::Reduce: {
      double b = reduces ? std::min(bMix, c.R) : bMix;
      if (a == PlanAlgo::Ring || a == PlanAlgo::Chain) {
        chunk = pipelineChunk(S, b, n, k);
        t = (n - 1) * aMix + S / b + pipelineCost(S, chunk, b, n - 1, k);
        p.reason = "pipelined chain";
      } else if (a == PlanAlgo::Tree) {
        int D = ceilLog2(n);
        chunk = pipelineChunk(S, b / 2, D, k);
        t = D * aMix + 2 * S / b + pipelineCost(S, chunk, b / 2, D, k);
        p.reason = "pipelined binary tree (2 children per node)";
      } else if (a == PlanAlgo::Binomial) {
        t = ceilLog2(n) * (aMix + S / b);
        chunk = clampChunk(S, k);
        p.reason = "log2(n) rounds of S";
      } else {
        return unsupported("not for this collective");
      }
      break;
    }
    case Coll::AlltoAll:
    case Coll::Gather:
    case Coll::Scatter:
      if (a == PlanAlgo::Binomial && coll != Coll::AlltoAll) {
        // log2(n) rounds; the root's link carries every block but its own.
        t = ceilLog2(n) * (aMix + k.chunkOverheadUs) + S * (n - 1) / n / bMix;
        p.reason = "binomial tree: log2(n) rounds";
        break;
      }
      if (a != PlanAlgo::Direct && a != PlanAlgo::Ring) return unsupported("not for this collective");
      if (a == PlanAlgo::Direct) {
        double b = coll == Coll::AlltoAll ? (c.multi ? c.bLoaded : c.bIn) : bMix;
        t = c.aOut + (n - 1) * k.chunkOverheadUs + S * (n - 1) / n / b;
        p.reason = "every peer at once";
      } else {
        t = (n - 1) * (aMix + S / n / bMix) * (coll == Coll::AlltoAll ? n / 2.0 : 1.0);
        p.reason = "n-1 ring steps";
      }
      break;
    case Coll::Barrier:
      if (a == PlanAlgo::Rhd || a == PlanAlgo::Direct)  // direct: the dissemination barrier's rounds
        t = ceilLog2(n) * std::max(c.aIn, c.aOut);
      else if (a == PlanAlgo::Ring)
        t = 2 * (n - 1) * aMix;
      else
        return unsupported("not for this collective");
      p.reason = "latency only";
      break;
  }
  if (t < 0) return unsupported("not modelled");
  if (p.pruned) return unsupported("no faster than the cutoff: a bound on its time already reaches it");
  p.supported = true;
  p.us = k.launchUs + t;
  p.chunkBytes = chunk;
  return p;
}

}  // namespace trib
