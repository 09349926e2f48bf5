// The double binary tree's price (treeAllReduceUs), rank by rank on the schedule's own trees:
// docs/PLANNER.md "The tree under two channels".
#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <vector>

#include "plan/cost_formulas.hpp"

namespace trib {

PredictScratch::PredictScratch() : impl_(std::make_unique<Impl>()) {}
PredictScratch::~PredictScratch() = default;

namespace cost {

// The double binary tree all-reduce on 3+ ranks, its trees two channels that share each link round
// robin (SimOptions::LinkOrder::Channels), rank by rank on the schedule's own trees
// (docs/PLANNER.md "The tree under two channels"). An edge costs its hop's latency a (one step,
// the chunk's software step in it: it overlaps the previous chunk's transfer) and a chunk's time
// tau on its link, inside a domain or across. Three bounds, the latest wins:
// - busy: a rank whose link in carries the most (bwTime: its edges x S/2) is busy from the first
//   chunk that reaches it (the earliest of its streams: a child's first partial sum, or a parent's
//   first result), from when that chunk starts on it (its arrival less its chunk time, which
//   bwTime already holds), for bwTime, after which the last slice still descends below it (each
//   edge a latency and a chunk, two where a rank sends to both children over one link);
// - fill: on that busiest link, from when its last stream starts there, what is left of its
//   bytes after the streams before could send them only as fast as they were fed (an up stream
//   no faster than the children's shares of their links), then the last stream's descent;
// - trip: the first slice's round trip to the last leaf (the second child's chunk queued behind
//   the first on a shared link in, both children served over one link out), then the other k - 1
//   slices behind it at the pace of the busiest up link per slice (the up streams that share it;
//   one where the streams before the last are leaves' streams gone before it starts).
// O(n) per call, on FabricView::treeShape.
double treeAllReduceUs(const FabricView& f, double S, double chunk, double aIn, double aOut, double bIn,
                       double bOut, double bwTime, PredictScratch* scratch) {
  const FabricView::TreeShape& sh = *f.treeShape;
  const int n = f.n;
  const double c = std::min(chunk, S / 2);
  const double tauIn = c / bIn, tauOut = c / bOut;
  auto across = [&](int x, int y) { return sh.domain[x] != sh.domain[y]; };
  // An edge to the next domain costs its hops (aOut); one to any other the farthest domain's
  // (the network is built in rank order: neighbours share the nearest switches).
  const double aFar = aOut + (f.latFarUs - f.latInterUs);
  auto alpha = [&](int x, int y) {
    if (!across(x, y)) return aIn;
    const double rails = f.crossesRails(x, y) ? f.crossRailLatUs : 0;  // a relay's hop, or a spine
    return rails + (std::abs(sh.domain[x] - sh.domain[y]) <= 1 ? aOut : aFar);
  };
  auto tau = [&](int x, int y) { return across(x, y) ? tauOut : tauIn; };
  constexpr double kInf = 1e300;
  std::vector<double> up(n), first(n), trip(n), maxDescent(n, 0.0), treeDescent[2], treeBeyond[2];
  std::vector<std::array<double, 2>> start(n, {kInf, kInf});  // [inside, across]
  std::vector<std::array<int, 2>> edges(n, {0, 0});
  // The up streams through each rank's link in and link out, per class: when each one's first
  // chunk is there (in: arrives, as `up` counts it; out: is ready to leave), at most 4 in, 2 out.
  // src: on a link in, the child whose stream it is where that child is a leaf in its tree (its
  // half ready at the start), on a link out kLeaf for the rank's own leaf stream; else -1.
  constexpr int kLeaf = -2;
  using Streams = PredictScratch::Impl::Streams;
  PredictScratch own;  // when the caller lends none
  auto& lists = (scratch ? scratch : &own)->impl().lists;
  for (auto& l : lists) {
    if (l.size() < static_cast<size_t>(n)) l.resize(n);
    for (int x = 0; x < n; ++x) l[x][0].m = l[x][1].m = 0;
  }
  auto &upIn = lists[0], &upOut = lists[1], &downIn = lists[2], &downOut = lists[3];
  double lastTrip = 0;
  for (int t = 0; t < 2; ++t) {
    const auto& nd = sh.node[t];
    const auto& order = sh.order[t];
    // Children served over the same link as child ch of x (1 or 2).
    auto sharing = [&](int x, int ch) {
      int m = 0;
      for (int o : {nd[x][1], nd[x][2]}) m += o >= 0 && across(o, x) == across(ch, x);
      return m;
    };
    for (int x : order) {  // up: the first partial sum at x (children first)
      double v = 0, lo = kInf;
      int kids = 0;
      for (int ch : {nd[x][1], nd[x][2]}) {
        if (ch < 0) continue;
        const double at = up[ch] + alpha(ch, x) + tau(ch, x);
        double& st = start[x][across(ch, x)];
        st = std::min(st, at);
        v = std::max(v, at);
        lo = std::min(lo, at);
        ++kids;
        ++edges[x][across(ch, x)];
      }
      auto leafOf = [&](int ch) { return nd[ch][1] < 0 && nd[ch][2] < 0 ? ch : -1; };
      const bool shared = kids == 2 && across(nd[x][1], x) == across(nd[x][2], x);
      if (shared) {  // the later child's first chunk queues behind the earlier one's
        const double at1 = up[nd[x][1]] + alpha(nd[x][1], x) + tau(nd[x][1], x);
        const int early = at1 <= lo ? nd[x][1] : nd[x][2], late = early == nd[x][1] ? nd[x][2] : nd[x][1];
        v = std::max(v, lo + tau(nd[x][1], x));
        upIn[x][across(nd[x][1], x)].add(lo, leafOf(early), early, t);
        upIn[x][across(nd[x][1], x)].add(v, leafOf(late), late, t);
      } else {
        for (int ch : {nd[x][1], nd[x][2]})
          if (ch >= 0) upIn[x][across(ch, x)].add(up[ch] + alpha(ch, x) + tau(ch, x), leafOf(ch), ch, t);
      }
      up[x] = v;
      if (nd[x][0] >= 0) {
        ++edges[x][across(x, nd[x][0])];
        upOut[x][across(x, nd[x][0])].add(v, kids ? -1 : kLeaf, x, t);  // a leaf's is ready at the start
      }
    }
    for (auto it = order.rbegin(); it != order.rend(); ++it) {  // down: the first result at x
      const int x = *it, p = nd[x][0];
      if (p < 0) {
        first[x] = trip[x] = up[x];
      } else {
        first[x] = first[p] + alpha(p, x) + tau(p, x);
        trip[x] = trip[p] + alpha(p, x) + sharing(p, x) * tau(p, x);
        downIn[x][across(p, x)].add(first[x], -1, -1, t);
        downOut[p][across(p, x)].add(first[p], -1, -1, t);
        double& st = start[x][across(p, x)];
        st = std::min(st, first[x]);
      }
      lastTrip = std::max(lastTrip, trip[x]);
    }
    std::vector<double>&descent = treeDescent[t], &beyond = treeBeyond[t];
    descent.assign(n, 0.0);
    beyond.assign(n, 0.0);
    for (int x : order) {  // the last slice's descent below x (beyond: once it has left x's link)
      double v = 0;
      for (int ch : {nd[x][1], nd[x][2]}) {
        if (ch < 0) continue;
        v = std::max(v, alpha(x, ch) + sharing(x, ch) * tau(x, ch) + descent[ch]);
        beyond[x] = std::max(beyond[x], alpha(x, ch) + descent[ch]);
      }
      descent[x] = v;
      maxDescent[x] = std::max(maxDescent[x], v);
    }
  }
  // The slices after the first on the busiest up link: k - 1 slices, each a chunk time per up
  // stream sharing the link (a rank's children's streams into its link in, its two trees' streams
  // out over one link), as before, except where the link is provably free of every other stream
  // when the last one starts there: the streams before it (up or down, r: when their first chunk
  // is there) are all leaves' streams (S/2 ready at the start, going at the link's rate: on a link
  // out the rank's own, on a link in a leaf child's whose link out nothing else uses until it is
  // gone) and all of their bytes fit between the first start and the last. Then the last stream
  // runs alone, one chunk time a slice (3 ranks at 2 MiB: a leaf's half is gone before its
  // neighbour's partial sums start). A stream fed from upstream may come slower than its link,
  // so it is never taken as gone early.
  const double slices = std::ceil(S / 2 / c);
  // A leaf's stream has rank y's link out of class a to itself until it is gone (S/2 at the link's
  // rate from the start) when nothing else starts there sooner.
  auto alone = [&](int y, int a, double w) {
    for (const Streams* q : {&upOut[y][a], &downOut[y][a]})
      for (int j = 0; j < q->m; ++j)
        if (q->src[j] != kLeaf && q->r[j] < w) return false;
    return true;
  };
  auto upLink = [&](const Streams& st, const Streams& down, int a, bool in, double t, double b) {
    const double w = S / 2 / b, last = *std::max_element(st.r.begin(), st.r.begin() + st.m);
    double lo = last;
    int before = 0;
    bool leaves = true;  // every stream there before the last is a leaf's, at its link's rate
    for (const Streams* q : {&st, &down})
      for (int j = 0; j < q->m; ++j)
        if (q->r[j] < last) {
          lo = std::min(lo, q->r[j]), ++before;
          leaves = leaves && (in ? q->src[j] >= 0 && alone(q->src[j], a, w) : q->src[j] == kLeaf);
        }
    const int m = before == 0 || (leaves && lo + before * w <= last) ? 1 : st.m;
    return (slices - 1) * t * m;
  };
  // The busiest links: the most edges of their class where that class's load is the largest.
  int most[2] = {0, 0};
  double pace = 0;
  for (int x = 0; x < n; ++x) {
    for (int a = 0; a < 2; ++a) {
      most[a] = std::max(most[a], edges[x][a]);
      const double t = a ? tauOut : tauIn, b = a ? bOut : bIn;
      if (upIn[x][a].m) pace = std::max(pace, upLink(upIn[x][a], downIn[x][a], a, true, t, b));
      if (upOut[x][a].m) pace = std::max(pace, upLink(upOut[x][a], downOut[x][a], a, false, t, b));
    }
  }
  const double load[2] = {most[0] * S / 2 / bIn, most[1] * S / 2 / bOut};
  const double top = std::max(load[0], load[1]);
  // Each rank's up stream can leave it no faster than its children's partial sums come in: a
  // child's stream has the rate of its links' shares among the up streams on them (its link out,
  // the parent's link in), and no more than the child's own inputs give (leaves: their link).
  // Before its parent's results come down, a link may carry only up streams so fed, slower than
  // the link, and the link's bytes are not back to back from its first chunk (the fill bound).
  const double rate[2] = {bIn, bOut};
  std::vector<double> feed[2] = {std::vector<double>(n, kInf), std::vector<double>(n, kInf)};
  for (int t = 0; t < 2; ++t)
    for (int x : sh.order[t])
      for (int ch : {sh.node[t][x][1], sh.node[t][x][2]}) {
        if (ch < 0) continue;
        const int a = across(ch, x);
        feed[t][x] = std::min({feed[t][x], feed[t][ch], rate[a] / upOut[ch][a].m, rate[a] / upIn[x][a].m});
      }
  // The link's last byte no sooner than: from when its last stream starts there (T), what is left
  // of its bytes after the streams before T sent what their feeds allowed, at the link's rate.
  auto fill = [&](int x, const Streams& ups, const Streams& downs, int a, bool in) {
    const double tau = in ? (a ? tauOut : tauIn) : 0, v = S / 2, b = rate[a];  // out: r is ready to leave
    double lo = kInf, last = 0, w = 0;
    for (const Streams* q : {&ups, &downs})
      for (int j = 0; j < q->m; ++j)
        lo = std::min(lo, q->r[j] - tau), last = std::max(last, q->r[j] - tau), w += v;
    double sent = 0;
    for (int j = 0; j < ups.m; ++j) {
      const int y = ups.feeder[j];
      const double f = in ? std::min(feed[ups.tree[j]][y], b / upOut[y][a].m) : feed[ups.tree[j]][y];
      const double dt = std::max(0.0, last - (ups.r[j] - tau));
      sent += std::min({v, dt * b, c + dt * f});  // its first chunk is whole when it starts
    }
    for (int j = 0; j < downs.m; ++j) sent += std::min(v, std::max(0.0, last - (downs.r[j] - tau)) * b);
    sent = std::min(sent, (last - lo) * b);
    // The stream that starts last there has sent nothing by then, so it ends last (round robin);
    // where it is a parent's results, its last slice still descends below x in its tree: on x's
    // link in, all of the descent; on its link out, what follows the link (its bytes are in w).
    double below = 0;
    for (int j = 0; j < downs.m; ++j)
      if (downs.r[j] - tau >= last)
        below = std::max(below, (in ? treeDescent : treeBeyond)[downs.tree[j]][x]);
    return last + (w - sent) / b + below;
  };
  double busy = 0;
  for (int x = 0; x < n; ++x)
    for (int a = 0; a < 2; ++a)
      if (most[a] > 0 && edges[x][a] == most[a] && load[a] >= top * (1 - 1e-12) && start[x][a] < kInf) {
        busy = std::max(busy, start[x][a] - (a ? tauOut : tauIn) + maxDescent[x] + bwTime);
        busy = std::max(busy, fill(x, upIn[x][a], downIn[x][a], a, true));
        busy = std::max(busy, fill(x, upOut[x][a], downOut[x][a], a, false));
      }
  return std::max(busy, lastTrip + pace);
}

}  // namespace cost
}  // namespace trib
