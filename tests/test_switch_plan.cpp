// The planner and the attached switch, through the communicator: the switch is chosen only when
// the model says it wins (TRIB_SWITCH_BW / TRIB_SWITCH_LAT), TRIB_ALGO forces or excludes it;
// communicator-level two-level trees (ranks on different leaves under one spine, from per-rank
// TRIB_SWITCH or from the topology file's addr=), with exact results and S out / S in per rank.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <thread>
#include <tuple>
#include <vector>

#include "algo/algo_util.hpp"
#include "algo/algorithms.hpp"
#include "core/comm.hpp"
#include "core/switch_coll.hpp"
#include "support/launcher.hpp"
#include "switch_util.hpp"
#include "topo/topology.hpp"
#include "verify/verify.hpp"

using namespace trib;
using namespace trib::sw;
using trib::algo::inR;
using trib::algo::outR;

namespace {

using sw::testing::ScopedEnv;
using sw::testing::threadRanks;

// An int32 sum all-reduce of `count` elements on `comm`; checks every element and returns the
// switch payload this rank sent and received meanwhile ("" = exact).
std::string exactAllReduce(tribComm_t comm, int rank, int n, uint64_t count, int salt, uint64_t* sent,
                           uint64_t* recvd) {
  std::vector<int32_t> in(count), out(count);
  for (uint64_t i = 0; i < count; ++i) in[i] = static_cast<int32_t>(i % 977) * (rank + 1) + salt;
  uint64_t s0 = 0, r0 = 0, s1 = 0, r1 = 0;
  const bool have = switchTraffic(comm->impl(), &s0, &r0);
  if (tribAllReduce(in.data(), out.data(), count, tribInt32, tribSum, comm, nullptr) != tribSuccess)
    return tribGetLastError(nullptr);
  if (have && switchTraffic(comm->impl(), &s1, &r1)) {
    *sent = s1 - s0;
    *recvd = r1 - r0;
  } else {
    *sent = *recvd = 0;
  }
  for (uint64_t i = 0; i < count; ++i) {
    const int32_t want = static_cast<int32_t>(i % 977) * (n * (n + 1) / 2) + n * salt;
    if (out[i] != want)
      return strprintf("element %llu: %d, expected %d", static_cast<unsigned long long>(i), out[i], want);
  }
  return "";
}

}  // namespace

TEST(SwitchTree, PathsFromTheRanksLeaves) {
  // One leaf: a flat group in rank order.
  SwitchTree t = switchTreeOf({"a", "a", "a"}, 2);
  ASSERT_EQ(t.path.size(), 1u);
  EXPECT_EQ(t.path[0], std::make_pair(3u, 2u));
  EXPECT_EQ(t.fanIn, 3);
  // Two leaves, interleaved: children by rank order at each leaf; leaves by their first rank.
  std::vector<std::string> leaves{"b", "a", "b", "a", "b"};
  t = switchTreeOf(leaves, 3);
  ASSERT_EQ(t.path.size(), 2u);
  EXPECT_EQ(t.path[0], std::make_pair(2u, 1u));  // at leaf a: ranks 1, 3
  EXPECT_EQ(t.path[1], std::make_pair(2u, 1u));  // leaf a is the spine's second child
  EXPECT_EQ(t.fanIn, 3);                         // leaf b has 3 children
  EXPECT_EQ(t.leaves, 2);
  t = switchTreeOf(leaves, 4);
  EXPECT_EQ(t.path[0], std::make_pair(3u, 2u));
  EXPECT_EQ(t.path[1], std::make_pair(2u, 0u));
  EXPECT_EQ(t.describe(), "level 0: child 2 of 3, level 1: child 0 of 2");
}

// Threads as ranks through the bootstrap (the all-gather path): which algorithm runs is read off
// the switch's byte counters, and every result is checked.
TEST(SwitchPlan, ThePlannerChoosesTheAttachedSwitchOnlyWhenItWins) {
  ScopedEnv env;
  std::unique_ptr<SwitchNode> node = sw::testing::startSwitchFor(env, 64, 16384);
  ASSERT_TRUE(node);
  const int n = 4;
  const uint64_t count = 1 << 16;  // 256 KiB
  struct Case {
    const char* bw;
    const char* algo;
    bool viaSwitch;
  } cases[] = {
      {"1000", "", true},          // a fast switch wins
      {"0.001", "", false},        // a slow one loses to the host algorithms
      {"1000", "^switch", false},  // excluded
      {"0.001", "switch", true},   // forced
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(strprintf("TRIB_SWITCH_BW=%s TRIB_ALGO=%s", c.bw, c.algo));
    env.set("TRIB_SWITCH_BW", c.bw);
    env.set("TRIB_SWITCH_LAT", "1");
    std::vector<uint64_t> sent(n, 0), recvd(n, 0);
    const std::vector<std::string> errors = sw::testing::threadRanks(n, c.algo, [&](int r, tribComm_t comm) {
      if (!switchUsable(comm->impl())) return std::string("the switch is not attached");
      return exactAllReduce(comm, r, n, count, 5, &sent[r], &recvd[r]);
    });
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(errors[r], "") << "rank " << r;
      EXPECT_EQ(sent[r], c.viaSwitch ? count * 4 : 0) << "rank " << r;
      EXPECT_EQ(recvd[r], c.viaSwitch ? count * 4 : 0) << "rank " << r;
    }
  }
  EXPECT_TRUE(node->events().empty()) << node->events().front();
}

namespace {

// A spine and two leaves (--parent spine) in the parent process; four rank processes (shm between
// them), ranks 0 and 2 under leaf A, 1 and 3 under leaf B -- named per rank by TRIB_SWITCH, or,
// with `viaTopology`, by a topology file whose leaf switches carry addr=.
void twoLevelTree(bool viaTopology) {
  struct Hello {
    tribUniqueId id;
    char leaf[2][64];
    char topo[256];
  };
  const int n = 4;
  const uint64_t count = 100003;
  trib::testing::ParentChannel channel(n);
  std::unique_ptr<SwitchNode> spine, leafA, leafB;
  std::string topoPath;
  auto results = trib::testing::runProcesses(
      n,
      [&](int rank, std::string& report) -> int {
        Hello h{};
        if (!channel.receive(rank, &h, sizeof h, 30000)) {
          report = "no hello from the parent";
          return 1;
        }
        if (viaTopology) {
          unsetenv("TRIB_SWITCH");
          setenv("TRIB_TOPO_FILE", h.topo, 1);
        } else {
          setenv("TRIB_SWITCH", h.leaf[rank % 2], 1);
          setenv("TRIB_SWITCH_ATTACH_TIMEOUT", sw::testing::kSlowAttachSeconds, 1);
        }
        setenv("TRIB_SWITCH_KEY", "test-job", 1);
        tribConfig_t cfg = TRIB_CONFIG_INITIALIZER;
        cfg.timeoutMs = 60000;
        cfg.transport = "shm";
        cfg.algo = "switch";
        tribComm_t comm = nullptr;
        if (tribCommInitRankConfig(&comm, n, h.id, rank, &cfg) != tribSuccess) {
          report = std::string("init: ") + tribGetLastError(nullptr);
          return 1;
        }
        if (!switchUsable(comm->impl())) {
          report = "the switch tree is not in use after init";
          return 1;
        }
        for (int it = 0; it < 2; ++it) {
          uint64_t sent = 0, recvd = 0;
          std::string err = exactAllReduce(comm, rank, n, count, it, &sent, &recvd);
          if (err.empty() && (sent != count * 4 || recvd != count * 4))
            err = strprintf("switch traffic %llu out / %llu in, expected %llu each",
                            static_cast<unsigned long long>(sent), static_cast<unsigned long long>(recvd),
                            static_cast<unsigned long long>(count * 4));
          if (!err.empty()) {
            report = strprintf("iteration %d: %s", it, err.c_str());
            return 1;
          }
        }
        tribCommDestroy(comm);
        return 0;
      },
      std::chrono::minutes(2),
      [&](const std::vector<int>&) {
        ASSERT_TRUE(SwitchNode::create(sw::testing::nodeConfig(64, 8192), &spine).ok());
        spine->start();
        ASSERT_TRUE(SwitchNode::create(sw::testing::nodeConfig(64, 8192, spine->address()), &leafA).ok());
        leafA->start();
        ASSERT_TRUE(SwitchNode::create(sw::testing::nodeConfig(64, 8192, spine->address()), &leafB).ok());
        leafB->start();
        Hello h{};
        ASSERT_EQ(tribGetUniqueId(&h.id), tribSuccess);
        std::snprintf(h.leaf[0], sizeof h.leaf[0], "%s", leafA->address().c_str());
        std::snprintf(h.leaf[1], sizeof h.leaf[1], "%s", leafB->address().c_str());
        if (viaTopology) {
          // Ranks take the CPUs in order: c0..c3; c0 and c2 hang off leafA.
          topoPath = strprintf("/tmp/trib_switch_tree_%d.topo", static_cast<int>(getpid()));
          std::ofstream f(topoPath);
          f << "topology two-leaves\n";
          for (int c = 0; c < 4; ++c) f << "node c" << c << " cpu\n";
          f << "node leafA switch addr=" << leafA->address() << "\n";
          f << "node leafB switch addr=" << leafB->address() << "\n";
          f << "node spine switch\n";
          for (int c = 0; c < 4; ++c)
            f << "link c" << c << (c % 2 ? " leafB" : " leafA") << " net bw=10 lat=2\n";
          f << "link leafA spine net bw=20 lat=1\nlink leafB spine net bw=20 lat=1\n";
          std::snprintf(h.topo, sizeof h.topo, "%s", topoPath.c_str());
        }
        for (int r = 0; r < n; ++r) channel.send(r, &h, sizeof h);
      });
  if (!topoPath.empty()) std::remove(topoPath.c_str());
  EXPECT_EQ(trib::testing::describeFailures(results), "");
  ASSERT_TRUE(spine && leafA && leafB);
  // Every leaf reduced its two ranks' chunks and the spine reduced the leaves' partials: the
  // payload the spine saw is the leaves' (2 x S per all-reduce), not the ranks' (4 x S).
  EXPECT_GT(leafA->stats().chunksReduced, 0u);
  EXPECT_GT(leafB->stats().chunksReduced, 0u);
  EXPECT_GT(spine->stats().chunksReduced, 0u);
  EXPECT_EQ(leafA->stats().payloadIn, 2 * 2 * count * 4);
  EXPECT_EQ(spine->stats().payloadIn, 2 * 2 * count * 4);
  EXPECT_TRUE(spine->events().empty()) << spine->events().front();
}

}  // namespace

TEST(SwitchPlan, TwoLevelTreeFromPerRankTribSwitch) { twoLevelTree(false); }

TEST(SwitchPlan, TwoLevelTreeFromTheTopologyFile) { twoLevelTree(true); }

// ---- hier_switch: the schedule and the verifier's slice groups ---------------------------------

namespace {

// Every rank contributes its whole input to a stride-2 slice group: the output then lacks the
// other group's contributions, which the verifier must see.
Generator<Step> sliceOnly(CollArgs a, int) {
  co_yield Step::switchReduce(inR(0, a.count), outR(0, a.count), 2);
}
// Rank 3 never joins its slice group {1, 3}.
Generator<Step> sliceDeadlock(CollArgs a, int rank) {
  if (rank != 3) co_yield Step::switchReduce(inR(0, a.count), outR(0, a.count), 2);
}
bool anyArgs(const CollArgs&) { return true; }
uint64_t noScratchNeeded(const CollArgs&, int) { return 0; }

}  // namespace

TEST(HierSwitchSchedule, VerifiedForEveryShapeAndSendsOnlyItsSlice) {
  const AlgoInfo* info = findAlgorithm(Coll::AllReduce, Algo::HierSwitch);
  ASSERT_TRUE(info);
  int verified = 0;
  for (auto [n, d] : {std::pair{4, 2}, {6, 2}, {6, 3}, {8, 4}, {9, 3}, {5, 0}, {2, 2}}) {
    for (uint64_t count : {0ull, 1ull, 5ull, 100ull, 1001ull}) {
      for (bool inPlace : {false, true}) {
        for (uint64_t chunk : {3ull, 64ull}) {
          CollArgs a;
          a.nranks = n;
          a.count = count;
          a.inPlace = inPlace;
          a.chunkElems = chunk;
          a.ranksPerDomain = d;
          SCOPED_TRACE(strprintf("n %d d %d count %llu%s chunk %llu", n, d,
                                 static_cast<unsigned long long>(count), inPlace ? " in place" : "",
                                 static_cast<unsigned long long>(chunk)));
          ASSERT_TRUE(info->supports(a));
          Status st = verifySchedule(*info, a);
          EXPECT_TRUE(st.ok()) << st.message();
          ++verified;
          // With d >= 2 ranks per domain, each rank hands the switch its 1/d slice, in up to
          // kHierSwitchPieces steps of whole chunks (the rings' slices) whose stride names the
          // slice group (one step here: the blocks are below a piece's least size).
          const int dom = d >= 2 ? d : n;
          for (int r = 0; r < n; ++r) {
            uint64_t toSwitch = 0;
            int switchSteps = 0;
            for (const Step& s : materialize(*info, a, r)) {
              if (s.kind != StepKind::SwitchReduce) continue;
              ++switchSteps;
              toSwitch += s.src.count;
              EXPECT_EQ(s.peer, dom >= 2 ? dom : -1) << describeStep(s);
            }
            const uint64_t slice = count / dom + (static_cast<uint64_t>((r % dom + 1) % dom) < count % dom);
            EXPECT_EQ(toSwitch, slice) << "rank " << r;
            const uint64_t slices = (slice + chunk - 1) / chunk, pieces = hierSwitchPieces(slice, slices);
            const uint64_t piece = (slices + pieces - 1) / pieces * chunk;
            EXPECT_EQ(switchSteps, slice ? static_cast<int>((slice + piece - 1) / piece) : 0);
            EXPECT_LE(switchSteps, static_cast<int>(kHierSwitchPieces));
          }
        }
      }
    }
  }
  EXPECT_EQ(verified, 7 * 5 * 2 * 2);
  // Blocks of several pieces (hierSwitchPieces: at least kHierSwitchPieceElems each, at most
  // kHierSwitchPieces): every rank hands its slice over in that many steps, whole chunks each,
  // and the schedule still verifies. (Domains of 3 and 4 at chunks of 4096: a pipeline slice's
  // steps, 4(d-1) x 16 + 1, do not fit the window five times, so one pass.)
  for (auto [n, d, count, pieces] : {std::tuple{8, 4, 9 * kHierSwitchPieceElems + 7, 2},
                                     std::tuple{6, 3, 3 * 9 * kHierSwitchPieceElems + 5, 8}}) {
    CollArgs a;
    a.nranks = n;
    a.count = count;
    a.chunkElems = 4096;
    a.ranksPerDomain = d;
    Status st = verifySchedule(*info, a);
    EXPECT_TRUE(st.ok()) << st.message();
    for (int r = 0; r < n; ++r) {
      std::vector<uint64_t> counts;
      for (const Step& s : materialize(*info, a, r))
        if (s.kind == StepKind::SwitchReduce) counts.push_back(s.src.count);
      EXPECT_EQ(static_cast<int>(counts.size()), pieces) << "n " << n << " rank " << r;
      for (size_t i = 0; i + 1 < counts.size(); ++i) EXPECT_EQ(counts[i] % a.chunkElems, 0u) << "piece " << i;
    }
  }
}

// Pipeline slices (hierSwitchSliceElems): with domains of two at chunks of 4096 a slice is two
// blocks of 16 chunks (a block one piece's least size, one switch operation) and 65 steps, five of
// which fit the executor's window: each slice's block goes to the switch whole, in slice order, and
// the schedule verifies.
TEST(HierSwitchSchedule, PipelineSlicesHandEachSlicesBlockToTheSwitch) {
  const AlgoInfo* info = findAlgorithm(Coll::AllReduce, Algo::HierSwitch);
  ASSERT_TRUE(info);
  EXPECT_EQ(algo::hierSwitchSliceChunks(4096), 16u);
  EXPECT_EQ(algo::hierSwitchSliceSteps(2, 16), 65u);
  for (bool inPlace : {false, true}) {
    CollArgs a;
    a.nranks = 4;
    a.ranksPerDomain = 2;
    a.chunkElems = 4096;
    a.count = 5 * kHierSwitchPieceElems + 7;  // two whole slices and a short one
    a.inPlace = inPlace;
    ASSERT_EQ(algo::hierSwitchSliceElems(a), 2 * kHierSwitchPieceElems);
    Status st = verifySchedule(*info, a);
    EXPECT_TRUE(st.ok()) << st.message();
    for (int r = 0; r < a.nranks; ++r) {
      std::vector<Step> ops;
      for (const Step& s : materialize(*info, a, r))
        if (s.kind == StepKind::SwitchReduce) ops.push_back(s);
      ASSERT_EQ(ops.size(), 3u) << "rank " << r;
      for (size_t j = 0; j < ops.size(); ++j) {
        // Local rank L hands over block L+1 of slice j: of two, the other half of the slice.
        const uint64_t slice = j * 2 * kHierSwitchPieceElems,
                       len = j < 2 ? 2 * kHierSwitchPieceElems : 7 + kHierSwitchPieceElems;
        const uint64_t half = len / 2, first = r % 2 == 0 ? len - half : 0;
        EXPECT_EQ(ops[j].src.offset, slice + first) << "rank " << r << " slice " << j;
        EXPECT_EQ(ops[j].src.count, r % 2 == 0 ? half : len - half) << "rank " << r << " slice " << j;
      }
    }
  }
  // Domains of three: 129 steps a slice, one pass.
  CollArgs b;
  b.nranks = 6;
  b.ranksPerDomain = 3;
  b.chunkElems = 4096;
  b.count = 1 << 22;
  EXPECT_EQ(algo::hierSwitchSliceElems(b), b.count);
}

TEST(HierSwitchSchedule, TheVerifierKeepsSliceGroupsApart) {
  CollArgs a;
  a.nranks = 4;
  a.count = 8;
  const AlgoInfo partial = {Algo::HierSwitch, Coll::AllReduce, anyArgs, noScratchNeeded, sliceOnly};
  Status st = verifySchedule(partial, a);
  ASSERT_FALSE(st.ok()) << "a reduction over half the ranks was accepted";
  EXPECT_NE(st.message().find("missing contributions from ranks {1, 3}"), std::string::npos) << st.message();
  const AlgoInfo stuck = {Algo::HierSwitch, Coll::AllReduce, anyArgs, noScratchNeeded, sliceDeadlock};
  st = verifySchedule(stuck, a);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("switch_reduce #0 (1 of 2 in)"), std::string::npos) << st.message();
}

// hier_switch through real switches: two "hosts" of two ranks each (a topology file; the ranks are
// threads), each host's NIC under its own leaf switch (addr=), the leaves under one spine. The
// slice groups {0, 2} and {1, 3} each span both leaves. Results are exact, in and out of place,
// and each rank hands the switch only its half: a host's switch traffic is S, not 2 x S.
TEST(SwitchPlan, HierSwitchThroughTwoLeavesExactAndHalfTheTraffic) {
  std::unique_ptr<SwitchNode> spine, leafA, leafB;
  ASSERT_TRUE(SwitchNode::create(sw::testing::nodeConfig(128, 8192), &spine).ok());
  spine->start();
  ASSERT_TRUE(SwitchNode::create(sw::testing::nodeConfig(128, 8192, spine->address()), &leafA).ok());
  leafA->start();
  ASSERT_TRUE(SwitchNode::create(sw::testing::nodeConfig(128, 8192, spine->address()), &leafB).ok());
  leafB->start();
  const std::string topoPath = strprintf("/tmp/trib_hier_switch_%d.topo", static_cast<int>(getpid()));
  {
    std::ofstream f(topoPath);
    f << "topology two-hosts\n";
    for (int h = 0; h < 2; ++h) {
      f << "node h" << h << "c0 cpu\nnode h" << h << "c1 cpu\nnode h" << h << "nic nic\n";
      f << "link h" << h << "c0 h" << h << "c1 shm bw=20\n";
      f << "link h" << h << "c0 h" << h << "nic pcie bw=20\nlink h" << h << "c1 h" << h << "nic pcie bw=20\n";
    }
    f << "node leafA switch addr=" << leafA->address() << "\nnode leafB switch addr=" << leafB->address()
      << "\nnode spine switch\n";
    f << "link h0nic leafA net bw=10 lat=2\nlink h1nic leafB net bw=10 lat=2\n";
    f << "link leafA spine net bw=10 lat=1\nlink leafB spine net bw=10 lat=1\n";
  }
  ScopedEnv env;
  env.set("TRIB_TOPO_FILE", topoPath);
  env.set("TRIB_SWITCH_KEY", "test-job");
  unsetenv("TRIB_SWITCH");
  const int n = 4;
  // Past two pipeline slices (hierSwitchSliceElems: two blocks of at least 64 Ki elements), so the
  // schedule hands the switch a slice's block before the next slice's reduce-scatter; the last
  // slice is odd, as the count, so each rank's share is that of the whole count.
  const uint64_t count = 300007;
  std::vector<uint64_t> sent(n, 0), recvd(n, 0);
  std::vector<int> stride(n, 0), reduceScatterAfterSwitch(n, 0);
  const std::vector<std::string> errors =
      sw::testing::threadRanks(n, "hier_switch", [&](int r, tribComm_t comm) {
        stride[r] = sliceUsable(comm->impl()) ? comm->impl()->sliceStride : 0;
        std::string err = exactAllReduce(comm, r, n, count, 3, &sent[r], &recvd[r]);
        // The int32 plan's steps: sends from the input (a reduce-scatter's, d = 2) after a switch step.
        for (const auto& [key, plan] : comm->impl()->planCache) {
          if (static_cast<Coll>(key.coll) != Coll::AllReduce || key.count != count || !plan.steps) continue;
          bool switched = false;
          for (const Step& st : *plan.steps) {
            switched = switched || st.kind == StepKind::SwitchReduce;
            if (switched && st.kind == StepKind::Send && st.src.buf == Buf::Input)
              ++reduceScatterAfterSwitch[r];
          }
          break;
        }
        // In place, float32 avg: exact here (small integers, divided once at the host).
        std::vector<float> buf(count);
        for (uint64_t i = 0; i < count && err.empty(); ++i) buf[i] = static_cast<float>((i % 50) * (r + 1));
        if (err.empty() &&
            tribAllReduce(buf.data(), buf.data(), count, tribFloat32, tribAvg, comm, nullptr) != tribSuccess)
          err = tribGetLastError(nullptr);
        for (uint64_t i = 0; i < count && err.empty(); ++i)
          if (buf[i] != static_cast<float>((i % 50) * 10) / 4)
            err = strprintf("in place avg element %llu: %g", static_cast<unsigned long long>(i), buf[i]);
        return err;
      });
  std::remove(topoPath.c_str());
  uint64_t total = 0;
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(errors[r], "") << "rank " << r;
    EXPECT_EQ(stride[r], 2) << "rank " << r << " has no slice group";
    EXPECT_GT(reduceScatterAfterSwitch[r], 0) << "rank " << r << ": one pass, not pipeline slices";
    // Rank r reduces block (r mod 2) + 1 of the two halves (the first has the odd element).
    const uint64_t half = (r % 2 == 1) ? (count + 1) / 2 : count / 2;
    EXPECT_EQ(sent[r], half * 4) << "rank " << r;
    EXPECT_EQ(recvd[r], half * 4) << "rank " << r;
    total += sent[r];
  }
  EXPECT_EQ(total, 2 * count * 4);  // S per host, where the flat switch plan moves 2 x S
  // Each leaf folded one member per slice group and the spine the two leaves' partials.
  EXPECT_GT(spine->stats().chunksReduced, 0u);
  EXPECT_EQ(leafA->stats().payloadIn, 2 * count * 4);  // int32 run + float run, S each
  EXPECT_TRUE(spine->events().empty()) << spine->events().front();
}

namespace {

// Two hosts of two CPUs each, one NIC per host, under one switch without an address (ranks use
// TRIB_SWITCH): the domains hier_switch's slice groups follow.
std::string writeTwoHostTopology() {
  const std::string path = strprintf("/tmp/trib_two_hosts_%d.topo", static_cast<int>(getpid()));
  std::ofstream f(path);
  f << "topology two-hosts\nnode sw switch\n";
  for (int h = 0; h < 2; ++h) {
    f << "node h" << h << "c0 cpu\nnode h" << h << "c1 cpu\nnode h" << h << "nic nic\n";
    f << "link h" << h << "c0 h" << h << "c1 shm bw=20\n";
    f << "link h" << h << "c0 h" << h << "nic pcie bw=20\nlink h" << h << "c1 h" << h << "nic pcie bw=20\n";
    f << "link h" << h << "nic sw net bw=10 lat=2\n";
  }
  return path;
}

// The two hosts in a topology file (TRIB_TOPO_FILE, its path in *topo) and a switch node the
// communicators attach to (sw::testing::startSwitchFor: its slots and slot bytes).
std::unique_ptr<SwitchNode> twoHostsAndASwitch(ScopedEnv& env, std::string* topo, uint32_t slots,
                                               uint64_t slotBytes) {
  *topo = writeTwoHostTopology();
  env.set("TRIB_TOPO_FILE", *topo);
  return sw::testing::startSwitchFor(env, slots, slotBytes);
}

}  // namespace

// The switch has room for the communicator's group but not for the slice groups: every rank drops
// its slice group (they agree), hier_switch is no longer offered, and results stay exact.
TEST(SwitchPlan, SliceGroupsRefusedAllRanksDropThemAndStayExact) {
  ScopedEnv env;
  std::string topo;
  std::unique_ptr<SwitchNode> node = twoHostsAndASwitch(env, &topo, 4, 8192);
  ASSERT_TRUE(node);
  env.set("TRIB_SWITCH_SLOTS", "4");  // the communicator's group takes all 4 slots
  const int n = 4;
  auto errors = threadRanks(n, "hier_switch", [&](int r, tribComm_t comm) -> std::string {
    if (!switchUsable(comm->impl())) return "the communicator's group should have its switch";
    if (sliceUsable(comm->impl()) || comm->impl()->sliceStride != 0)
      return "a refused slice group is still in use";
    uint64_t s = 0, v = 0;
    return exactAllReduce(comm, r, n, 30011, 1, &s, &v);
  });
  std::remove(topo.c_str());
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  bool refused = false;
  for (const auto& e : node->events()) refused |= e.find("slots exhausted") != std::string::npos;
  EXPECT_TRUE(refused);
}

// The switch goes away while the ranks run hier_switch all-reduces: they agree, give the switch
// up (slice groups too), finish on a host algorithm, and every result is exact.
TEST(SwitchPlan, HierSwitchFailsOverWhenTheSwitchGoesAway) {
  ScopedEnv env;
  std::string topo;
  std::unique_ptr<SwitchNode> node = twoHostsAndASwitch(env, &topo, 64, 4096);
  ASSERT_TRUE(node);
  env.set("TRIB_SWITCH_SLOTS", "2");  // a narrow window: each all-reduce takes a while
  const int n = 4;
  std::atomic<int> firstDone{0};
  std::thread killer([&] {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (firstDone.load() < n && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    node.reset();  // its sockets close mid-stream
  });
  std::vector<int> usedSlices(n, 0), disabled(n, 0);
  auto errors = threadRanks(n, "hier_switch", [&](int r, tribComm_t comm) -> std::string {
    usedSlices[r] = sliceUsable(comm->impl());
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (int it = 0; !comm->impl()->switchDisabled && std::chrono::steady_clock::now() < deadline; ++it) {
      uint64_t s = 0, v = 0;
      std::string err = exactAllReduce(comm, r, n, 1 << 17, it, &s, &v);
      if (!err.empty()) return strprintf("iteration %d: %s", it, err.c_str());
      if (it == 0) firstDone.fetch_add(1);
    }
    disabled[r] = comm->impl()->switchDisabled && !sliceUsable(comm->impl());
    uint64_t s = 0, v = 0;
    return exactAllReduce(comm, r, n, 1 << 17, 99, &s, &v);  // after the failover: a host algorithm
  });
  killer.join();
  std::remove(topo.c_str());
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(errors[r], "") << "rank " << r;
    EXPECT_TRUE(usedSlices[r]) << "rank " << r << " never had its slice group";
    EXPECT_TRUE(disabled[r]) << "rank " << r << " still uses the switch";
  }
}

// The domain rings of hierarchical and hier_switch with more slices in a round than the
// executor's window holds (4 KiB slices of a 2 MiB block: 512 sends and 512 receives a round).
// With every send of a round before its receives, the receives lay past the window while the sends
// waited for them, and the call hung until its timeout; a send and a receive slice by slice keep
// both in reach.
TEST(SwitchPlan, DomainRingsWithMoreSlicesThanTheExecutorsWindow) {
  ScopedEnv env;
  std::string topo;
  std::unique_ptr<SwitchNode> node = twoHostsAndASwitch(env, &topo, 64, 4096);
  ASSERT_TRUE(node);
  const int n = 4;
  const uint64_t count = (1u << 20) + 4099, slice = 4096;
  for (const char* algo : {"hierarchical", "hier_switch"}) {
    std::vector<int> sliced(n, 0);
    auto errors = threadRanks(
        n, algo,
        [&](int r, tribComm_t comm) -> std::string {
          if (std::string(algo) == "hier_switch" && !sliceUsable(comm->impl())) return "no slice group";
          uint64_t s = 0, v = 0;
          std::string err = exactAllReduce(comm, r, n, count, 5, &s, &v);
          for (const auto& [key, plan] : comm->impl()->planCache) {
            if (static_cast<Coll>(key.coll) != Coll::AllReduce || key.count != count) continue;
            uint64_t most = 0, sends = 0;
            for (const Step& st : *plan.steps)
              if (st.kind == StepKind::Send) most = std::max(most, st.src.count), ++sends;
            sliced[r] = std::string(algoName(plan.algo->algo)) == algo && most * 4 == slice && sends > 1024;
          }
          return err;
        },
        slice, 20000);
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(errors[r], "") << algo << " rank " << r;
      EXPECT_TRUE(sliced[r]) << algo << " rank " << r << " did not run in " << slice << "-byte slices";
    }
  }
  std::remove(topo.c_str());
}

TEST(SwitchTopology, AddrFieldParsedCheckedAndDumped) {
  const std::string text =
      "node c0 cpu\nnode c1 cpu\nnode leaf switch addr=10.0.0.5:7000\n"
      "link c0 leaf net bw=10\nlink c1 leaf net bw=10\n";
  Topology t;
  ASSERT_TRUE(parseTopology(text, &t).ok());
  EXPECT_EQ(t.node(t.find("leaf")).addr, "10.0.0.5:7000");
  Topology again;
  ASSERT_TRUE(parseTopology(dumpTopology(t), &again).ok());
  EXPECT_EQ(again.node(again.find("leaf")).addr, "10.0.0.5:7000");
  for (const char* bad : {"addr=10.0.0.5", "addr=:7000", "addr=host:70x0", "addr=host:"}) {
    std::string b = text;
    b.replace(b.find("addr=10.0.0.5:7000"), std::strlen("addr=10.0.0.5:7000"), bad);
    Status st = parseTopology(b, &t);
    EXPECT_EQ(st.code(), tribInvalidArgument) << bad;
    EXPECT_NE(st.message().find("is not host:port"), std::string::npos) << st.message();
  }
  // Only network switches have an aggregation service.
  Status st = parseTopology("node c0 cpu addr=1.2.3.4:5\n", &t);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("unknown field 'addr'"), std::string::npos) << st.message();
}
