// The network as the replays see it (sim.cpp's step replay and nvls_sim.cpp's NVLS replay):
// links as servers that messages hold in turn, groups of parallel links as one server, and an
// in-network reduction over an aggregation tree. Internal to src/sim.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <queue>
#include <span>
#include <unordered_map>
#include <vector>

#include "common/status.hpp"
#include "plan/cost_model.hpp"
#include "sim/sim.hpp"
#include "topo/route.hpp"
#include "topo/topology.hpp"

namespace trib::replay {

constexpr double kB = 1e3;  // GB/s -> bytes/µs

// Links as servers: a message holds each link on its route in turn, cut-through (its head moves on
// after the link's latency, its tail cannot pass the previous link's), queueing behind earlier ones.
// A group (addGroup) is one server for a set of parallel links that traffic is sprayed over evenly
// (a fat tree's equal-cost spine bundles under adaptive routing): a message's bytes split over the
// members, each member carrying bytes / k at its rate, is the group's sum of rates carrying them.
class Links {
 public:
  Links(const Topology& t, const CostConstants& k) : t_(t), k_(k) {
    const size_t n = 2 * static_cast<size_t>(t.numLinks());
    groupBase_ = n;
    free_.assign(n, 0);
    busy_.assign(n, 0);
    bytes_.assign(n, 0);
    // Each directed link's rate in bytes/µs, once: a send is on the simulator's hottest path.
    rate_.resize(n);
    lat_.resize(n);
    net_.resize(n);
    for (size_t d = 0; d < n; ++d) {
      const Link& l = t.link(static_cast<int>(d >> 1));
      rate_[d] = dirLinkBw(t, static_cast<DirLink>(d)) * k.eff[static_cast<int>(l.type)] * kB;
      lat_[d] = l.latencyUs;
      net_[d] = l.type == LinkType::Net;
    }
  }
  // Every link at `node`, both ways, at no more than gbps: a rank whose protocol moves no faster
  // (SimOptions::rankCeilingGBps). Before any group is added (a group sums its members' rates).
  void capAt(int node, double gbps) {
    for (auto [lid, nb] : t_.adjacent(node))
      for (size_t d : {2 * static_cast<size_t>(lid), 2 * static_cast<size_t>(lid) + 1})
        rate_[d] = std::min(rate_[d], gbps * kB);
  }
  // A server for `members` (directed links, two or more): its id, usable wherever a DirLink of a
  // route is. Its latency is the slowest member's.
  DirLink addGroup(const std::vector<DirLink>& members) {
    const DirLink id = static_cast<DirLink>(free_.size());
    double rate = 0, lat = 0;
    bool net = false;
    for (DirLink d : members) rate += rate_[d], lat = std::max(lat, lat_[d]), net |= net_[d] != 0;
    free_.push_back(0);
    busy_.push_back(0);
    bytes_.push_back(0);
    rate_.push_back(rate);
    lat_.push_back(lat);
    net_.push_back(net);
    members_.push_back(members);
    return id;
  }
  size_t groupSize(DirLink g) const { return members_[g - firstGroup()].size(); }
  size_t firstGroup() const { return 2 * static_cast<size_t>(t_.numLinks()); }  // ids below: links
  double latency(DirLink d) const { return lat_[d]; }
  // Returns the arrival of the last byte; *first = arrival of the first byte. Overheads are the
  // caller's (added to depart). gapUs: the path's first link takes its next message only that long
  // after this one (a sender's per-chunk cost, see AggGroup::run).
  double send(std::span<const DirLink> path, double depart, double bytes, double* first, double gapUs = 0) {
    Cursor c{depart, 0, 0, 0};
    hops(path, bytes, gapUs, &c);
    return finishSend(path, depart, c, first);
  }
  // A message's place on its route: the next link (index), when its head reaches it, when its
  // tail left the previous one, and that link's latency.
  struct Cursor {
    double head, tail, prevLat;
    size_t next;
  };
  // Books the route's first link only; c->head - that link's latency is when the message starts
  // on it. The rest of the route waits for sendRest (Engine::transmit: at that time).
  void sendFirst(std::span<const DirLink> path, double depart, double bytes, Cursor* c) {
    *c = Cursor{depart, 0, 0, 0};
    hops(path.first(std::min<size_t>(1, path.size())), bytes, 0, c);
  }
  // Books the links of `path` from c->next on (a prefix of the route: the rest waits, see
  // Engine::start).
  void advance(std::span<const DirLink> path, double bytes, Cursor* c) { hops(path, bytes, 0, c); }
  double sendRest(std::span<const DirLink> path, double bytes, Cursor c, double* first) {
    hops(path, bytes, 0, &c);
    return finishSend(path, c.head, c, first);
  }
  double send(DirLink d, double depart, double bytes) { return send({&d, 1}, depart, bytes, nullptr); }
  // A switch's reduction engine for one group as a server of `rate` GB/s per port: a chunk of
  // `bytes` from every port is reduced in bytes / rate, one chunk after another. Groups on
  // different ports (SHARP trees of different GPUs) reduce in parallel.
  // fixedUs: a cost per chunk on top of its bytes (NVLS: see NvlsSim).
  double reduce(int sw, int group, double ready, double bytes, double rateGBps, double fixedUs = 0) {
    double& f = reduceFree_[reduceKey(sw, group)];
    double start = std::max(ready, f);
    f = start + fixedUs + bytes / (rateGBps * kB);
    return f;
  }
  double freeAt(DirLink d) const { return free_[d]; }
  double overhead(std::span<const DirLink> path) const {
    for (DirLink d : path)
      if (net_[d]) return k_.stepOverheadUs + k_.netStepOverheadUs;
    return k_.stepOverheadUs;
  }
  double overhead(DirLink d) const { return overhead({&d, 1}); }
  double rate(DirLink d) const { return rate_[d]; }
  // Link `to` (and switch `toSw`'s reduction engine for `group`) takes the state of `from`: for
  // the NVLS simulation, which runs one domain for a class of identical ones.
  void copyLink(DirLink from, DirLink to) {
    free_[to] = free_[from], busy_[to] = busy_[from], bytes_[to] = bytes_[from];
  }
  void copyReduce(int fromSw, int toSw, int group) {
    auto it = reduceFree_.find(reduceKey(fromSw, group));
    if (it != reduceFree_.end()) reduceFree_[reduceKey(toSw, group)] = it->second;
  }
  void report(int topLinks, SimResult* out) const {
    // A group's members each carried an even share of its bytes, busy as long as the group.
    std::vector<double> busy(busy_.begin(), busy_.begin() + firstGroup()),
        bytes(bytes_.begin(), bytes_.begin() + firstGroup());
    for (size_t g = 0; g < members_.size(); ++g)
      for (DirLink d : members_[g]) {
        busy[d] += busy_[firstGroup() + g];
        bytes[d] += bytes_[firstGroup() + g] / static_cast<double>(members_[g].size());
      }
    std::vector<int> idx(busy.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int>(i);
    int top = std::min<int>(topLinks, static_cast<int>(idx.size()));
    std::partial_sort(idx.begin(), idx.begin() + top, idx.end(),
                      [&](int a, int b) { return busy[a] > busy[b]; });
    for (int i = 0; i < top; ++i) {
      int d = idx[i];
      if (busy[d] <= 0) break;
      const Link& l = t_.link(d >> 1);
      int from = (d & 1) ? l.b : l.a, to = (d & 1) ? l.a : l.b;
      LinkLoad ll;
      ll.name = strprintf("%s -> %s (%s)", t_.node(from).name.c_str(), t_.node(to).name.c_str(),
                          linkTypeName(l.type));
      ll.bytes = bytes[d];
      ll.busyUs = busy[d];
      ll.utilization = out->timeUs > 0 ? busy[d] / out->timeUs : 0;
      out->busiest.push_back(ll);
    }
  }

 private:
  // Books path[c->next ..] in turn, cut-through, behind earlier messages on each link.
  void hops(std::span<const DirLink> path, double bytes, double gapUs, Cursor* c) {
    for (; c->next < path.size(); ++c->next) {
      const DirLink d = path[c->next];
      const double lat = lat_[d];
      double start = std::max(c->head, free_[d]);
      double x = bytes / rate_[d];
      double finish = std::max(start + x, c->tail + c->prevLat);
      // A link is held until the message's tail has left it; a group only for its share of the
      // group's rate: a message fed slower than that (one NIC into a leaf's 36 uplinks) leaves the
      // rest of the group to other messages meanwhile, as its sprayed packets leave the other links.
      free_[d] = (static_cast<size_t>(d) >= groupBase_ ? start + x : finish) + (c->next == 0 ? gapUs : 0);
      busy_[d] += x;
      bytes_[d] += bytes;
      c->head = start + lat;
      c->tail = finish;
      c->prevLat = lat;
    }
  }
  static double finishSend(std::span<const DirLink> path, double depart, const Cursor& c, double* first) {
    if (first) *first = c.head;
    return path.empty() ? depart : c.tail + c.prevLat;
  }
  static uint64_t reduceKey(int sw, int group) {
    return static_cast<uint64_t>(sw) << 24 | static_cast<uint32_t>(group);
  }
  const Topology& t_;
  const CostConstants& k_;
  std::vector<double> free_, busy_, bytes_, rate_, lat_;
  size_t groupBase_ = 0;                       // firstGroup()
  std::vector<uint8_t> net_;                   // a network link (or a group of them)
  std::vector<std::vector<DirLink>> members_;  // per group (ids from firstGroup() on)
  std::unordered_map<uint64_t, double> reduceFree_;
};

// The index in `path` of the link out of its last switch (into the destination's NIC or GPU), or 0
// where the route has no switch past its first link. Groups of spine links are never that link.
inline size_t egressIndex(const Topology& t, std::span<const DirLink> path) {
  for (size_t i = path.size(); i-- > 1;) {
    if (path[i] >= 2 * static_cast<DirLink>(t.numLinks())) continue;  // a group of spine links
    const NodeType from = t.node(dirLinkFrom(t, path[i])).type;
    if (from == NodeType::Switch || from == NodeType::NvSwitch) return i;
  }
  return 0;
}

// The messages waiting for one link, served round robin over their streams (a switch's port
// arbitrating among the senders whose messages wait for it, a NIC among its queue pairs): a
// stream's next message takes the start tag after its last one, at least the tag of the message
// on the link, and the smallest tag goes next (equal tags in posting order). So a stream with a
// backlog takes its turn with the others instead of holding the link for all of it.
template <class M>
struct FairQueue {
  struct Waiting {
    double tag;
    uint64_t order;
    double ready;
    M m;
    bool operator>(const Waiting& o) const { return tag != o.tag ? tag > o.tag : order > o.order; }
  };
  std::priority_queue<Waiting, std::vector<Waiting>, std::greater<>> waiting;
  double vtime = 0;                               // the tag of the message on the link
  bool scheduled = false;                         // an event to serve the next waiting message is pending
  std::vector<std::pair<int, double>> sourceTag;  // per sender (tagFor): its next tag

  // The tag of `source`'s next message (advancing its turn).
  double tagFor(int source) {
    auto it =
        std::find_if(sourceTag.begin(), sourceTag.end(), [&](const auto& e) { return e.first == source; });
    if (it == sourceTag.end()) it = sourceTag.insert(sourceTag.end(), {source, 0.0});
    const double tag = std::max(vtime, it->second);
    it->second = tag + 1;
    return tag;
  }
  // A message with `tag`, ready for link d at `ready`: true if it takes the link now (nothing
  // waits and the link is free); else it waits, and the caller schedules the link's next
  // service (at max(links.freeAt(d), ready)) unless one is (scheduled).
  bool offer(const Links& links, DirLink d, double tag, uint64_t order, double ready, const M& m) {
    if (waiting.empty() && links.freeAt(d) <= ready) {
      vtime = tag;
      return true;
    }
    waiting.push({tag, order, ready, m});
    return false;
  }
  // The service scheduled for link d, at `now`: the waiting message with the smallest tag takes
  // the link (serve(m, at); serve must not add to this queue), and schedule(at) asks for the next
  // service while others wait.
  template <class Serve, class Schedule>
  void serveNext(const Links& links, DirLink d, double now, const Serve& serve, const Schedule& schedule) {
    scheduled = false;
    if (waiting.empty()) return;
    if (links.freeAt(d) > now) return schedule(links.freeAt(d));  // booked meanwhile
    const Waiting w = waiting.top();
    waiting.pop();
    vtime = w.tag;
    serve(w.m, std::max(now, w.ready));
    if (!waiting.empty()) schedule(std::max(links.freeAt(d), now));
  }
};

inline double reduceBpu(const Node& n, const CostConstants& k) {
  return (n.reduceGBps > 0 ? n.reduceGBps : (n.type == NodeType::Gpu ? k.gpuReduceGBps : k.cpuReduceGBps)) *
         kB;
}

// In-network reduction over one aggregation tree for a group of endpoints: each member streams
// `bytes` up its path to its leaf switch, each switch reduces once all its children arrived and
// forwards up, the root's result travels back down (one copy per link: multicast).
class AggGroup {
 public:
  Status init(const Topology& t, const std::vector<int>& members, int treeIndex) {
    group_ = treeIndex;
    up_.resize(members.size());
    back_.resize(members.size());
    std::vector<int> leaves;
    for (size_t i = 0; i < members.size(); ++i) {
      int leaf = firstSwitchAbove(t, members[i], &up_[i]);
      if (leaf < 0 || !t.node(leaf).reduce.can())
        return errorf(tribInvalidArgument, "'%s' has no reduce-capable switch above it",
                      t.node(members[i]).name.c_str());
      for (auto d = up_[i].rbegin(); d != up_[i].rend(); ++d) back_[i].push_back(*d ^ 1);
      auto it = std::find(leaves.begin(), leaves.end(), leaf);
      leafOf_.push_back(static_cast<int>(it - leaves.begin()));
      if (it == leaves.end()) leaves.push_back(leaf);
    }
    int depth = 0;
    tree_ = findAggTree(t, leaves, &depth, treeIndex);
    if (!tree_)
      return errorf(tribInvalidArgument, "no aggregation tree spans the leaf switches of the group");
    std::unordered_map<int, int> parent;
    for (auto [c, p] : tree_->edges) parent[c] = p;
    // Switches in the tree below-first order: leaves, then parents; each one's parent by position.
    order_ = leaves;
    std::unordered_map<int, int> pos;
    for (size_t i = 0; i < order_.size(); ++i) pos[order_[i]] = static_cast<int>(i);
    for (size_t i = 0; i < order_.size(); ++i) {
      auto it = parent.find(order_[i]);
      if (it != parent.end() && !pos.count(it->second)) {
        pos[it->second] = static_cast<int>(order_.size());
        order_.push_back(it->second);
      }
    }
    parentPos_.assign(order_.size(), -1);
    toParent_.assign(order_.size(), -1);
    fromParent_.assign(order_.size(), -1);
    for (size_t i = 0; i < order_.size(); ++i) {
      auto it = parent.find(order_[i]);
      if (it == parent.end()) continue;
      parentPos_[i] = pos[it->second];
      toParent_[i] = dirLinkBetween(t, order_[i], it->second);
      fromParent_[i] = dirLinkBetween(t, it->second, order_[i]);
    }
    rootPos_ = pos[tree_->root];
    reduceRate_.resize(order_.size());
    for (size_t i = 0; i < order_.size(); ++i) reduceRate_[i] = t.node(order_[i]).reduce.reduceGBps;
    return Status::Ok();
  }
  // Every member sends and receives `bytes`; departs[i] = when member i's data is ready; out[i] =
  // when the result reaches member i.
  void run(Links& links, const CostConstants& k, double bytes, const double* departs, double* out) {
    run(
        links, k, [bytes](size_t) { return bytes; }, [bytes](size_t) { return bytes; }, bytes, bytes, departs,
        out);
  }
  // Member i sends up[i] bytes and receives down[i]; the tree's links carry the largest of each
  // (a reduction up, a multicast down).
  std::vector<double> run(Links& links, const CostConstants& k, const std::vector<double>& up,
                          const std::vector<double>& down, const std::vector<double>& departs) {
    std::vector<double> out(up_.size());
    run(
        links, k, [&](size_t i) { return up[i]; }, [&](size_t i) { return down[i]; },
        *std::max_element(up.begin(), up.end()), *std::max_element(down.begin(), down.end()), departs.data(),
        out.data());
    return out;
  }
  size_t size() const { return up_.size(); }
  // Switches (node ids) and directed links the group's reduction uses.
  const std::vector<int>& switches() const { return order_; }
  template <class F>
  void forEachLink(F f) const {
    for (const auto& p : up_)
      for (DirLink d : p) f(d), f(d ^ 1);
    for (size_t i = 0; i < order_.size(); ++i)
      if (parentPos_[i] >= 0) f(toParent_[i]), f(fromParent_[i]);
  }

 private:
  template <class Up, class Down>
  void run(Links& links, const CostConstants& k, Up up, Down down, double upTree, double downTree,
           const double* departs, double* out) {
    ready_.assign(order_.size(), 0);  // per switch: all inputs arrived, then its result arrived
    for (size_t i = 0; i < up_.size(); ++i) {
      // Each call is one chunk: the member's next one leaves a chunk overhead after it (the flag
      // and credit exchange per chunk, as the NVSwitch's reduction pays it in NvlsSim and the cost
      // model charges it: the slowest stage shows it).
      double at = links.send(up_[i], departs[i] + links.overhead(up_[i]), up(i), nullptr, k.chunkOverheadUs);
      ready_[leafOf_[i]] = std::max(ready_[leafOf_[i]], at);
    }
    for (size_t i = 0; i < order_.size(); ++i) {
      double done = links.reduce(order_[i], group_, ready_[i] + k.switchOpUs, upTree, reduceRate_[i]);
      ready_[i] = done;
      if (parentPos_[i] >= 0) {
        double at = links.send(toParent_[i], done, upTree);
        ready_[parentPos_[i]] = std::max(ready_[parentPos_[i]], at);
      }
    }
    result_.assign(order_.size(), 0);
    result_[rootPos_] = ready_[rootPos_];
    for (size_t i = order_.size(); i-- > 0;)
      if (parentPos_[i] >= 0) result_[i] = links.send(fromParent_[i], result_[parentPos_[i]], downTree);
    for (size_t i = 0; i < up_.size(); ++i)
      // The result reaches the rank as a message of its own: its completion costs a network step.
      out[i] = links.send(back_[i], result_[leafOf_[i]] + links.overhead(back_[i]), down(i), nullptr);
  }

  std::vector<int> leafOf_;  // per member: its leaf's position in order_
  std::vector<int> order_, parentPos_;
  std::vector<DirLink> toParent_, fromParent_;
  std::vector<double> reduceRate_, ready_, result_;
  std::vector<std::vector<DirLink>> up_, back_;
  const AggTree* tree_ = nullptr;
  int group_ = 0, rootPos_ = 0;
};

// The servers (Links::addGroup) of equal-cost hops, one per set of parallel links, made on first
// use and shared by every route that takes them.
class SpineGroups {
 public:
  explicit SpineGroups(Links& links) : links_(links) {}
  // The group of a hop's equal-cost links `alt`; `own` (the hashed route's link) where some of them
  // already serve in a different group, so that every link is booked through one server. In a fat
  // tree the sets never overlap partly: a leaf's uplinks to all its spines, a spine's downlinks to
  // one leaf, a plane's links between a pod and its core.
  DirLink spread(const std::vector<DirLink>& alt, DirLink own) {
    if (groupOf_.empty()) groupOf_.assign(links_.firstGroup(), -1);
    const DirLink g = groupOf_[alt[0]];
    if (g < 0) {
      for (DirLink d : alt)
        if (groupOf_[d] >= 0) return own;
      const DirLink made = links_.addGroup(alt);
      for (DirLink d : alt) groupOf_[d] = made;
      return made;
    }
    if (links_.groupSize(g) != alt.size()) return own;
    for (DirLink d : alt)
      if (groupOf_[d] != g) return own;
    return g;
  }

 private:
  Links& links_;
  std::vector<DirLink> groupOf_;  // per directed link: its group, -1 none
};

}  // namespace trib::replay
