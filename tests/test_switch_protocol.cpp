// The switch wire protocol: round trips and the strict parser's rejections. Random and mutated
// headers are tests/fuzz/fuzz_switch.cpp's (coverage-guided, docs/FUZZING.md).
#include <gtest/gtest.h>

#include <cstring>

#include "algo/schedule.hpp"
#include "transports/switch/switch_protocol.hpp"

using namespace trib;
using namespace trib::sw;

namespace {

Header chunkHeader() {
  Header h;
  h.type = MsgType::Chunk;
  h.group = 0x1234567890abcdefull;
  h.opId = 7;
  h.chunk = 3;
  h.child = 2;
  h.dtype = tribFloat32;
  h.redop = tribSum;
  h.coll = static_cast<uint8_t>(Coll::AllReduce);
  h.count = 256;
  h.payloadBytes = 1024;
  return h;
}

}  // namespace

TEST(SwitchProtocol, RoundTripsEveryType) {
  std::vector<Header> hs;
  Header hello;
  hello.type = MsgType::Hello;
  hello.arg32 = static_cast<uint32_t>(Role::Switch);
  hello.payloadBytes = kHandshakeBytes;  // the client's nonce
  hs.push_back(hello);
  for (MsgType t : {MsgType::Challenge, MsgType::Proof, MsgType::HelloAck}) {
    Header a;
    a.type = t;
    a.payloadBytes = kHandshakeBytes;
    hs.push_back(a);
  }
  Header reg;
  reg.type = MsgType::Register;
  reg.group = 9;
  reg.arg32 = 4;
  reg.payloadBytes = 16;
  hs.push_back(reg);
  Header ack;
  ack.type = MsgType::RegisterAck;
  ack.arg32 = 4;
  ack.arg64 = 65536;
  hs.push_back(ack);
  hs.push_back(chunkHeader());
  Header res = chunkHeader();
  res.type = MsgType::Result;
  hs.push_back(res);
  Header gather = chunkHeader();  // v2 fields: an all-gather result of 4 ranks' pieces
  gather.type = MsgType::Result;
  gather.coll = static_cast<uint8_t>(Coll::AllGather);
  gather.arg32 = 4;
  gather.root = 3;
  gather.payloadBytes = 4 * 1024;
  hs.push_back(gather);
  Header ready = chunkHeader();  // a broadcast's non-root "ready" marker
  ready.coll = static_cast<uint8_t>(Coll::Broadcast);
  ready.flags = kFlagNoData;
  ready.root = 5;
  ready.payloadBytes = 0;
  hs.push_back(ready);
  Header owner = chunkHeader();
  owner.coll = static_cast<uint8_t>(Coll::Reduce);
  owner.flags = kFlagOwner;
  owner.root = 9;
  hs.push_back(owner);
  Header err;
  err.type = MsgType::Error;
  err.payloadBytes = 12;
  hs.push_back(err);
  for (const Header& h : hs) {
    uint8_t buf[kHeaderBytes];
    encodeHeader(h, buf);
    Header back;
    Status s = parseHeader(buf, 1 << 20, &back);
    ASSERT_TRUE(s.ok()) << msgTypeName(h.type) << ": " << s.message();
    EXPECT_EQ(back, h) << msgTypeName(h.type);
  }
}

TEST(SwitchProtocol, RejectsMalformedWithReason) {
  struct Case {
    const char* what;
    void (*mutate)(uint8_t*);
    const char* reason;
  };
  const Case cases[] = {
      {"magic", [](uint8_t* b) { b[0] ^= 0xff; }, "bad magic"},
      {"version", [](uint8_t* b) { b[4] = 9; }, "protocol version"},
      {"type", [](uint8_t* b) { b[6] = 77; }, "unknown message type"},
      {"flags", [](uint8_t* b) { b[39] = 0x80; }, "unknown flags"},
      {"owner on a result-less marker", [](uint8_t* b) { b[39] = kFlagOwner | kFlagNoData; }, "without data"},
      {"all-gather piece of a rank beyond nranks",
       [](uint8_t* b) {
         b[38] = static_cast<uint8_t>(Coll::AllGather);
         b[56] = 4;  // arg32: 4 ranks
         b[60] = 4;  // root: rank 4
       },
       "all-gather piece"},
      {"dtype", [](uint8_t* b) { b[36] = 200; }, "unknown dtype"},
      {"avg", [](uint8_t* b) { b[37] = tribAvg; }, "reduction op"},
      {"coll", [](uint8_t* b) { b[38] = 99; }, "unknown collective"},
      {"length", [](uint8_t* b) { b[8] = 0xff; }, "does not match"},
      {"huge",
       [](uint8_t* b) {
         uint64_t c = 1ull << 40;
         std::memcpy(b + 48, &c, 8);
         uint32_t n = 0xffffffffu;
         std::memcpy(b + 8, &n, 4);
       },
       "does not match"},
  };
  for (const Case& c : cases) {
    uint8_t buf[kHeaderBytes];
    encodeHeader(chunkHeader(), buf);
    c.mutate(buf);
    Header out;
    Status s = parseHeader(buf, 1 << 20, &out);
    EXPECT_FALSE(s.ok()) << c.what;
    EXPECT_NE(s.message().find(c.reason), std::string::npos) << c.what << ": " << s.message();
  }
  // Fields only chunks and results use must stay zero elsewhere (room for later versions).
  {
    Header hello;
    hello.type = MsgType::Hello;
    uint8_t b[kHeaderBytes];
    encodeHeader(hello, b);
    b[61] = 1;
    Header out;
    Status s = parseHeader(b, 1 << 20, &out);
    EXPECT_NE(s.message().find("reserved"), std::string::npos) << s.message();
  }
  // A chunk larger than the receiver's slot is refused, however consistent its fields.
  uint8_t buf[kHeaderBytes];
  encodeHeader(chunkHeader(), buf);
  Header out;
  Status s = parseHeader(buf, 512, &out);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("exceeds the 512-byte slot"), std::string::npos) << s.message();
}

// A handshake message carries its role (hello) and its nonce or proof, nothing else: every other
// field set is refused, named (before, child, group, opId, chunk, dtype, redop, coll and count
// passed unread).
TEST(SwitchProtocol, HandshakeMessagesRefuseEveryFieldTheyDoNotUse) {
  struct Field {
    const char* name;
    size_t offset, bytes;
  };
  const Field fields[] = {{"child", 12, 4}, {"group", 16, 8}, {"opId", 24, 8}, {"chunk", 32, 4},
                          {"dtype", 36, 1}, {"redop", 37, 1}, {"coll", 38, 1}, {"count", 48, 8}};
  for (MsgType t : {MsgType::Hello, MsgType::Challenge, MsgType::Proof, MsgType::HelloAck}) {
    Header h;
    h.type = t;
    h.payloadBytes = kHandshakeBytes;
    uint8_t good[kHeaderBytes];
    encodeHeader(h, good);
    Header out;
    ASSERT_TRUE(parseHeader(good, 0, &out).ok()) << msgTypeName(t);
    for (const Field& f : fields) {
      uint8_t b[kHeaderBytes];
      std::memcpy(b, good, sizeof b);
      b[f.offset + f.bytes - 1] = 1;  // the field's top byte: the largest value it can say
      const Status st = parseHeader(b, 0, &out);
      EXPECT_EQ(st.code(), tribRemoteError) << msgTypeName(t) << " " << f.name;
      EXPECT_NE(st.message().find(std::string(msgTypeName(t)) + " with " + f.name + " set"),
                std::string::npos)
          << st.message();
    }
    uint8_t two[kHeaderBytes];
    std::memcpy(two, good, sizeof two);
    two[16] = two[48] = 1;
    EXPECT_NE(parseHeader(two, 0, &out).message().find("with group, count set"), std::string::npos);
  }
}

TEST(SwitchProtocol, PathValidation) {
  std::vector<PathLevel> path{{4, 1}, {2, 0}}, back;
  auto bytes = encodePath(path);
  ASSERT_TRUE(parsePath(bytes.data(), bytes.size(), &back).ok());
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[1].members, 2u);
  EXPECT_EQ(back[0].index, 1u);
  auto bad = encodePath({{4, 4}});
  Status s = parsePath(bad.data(), bad.size(), &back);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("child 4 of 4"), std::string::npos) << s.message();
  EXPECT_FALSE(parsePath(bytes.data(), 7, &back).ok());
  EXPECT_FALSE(parsePath(bytes.data(), 0, &back).ok());
}
