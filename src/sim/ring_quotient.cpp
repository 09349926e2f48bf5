// The ring's quotient by the rack shift (ring_quotient.hpp): the checks that make it sound.
#include "sim/ring_quotient.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "common/text.hpp"
#include "topo/route.hpp"

namespace trib {
namespace {

// One hop of a route as the replay books it: the equal-cost links it sprays over (one server at
// their summed rate, Engine::spread), its latency (the slowest member's), whether it is a network
// link (the step overhead).
struct Hop {
  double rate = 0, lat = 0;
  bool net = false;
  bool group = false;  // held only for a message's share of the rate, not until its tail leaves
  auto operator<=>(const Hop&) const = default;
  // Never faster than h: a message alone on both takes at least as long on this one.
  bool slowerEq(const Hop& h) const {
    return net == h.net && rate <= h.rate && lat >= h.lat && (h.group || !group);
  }
};
using HopList = std::vector<Hop>;

// Whether route b is never faster than route a for a message alone on both (no other traffic on
// their links): a's hops, first to first, match hops of b in order, each at least as slow. A hop of
// b left over only delays the message (cut-through: its head passes one more latency, its tail
// cannot pass the previous one's), and the replay's times are maxima and sums of these, so a
// later arrival never makes anything earlier (docs/PLANNER.md, "Symmetry: the ring").
bool slowerEq(const HopList& b, const HopList& a) {
  if (a.empty() || b.empty()) return a.empty() && b.empty();
  if (!b[0].slowerEq(a[0])) return false;
  size_t i = 1;
  for (size_t j = 1; j < b.size() && i < a.size(); ++j)
    if (b[j].slowerEq(a[i])) ++i;
  // The step overhead: a network one where any hop is a network link (Links::overhead).
  auto net = [](const HopList& h) {
    return std::any_of(h.begin(), h.end(), [](const Hop& x) { return x.net; });
  };
  return i == a.size() && (net(b) || !net(a));
}

// Whether rank b's steps are rank a's with peers shifted by b - a, buffers and sizes alike.
bool shiftedAlike(const AlgoInfo& algo, const CollArgs& args, int a, int b) {
  const int n = args.nranks;
  Generator<Step> ga = algo.generate(args, a), gb = algo.generate(args, b);
  for (;;) {
    const bool more = ga.next();
    if (more != gb.next()) return false;
    if (!more) return true;
    const Step &x = ga.value(), &y = gb.value();
    if (x.kind != y.kind || x.src.buf != y.src.buf || x.dst.buf != y.dst.buf || x.src.count != y.src.count ||
        x.dst.count != y.dst.count || (x.peer < 0) != (y.peer < 0) ||
        (x.peer >= 0 && ((x.peer - a) % n + n) % n != ((y.peer - b) % n + n) % n))
      return false;
  }
}
// Whether a rank's steps for x and for y differ in their sizes at most.
bool sameShape(const AlgoInfo& algo, const CollArgs& x, const CollArgs& y, int rank) {
  Generator<Step> gx = algo.generate(x, rank), gy = algo.generate(y, rank);
  for (;;) {
    const bool more = gx.next();
    if (more != gy.next()) return false;
    if (!more) return true;
    if (gx.value().kind != gy.value().kind || gx.value().peer != gy.value().peer) return false;
  }
}

}  // namespace

bool findRingQuotient(const Topology& t, const std::vector<int>& nodes, const AlgoInfo& algo,
                      const CollArgs& args, const SimOptions& opt, RingQuotient* q) {
  const int n = args.nranks;
  if (n < 4) return q->why = "fewer than 4 ranks", false;
  if (!opt.spreadRoutes)
    return q->why = "hashed routes: each pair's spine is a hash of its nodes, not alike under a shift", false;
  // Every hop's route and cost; every link on at most one hop (else hops queue on each other).
  Router router(t);
  std::vector<HopList> hops(n);
  std::vector<int> owner(2 * static_cast<size_t>(t.numLinks()), -1);
  std::vector<DirLink> path;
  std::vector<std::vector<DirLink>> alts;
  auto hopsOf = [&](const Topology& topo, Router& rt, int r, HopList* out) {
    rt.paths(nodes[r], nodes[(r + 1) % n], &path, &alts);
    for (const auto& set : alts) {
      Hop h;
      h.group = set.size() > 1;
      for (DirLink d : set) {
        const Link& l = topo.link(dirLinkId(d));
        h.rate += dirLinkBw(topo, d) * opt.k.eff[static_cast<int>(l.type)];
        h.lat = std::max(h.lat, l.latencyUs);
        h.net |= l.type == LinkType::Net;
      }
      out->push_back(h);
    }
  };
  for (int r = 0; r < n; ++r) {
    if (nodes[r] == nodes[(r + 1) % n])
      return q->why = strprintf("ranks %d and %d share a node", r, (r + 1) % n), false;
    hopsOf(t, router, r, &hops[r]);
    if (path.empty()) return q->why = strprintf("no route from rank %d to %d", r, (r + 1) % n), false;
    for (const auto& set : alts)
      for (DirLink d : set) {
        if (owner[d] >= 0)
          return q->why = strprintf("hops %d and %d -> %d share a link", owner[d], r, (r + 1) % n), false;
        owner[d] = r;
      }
  }
  auto nodeAlike = [&](int r, int s) {
    const Node &x = t.node(nodes[r]), &y = t.node(nodes[s]);
    return x.type == y.type && x.reduceGBps == y.reduceGBps;
  };
  // A period K (dividing n) of the nodes and of the hops inside each K-rank window: of those, the
  // one whose hops out of the windows (r = K-1 mod K) fall in the fewest classes, then the shortest
  // (a rack on nvl72-cluster, not 2 ranks whose hops out are NVLink and network hops alike).
  int K = 0;
  std::map<HopList, int> classes;  // of the hops out -> the first window with it
  for (int k = 2; k <= n / 2; ++k) {
    if (n % k) continue;
    bool ok = true;
    for (int r = k; r < n && ok; ++r) ok = nodeAlike(r, r % k) && (r % k == k - 1 || hops[r] == hops[r % k]);
    if (!ok) continue;
    std::map<HopList, int> c;
    for (int r = k - 1; r < n; r += k) c.emplace(hops[r], r + 1 - k);
    if (!K || c.size() < classes.size()) K = k, classes = std::move(c);
    if (classes.size() == 1) break;
  }
  if (!K)
    return q->why = "no shift of fewer than n/2 ranks maps the ranks' nodes and hops onto alike ones", false;
  // The fastest and the slowest class must exist.
  bool fast = false, slow = false;
  for (const auto& [c, first] : classes) {
    bool allSlower = true, allFaster = true;
    for (const auto& [o, f] : classes) allSlower &= slowerEq(o, c), allFaster &= slowerEq(c, o);
    if (allSlower) fast = true, q->lowFirst = first;
    if (allFaster) slow = true, q->highFirst = first;
  }
  q->period = K, q->classes = classes.size(), q->hopsOut = static_cast<size_t>(n / K);
  if (fast && !slow) {
    // No class is the slowest: take a longest one and slow each of its hops to the slowest of
    // that place among the classes of its length. If that dominates every class, the upper window
    // runs on a copy of the topology whose links on that window's hop out are so slowed (they
    // carry that hop alone: the hops share no link).
    size_t longest = 0;
    for (const auto& c : classes) longest = std::max(longest, c.first.size());
    HopList synth;
    for (const auto& [c, first] : classes) {
      if (c.size() != longest) continue;
      if (synth.empty()) {
        synth = c, q->highFirst = first;
        continue;
      }
      for (size_t i = 0; i < longest; ++i)
        synth[i].rate = std::min(synth[i].rate, c[i].rate), synth[i].lat = std::max(synth[i].lat, c[i].lat);
    }
    bool all = true;
    for (const auto& c : classes) all &= slowerEq(synth, c.first);
    if (all) {
      Topology& u = q->upper.emplace(t);
      const int r = q->highFirst + K - 1;
      HopList was;
      hopsOf(t, router, r, &was);
      for (size_t i = 0; i < alts.size(); ++i)
        for (DirLink d : alts[i]) {
          Link& l = u.link(dirLinkId(d));
          ((d & 1) ? l.bwBA : l.bwAB) *= synth[i].rate / was[i].rate;
          l.latencyUs = std::max(l.latencyUs, synth[i].lat);
        }
      // The slowed links must leave the routes as they were (the router weighs links).
      Router ru(u);
      HopList now;
      hopsOf(u, ru, r, &now);
      bool same = now.size() == synth.size();
      for (size_t i = 0; same && i < now.size(); ++i)
        same = std::abs(now[i].rate - synth[i].rate) <= 1e-9 * synth[i].rate && now[i].lat == synth[i].lat &&
               now[i].net == synth[i].net;
      for (int w = q->highFirst; same && w < r; ++w) {
        HopList in;
        hopsOf(u, ru, w, &in);
        same = in == hops[w];
      }
      if (same)
        slow = true;
      else
        q->upper.reset();
    }
  }
  if (!fast || !slow)
    return q->why = strprintf(
               "the hops out of the %d-rank windows fall in %zu classes, none slowest and "
               "fastest of all",
               K, classes.size()),
           false;
  // The schedule: rank-relative (rank K's steps are rank 0's shifted), with equal blocks.
  const uint64_t per = args.count / static_cast<uint64_t>(n);
  if (per == 0) return q->why = "fewer elements than ranks", false;
  q->lowCount = per * static_cast<uint64_t>(n);
  q->highCount = q->lowCount + (args.count % static_cast<uint64_t>(n) ? static_cast<uint64_t>(n) : 0);
  for (const uint64_t count : {q->lowCount, q->highCount}) {
    CollArgs c = args;
    c.count = count;
    if (!sameShape(algo, args, c, 0))
      return q->why = "blocks rounded to a multiple of the ranks change the schedule's steps", false;
    for (const int a : {0, K - 1})
      if (!shiftedAlike(algo, c, a, a + K) || !shiftedAlike(algo, c, a, n - K + a))
        return q->why = strprintf("rank %d's steps are not rank %d's shifted", a + K, a), false;
  }
  q->exact = classes.size() == 1 && q->lowCount == q->highCount;
  return true;
}

}  // namespace trib
