// The aggregation switch: all-reduce through one switch and a two-level tree, several groups at
// once, and faults (slots exhausted, wrong key, malformed headers, foreign group, switch gone).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <numeric>
#include <thread>

#include "bootstrap/net.hpp"
#include "reduce/reduce.hpp"
#include "switch_util.hpp"

using namespace trib;
using namespace trib::sw;
using namespace trib::sw::testing;

namespace {

std::unique_ptr<SwitchNode> startNode(const SwitchConfig& cfg) {
  std::unique_ptr<SwitchNode> n;
  Status s = SwitchNode::create(cfg, &n);
  EXPECT_TRUE(s.ok()) << s.message();
  if (n) n->start();
  return n;
}

bool anyEventContains(const SwitchNode& n, const std::string& what) {
  for (const auto& e : n.events())
    if (e.find(what) != std::string::npos) return true;
  return false;
}

// Members `paths[i]` of group `group` all-reduce `count` int32/float values at `addrs[i]`:
// member i contributes in[i]. Returns each member's output.
template <typename T>
std::vector<std::vector<T>> groupAllReduce(const std::vector<std::string>& addrs,
                                           const std::vector<std::vector<PathLevel>>& paths, uint64_t group,
                                           const std::vector<std::vector<T>>& in, DataType dt, RedOp op,
                                           std::vector<SwitchClientStats>* stats = nullptr,
                                           uint32_t slots = 4) {
  const size_t n = addrs.size();
  std::vector<std::vector<T>> out(n, std::vector<T>(in[0].size()));
  std::vector<std::thread> ts;
  if (stats) stats->assign(n, {});
  for (size_t i = 0; i < n; ++i) {
    ts.emplace_back([&, i] {
      std::unique_ptr<SwitchClient> c;
      Status s = SwitchClient::connect(clientConfig(addrs[i], group, paths[i], slots), &c);
      ASSERT_TRUE(s.ok()) << s.message();
      s = runAllReduce(*c, in[i].data(), out[i].data(), in[i].size(), dt, op);
      ASSERT_TRUE(s.ok()) << "member " << i << ": " << s.message();
      if (stats) (*stats)[i] = c->stats();
    });
  }
  for (auto& t : ts) t.join();
  return out;
}

std::vector<std::vector<int32_t>> intInputs(size_t n, size_t count, int salt) {
  std::vector<std::vector<int32_t>> in(n, std::vector<int32_t>(count));
  for (size_t r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) in[r][i] = static_cast<int32_t>((i * 2654435761u) ^ (r * 97 + salt));
  return in;
}

}  // namespace

TEST(Switch, SingleSwitchAllReduceIntExactAndBytesCounted) {
  auto node = startNode(nodeConfig(8, 4096));
  const size_t n = 4, count = 10007;  // 10 chunks of 1024 int32 plus a tail, window of 4
  auto in = intInputs(n, count, 1);
  std::vector<std::string> addrs(n, node->address());
  std::vector<std::vector<PathLevel>> paths;
  for (uint32_t r = 0; r < n; ++r) paths.push_back({{n, r}});
  std::vector<SwitchClientStats> stats;
  auto out = groupAllReduce(addrs, paths, 0xA1, in, tribInt32, tribSum, &stats);
  for (size_t i = 0; i < count; ++i) {
    int32_t want = 0;
    for (size_t r = 0; r < n; ++r) want = static_cast<int32_t>(static_cast<uint32_t>(want) + in[r][i]);
    for (size_t r = 0; r < n; ++r) ASSERT_EQ(out[r][i], want) << "rank " << r << " element " << i;
  }
  // In-network reduction: each rank sends S and receives S (ring: 2(n-1)/n * S each way).
  for (size_t r = 0; r < n; ++r) {
    EXPECT_EQ(stats[r].payloadSent, count * 4);
    EXPECT_EQ(stats[r].payloadRecv, count * 4);
    EXPECT_EQ(stats[r].chunks, (count + 1023) / 1024);
  }
  EXPECT_EQ(node->stats().chunksReduced, (count + 1023) / 1024);
  EXPECT_EQ(node->stats().freeSlots, 8u) << "slots are returned to the pool";
}

TEST(Switch, FloatSumFollowsChildOrderAndIsDeterministic) {
  auto node = startNode(nodeConfig(8, 1024));
  const size_t n = 3, count = 3000;
  std::vector<std::vector<float>> in(n, std::vector<float>(count));
  for (size_t r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i)
      in[r][i] = (r == 0 ? 1e8f : 1.0f) * static_cast<float>(i % 7 + 1) / 3.0f;
  std::vector<std::string> addrs(n, node->address());
  std::vector<std::vector<PathLevel>> paths;
  for (uint32_t r = 0; r < n; ++r) paths.push_back({{n, r}});
  auto a = groupAllReduce(addrs, paths, 0xB1, in, tribFloat32, tribSum);
  auto b = groupAllReduce(addrs, paths, 0xB2, in, tribFloat32, tribSum);
  for (size_t i = 0; i < count; ++i) {
    float want = (in[0][i] + in[1][i]) + in[2][i];  // child order
    for (size_t r = 0; r < n; ++r) {
      ASSERT_EQ(std::memcmp(&a[r][i], &want, 4), 0) << i;
      ASSERT_EQ(std::memcmp(&b[r][i], &want, 4), 0) << i;
    }
  }
}

TEST(Switch, TwoLevelTree) {
  auto spine = startNode(nodeConfig(8, 2048));
  auto leaf0 = startNode(nodeConfig(8, 4096, spine->address()));
  auto leaf1 = startNode(nodeConfig(8, 4096, spine->address()));
  const size_t count = 5000;
  auto in = intInputs(4, count, 2);
  std::vector<std::string> addrs{leaf0->address(), leaf0->address(), leaf1->address(), leaf1->address()};
  std::vector<std::vector<PathLevel>> paths{
      {{2, 0}, {2, 0}}, {{2, 1}, {2, 0}}, {{2, 0}, {2, 1}}, {{2, 1}, {2, 1}}};
  std::vector<SwitchClientStats> stats;
  auto out = groupAllReduce(addrs, paths, 0xC1, in, tribInt32, tribMax, &stats);
  for (size_t i = 0; i < count; ++i) {
    int32_t want = std::max(std::max(in[0][i], in[1][i]), std::max(in[2][i], in[3][i]));
    for (size_t r = 0; r < 4; ++r) ASSERT_EQ(out[r][i], want) << r << " " << i;
  }
  // The group's slot size is the smallest along the tree (2048 bytes = 512 int32).
  EXPECT_EQ(stats[0].chunks, (count + 511) / 512);
  EXPECT_EQ(spine->stats().chunksReduced, (count + 511) / 512);
  EXPECT_EQ(leaf0->stats().chunksReduced, (count + 511) / 512);
  EXPECT_EQ(spine->stats().freeSlots, 8u);
  EXPECT_EQ(leaf1->stats().freeSlots, 8u);
}

TEST(Switch, SeveralGroupsAtOnce) {
  auto node = startNode(nodeConfig(16, 4096));
  const size_t count = 6000;
  auto inA = intInputs(2, count, 3), inB = intInputs(3, count, 4);
  std::vector<std::vector<int32_t>> outA, outB;
  std::thread ta([&] {
    outA = groupAllReduce<int32_t>({node->address(), node->address()}, {{{2, 0}}, {{2, 1}}}, 0xD1, inA,
                                   tribInt32, tribSum);
  });
  std::thread tb([&] {
    outB = groupAllReduce<int32_t>({node->address(), node->address(), node->address()},
                                   {{{3, 0}}, {{3, 1}}, {{3, 2}}}, 0xD2, inB, tribInt32, tribMin);
  });
  ta.join();
  tb.join();
  for (size_t i = 0; i < count; ++i) {
    int32_t a = static_cast<int32_t>(static_cast<uint32_t>(inA[0][i]) + static_cast<uint32_t>(inA[1][i]));
    int32_t b = std::min({inB[0][i], inB[1][i], inB[2][i]});
    ASSERT_EQ(outA[0][i], a);
    ASSERT_EQ(outA[1][i], a);
    for (int r = 0; r < 3; ++r) ASSERT_EQ(outB[r][i], b);
  }
}

TEST(Switch, SlotsExhaustedIsRefusedWithReasonAndFreedAfterwards) {
  auto node = startNode(nodeConfig(6, 4096));
  std::unique_ptr<SwitchClient> a, b;
  ASSERT_TRUE(SwitchClient::connect(clientConfig(node->address(), 0xE1, {{2, 0}}, 4), &a).ok());
  Status s = SwitchClient::connect(clientConfig(node->address(), 0xE2, {{2, 0}}, 4), &b);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), tribNotSupported);
  EXPECT_NE(s.message().find("slots exhausted"), std::string::npos) << s.message();
  // The refusal is sticky for the group: its other member hears the same answer.
  s = SwitchClient::connect(clientConfig(node->address(), 0xE2, {{2, 1}}, 4), &b);
  EXPECT_EQ(s.code(), tribNotSupported) << s.message();
  a.reset();  // group E1 fails (member gone) and returns its slots
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (node->stats().freeSlots != 6u && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(node->stats().freeSlots, 6u);
  EXPECT_TRUE(SwitchClient::connect(clientConfig(node->address(), 0xE3, {{1, 0}}, 4), &b).ok());
}

TEST(Switch, WrongKeyIsDisconnectedAndOthersServed) {
  auto node = startNode(nodeConfig(8, 4096));
  auto cfg = clientConfig(node->address(), 0xF1, {{1, 0}});
  cfg.key = "another-job";
  std::unique_ptr<SwitchClient> c;
  Status s = SwitchClient::connect(cfg, &c);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("wrong job key"), std::string::npos) << s.message();
  EXPECT_TRUE(anyEventContains(*node, "wrong job key"));
  auto in = intInputs(2, 100, 5);
  auto out = groupAllReduce<int32_t>({node->address(), node->address()}, {{{2, 0}}, {{2, 1}}}, 0xF2, in,
                                     tribInt32, tribSum);
  EXPECT_EQ(out[1][7],
            static_cast<int32_t>(static_cast<uint32_t>(in[0][7]) + static_cast<uint32_t>(in[1][7])));
}

TEST(Switch, MalformedHeadersAndForeignGroupDisconnectOnlyTheOffender) {
  auto node = startNode(nodeConfig(8, 4096));
  net::SockAddr addr;
  ASSERT_TRUE(net::parseHostPort(node->address(), &addr).ok());
  auto rawSend = [&](const std::vector<uint8_t>& bytes) {
    int fd = -1;
    EXPECT_TRUE(net::connectTo(addr, net::deadlineAfter(2000), &fd).ok());
    EXPECT_TRUE(net::sendAll(fd, bytes.data(), bytes.size(), net::deadlineAfter(2000)).ok());
    // The switch answers with an Error and closes: reading reaches EOF (bounded).
    uint8_t buf[4096];
    auto deadline = net::deadlineAfter(3000);
    Status r;
    do r = net::recvAll(fd, buf, 1, deadline);
    while (r.ok());
    close(fd);
    return r;
  };
  // Garbage instead of a hello.
  std::vector<uint8_t> garbage(64, 0xAB);
  EXPECT_NE(rawSend(garbage).code(), tribTimeout) << "the switch must close the connection";
  EXPECT_TRUE(anyEventContains(*node, "bad magic"));
  // A valid hello followed by a chunk for a group the connection never joined.
  Header hello;
  hello.type = MsgType::Hello;
  hello.arg64 = keyHash("test-job");
  auto bytes = encodeMessage(hello, nullptr, 0);
  Header chunk;
  chunk.type = MsgType::Chunk;
  chunk.group = 0x77;
  chunk.dtype = tribInt32;
  chunk.count = 4;
  std::vector<uint8_t> data(16, 1);
  auto m = encodeMessage(chunk, data.data(), data.size());
  bytes.insert(bytes.end(), m.begin(), m.end());
  EXPECT_NE(rawSend(bytes).code(), tribTimeout);
  EXPECT_TRUE(anyEventContains(*node, "not a member"));
  // A header whose length field lies (count says 4 int32, payload says 1 MiB).
  bytes = encodeMessage(hello, nullptr, 0);
  uint8_t lie[kHeaderBytes];
  chunk.payloadBytes = 1 << 20;
  encodeHeader(chunk, lie);
  bytes.insert(bytes.end(), lie, lie + kHeaderBytes);
  EXPECT_NE(rawSend(bytes).code(), tribTimeout);
  EXPECT_TRUE(anyEventContains(*node, "does not match"));
  EXPECT_EQ(node->stats().disconnects, 3u);
  // Everyone else is still served.
  auto in = intInputs(3, 3000, 6);
  auto out = groupAllReduce<int32_t>({node->address(), node->address(), node->address()},
                                     {{{3, 0}}, {{3, 1}}, {{3, 2}}}, 0x78, in, tribInt32, tribSum);
  EXPECT_EQ(out[2][2999],
            static_cast<int32_t>(static_cast<uint32_t>(in[0][2999]) + static_cast<uint32_t>(in[1][2999]) +
                                 static_cast<uint32_t>(in[2][2999])));
}

TEST(Switch, MemberLeavingFailsTheGroupForEveryoneWithoutHang) {
  auto node = startNode(nodeConfig(8, 4096));
  std::unique_ptr<SwitchClient> a, b;
  ASSERT_TRUE(SwitchClient::connect(clientConfig(node->address(), 0x91, {{3, 0}}), &a).ok());
  ASSERT_TRUE(SwitchClient::connect(clientConfig(node->address(), 0x91, {{3, 1}}), &b).ok());
  std::vector<int32_t> in(5000, 1), out(5000);
  TransferOp done;
  ASSERT_TRUE(a->postAllReduce(in.data(), out.data(), in.size(), tribInt32, tribSum, &done).ok());
  b->abort(errorf(tribAborted, "test: member 1 gives up"));  // member 2 never came
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!done.done() && std::chrono::steady_clock::now() < deadline) {
    (void)a->progress();
    std::this_thread::yield();
  }
  ASSERT_TRUE(done.done()) << "the remaining member must hear that the group failed";
  EXPECT_EQ(done.state.load(), TransferOp::kFailed);
  EXPECT_NE(done.error.message().find("member 1 left"), std::string::npos) << done.error.message();
}

TEST(Switch, SwitchGoneMidOperationFailsPendingOps) {
  auto node = startNode(nodeConfig(8, 4096));
  std::unique_ptr<SwitchClient> a;
  ASSERT_TRUE(SwitchClient::connect(clientConfig(node->address(), 0x92, {{2, 0}}), &a).ok());
  std::vector<int32_t> in(5000, 1), out(5000);
  TransferOp done;
  ASSERT_TRUE(a->postAllReduce(in.data(), out.data(), in.size(), tribInt32, tribSum, &done).ok());
  for (int i = 0; i < 10; ++i) (void)a->progress();
  node.reset();  // the switch goes away with the chunk half-reduced
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!done.done() && std::chrono::steady_clock::now() < deadline) (void)a->progress();
  ASSERT_TRUE(done.done());
  EXPECT_EQ(done.state.load(), TransferOp::kFailed);
  EXPECT_NE(done.error.message().find("closed the connection"), std::string::npos) << done.error.message();
}

// ---- the SwitchReduce step in the symbolic verifier ------------------------------------------
#include "algo/schedule.hpp"
#include "verify/verify.hpp"

namespace {

CollArgs allReduceArgs(int n, uint64_t count, bool inPlace) {
  CollArgs a;
  a.coll = Coll::AllReduce;
  a.nranks = n;
  a.count = count;
  a.inPlace = inPlace;
  a.chunkElems = 1000;
  return a;
}

// Broken variants of the switch schedule, to check the verifier catches them.
int gBroken = 0;
Generator<Step> brokenSwitch(CollArgs a, int rank) {
  if (gBroken == 0 && rank == 1) co_return;  // rank 1 never joins the rendezvous
  if (gBroken == 1) {
    co_yield Step::switchReduce({Buf::Input, 0, rank == 0 ? a.count - 1 : a.count},
                                {Buf::Output, 0, rank == 0 ? a.count - 1 : a.count});
    co_return;
  }
  co_yield Step::switchReduce({Buf::Input, 0, a.count}, {Buf::Output, 0, a.count});
  if (gBroken == 2) co_yield Step::switchReduce({Buf::Output, 0, a.count}, {Buf::Output, 0, a.count});
}
bool anyArgs(const CollArgs&) { return true; }
uint64_t noScratchHere(const CollArgs&, int) { return 0; }

}  // namespace

TEST(SwitchVerify, SwitchScheduleIsCorrectAndMovesSEachWay) {
  const AlgoInfo* sw = findAlgorithm(Coll::AllReduce, Algo::Switch);
  const AlgoInfo* ring = findAlgorithm(Coll::AllReduce, Algo::Ring);
  ASSERT_NE(sw, nullptr);
  for (int n : {1, 2, 5, 64}) {
    for (bool inPlace : {false, true}) {
      VerifyStats st;
      Status s = verifySchedule(*sw, allReduceArgs(n, 12345, inPlace), &st);
      ASSERT_TRUE(s.ok()) << n << " ranks: " << s.message();
      EXPECT_EQ(st.maxRankSent, 12345u);
      EXPECT_EQ(st.maxRankRecv, 12345u);
    }
  }
  // The ring moves 2(n-1)/n * S each way: for 64 ranks, almost twice the switch's S.
  VerifyStats rs;
  ASSERT_TRUE(verifySchedule(*ring, allReduceArgs(64, 64 * 1000, false), &rs).ok());
  EXPECT_EQ(rs.maxRankSent, 2u * 63 * 1000);
  EXPECT_EQ(rs.maxRankRecv, 2u * 63 * 1000);
}

TEST(SwitchVerify, CatchesBrokenSwitchSchedules) {
  const AlgoInfo broken{Algo::Switch, Coll::AllReduce, anyArgs, noScratchHere, brokenSwitch};
  const char* expect[] = {"switch_reduce #0 (3 of 4 in)", "elements here but", "contribute twice"};
  for (gBroken = 0; gBroken < 3; ++gBroken) {
    Status s = verifySchedule(broken, allReduceArgs(4, 100, false));
    ASSERT_FALSE(s.ok()) << "variant " << gBroken;
    EXPECT_NE(s.message().find(expect[gBroken]), std::string::npos) << s.message();
  }
}
