// The NVLS replay (simulateInNetwork): NVLS in each NVLink domain and, across domains, a switch's
// reduction (nvls_switch) or a ring of the domains (nvls_ring), chunk by chunk over the links'
// servers (links.hpp). The other algorithms replay their schedules step by step (sim.cpp).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <span>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "algo/algorithms.hpp"
#include "sim/links.hpp"
#include "sim/sim.hpp"
#include "sim/sim_result.hpp"

namespace trib {

using namespace replay;

namespace {

int nvSwitchOf(const Topology& t, int node) {
  for (auto [lid, nb] : t.adjacent(node))
    if (t.node(nb).type == NodeType::NvSwitch && t.node(nb).reduce.can()) return nb;
  return -1;
}

// The route between two members' nodes as found (raw) and with each hop that has equal-cost
// alternatives on their shared server (spines: one per set of parallel links, shared by every ring
// and tree of the level, so that a leaf's uplinks are one).
Status spreadRoute(const Topology& t, Router& router, SpineGroups& spines, const char* what, int from, int to,
                   std::vector<DirLink>* raw, std::vector<DirLink>* spread) {
  std::vector<std::vector<DirLink>> alt;
  router.paths(from, to, raw, &alt);
  if (raw->empty())
    return errorf(tribInvalidArgument, "%s: no route from '%s' to '%s'", what, t.node(from).name.c_str(),
                  t.node(to).name.c_str());
  *spread = *raw;
  for (size_t h = 0; h < alt.size(); ++h)
    if (alt[h].size() > 1) (*spread)[h] = spines.spread(alt[h], (*spread)[h]);
  return Status::Ok();
}

// nvls_ring's stage 3 for one slice: GPU i of every domain (member x) all-reduces its slice with
// the others by a ring, 2(m-1) steps of bytes/m from member x to member x+1 over the route between
// them, each step leaving a software step after its data are in (the reduce-scatter's after the
// received block is reduced into the member's own). A step at a time, each at its own time in the
// simulation's event order: booked at once, a chunk's later steps held the links ahead of the next
// chunk's first (the ring reuses each link 2(m-1) times a chunk; the chunks then went at the
// pace of one ring's chain, 1.76x the model on 2 x DGX H100 at 256 MiB).
class RingGroup {
 public:
  // spines: the servers of equal-cost hops, shared by every ring so that a leaf's uplinks are one.
  Status init(const Topology& t, Router& router, const std::vector<int>& members, const CostConstants& k,
              SpineGroups& spines) {
    const size_t m = members.size();
    paths_.assign(m, {});
    raw_.assign(m, {});
    reduceBpu_.resize(m);
    for (size_t x = 0; x < m; ++x) {
      const int from = members[x], to = members[(x + 1) % m];
      TRIB_RETURN_IF_ERROR(spreadRoute(t, router, spines, "nvls_ring", from, to, &raw_[x], &paths_[x]));
      reduceBpu_[x] = reduceBpu(t.node(from), k);
    }
    return Status::Ok();
  }
  // One ring's progress: the next step, and when each member has what that step sends (its own
  // slice's arrival to begin with; the results once done).
  struct Run {
    size_t step = 0;
    std::vector<double> have, own;
  };
  // Books step run.step of every member (bytes: the slice); true once the ring is done.
  bool step(Links& links, double bytes, Run& run, uint64_t* messages) {
    const size_t m = paths_.size();
    const double block = bytes / static_cast<double>(m);
    const bool reduce = run.step + 1 < m;  // 2(m-1) steps: m-1 reducing, then m-1 passing on
    got_.resize(m);
    for (size_t x = 0; x < m; ++x) {
      const size_t y = (x + 1) % m;
      const double at = links.send(paths_[x], run.have[x] + links.overhead(paths_[x]), block, nullptr);
      got_[y] = reduce ? std::max(at, run.own[y]) + block / reduceBpu_[y] : at;
    }
    for (size_t y = 0; y < m; ++y) run.have[y] = std::max(run.have[y], got_[y]);
    *messages += m;
    return ++run.step + 2 >= 2 * m;
  }
  // The directed links the ring's routes take (the hops' own links, not their spread servers).
  template <class F>
  void forEachLink(F f) const {
    for (const auto& p : raw_)
      for (DirLink d : p) f(d);
  }

 private:
  std::vector<std::vector<DirLink>> paths_, raw_;  // per member: the route to the next (spread; as found)
  std::vector<double> reduceBpu_, got_;
};

// nvls_tree's stage 3 for one slice: GPU i of every domain (member x) all-reduces its slice with
// the others over the double binary tree of the members (algo::doubleTreeNode), half the slice on
// each tree: up, a member's half, reduced with its children's as they come in, to its parent; then
// back down, the root's result from each member to its children. Each member's send is an event at
// the time its data are there (NvlsSim stages 7-10), so every link books its messages in time order
// (a level booked at once held a NIC for a member whose data came later, ahead of another chunk's
// earlier send: 3x the model on 248 nodes), and each message waits at its last switch's port for
// its turn among the senders there (stages 11 and 12).
class TreeGroup {
 public:
  Status init(const Topology& t, Router& router, const std::vector<int>& members, const CostConstants& k,
              SpineGroups& spines) {
    const int m = static_cast<int>(members.size());
    reduceBpu_.resize(m);
    for (int x = 0; x < m; ++x) reduceBpu_[x] = reduceBpu(t.node(members[x]), k);
    auto route = [&](int from, int to, std::vector<DirLink>* spread) {
      raw_.emplace_back();
      return spreadRoute(t, router, spines, "nvls_tree", members[from], members[to], &raw_.back(), spread);
    };
    for (int tr = 0; tr < 2; ++tr) {
      Tree& tree = trees_[tr];
      tree.parent.assign(m, -1), tree.up.assign(m, {}), tree.kids.assign(m, {}), tree.down.assign(m, {});
      for (int x = 0; x < m; ++x) {
        const algo::TreeLinks l = algo::doubleTreeNode(m, x, tr);
        tree.parent[x] = l.parent;
        for (int c : l.child)
          if (c >= 0) tree.kids[x].push_back(c);
      }
      tree.upPort.assign(m, 0), tree.downPort.assign(m, {});
      for (int x = 0; x < m; ++x) {
        if (tree.parent[x] >= 0) {
          TRIB_RETURN_IF_ERROR(route(x, tree.parent[x], &tree.up[x]));
          tree.upPort[x] = egressIndex(t, tree.up[x]);
        }
        for (int c : tree.kids[x]) {
          tree.down[x].emplace_back();
          TRIB_RETURN_IF_ERROR(route(x, c, &tree.down[x].back()));
          tree.downPort[x].push_back(egressIndex(t, tree.down[x].back()));
        }
      }
    }
    return Status::Ok();
  }
  // One slice under way: per tree each member's partial (up) and result (down), and the children
  // whose partial it still waits for; each member's results so far and how many it lacks.
  struct Run {
    std::vector<double> up[2], down[2], result;
    std::vector<int> waiting[2], lacking;
    size_t left = 0;
  };
  // next(at, tr, up, member): what a member does next on tree tr, at `at`: send its partial up (up)
  // or its result down. (Callables as template parameters: one of each per event, no allocation.)
  // Starts the slice: each member's own half is there at own[x]; the leaves send first.
  template <class Next>
  void start(Run& run, const std::vector<double>& own, const Next& next) const {
    const size_t m = own.size();
    run.result.assign(m, 0), run.lacking.assign(m, 2), run.left = m;
    for (int tr = 0; tr < 2; ++tr) {
      run.up[tr] = own, run.down[tr].assign(m, 0), run.waiting[tr].assign(m, 0);
      for (size_t x = 0; x < m; ++x) {
        run.waiting[tr][x] = static_cast<int>(trees_[tr].kids[x].size());
        if (run.waiting[tr][x] == 0) next(own[x], tr, true, static_cast<int>(x));
      }
    }
  }
  // A message on its way: booked up to the port of its route's last switch, where it waits for its
  // turn (post(msg): NvlsSim queues it there; arrive takes it on from the port).
  struct Msg {
    Links::Cursor c;  // at the port
    int tr, x, kid;   // the tree, the sender, which child it goes to (-1: up to the parent)
  };
  // passed(tr, up, member, at): a member has passed a chunk on and freed its slot for it, on tree
  // tr, going up (its children's partials) or down (its parent's result), at `at`.
  // Member x's send on tree tr at `at` (its data there, and room for them at the receivers);
  // bytes: the slice, half on each tree. True once every member has both results (run.result).
  template <class Next, class Passed, class Post>
  bool send(Links& links, double bytes, Run& run, int tr, bool up, int x, double at, uint64_t* messages,
            const Next& next, const Passed& passed, const Post& post) const {
    const Tree& tree = trees_[tr];
    if (up) {  // the partial to the parent, which reduces it into its own
      const double from = std::max(at, run.up[tr][x]);
      passed(tr, true, x, from);
      *messages += 1;
      return leave(links, bytes, run, {{}, tr, x, -1}, from + links.overhead(tree.up[x]), next, passed, post);
    }
    const bool root = tree.parent[x] < 0;
    const double have = root ? run.up[tr][x] : run.down[tr][x];  // the root: its sum
    const double go = std::max(at, have);
    passed(tr, root, x, go);  // the root passes its children's partials on as results
    bool done = got(run, x, have);
    for (size_t c = 0; c < tree.kids[x].size(); ++c) {
      *messages += 1;
      done = leave(links, bytes, run, {{}, tr, x, static_cast<int>(c)}, go + links.overhead(tree.down[x][c]),
                   next, passed, post) ||
             done;
    }
    return done;
  }
  // The message takes its last switch's port at `at`, and the rest of its route; true once every
  // member has both results.
  template <class Next, class Passed>
  bool arrive(Links& links, double bytes, Run& run, const Msg& msg, double at, const Next& next,
              const Passed& passed) const {
    const size_t e = portOf(msg);
    const auto& path = pathOf(msg);
    const double in =
        links.sendRest(path, bytes / 2, {at, msg.c.tail, links.latency(path[e - 1]), e}, nullptr);
    return deliver(run, msg, in, bytes / 2, next, passed);
  }
  // The port msg waits at: the link out of its route's last switch.
  DirLink port(const Msg& msg) const { return pathOf(msg)[portOf(msg)]; }
  // Where member x's send on tree tr goes: its parent (up) or its children.
  std::span<const int> receivers(int tr, bool up, int x) const {
    const Tree& tree = trees_[tr];
    return up ? std::span<const int>(&tree.parent[x], 1) : std::span<const int>(tree.kids[x]);
  }
  // Every route a send takes (as booked).
  template <class F>
  void forEachRoute(F f) const {
    for (const Tree& tree : trees_)
      for (size_t x = 0; x < tree.up.size(); ++x) {
        if (!tree.up[x].empty()) f(std::span<const DirLink>(tree.up[x]));
        for (const auto& path : tree.down[x]) f(std::span<const DirLink>(path));
      }
  }
  template <class F>
  void forEachLink(F f) const {
    for (const auto& p : raw_)
      for (DirLink d : p) f(d);
  }

 private:
  const std::vector<DirLink>& pathOf(const Msg& msg) const {
    const Tree& tree = trees_[msg.tr];
    return msg.kid < 0 ? tree.up[msg.x] : tree.down[msg.x][msg.kid];
  }
  size_t portOf(const Msg& msg) const {
    const Tree& tree = trees_[msg.tr];
    return msg.kid < 0 ? tree.upPort[msg.x] : tree.downPort[msg.x][msg.kid];
  }
  // Books msg's route from `depart` up to its last switch's port and posts it there; a route with no
  // switch past its first link is booked through and delivered.
  template <class Next, class Passed, class Post>
  bool leave(Links& links, double bytes, Run& run, Msg msg, double depart, const Next& next,
             const Passed& passed, const Post& post) const {
    const auto& path = pathOf(msg);
    const size_t e = portOf(msg);
    links.sendFirst(path, depart, bytes / 2, &msg.c);
    if (e == 0)
      return deliver(run, msg, links.sendRest(path, bytes / 2, msg.c, nullptr), bytes / 2, next, passed);
    links.advance(std::span<const DirLink>(path).first(e), bytes / 2, &msg.c);
    post(msg);
    return false;
  }
  // msg is in at `in`: a partial is reduced into the parent's, which sends once it has all of its
  // children's; a result goes on down (a leaf has it).
  template <class Next, class Passed>
  bool deliver(Run& run, const Msg& msg, double in, double half, const Next& next,
               const Passed& passed) const {
    const int tr = msg.tr;
    const Tree& tree = trees_[tr];
    if (msg.kid < 0) {
      const int p = tree.parent[msg.x];
      run.up[tr][p] = std::max(run.up[tr][p], in) + half / reduceBpu_[p];
      if (--run.waiting[tr][p] == 0) next(run.up[tr][p], tr, tree.parent[p] >= 0, p);
      return false;
    }
    const int kid = tree.kids[msg.x][msg.kid];
    run.down[tr][kid] = in;
    if (!tree.kids[kid].empty()) {
      next(in, tr, false, kid);
      return false;
    }
    passed(tr, false, kid, in);
    return got(run, kid, in);
  }
  struct Tree {
    std::vector<int> parent;
    std::vector<std::vector<int>> kids;
    std::vector<std::vector<DirLink>> up;                 // per member: the route to its parent
    std::vector<std::vector<std::vector<DirLink>>> down;  // per member: the routes to its children
    std::vector<size_t> upPort;                           // per member: egressIndex of its route up
    std::vector<std::vector<size_t>> downPort;            // per member: of its routes down
  };
  // Member x has one tree's result at `at`; true once every member has both.
  static bool got(Run& run, int x, double at) {
    run.result[x] = std::max(run.result[x], at);
    return --run.lacking[x] == 0 && --run.left == 0;
  }

  Tree trees_[2];
  std::vector<std::vector<DirLink>> raw_;  // every route as found (the links report)
  std::vector<double> reduceBpu_;
};

// NVLS in each NVLink domain (its NVSwitch reduces and multicasts) and, across domains, the
// network's switches (nvls_switch), a ring per slice (nvls_ring) or trees (nvls_tree). Every stage of every
// chunk is an event, run in the order of the time it becomes ready, so each link (which books its messages
// first come, first served) sees them in time order and chunk j's all-gather overlaps chunk j+1's
// reduction, as on the wire:
//   1: every GPU's chunk into its switch, which reduces it;
//   2 (nvls_switch, nvls_ring): slice i of the reduced chunk to local GPU i;
//   3: GPU i of every domain reduces slice i in the network (once all domains' slices are there);
//      nvls_ring: by a ring of those GPUs instead, each of its steps an event (stage 6); nvls_tree:
//      by a double binary tree of them, each member's send an event (stages 7-10) and each message
//      at its last switch's port another (11; the port's next turn 12);
//   4: back into the switch;
//   5: the switch multicasts the result (a slice, or the chunk for nvls) to every GPU.
//
// Symmetry (docs/PLANNER.md, "Scale"): stages 1, 2, 4 and 5 touch only a domain's own links (its
// GPUs' NVLinks) and its NVSwitch's reduction engine; only stage 3 couples domains. Domains whose
// own links and engine are alike start in one class, and one representative runs those stages for
// the class: its members' states stay identical as long as stage 3 hands them identical times, so
// stage 3 (run in full over every domain) checks that and splits a class whose members got
// different times, the new class taking a copy of the representative's state and pending events.
// Where a domain's links are shared with another domain or with stage 3, nothing is reduced.
class NvlsSim {
 public:
  NvlsSim(const Topology& t, const CostConstants& k, Links& links) : t_(t), k_(k), links_(links) {}

  // How slice i of every domain is all-reduced across the domains (stage 3): not at all (one
  // domain: nvls), by the network's switches (nvls_switch), or by a ring (nvls_ring) or double
  // binary trees (nvls_tree) of GPU i of each domain.
  enum class Across { None, Switch, Ring, Tree };
  // domains[x] = the nodes of domain x's ranks (all the same size); sw[x] its NVSwitch.
  Status init(const std::vector<std::vector<int>>& domains, const std::vector<int>& sw, Across across,
              double chunk, double S, uint64_t nChunks, bool symmetry) {
    m_ = domains.size(), d_ = domains[0].size(), sw_ = sw, across_ = across;
    if (d_ > 0xffff)  // Event keeps the slice in 16 bits
      return errorf(tribNotSupported, "nvls: NVLink domains of %zu GPUs (at most 65,535 replayed)", d_);
    slices_ = across != Across::None ? d_ : 1, chunk_ = chunk, S_ = S, nChunks_ = nChunks;
    up_.resize(m_ * d_), down_.resize(m_ * d_), upOverhead_.resize(m_ * d_);
    for (size_t x = 0; x < m_; ++x)
      for (size_t r = 0; r < d_; ++r) {
        up_[x * d_ + r] = dirLinkBetween(t_, domains[x][r], sw[x]);
        down_[x * d_ + r] = dirLinkBetween(t_, sw[x], domains[x][r]);
        upOverhead_[x * d_ + r] = links_.overhead(up_[x * d_ + r]);
      }
    groups_.resize(across == Across::Switch ? d_ : 0);
    rings_.resize(across == Across::Ring ? d_ : 0);
    trees_.resize(across == Across::Tree ? d_ : 0);
    std::unique_ptr<Router> router =
        rings_.empty() && trees_.empty() ? nullptr : std::make_unique<Router>(t_);
    for (size_t i = 0; i < slices_ && across != Across::None; ++i) {
      std::vector<int> members;
      for (size_t x = 0; x < m_; ++x) members.push_back(domains[x][i]);
      if (across == Across::Switch) {
        TRIB_RETURN_IF_ERROR(groups_[i].init(t_, members, static_cast<int>(i)).prefix("nvls_switch: "));
        continue;
      }
      if (across == Across::Tree) {
        TRIB_RETURN_IF_ERROR(trees_[i].init(t_, *router, members, k_, spines_));
        continue;
      }
      TRIB_RETURN_IF_ERROR(rings_[i].init(t_, *router, members, k_, spines_));
    }
    if (across == Across::Tree) slots_ = treeSlots();
    formClasses(symmetry);
    return Status::Ok();
  }

  // nvls_tree: sends parked for a slot that never freed, and chunks whose trees never finished
  // (none of either, unless the flow control is wrong: every send waits only for earlier chunks).
  size_t sendsWaiting() const {
    size_t n = 0;
    for (const auto& [key, waiting] : parked_) n += waiting.size();
    return n;
  }
  size_t chunksUnfinished() const { return treeRuns_.size(); }
  // Runs every event; returns when the last GPU has its result.
  double run(SimResult* out) {
    const size_t m = m_, d = d_;
    const bool across = across_ != Across::None;
    slicesIn_.assign(across ? d * nChunks_ : 0, 0);
    departs_.assign(across ? m * d * nChunks_ : 0, 0);
    last_.assign(slicesIn_.size(), Last{});
    if (!trees_.empty()) passed_.assign(slotKey(slices_, 0, false, 0, 0), -1);
    res_.resize(m), dep_.resize(m);
    for (const auto& c : members_) push({0, 1, 0, c[0], 0});
    double end = 0;
    while (!heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end(), std::greater<>());
      const Event e = heap_.back();
      heap_.pop_back();
      const bool acrossStage = e.stage() == 3 || e.stage() >= 6;  // every domain's at once: no class
      const uint64_t size = acrossStage ? 0 : members_[classOf_[e.x()]].size();
      const double bytes = chunkBytes(e.j()) / static_cast<double>(slices_);
      const DirLink* up = &up_[e.x() * d];
      const DirLink* down = &down_[e.x() * d];
      switch (e.stage()) {
        case 1: {
          double r = 0;
          for (size_t k = 0; k < d; ++k)
            r = std::max(
                r, links_.send(up[k], e.j() == 0 ? upOverhead_[e.x() * d + k] : e.ready, chunkBytes(e.j())));
          // The GPUs' SMs drive the switch's reduction (load-reduce, multicast store) chunk by
          // chunk and synchronise on flags between chunks: each chunk costs the model's chunk
          // overhead on that stage, the pipeline's slowest on every generator's systems.
          const double done = links_.reduce(sw_[e.x()], 0, r, chunkBytes(e.j()),
                                            t_.node(sw_[e.x()]).reduce.reduceGBps, k_.chunkOverheadUs);
          out->messages += d * size;
          // A GPU sends its next chunk once its link has taken this one.
          if (e.j() + 1 < nChunks_) push({r, 1, e.j() + 1, e.x(), 0});
          // Stage 2 of all the chunk's slices as one event: the heap holds one for every chunk the
          // switch has reduced ahead of the network (281,520 of 313,641 events at the most on 64
          // NVL72 racks at 1 GiB).
          push({done, across ? 2 : 5, e.j(), e.x(), 0});
          break;
        }
        case 2:
          // Slice i of the reduced chunk to GPU i, i = 0, 1, ...: the order of an event per slice
          // (they tie on the time, the chunk and the domain), since nothing pushed here is due before
          // the next slice's (stage 3 waits for an arrival, after the event's time).
          for (size_t i = 0; i < slices_; ++i) {
            const double at = links_.send(down[i], e.ready, bytes);
            const size_t ij = i * nChunks_ + e.j();
            departs_[ij * m + e.x()] = at;
            // Stage 3 starts at the arrival of the domain whose event ran last (latest ready, then
            // highest domain), whichever of its class ran for it.
            Last& l = last_[ij];
            const size_t hi = members_[classOf_[e.x()]].back();
            if (std::tie(e.ready, hi) > std::tie(l.ready, l.x)) l = {e.ready, hi, at};
            slicesIn_[ij] += size;
            if (slicesIn_[ij] == m) push({l.at, 3, e.j(), 0, i});
            out->messages += size;
          }
          break;
        case 3: {
          const double* dep = &departs_[(e.i() * nChunks_ + e.j()) * m];
          for (size_t x = 0; x < m; ++x) dep_[x] = dep[members_[classOf_[x]][0]];
          if (!trees_.empty()) {  // each member's sends as events of their own (stages 7-10)
            TreeGroup::Run& run = treeRuns_[e.i() * nChunks_ + e.j()];
            trees_[e.i()].start(run, dep_, treeNext(e));
            break;
          }
          if (!rings_.empty()) {  // its steps as events of their own (stage 6)
            RingGroup::Run& run = ringRuns_[e.i() * nChunks_ + e.j()];
            run.have = run.own = dep_;
            push({*std::min_element(dep_.begin(), dep_.end()), 6, e.j(), 0, e.i()});
            break;
          }
          groups_[e.i()].run(links_, k_, bytes, dep_.data(), res_.data());
          out->messages += 2 * m;
          splitClasses();
          for (const auto& c : members_) push({res_[c[0]], 4, e.j(), c[0], e.i()});
          break;
        }
        case 6: {
          auto it = ringRuns_.find(e.i() * nChunks_ + e.j());
          RingGroup::Run& run = it->second;
          if (!rings_[e.i()].step(links_, bytes, run, &out->messages)) {
            push({*std::min_element(run.have.begin(), run.have.end()), 6, e.j(), 0, e.i()});
            break;
          }
          std::copy(run.have.begin(), run.have.end(), res_.begin());
          ringRuns_.erase(it);
          splitClasses();
          for (const auto& c : members_) push({res_[c[0]], 4, e.j(), c[0], e.i()});
          break;
        }
        case 7:
        case 8:
        case 9:
        case 10: {
          const int tr = (e.stage() - 7) / 2;
          const bool up = (e.stage() - 7) % 2 == 0;
          if (!roomAt(e, tr, up)) break;  // waits for a receiver's slot
          auto it = treeRuns_.find(e.i() * nChunks_ + e.j());
          if (trees_[e.i()].send(links_, bytes, it->second, tr, up, static_cast<int>(e.x()), e.ready,
                                 &out->messages, treeNext(e), treePassed(e), TreePost{this, e.j(), e.i()}))
            treeDone(it, e.j(), e.i());
          break;
        }
        case 11: {  // an nvls_tree message at its last switch's port
          const Posted& p = posted_[e.x()];
          const DirLink d = trees_[e.i()].port(p.msg);
          FairQueue<size_t>& q = port(d);
          if (q.offer(links_, d, q.tagFor(p.msg.x), p.order, e.ready, e.x())) {
            arrive(e.x(), e.ready);
          } else if (!q.scheduled) {
            servePort(d, std::max(links_.freeAt(d), e.ready));
          }
          break;
        }
        case 12: {  // an nvls_tree port is free: the next message waiting for it goes (x: the link)
          const DirLink d = static_cast<DirLink>(e.x());
          ports_[d].serveNext(
              links_, d, e.ready, [&](size_t msg, double at) { arrive(msg, at); },
              [&](double at) { servePort(d, at); });
          break;
        }
        case 4:
          push({links_.send(up[e.i()], e.ready + upOverhead_[e.x() * d + e.i()], bytes), 5, e.j(), e.x(),
                e.i()});
          out->messages += size;
          break;
        case 5:
          for (size_t k = 0; k < d; ++k) end = std::max(end, links_.send(down[k], e.ready, bytes));
          out->messages += d / slices_ * size;
          break;
      }
    }
    // Every member's links end as its representative's (the busiest-link report).
    for (const auto& c : members_)
      for (size_t y : c) copyDomain(c[0], y, false);
    out->domains = m_, out->simulatedDomains = members_.size();
    return end;
  }

 private:
  // 24 bytes: the heap holds tens of thousands, and its sifts are the replay's hottest loop.
  struct Event {
    double ready;
    uint64_t chunkStage, domainSlice;  // j << 4 | stage; x << 16 | i (init checks i's range)
    Event(double ready, int stage, uint64_t j, size_t x, size_t i)
        : ready(ready), chunkStage(j << 4 | static_cast<uint64_t>(stage)), domainSlice(x << 16 | i) {}
    int stage() const { return static_cast<int>(chunkStage & 15); }
    uint64_t j() const { return chunkStage >> 4; }
    size_t x() const { return domainSlice >> 16; }     // the domain (its class's representative)
    size_t i() const { return domainSlice & 0xffff; }  // the slice
    void setX(size_t x) { domainSlice = x << 16 | i(); }
    // Ties in chunk order, then stage order: the same run every time.
    bool operator>(const Event& o) const {
      return std::tie(ready, chunkStage, domainSlice) > std::tie(o.ready, o.chunkStage, o.domainSlice);
    }
  };
  struct Last {
    double ready = -1;
    size_t x = 0;
    double at = 0;
  };
  void push(const Event& e) {
    heap_.push_back(e);
    std::push_heap(heap_.begin(), heap_.end(), std::greater<>());
  }
  // nvls_tree: a member's next send on a tree of slice e.i, chunk e.j, as an event (stage 7 + 2 x
  // tree, + 1 coming down); x is the member, not a domain's class.
  struct TreeNext {
    NvlsSim* sim;
    uint64_t j;
    size_t i;
    void operator()(double at, int tr, bool up, int member) const {
      sim->push({at, 7 + 2 * tr + (up ? 0 : 1), j, static_cast<size_t>(member), i});
    }
  };
  TreeNext treeNext(const Event& e) { return {this, e.j(), e.i()}; }
  // nvls_tree's flow control: a connection holds slots_ chunks, so a member's send of chunk j waits
  // until each receiver has passed chunk j - slots_ on (TreePassed). True where there is room
  // now; else the event waits (again at the time the slot frees, or parked until the receiver
  // passes that chunk on).
  // The slots: NCCL's eight per connection (NCCL_STEPS), or as many chunks as cover a connection's
  // round trip at its links' rate where that is more (small chunks: NCCL runs enough channels, each
  // with its eight slots, that its credits do not idle a link; docs/PLANNER.md "nvls_tree: NCCL's
  // slots and the drain").
  static constexpr uint64_t kSlots = 8;
  uint64_t treeSlots() const {
    double rtt = 0, rate = std::numeric_limits<double>::infinity();
    for (const TreeGroup& g : trees_)
      g.forEachRoute([&](std::span<const DirLink> path) {
        double oneWay = links_.overhead(path);
        for (DirLink l : path) oneWay += links_.latency(l), rate = std::min(rate, links_.rate(l));
        rtt = std::max(rtt, 2 * oneWay);
      });
    const double message = std::max(1.0, chunk_ / static_cast<double>(slices_) / 2);
    return std::max<uint64_t>(kSlots, static_cast<uint64_t>(std::ceil(rtt * rate / message)));
  }
  size_t slotKey(size_t i, int tr, bool up, size_t y, uint64_t j) const {
    return (((i * 2 + tr) * 2 + up) * m_ + y) * nChunks_ + j;
  }
  bool roomAt(const Event& e, int tr, bool up) {
    if (e.j() < slots_) return true;
    double free = e.ready;
    for (int y : trees_[e.i()].receivers(tr, up, static_cast<int>(e.x()))) {
      const size_t key = slotKey(e.i(), tr, up, y, e.j() - slots_);
      if (passed_[key] < 0) {
        parked_[key].push_back(e);
        return false;
      }
      free = std::max(free, passed_[key]);
    }
    if (free <= e.ready) return true;
    push({free, e.stage(), e.j(), e.x(), e.i()});
    return false;
  }
  // Member `member` passed chunk j of slice i on (TreeGroup::send): its slot is free, and the sends
  // parked for it go.
  struct TreePassed {
    NvlsSim* sim;
    uint64_t j;
    size_t i;
    void operator()(int tr, bool up, int member, double at) const {
      const size_t key = sim->slotKey(i, tr, up, member, j);
      sim->passed_[key] = at;
      auto it = sim->parked_.find(key);
      if (it == sim->parked_.end()) return;
      for (Event w : it->second) {
        w.ready = std::max(w.ready, at);
        sim->push(w);
      }
      sim->parked_.erase(it);
    }
  };
  TreePassed treePassed(const Event& e) { return {this, e.j(), e.i()}; }
  // nvls_tree: a message booked up to its last switch's port, where it waits its turn (stage 11):
  // the port serves the members whose messages wait round robin, as the step replay's ports do
  // (sim.cpp Engine::queueAtEgress). Booked through when sent, a message held the port from when
  // its head would reach it, ahead of messages sent after it that reach the port first (from a
  // nearer sender, or one that waited less): a reservation no switch makes. 248 DGX H200 at 512
  // MiB replayed 1.101x the model so; with the port taken on arrival, first come first served,
  // 1.081x; in turns 1.077x (docs/PLANNER.md "nvls_tree: the ports").
  struct Posted {
    TreeGroup::Msg msg;
    uint64_t j, order;
    size_t i;
  };
  struct TreePost {
    NvlsSim* sim;
    uint64_t j;
    size_t i;
    void operator()(const TreeGroup::Msg& msg) const {
      size_t at = sim->posted_.size();
      if (!sim->freePosted_.empty()) {
        at = sim->freePosted_.back();
        sim->freePosted_.pop_back();
      } else {
        sim->posted_.emplace_back();
      }
      sim->posted_[at] = {msg, j, sim->order_++, i};
      sim->push({msg.c.head, 11, j, at, i});
    }
  };
  FairQueue<size_t>& port(DirLink d) {
    if (static_cast<size_t>(d) >= ports_.size()) ports_.resize(static_cast<size_t>(d) + 1);
    return ports_[d];
  }
  // Port d's next service, at `at` (stage 12).
  void servePort(DirLink d, double at) {
    ports_[d].scheduled = true;
    push({at, 12, 0, static_cast<size_t>(d), 0});
  }
  // Posted message `msg` takes its port at `at` and goes on to its receiver.
  void arrive(size_t msg, double at) {
    const Posted p = posted_[msg];
    freePosted_.push_back(msg);
    auto it = treeRuns_.find(p.i * nChunks_ + p.j);
    if (trees_[p.i].arrive(links_, chunkBytes(p.j) / static_cast<double>(slices_), it->second, p.msg, at,
                           TreeNext{this, p.j, p.i}, TreePassed{this, p.j, p.i}))
      treeDone(it, p.j, p.i);
  }
  // Every member of chunk j's slice i has both trees' results: the slice goes back to the domains
  // (stage 4).
  void treeDone(std::unordered_map<uint64_t, TreeGroup::Run>::iterator it, uint64_t j, size_t i) {
    res_ = it->second.result;
    treeRuns_.erase(it);
    splitClasses();
    for (const auto& c : members_) push({res_[c[0]], 4, j, c[0], i});
  }
  double chunkBytes(uint64_t j) const { return std::min(chunk_, S_ - static_cast<double>(j) * chunk_); }

  // Classes of domains alike in what stages 1, 2, 4 and 5 touch; one class per domain (the full
  // simulation) unless symmetry is asked for and those resources are each domain's own.
  void formClasses(bool symmetry) {
    classOf_.resize(m_);
    members_.clear();
    if (!symmetry || !ownResources()) {
      for (size_t x = 0; x < m_; ++x) classOf_[x] = members_.size(), members_.push_back({x});
      return;
    }
    std::map<std::vector<double>, size_t> bySignature;
    for (size_t x = 0; x < m_; ++x) {
      std::vector<double> sig{t_.node(sw_[x]).reduce.reduceGBps};
      for (size_t r = 0; r < d_; ++r)
        for (DirLink l : {up_[x * d_ + r], down_[x * d_ + r]})
          sig.insert(sig.end(), {links_.rate(l), t_.link(dirLinkId(l)).latencyUs, links_.overhead(l)});
      auto [it, fresh] = bySignature.emplace(std::move(sig), members_.size());
      if (fresh) members_.emplace_back();
      classOf_[x] = it->second;
      members_[it->second].push_back(x);
    }
  }
  // Whether every domain's NVLinks and NVSwitch are used by it alone (not by another domain, nor
  // by the network stage).
  bool ownResources() const {
    std::vector<int> owner(2 * static_cast<size_t>(t_.numLinks()), -1);
    for (size_t x = 0; x < m_; ++x)
      for (size_t r = 0; r < d_; ++r)
        for (DirLink l : {up_[x * d_ + r], down_[x * d_ + r]}) {
          if (l < 0 || (owner[l] >= 0 && owner[l] != static_cast<int>(x))) return false;
          owner[l] = static_cast<int>(x);
        }
    bool own = true;
    for (const AggGroup& g : groups_) {
      g.forEachLink([&](DirLink l) { own = own && l >= 0 && owner[l] < 0; });
      for (int s : g.switches()) own = own && std::find(sw_.begin(), sw_.end(), s) == sw_.end();
    }
    for (const RingGroup& g : rings_) g.forEachLink([&](DirLink l) { own = own && l >= 0 && owner[l] < 0; });
    for (const TreeGroup& g : trees_) g.forEachLink([&](DirLink l) { own = own && l >= 0 && owner[l] < 0; });
    return own;
  }
  // After a stage 3: a class whose members got different result times splits, each new class
  // (members with one time) taking a copy of the representative's state and pending events.
  void splitClasses() {
    const size_t classes = members_.size();
    for (size_t c = 0; c < classes; ++c) {
      const size_t rep = members_[c][0];
      const double v = res_[rep];
      if (std::all_of(members_[c].begin(), members_[c].end(), [&](size_t x) { return res_[x] == v; }))
        continue;
      std::map<double, std::vector<size_t>> others;
      std::vector<size_t> keep;
      for (size_t x : members_[c]) (res_[x] == v ? keep : others[res_[x]]).push_back(x);
      members_[c] = std::move(keep);
      std::vector<Event> pending;
      for (const Event& e : heap_)
        if (e.stage() != 3 && e.stage() < 6 && e.x() == rep) pending.push_back(e);  // not the across stages
      for (auto& [time, xs] : others) {
        for (size_t x : xs) classOf_[x] = members_.size();
        copyDomain(rep, xs[0], true);
        for (Event e : pending) e.setX(xs[0]), push(e);
        members_.push_back(std::move(xs));
      }
    }
  }
  // Domain `to` takes domain `from`'s state: its links, its NVSwitch's engine and (for a new
  // representative) its slices' departures.
  void copyDomain(size_t from, size_t to, bool departs) {
    if (from == to) return;
    for (size_t r = 0; r < d_; ++r) {
      links_.copyLink(up_[from * d_ + r], up_[to * d_ + r]);
      links_.copyLink(down_[from * d_ + r], down_[to * d_ + r]);
    }
    links_.copyReduce(sw_[from], sw_[to], 0);
    if (departs)
      for (size_t ij = 0; ij < slicesIn_.size(); ++ij) departs_[ij * m_ + to] = departs_[ij * m_ + from];
  }

  const Topology& t_;
  const CostConstants& k_;
  Links& links_;
  size_t m_ = 0, d_ = 0, slices_ = 1;
  Across across_ = Across::None;
  double chunk_ = 0, S_ = 0;
  uint64_t nChunks_ = 1;
  std::vector<int> sw_;
  std::vector<DirLink> up_, down_;  // per (domain, rank): the GPU's NVLink to and from its NVSwitch
  std::vector<double> upOverhead_;
  std::vector<AggGroup> groups_;                           // nvls_switch: per slice i, GPU i of every domain
  std::vector<RingGroup> rings_;                           // nvls_ring: the same, as rings
  std::unordered_map<uint64_t, RingGroup::Run> ringRuns_;  // nvls_ring: per (slice, chunk) under way
  std::vector<TreeGroup> trees_;                           // nvls_tree: the same, as double binary trees
  std::unordered_map<uint64_t, TreeGroup::Run> treeRuns_;  // nvls_tree: per (slice, chunk) under way
  uint64_t slots_ = kSlots;                                // nvls_tree: chunks a connection holds
  std::vector<double> passed_;  // nvls_tree: per (slice, tree, direction, member, chunk), -1 until then
  std::unordered_map<size_t, std::vector<Event>> parked_;  // nvls_tree: sends waiting for a slot
  std::vector<Posted> posted_;                             // nvls_tree: messages at their ports (stage 11)
  std::vector<size_t> freePosted_;                         // nvls_tree: posted_'s free entries
  std::vector<FairQueue<size_t>> ports_;                   // nvls_tree: by directed link, as used
  uint64_t order_ = 0;                                     // nvls_tree: messages posted so far
  SpineGroups spines_{links_};                             // nvls_ring: the rings' equal-cost hops' servers
  std::vector<size_t> classOf_;                            // per domain
  std::vector<std::vector<size_t>> members_;  // per class, ascending: the first is its representative
  std::vector<Event> heap_;
  std::vector<uint64_t> slicesIn_;  // per (slice, chunk): domains whose stage 2 ran
  std::vector<double> departs_;     // per (slice, chunk, domain): stage 2's arrival
  std::vector<Last> last_;          // per (slice, chunk): the stage 2 that ran last
  std::vector<double> res_, dep_;   // stage 3 scratch: per domain
};

}  // namespace

Status simulateInNetwork(const Topology& t, PlanAlgo algo, const CollArgs& args, DataType dtype,
                         SimResult* out, const std::vector<int>& rankToNode, const SimOptions& opt) {
  auto t0 = std::chrono::steady_clock::now();
  size_t esize = dataTypeSize(dtype);
  if (esize == 0)
    return errorf(tribInvalidArgument, "simulate: invalid datatype %d", static_cast<int>(dtype));
  if (args.coll != Coll::AllReduce || args.nranks < 2)
    return errorf(tribNotSupported, "in-network simulation models all-reduce on 2 or more ranks");
  std::vector<int> nodes;
  TRIB_RETURN_IF_ERROR(rankNodes(t, args.nranks, rankToNode, &nodes));
  *out = SimResult{};
  const CostConstants& k = opt.k;
  Links links(t, k);
  const int n = args.nranks;
  const double S = static_cast<double>(args.count) * esize;
  const double chunk =
      std::max<double>(esize, static_cast<double>(std::max<uint64_t>(1, args.chunkElems)) * esize);
  const uint64_t nChunks = std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(S / chunk)));
  double end = 0;

  if (algo == PlanAlgo::Switch || algo == PlanAlgo::HierSwitch) {
    return errorf(tribInvalidArgument,
                  "simulateInNetwork: %s has a schedule; simulate() replays its switch steps",
                  planAlgoName(algo));
  } else if (isNvlsPlan(algo)) {
    // Domains: ranks grouped by their NVSwitch, all the same size, in rank order.
    std::unordered_map<int, size_t> domOf;
    std::vector<int> sw;
    std::vector<std::vector<int>> domains;
    for (int r = 0; r < n; ++r) {
      const int s = nvSwitchOf(t, nodes[r]);
      if (s < 0) return errorf(tribInvalidArgument, "nvls: rank %d has no reduce-capable NVSwitch", r);
      auto [it, fresh] = domOf.emplace(s, domains.size());
      if (fresh) sw.push_back(s), domains.emplace_back();
      domains[it->second].push_back(nodes[r]);
    }
    for (const auto& dm : domains)
      if (dm.size() != domains[0].size()) return errorf(tribInvalidArgument, "nvls: domains of unequal size");
    if (algo == PlanAlgo::Nvls && domains.size() != 1)
      return errorf(tribInvalidArgument, "nvls: ranks span %zu NVLink domains (use nvls_switch or nvls_ring)",
                    domains.size());
    if ((algo == PlanAlgo::NvlsRing || algo == PlanAlgo::NvlsTree) && domains.size() < 2)
      return errorf(tribInvalidArgument, "%s: the ranks are in one NVLink domain (use nvls)",
                    planAlgoName(algo));
    NvlsSim sim(t, k, links);
    const auto across = algo == PlanAlgo::NvlsSwitch ? NvlsSim::Across::Switch
                        : algo == PlanAlgo::NvlsRing ? NvlsSim::Across::Ring
                        : algo == PlanAlgo::NvlsTree ? NvlsSim::Across::Tree
                                                     : NvlsSim::Across::None;
    TRIB_RETURN_IF_ERROR(sim.init(domains, sw, across, chunk, S, nChunks, opt.symmetry));
    end = sim.run(out);
    if (sim.sendsWaiting() > 0 || sim.chunksUnfinished() > 0)
      return errorf(tribInternalError,
                    "%s: the replay ended with %zu sends waiting for a slot (%zu chunks unfinished)",
                    planAlgoName(algo), sim.sendsWaiting(), sim.chunksUnfinished());
  } else {
    return errorf(tribInvalidArgument, "simulateInNetwork: %s is not an in-network algorithm (use simulate)",
                  planAlgoName(algo));
  }
  out->timeUs = end + k.launchUs;
  out->steps = out->messages;
  links.report(opt.topLinks, out);
  finish(args, esize, out, t0);
  return Status::Ok();
}

}  // namespace trib
