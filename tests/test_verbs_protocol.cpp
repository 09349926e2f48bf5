// The verbs transport's protocol logic that needs no RDMA device (transports/verbs/verbs_wire.hpp,
// verbs_reg_cache.hpp) and its registry entry: runs everywhere.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <vector>

#include "transports/registry.hpp"
#include "transports/verbs/verbs_reg_cache.hpp"
#include "transports/verbs/verbs_wire.hpp"

namespace trib::verbs {
namespace {

Blob sampleBlob(int rank, int nranks) {
  Blob b;
  b.header.rank = rank;
  b.header.nranks = nranks;
  b.header.eagerBytes = 8192;
  b.header.recvBuffers = 64;
  b.header.fifoSlots = 64;
  b.header.gid[15] = 7;
  std::snprintf(b.header.device, sizeof b.header.device, "rxe1");
  b.qp.resize(nranks);
  for (int p = 0; p < nranks; ++p)
    b.qp[p] = QpInfo{uint32_t(100 + p), uint32_t(p), 0x1000u * p, 5, 6, 0x2000u * p};
  return b;
}

TEST(VerbsBlob, RoundTrips) {
  const Blob b = sampleBlob(2, 4);
  Blob out;
  ASSERT_TRUE(decodeBlob(encodeBlob(b), 2, 4, &out).ok());
  EXPECT_STREQ(out.header.device, "rxe1");
  EXPECT_EQ(out.header.gid[15], 7);
  ASSERT_EQ(out.qp.size(), 4u);
  EXPECT_EQ(out.qp[3].qpn, 103u);
  EXPECT_EQ(out.qp[3].fifoAddr, 0x3000u);
  EXPECT_EQ(out.qp[3].creditAddr, 0x6000u);
}

// Several queue pairs per connection: the others travel after the per-peer entries.
TEST(VerbsBlob, RoundTripsWithSeveralQueuePairs) {
  Blob b = sampleBlob(0, 3);
  b.header.qpsPerConnection = 4;
  for (int p = 0; p < 3; ++p)
    for (uint32_t i = 0; i < 3; ++i) b.extra.push_back(QpAddr{uint32_t(1000 * p + i), uint32_t(7 + i)});
  Blob out;
  ASSERT_TRUE(decodeBlob(encodeBlob(b), 0, 3, &out).ok());
  EXPECT_EQ(out.header.qpsPerConnection, 4u);
  ASSERT_EQ(out.extra.size(), 9u);
  EXPECT_EQ(out.extra[2 * 3 + 1].qpn, 2001u) << "peer 2's third queue pair";
  EXPECT_EQ(out.extra[2 * 3 + 1].psn, 8u);
  EXPECT_EQ(out.qp[2].qpn, 102u) << "the first stays in the peer's entry";
}

// The window (remote windows): address, size, key and READs in flight round-trip; the signal record
// of rank r lies past the window, one 48-byte record per rank.
TEST(VerbsBlob, WindowRoundTripsAndSignalRecordsFollowIt) {
  Blob b = sampleBlob(1, 3);
  b.header.windowAddr = 0x7f0000100000ull;
  b.header.windowBytes = 2 << 20;
  b.header.windowRkey = 0x1234;
  b.header.readsInFlight = 16;
  Blob out;
  ASSERT_TRUE(decodeBlob(encodeBlob(b), 1, 3, &out).ok());
  EXPECT_EQ(out.header.windowAddr, 0x7f0000100000ull);
  EXPECT_EQ(out.header.windowBytes, uint64_t{2} << 20);
  EXPECT_EQ(out.header.windowRkey, 0x1234u);
  EXPECT_EQ(out.header.readsInFlight, 16u);
  EXPECT_EQ(windowSignalAddr(out.header, 2), 0x7f0000100000ull + (2 << 20) + 96);
}

// Every malformed blob is refused with tribRemoteError naming the rank that sent it.
TEST(VerbsBlob, MalformedIsRefusedNamingThePeer) {
  auto refused = [](std::vector<uint8_t> bytes, int from, int nranks, const char* what) {
    Blob out;
    Status s = decodeBlob(bytes, from, nranks, &out);
    ASSERT_FALSE(s.ok()) << what;
    EXPECT_EQ(s.code(), tribRemoteError) << what;
    EXPECT_NE(s.message().find("rank " + std::to_string(from)), std::string::npos) << s.message();
  };
  const std::vector<uint8_t> good = encodeBlob(sampleBlob(1, 3));
  refused({}, 1, 3, "empty");
  refused(std::vector<uint8_t>(good.begin(), good.begin() + 10), 1, 3, "shorter than the header");
  refused(std::vector<uint8_t>(good.begin(), good.end() - 1), 1, 3, "one byte short");
  std::vector<uint8_t> longer = good;
  longer.push_back(0);
  refused(longer, 1, 3, "one byte long");
  std::vector<uint8_t> magic = good;
  magic[0] ^= 1;
  refused(magic, 1, 3, "bad magic");
  std::vector<uint8_t> version = good;
  version[offsetof(BlobHeader, version)] = kBlobVersion + 1;
  refused(version, 1, 3, "other version");
  refused(good, 2, 3, "says another rank");
  refused(good, 1, 4, "another communicator size");
  Blob zeroBuffers = sampleBlob(1, 3);
  zeroBuffers.header.recvBuffers = 0;
  refused(encodeBlob(zeroBuffers), 1, 3, "no receive buffers");
  for (uint32_t qps : {0u, kMaxQpsPerConnection + 1}) {
    Blob bad = sampleBlob(1, 3);
    bad.header.qpsPerConnection = qps;
    refused(encodeBlob(bad), 1, 3, "queue pairs out of range");
  }
  Blob missing = sampleBlob(1, 3);
  missing.header.qpsPerConnection = 2;  // says 2, carries none of the others
  refused(encodeBlob(missing), 1, 3, "the other queue pairs missing");
  Blob name = sampleBlob(1, 3);
  std::memset(name.header.device, 'x', sizeof name.header.device);
  refused(encodeBlob(name), 1, 3, "unterminated device name");
  for (uint32_t reads : {0u, 256u}) {
    Blob bad = sampleBlob(1, 3);
    bad.header.readsInFlight = reads;
    refused(encodeBlob(bad), 1, 3, "RDMA READs in flight out of range");
  }
  auto window = [](uint64_t addr, uint64_t bytes, uint32_t rkey) {
    Blob w = sampleBlob(1, 3);
    w.header.windowAddr = addr;
    w.header.windowBytes = bytes;
    w.header.windowRkey = rkey;
    return encodeBlob(w);
  };
  refused(window(0x1000, 100, 5), 1, 3, "a window of part of a line");
  refused(window(0x1000, (uint64_t{2} << 30) + 64, 5), 1, 3, "a window over 2 GiB");
  refused(window(0, 4096, 5), 1, 3, "a window without an address");
  refused(window(0x1000, 0, 5), 1, 3, "a key without a window");
  refused(window(UINT64_MAX - 4096, 4096, 5), 1, 3, "signal records wrapping the address space");
}

TEST(VerbsCts, SlotsWrapAndEntriesCountOnlyWhenWhole) {
  CtsReader reader(4);
  CtsWriter writer(4);
  std::vector<CtsEntry> fifo(4);
  for (int i = 0; i < 11; ++i) {
    EXPECT_EQ(writer.slot(), uint32_t(i % 4));
    EXPECT_EQ(reader.nextSlot(), uint32_t(i % 4));
    CtsEntry& e = fifo[writer.slot()];
    const CtsEntry stale = e;
    EXPECT_FALSE(reader.ready(stale)) << "a slot's previous entry is not the next one";
    e.seq = writer.seq();  // first half landed
    EXPECT_FALSE(reader.ready(e));
    e.seqEnd = writer.seq();
    EXPECT_TRUE(reader.ready(e));
    writer.advance();
    reader.consume();
  }
  EXPECT_EQ(reader.consumed(), 11u);
}

TEST(VerbsCts, NoticesInFlightNeverExceedTheSlots) {
  CtsReader reader(4);
  uint64_t sent = 0;
  while (reader.maySend(sent)) ++sent;
  EXPECT_EQ(sent, 4u);
  reader.consume();
  EXPECT_TRUE(reader.maySend(sent));
  EXPECT_FALSE(reader.maySend(sent + 1));
}

// An immediate off the wire completes only a receive this peer's table holds: once, by its id.
TEST(VerbsRecvTable, ImmediatesAreCheckedAgainstThePeersReceives) {
  RecvTable<std::string> table;
  const uint32_t a = table.add("a"), b = table.add("b");
  EXPECT_NE(a, 0u) << "0 is what a refusing CTS entry carries";
  EXPECT_NE(a, b);
  std::string got;
  for (uint32_t bad : {0u, b + 1, 0xffffffffu}) {
    Status s = table.take(bad, "rank 3 (rxe1)", &got);
    EXPECT_EQ(s.code(), tribRemoteError) << bad;
    EXPECT_NE(s.message().find("rank 3 (rxe1)"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(std::to_string(bad)), std::string::npos) << s.message();
  }
  EXPECT_EQ(table.size(), 2u) << "a bad immediate changes nothing";
  ASSERT_TRUE(table.take(b, "rank 3", &got).ok());
  EXPECT_EQ(got, "b");
  EXPECT_FALSE(table.take(b, "rank 3", &got).ok()) << "a stale immediate: b already completed";
  std::vector<std::string> drained;
  table.drain([&](std::string& v) { drained.push_back(v); });
  EXPECT_EQ(drained, std::vector<std::string>{"a"});
  EXPECT_FALSE(table.take(a, "rank 3", &got).ok()) << "drained with its peer";
  EXPECT_EQ(table.size(), 0u);
}

// Another peer's table does not know this one's ids: an immediate is only ever looked up in the
// table of the peer whose write carried it.
TEST(VerbsRecvTable, IdsOfOnePeerAreUnknownToAnother) {
  RecvTable<int> p1, p2;
  const uint32_t id = p1.add(7);
  int got = 0;
  EXPECT_FALSE(p2.take(id, "rank 2", &got).ok());
  EXPECT_TRUE(p1.take(id, "rank 1", &got).ok());
  EXPECT_EQ(got, 7);
}

TEST(VerbsCredits, ConsumedCreditsReturnOnlyThroughReposts) {
  Credits c(3);
  EXPECT_TRUE(c.take(0));
  EXPECT_TRUE(c.take(0));
  EXPECT_TRUE(c.take(0));
  EXPECT_FALSE(c.take(0));
  EXPECT_EQ(c.available(0), 0u);
  EXPECT_TRUE(c.take(1));  // the peer reposted one buffer
  EXPECT_FALSE(c.take(1));
  EXPECT_EQ(c.available(5), 4u);
  EXPECT_EQ(c.consumed(), 4u);
}

TEST(VerbsCredits, RepostsAdvertiseInBatchesAndOnFlush) {
  Reposts r(4);
  for (int i = 0; i < 3; ++i) r.reposted();
  EXPECT_FALSE(r.shouldAdvertise());
  EXPECT_TRUE(r.pending());
  r.reposted();
  EXPECT_TRUE(r.shouldAdvertise());
  EXPECT_EQ(r.advertise(), 4u);
  EXPECT_FALSE(r.pending());
  r.reposted();
  EXPECT_EQ(r.advertise(), 5u);
}

// The transport's credit loop as a model: a sender posts while Credits allow, the receiver reposts
// each message as it arrives and writes its total back only when Reposts says a batch is due.
// Returns false if it reaches a state where the sender waits for credits, nothing is in flight
// and the receiver has nothing to advertise (a deadlock).
bool creditLoopKeepsMoving(uint32_t buffers, uint32_t batch, uint32_t seed) {
  Credits credits(buffers);
  Reposts reposts(batch);
  uint64_t advertised = 0, inFlight = 0, delivered = 0;
  uint32_t x = seed;
  for (int step = 0; step < 200000; ++step) {
    x = x * 1664525u + 1013904223u;
    const bool senderTurn = (x >> 16) % 3 != 0;  // the sender runs ahead of the receiver
    if (senderTurn && credits.take(advertised)) {
      ++inFlight;
    } else if (inFlight) {
      --inFlight;
      ++delivered;
      reposts.reposted();
      if (reposts.shouldAdvertise()) advertised = reposts.advertise();
    } else if (credits.available(advertised) == 0) {
      return false;
    }
  }
  return delivered > 1000;
}

TEST(VerbsCredits, BatchedAdvertisementsNeverStarveASender) {
  for (uint32_t seed : {1u, 7u, 12345u})
    for (uint32_t batch : {1u, 16u, 63u, 64u}) EXPECT_TRUE(creditLoopKeepsMoving(64, batch, seed)) << batch;
  // The bound is tight: a batch larger than the receive buffers holds back the last credits.
  EXPECT_FALSE(creditLoopKeepsMoving(64, 65, 1));
}

struct Item {
  bool needsCredit;
  int id;
};
struct Poster {
  int credits = 0;
  std::vector<int> posted;
  uint32_t run(WorkQueue<Item>& q, uint32_t room) {
    return q.post(
        room, [&] { return credits > 0 ? (--credits, true) : false; },
        [&](const Item& w) { return posted.push_back(w.id), true; });
  }
};

// Both ranks out of credits, each with sends queued before its credit write: the credit writes
// (and CTS writes, probes) must go past the sends, or each waits for the other's for ever.
TEST(VerbsWorkQueue, CreditFreeWorkPassesSendsWaitingForCredits) {
  WorkQueue<Item> q;
  Poster p;
  q.push({true, 1});   // a send
  q.push({true, 2});   // a send
  q.push({false, 3});  // the credit write
  q.push({false, 4});  // a CTS write
  EXPECT_EQ(p.run(q, 16), 2u);
  EXPECT_EQ(p.posted, (std::vector<int>{3, 4}));
  EXPECT_FALSE(q.empty());
  p.credits = 1;  // the peer's credit write landed
  EXPECT_EQ(p.run(q, 16), 1u);
  p.credits = 5;
  EXPECT_EQ(p.run(q, 16), 1u);
  EXPECT_EQ(p.posted, (std::vector<int>{3, 4, 1, 2})) << "sends keep their order";
  EXPECT_EQ(p.credits, 4) << "one credit a send";
  EXPECT_TRUE(q.empty());
}

// A large message: chunks without a credit, the last (with immediate) with one. However little
// room the send queue has, the last never posts before an earlier chunk, and room is respected.
TEST(VerbsWorkQueue, LastChunkNeverPassesItsEarlierChunks) {
  WorkQueue<Item> q;
  Poster p;
  p.credits = 10;
  for (int c = 1; c <= 3; ++c) q.push({false, c});
  q.push({true, 4});  // the last chunk
  for (uint32_t room : {1u, 1u, 0u, 1u}) EXPECT_EQ(p.run(q, room), room);
  EXPECT_EQ(p.posted, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(p.run(q, 1), 1u);
  EXPECT_EQ(p.posted, (std::vector<int>{1, 2, 3, 4}));
  EXPECT_EQ(p.credits, 9);
}

// A post that fails stops there: nothing after it is posted, and the item stays queued.
TEST(VerbsWorkQueue, AFailedPostStops) {
  WorkQueue<Item> q;
  q.push({false, 1});
  q.push({false, 2});
  int calls = 0;
  EXPECT_EQ(q.post(
                8, [] { return true; }, [&](const Item&) { return ++calls, false; }),
            0u);
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(q.empty());
  q.clear();
  EXPECT_TRUE(q.empty());
}

TEST(VerbsChunks, CoverTheMessageExactlyOnce) {
  for (uint64_t bytes : {0ull, 1ull, 4095ull, 4096ull, 4097ull, 10ull << 20}) {
    const auto chunks = chunksOf(bytes, 4096);
    uint64_t next = 0;
    for (size_t i = 0; i < chunks.size(); ++i) {
      EXPECT_EQ(chunks[i].offset, next);
      EXPECT_LE(chunks[i].bytes, 4096u);
      EXPECT_EQ(chunks[i].last, i + 1 == chunks.size());
      next += chunks[i].bytes;
    }
    EXPECT_EQ(next, bytes);
    EXPECT_EQ(chunks.size(), bytes == 0 ? 1 : (bytes + 4095) / 4096);
  }
}

// Several queue pairs (NCCL's split): contiguous parts of equal size at multiples of 128 bytes,
// part q on queue pair q, each in chunks; together exactly the message, and no chunk carries the
// immediate (it follows separately, once all have completed).
TEST(VerbsChunks, SplitAcrossQueuePairs) {
  for (uint32_t qps : {2u, 3u, 4u, 16u})
    for (uint64_t bytes : {1ull, 127ull, 8200ull, (1ull << 20) + 3, 10ull << 20}) {
      const auto chunks = chunksOf(bytes, 1 << 20, qps);
      const uint64_t part = ((bytes + qps - 1) / qps + kQpSplitAlign - 1) / kQpSplitAlign * kQpSplitAlign;
      uint64_t next = 0;
      uint32_t lastQp = 0;
      for (const Chunk& c : chunks) {
        EXPECT_EQ(c.offset, next) << qps << " " << bytes;
        EXPECT_GT(c.bytes, 0u);
        EXPECT_LE(c.bytes, 1u << 20);
        EXPECT_FALSE(c.last);
        EXPECT_LT(c.qp, qps);
        EXPECT_GE(c.qp, lastQp) << "parts in order";
        EXPECT_EQ(c.qp, c.offset / part) << "part q on queue pair q";
        EXPECT_EQ(c.qp, (c.offset + c.bytes - 1) / part) << "a chunk within one part";
        lastQp = c.qp;
        next += c.bytes;
      }
      EXPECT_EQ(next, bytes) << qps << " " << bytes;
      EXPECT_EQ(lastQp + 1, std::min<uint64_t>(qps, (bytes + part - 1) / part)) << "every part used";
    }
  // 8200 bytes over 4: parts of 2176 (2050 rounded up to 128), the last 1672.
  const auto four = chunksOf(8200, 1 << 20, 4);
  ASSERT_EQ(four.size(), 4u);
  EXPECT_EQ(four[1].offset, 2176u);
  EXPECT_EQ(four[3].bytes, 8200u - 3 * 2176);
  // Small: 127 bytes over 4 is one part.
  EXPECT_EQ(chunksOf(127, 1 << 20, 4).size(), 1u);
  // One queue pair is the plain split, its last chunk with the immediate.
  EXPECT_TRUE(chunksOf(8200, 4096, 1).back().last);
}

struct FakeRegion {
  int id = 0;
};

TEST(VerbsRegCache, SharesInUseRangesAndEvictsLeastRecentlyUsed) {
  std::set<int> live;
  int next = 0;
  RegCache<FakeRegion> cache(
      2,
      [&](uintptr_t, uint64_t, MemoryKind, FakeRegion* r) {
        r->id = ++next;
        live.insert(r->id);
        return Status::Ok();
      },
      [&](FakeRegion& r) { live.erase(r.id); });
  uint64_t a, b, c, d, inner;
  FakeRegion *ra, *rb, *rc, *rd, *rin;
  ASSERT_TRUE(cache.acquire(0x1000, 0x1000, MemoryKind::Host, &a, &ra).ok());
  ASSERT_TRUE(cache.acquire(0x1100, 0x100, MemoryKind::Host, &inner, &rin).ok());  // inside a: shared
  EXPECT_EQ(rin->id, ra->id);
  const int idA = ra->id;
  EXPECT_EQ(cache.registered(), 1u);
  ASSERT_TRUE(cache.acquire(0x5000, 0x1000, MemoryKind::Host, &b, &rb).ok());
  ASSERT_TRUE(cache.acquire(0x9000, 0x1000, MemoryKind::Host, &c, &rc).ok());
  EXPECT_EQ(live.size(), 3u);  // all in use: nothing evicted whatever the limit
  cache.release(a);
  EXPECT_EQ(cache.kept(), 0u) << "a still has a user";
  cache.release(inner);
  cache.release(b);
  cache.release(c);  // kept: a, b, c, limit 2: a (least recently released) goes
  EXPECT_EQ(cache.kept(), 2u);
  EXPECT_EQ(live.count(idA), 0u) << "a was deregistered";
  EXPECT_EQ(live.size(), 2u);
  ASSERT_TRUE(cache.acquire(0x5000, 0x800, MemoryKind::Host, &d, &rd).ok());  // b reused from the kept ones
  EXPECT_EQ(cache.registered(), 3u);
  EXPECT_EQ(cache.hits(), 2u);
  cache.release(d);
  cache.clear();
  EXPECT_TRUE(live.empty());
}

TEST(VerbsRegCache, KeepZeroDeregistersOnRelease) {
  int live = 0;
  RegCache<FakeRegion> cache(
      0,
      [&](uintptr_t, uint64_t, MemoryKind, FakeRegion*) {
        ++live;
        return Status::Ok();
      },
      [&](FakeRegion&) { --live; });
  uint64_t id;
  FakeRegion* r;
  ASSERT_TRUE(cache.acquire(0x1000, 10, MemoryKind::Host, &id, &r).ok());
  EXPECT_EQ(live, 1);
  cache.release(id);
  EXPECT_EQ(live, 0);
  cache.release(id);  // twice: ignored
  EXPECT_EQ(live, 0);
}

TEST(VerbsRegCache, AFailedRegistrationIsReturnedAndNotCached) {
  RegCache<FakeRegion> cache(
      4, [](uintptr_t, uint64_t, MemoryKind, FakeRegion*) { return errorf(tribSystemError, "no memlock"); },
      [](FakeRegion&) {});
  uint64_t id;
  FakeRegion* r;
  Status s = cache.acquire(0x1000, 10, MemoryKind::Host, &id, &r);
  EXPECT_EQ(s.code(), tribSystemError);
  EXPECT_EQ(cache.size(), 0u);
}

TEST(VerbsRegCache, KeyedByMemoryKind) {
  // Host and device memory register differently (verbs_dmabuf.hpp): a registration of one kind
  // never serves the other, in use or kept.
  std::vector<MemoryKind> made;
  int live = 0, next = 0;
  RegCache<FakeRegion> cache(
      4,
      [&](uintptr_t, uint64_t, MemoryKind k, FakeRegion* r) {
        made.push_back(k);
        r->id = ++next;
        ++live;
        return Status::Ok();
      },
      [&](FakeRegion&) { --live; });
  uint64_t d, h, h2, d2;
  FakeRegion *rd, *rh, *rh2, *rd2;
  ASSERT_TRUE(cache.acquire(0x10000, 0x1000, MemoryKind::Device, &d, &rd).ok());
  const int idD = rd->id;
  cache.release(d);  // kept (keep 4)
  ASSERT_EQ(cache.kept(), 1u);
  // The same range as host memory (the device buffer freed, host memory mapped there): registered anew.
  ASSERT_TRUE(cache.acquire(0x10000, 0x1000, MemoryKind::Host, &h, &rh).ok());
  EXPECT_NE(rh->id, idD);
  ASSERT_EQ(made, (std::vector<MemoryKind>{MemoryKind::Device, MemoryKind::Host}));
  // While both exist, each kind finds its own, inside the range too.
  ASSERT_TRUE(cache.acquire(0x10100, 0x100, MemoryKind::Host, &h2, &rh2).ok());
  EXPECT_EQ(rh2->id, rh->id);
  ASSERT_TRUE(cache.acquire(0x10100, 0x100, MemoryKind::Device, &d2, &rd2).ok());
  EXPECT_EQ(rd2->id, idD);
  EXPECT_EQ(cache.registered(), 2u);
  EXPECT_EQ(cache.hits(), 2u);
  cache.release(h);
  cache.release(h2);
  cache.release(d2);
  cache.clear();
  EXPECT_EQ(live, 0);
}

TEST(VerbsHca, NcclSyntax) {
  HcaSpec s;
  ASSERT_TRUE(parseHcaSpec("", &s).ok());
  EXPECT_TRUE(hcaSelected(s, "rxe0", 1));
  ASSERT_TRUE(parseHcaSpec("mlx5_0:1,rxe", &s).ok());
  EXPECT_TRUE(hcaSelected(s, "mlx5_0", 1));
  EXPECT_FALSE(hcaSelected(s, "mlx5_0", 2));
  EXPECT_TRUE(hcaSelected(s, "rxe1", 1)) << "a name is a prefix";
  EXPECT_FALSE(hcaSelected(s, "mlx5_1", 1));
  ASSERT_TRUE(parseHcaSpec("=rxe", &s).ok());
  EXPECT_FALSE(hcaSelected(s, "rxe1", 1)) << "'=': exact names";
  ASSERT_TRUE(parseHcaSpec("^=rxe1", &s).ok());
  EXPECT_TRUE(hcaSelected(s, "rxe0", 1));
  EXPECT_FALSE(hcaSelected(s, "rxe1", 1));
  for (const char* bad : {"rxe0:", "rxe0:0", "rxe0:x", ",rxe0", "rxe0,,rxe1", "^"}) {
    Status st = parseHcaSpec(bad, &s);
    EXPECT_EQ(st.code(), tribInvalidArgument) << bad;
    EXPECT_NE(st.message().find("TRIB_IB_HCA"), std::string::npos) << st.message();
  }
}

// The port choice over described places (the graph and sysfs readers are tested in
// test_locality): the nearest port the spec selects; TRIB_IB_HCA naming one overrides locality,
// and an exclusion leaves the choice by locality among the rest.
TEST(VerbsHca, PickPortByLocalityUnlessTrib_IB_HCA) {
  PciPlace gpu{"GPU 0000:1b:00.0", "pci0000:17", {"0000:17:01.0", "0000:18:00.0"}, {0}};
  auto under = [](const char* root, std::vector<std::string> bridges, int numa) {
    return PciPlace{"", root, std::move(bridges), {numa}};
  };
  const std::vector<PortCandidate> c = {
      {"mlx5_0", 1, under("pci0000:b0", {"0000:b0:01.0"}, 1)},                  // other socket
      {"mlx5_1", 1, under("pci0000:17", {"0000:17:01.0", "0000:18:00.0"}, 0)},  // the GPU's switch
      {"mlx5_2", 1, under("pci0000:17", {"0000:17:01.0", "0000:18:00.0"}, 0)},  // the GPU's switch
      {"rxe0", 1, PciPlace{}},                                                  // no PCI parent
  };
  HcaSpec all, one, exclude, none;
  ASSERT_TRUE(parseHcaSpec("", &all).ok());
  ASSERT_TRUE(parseHcaSpec("mlx5_0", &one).ok());
  ASSERT_TRUE(parseHcaSpec("^mlx5_1", &exclude).ok());
  ASSERT_TRUE(parseHcaSpec("nosuch", &none).ok());
  PortPick p = pickPort(all, c, gpu, 0);
  EXPECT_EQ(p.index, 1);
  EXPECT_EQ(p.why, "same PCI switch as GPU 0000:1b:00.0; one of 2 equally near, by local rank 0");
  EXPECT_EQ(pickPort(all, c, gpu, 1).index, 2);
  p = pickPort(one, c, gpu, 1);
  EXPECT_EQ(p.index, 0);
  EXPECT_EQ(p.why, "the only port TRIB_IB_HCA selects");
  EXPECT_EQ(pickPort(exclude, c, gpu, 1).index, 2);
  EXPECT_EQ(pickPort(none, c, gpu, 0).index, -1);
  // Without a known place (the test guest's rxe devices), the first, as before locality.
  const std::vector<PortCandidate> soft = {{"rxe0", 1, PciPlace{}}, {"rxe1", 1, PciPlace{}}};
  p = pickPort(all, soft, gpu, 1);
  EXPECT_EQ(p.index, 0);
  EXPECT_EQ(p.why, "locality unknown: the first active port");
}
// The registry lists verbs, connects a pair only where both ranks have an RDMA port, and refuses
// TRIB_TRANSPORT=verbs on ranks without one with a clear error.
TEST(VerbsRegistry, ChosenOnlyBetweenRanksWithRdmaPorts) {
  const TransportDescriptor* d = findTransport("verbs");
  ASSERT_NE(d, nullptr);
  RankLocation a{}, b{};
  std::snprintf(a.host, sizeof a.host, "hostA/1");
  std::snprintf(b.host, sizeof b.host, "hostB/2");
  a.pid = 1, b.pid = 2, a.process = 1, b.process = 2;
  EXPECT_FALSE(d->canConnect(a, b));
  a.flags = b.flags = kLocationRdma;
  EXPECT_TRUE(d->canConnect(a, b));
  b.flags = 0;
  EXPECT_FALSE(d->canConnect(a, b));
  // Two hosts without RDMA: forcing verbs names the pair and why.
  a.flags = 0;
  TransportChoice choice;
  Status s = chooseTransports({a, b}, 0, "verbs", true, &choice);
  if (d->notBuilt) {
    EXPECT_EQ(s.code(), tribNotSupported);
  } else {
    EXPECT_EQ(s.code(), tribInvalidArgument);
    EXPECT_NE(s.message().find("RDMA port"), std::string::npos) << s.message();
  }
  // With ports on both hosts (and the transport built) verbs is the first choice between them.
  a.flags = b.flags = kLocationRdma;
  if (!d->notBuilt) {
    ASSERT_TRUE(chooseTransports({a, b}, 0, "", true, &choice).ok());
    EXPECT_STREQ(choice.peer[1]->name, "verbs");
  }
}

}  // namespace
}  // namespace trib::verbs
