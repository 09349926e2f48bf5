#include "transports/switch/switch_node.hpp"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <unordered_map>

#include "algo/schedule.hpp"
#include "bootstrap/net.hpp"
#include "reduce/reduce.hpp"
#include "transports/switch/switch_auth.hpp"
#include "transports/switch/switch_link.hpp"
#include "transports/switch/switch_protocol.hpp"

namespace trib::sw {

namespace {

using Buffer = std::shared_ptr<const std::vector<uint8_t>>;
constexpr size_t kMaxEvents = 256;

// The header of a message whose payload (h.payloadBytes) is sent from another buffer.
std::vector<uint8_t> headerOnly(const Header& h) {
  std::vector<uint8_t> v(kHeaderBytes);
  encodeHeader(h, v.data());
  return v;
}

struct Conn {
  uint64_t id = 0;
  std::unique_ptr<Link> link;
  enum class Stage : uint8_t { Hello, Proof, Done } stage = Stage::Hello;  // switch_auth.hpp
  Role role = Role::Rank;
  auth::Nonce clientNonce{}, serverNonce{};
  bool isParent = false;
  bool dead = false;
  std::string peer;  // for messages
  uint8_t hdr[kHeaderBytes];
  size_t hdrGot = 0;
  bool inPayload = false;
  Header cur;
  std::vector<uint8_t> payload;  // a pool buffer while a payload is being read
  size_t payLen = 0;
  size_t payGot = 0;
  std::deque<std::pair<Buffer, size_t>> out;  // buffer, bytes of it to send
  size_t outOff = 0;
  std::map<uint64_t, uint32_t> groups;  // group -> this connection's child index
};

struct Slot {
  uint8_t dtype = 0, redop = 0, coll = 0;
  uint64_t count = 0;
  uint32_t root = 0;
  uint32_t nranks = 0;                       // all-gather: ranks of the communicator
  std::vector<uint8_t> acc;                  // child 0's buffer, then the running reduction
  uint32_t next = 0;                         // the next child to fold in (child order)
  uint32_t arrived = 0;                      // children whose contribution is complete
  std::vector<std::vector<uint8_t>> staged;  // contributions that arrived ahead of their turn
  std::vector<bool> got;
  int64_t ownerChild = -1;       // the child the chunk's owner (root) is at or below
  std::vector<uint32_t> expect;  // all-gather: pieces each child announced
  std::vector<uint32_t> pieces;  // all-gather: pieces each child delivered
  std::vector<bool> placed;      // all-gather: ranks whose piece is in `acc`
  Buffer kept;                   // broadcast: the root's data, sent up, kept for the way down
  bool waitingParent = false;
};

struct Group {
  enum State { Pending, Active, Refused, Failed } state = Pending;
  uint64_t id = 0;
  uint32_t members = 0, quota = 0, answered = 0;
  uint64_t slotBytes = 0;
  std::vector<PathLevel> upPath;   // levels above this switch
  std::vector<uint64_t> children;  // connection id per child index (0 = not attached)
  std::vector<int64_t> rankOf;     // the rank a child said it is (-1: a switch, or not said)
  std::vector<uint64_t> pendingAcks;
  std::string reason;
  bool reserved = false;  // holds `quota` slots of the pool
  std::map<std::pair<uint64_t, uint32_t>, Slot> slots;
};

}  // namespace

struct SwitchNode::Impl {
  SwitchConfig cfg;
  std::unique_ptr<LinkHub> hub;  // before `conns`: links go before their hub
  std::string bound;
  uint64_t nextConnId = 1;
  uint64_t parentId = 0;  // 0: no parent connection
  // Payload buffers of bufBytes, recycled: allocating 256 KiB per chunk costs page faults.
  std::vector<std::vector<uint8_t>> pool;
  size_t bufBytes = 0;
  std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns;
  std::unordered_map<uint64_t, Group> groups;
  uint32_t freeSlots = 0;
  mutable std::mutex statsMu;  // stats and events are read by other threads
  SwitchStats st;
  std::vector<std::string> events;

  void event(const std::string& what) {
    TRIB_SWITCH_WARN("trib-switchd %s: %s", bound.c_str(), what.c_str());
    std::lock_guard<std::mutex> lock(statsMu);
    if (events.size() >= kMaxEvents) events.erase(events.begin());  // a daemon runs for long
    events.push_back(what);
  }

  Conn* conn(uint64_t id) {
    auto it = conns.find(id);
    return it == conns.end() || it->second->dead ? nullptr : it->second.get();
  }

  std::vector<uint8_t> take() {
    if (pool.empty()) return std::vector<uint8_t>(bufBytes);
    std::vector<uint8_t> v = std::move(pool.back());
    pool.pop_back();
    return v;
  }
  void give(std::vector<uint8_t>&& v) {
    if (v.size() == bufBytes && pool.size() < cfg.slots + 64) pool.push_back(std::move(v));
  }
  // A pool buffer shared by several sends (multicast); it returns to the pool after the last.
  Buffer share(std::vector<uint8_t>&& v) {
    return Buffer(new std::vector<uint8_t>(std::move(v)), [this](const std::vector<uint8_t>* p) {
      give(std::move(*const_cast<std::vector<uint8_t>*>(p)));
      delete p;
    });
  }

  void send(Conn* c, Buffer b, size_t len) {
    if (!c || c->dead) return;
    c->out.emplace_back(std::move(b), len);
    flush(c);
  }
  void send(Conn* c, Buffer b) {
    size_t len = b->size();
    send(c, std::move(b), len);
  }
  // Header + payload of `len` bytes from a shared buffer.
  void sendData(Conn* c, Header h, const Buffer& payload, size_t len) {
    h.payloadBytes = static_cast<uint32_t>(len);
    send(c, headerOnly(h));
    if (len) send(c, payload, len);
  }
  void send(Conn* c, std::vector<uint8_t> bytes) {
    send(c, std::make_shared<const std::vector<uint8_t>>(std::move(bytes)));
  }

  void flush(Conn* c) {
    while (!c->out.empty() && !c->dead) {
      const auto& b = *c->out.front().first;
      const size_t len = c->out.front().second;
      size_t w = 0;
      Status s = c->link->send(b.data() + c->outOff, len - c->outOff, &w);
      if (!s.ok()) return drop(c, s.message(), false);
      if (w == 0) return;
      c->outOff += w;
      if (c->outOff == len) {
        c->out.pop_front();
        c->outOff = 0;
      }
    }
  }

  // Closes a connection. `violation`: the peer broke the protocol (counted and logged as such).
  void drop(Conn* c, const std::string& why, bool violation) {
    if (c->dead) return;
    c->dead = true;
    if (violation) {
      std::lock_guard<std::mutex> lock(statsMu);
      ++st.disconnects;
    }
    if (violation || c->isParent) event(strprintf("disconnected %s: %s", c->peer.c_str(), why.c_str()));
    if (violation) {
      // Best effort: tell the peer why before closing.
      auto msg = textMessage(MsgType::Error, 0, why);
      size_t sent = 0;
      (void)c->link->send(msg.data(), msg.size(), &sent);
    }
    c->link.reset();
    if (c->isParent) {
      parentId = 0;
      std::vector<uint64_t> ids;
      for (auto& [id, g] : groups)
        if (!g.upPath.empty()) ids.push_back(id);
      for (uint64_t id : ids) failGroup(groups[id], "the parent switch went away (" + why + ")");
    }
    auto mine = c->groups;
    for (auto& [gid, child] : mine) {
      auto it = groups.find(gid);
      if (it == groups.end()) continue;
      failGroup(it->second, strprintf("%s (%s) disconnected: %s%s", memberName(it->second, child).c_str(),
                                      c->peer.c_str(), why.c_str(), lacking(it->second, child).c_str()));
      detach(it->second, child);
    }
  }

  void detach(Group& g, uint32_t child) {
    if (child < g.children.size()) g.children[child] = 0;
    bool any = std::any_of(g.children.begin(), g.children.end(), [](uint64_t id) { return id != 0; });
    if (!any && (g.state == Group::Failed || g.state == Group::Refused)) groups.erase(g.id);
  }

  void release(Group& g) {
    if (g.reserved) freeSlots += g.quota;
    g.reserved = false;
    g.slots.clear();
  }

  void failGroup(Group& g, const std::string& why) {
    if (g.state == Group::Failed || g.state == Group::Refused) return;
    const bool idle = g.slots.empty() && g.state == Group::Active;
    g.state = Group::Failed;
    g.reason = why;
    {
      std::lock_guard<std::mutex> lock(statsMu);
      ++st.groupsEnded;
    }
    // A member leaving an idle group is how a communicator ends: not worth a warning.
    if (idle) {
      TRIB_SWITCH_INFO("trib-switchd %s: group %llx ended: %s", bound.c_str(),
                       static_cast<unsigned long long>(g.id), why.c_str());
    } else {
      event(strprintf("group %llx failed: %s", static_cast<unsigned long long>(g.id), why.c_str()));
    }
    auto msg = std::make_shared<const std::vector<uint8_t>>(textMessage(MsgType::Error, g.id, why));
    for (uint64_t id : g.children) send(conn(id), msg);
    g.pendingAcks.clear();  // pending members are among the children: they got the Error
    if (!g.upPath.empty() && parentId) {
      Header h;
      h.type = MsgType::Leave;
      h.group = g.id;
      h.child = g.upPath[0].index;
      send(conn(parentId), encodeMessage(h, nullptr, 0));
    }
    release(g);
  }

  void refuseMember(Conn* c, uint64_t group, const std::string& why) {
    event(strprintf("refused %s for group %llx: %s", c->peer.c_str(), static_cast<unsigned long long>(group),
                    why.c_str()));
    send(c, textMessage(MsgType::Refuse, group, why));
  }

  void ack(Conn* c, const Group& g) {
    Header h;
    h.type = MsgType::RegisterAck;
    h.group = g.id;
    h.arg64 = g.slotBytes;
    h.arg32 = g.quota;
    send(c, encodeMessage(h, nullptr, 0));
  }

  void onRegister(Conn* c, const Header& h) {
    std::vector<PathLevel> path;
    Status ps = parsePath(c->payload.data(), c->payLen, &path);
    if (!ps.ok()) return drop(c, ps.message(), true);
    const PathLevel me = path[0];
    auto it = groups.find(h.group);
    if (it == groups.end()) {
      Group g;
      g.id = h.group;
      g.members = me.members;
      g.quota = h.arg32;
      g.slotBytes = cfg.slotBytes;
      g.children.assign(me.members, 0);
      g.rankOf.assign(me.members, -1);
      g.upPath.assign(path.begin() + 1, path.end());
      if (!g.upPath.empty() && !parentId) {
        g.state = Group::Refused;
        g.reason = strprintf("the group's path has %zu levels above this switch, but it has no parent switch",
                             g.upPath.size());
      } else if (g.quota > freeSlots) {
        g.state = Group::Refused;
        g.reason = strprintf(
            "slots exhausted: the group asks for %u slots, %u of %u are free (try later, fewer "
            "slots, or plan without the switch)",
            g.quota, freeSlots, cfg.slots);
      } else {
        freeSlots -= g.quota;
        g.reserved = true;
        if (g.upPath.empty()) {
          g.state = Group::Active;
        } else {
          Header up;
          up.type = MsgType::Register;
          up.group = g.id;
          up.arg32 = g.quota;
          up.child = g.upPath[0].index;
          auto p = encodePath(g.upPath);
          send(conn(parentId), encodeMessage(up, p.data(), p.size()));
        }
      }
      it = groups.emplace(h.group, std::move(g)).first;
    }
    Group& g = it->second;
    ++g.answered;
    if (g.state == Group::Refused || g.state == Group::Failed) {
      refuseMember(c, g.id, g.reason);
      if (g.state == Group::Refused && g.answered >= g.members) groups.erase(it);
      return;
    }
    if (me.members != g.members || h.arg32 != g.quota) {
      std::string why = strprintf("member %u says %u members / %u slots, the group has %u / %u", me.index,
                                  me.members, h.arg32, g.members, g.quota);
      refuseMember(c, g.id, why);
      return failGroup(g, why);
    }
    if (g.children[me.index] != 0 || c->groups.count(g.id)) {
      std::string why = strprintf("child %u registered twice", me.index);
      refuseMember(c, g.id, why);
      return failGroup(g, why);
    }
    g.children[me.index] = c->id;
    if (h.arg64 > 0 && h.arg64 <= (uint64_t{1} << 31)) g.rankOf[me.index] = static_cast<int64_t>(h.arg64 - 1);
    c->groups[g.id] = me.index;
    if (g.state == Group::Active)
      ack(c, g);
    else
      g.pendingAcks.push_back(c->id);
  }

  void onParentReply(const Header& h, const std::vector<uint8_t>& payload) {
    auto it = groups.find(h.group);
    if (it == groups.end()) return;  // failed and forgotten meanwhile
    Group& g = it->second;
    if (h.type == MsgType::RegisterAck && g.state == Group::Pending) {
      g.state = Group::Active;
      g.slotBytes = std::min(g.slotBytes, h.arg64);
      g.quota = std::min(g.quota, h.arg32);
      for (uint64_t id : g.pendingAcks) ack(conn(id), g);
      g.pendingAcks.clear();
    } else if (h.type == MsgType::Refuse || h.type == MsgType::Error) {
      std::string why(payload.begin(), payload.begin() + h.payloadBytes);
      failGroup(g, "the parent switch: " + why);
    }
  }

  // Hands a completed chunk down: data to the children that receive it (all of them, or only
  // toward the owner for reduce/reduce-scatter, all but the owner for broadcast), a payload-free
  // completion to the others, so every member knows the chunk is done and its window advances.
  void deliver(Group& g, const Slot& s, const Header& from, const Buffer& data, size_t bytes) {
    Header r = from;
    r.type = MsgType::Result;
    r.child = 0;
    r.flags = 0;
    r.arg64 = 0;
    r.payloadBytes = static_cast<uint32_t>(bytes);
    Header done = r;
    done.flags = kFlagNoData;
    done.payloadBytes = 0;
    auto head = std::make_shared<const std::vector<uint8_t>>(headerOnly(r));
    auto completion = std::make_shared<const std::vector<uint8_t>>(headerOnly(done));
    const auto coll = static_cast<Coll>(s.coll);
    uint64_t n = 0, out = 0;
    for (uint32_t child = 0; child < g.children.size(); ++child) {
      Conn* c = conn(g.children[child]);
      if (!c) continue;
      const bool isOwner = static_cast<int64_t>(child) == s.ownerChild;
      bool wants = true;
      if (coll == Coll::Reduce || coll == Coll::ReduceScatter) wants = isOwner;
      if (coll == Coll::Broadcast) wants = !isOwner;
      if (wants && data) {
        send(c, head);
        if (bytes) send(c, data, bytes);
        out += bytes;
      } else {
        send(c, completion);
      }
      ++n;
    }
    std::lock_guard<std::mutex> lock(statsMu);
    st.resultsSent += n;
    st.payloadOut += out;
  }

  // The slot's outcome once every child is in: up to the parent, or down to the children.
  void complete(Group& g, std::map<std::pair<uint64_t, uint32_t>, Slot>::iterator sit, const Header& h) {
    Slot& s = sit->second;
    const auto coll = static_cast<Coll>(s.coll);
    const size_t es = dataTypeSize(static_cast<DataType>(s.dtype));
    {
      std::lock_guard<std::mutex> lock(statsMu);
      ++st.chunksReduced;
    }
    Header out = h;
    out.flags = s.ownerChild >= 0 ? kFlagOwner : 0;
    if (coll == Coll::AllGather) {
      uint32_t have = 0;
      for (bool p : s.placed) have += p;
      if (!g.upPath.empty()) {
        // Each piece travels up on its own, tagged with its rank: the parent places it by rank.
        out.type = MsgType::Chunk;
        out.child = g.upPath[0].index;
        out.arg64 = have;
        out.flags = 0;
        for (uint32_t r = 0; r < s.nranks; ++r) {
          if (!s.placed[r]) continue;
          out.root = r;
          send(conn(parentId), encodeMessage(out, s.acc.data() + r * s.count * es, s.count * es));
        }
        give(std::move(s.acc));
        s.acc = {};
        s.waitingParent = true;
        return;
      }
      if (have != s.nranks)
        return failGroup(g, strprintf("all-gather chunk %u of operation %llu: %u of %u ranks' pieces came in "
                                      "(the tree's members do not match the communicator)",
                                      h.chunk, static_cast<unsigned long long>(h.opId), have, s.nranks));
      out.root = 0;
      const size_t bytes = s.nranks * s.count * es;
      Buffer data = share(std::move(s.acc));
      deliver(g, s, out, data, bytes);
      g.slots.erase(sit);
      return;
    }
    const bool rooted = coll == Coll::Reduce || coll == Coll::Broadcast || coll == Coll::ReduceScatter;
    const bool hasData = coll != Coll::Broadcast || s.ownerChild >= 0;
    const size_t bytes = hasData ? s.count * es : 0;
    if (!g.upPath.empty()) {
      out.type = MsgType::Chunk;
      out.child = g.upPath[0].index;
      if (!hasData) out.flags |= kFlagNoData;
      out.payloadBytes = static_cast<uint32_t>(bytes);
      s.waitingParent = true;
      Buffer data = share(std::move(s.acc));
      s.acc = {};
      if (coll == Coll::Broadcast && hasData) s.kept = data;  // the way down needs it again
      sendData(conn(parentId), out, data, bytes);
      return;
    }
    if (rooted && s.ownerChild < 0)
      return failGroup(g, strprintf("no member is root %u of chunk %u of operation %llu (members disagree "
                                    "on the root?)",
                                    s.root, h.chunk, static_cast<unsigned long long>(h.opId)));
    Buffer data = share(std::move(s.acc));
    deliver(g, s, out, data, bytes);
    g.slots.erase(sit);
  }

  void onChunk(Conn* c, const Header& h) {
    auto mine = c->groups.find(h.group);
    auto it = groups.find(h.group);
    if (mine == c->groups.end() || it == groups.end())
      return drop(c,
                  strprintf("chunk for group %llx, which it is not a member of",
                            static_cast<unsigned long long>(h.group)),
                  true);
    if (mine->second != h.child)
      return drop(c, strprintf("chunk claims child %u but it registered as child %u", h.child, mine->second),
                  true);
    Group& g = it->second;
    if (g.state != Group::Active) return;  // failed: in-flight chunks are dropped quietly
    {
      std::lock_guard<std::mutex> lock(statsMu);
      st.payloadIn += h.payloadBytes;
    }
    const auto coll = static_cast<Coll>(h.coll);
    if (!switchSupportsColl(h.coll))
      return failGroup(g, strprintf("collective %s is not run by this switch (allreduce, reduce, broadcast, "
                                    "allgather, reducescatter and barrier are): run it with a host algorithm",
                                    collName(coll)));
    const size_t es = dataTypeSize(static_cast<DataType>(h.dtype));
    const uint64_t slotNeed = coll == Coll::AllGather ? uint64_t{h.arg32} * h.count * es : h.payloadBytes;
    if (slotNeed > g.slotBytes)
      return failGroup(g, strprintf("%s chunk of %llu bytes exceeds the group's %llu-byte slots",
                                    collName(coll), static_cast<unsigned long long>(slotNeed),
                                    static_cast<unsigned long long>(g.slotBytes)));
    auto key = std::make_pair(h.opId, h.chunk);
    auto sit = g.slots.find(key);
    if (sit == g.slots.end()) {
      if (g.slots.size() >= g.quota)
        return failGroup(g, strprintf("more than the %u reserved chunks in flight", g.quota));
      Slot s;
      s.dtype = h.dtype;
      s.redop = h.redop;
      s.coll = h.coll;
      s.count = h.count;
      s.root = h.root;
      s.staged.resize(g.members);
      s.got.assign(g.members, false);
      if (coll == Coll::AllGather) {
        s.nranks = h.arg32;
        s.expect.assign(g.members, 0);
        s.pieces.assign(g.members, 0);
        s.placed.assign(h.arg32, false);
        s.acc = take();
      }
      sit = g.slots.emplace(key, std::move(s)).first;
    }
    Slot& s = sit->second;
    const bool sameRoot = coll == Coll::AllGather ? s.nranks == h.arg32 : s.root == h.root;
    if (s.dtype != h.dtype || s.redop != h.redop || s.coll != h.coll || s.count != h.count || !sameRoot)
      return failGroup(g, strprintf("members disagree on chunk %u of operation %llu (collective/dtype/op/"
                                    "count/root)",
                                    h.chunk, static_cast<unsigned long long>(h.opId)));
    if (s.waitingParent || s.got[h.child])
      return failGroup(g, strprintf("child %u contributed chunk %u of operation %llu twice", h.child, h.chunk,
                                    static_cast<unsigned long long>(h.opId)));
    if (h.flags & kFlagOwner) {
      if (s.ownerChild >= 0 && s.ownerChild != h.child)
        return failGroup(g, strprintf("children %lld and %u both claim root %u of chunk %u of operation %llu",
                                      static_cast<long long>(s.ownerChild), h.child, h.root, h.chunk,
                                      static_cast<unsigned long long>(h.opId)));
      s.ownerChild = h.child;
    }
    if (coll == Coll::AllGather) {
      if (h.arg64 == 0 || h.arg64 > s.nranks || (s.expect[h.child] && s.expect[h.child] != h.arg64))
        return failGroup(g, strprintf("child %u announces %llu all-gather pieces for chunk %u", h.child,
                                      static_cast<unsigned long long>(h.arg64), h.chunk));
      if (s.placed[h.root])
        return failGroup(g, strprintf("rank %u's all-gather piece of chunk %u of operation %llu came twice",
                                      h.root, h.chunk, static_cast<unsigned long long>(h.opId)));
      s.expect[h.child] = static_cast<uint32_t>(h.arg64);
      s.placed[h.root] = true;
      if (h.payloadBytes)
        std::memcpy(s.acc.data() + uint64_t{h.root} * h.payloadBytes, c->payload.data(), h.payloadBytes);
      if (++s.pieces[h.child] < s.expect[h.child]) return;
      s.got[h.child] = true;
      if (++s.arrived < g.members) return;
      return complete(g, sit, h);
    }
    if (coll == Coll::Broadcast) {
      // Only the root's data travels; the others' chunks are payload-free "ready" markers.
      const bool owner = (h.flags & kFlagOwner) != 0;
      if (owner == ((h.flags & kFlagNoData) != 0))
        return failGroup(
            g, strprintf("broadcast chunk %u from child %u: %s", h.chunk, h.child,
                         owner ? "the root sent no data" : "a member that is not the root sent data"));
      s.got[h.child] = true;
      if (owner) {
        s.acc = std::move(c->payload);
        c->payload = {};
      }
      if (++s.arrived < g.members) return;
      return complete(g, sit, h);
    }
    s.got[h.child] = true;
    s.staged[h.child] = std::move(c->payload);
    c->payload = {};
    // Fold in child order: the accumulator is ((c0 op c1) op c2) ... whatever the arrival order.
    const auto dtype = static_cast<DataType>(s.dtype);
    const auto op = static_cast<RedOp>(s.redop);
    while (s.next < g.members && s.got[s.next]) {
      auto& in = s.staged[s.next];
      if (s.next == 0) {
        s.acc.swap(in);
      } else {
        if (s.count) reduce(s.acc.data(), s.acc.data(), in.data(), s.count, dtype, op);
        give(std::move(in));
      }
      in = {};
      ++s.next;
    }
    if (s.next < g.members) return;
    complete(g, sit, h);
  }

  void onParentResult(const Header& h, std::vector<uint8_t>& payload) {
    auto it = groups.find(h.group);
    if (it == groups.end() || it->second.state != Group::Active) return;
    Group& g = it->second;
    auto sit = g.slots.find({h.opId, h.chunk});
    if (sit == g.slots.end() || !sit->second.waitingParent || sit->second.count != h.count ||
        sit->second.coll != h.coll)
      return failGroup(
          g, strprintf("the parent sent a result for chunk %u of operation %llu that is not pending", h.chunk,
                       static_cast<unsigned long long>(h.opId)));
    Slot& s = sit->second;
    const auto coll = static_cast<Coll>(s.coll);
    const bool noData = (h.flags & kFlagNoData) != 0;
    // A completion without data is an answer only where this subtree receives none: reduce and
    // reduce-scatter away from the owner, broadcast toward it (its data is kept here).
    const bool rooted = coll == Coll::Reduce || coll == Coll::ReduceScatter || coll == Coll::Broadcast;
    const bool expectData = coll == Coll::Broadcast ? s.ownerChild < 0 : !rooted || s.ownerChild >= 0;
    if (noData == expectData)
      return failGroup(
          g, strprintf("the parent sent %s for chunk %u of operation %llu (%s)", noData ? "no data" : "data",
                       h.chunk, static_cast<unsigned long long>(h.opId), collName(coll)));
    Buffer data;
    size_t bytes = h.payloadBytes;
    if (!noData) {
      data = share(std::move(payload));
      payload = {};
    } else if (coll == Coll::Broadcast) {
      data = s.kept;
      bytes = s.count * dataTypeSize(static_cast<DataType>(s.dtype));
    }
    deliver(g, s, h, data, bytes);
    g.slots.erase(sit);
  }

  // Hello -> Challenge, Proof -> HelloAck (switch_auth.hpp); anything else first is a violation.
  void onHandshake(Conn* c, const Header& h) {
    if (c->stage == Conn::Stage::Hello) {
      if (h.type != MsgType::Hello) return drop(c, "first message is not a hello", true);
      if (!auth::freshNonce(&c->serverNonce).ok()) return drop(c, "no random source for a challenge", true);
      std::memcpy(c->clientNonce.data(), c->payload.data(), c->clientNonce.size());  // parseHeader: 32 bytes
      c->role = static_cast<Role>(h.arg32);
      c->stage = Conn::Stage::Proof;
      return send(c, challengeMessage(c->serverNonce));
    }
    if (h.type != MsgType::Proof) return drop(c, "the answer to the challenge is not a proof", true);
    std::vector<uint8_t> proof(c->payload.begin(), c->payload.begin() + c->payLen), ack;
    if (!clientProofValid(cfg.key, c->role, c->clientNonce, c->serverNonce, proof))
      return drop(c, "wrong job key: the proof does not verify (the switch serves another job; check --key)",
                  true);
    if (!acceptMessage(cfg.key, c->clientNonce, c->serverNonce, &ack).ok())
      return drop(c, "could not compute the switch's proof", true);
    c->stage = Conn::Stage::Done;
    return send(c, std::move(ack));
  }

  void onMessage(Conn* c) {
    const Header& h = c->cur;
    if (c->stage != Conn::Stage::Done) return onHandshake(c, h);
    if (c->isParent) {
      switch (h.type) {
        case MsgType::RegisterAck:
        case MsgType::Refuse:
        case MsgType::Error:
          if (h.group == 0 && h.type == MsgType::Error)
            return drop(
                c, "the parent closed: " + std::string(c->payload.begin(), c->payload.begin() + c->payLen),
                false);
          return onParentReply(h, c->payload);
        case MsgType::Result:
          return onParentResult(h, c->payload);
        default:
          return drop(c, strprintf("unexpected %s from the parent", msgTypeName(h.type)), true);
      }
    }
    switch (h.type) {
      case MsgType::Register:
        return onRegister(c, h);
      case MsgType::Chunk:
        return onChunk(c, h);
      case MsgType::Stalled:
        return onStalled(c, h);
      case MsgType::Leave: {
        auto mine = c->groups.find(h.group);
        auto it = groups.find(h.group);
        if (mine == c->groups.end() || it == groups.end())
          return drop(c, "leave for a group it is not a member of", true);
        uint32_t child = mine->second;
        c->groups.erase(mine);
        failGroup(it->second, memberName(it->second, child) + " left" + lacking(it->second, child));
        return detach(it->second, child);
      }
      default:
        return drop(c, strprintf("unexpected %s from a child", msgTypeName(h.type)), true);
    }
  }

  // "rank 3 (member 1)", or "member 1" for a child that is a switch or did not say its rank.
  static std::string memberName(const Group& g, uint32_t child) {
    if (child < g.rankOf.size() && g.rankOf[child] >= 0)
      return strprintf("rank %lld (member %u)", static_cast<long long>(g.rankOf[child]), child);
    return strprintf("member %u", child);
  }
  // What the group's oldest pending chunk lacks here (nothing pending: opId 0, no children).
  struct Lack {
    uint64_t opId = 0;
    uint32_t chunk = 0;
    bool parent = false;  // every child is in: it waits for the parent switch
    std::vector<uint32_t> children;
  };
  static Lack lackOf(const Group& g) {
    Lack l;
    if (g.slots.empty()) return l;
    const auto& [key, slot] = *g.slots.begin();  // (operation, chunk): the oldest first
    l.opId = key.first;
    l.chunk = key.second;
    for (uint32_t child = 0; child < slot.got.size() && l.children.size() < kMaxWaitingChildren; ++child)
      if (!slot.got[child]) l.children.push_back(child);
    l.parent = l.children.empty() && slot.waitingParent;
    return l;
  }
  // "; chunk 0 of operation 5 still lacked rank 1 (member 1)": whom the others were waiting for.
  static std::string lacking(const Group& g, uint32_t leaver) {
    Lack l = lackOf(g);
    std::erase(l.children, leaver);  // said already
    if (l.children.empty()) return "";
    std::string who;
    for (size_t i = 0; i < l.children.size(); ++i) who += (i ? ", " : "") + memberName(g, l.children[i]);
    return strprintf("; chunk %u of operation %llu still lacked %s", l.chunk,
                     static_cast<unsigned long long>(l.opId), who.c_str());
  }

  // A member whose wait ran out asks what its group waits for here: the children missing from the
  // oldest pending chunk (so its error can name them), or the parent. The group goes on as it was.
  void onStalled(Conn* c, const Header& h) {
    if (!c->groups.count(h.group)) return drop(c, "stalled for a group it is not a member of", true);
    auto it = groups.find(h.group);
    const Lack l = it != groups.end() ? lackOf(it->second) : Lack{};
    Header reply;
    reply.type = MsgType::Waiting;
    reply.group = h.group;
    reply.opId = l.opId;
    reply.chunk = l.chunk;
    reply.arg64 = l.parent ? 1 : 0;
    reply.arg32 = static_cast<uint32_t>(l.children.size());
    send(c, encodeMessage(reply, l.children.data(), l.children.size() * sizeof(uint32_t)));
  }

  // Reads what is available (bounded per call so one busy peer cannot starve the others).
  // Returns false when the budget ran out with bytes possibly left to read.
  bool readFrom(Conn* c) {
    size_t budget = 4u << 20;
    while (!c->dead && budget > 0) {
      size_t r = 0;
      Status rs = !c->inPayload ? c->link->recv(c->hdr + c->hdrGot, kHeaderBytes - c->hdrGot, &r)
                                : c->link->recv(c->payload.data() + c->payGot, c->payLen - c->payGot, &r);
      if (!rs.ok()) {
        drop(c, rs.message(), false);
        return true;
      }
      if (r == 0) return true;
      budget -= std::min<size_t>(budget, r);
      if (!c->inPayload) {
        c->hdrGot += r;
        if (c->hdrGot < kHeaderBytes) continue;
        c->hdrGot = 0;
        // Before authentication only handshake messages (32-byte payloads) are read at all.
        Status s = parseHeader(c->hdr, cfg.slotBytes, &c->cur);
        if (s.ok() && c->stage != Conn::Stage::Done && c->cur.payloadBytes > kHandshakeBytes)
          s = errorf(tribRemoteError, "%s of %u bytes before authenticating", msgTypeName(c->cur.type),
                     c->cur.payloadBytes);
        if (!s.ok()) {
          drop(c, s.message(), true);
          return true;
        }
        if (c->cur.payloadBytes && c->payload.size() < bufBytes) c->payload = take();
        c->payLen = c->cur.payloadBytes;
        c->payGot = 0;
        c->inPayload = c->cur.payloadBytes > 0;
        if (c->inPayload) continue;
      } else {
        c->payGot += r;
        if (c->payGot < c->payLen) continue;
        c->inPayload = false;
      }
      onMessage(c);
    }
    return c->dead;
  }

  void accept() {
    while (auto link = hub->accept()) {
      auto c = std::make_unique<Conn>();
      c->id = nextConnId++;
      c->peer = link->peer();
      c->link = std::move(link);
      conns.emplace(c->id, std::move(c));
    }
  }

  void pollOnce(int timeoutMs) {
    std::vector<pollfd> fds;
    std::vector<Conn*> who;
    // Links without an fd of their own (UCX) are served on every wake-up of the hub's fd.
    std::vector<Conn*> hubbed;
    if (!hub->preparePoll(&fds) || busy) timeoutMs = 0;
    who.assign(fds.size(), nullptr);
    for (auto& [id, c] : conns) {
      if (c->dead) continue;
      const int fd = c->link->pollFd();
      if (fd < 0) {
        hubbed.push_back(c.get());
        continue;
      }
      fds.push_back({fd, static_cast<short>(POLLIN | (c->out.empty() ? 0 : POLLOUT)), 0});
      who.push_back(c.get());
    }
    busy = false;
    (void)::poll(fds.data(), fds.size(), timeoutMs);
    hub->progress();
    accept();
    for (size_t i = 0; i < fds.size(); ++i) {
      Conn* c = who[i];
      if (!c || c->dead || !fds[i].revents) continue;
      if (fds[i].revents & POLLOUT) flush(c);
      if (!c->dead && (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) && !readFrom(c)) busy = true;
    }
    for (Conn* c : hubbed) {
      if (!c->dead) flush(c);
      if (!c->dead && !readFrom(c)) busy = true;
    }
    for (auto it = conns.begin(); it != conns.end();) {
      if (it->second->dead)
        it = conns.erase(it);
      else
        ++it;
    }
    std::lock_guard<std::mutex> lock(statsMu);
    st.freeSlots = freeSlots;
  }
  bool busy = false;  // a link has bytes left to read: do not sleep in the next poll
};

SwitchNode::SwitchNode(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

SwitchNode::~SwitchNode() { stop(); }

Status SwitchNode::create(const SwitchConfig& cfg, std::unique_ptr<SwitchNode>* out) {
  if (cfg.slots == 0 || cfg.slotBytes == 0 || cfg.slotBytes > (1u << 30))
    return errorf(tribInvalidArgument,
                  "trib-switchd: --slots must be >= 1 and --slot-bytes in 1..2^30 (got %u, %llu)", cfg.slots,
                  static_cast<unsigned long long>(cfg.slotBytes));
  auto impl = std::make_unique<Impl>();
  impl->cfg = cfg;
  impl->freeSlots = cfg.slots;
  impl->bufBytes = std::max<size_t>(cfg.slotBytes, kMaxTextBytes);
  impl->st.freeSlots = cfg.slots;
  TRIB_RETURN_IF_ERROR(LinkHub::create(cfg.link, &impl->hub).prefix("trib-switchd --link: "));
  TRIB_RETURN_IF_ERROR(impl->hub->listen(cfg.listen).prefix("trib-switchd --listen: "));
  impl->bound = impl->hub->address();
  if (!cfg.parent.empty()) {
    auto deadline = net::deadlineAfter(cfg.connectTimeoutMs);
    std::unique_ptr<Link> link;
    TRIB_RETURN_IF_ERROR(impl->hub->connect(cfg.parent, deadline, &link).prefix("trib-switchd --parent: "));
    Status s = clientHandshake(*link, cfg.key, Role::Switch, deadline);
    if (!s.ok()) return s.prefix("trib-switchd: parent switch: ");
    auto c = std::make_unique<Conn>();
    c->id = impl->nextConnId++;
    c->stage = Conn::Stage::Done;
    c->isParent = true;
    c->peer = "parent " + link->peer();
    c->link = std::move(link);
    impl->parentId = c->id;
    impl->conns.emplace(c->id, std::move(c));
  }
  out->reset(new SwitchNode(std::move(impl)));
  return Status::Ok();
}

std::string SwitchNode::address() const { return impl_->bound; }

Status SwitchNode::run(const std::atomic<bool>& stop) {
  while (!stop.load(std::memory_order_relaxed)) impl_->pollOnce(50);
  return Status::Ok();
}

void SwitchNode::start() {
  stop_ = false;
  thread_ = std::thread([this] { (void)run(stop_); });
}

void SwitchNode::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

SwitchStats SwitchNode::stats() const {
  std::lock_guard<std::mutex> lock(impl_->statsMu);
  return impl_->st;
}

std::vector<std::string> SwitchNode::events() const {
  std::lock_guard<std::mutex> lock(impl_->statsMu);
  return impl_->events;
}

}  // namespace trib::sw
