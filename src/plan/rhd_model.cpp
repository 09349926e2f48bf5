// rhd's price (RhdWalk): rank by rank through src/algo/rhd.cpp's steps, its folds, and the links
// the steps share. Derivations: docs/PLANNER.md ("rhd", "The fold's order").
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "algo/algorithms.hpp"
#include "plan/cost_formulas.hpp"

namespace trib::cost {

RhdWalk::RhdWalk(const Ctx& c, int n, uint64_t count, size_t esize)
    : c_(c), n_(n), count_(count), esize_(esize) {
  while (pof2 * 2 <= n) pof2 *= 2;
  rem = n - pof2;
  // Real rank r's domain: by position where ranks are contiguous by equal domains, else from the
  // tree shape's per-rank domains (computeFabric keeps them); without either, every step of a
  // multi-domain group is counted across.
  knownDomains = c.f.uniform || c.f.treeShape;
  // A step to a domain further than the next one costs the farthest domain's hops.
  aFar_ = c.aOut + (c.multi ? c.f.latFarUs - c.f.latInterUs : 0);
}

int RhdWalk::domainOf(int r) const {
  const FabricView& f = c_.f;
  return f.uniform || !f.treeShape ? r / std::max(1, f.perDomain) : f.treeShape->domain[r];
}

bool RhdWalk::crosses(int v, int dist) const {
  return c_.multi && (!knownDomains || innerDomain(v) != innerDomain(v ^ dist));
}

// A step's latency: inside a domain, to the next one, or (ranks contiguous by domain, the network
// built in rank order) to one further away at the farthest domain's hops.
double RhdWalk::stepLat(int v, int dist) const {
  if (!crosses(v, dist)) return c_.aIn;
  // Between rails the route adds the NVLink hop into the relay (PXN) or a spine.
  const double rails = c_.f.crossesRails(innerReal(v), innerReal(v ^ dist)) ? c_.f.crossRailLatUs : 0;
  return rails + (knownDomains && std::abs(innerDomain(v) - innerDomain(v ^ dist)) > 1 ? aFar_ : c_.aOut);
}

double RhdWalk::walk(bool halve, bool dbl, double total, double foldIn, double foldOut, double foldLat,
                     bool foldCross, uint64_t chunk, double cutoffUs) const {
  const Ctx& c = c_;
  const FabricView& f = c.f;
  const CostConstants& k = c.k;
  const int n = n_;
  const uint64_t count = count_;
  constexpr double kPrunedUs = kPruned;
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
  const uint64_t chunkElems = chunkElemsOf(chunk, esize_);
  const bool foldSendsFirst = algo::rhdFoldSendsFirst(pof2, count, chunkElems);
  // With two inner ranks the fold brings the kept half first, final after the one halving step.
  // Where the folding rank's steps before its unfold fit the executor's window the unfold
  // streams out as each slice of it is final, so the chain carries one chunk of it, not its
  // whole bytes, and its sending side prices the rest (below). Past the window the unfold waits
  // for the steps 512 before it (3 ranks at 1 GiB) and stays whole in the chain.
  // (Where the two inner ranks' steps cross domains and the fold does not, or the other way,
  // the unfold has a link of its own, and the walk below prices it as before.)
  const bool unfoldStreams = foldIn > 0 && foldOut > 0 && algo::rhdUnfoldInWindow(pof2, count, chunkElems) &&
                             crosses(0, 1) == foldCross;
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
      const double sendSide = foldCross ? net[realOf(r)] : dom[r];  // the fold's link, after the steps' sends
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
}

}  // namespace trib::cost
