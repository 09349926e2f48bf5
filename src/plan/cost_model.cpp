// Cost model: each algorithm's predicted time on a fabric summary (predict), from the shared
// formulas in cost_formulas.hpp. Units inside: µs and bytes; bandwidths converted from GB/s
// (10^9 B/s) to bytes/µs (x kB). Derivations and calibration: docs/PLANNER.md.
#include "plan/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
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
  // rhd.cpp's power-of-two group of pof2 ranks: the first 2 rem ranks fold in pairs (2v, 2v + 1)
  // and inner rank v is real rank 2v + 1 for v < rem, else v + rem. With ranks contiguous by
  // domain (f.uniform) real rank r is in domain r / perDomain, so whether a step's partners are in
  // one domain depends on the rank, not only on the distance (72 per rack: distance 64 crosses
  // for 64 of every 72 ranks); with domains of different sizes the ranks' own domains say it.
  int pof2 = 1;
  while (pof2 * 2 <= n) pof2 *= 2;
  const int rem = n - pof2;
  const uint64_t count = bytes / std::max<size_t>(1, dataTypeSize(dtype));  // elements
  // Real rank r's domain: by position where ranks are contiguous by equal domains, else from the
  // tree shape's per-rank domains (computeFabric keeps them); without either, every step of a
  // multi-domain group is counted across.
  const bool knownDomains = f.uniform || f.treeShape;
  auto domainOf = [&](int r) {
    return f.uniform || !f.treeShape ? r / std::max(1, f.perDomain) : f.treeShape->domain[r];
  };
  auto innerReal = [&](int v) { return v < rem ? 2 * v + 1 : v + rem; };  // rhd.cpp's Rhd::outer
  auto innerDomain = [&](int v) { return domainOf(innerReal(v)); };
  auto crosses = [&](int v, int dist) {
    return c.multi && (!knownDomains || innerDomain(v) != innerDomain(v ^ dist));
  };
  // A step's latency: inside a domain, to the next one, or (ranks contiguous by domain, the
  // network built in rank order) to one further away at the farthest domain's hops.
  const double aFar = c.aOut + (c.multi ? f.latFarUs - f.latInterUs : 0);
  auto stepLat = [&](int v, int dist) {
    if (!crosses(v, dist)) return c.aIn;
    // Between rails the route adds the NVLink hop into the relay (PXN) or a spine.
    const double rails = f.crossesRails(innerReal(v), innerReal(v ^ dist)) ? f.crossRailLatUs : 0;
    return rails + (knownDomains && std::abs(innerDomain(v) - innerDomain(v ^ dist)) > 1 ? aFar : c.aOut);
  };
  // foldIn, foldOut: the fold of the pair (2v, 2v + 1) before the halving and after the doubling;
  // only the folding ranks (inner v < rem) run it, so their chains start and end that much later,
  // and the others' steps go on meanwhile until they need a folding partner's data.
  // halve, dbl: which phases run (all-reduce both, reduce-scatter the halving, all-gather the
  // doubling). Both phases are one timing chain and one link bound, not a sum of two: the executor
  // runs a rank's steps with no barrier between the phases, so early chunks pass through the
  // domain steps at the end of the halving and the start of the doubling while the halving's
  // network step still sends its later ones, and a NIC's network steps of both phases run nearly
  // back to back (2 x DGX H100 16 MiB: each NIC busy 94.5% of the replay).
  constexpr double kPrunedUs = std::numeric_limits<double>::infinity();  // rhdSteps reached the cutoff
  auto rhdSteps = [&](bool halve, bool dbl, double total, double foldIn, double foldOut, double foldLat,
                      bool foldCross) {
    // Recursive halving (reduce-scatter) and doubling (all-gather) as src/algo/rhd.cpp runs them:
    // the largest pieces travel the longest distances (S/2 to the partner p/2 away). A step whose
    // partner is in another domain crosses the network, every such rank sending at once. Steps
    // are sent in chunks and the executor starts a chunk once its data are there, so steps
    // overlap: the collective ends after the later of the busiest rank's link's bytes back to back
    // (its steps across domains on the network share, the others on the domain link; one latency
    // at the end) and one chunk's chain through the steps (every step's latency, the slowest
    // step's bytes, a chunk of each other's).
    int L = 0;
    while ((2 << L) <= n) ++L;
    struct RhdStep {
      bool reduce;
      int dist;
    };
    std::vector<RhdStep> steps;
    if (halve)
      for (int s = 0; s < L; ++s) steps.push_back({true, 1 << (L - 1 - s)});
    if (dbl)
      for (int s = 0; s < L; ++s) steps.push_back({false, 1 << s});
    auto rate = [&](bool reduce, bool cross) {
      return reduce ? std::min(cross ? c.bLoaded : c.bIn, c.R) : (cross ? c.bLoaded : c.bIn);
    };
    {  // Rank 0's link bytes alone (the links bound below takes every rank's): when they reach the
       // cutoff, the walk over every rank cannot come in under it.
      double in = 0, out = 0;
      for (const RhdStep& st : steps)
        (crosses(0, st.dist) ? out : in) += total * st.dist / pof2 / rate(st.reduce, crosses(0, st.dist));
      if (k.launchUs + std::max(in, out) >= cutoffUs) return kPrunedUs;
    }
    // The chain: the partner's chunk of step s leaves once the partner finished step s - 1, and
    // its trip runs while the rank finishes its own step s - 1 (sends are posted as soon as their
    // data are there, into receive buffers already posted): T_s(r) = max(T_{s-1}(r),
    // T_{s-1}(partner) + latency) + a chunk, on each pair's own link. So a rank on the network in
    // some steps and on NVLink in others paces only what depends on it.
    // Halving keeps the dist blocks of p around the rank and receives them from the partner;
    // doubling receives the partner's dist blocks. A rank receiving no element (fewer elements
    // than blocks: 8 B is 2 floats of 4,096 blocks) skips the step, as the schedule does.
    const bool alike =
        (!c.multi || !knownDomains) && count >= static_cast<uint64_t>(pof2);  // every rank the same
    const int ranks = alike ? 1 : pof2;
    auto folds = [&](int r) { return alike ? rem > 0 : r < rem; };  // alike: the folding ranks
    auto receives = [&](int r, const RhdStep& st) {                 // rank r receives some element in step st
      const uint64_t b0 = static_cast<uint64_t>((st.reduce ? r : r ^ st.dist) & ~(st.dist - 1));
      return blockBegin(count, pof2, b0 + st.dist) != blockBegin(count, pof2, b0);
    };
    std::vector<double> chain(ranks, 0), next(ranks);
    for (int r = 0; r < ranks; ++r) chain[r] = folds(r) ? foldIn : 0;
    // The last chunks: a step's last chunk leaves once the rank has sent the step's other chunks
    // and those before on the same link, and once its data are there (halving: the rank's lower
    // half sends the upper half of what it received in the step before, whose last chunk came
    // last; the upper half the lower, there at the middle of that reception; doubling: the lower
    // half sends what it just received last, the upper half it had a step earlier); it is in once
    // the receiving side of the partner's link has taken it after that link's earlier steps, and
    // a latency later. When steps shrink below a latency's worth of bytes (the ends of the halving
    // and doubling), a link waits for them; and a rank receiving two network steps at once (144
    // GPUs: inner ranks 24-31, distance 64 and 32) gets the earlier one's last chunk only after
    // both, which holds up what it forwards. The links' bound, bytes back to back, sees neither.
    // A folding rank's fold comes in on the receiving side of the fold's link, its partner's vector
    // in order, as its first step starts sending: the half it sends first (the upper rank's lower
    // half) is there halfway through the fold. Its sending sides are free.
    // The vector's time on the fold's link (foldIn and foldOut are the same full-size step, or 0).
    const double foldBytes = std::max(0.0, std::max(foldIn, foldOut) - foldLat);
    // A step across domains leaves by its sender's NIC, or where GPUs relay (PXN) by the NIC of
    // the sender's domain on the receiver's rail: net (the NICs' sending sides) is indexed by the
    // real rank whose NIC it is (its own rank where every rank is alike).
    auto realOf = [&](int r) { return alike ? r : innerReal(r); };
    auto nicOf = [&](int r, int dist) { return alike ? r : f.relayNic(realOf(r), realOf(r ^ dist)); };
    // A step that leaves by another GPU's NIC (a PXN relay): the relay forwards a chunk once it is
    // in, so the chunk also takes its time on the NVLink hop into the relay (under LL that hop is
    // no faster than the NIC: both at the protocol's ceiling).
    auto relayed = [&](int r, int dist) { return crosses(r, dist) && nicOf(r, dist) != realOf(r); };
    auto relayUs = [&](int r, int dist, double bytes) { return relayed(r, dist) ? bytes / c.bIn : 0.0; };
    std::vector<double> got(chain), gotBefore(chain), net(alike ? ranks : f.nics(), 0), dom(ranks, 0),
        netIn(ranks, 0), domIn(ranks, 0), sent(ranks);
    for (int r = 0; r < ranks; ++r) (foldCross ? netIn : domIn)[r] = chain[r];
    // Where the fold brings first the half the first halving step sends (algo::rhdFoldSendsFirst,
    // over the slices the planner's chunk makes), the chain's first chunk leaves once the fold's
    // first chunk is in.
    const uint64_t chunkElems = chunkElemsOf(chunk, dataTypeSize(dtype));
    const bool foldSendsFirst = algo::rhdFoldSendsFirst(pof2, count, chunkElems);
    // With two inner ranks the fold brings the kept half first, final after the one halving step.
    // Where the folding rank's steps before its unfold fit the executor's window the unfold
    // streams out as each slice of it is final, so the chain carries one chunk of it, not its
    // whole bytes, and its sending side prices the rest (below). Past the window the unfold waits
    // for the steps 512 before it (3 ranks at 1 GiB) and stays whole in the chain.
    // (Where the two inner ranks' steps cross domains and the fold does not, or the other way,
    // the unfold has a link of its own, and the walk below prices it as before.)
    const bool unfoldStreams = foldIn > 0 && foldOut > 0 &&
                               algo::rhdUnfoldInWindow(pof2, count, chunkElems) && crosses(0, 1) == foldCross;
    // The fold's first chunk: the fold and the unfold are cut at the halves' boundary, so no
    // chunk is more than a half (one chunk a half where the chunk is the whole vector: `dgx-h100:3`
    // 24 ranks rhd/LL 64 KiB 0.899 -> 0.947 for that).
    const double foldChunk = foldBytes * std::min(0.5, chunk / std::max(1.0, total));
    if (foldSendsFirst)
      for (int r = 0; r < ranks; ++r)
        if (folds(r) && foldIn > 0) chain[r] = foldLat + foldChunk;
    const RhdStep* prev = nullptr;
    double slowest = 0, links = 0;
    // The sending sides as the doubling begins (the unfold's bound below).
    std::vector<double> turnNet, turnDom;
    for (const RhdStep& st : steps) {
      const double v = total * st.dist / pof2;
      if (foldOut > 0 && !st.reduce && (!prev || prev->reduce)) turnNet = net, turnDom = dom;
      for (int r = 0; r < ranks; ++r) {
        sent[r] = -1;
        if (!alike && !receives(r ^ st.dist, st)) continue;  // the partner gets nothing from r
        const bool cross = crosses(r, st.dist);
        const bool lower = alike || (r & (st.reduce ? st.dist : st.dist / 2)) == 0;  // its own part first
        const double b = rate(st.reduce, cross);
        double dep = got[r];
        if (!lower && prev && prev->reduce == st.reduce)
          dep = st.reduce ? std::max(gotBefore[r], got[r] - v / rate(prev->reduce, crosses(r, prev->dist)))
                          : gotBefore[r];
        else if (!prev && folds(r) && foldSendsFirst)
          dep = got[r] - foldBytes * v / total;  // the fold's half it sends first
        double& link = cross ? net[nicOf(r, st.dist)] : dom[r];
        const double piece = std::min(v, static_cast<double>(chunk));
        link = sent[r] = std::max(link + v / b, dep + relayUs(r, st.dist, piece) + piece / b);
      }
      gotBefore = got;
      for (int r = 0; r < ranks; ++r) {
        const int from = alike ? r : r ^ st.dist;
        if (sent[from] < 0) continue;
        const bool cross = crosses(r, st.dist);
        double& in = cross ? netIn[r] : domIn[r];  // the receiving side of the rank's link
        in = std::max(in + v / rate(st.reduce, cross), sent[from]);
        got[r] = std::max(got[r], in + stepLat(r, st.dist));
      }
      prev = &st;
      for (int r = 0; r < ranks; ++r) {
        const int from = alike ? r : r ^ st.dist;
        if (!alike && !receives(r, st)) {
          next[r] = chain[r];  // nothing to receive this step
          continue;
        }
        const bool cross = crosses(r, st.dist);
        const double b = rate(st.reduce, cross), piece = std::min(v, static_cast<double>(chunk)),
                     one = piece / b;
        next[r] = std::max(chain[r], chain[from] + stepLat(r, st.dist) + relayUs(r, st.dist, piece)) + one;
        slowest = std::max(slowest, v / b - one);
      }
      chain.swap(next);
    }
    // The NICs' sending sides: each step across on the NIC that carries it (its sender's, or the
    // relay's).
    // Through relays a step's first leg also crosses NVLink: out of its sender's port (legOut, by
    // inner rank) and into the relay's (legIn, by the relay's GPU), beside their own steps. NVLink
    // is 8x a NIC under Simple, but under LL both run at the protocol's ceiling: `dgx-h100:4,
    // rails=1` 24 GPUs rhd/LL 16 MiB, the replay's busiest link (a relay's NVLink in, 0.875 S of
    // its own steps and 2 S of two GPUs' legs) busy 2,364 us where the model said 2,100 in all.
    std::vector<double> nicOut(net.size(), 0), legOut(ranks, 0), legIn(net.size(), 0);
    for (int r = 0; r < ranks; ++r)
      for (const RhdStep& st : steps) {
        if (!crosses(r, st.dist)) continue;
        const double v = total * st.dist / pof2;
        const int x = nicOf(r, st.dist);
        nicOut[x] += v / rate(st.reduce, true);
        if (x != realOf(r)) legOut[r] += v / c.bIn, legIn[x] += v / c.bIn;
      }
    for (int r = 0; r < ranks; ++r) {  // each rank's link bytes
      // Its network steps of both phases back to back on the network share, its domain steps on
      // the domain link. The network link also waits for the chain of the domain steps before its
      // first network step (halving: distances longer than any of its network steps) and after
      // its last (doubling: the same distances), one latency and chunk each; the domain steps in
      // between (the halving's shorter distances, then the doubling's) need only the first chunks
      // of the network step before them, so they run while it still sends.
      // Its NIC's sending side carries its own steps across, or where GPUs relay whatever reaches it.
      double linkIn = 0, linkOut = nicOut[realOf(r)], before = 0, after = 0;
      bool seen = false;
      for (const RhdStep& st : steps) {
        const double v = total * st.dist / pof2;
        const bool cross = crosses(r, st.dist);
        if (!cross) linkIn += v / rate(st.reduce, false);
        if (cross) {
          seen = true;
          after = 0;
          continue;
        }
        if (!alike && !receives(r, st)) continue;  // nothing to wait for
        const double hop = c.aIn + std::min(v, static_cast<double>(chunk)) / rate(st.reduce, false);
        (seen ? after : before) += hop;
      }
      // A folding rank sends its first step's half once that half of the fold is in: its first
      // chunk where it comes first; where it comes second, half the fold (the whole fold, tried,
      // put the replay 3-6% under the model on 12-24 ranks of DGX H100 and on 136 GPUs).
      if (folds(r) && !foldCross && foldIn > 0)
        before += foldLat + (foldSendsFirst ? foldChunk : foldBytes / 2);
      if (linkOut > 0) linkOut += c.aOut - c.aIn + before + after;
      // A folding rank's fold: its partner's vector in on the receiving side of the fold's link,
      // the result out on the sending side, each one direction's bytes beside that link's steps
      // (their latencies in series).
      double foldLats = 0;
      if (folds(r)) {
        (foldCross ? linkOut : linkIn) += foldBytes;
        foldLats = ((foldIn > 0) + (foldOut > 0)) * foldLat;
      }
      const double domLink = linkIn + std::max(legOut[r], legIn[realOf(r)]);
      links = std::max(links, std::max(domLink, linkOut) + c.aIn + foldLats);
      if (folds(r)) chain[r] += unfoldStreams ? foldLat + foldChunk : foldOut;
    }
    // The unfold sends the result back, the half it kept first, the other as the last doubling
    // step brings it: the lower rank gets the upper half last (one chunk after it), the upper rank
    // the lower half (half the fold after it: one chunk, tried, took 56 GPUs of DGX A100 on rails
    // at 1 MiB from 1.102 to 1.114); that half no sooner than its bytes after the step before
    // (the whole fold's before 2026-12-07: the kept half goes out as each chunk of it is final;
    // 24-72 ranks at 1 MiB 0.92-0.97 -> 0.97-1.04); and all of it no sooner than its link's sending
    // side has sent the steps' bytes and, from the doubling's first send on, the doubling's and the
    // unfold's bytes back to back (its chunks go out between the doubling's; the unfold after the
    // steps' sends instead: gb200-nvl72 72 ranks 16 MiB 0.896, now 0.956).
    double last = 0;
    for (int r = 0; r < ranks; ++r) {
      double end = got[r];
      if (folds(r) && foldOut > 0) {
        const bool lowerLast = alike || (r & (pof2 / 2)) == 0;
        const double sendSide =
            foldCross ? net[realOf(r)] : dom[r];  // the fold's link, after the steps' sends
        const std::vector<double>& turn = foldCross ? turnNet : turnDom;  // empty: no doubling
        double packed = 0;
        if (!unfoldStreams) {
          packed = (turn.empty() ? sendSide : turn[foldCross ? realOf(r) : r]) + foldBytes;
          for (const RhdStep& st : steps)
            if (!st.reduce && crosses(r, st.dist) == foldCross && (alike || receives(r ^ st.dist, st)))
              packed += total * st.dist / pof2 / rate(st.reduce, foldCross);
        } else {
          // Two inner ranks, the unfold in the window: the sending side takes each piece once it is
          // final, from when the fold's and the partner's first chunks of the kept half are in
          // (one port: one after the other). Either all its bytes back to back (the halving's
          // sends, the doubling's, the unfold), or, where the halving's first send (the fold's
          // second half) queues behind the kept half's (to the partner and to the folded rank),
          // that send, the partner's reply to it, and then the unfold's other half
          // (3 ranks, 64 KiB-680 MiB: the replay 0.80-1.04x the bounds above, 1.000 with these).
          const double v = total / 2, piece = std::min(v, static_cast<double>(chunk));
          const double hb = rate(true, foldCross), db = rate(false, foldCross);  // halving, doubling
          const double start = foldLat + 2 * foldChunk;
          const double backToBack = start + v / hb + v / db + foldBytes;
          const double afterReply = start + v / db + foldBytes / 2 + piece / hb + stepLat(r, 1) + piece / db +
                                    foldLat + foldBytes / 2;
          packed = std::max(backToBack, afterReply);
        }
        const double tail = lowerLast ? foldChunk : foldBytes / 2;
        end = std::max({got[r] + tail, gotBefore[r] + foldBytes / 2, std::max(sendSide, packed)}) + foldLat;
      }
      last = std::max(last, end);
    }
    // A relay that is not an inner rank (a folded-away GPU, or a GPU of the domain that is no rank)
    // sends only what it relays.
    if (f.rails && f.rails->relays && !alike)
      for (int x = 0; x < f.nics(); ++x)
        if (x >= n || (x < 2 * rem && x % 2 == 0))
          links = std::max({links, nicOut[x] + c.aOut, legIn[x] + c.aIn});
    return std::max({links, *std::max_element(chain.begin(), chain.end()) + slowest, last});
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
    foldCrosses = c.multi && (!knownDomains || domainOf(2 * v) != domainOf(2 * v + 1));
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
        case PlanAlgo::NvlsRing: {
          // nvls_switch with a ring of the m domains in place of the switch: GPU i of every domain
          // all-reduces slice i (c/d of each chunk) with its counterparts, 2(m-1) steps of c/(dm)
          // over its own NIC, every slice's ring beside the others (rails).
          if (!c.multi) return unsupported("single domain (see nvls)");
          if (f.nvlsGBps <= 0) return unsupported("no reduce-capable NVSwitch");
          if (!f.uniform) return unsupported("needs equal, contiguous domains");
          if (!f.nvlsCap.supports(dtype, op))
            return unsupported("the NVSwitch does not reduce this dtype/op");
          // The level across: (m-1)/m of each GPU's S/d each way on its NIC; a chunk's slice through
          // the ring's 2(m-1) steps, each a step's latency and c/(dm).
          const double m = f.domains, d = f.perDomain, steps = 2 * (m - 1), lat = f.latLevelInterUs;
          const double bNet = c.bLoaded, bRed = std::min(bNet, c.R);
          const double acrossUs = (m - 1) / m * (S / d) * (1 / bRed + 1 / bNet);
          // Paced by the NICs: a step's latency is not the NIC's time, so while one chunk's step is
          // under way the NIC sends the other chunks' steps. The chunks enter the ring over feedUs
          // (the NVSwitch's pace), bringing acrossUs/feedUs of NIC work per us once every step is
          // under way; step s starts (s-1) latencies after the first chunk, so at t the NIC gets
          // t/(steps x lat) of that, and idles until it reaches 1 (at steps x lat x feedUs/acrossUs):
          // half that time in all. Then all its work, and one latency for the last step. (Nor can
          // it end before every latency but one and a step's share: step `steps` of any chunk.)
          t = nvlsAround(
              acrossUs, steps * lat, static_cast<int>(steps),
              [&](double cb) { return (m - 1) * cb / (d * m) * (1 / bRed + 1 / bNet); },
              [&](double feedUs, double) {
                const double warmIdle = steps * lat / 2 * std::min(1.0, feedUs / acrossUs);
                return std::max(acrossUs + warmIdle, (steps - 1) * lat + acrossUs / steps) + lat;
              });
          p.reason =
              "NVLS reduce-scatter, ring all-reduce of S/d across the domains on each GPU's NIC, NVLS "
              "all-gather, pipelined";
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
