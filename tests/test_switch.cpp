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

// Slots return to the pool once the group ends (its members gone; through a tree, once the leaves'
// leave reaches the spine): wait for it, bounded.
void waitFreeSlots(const SwitchNode& node, uint32_t want) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (node.stats().freeSlots != want && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_EQ(node.stats().freeSlots, want) << "slots are returned to the pool";
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
  waitFreeSlots(*node, 8);
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
  waitFreeSlots(*spine, 8);
  waitFreeSlots(*leaf1, 8);
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
  auto rawSend = [&](const std::vector<uint8_t>& bytes, bool authenticate = true) {
    int fd = -1;
    EXPECT_TRUE(net::connectTo(addr, net::deadlineAfter(2000), &fd).ok());
    if (authenticate) {
      EXPECT_TRUE(rawHandshake(fd, "test-job").ok());
    }
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
  EXPECT_NE(rawSend(garbage, false).code(), tribTimeout) << "the switch must close the connection";
  EXPECT_TRUE(anyEventContains(*node, "bad magic"));
  // After the handshake, a chunk for a group the connection never joined.
  std::vector<uint8_t> bytes;
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
  bytes.clear();
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

// A member whose wait ran out asks the switch what the group lacks, and hears which ranks have
// not contributed (its client translates child indices into the ranks it was given); when it then
// leaves, the others' error names whom the group still lacked as well as who left.
TEST(Switch, AStalledMemberLearnsWhoseContributionIsMissing) {
  auto node = startNode(nodeConfig(8, 4096));
  std::unique_ptr<SwitchClient> a, b, c;
  auto config = [&](uint32_t index) {
    SwitchClientConfig cfg = clientConfig(node->address(), 0x93, {{3, index}});
    cfg.leafRanks = {10, 11, 12};  // the communicator ranks of the leaf's three children
    return cfg;
  };
  ASSERT_TRUE(SwitchClient::connect(config(0), &a).ok());
  ASSERT_TRUE(SwitchClient::connect(config(1), &b).ok());
  ASSERT_TRUE(SwitchClient::connect(config(2), &c).ok());  // registers, never contributes
  std::vector<int32_t> in(100, 1), outA(100), outB(100);
  TransferOp doneA, doneB;
  ASSERT_TRUE(a->postAllReduce(in.data(), outA.data(), in.size(), tribInt32, tribSum, &doneA).ok());
  ASSERT_TRUE(b->postAllReduce(in.data(), outB.data(), in.size(), tribInt32, tribSum, &doneB).ok());
  // Until both chunks are at the switch, the answer may name b too: ask until it names c alone.
  std::string why;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    (void)b->progress();
    why = a->explainStall(std::chrono::milliseconds(500));
    if (why.find("lacks the contribution of rank 12") != std::string::npos) break;
  }
  EXPECT_NE(why.find("chunk 0 of operation 0 still lacks the contribution of rank 12"), std::string::npos)
      << why;
  EXPECT_FALSE(doneA.done());  // asking changed nothing: the operation still waits
  EXPECT_TRUE(a->broken().ok());
  a->abort(errorf(tribTimeout, "test: member 0 gives up"));
  while (!doneB.done() && std::chrono::steady_clock::now() < deadline) {
    (void)b->progress();
    std::this_thread::yield();
  }
  ASSERT_TRUE(doneB.done()) << "the remaining member must hear that the group failed";
  EXPECT_NE(
      doneB.error.message().find("rank 10 (member 0) left; chunk 0 of operation 0 still lacked rank 12"),
      std::string::npos)
      << doneB.error.message();
}

// ---- reduce, broadcast, all-gather, reduce-scatter, barrier --------------------------------
namespace {

int32_t fold(RedOp op, int32_t a, int32_t b) {
  switch (op) {
    case tribMin:
      return std::min(a, b);
    case tribMax:
      return std::max(a, b);
    case tribProd:
      return static_cast<int32_t>(static_cast<uint32_t>(a) * static_cast<uint32_t>(b));
    default:
      return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
  }
}

CollArgs argsOf(Coll coll, int n, int root, uint64_t count) {
  CollArgs a;
  a.coll = coll;
  a.nranks = n;
  a.root = root;
  a.count = count;
  return a;
}

// What rank r must hold after `coll` over the ranks' inputs `in` (independent of the switch).
std::vector<int32_t> expectedOutput(Coll coll, int root, RedOp op, uint64_t count,
                                    const std::vector<std::vector<int32_t>>& in, int r) {
  const int n = static_cast<int>(in.size());
  std::vector<int32_t> out(outputCount(argsOf(coll, n, root, count), r));
  for (uint64_t i = 0; i < out.size(); ++i) {
    switch (coll) {
      case Coll::AllGather:
        out[i] = in[i / count][i % count];
        break;
      case Coll::Broadcast:
        out[i] = in[root][i];
        break;
      default: {  // all-reduce, reduce (root), reduce-scatter: block r of the reduction
        const uint64_t idx = coll == Coll::ReduceScatter ? static_cast<uint64_t>(r) * count + i : i;
        int32_t acc = in[0][idx];
        for (int q = 1; q < n; ++q) acc = fold(op, acc, in[q][idx]);
        out[i] = acc;
      }
    }
  }
  return out;
}

struct CollRun {
  std::vector<std::vector<int32_t>> out;
  std::vector<SwitchClientStats> stats;
  std::vector<Status> status;
};

// Member r of `group` (at addrs[r], paths[r]) is rank r: each runs `coll` over its input in[r]
// (inputCount elements) through its SwitchClient. Returns outputs, client stats and statuses.
CollRun groupCollective(const std::vector<std::string>& addrs,
                        const std::vector<std::vector<PathLevel>>& paths, uint64_t group, Coll coll, int root,
                        uint64_t count, RedOp op, const std::vector<std::vector<int32_t>>& in,
                        int nranksSaid = 0) {
  const int n = static_cast<int>(addrs.size());
  const CollArgs a = argsOf(coll, n, root, count);
  CollRun res;
  res.out.resize(n);
  res.stats.resize(n);
  res.status.resize(n);
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r) {
    ts.emplace_back([&, r] {
      std::unique_ptr<SwitchClient> c;
      res.status[r] = SwitchClient::connect(clientConfig(addrs[r], group, paths[r]), &c);
      if (!res.status[r].ok()) return;
      res.out[r].assign(outputCount(a, r), -1);
      OffloadCall call{coll};
      call.nranks = nranksSaid ? nranksSaid : n;
      call.rank = r;
      call.root = root;
      call.src = in[r].empty() ? nullptr : in[r].data();
      call.dst = res.out[r].empty() ? nullptr : res.out[r].data();
      if (coll == Coll::Broadcast && r == root) {  // the root's schedule copies; the switch sends it nothing
        res.out[r] = in[r];
        call.dst = nullptr;
      }
      call.count = count;
      call.dtype = tribInt32;
      call.op = op;
      res.status[r] = runCollective(*c, call);
      res.stats[r] = c->stats();
    });
  }
  for (auto& t : ts) t.join();
  return res;
}

std::vector<std::vector<int32_t>> collInputs(Coll coll, int n, int root, uint64_t count, int salt) {
  std::vector<std::vector<int32_t>> in(n);
  for (int r = 0; r < n; ++r) {
    in[r].resize(inputCount(argsOf(coll, n, root, count), r));
    for (size_t i = 0; i < in[r].size(); ++i)
      in[r][i] = static_cast<int32_t>((i * 2654435761u) ^ (static_cast<uint32_t>(r) * 97 + salt));
  }
  return in;
}

// Runs every collective on `addrs`/`paths` and checks results and each rank's payload bytes.
void everyCollective(const std::vector<std::string>& addrs, const std::vector<std::vector<PathLevel>>& paths,
                     uint64_t groupBase) {
  const int n = static_cast<int>(addrs.size());
  const uint64_t count = 700;  // several chunks of every kind, and short tails
  struct C {
    Coll coll;
    int root;
    RedOp op;
  };
  const C colls[] = {
      {Coll::AllReduce, 0, tribSum},     {Coll::Reduce, 2, tribSum},        {Coll::Reduce, 0, tribMin},
      {Coll::Broadcast, 3, tribSum},     {Coll::Broadcast, 0, tribSum},     {Coll::AllGather, 0, tribSum},
      {Coll::ReduceScatter, 0, tribSum}, {Coll::ReduceScatter, 0, tribMax}, {Coll::Barrier, 0, tribSum}};
  uint64_t group = groupBase;
  for (const C& c : colls) {
    SCOPED_TRACE(strprintf("%s root %d op %s", collName(c.coll), c.root, redOpName(c.op)));
    const uint64_t m = c.coll == Coll::Barrier ? 0 : count;
    auto in = collInputs(c.coll, n, c.root, m, static_cast<int>(group));
    CollRun res = groupCollective(addrs, paths, ++group, c.coll, c.root, m, c.op, in);
    const uint64_t S = m * 4, nS = static_cast<uint64_t>(n) * S;
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(res.status[r].ok()) << "rank " << r << ": " << res.status[r].message();
      EXPECT_EQ(res.out[r], expectedOutput(c.coll, c.root, c.op, m, in, r)) << "rank " << r;
      // What in-network hardware moves per rank: S out and S in, except where a rank has less to
      // send or to receive (the root's broadcast, reduce off the root, all-gather's n slices in).
      uint64_t out = S, back = S;
      const bool root = r == c.root;
      if (c.coll == Coll::Reduce) back = root ? S : 0;
      if (c.coll == Coll::Broadcast) out = root ? S : 0, back = root ? 0 : S;
      if (c.coll == Coll::AllGather) back = nS;
      if (c.coll == Coll::ReduceScatter) out = nS;
      EXPECT_EQ(res.stats[r].payloadSent, out) << "rank " << r;
      EXPECT_EQ(res.stats[r].payloadRecv, back) << "rank " << r;
      if (c.coll == Coll::Barrier) {
        EXPECT_EQ(res.stats[r].chunks, 1u) << "a barrier is one empty chunk";
      }
    }
    // The measurement behind docs/SWITCH.md's table (S = 2,800 bytes).
    const int other = c.root == 0 ? 1 : 0;
    std::printf("%-13s root %d: rank %d sent %llu B, received %llu B; rank %d sent %llu B, received %llu B\n",
                collName(c.coll), c.root, c.root,
                static_cast<unsigned long long>(res.stats[c.root].payloadSent),
                static_cast<unsigned long long>(res.stats[c.root].payloadRecv), other,
                static_cast<unsigned long long>(res.stats[other].payloadSent),
                static_cast<unsigned long long>(res.stats[other].payloadRecv));
  }
}

// Five ranks on a two-level tree whose child order is not the rank order: rank 0 and 2 under
// leaf 1, ranks 1, 3, 4 under leaf 0 (results must still land at rank offsets).
const std::vector<std::vector<PathLevel>> kTreePaths{
    {{2, 0}, {2, 1}}, {{3, 0}, {2, 0}}, {{2, 1}, {2, 1}}, {{3, 1}, {2, 0}}, {{3, 2}, {2, 0}}};

}  // namespace

TEST(SwitchCollectives, EveryCollectiveThroughOneSwitch) {
  auto node = startNode(nodeConfig(8, 1024));  // 256 int32 per chunk; all-gather: 64 per piece
  const uint32_t n = 4;
  std::vector<std::vector<PathLevel>> paths;
  for (uint32_t r = 0; r < n; ++r) paths.push_back({{n, r}});
  everyCollective(std::vector<std::string>(n, node->address()), paths, 0x1000);
  EXPECT_TRUE(node->events().empty()) << node->events().front();
  waitFreeSlots(*node, 8);
}

TEST(SwitchCollectives, EveryCollectiveThroughATwoLevelTree) {
  auto spine = startNode(nodeConfig(8, 1024));
  auto leaf0 = startNode(nodeConfig(8, 2048, spine->address()));
  auto leaf1 = startNode(nodeConfig(8, 2048, spine->address()));
  std::vector<std::string> addrs{leaf1->address(), leaf0->address(), leaf1->address(), leaf0->address(),
                                 leaf0->address()};
  everyCollective(addrs, kTreePaths, 0x2000);
  for (auto* s : {spine.get(), leaf0.get(), leaf1.get()}) {
    EXPECT_TRUE(s->events().empty()) << s->events().front();
    waitFreeSlots(*s, 8);
  }
  // The all-gather pieces travel once per rank up the tree; results go down once per child.
  EXPECT_GT(spine->stats().chunksReduced, 0u);
}

// Reduce-scatter and reduce fold in the same child order as all-reduce: bit-identical floats.
TEST(SwitchCollectives, ReduceAndReduceScatterMatchAllReduceBitForBit) {
  auto spine = startNode(nodeConfig(8, 1024));
  auto leaf0 = startNode(nodeConfig(8, 2048, spine->address()));
  auto leaf1 = startNode(nodeConfig(8, 2048, spine->address()));
  std::vector<std::string> addrs{leaf1->address(), leaf0->address(), leaf1->address(), leaf0->address(),
                                 leaf0->address()};
  const int n = 5;
  const uint64_t count = 600;
  std::vector<std::vector<float>> in(n, std::vector<float>(n * count));
  for (int r = 0; r < n; ++r)
    for (uint64_t i = 0; i < n * count; ++i)
      in[r][i] =
          (r == 1 ? 3e7f : 1.0f) * static_cast<float>((i * 7 + static_cast<uint64_t>(r)) % 13 + 1) / 3.0f;
  std::vector<std::vector<float>> all(n, std::vector<float>(n * count)), rs(n, std::vector<float>(count)),
      red(n, std::vector<float>(n * count));
  const int root = 4;
  std::vector<std::thread> ts;
  std::vector<Status> st(n);
  for (int r = 0; r < n; ++r) {
    ts.emplace_back([&, r] {
      std::unique_ptr<SwitchClient> c;
      st[r] = SwitchClient::connect(clientConfig(addrs[r], 0x3001, kTreePaths[r]), &c);
      if (!st[r].ok()) return;
      OffloadCall call{Coll::AllReduce};
      call.nranks = n;
      call.rank = r;
      call.root = root;
      call.src = in[r].data();
      call.dst = all[r].data();
      call.count = n * count;
      call.dtype = tribFloat32;
      if (st[r].ok()) st[r] = runCollective(*c, call);
      call.coll = Coll::ReduceScatter;
      call.dst = rs[r].data();
      call.count = count;
      if (st[r].ok()) st[r] = runCollective(*c, call);
      call.coll = Coll::Reduce;
      call.dst = r == root ? red[r].data() : nullptr;
      call.count = n * count;
      if (st[r].ok()) st[r] = runCollective(*c, call);
    });
  }
  for (auto& t : ts) t.join();
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r].message();
    EXPECT_EQ(std::memcmp(rs[r].data(), all[r].data() + r * count, count * 4), 0) << "rank " << r;
    EXPECT_EQ(std::memcmp(all[r].data(), all[0].data(), n * count * 4), 0) << "rank " << r;
  }
  EXPECT_EQ(std::memcmp(red[root].data(), all[0].data(), n * count * 4), 0);
  // The tree's order: leaf 0 folds ranks 1, 3, 4; leaf 1 ranks 0, 2; the spine leaf 0 then leaf 1.
  for (uint64_t i = 0; i < n * count; i += 97) {
    float want = ((in[1][i] + in[3][i]) + in[4][i]) + (in[0][i] + in[2][i]);
    EXPECT_EQ(std::memcmp(&all[0][i], &want, 4), 0) << i;
  }
}

TEST(SwitchCollectives, SeveralGroupsDifferentCollectivesAtOnce) {
  auto node = startNode(nodeConfig(16, 1024));
  auto flat = [](uint32_t n) {
    std::vector<std::vector<PathLevel>> p;
    for (uint32_t r = 0; r < n; ++r) p.push_back({{n, r}});
    return p;
  };
  struct G {
    Coll coll;
    int n, root;
  };
  const G gs[] = {{Coll::Broadcast, 3, 1}, {Coll::AllGather, 2, 0}, {Coll::ReduceScatter, 3, 0}};
  std::vector<CollRun> res(3);
  std::vector<std::vector<std::vector<int32_t>>> ins(3);
  std::vector<std::thread> ts;
  for (int g = 0; g < 3; ++g) {
    ins[g] = collInputs(gs[g].coll, gs[g].n, gs[g].root, 3000, g);
    ts.emplace_back([&, g] {
      res[g] = groupCollective(std::vector<std::string>(gs[g].n, node->address()), flat(gs[g].n), 0x4000 + g,
                               gs[g].coll, gs[g].root, 3000, tribSum, ins[g]);
    });
  }
  for (auto& t : ts) t.join();
  for (int g = 0; g < 3; ++g) {
    for (int r = 0; r < gs[g].n; ++r) {
      ASSERT_TRUE(res[g].status[r].ok())
          << collName(gs[g].coll) << " rank " << r << ": " << res[g].status[r].message();
      EXPECT_EQ(res[g].out[r], expectedOutput(gs[g].coll, gs[g].root, tribSum, 3000, ins[g], r))
          << collName(gs[g].coll) << " rank " << r;
    }
  }
  waitFreeSlots(*node, 16);
}

TEST(SwitchCollectives, RefusalsSayWhy) {
  auto node = startNode(nodeConfig(8, 16));  // 16-byte slots: 4 int32
  std::unique_ptr<SwitchClient> c;
  ASSERT_TRUE(SwitchClient::connect(clientConfig(node->address(), 0x5001, {{1, 0}}), &c).ok());
  std::vector<int32_t> in(8, 1), out(64);
  OffloadCall call{Coll::AllGather};
  call.nranks = 8;  // a gathered chunk needs 8 x 4 bytes: more than a slot
  call.src = in.data();
  call.dst = out.data();
  call.count = 8;
  call.dtype = tribInt32;
  TransferOp done;
  Status s = c->postCollective(call, &done);
  EXPECT_EQ(s.code(), tribNotSupported);
  EXPECT_NE(s.message().find("needs slots of at least 32 bytes; the switch grants 16"), std::string::npos)
      << s.message();
  call.coll = Coll::AlltoAll;
  call.nranks = 1;
  s = c->postCollective(call, &done);
  EXPECT_EQ(s.code(), tribNotSupported);
  EXPECT_NE(s.message().find("alltoall is not run by the switch"), std::string::npos) << s.message();
  c.reset();

  // A peer that sends an all-to-all chunk anyway: its group fails with the reason, and hears it.
  net::SockAddr addr;
  ASSERT_TRUE(net::parseHostPort(node->address(), &addr).ok());
  int fd = -1;
  ASSERT_TRUE(net::connectTo(addr, net::deadlineAfter(2000), &fd).ok());
  ASSERT_TRUE(rawHandshake(fd, "test-job").ok());
  std::vector<uint8_t> bytes;
  Header reg;
  reg.type = MsgType::Register;
  reg.group = 0x5002;
  reg.arg32 = 2;
  auto path = encodePath({{1, 0}});
  auto m = encodeMessage(reg, path.data(), path.size());
  bytes.insert(bytes.end(), m.begin(), m.end());
  Header chunk;
  chunk.type = MsgType::Chunk;
  chunk.group = 0x5002;
  chunk.dtype = tribInt32;
  chunk.coll = static_cast<uint8_t>(Coll::AlltoAll);
  chunk.count = 2;
  m = encodeMessage(chunk, in.data(), 8);
  bytes.insert(bytes.end(), m.begin(), m.end());
  ASSERT_TRUE(net::sendAll(fd, bytes.data(), bytes.size(), net::deadlineAfter(2000)).ok());
  std::string reason;
  for (int i = 0; i < 3 && reason.empty(); ++i) {
    uint8_t hb[kHeaderBytes];
    ASSERT_TRUE(net::recvAll(fd, hb, kHeaderBytes, net::deadlineAfter(3000)).ok());
    Header h;
    ASSERT_TRUE(parseHeader(hb, 1 << 20, &h).ok());
    std::string text(h.payloadBytes, '\0');
    if (h.payloadBytes) {
      ASSERT_TRUE(net::recvAll(fd, text.data(), text.size(), net::deadlineAfter(3000)).ok());
    }
    if (h.type == MsgType::Error) reason = text;
  }
  close(fd);
  EXPECT_NE(reason.find("collective alltoall is not run by this switch"), std::string::npos) << reason;

  // Members that disagree on the root: the group fails for both, with the reason.
  auto node2 = startNode(nodeConfig(8, 4096));
  std::vector<Status> st(2);
  std::vector<std::thread> ts;
  for (int r = 0; r < 2; ++r) {
    ts.emplace_back([&, r] {
      std::unique_ptr<SwitchClient> m2;
      st[r] =
          SwitchClient::connect(clientConfig(node2->address(), 0x5003, {{2, static_cast<uint32_t>(r)}}), &m2);
      if (!st[r].ok()) return;
      std::vector<int32_t> v(100, r), o(100);
      OffloadCall rc{Coll::Reduce};
      rc.nranks = 2;
      rc.rank = r;
      rc.root = r;  // each thinks it is the root
      rc.src = v.data();
      rc.dst = o.data();
      rc.count = 100;
      rc.dtype = tribInt32;
      st[r] = runCollective(*m2, rc, std::chrono::milliseconds(5000));
    });
  }
  for (auto& t : ts) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_FALSE(st[r].ok()) << "rank " << r;
    EXPECT_NE(st[r].message().find("members disagree on chunk 0"), std::string::npos) << st[r].message();
  }

  // An all-gather whose tree holds fewer members than the ranks it claims: refused at the top.
  auto in2 = collInputs(Coll::AllGather, 2, 0, 10, 1);
  CollRun res = groupCollective({node2->address(), node2->address()}, {{{2, 0}}, {{2, 1}}}, 0x5004,
                                Coll::AllGather, 0, 10, tribSum, in2, /*nranksSaid=*/3);
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(res.status[r].message().find("2 of 3 ranks' pieces came in"), std::string::npos)
        << res.status[r].message();
  }
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
#include "verify_util.hpp"

namespace {

CollArgs allReduceArgs(int n, uint64_t count, bool inPlace) {
  return trib::testing::allReduceArgs(n, count, inPlace, 1000);
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

TEST(SwitchVerify, EveryCollectiveVerifiesAndMovesWhatItShould) {
  const Coll colls[] = {Coll::AllReduce, Coll::Reduce,        Coll::Broadcast,
                        Coll::AllGather, Coll::ReduceScatter, Coll::Barrier};
  for (Coll coll : colls) {
    const AlgoInfo* sw = findAlgorithm(coll, Algo::Switch);
    ASSERT_NE(sw, nullptr) << collName(coll);
    for (int n : {1, 3, 5}) {
      for (bool inPlace : {false, true}) {
        for (int root : {0, n - 1}) {
          CollArgs a;
          a.coll = coll;
          a.nranks = n;
          a.root = root;
          a.count = coll == Coll::Barrier ? 0 : 1001;
          a.inPlace = inPlace;
          VerifyStats st;
          Status s = verifySchedule(*sw, a, &st);
          ASSERT_TRUE(s.ok()) << collName(coll) << " n " << n << " root " << root << ": " << s.message();
          const uint64_t m = a.count, nm = static_cast<uint64_t>(n) * m;
          EXPECT_EQ(st.maxRankSent, coll == Coll::ReduceScatter ? nm : m) << collName(coll);
          const bool lone = coll == Coll::Broadcast && n == 1;  // the root receives nothing
          EXPECT_EQ(st.maxRankRecv, coll == Coll::AllGather ? nm : lone ? 0 : m) << collName(coll);
          EXPECT_EQ(st.messages, 0u);
        }
      }
    }
  }
}

namespace {
// An all-gather whose switch step receives only the rank's own slice.
Generator<Step> shortAllGather(CollArgs a, int) {
  co_yield Step::switchReduce({Buf::Input, 0, a.count}, {Buf::Output, 0, a.count});
}
// A reduce-scatter whose ranks contribute only their own block.
Generator<Step> shortReduceScatter(CollArgs a, int rank) {
  co_yield Step::switchReduce({Buf::Input, static_cast<uint64_t>(rank) * a.count, a.count},
                              {Buf::Output, 0, a.count});
}
}  // namespace

TEST(SwitchVerify, CatchesWrongShapesForTheCollective) {
  const AlgoInfo ag{Algo::Switch, Coll::AllGather, anyArgs, noScratchHere, shortAllGather};
  CollArgs a;
  a.coll = Coll::AllGather;
  a.nranks = 3;
  a.count = 10;
  Status s = verifySchedule(ag, a);
  EXPECT_NE(s.message().find("contributes 10 and receives 10 elements here, not 10 and 30"),
            std::string::npos)
      << s.message();
  const AlgoInfo rs{Algo::Switch, Coll::ReduceScatter, anyArgs, noScratchHere, shortReduceScatter};
  a.coll = Coll::ReduceScatter;
  s = verifySchedule(rs, a);
  EXPECT_NE(s.message().find("not 30 and 10"), std::string::npos) << s.message();
}
