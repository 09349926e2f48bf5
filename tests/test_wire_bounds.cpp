// Unit tests for the decoders tests/fuzz drives (docs/FUZZING.md): each input the fuzzers found,
// or that writing their checks showed, stays here as a plain test that every build runs.
#include <gtest/gtest.h>

#include <cstring>

#include "bootstrap/store.hpp"
#include "plan/planner.hpp"
#include "topo/topology.hpp"
#include "transports/shm/shm_layout.hpp"
#include "transports/ucx/ucx_address.hpp"

using namespace trib;

// fuzz_algo_tune: a 20-digit size (past a long long, below 2^64) came back as 2^63.
TEST(WireBounds, SizesPastInt64AreKept) {
  uint64_t v = 0;
  ASSERT_TRUE(parseSize("10000100010000000000", &v).ok());
  EXPECT_EQ(v, static_cast<uint64_t>(10000100010000000000.0));
  ASSERT_TRUE(parseSize("16e18", &v).ok());
  EXPECT_EQ(v, 16000000000000000000ull);
  EXPECT_EQ(parseSize("1.9e19", &v).code(), tribInvalidArgument);  // past 2^64
  std::vector<TuneRule> rules;
  ASSERT_TRUE(parseTuneString("allreduce:10000000000000000000-inf:@ring", &rules).ok());
  ASSERT_EQ(rules.size(), 1u);
  EXPECT_EQ(rules[0].lo, 10000000000000000000ull);
}

// fuzz_algo_tune: a rank count past INT32_MAX wrapped negative in the rule's int (min > max).
TEST(WireBounds, RankCountsPastIntAreRefused) {
  std::vector<TuneRule> rules;
  for (const char* spec : {"allreduce:ranks=2-6488888888888:@ring", "allreduce:ranks=4294967298:@ring",
                           "allreduce:ranks=2-99999999999999999999999:@ring"}) {
    Status st = parseTuneString(spec, &rules);
    EXPECT_EQ(st.code(), tribInvalidArgument) << spec;
    EXPECT_NE(st.message().find("bad rank range"), std::string::npos) << st.message();
  }
  ASSERT_TRUE(parseTuneString("allreduce:ranks=2-2147483647:@ring", &rules).ok());
  ASSERT_EQ(rules.size(), 1u);
  EXPECT_EQ(rules[0].maxRanks, INT32_MAX);
}

namespace {

shm::SlotHeader slot(uint32_t kind, uint64_t total, uint64_t offset, uint32_t len, uint32_t cma = 0) {
  shm::SlotHeader s{};
  s.tag = 1;
  s.kind = kind;
  s.total = total;
  s.offset = offset;
  s.len = len;
  s.cmaIndex = cma;
  return s;
}

}  // namespace

// A peer's slot is checked before it is read: offset + len wrapping past 2^64 used to pass the
// transport's "offset + len > total" test and copy from far outside the slot.
TEST(WireBounds, ShmSlotsStayInsideTheSlotAndTheMessage) {
  const uint64_t slotBytes = 4096;
  EXPECT_TRUE(shm::checkSlot(slot(shm::kData, 10000, 8192, 1808), 3, slotBytes).ok());
  EXPECT_TRUE(shm::checkSlot(slot(shm::kData, 0, 0, 0), 3, slotBytes).ok());  // an empty message
  EXPECT_TRUE(shm::checkSlot(slot(shm::kCmaRts, 1 << 30, 0, 0, shm::kNumCma - 1), 3, slotBytes).ok());
  Status wrap = shm::checkSlot(slot(shm::kData, 10000, ~0ull, 2), 3, slotBytes);
  EXPECT_EQ(wrap.code(), tribInternalError);
  EXPECT_NE(wrap.message().find("rank 3"), std::string::npos) << wrap.message();
  EXPECT_FALSE(shm::checkSlot(slot(shm::kData, 100000, 0, slotBytes + 1), 3, slotBytes).ok());
  EXPECT_FALSE(shm::checkSlot(slot(shm::kData, 100, 90, 11), 3, slotBytes).ok());
  EXPECT_FALSE(shm::checkSlot(slot(shm::kCmaRts, 1 << 30, 0, 0, shm::kNumCma), 3, slotBytes).ok());
  EXPECT_FALSE(shm::checkSlot(slot(7, 10, 0, 10), 3, slotBytes).ok());
}

// A message's declared total is bounded before anything is sized by it (the bound is a user
// address space: no receive can be larger).
TEST(WireBounds, ShmMessageTotalsAreBounded) {
  const uint64_t slotBytes = 4096;
  EXPECT_TRUE(shm::checkSlot(slot(shm::kData, shm::kMaxMessageBytes, 0, 4096), 2, slotBytes).ok());
  EXPECT_TRUE(shm::checkSlot(slot(shm::kCmaRts, shm::kMaxMessageBytes, 0, 0), 2, slotBytes).ok());
  for (uint32_t kind : {shm::kData, shm::kCmaRts}) {
    const Status st = shm::checkSlot(slot(kind, shm::kMaxMessageBytes + 1, 0, 0), 2, slotBytes);
    EXPECT_EQ(st.code(), tribInternalError);
    EXPECT_NE(st.message().find("corrupt stream from rank 2 (a message for tag 1 of 140737488355329 bytes, "
                                "more than 140737488355328)"),
              std::string::npos)
        << st.message();
  }
}

// A peer's segment header must place every part where this rank's layout does: the transport
// reaches rings, descriptors, signals and the expose table through those offsets.
TEST(WireBounds, ShmSegmentOffsetsMustBeTheLayout) {
  const uint32_t nlocal = 4, nslots = 8;
  const uint64_t slotBytes = 4096, windowBytes = 1 << 20;
  const shm::SegLayout l = shm::segLayout(nlocal, nslots, slotBytes, windowBytes);
  const shm::SegHeader h = shm::segHeader(1, 77, nlocal, nslots, slotBytes, windowBytes);
  EXPECT_TRUE(shm::checkPeerSegment(h, 1, nlocal, nslots, slotBytes, windowBytes, l.totalBytes).ok());
  EXPECT_EQ(shm::checkPeerSegment(h, 2, nlocal, nslots, slotBytes, windowBytes, l.totalBytes).code(),
            tribInvalidUsage);
  EXPECT_FALSE(shm::checkPeerSegment(h, 1, nlocal, nslots, slotBytes, windowBytes, l.totalBytes + 1).ok());
  for (uint64_t shm::SegHeader::*field :
       {&shm::SegHeader::ringsOffset, &shm::SegHeader::ringBytes, &shm::SegHeader::cmaOffset,
        &shm::SegHeader::signalsOffset, &shm::SegHeader::exposeOffset, &shm::SegHeader::windowOffset}) {
    shm::SegHeader bad = h;
    bad.*field += 1ull << 40;
    Status s = shm::checkPeerSegment(bad, 1, nlocal, nslots, slotBytes, windowBytes, l.totalBytes);
    EXPECT_EQ(s.code(), tribInvalidUsage);
    EXPECT_NE(s.message().find("rank 1"), std::string::npos) << s.message();
  }
}

TEST(WireBounds, StoreRequestsAndReplies) {
  using namespace storeproto;
  net::Writer w;
  w.u8(kWait), w.u32(100), w.u8(1), w.u32(2), w.str("a"), w.str("bc");
  Request q;
  ASSERT_TRUE(decodeRequest(w.data().data(), w.data().size(), &q));
  EXPECT_EQ(q.op, kWait);
  EXPECT_EQ(q.timeoutMs, 100u);
  EXPECT_TRUE(q.values);
  EXPECT_EQ(q.keys, (std::vector<std::string>{"a", "bc"}));
  std::vector<uint8_t> cut(w.data().begin(), w.data().end() - 1);  // a key cut short
  EXPECT_FALSE(decodeRequest(cut.data(), cut.size(), &q));
  net::Writer many;  // more keys than the body could hold: refused before any is allocated
  many.u8(kWait), many.u32(0), many.u8(0), many.u32(1u << 30);
  EXPECT_FALSE(decodeRequest(many.data().data(), many.data().size(), &q));
  net::Writer hello;  // the handshake is not a request
  hello.u8(kHello), hello.u32(kMagic);
  EXPECT_FALSE(decodeRequest(hello.data().data(), hello.data().size(), &q));

  std::vector<uint8_t> reply{kOk, 7};
  ASSERT_TRUE(decodeReply(&reply, "h:1").ok());
  EXPECT_EQ(reply, std::vector<uint8_t>{7});
  std::vector<uint8_t> empty;
  EXPECT_EQ(decodeReply(&empty, "h:1").code(), tribRemoteError);
  std::vector<uint8_t> unknown{9};
  Status s = decodeReply(&unknown, "h:1");
  EXPECT_EQ(s.code(), tribRemoteError);
  EXPECT_NE(s.message().find("unknown reply code 9"), std::string::npos) << s.message();
  net::Writer t;
  t.u8(kTimeoutReply), t.str("1 of 1 keys still missing");
  std::vector<uint8_t> timeout = t.data();
  s = decodeReply(&timeout, "h:1");
  EXPECT_EQ(s.code(), tribTimeout);
  EXPECT_NE(s.message().find("still missing"), std::string::npos);

  net::Writer v;
  v.u32(2), v.str("x"), v.str("yz");
  std::vector<std::vector<uint8_t>> values;
  ASSERT_TRUE(decodeValues(v.data(), 2, "h:1", &values).ok());
  EXPECT_EQ(values[1], (std::vector<uint8_t>{'y', 'z'}));
  EXPECT_FALSE(decodeValues(v.data(), 3, "h:1", &values).ok());
  std::vector<uint8_t> truncated(v.data().begin(), v.data().end() - 1);
  EXPECT_FALSE(decodeValues(truncated, 2, "h:1", &values).ok());
}

TEST(WireBounds, UcxAddressBlobs) {
  ucx::AddressHeader head;
  head.slot = 5;
  const uint8_t worker[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<uint8_t> blob = ucx::encodeAddress(head, worker, sizeof worker);
  ucx::AddressHeader got;
  const uint8_t* address = nullptr;
  size_t bytes = 0;
  ASSERT_TRUE(ucx::decodeAddress(blob, 2, 8, &got, &address, &bytes).ok());
  EXPECT_EQ(got.slot, 5u);
  EXPECT_EQ(bytes, sizeof worker);
  EXPECT_EQ(std::memcmp(address, worker, bytes), 0);
  EXPECT_EQ(ucx::decodeAddress({}, 2, 8, &got, &address, &bytes).code(), tribRemoteError);
  const std::vector<uint8_t> headerOnly(blob.begin(), blob.begin() + sizeof head);  // no worker address
  Status s = ucx::decodeAddress(headerOnly, 2, 8, &got, &address, &bytes);
  EXPECT_EQ(s.code(), tribInvalidUsage);
  EXPECT_NE(s.message().find("rank 2"), std::string::npos) << s.message();
  EXPECT_EQ(ucx::decodeAddress(blob, 2, 2, &got, &address, &bytes).code(), tribInvalidUsage);  // slot 5 >= 4
  for (size_t n = 1; n <= sizeof head; ++n)  // every truncated header, version fields included
    EXPECT_EQ(ucx::decodeAddress({blob.begin(), blob.begin() + n}, 2, 8, &got, &address, &bytes).code(),
              tribInvalidUsage)
        << n << " bytes";
}

// A peer's connection blob names the segment this rank opens read-write: only this transport's.
TEST(WireBounds, ShmConnectionBlobNamesOnlyThisTransportsSegments) {
  shm::ConnBlob b;
  b.rank = 1;
  b.boot = "boot";
  b.segName = "/trib-1-2-r1";
  shm::ConnBlob got;
  ASSERT_TRUE(shm::decodeConnBlob(shm::encodeConnBlob(b), 1, "trib-", &got).ok());
  EXPECT_EQ(got.segName, b.segName);
  EXPECT_FALSE(shm::decodeConnBlob(shm::encodeConnBlob(b), 2, "trib-", &got).ok());  // another rank's
  for (const char* name : {"/other-job", "/trib-", "/trib-x/../y", "trib-1"}) {
    b.segName = name;
    Status s = shm::decodeConnBlob(shm::encodeConnBlob(b), 1, "trib-", &got);
    EXPECT_EQ(s.code(), tribInternalError) << name;
    EXPECT_NE(s.message().find("rank 1"), std::string::npos) << s.message();
  }
  b.segName = "/trib-1-2-r1";
  std::vector<uint8_t> longer = shm::encodeConnBlob(b);
  longer.push_back(0);  // bytes after the last field
  EXPECT_FALSE(shm::decodeConnBlob(longer, 1, "trib-", &got).ok());
}

// fuzz_topo_file: a node name with NUL bytes was accepted and dumped as an empty name, which the
// dump could not read back. Counts past their integers were converted regardless (undefined).
TEST(WireBounds, TopologyNamesAndCounts) {
  Topology t;
  const std::string nul = std::string("node g") + '\0' + "x gpu\n";
  Status s = parseTopology(nul, &t, "t.topo");
  EXPECT_EQ(s.code(), tribInvalidArgument);
  EXPECT_NE(s.message().find("t.topo:1: control character 0x00"), std::string::npos) << s.message();
  EXPECT_FALSE(parseTopology("node g\x01 gpu\n", &t, "t.topo").ok());
  s = parseTopology("node c cpu cores=1e300\n", &t, "t.topo");
  EXPECT_NE(s.message().find("too large"), std::string::npos) << s.message();
  s = parseTopology("node s switch reduce_gbps=1 reduce_dtypes=float32 reduce_ops=sum reduce_buffer=1e30\n",
                    &t, "t.topo");
  EXPECT_NE(s.message().find("too large"), std::string::npos) << s.message();
  // Tabs and CR (a file from Windows) are blanks, not names.
  ASSERT_TRUE(parseTopology("node\tg0 gpu\r\nnode g1 gpu\r\nnode sw switch\r\nlink g0 sw net bw=1\r\n"
                            "link g1 sw net bw=1\r\n",
                            &t, "t.topo")
                  .ok());
  EXPECT_EQ(t.numNodes(), 3);
}
