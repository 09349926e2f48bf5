#include "transports/switch/switch_protocol.hpp"

#include <cstring>

#include "algo/schedule.hpp"

namespace trib::sw {

namespace {
template <typename T>
void put(uint8_t* out, size_t off, T v) {
  std::memcpy(out + off, &v, sizeof v);
}
template <typename T>
T get(const uint8_t* in, size_t off) {
  T v;
  std::memcpy(&v, in + off, sizeof v);
  return v;
}
unsigned long long U(uint64_t v) { return v; }
#define REJECT(...) Status(tribRemoteError, "malformed switch header: " + strprintf(__VA_ARGS__))
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the switch protocol is little-endian");

// The fields a handshake message leaves unused that are not zero, named ("group, count").
std::string handshakeFieldsSet(const Header& h) {
  const std::pair<const char*, bool> fields[] = {
      {"child", h.child != 0}, {"group", h.group != 0}, {"opId", h.opId != 0}, {"chunk", h.chunk != 0},
      {"dtype", h.dtype != 0}, {"redop", h.redop != 0}, {"coll", h.coll != 0}, {"count", h.count != 0}};
  std::string set;
  for (const auto& [name, nonzero] : fields)
    if (nonzero) set += (set.empty() ? "" : ", ") + std::string(name);
  return set;
}

}  // namespace

const char* msgTypeName(MsgType t) {
  static const char* names[] = {"?",         "hello", "hello_ack", "register", "register_ack",
                                "refuse",    "chunk", "result",    "error",    "leave",
                                "challenge", "proof", "stalled",   "waiting"};
  auto i = static_cast<uint16_t>(t);
  return i <= kMaxMsgType ? names[i] : "?";
}

void encodeHeader(const Header& h, uint8_t out[kHeaderBytes]) {
  std::memset(out, 0, kHeaderBytes);
  put<uint32_t>(out, 0, kMagic);
  put<uint16_t>(out, 4, kSwitchProtocolVersion);
  put<uint16_t>(out, 6, static_cast<uint16_t>(h.type));
  put<uint32_t>(out, 8, h.payloadBytes);
  put<uint32_t>(out, 12, h.child);
  put<uint64_t>(out, 16, h.group);
  put<uint64_t>(out, 24, h.opId);
  put<uint32_t>(out, 32, h.chunk);
  out[36] = h.dtype;
  out[37] = h.redop;
  out[38] = h.coll;
  out[39] = h.flags;
  put<uint64_t>(out, 40, h.arg64);
  put<uint64_t>(out, 48, h.count);
  put<uint32_t>(out, 56, h.arg32);
  put<uint32_t>(out, 60, h.root);
}

bool switchSupportsColl(uint8_t coll) {
  return coll < kNumColls && switchCollective(static_cast<Coll>(coll));
}

uint64_t dataBytes(const Header& h) {
  if (h.flags & kFlagNoData) return 0;
  uint64_t pieces =
      h.type == MsgType::Result && h.coll == static_cast<uint8_t>(Coll::AllGather) ? h.arg32 : 1;
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(h.count, dataTypeSize(static_cast<DataType>(h.dtype)), &bytes) ||
      __builtin_mul_overflow(bytes, pieces, &bytes))
    return UINT64_MAX;
  return bytes;
}

Status parseHeader(const uint8_t in[kHeaderBytes], size_t maxDataBytes, Header* out) {
  uint32_t magic = get<uint32_t>(in, 0);
  if (magic != kMagic) return REJECT("bad magic 0x%llx (not a Tributary switch peer?)", U(magic));
  uint16_t version = get<uint16_t>(in, 4);
  if (version != kSwitchProtocolVersion)
    return REJECT("protocol version %llu, this side speaks %llu (mixed builds?)", U(version),
                  U(kSwitchProtocolVersion));
  uint16_t type = get<uint16_t>(in, 6);
  if (type == 0 || type > kMaxMsgType) return REJECT("unknown message type %llu", U(type));
  Header h;
  h.type = static_cast<MsgType>(type);
  h.payloadBytes = get<uint32_t>(in, 8);
  h.child = get<uint32_t>(in, 12);
  h.group = get<uint64_t>(in, 16);
  h.opId = get<uint64_t>(in, 24);
  h.chunk = get<uint32_t>(in, 32);
  h.dtype = in[36];
  h.redop = in[37];
  h.coll = in[38];
  h.flags = in[39];
  h.arg64 = get<uint64_t>(in, 40);
  h.count = get<uint64_t>(in, 48);
  h.arg32 = get<uint32_t>(in, 56);
  h.root = get<uint32_t>(in, 60);
  // Fields other message types do not use must be zero (room for later versions).
  if ((h.type != MsgType::Chunk && h.type != MsgType::Result) && (h.flags != 0 || h.root != 0))
    return REJECT("%s with flags/root set (reserved for chunk and result)", msgTypeName(h.type));
  switch (h.type) {
    case MsgType::Hello:
      if (h.arg32 > static_cast<uint32_t>(Role::Switch))
        return REJECT("hello: unknown role %llu", U(h.arg32));
      [[fallthrough]];
    case MsgType::HelloAck:
    case MsgType::Challenge:
    case MsgType::Proof:  // one nonce or proof (both 32 bytes), nothing else
      if (h.payloadBytes != kHandshakeBytes)
        return REJECT("%s carries %llu payload bytes, expected %llu", msgTypeName(h.type), U(h.payloadBytes),
                      U(kHandshakeBytes));
      if (h.arg64 != 0 || (h.type != MsgType::Hello && h.arg32 != 0))
        return REJECT("%s with arg64/arg32 set", msgTypeName(h.type));
      if (const std::string set = handshakeFieldsSet(h); !set.empty())
        return REJECT("%s with %s set (a handshake message carries only its role and nonce or proof)",
                      msgTypeName(h.type), set.c_str());
      break;
    case MsgType::Register:
      if (h.payloadBytes == 0 || h.payloadBytes % 8 != 0 || h.payloadBytes > 8 * kMaxLevels)
        return REJECT("register path of %llu bytes (1..%llu levels of 8 bytes)", U(h.payloadBytes),
                      U(kMaxLevels));
      if (h.arg32 == 0) return REJECT("register asks for 0 slots");
      break;
    case MsgType::RegisterAck:
      if (h.payloadBytes != 0) return REJECT("register_ack carries %llu payload bytes", U(h.payloadBytes));
      if (h.arg32 == 0 || h.arg64 == 0)
        return REJECT("register_ack grants %llu slots of %llu bytes", U(h.arg32), U(h.arg64));
      break;
    case MsgType::Refuse:
    case MsgType::Error:
      if (h.payloadBytes > kMaxTextBytes)
        return REJECT("reason of %llu bytes (max %llu)", U(h.payloadBytes), U(kMaxTextBytes));
      break;
    case MsgType::Leave:
    case MsgType::Stalled:
      if (h.payloadBytes != 0)
        return REJECT("%s carries %llu payload bytes", msgTypeName(h.type), U(h.payloadBytes));
      break;
    case MsgType::Waiting:
      if (h.arg32 > kMaxWaitingChildren)
        return REJECT("waiting lists %llu children (max %llu)", U(h.arg32), U(kMaxWaitingChildren));
      if (h.payloadBytes != 4ull * h.arg32)
        return REJECT("waiting lists %llu children in %llu payload bytes", U(h.arg32), U(h.payloadBytes));
      if (h.arg64 > 1) return REJECT("waiting: arg64 %llu (0 or 1: waits for the parent)", U(h.arg64));
      break;
    case MsgType::Chunk:
    case MsgType::Result: {
      if (!validDataType(h.dtype)) return REJECT("unknown dtype %llu", U(h.dtype));
      if (!validRedOp(h.redop) || h.redop == tribAvg)
        return REJECT("reduction op %llu (the switch reduces sum/prod/min/max; avg travels as sum)",
                      U(h.redop));
      if (h.coll >= kNumColls) return REJECT("unknown collective %llu", U(h.coll));
      if (h.flags & ~(kFlagOwner | kFlagNoData)) return REJECT("unknown flags 0x%llx", U(h.flags));
      if (h.type == MsgType::Chunk && (h.flags & kFlagNoData) &&
          (h.coll != static_cast<uint8_t>(Coll::Broadcast) || (h.flags & kFlagOwner)))
        return REJECT("a chunk without data is only a broadcast's non-root \"ready\"");
      if (h.type == MsgType::Result && (h.flags & kFlagOwner)) return REJECT("result with the owner flag");
      if (h.coll == static_cast<uint8_t>(Coll::AllGather) && (h.arg32 == 0 || h.root >= h.arg32))
        return REJECT("all-gather piece of rank %llu of %llu ranks", U(h.root), U(h.arg32));
      const uint64_t bytes = dataBytes(h);
      if (bytes != h.payloadBytes)
        return REJECT("count %llu does not match payload of %llu bytes", U(h.count), U(h.payloadBytes));
      if (h.payloadBytes > maxDataBytes)
        return REJECT("chunk of %llu bytes exceeds the %llu-byte slot", U(h.payloadBytes), U(maxDataBytes));
      break;
    }
  }
  *out = h;
  return Status::Ok();
}

std::vector<uint8_t> encodePath(const std::vector<PathLevel>& path) {
  std::vector<uint8_t> out(path.size() * 8);
  for (size_t i = 0; i < path.size(); ++i) {
    put<uint32_t>(out.data(), i * 8, path[i].members);
    put<uint32_t>(out.data(), i * 8 + 4, path[i].index);
  }
  return out;
}

Status parsePath(const uint8_t* p, size_t n, std::vector<PathLevel>* out) {
  if (n == 0 || n % 8 != 0 || n > 8 * kMaxLevels)
    return errorf(tribRemoteError, "malformed register path: %zu bytes (1..%zu levels of 8 bytes)", n,
                  kMaxLevels);
  out->clear();
  for (size_t off = 0; off < n; off += 8) {
    PathLevel l{get<uint32_t>(p, off), get<uint32_t>(p, off + 4)};
    if (l.members == 0 || l.index >= l.members)
      return errorf(tribRemoteError, "malformed register path: level %zu says child %u of %u", off / 8,
                    l.index, l.members);
    out->push_back(l);
  }
  return Status::Ok();
}

std::vector<uint8_t> encodeMessage(Header h, const void* payload, size_t n) {
  h.payloadBytes = static_cast<uint32_t>(n);
  std::vector<uint8_t> out(kHeaderBytes + n);
  encodeHeader(h, out.data());
  if (n) std::memcpy(out.data() + kHeaderBytes, payload, n);
  return out;
}

std::vector<uint8_t> textMessage(MsgType type, uint64_t group, const std::string& text) {
  Header h;
  h.type = type;
  h.group = group;
  return encodeMessage(h, text.data(), std::min(text.size(), kMaxTextBytes));
}

}  // namespace trib::sw
