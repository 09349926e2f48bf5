#include "transports/switch/switch_client.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "algo/schedule.hpp"
#include "bootstrap/net.hpp"
#include "common/text.hpp"
#include "transports/switch/switch_auth.hpp"

namespace trib::sw {

Status SwitchClient::connect(const SwitchClientConfig& cfg, std::unique_ptr<SwitchClient>* out) {
  if (cfg.path.empty() || cfg.path.size() > kMaxLevels || cfg.slots == 0)
    return errorf(tribInvalidArgument, "switch client: need 1..%zu path levels and >= 1 slot (got %zu, %u)",
                  kMaxLevels, cfg.path.size(), cfg.slots);
  for (const PathLevel& l : cfg.path) {
    if (l.members == 0 || l.index >= l.members)
      return errorf(tribInvalidArgument, "switch client: path level says child %u of %u", l.index, l.members);
  }
  std::unique_ptr<SwitchClient> c(new SwitchClient(cfg));
  TRIB_RETURN_IF_ERROR(c->handshake());
  *out = std::move(c);
  return Status::Ok();
}

SwitchClient::~SwitchClient() { link_.reset(); }

Status SwitchClient::handshake() {
  const std::string where = "switch " + cfg_.address + ": ";
  auto deadline = net::deadlineAfter(cfg_.timeoutMs);
  TRIB_RETURN_IF_ERROR(LinkHub::create(cfg_.link, &hub_).prefix(where));
  // A link of the wrong kind gets no answer: a UCX client at a TCP switch never connects, a TCP
  // client at a UCX switch gets no hello answer.
  const std::string hint = strprintf(
      " (this rank uses %s links: TRIB_SWITCH_LINK must match the switch's --link)", linkKindName(cfg_.link));
  Status s = hub_->connect(cfg_.address, deadline, &link_);
  if (!s.ok())
    return errorf(s.code(), "%sunreachable (%s)%s", where.c_str(), s.message().c_str(),
                  s.code() == tribTimeout && cfg_.link == LinkKind::Ucx ? hint.c_str() : "");
  // One request/reply exchange: a reply of type `want`, or a Refuse/Error whose reason we return.
  auto exchange = [&](const std::vector<uint8_t>& msg, MsgType want, Header* reply) -> Status {
    Status io = linkSendAll(*link_, msg.data(), msg.size(), deadline);
    stats_.headerBytes += kHeaderBytes;
    uint8_t buf[kHeaderBytes];
    if (io.ok()) io = linkRecvAll(*link_, buf, kHeaderBytes, deadline);
    if (io.ok()) io = parseHeader(buf, 0, reply);
    if (!io.ok() && io.code() == tribTimeout)
      return errorf(io.code(), "%s%s%s", where.c_str(), io.message().c_str(), hint.c_str());
    if (!io.ok()) return errorf(io.code(), "%sunreachable (%s)", where.c_str(), io.message().c_str());
    stats_.headerBytes += kHeaderBytes;
    if (reply->type == want) return Status::Ok();
    if (reply->type == MsgType::Refuse || reply->type == MsgType::Error) {
      std::string text(reply->payloadBytes, '\0');
      TRIB_RETURN_IF_ERROR(linkRecvAll(*link_, text.data(), text.size(), deadline).prefix(where));
      return errorf(reply->type == MsgType::Refuse ? tribNotSupported : tribRemoteError, "%srefused: %s",
                    where.c_str(), text.c_str());
    }
    return errorf(tribRemoteError, "%sanswered %s, expected %s", where.c_str(), msgTypeName(reply->type),
                  msgTypeName(want));
  };
  s = clientHandshake(*link_, cfg_.key, Role::Rank, deadline);
  if (!s.ok())
    return errorf(s.code(), "%s%s%s", where.c_str(), s.message().c_str(),
                  s.code() == tribTimeout ? hint.c_str() : "");
  stats_.headerBytes += 4 * kHeaderBytes;
  Header reply, r;
  r.type = MsgType::Register;
  r.group = cfg_.group;
  r.child = cfg_.path[0].index;
  r.arg32 = cfg_.slots;
  // Our rank, so that the switch's messages about members can name ranks.
  if (cfg_.path[0].index < cfg_.leafRanks.size()) r.arg64 = uint64_t(cfg_.leafRanks[cfg_.path[0].index]) + 1;
  auto path = encodePath(cfg_.path);
  TRIB_RETURN_IF_ERROR(exchange(encodeMessage(r, path.data(), path.size()), MsgType::RegisterAck, &reply));
  quota_ = reply.arg32;
  slotBytes_ = reply.arg64;
  if (cfg_.maxChunkBytes) slotBytes_ = std::min(slotBytes_, cfg_.maxChunkBytes);
  return Status::Ok();
}

void SwitchClient::fail(const Status& why) {
  if (!broken_.ok()) return;
  broken_ = why;
  link_.reset();
  out_.clear();  // nothing references the callers' buffers any more
  for (Op& op : ops_) op.done->fail(why);
  ops_.clear();
  inFlight_.clear();
  seqOf_.clear();
}

void SwitchClient::abort(const Status& why) {
  if (link_ && broken_.ok()) {
    Header h;
    h.type = MsgType::Leave;
    h.group = cfg_.group;
    h.child = cfg_.path[0].index;
    uint8_t buf[kHeaderBytes];
    encodeHeader(h, buf);
    // Best effort: a header that does not fit the socket buffer is replaced by the close itself.
    // Only at a message boundary (not between a chunk's header and its payload).
    if (out_.empty() || (out_.front().off == 0 && !out_.front().ext)) {
      size_t sent = 0;
      (void)link_->send(buf, kHeaderBytes, &sent);
    }
  }
  fail(why.ok() ? errorf(tribAborted, "switch client aborted") : why);
}

Status SwitchClient::postAllReduce(const void* src, void* dst, uint64_t count, DataType dtype, RedOp op,
                                   TransferOp* done) {
  OffloadCall call{Coll::AllReduce};
  call.src = src;
  call.dst = dst;
  call.count = count;
  call.dtype = dtype;
  call.op = op;
  return postCollective(call, done);
}

namespace {
// Collectives whose chunks have an owner: the switch delivers toward it (or, broadcast, from it).
bool owned(Coll c) { return c == Coll::Reduce || c == Coll::Broadcast || c == Coll::ReduceScatter; }
}  // namespace

SwitchClient::ChunkPos SwitchClient::chunkPos(const Op& op, uint32_t k) {
  const OffloadCall& c = op.call;
  ChunkPos p{0, 0, static_cast<uint32_t>(c.root), 0};
  if (c.coll == Coll::Barrier) return p;
  uint64_t j = k;
  if (c.coll == Coll::ReduceScatter) {
    p.block = k / op.perBlock;  // chunk k lies in rank `block`'s block, which that rank owns
    p.owner = static_cast<uint32_t>(p.block);
    j = k % op.perBlock;
  } else if (c.coll == Coll::AllGather) {
    p.owner = static_cast<uint32_t>(c.rank);
  }
  p.offset = j * op.chunkElems;
  p.count = std::min(op.chunkElems, c.count - p.offset);
  return p;
}

bool SwitchClient::sendsData(const Op& op, const ChunkPos& p) {
  return op.call.coll != Coll::Broadcast || p.owner == static_cast<uint32_t>(op.call.rank);
}

bool SwitchClient::receivesData(const Op& op, const ChunkPos& p) {
  const bool mine = p.owner == static_cast<uint32_t>(op.call.rank);
  switch (op.call.coll) {
    case Coll::Reduce:
    case Coll::ReduceScatter:
      return mine;
    case Coll::Broadcast:
      return !mine;
    default:
      return true;
  }
}

Status SwitchClient::postCollective(const OffloadCall& call, TransferOp* done) {
  if (!broken_.ok()) return broken_;
  const std::string where = "switch " + cfg_.address;
  if (!switchSupportsColl(static_cast<uint8_t>(call.coll)))
    return errorf(tribNotSupported, "%s: %s is not run by the switch (use a host algorithm)", where.c_str(),
                  collName(call.coll));
  if (call.nranks < 1 || call.rank < 0 || call.rank >= call.nranks || call.root < 0 ||
      call.root >= call.nranks)
    return errorf(tribInvalidArgument, "%s: rank %d / root %d of %d ranks", where.c_str(), call.rank,
                  call.root, call.nranks);
  Op o{call, done, nextOpId_, 0, 1, 0};
  if (o.call.op == tribAvg) o.call.op = tribSum;
  const size_t es = dataTypeSize(call.dtype);
  // All-gather: a chunk's result holds every rank's piece, so a piece is a slot / nranks.
  const uint64_t perElem = call.coll == Coll::AllGather ? es * static_cast<uint64_t>(call.nranks) : es;
  if (es == 0 || perElem > slotBytes_)
    return errorf(tribNotSupported,
                  "%s: %s of %d ranks' %s elements needs slots of at least %llu bytes; the switch grants "
                  "%llu (use a host algorithm, or larger --slot-bytes)",
                  where.c_str(), collName(call.coll), call.nranks, dataTypeName(call.dtype),
                  static_cast<unsigned long long>(perElem), static_cast<unsigned long long>(slotBytes_));
  o.chunkElems = slotBytes_ / perElem;
  uint64_t chunks = 1;  // barrier: one empty chunk
  if (call.coll != Coll::Barrier) {
    o.perBlock = (call.count + o.chunkElems - 1) / o.chunkElems;
    chunks = o.perBlock * (call.coll == Coll::ReduceScatter ? static_cast<uint64_t>(call.nranks) : 1);
  }
  if (chunks > UINT32_MAX)
    return errorf(tribInvalidArgument, "%s: %llu elements need more than 2^32 chunks", where.c_str(),
                  static_cast<unsigned long long>(call.count));
  ++nextOpId_;
  ++stats_.ops;
  if (chunks == 0) {  // count 0: every member skips the switch alike
    done->complete();
    return Status::Ok();
  }
  o.chunks = static_cast<uint32_t>(chunks);
  ops_.push_back(o);
  sendChunks();
  return flush();
}

void SwitchClient::sendChunks() {
  for (Op& op : ops_) {
    const OffloadCall& c = op.call;
    const size_t es = dataTypeSize(c.dtype);
    while (op.sent < op.chunks) {
      // In-order window: chunk `seq` goes out only when every chunk `quota` places before it is done.
      if (!inFlight_.empty() && nextSeq_ >= *inFlight_.begin() + quota_) return;
      const ChunkPos p = chunkPos(op, op.sent);
      const bool data = sendsData(op, p);
      Header h;
      h.type = MsgType::Chunk;
      h.group = cfg_.group;
      h.child = cfg_.path[0].index;
      h.opId = op.id;
      h.chunk = op.sent;
      h.dtype = static_cast<uint8_t>(c.dtype);
      h.redop = static_cast<uint8_t>(c.op);
      h.coll = static_cast<uint8_t>(c.coll);
      h.count = p.count;
      h.root = p.owner;
      if (c.coll == Coll::AllGather) {
        h.arg32 = static_cast<uint32_t>(c.nranks);
        h.arg64 = 1;  // one piece: this rank's
      } else if (owned(c.coll) && p.owner == static_cast<uint32_t>(c.rank)) {
        h.flags = kFlagOwner;
      }
      if (!data) h.flags |= kFlagNoData;
      h.payloadBytes = data ? static_cast<uint32_t>(p.count * es) : 0;
      OutSeg head;
      head.own.resize(kHeaderBytes);
      encodeHeader(h, head.own.data());
      head.n = kHeaderBytes;
      out_.push_back(std::move(head));
      if (h.payloadBytes) {
        OutSeg body;
        body.ext = static_cast<const uint8_t*>(c.src) + (p.block * c.count + p.offset) * es;
        body.n = h.payloadBytes;
        out_.push_back(std::move(body));
      }
      seqOf_[{op.id, op.sent}] = nextSeq_;
      inFlight_.insert(nextSeq_++);
      ++op.sent;
      ++stats_.chunks;
      stats_.headerBytes += kHeaderBytes;
      stats_.payloadSent += h.payloadBytes;
    }
  }
}

Status SwitchClient::flush() {
  while (!out_.empty() && broken_.ok()) {
    OutSeg& s = out_.front();
    const uint8_t* p = s.ext ? s.ext : s.own.data();
    size_t w = 0;
    Status ws = link_->send(p + s.off, s.n - s.off, &w);
    if (!ws.ok()) {
      fail(errorf(tribRemoteError, "switch %s: %s (did the switch die?)", cfg_.address.c_str(),
                  ws.message().c_str()));
      return Status::Ok();
    }
    if (w == 0) return Status::Ok();
    s.off += w;
    moved_ = true;
    if (s.off == s.n) out_.pop_front();
  }
  return Status::Ok();
}

Status SwitchClient::onResult() {
  const Header& h = cur_;
  auto it = std::find_if(ops_.begin(), ops_.end(), [&](const Op& o) { return o.id == h.opId; });
  auto seq = seqOf_.find({h.opId, h.chunk});
  if (it == ops_.end() || seq == seqOf_.end())
    return errorf(tribRemoteError,
                  "switch %s sent a result for chunk %u of operation %llu, which is not pending",
                  cfg_.address.c_str(), h.chunk, static_cast<unsigned long long>(h.opId));
  inFlight_.erase(seq->second);
  seqOf_.erase(seq);
  stats_.payloadRecv += h.payloadBytes;
  stats_.headerBytes += kHeaderBytes;
  if (++it->received == it->chunks) {
    it->done->complete();
    ops_.erase(it);
  }
  return Status::Ok();
}

// Checks a Result header against the pending operation and says where its payload goes.
Status SwitchClient::placeResult() {
  const Header& h = cur_;
  auto it = std::find_if(ops_.begin(), ops_.end(), [&](const Op& o) { return o.id == h.opId; });
  if (it == ops_.end() || h.chunk >= it->chunks || h.dtype != it->call.dtype ||
      h.coll != static_cast<uint8_t>(it->call.coll))
    return errorf(tribRemoteError, "switch %s sent an unexpected result (operation %llu, chunk %u)",
                  cfg_.address.c_str(), static_cast<unsigned long long>(h.opId), h.chunk);
  const OffloadCall& c = it->call;
  const ChunkPos p = chunkPos(*it, h.chunk);
  if (h.count != p.count)
    return errorf(tribRemoteError, "switch %s: result of chunk %u has %llu elements, expected %llu",
                  cfg_.address.c_str(), h.chunk, static_cast<unsigned long long>(h.count),
                  static_cast<unsigned long long>(p.count));
  const bool data = !(h.flags & kFlagNoData);
  if (data != receivesData(*it, p) && p.count > 0)
    return errorf(tribRemoteError, "switch %s: %s for chunk %u of a %s on rank %d (root %d)",
                  cfg_.address.c_str(), data ? "data" : "no data", h.chunk, collName(c.coll), c.rank, c.root);
  if (c.coll == Coll::AllGather && h.arg32 != static_cast<uint32_t>(c.nranks))
    return errorf(tribRemoteError, "switch %s: all-gather result of %u ranks, expected %d",
                  cfg_.address.c_str(), h.arg32, c.nranks);
  if (!data || h.payloadBytes == 0) return Status::Ok();
  const size_t es = dataTypeSize(c.dtype);
  uint8_t* dst = static_cast<uint8_t*>(c.dst);
  pieceBytes_ = p.count * es;
  pieceStride_ = c.count * es;  // all-gather: rank j's slice starts j * count elements in
  payDst_ = dst + p.offset * es;
  return Status::Ok();
}

Status SwitchClient::readAvailable() {
  while (broken_.ok()) {
    size_t r = 0;
    Status rs;
    if (!inPayload_) {
      rs = link_->recv(hdr_ + hdrGot_, kHeaderBytes - hdrGot_, &r);
    } else if (payDst_) {
      // Up to the end of the current piece (all-gather pieces land at their ranks' offsets).
      const size_t within = payGot_ % pieceBytes_;
      uint8_t* to = payDst_ + (payGot_ / pieceBytes_) * pieceStride_ + within;
      rs = link_->recv(to, pieceBytes_ - within, &r);
    } else {
      rs = link_->recv(text_.data() + payGot_, cur_.payloadBytes - payGot_, &r);
    }
    if (!rs.ok())
      return errorf(tribRemoteError, "switch %s closed the connection (did it die?): %s",
                    cfg_.address.c_str(), rs.message().c_str());
    if (r == 0) return Status::Ok();
    moved_ = true;
    if (!inPayload_) {
      hdrGot_ += r;
      if (hdrGot_ < kHeaderBytes) continue;
      hdrGot_ = 0;
      TRIB_RETURN_IF_ERROR(parseHeader(hdr_, slotBytes_, &cur_).prefix("switch " + cfg_.address + ": "));
      payDst_ = nullptr;
      payGot_ = 0;
      if (cur_.type == MsgType::Result) {
        TRIB_RETURN_IF_ERROR(placeResult());
      } else if (cur_.type == MsgType::Error || cur_.type == MsgType::Waiting) {
        text_.assign(cur_.payloadBytes, 0);
      } else {
        return errorf(tribRemoteError, "switch %s sent an unexpected %s", cfg_.address.c_str(),
                      msgTypeName(cur_.type));
      }
      inPayload_ = cur_.payloadBytes > 0;
      if (inPayload_) continue;
    } else {
      payGot_ += r;
      if (payGot_ < cur_.payloadBytes) continue;
      inPayload_ = false;
    }
    if (cur_.type == MsgType::Error)
      return errorf(tribRemoteError, "switch %s: %s", cfg_.address.c_str(),
                    std::string(text_.begin(), text_.end()).c_str());
    if (cur_.type == MsgType::Waiting) {
      Waiting w{cur_.opId, cur_.chunk, cur_.arg64 == 1, std::vector<uint32_t>(cur_.arg32)};
      if (cur_.arg32) std::memcpy(w.children.data(), text_.data(), w.children.size() * sizeof(uint32_t));
      waiting_ = std::move(w);
      continue;
    }
    TRIB_RETURN_IF_ERROR(onResult());
  }
  return Status::Ok();
}

bool SwitchClient::askWhatIsLacking(std::chrono::milliseconds budget) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  auto timeLeft = [&] { return std::chrono::steady_clock::now() < deadline; };
  // The question goes at a message boundary: what is queued (a chunk's header and payload) first.
  while (!out_.empty() && broken_.ok() && timeLeft()) {
    if (Status s = flush(); !s.ok()) fail(s);
    if (!out_.empty()) link_->wait(1);
  }
  if (!out_.empty() || !broken_.ok()) return false;
  Header h;
  h.type = MsgType::Stalled;
  h.group = cfg_.group;
  h.child = cfg_.path[0].index;
  waiting_.reset();
  out_.push_back(OutSeg{encodeMessage(h, nullptr, 0), nullptr, kHeaderBytes, 0});
  while (broken_.ok() && !waiting_ && timeLeft()) {
    Status s = flush();
    if (s.ok() && broken_.ok()) s = readAvailable();
    if (!s.ok()) fail(s);
    if (broken_.ok() && !waiting_) link_->wait(1);
  }
  return waiting_.has_value();
}

std::string SwitchClient::nameChildren(const std::vector<uint32_t>& children) const {
  std::vector<int> ranks, indices;
  for (uint32_t c : children) {
    if (c < cfg_.leafRanks.size()) ranks.push_back(cfg_.leafRanks[c]);
    indices.push_back(static_cast<int>(c));
  }
  return ranks.size() == children.size() ? nameList("rank", "ranks", ranks)
                                         : nameList("child", "children", indices);
}

std::string SwitchClient::explainStall(std::chrono::milliseconds budget) {
  if (!broken_.ok() || !link_) return "";
  if (!askWhatIsLacking(budget)) {
    if (!broken_.ok()) return broken_.message();  // e.g. the group failed meanwhile: why
    // No answer (the link to the switch may be down): the step waits on every other member.
    std::vector<uint32_t> others;
    for (uint32_t c = 0; c < cfg_.path[0].members; ++c)
      if (c != cfg_.path[0].index) others.push_back(c);
    std::string whom = cfg_.leafRanks.empty() ? "" : nameChildren(others);
    if (cfg_.path.size() > 1)
      whom += whom.empty() ? "the ranks under other switches" : " and the ranks under other switches";
    return strprintf(
        "switch %s did not say within %lld ms which contributions it lacks; the step waits on %s",
        cfg_.address.c_str(), static_cast<long long>(budget.count()),
        whom.empty() ? "the other members" : whom.c_str());
  }
  const Waiting w = std::move(*waiting_);
  waiting_.reset();
  const auto op = static_cast<unsigned long long>(w.opId);
  if (!w.children.empty())
    return strprintf("switch %s: chunk %u of operation %llu still lacks the contribution%s of %s",
                     cfg_.address.c_str(), w.chunk, op, w.children.size() > 1 ? "s" : "",
                     nameChildren(w.children).c_str());
  if (w.parent)
    return strprintf(
        "switch %s: chunk %u of operation %llu has every contribution of this switch and waits for its "
        "parent switch (ranks under other switches)",
        cfg_.address.c_str(), w.chunk, op);
  return strprintf("switch %s: nothing of the group is pending there", cfg_.address.c_str());
}

Status SwitchClient::progress() {
  if (!broken_.ok()) return Status::Ok();  // the operations carry the error
  // Waiting for results with nothing to send: sleep in the kernel until they arrive (bounded),
  // instead of spinning on cores the switch and the other ranks need.
  if (!ops_.empty() && out_.empty() && idle_ > kSpinsBeforeSleep) {
    link_->wait(1);
  }
  moved_ = false;
  Status s = flush();
  if (s.ok() && broken_.ok()) s = readAvailable();
  if (s.ok() && broken_.ok()) {
    sendChunks();
    s = flush();
  }
  if (!s.ok()) fail(s);
  idle_ = moved_ ? 0 : idle_ + 1;
  return Status::Ok();
}

}  // namespace trib::sw
