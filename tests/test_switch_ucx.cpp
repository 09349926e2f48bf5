// The aggregation switch over UCX links (UCP stream API): collectives through one switch and a
// leaf->spine tree with exact results, a link-kind mismatch failing within the timeout, and a
// peer that goes away being detected (the group fails with a reason, nobody hangs), connects
// retried until the deadline (nothing listening; a spine that starts after its leaf).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <thread>

#include "switch_util.hpp"

using namespace trib;
using namespace trib::sw;
using namespace trib::sw::testing;

namespace {

using Clock = std::chrono::steady_clock;

// UCX 1.13's shared-memory transports can abort a process whose peer dies (openucx/ucx#8175):
// these tests kill peers on purpose, so they run UCX over TCP only.
const bool kUcxOverTcp = [] { return setenv("UCX_TLS", "tcp", 1) == 0; }();

#define SKIP_WITHOUT_UCX()                                                                        \
  do {                                                                                            \
    if (!linkKindAvailable(LinkKind::Ucx)) GTEST_SKIP() << "needs a build with UCX (libucx-dev)"; \
    ASSERT_TRUE(kUcxOverTcp);                                                                     \
  } while (0)

std::unique_ptr<SwitchNode> startNode(SwitchConfig cfg, LinkKind link = LinkKind::Ucx) {
  cfg.link = link;
  std::unique_ptr<SwitchNode> n;
  Status s = SwitchNode::create(cfg, &n);
  EXPECT_TRUE(s.ok()) << s.message();
  if (n) n->start();
  return n;
}

SwitchClientConfig ucxClient(const std::string& addr, uint64_t group, std::vector<PathLevel> path) {
  SwitchClientConfig c = clientConfig(addr, group, std::move(path));
  c.link = LinkKind::Ucx;
  c.timeoutMs = 5000;  // UCX context creation on two busy cores
  return c;
}

bool anyEventContains(const SwitchNode& n, const std::string& what) {
  for (const auto& e : n.events())
    if (e.find(what) != std::string::npos) return true;
  return false;
}

int32_t valueOf(size_t rank, size_t i) { return static_cast<int32_t>((i * 2654435761u) ^ (rank * 97 + 5)); }

// Member r (of addrs.size()) connects at addrs[r] with paths[r] and runs `body` on its client.
void runMembers(const std::vector<std::string>& addrs, const std::vector<std::vector<PathLevel>>& paths,
                uint64_t group, const std::function<void(size_t, SwitchClient&)>& body) {
  std::vector<std::thread> ts;
  for (size_t r = 0; r < addrs.size(); ++r) {
    ts.emplace_back([&, r] {
      std::unique_ptr<SwitchClient> c;
      Status s = SwitchClient::connect(ucxClient(addrs[r], group, paths[r]), &c);
      ASSERT_TRUE(s.ok()) << "member " << r << ": " << s.message();
      body(r, *c);
    });
  }
  for (auto& t : ts) t.join();
}

// An all-reduce (sum) of `count` int32 and an all-gather of `per` int32 per rank; exact results.
void allReduceAndAllGather(const std::vector<std::string>& addrs,
                           const std::vector<std::vector<PathLevel>>& paths, uint64_t group, size_t count,
                           size_t per) {
  const size_t n = addrs.size();
  std::vector<std::vector<int32_t>> sum(n), gathered(n);
  runMembers(addrs, paths, group, [&](size_t r, SwitchClient& c) {
    std::vector<int32_t> in(count);
    for (size_t i = 0; i < count; ++i) in[i] = valueOf(r, i);
    sum[r].resize(count);
    Status s = runAllReduce(c, in.data(), sum[r].data(), count, tribInt32, tribSum);
    ASSERT_TRUE(s.ok()) << "member " << r << " all-reduce: " << s.message();
    std::vector<int32_t> mine(per);
    for (size_t i = 0; i < per; ++i) mine[i] = valueOf(r, i + 1000000);
    gathered[r].resize(per * n);
    OffloadCall call{Coll::AllGather};
    call.nranks = static_cast<int>(n);
    call.rank = static_cast<int>(r);
    call.src = mine.data();
    call.dst = gathered[r].data();
    call.count = per;
    call.dtype = tribInt32;
    s = runCollective(c, call);
    ASSERT_TRUE(s.ok()) << "member " << r << " all-gather: " << s.message();
  });
  for (size_t i = 0; i < count; ++i) {
    uint32_t want = 0;
    for (size_t r = 0; r < n; ++r) want += static_cast<uint32_t>(valueOf(r, i));
    for (size_t r = 0; r < n; ++r) ASSERT_EQ(sum[r][i], static_cast<int32_t>(want)) << r << " " << i;
  }
  for (size_t r = 0; r < n; ++r)
    for (size_t j = 0; j < n; ++j)
      for (size_t i = 0; i < per; ++i)
        ASSERT_EQ(gathered[r][j * per + i], valueOf(j, i + 1000000)) << "member " << r << " piece " << j;
}

// Drives `done` on `c` until it completes or 10 s pass.
void driveUntilDone(SwitchClient& c, TransferOp& done) {
  auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!done.done() && Clock::now() < deadline) {
    (void)c.progress();
    std::this_thread::yield();
  }
}

// connect() with a 1.5 s timeout must fail within about that long, saying `expected`.
void expectConnectFails(SwitchClientConfig cfg, const std::string& expected) {
  cfg.timeoutMs = 1500;
  auto t0 = Clock::now();
  std::unique_ptr<SwitchClient> c;
  Status s = SwitchClient::connect(cfg, &c);
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(c);
  EXPECT_LT(took, cfg.timeoutMs + 1500) << "the attach gives up within its timeout";
  EXPECT_NE(s.message().find(expected), std::string::npos) << s.message();
}

}  // namespace

TEST(SwitchUcx, SingleSwitchAllReduceAndAllGatherExact) {
  SKIP_WITHOUT_UCX();
  auto node = startNode(nodeConfig(8, 4096));
  ASSERT_TRUE(node);
  const size_t n = 3;
  std::vector<std::string> addrs(n, node->address());
  std::vector<std::vector<PathLevel>> paths;
  for (uint32_t r = 0; r < n; ++r) paths.push_back({{n, r}});
  allReduceAndAllGather(addrs, paths, 0xE1, 10007, 700);  // 10 chunks + a tail; pieces across chunks
  EXPECT_EQ(node->stats().chunksReduced, (10007 + 1023) / 1024 + (700 + 340) / 341);
  EXPECT_EQ(node->stats().disconnects, 0u);
}

TEST(SwitchUcx, TwoLevelTreeLeafToSpine) {
  SKIP_WITHOUT_UCX();
  auto spine = startNode(nodeConfig(8, 2048));
  ASSERT_TRUE(spine);
  auto leaf0 = startNode(nodeConfig(8, 4096, spine->address()));
  auto leaf1 = startNode(nodeConfig(8, 4096, spine->address()));
  ASSERT_TRUE(leaf0 && leaf1);
  std::vector<std::string> addrs{leaf0->address(), leaf0->address(), leaf1->address(), leaf1->address()};
  std::vector<std::vector<PathLevel>> paths{
      {{2, 0}, {2, 0}}, {{2, 1}, {2, 0}}, {{2, 0}, {2, 1}}, {{2, 1}, {2, 1}}};
  allReduceAndAllGather(addrs, paths, 0xE2, 5000, 300);
  // The group's slot size is the smallest along the tree (2048 bytes = 512 int32).
  const uint64_t chunks = (5000 + 511) / 512 + (300 + 127) / 128;
  EXPECT_EQ(spine->stats().chunksReduced, chunks);
  EXPECT_EQ(leaf0->stats().chunksReduced, chunks);
  EXPECT_EQ(leaf1->stats().chunksReduced, chunks);
}

TEST(SwitchUcx, UcxRankAtTcpSwitchFailsWithinTheTimeout) {
  SKIP_WITHOUT_UCX();
  auto node = startNode(nodeConfig(8, 4096), LinkKind::Tcp);
  ASSERT_TRUE(node);
  expectConnectFails(ucxClient(node->address(), 0xE3, {{1, 0}}), "TRIB_SWITCH_LINK must match");
  // The switch keeps serving TCP ranks.
  std::unique_ptr<SwitchClient> ok;
  Status s2 = SwitchClient::connect(clientConfig(node->address(), 0xE4, {{1, 0}}), &ok);
  EXPECT_TRUE(s2.ok()) << s2.message();
}

TEST(SwitchUcx, TcpRankAtUcxSwitchFailsWithinTheTimeout) {
  SKIP_WITHOUT_UCX();
  auto node = startNode(nodeConfig(8, 4096));
  ASSERT_TRUE(node);
  expectConnectFails(clientConfig(node->address(), 0xE5, {{1, 0}}), "TRIB_SWITCH_LINK must match");
}

TEST(SwitchUcx, NothingListeningFailsWithinTheTimeout) {
  SKIP_WITHOUT_UCX();
  expectConnectFails(ucxClient("127.0.0.1:1", 0xE8, {{1, 0}}), "127.0.0.1:1: unreachable");
}

TEST(SwitchUcx, LeafWaitsForASpineThatStartsLater) {
  SKIP_WITHOUT_UCX();
  const std::string spineAddr = freeListenAddress();
  std::unique_ptr<SwitchNode> leaf;
  Status leafStatus;
  std::thread starter([&] {
    SwitchConfig cfg = nodeConfig(8, 4096, spineAddr);
    cfg.link = LinkKind::Ucx;
    cfg.connectTimeoutMs = 5000;
    leafStatus = SwitchNode::create(cfg, &leaf);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the leaf's connects are refused meanwhile
  SwitchConfig scfg = nodeConfig(8, 2048);
  scfg.listen = spineAddr;
  auto spine = startNode(scfg);
  starter.join();
  ASSERT_TRUE(spine);
  ASSERT_TRUE(leafStatus.ok()) << leafStatus.message();
  leaf->start();
  std::vector<std::string> addrs{leaf->address(), leaf->address()};
  std::vector<std::vector<PathLevel>> paths{{{2, 0}, {1, 0}}, {{2, 1}, {1, 0}}};
  allReduceAndAllGather(addrs, paths, 0xE9, 1000, 100);
  EXPECT_EQ(spine->stats().chunksReduced, (1000 + 511) / 512 + (100 + 255) / 256);
}

TEST(SwitchUcx, DisconnectedMemberFailsTheGroupWithReason) {
  SKIP_WITHOUT_UCX();
  auto node = startNode(nodeConfig(8, 4096));
  ASSERT_TRUE(node);
  std::unique_ptr<SwitchClient> a, b;
  ASSERT_TRUE(SwitchClient::connect(ucxClient(node->address(), 0xE6, {{2, 0}}), &a).ok());
  ASSERT_TRUE(SwitchClient::connect(ucxClient(node->address(), 0xE6, {{2, 1}}), &b).ok());
  std::vector<int32_t> in(5000, 1), out(5000);
  TransferOp done;
  ASSERT_TRUE(a->postAllReduce(in.data(), out.data(), in.size(), tribInt32, tribSum, &done).ok());
  // Only once the switch holds a's first chunk: a group with nothing pending ends quietly (an INFO
  // line, not an event), which is what a disconnect that overtook a's chunk gave under ASan in CI.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (node->stats().payloadIn == 0 && std::chrono::steady_clock::now() < deadline) {
    (void)a->progress();
    std::this_thread::yield();
  }
  ASSERT_GT(node->stats().payloadIn, 0u) << "the switch never received a's chunk";
  b.reset();  // member 1 goes away without leaving: only its link's end tells
  driveUntilDone(*a, done);
  ASSERT_TRUE(done.done()) << "the remaining member must hear that the group failed";
  EXPECT_EQ(done.state.load(), TransferOp::kFailed);
  EXPECT_NE(done.error.message().find("member 1"), std::string::npos) << done.error.message();
  EXPECT_NE(done.error.message().find("disconnected"), std::string::npos) << done.error.message();
  EXPECT_TRUE(anyEventContains(*node, "disconnected")) << "the switch logs why the group failed";
}

TEST(SwitchUcx, SwitchGoneFailsPendingOps) {
  SKIP_WITHOUT_UCX();
  auto node = startNode(nodeConfig(8, 4096));
  ASSERT_TRUE(node);
  std::unique_ptr<SwitchClient> a;
  ASSERT_TRUE(SwitchClient::connect(ucxClient(node->address(), 0xE7, {{2, 0}}), &a).ok());
  std::vector<int32_t> in(5000, 1), out(5000);
  TransferOp done;
  ASSERT_TRUE(a->postAllReduce(in.data(), out.data(), in.size(), tribInt32, tribSum, &done).ok());
  for (int i = 0; i < 10; ++i) (void)a->progress();
  node.reset();  // the switch goes away with the chunk half-reduced
  driveUntilDone(*a, done);
  ASSERT_TRUE(done.done());
  EXPECT_EQ(done.state.load(), TransferOp::kFailed);
  EXPECT_NE(done.error.message().find("closed the connection"), std::string::npos) << done.error.message();
}

// A wait must not sleep past bytes a progress already took in. UCX's fd wakes for new events,
// not for data sitting in an endpoint's stream queue, so a progress between a link's empty
// receive and its sleep (another link's receive, the hub's own poll) used to hide the bytes
// until the wait timed out: a handshake's answer was lost that way on a busy CI machine.
TEST(SwitchUcx, WaitWakesForBytesAProgressAlreadyTookIn) {
  SKIP_WITHOUT_UCX();
  std::unique_ptr<LinkHub> server, client;
  ASSERT_TRUE(LinkHub::create(LinkKind::Ucx, &server).ok());
  ASSERT_TRUE(LinkHub::create(LinkKind::Ucx, &client).ok());
  ASSERT_TRUE(server->listen("127.0.0.1:0").ok());
  const char hello[] = "hello";
  std::atomic<bool> go{false}, sent{false}, done{false};
  std::thread serve([&] {  // accepts; on `go` sends `hello`; keeps its worker going until `done`
    std::unique_ptr<Link> link;
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (!done.load() && Clock::now() < deadline) {
      server->progress();
      if (!link) link = server->accept();
      if (link && go.load() && !sent.load()) {
        size_t w = 0;
        EXPECT_TRUE(link->send(hello, sizeof hello, &w).ok());
        EXPECT_EQ(w, sizeof hello);
        sent = true;
      }
      std::this_thread::yield();
    }
  });
  std::unique_ptr<Link> link;
  Status s = client->connect(server->address(), Clock::now() + std::chrono::seconds(10), &link);
  char got[sizeof hello] = {};
  size_t have = 0;
  if (s.ok()) s = link->recv(got, sizeof hello, &have);  // nothing sent yet: an empty receive
  EXPECT_EQ(have, 0u);
  go = true;
  const auto until = Clock::now() + std::chrono::seconds(10);
  while (!sent.load() && Clock::now() < until) std::this_thread::yield();
  // Between that receive and its wait, the worker takes the bytes in (as another link's receive
  // would): they now sit in the endpoint's queue.
  const auto settle = Clock::now() + std::chrono::milliseconds(300);
  while (Clock::now() < settle) client->progress();
  const auto t0 = Clock::now();
  while (s.ok() && have < sizeof hello && Clock::now() - t0 < std::chrono::seconds(15)) {
    link->wait(10000);
    size_t r = 0;
    s = link->recv(got + have, sizeof hello - have, &r);
    have += r;
  }
  const auto tookMs = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  done = true;
  serve.join();
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_TRUE(sent.load());
  ASSERT_EQ(have, sizeof hello);
  EXPECT_STREQ(got, hello);
  EXPECT_LT(tookMs, 5000) << "the wait slept past bytes already in the endpoint's queue";
}

TEST(SwitchUcx, LinkKindParsing) {
  LinkKind k = LinkKind::Tcp;
  EXPECT_TRUE(parseLinkKind("UCX", &k).ok());
  EXPECT_EQ(k, LinkKind::Ucx);
  EXPECT_TRUE(parseLinkKind("tcp", &k).ok());
  EXPECT_EQ(k, LinkKind::Tcp);
  Status s = parseLinkKind("rdma", &k);
  EXPECT_EQ(s.code(), tribInvalidArgument);
  EXPECT_NE(s.message().find("tcp or ucx"), std::string::npos) << s.message();
  std::unique_ptr<LinkHub> hub;
  Status h = LinkHub::create(LinkKind::Ucx, &hub);
  if (linkKindAvailable(LinkKind::Ucx)) {
    EXPECT_TRUE(h.ok()) << h.message();
  } else {
    EXPECT_EQ(h.code(), tribNotSupported);
    EXPECT_NE(h.message().find("libucx-dev"), std::string::npos) << h.message();
  }
}
