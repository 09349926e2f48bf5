// The aggregation-switch wire protocol (trib-switchd <-> ranks <-> child/parent switches).
//
// Every message is a fixed 64-byte little-endian header, optionally followed by `payloadBytes`
// of payload. The parser is strict: a header is accepted only if every field is in range for
// its type, and a payload length is never trusted beyond the limit the receiver gives it.
//
//   off size field          meaning
//   0   4    magic          'TRSW' (0x57535254)
//   4   2    version        kSwitchProtocolVersion
//   6   2    type           MsgType
//   8   4    payloadBytes   bytes that follow the header
//   12  4    child          sender's child index in the group (Register, Chunk)
//   16  8    group          group id (one communicator under one aggregation tree)
//   24  8    opId           operation number within the group (same on every member)
//   32  4    chunk          chunk index within the operation
//   36  1    dtype          tribDataType_t (Chunk, Result)
//   37  1    redop          tribRedOp_t (Chunk, Result; avg is sent as sum)
//   38  1    coll           trib::Coll (Chunk, Result)
//   39  1    flags          Chunk/Result: kFlagOwner, kFlagNoData (v2)
//   40  8    arg64          RegisterAck: slot bytes granted;
//                           Chunk (all-gather): pieces the sender contributes to this chunk
//   48  8    count          Chunk/Result: elements of the chunk (all-gather: of one rank's piece)
//   56  4    arg32          Hello: role; Register: slots asked; RegisterAck: slots granted;
//                           Chunk/Result (all-gather): ranks of the communicator
//   60  4    root           Chunk/Result: the rank that owns the chunk (reduce, broadcast: the
//                           root; reduce-scatter: the rank whose block it is; all-gather: the
//                           rank whose piece it is) (v2)
//
// Payload of a Chunk/Result: count elements; none with kFlagNoData; an all-gather Result carries
// arg32 pieces of count elements, in rank order. Version 2 added flags and root (v1: reserved).
// Version 3 replaced Hello's key hash (arg64) by the challenge-response of switch_auth.hpp:
// Hello, Challenge, Proof and HelloAck carry one nonce or proof (32 bytes) as their payload.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/dtype.hpp"
#include "common/log.hpp"
#include "common/status.hpp"

// One place to change if the logging macros change.
#define TRIB_SWITCH_WARN(...) TRIB_WARN("switch", __VA_ARGS__)
#define TRIB_SWITCH_INFO(...) TRIB_INFO("switch", __VA_ARGS__)

namespace trib::sw {

constexpr uint32_t kMagic = 0x57535254u;  // "TRSW" little-endian
constexpr uint16_t kSwitchProtocolVersion = 4;
constexpr size_t kHeaderBytes = 64;
constexpr size_t kMaxTextBytes = 1024;  // Refuse / Error reasons
constexpr size_t kMaxLevels = 8;        // depth of an aggregation tree a Register may describe
constexpr size_t kHandshakeBytes = 32;  // the payload of Hello, Challenge, Proof, HelloAck

enum class MsgType : uint16_t {
  Hello = 1,        // first message on a connection: payload = client nonce, arg32 = Role
  HelloAck = 2,     // the switch accepted the Proof: payload = the switch's proof
  Register = 3,     // join a group: payload = path, arg32 = slots asked, arg64 = rank + 1 (0: none)
  RegisterAck = 4,  // arg64 = slot bytes, arg32 = slots granted
  Refuse = 5,       // registration refused: payload = reason text
  Chunk = 6,        // a contribution travelling up: payload = count elements
  Result = 7,       // the reduced chunk travelling down
  Error = 8,        // the group (or the connection) failed: payload = reason; group 0 = connection
  Leave = 9,        // a member abandons its group (the group fails for everyone)
  Challenge = 10,   // the switch's answer to Hello: payload = switch nonce
  Proof = 11,       // the client's answer to Challenge: payload = its proof of the key
  Stalled = 12,     // a member whose wait ran out asks what its group waits for (no payload)
  Waiting = 13,     // the answer: opId/chunk = the oldest pending chunk at this switch, arg32 = how
                    // many children it lacks, payload = their child indices (uint32 each), arg64 =
                    // 1 when every child is in and it waits for the parent switch; arg32 = 0 and
                    // opId = 0: nothing of the group is pending here
};
constexpr uint16_t kMaxMsgType = 13;
constexpr uint32_t kMaxWaitingChildren = 1024;  // children a Waiting may list
const char* msgTypeName(MsgType t);

enum class Role : uint32_t { Rank = 0, Switch = 1 };

// Chunk: the chunk's owner (`root`) is the sender or below it. Result: unused.
constexpr uint8_t kFlagOwner = 1;
// No payload travels: a broadcast member that is not the root says "ready" (Chunk), or a member
// that receives no data for this chunk learns that it is done (Result: a completion).
constexpr uint8_t kFlagNoData = 2;

// One level of a member's place in the tree: the group has `members` children at that switch
// and the sender is child `index`. Level 0 is the leaf switch; level 1 its parent; ...
struct PathLevel {
  uint32_t members = 0;
  uint32_t index = 0;
};

struct Header {
  MsgType type = MsgType::Hello;
  uint32_t payloadBytes = 0;
  uint32_t child = 0;
  uint64_t group = 0;
  uint64_t opId = 0;
  uint32_t chunk = 0;
  uint8_t dtype = 0;
  uint8_t redop = 0;
  uint8_t coll = 0;
  uint8_t flags = 0;
  uint64_t arg64 = 0;
  uint64_t count = 0;
  uint32_t arg32 = 0;
  uint32_t root = 0;
  bool operator==(const Header&) const = default;
};

void encodeHeader(const Header& h, uint8_t out[kHeaderBytes]);
// Parses and validates a header. `maxDataBytes` bounds Chunk/Result payloads (the receiver's slot
// size). On rejection returns tribRemoteError with the reason and leaves *out unspecified.
Status parseHeader(const uint8_t in[kHeaderBytes], size_t maxDataBytes, Header* out);

// Register payload: the path, level 0 first.
std::vector<uint8_t> encodePath(const std::vector<PathLevel>& path);
Status parsePath(const uint8_t* p, size_t n, std::vector<PathLevel>* out);

// Collectives the switch runs (all-reduce, reduce, broadcast, all-gather, reduce-scatter,
// barrier); others are refused with a reason.
bool switchSupportsColl(uint8_t coll);
// Payload bytes a valid Chunk/Result with this header carries.
uint64_t dataBytes(const Header& h);

// A whole message (header + payload) as bytes, for text and control messages.
std::vector<uint8_t> encodeMessage(Header h, const void* payload, size_t n);
std::vector<uint8_t> textMessage(MsgType type, uint64_t group, const std::string& text);

}  // namespace trib::sw
