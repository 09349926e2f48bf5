// Topology: generators' documented counts, file round trip, clear errors with line numbers, routes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>

#include "core/comm.hpp"
#include "plan/planner.hpp"
#include "topo/route.hpp"
#include "topo/topology.hpp"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

using namespace trib;

TEST(Generators, DgxH100Counts) {
  Topology t = makeDgxH100();
  ASSERT_TRUE(t.validate().ok()) << t.validate().message();
  EXPECT_EQ(t.countType(NodeType::Gpu), 8);
  EXPECT_EQ(t.countType(NodeType::Cpu), 2);
  EXPECT_EQ(t.countType(NodeType::Nic), 8);
  EXPECT_EQ(t.countType(NodeType::NvSwitch), 1);
  EXPECT_EQ(t.countType(NodeType::PcieSwitch), 8);  // a (GPU, NIC) rail each
  EXPECT_EQ(t.numNodes(), 27);
  EXPECT_EQ(t.numLinks(), 33);
  EXPECT_EQ(t.numDomains(), 1);
  EXPECT_EQ(t.rankNodes().size(), 8u);
  EXPECT_DOUBLE_EQ(t.bisectionGBps(), 4 * 450.0);
}

// Host-memory ranks sit on CPUs whatever else a machine has: a GPU's nearest CPU is its socket,
// and the CPUs that host links join (sockets of one host) share a domain; NVLink joins no memory.
TEST(Generators, HostRanksSitOnTheCpusNearestTheirGpus) {
  Topology t = makeDgxH100(2);
  ASSERT_EQ(t.hostRankNodes().size(), 4u);
  EXPECT_EQ(t.nearestCpu(t.find("n0.gpu0")), t.find("n0.cpu0"));
  EXPECT_EQ(t.nearestCpu(t.find("n0.gpu7")), t.find("n0.cpu1"));
  EXPECT_EQ(t.nearestCpu(t.find("n1.gpu2")), t.find("n1.cpu0"));
  EXPECT_EQ(t.nearestCpu(t.find("n1.cpu1")), t.find("n1.cpu1"));
  const int d0 = t.domainOf(t.find("n0.cpu0"));
  EXPECT_GE(d0, t.numDomains());  // after the NVLink domains
  EXPECT_EQ(t.domainOf(t.find("n0.cpu1")), d0);
  EXPECT_NE(t.domainOf(t.find("n1.cpu0")), d0);
  Topology rack = makeNvl72();  // a Grace per two GPUs; the rack's NVLink shares no host memory
  EXPECT_EQ(rack.hostRankNodes().size(), 36u);
  EXPECT_EQ(rack.nearestCpu(rack.find("r0.gpu5")), rack.find("r0.cpu2"));
  EXPECT_NE(rack.domainOf(rack.find("r0.cpu0")), rack.domainOf(rack.find("r0.cpu1")));
  Topology host;  // a CPU-only machine: the CPUs are the rank nodes for either memory
  ASSERT_TRUE(parseTopology("node cpu0 cpu\n", &host).ok());
  EXPECT_EQ(host.rankNodes(), host.hostRankNodes());
  EXPECT_EQ(host.nearestCpu(0), 0);
}

TEST(Generators, DgxH100MultiNodeFatTree) {
  Topology t = makeDgxH100(4);  // 32 NICs: one leaf, no spines
  ASSERT_TRUE(t.validate().ok()) << t.validate().message();
  EXPECT_EQ(t.countType(NodeType::Gpu), 32);
  EXPECT_EQ(t.countType(NodeType::Switch), 1);
  EXPECT_EQ(t.numDomains(), 4);
  EXPECT_EQ(t.numHosts(), 4);
  Topology t8 = makeDgxH100(8);  // 64 NICs: 2 leaves + 16 spines
  EXPECT_EQ(t8.countType(NodeType::Switch), 18);
  EXPECT_DOUBLE_EQ(t8.bisectionGBps(), 64 * 50 / 2.0);
}

// The HGX/DGX family: one node each, its NVLink rate and whether its NVSwitch reduces (A100's
// second-generation NVSwitch has no NVLS); hgx-* names the same systems.
TEST(Generators, HgxFamilyCounts) {
  const struct {
    const char* name;
    double nvlink, nic;
    bool nvls;
  } systems[] = {{"dgx-a100", 300, 25, false},
                 {"dgx-h100", 450, 50, true},
                 {"hgx-h200", 450, 50, true},
                 {"dgx-b200", 900, 50, true}};
  for (const auto& sys : systems) {
    Topology t;
    ASSERT_TRUE(generateTopology(sys.name, {}, &t).ok()) << sys.name;
    ASSERT_TRUE(t.validate().ok()) << sys.name << ": " << t.validate().message();
    EXPECT_EQ(t.countType(NodeType::Gpu), 8) << sys.name;
    EXPECT_EQ(t.countType(NodeType::Nic), 8) << sys.name;
    EXPECT_EQ(t.numNodes(), 27) << sys.name;
    EXPECT_DOUBLE_EQ(t.bisectionGBps(), 4 * sys.nvlink) << sys.name;
    EXPECT_EQ(t.node(t.find("nvsw")).reduce.can(), sys.nvls) << sys.name;
    Topology two;
    ASSERT_TRUE(generateTopology(std::string(sys.name) + ":2", {}, &two).ok()) << sys.name;
    EXPECT_EQ(two.numHosts(), 2) << sys.name;
    EXPECT_DOUBLE_EQ(two.bisectionGBps(), 16 * sys.nic / 2) << sys.name;  // one leaf: the NICs' links
  }
}

// Past `radix` leaves, a fat tree gets a third tier: pods of radix/2 leaves with their own spines,
// spine s of every pod on core s. Still non-blocking, one aggregation tree per plane, and a route
// between pods climbs to a core.
TEST(Generators, ThreeTierFatTreeBeyondTheRadix) {
  Topology t;
  ASSERT_TRUE(generateTopology("dgx-h100:512", {}, &t).ok());  // 4,096 NICs: 128 leaves of 32 > 64
  ASSERT_TRUE(t.validate().ok()) << t.validate().message();
  EXPECT_EQ(t.countType(NodeType::Gpu), 4096);
  EXPECT_EQ(t.countType(NodeType::Switch), 128 + 4 * 16 + 16);  // leaves, 4 pods x 16 spines, cores
  EXPECT_DOUBLE_EQ(t.bisectionGBps(), 4096 * 50 / 2.0);
  ASSERT_EQ(t.aggTrees().size(), 16u);
  std::vector<int> leaves;
  for (int l = 0; l < 128; ++l) leaves.push_back(t.find(strprintf("leaf%d", l)));
  int depth = 0;
  ASSERT_NE(findAggTree(t, leaves, &depth), nullptr);
  EXPECT_EQ(depth, 2);  // leaf -> pod spine -> core
  Router r(t);
  const auto& cross = r.route(t.find("n0.gpu0"), t.find("n511.gpu0"));  // pod 0 to pod 3
  EXPECT_EQ(cross.size(), 10u);  // gpu-pcie-nic-leaf-spine-core-spine-leaf-nic-pcie-gpu
  EXPECT_DOUBLE_EQ(r.bottleneckGBps(t.find("n0.gpu0"), t.find("n511.gpu0")), 50);
  // Forced either way.
  Topology two, three;
  ASSERT_TRUE(generateTopology("dgx-h100:512", {"tiers=2"}, &two).ok());
  EXPECT_EQ(two.countType(NodeType::Switch), 128 + 16);
  ASSERT_TRUE(generateTopology("dgx-h100:16", {"tiers=3", "radix=4"}, &three).ok());  // 4 leaves, pods of 2
  EXPECT_EQ(three.countType(NodeType::Switch), 4 + 2 * 16 + 16);
  EXPECT_TRUE(three.validate().ok()) << three.validate().message();
}

// The next clusters' size: 1,820 GB300 NVL72 racks (131,040 GPUs) on three tiers.
TEST(Generators, Nvl72ClusterOf1820Racks) {
  Topology t = makeNvl72Cluster(1820);
  ASSERT_TRUE(t.validate().ok()) << t.validate().message();
  EXPECT_EQ(t.countType(NodeType::Gpu), 131040);
  EXPECT_EQ(t.numDomains(), 1820);
  EXPECT_EQ(t.countType(NodeType::Switch), 1820 + 26 * 36 + 36);  // leaves, 26 pods of 72 x 36, cores
  EXPECT_DOUBLE_EQ(t.bisectionGBps(), 131040 * 100 / 2.0);
}

TEST(Generators, Nvl72RackCounts) {
  Topology t = makeNvl72();
  ASSERT_TRUE(t.validate().ok()) << t.validate().message();
  EXPECT_EQ(t.countType(NodeType::Gpu), 72);
  EXPECT_EQ(t.countType(NodeType::Cpu), 36);
  EXPECT_EQ(t.countType(NodeType::Nic), 72);
  EXPECT_EQ(t.countType(NodeType::NvSwitch), 1);
  EXPECT_EQ(t.countType(NodeType::Switch), 1);
  EXPECT_EQ(t.numLinks(), 4 * 72);
  EXPECT_EQ(t.numDomains(), 1);
  EXPECT_EQ(t.aggTrees().size(), 1u);
}

TEST(Generators, Nvl72ClusterOf64RacksCounts) {
  Topology t = makeNvl72Cluster(64);
  ASSERT_TRUE(t.validate().ok()) << t.validate().message();
  EXPECT_EQ(t.countType(NodeType::Gpu), 4608);
  EXPECT_EQ(t.countType(NodeType::Cpu), 2304);
  EXPECT_EQ(t.countType(NodeType::Nic), 4608);
  EXPECT_EQ(t.countType(NodeType::NvSwitch), 64);
  EXPECT_EQ(t.countType(NodeType::Switch), 64 + 36);  // a leaf per rack + 36 spines
  EXPECT_EQ(t.numNodes(), 11684);
  EXPECT_EQ(t.numLinks(), 4 * 4608 + 64 * 36);
  EXPECT_EQ(t.numDomains(), 64);
  EXPECT_EQ(t.aggTrees().size(), 36u);
  // Non-blocking: bisection = half the GPUs x 100 GB/s.
  EXPECT_DOUBLE_EQ(t.bisectionGBps(), 2304 * 100.0);
  double edge = 0, core = 0;
  t.networkCapacity(&edge, &core);
  EXPECT_DOUBLE_EQ(edge, core);
}

TEST(Generators, ParamsAndErrors) {
  Topology t;
  ASSERT_TRUE(generateTopology("nvl72-cluster:2", {"nic_gbps=50", "sharp=0"}, &t).ok());
  EXPECT_EQ(t.countType(NodeType::Gpu), 144);
  EXPECT_TRUE(t.aggTrees().empty());
  Status s = generateTopology("nvl72-cluster", {}, &t);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("rack count"), std::string::npos) << s.message();
  s = generateTopology("dgx-h100", {"bogus=1"}, &t);
  EXPECT_NE(s.message().find("unknown generator parameter 'bogus'"), std::string::npos) << s.message();
  s = generateTopology("dgx-h100:4", {"tiers=4"}, &t);
  EXPECT_NE(s.message().find("tiers '4' must be an integer in [2, 3]"), std::string::npos) << s.message();
  s = generateTopology("dgx-h100:0", {}, &t);
  EXPECT_NE(s.message().find("dgx-h100 node count '0'"), std::string::npos) << s.message();
  s = generateTopology("tpu-pod", {}, &t);
  EXPECT_NE(s.message().find("unknown system 'tpu-pod'"), std::string::npos) << s.message();
  // A count on a one-rack system, or fields beyond what a system takes, are refused, not ignored.
  s = generateTopology("nvl72:64", {}, &t);
  EXPECT_EQ(s.code(), tribInvalidArgument);
  EXPECT_NE(s.message().find("use nvl72-cluster:64"), std::string::npos) << s.message();
  s = generateTopology("dgx-h100:2:3", {}, &t);
  EXPECT_NE(s.message().find("too many ':' fields"), std::string::npos) << s.message();
  EXPECT_TRUE(generateTopology("uniform:8:100:2", {}, &t).ok());
}

TEST(TopoFile, RoundTripsEveryGenerator) {
  for (Topology t : {makeDgxH100(), makeDgxH100(8), makeHgx(*hgxPreset("dgx-a100"), 40), makeNvl72(),
                     makeNvl72Cluster(3), makeUniform(5, 10, 2, true)}) {
    std::string text = dumpTopology(t);
    Topology back;
    Status s = parseTopology(text, &back, t.name);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(dumpTopology(back), text);
    EXPECT_EQ(back.numNodes(), t.numNodes());
    EXPECT_EQ(back.numLinks(), t.numLinks());
    EXPECT_EQ(back.numDomains(), t.numDomains());
    EXPECT_EQ(back.aggTrees().size(), t.aggTrees().size());
    EXPECT_DOUBLE_EQ(back.bisectionGBps(), t.bisectionGBps());
  }
}

TEST(TopoFile, FileRoundTripAndMissingFile) {
  Topology t = makeNvl72();
  std::string path = ::testing::TempDir() + "/trib_topo_test.topo";
  ASSERT_TRUE(dumpTopologyFile(t, path).ok());
  Topology back;
  Status s = loadTopologyFile(path, &back);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(dumpTopology(back), dumpTopology(t));
  std::remove(path.c_str());
  s = loadTopologyFile("/nonexistent/x.topo", &back);
  EXPECT_EQ(s.code(), tribInvalidArgument);
  EXPECT_NE(s.message().find("cannot open topology file '/nonexistent/x.topo'"), std::string::npos);
}

TEST(TopoFile, ReadsCommentsAndAsymmetricLinks) {
  const char* text =
      "# two GPUs on a switch\n"
      "topology tiny\n"
      "node g0 gpu reduce_gbps=500   # fast reducer\n"
      "node g1 gpu\n"
      "node sw switch reduce_gbps=50 reduce_dtypes=float32,bf16 reduce_ops=sum,max reduce_max_ops=4\n"
      "link g0 sw net bw=25 bw_back=12.5 lat=1.5\n"
      "link g1 sw net bw=25 lat=1.5\n"
      "aggtree t0 sw\n";
  Topology t;
  Status s = parseTopology(text, &t);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(t.name, "tiny");
  EXPECT_DOUBLE_EQ(t.node(t.find("g0")).reduceGBps, 500);
  EXPECT_DOUBLE_EQ(t.link(0).bwBA, 12.5);
  const ReduceCapability& rc = t.node(t.find("sw")).reduce;
  EXPECT_TRUE(rc.supports(tribFloat32, tribSum));
  EXPECT_TRUE(rc.supports(tribBfloat16, tribMax));
  EXPECT_FALSE(rc.supports(tribInt8, tribSum));
  EXPECT_FALSE(rc.supports(tribFloat32, tribProd));
  EXPECT_EQ(rc.maxConcurrentOps, 4);
  EXPECT_EQ(t.aggTrees().at(0).root, t.find("sw"));
}

// Each bad file: (text, expected substring including the line).
struct BadCase {
  const char* what;
  const char* text;
  const char* expect;
};

TEST(TopoFile, BadFilesGiveClearErrorsWithTheLine) {
  const BadCase cases[] = {
      {"negative bandwidth", "node a gpu\nnode b gpu\nlink a b nvlink bw=-5 lat=1\n",
       "<t>:3: bw=-5 must be > 0"},
      {"zero bandwidth", "node a gpu\nnode b gpu\nlink a b nvlink bw=0\n", "must be > 0"},
      {"unknown node field", "node a gpu\nnode b gpu colour=red\nlink a b nvlink bw=5\n",
       "<t>:2: unknown field 'colour'"},
      {"unknown link field", "node a gpu\nnode b gpu\nlink a b nvlink bw=5 speed=9\n",
       "<t>:3: unknown field 'speed'"},
      {"unknown statement", "node a gpu\nrouter r1\n", "<t>:2: unknown statement 'router'"},
      {"link to undefined node", "node a gpu\nlink a b nvlink bw=5\n", "<t>:2: link names node 'b'"},
      {"missing links", "node a gpu\nnode b gpu\nnode c gpu\nlink a b nvlink bw=5\n",
       "line 3: node 'c' (gpu) has no links"},
      {"unreachable rank",
       "node a gpu\nnode b gpu\nnode c gpu\nnode d gpu\nlink a b nvlink bw=5\nlink c d nvlink bw=5\n",
       "cannot reach"},
      {"bad number", "node a gpu\nnode b gpu\nlink a b nvlink bw=fast\n", "<t>:3: bw='fast' is not a number"},
      {"duplicate node", "node a gpu\nnode a cpu\n", "<t>:2: node 'a' is defined twice"},
      {"unknown type", "node a tpu\n", "<t>:1: unknown node type 'tpu'"},
      {"reduce on a gpu field", "node a gpu reduce_ops=sum\n", "<t>:1: unknown field 'reduce_ops'"},
      {"cycle in aggregation tree",
       "node g gpu\nnode s1 switch reduce_gbps=1 reduce_dtypes=float32 reduce_ops=sum\n"
       "node s2 switch reduce_gbps=1 reduce_dtypes=float32 reduce_ops=sum\n"
       "link g s1 net bw=1\nlink s1 s2 net bw=1\naggtree t s1 s2\naggtree t s2 s1\n",
       "has a cycle"},
      {"two parents in aggregation tree",
       "node g gpu\nnode s1 switch reduce_gbps=1 reduce_dtypes=float32 reduce_ops=sum\n"
       "node s2 switch reduce_gbps=1 reduce_dtypes=float32 reduce_ops=sum\n"
       "node s3 switch reduce_gbps=1 reduce_dtypes=float32 reduce_ops=sum\n"
       "link g s1 net bw=1\nlink s1 s2 net bw=1\nlink s1 s3 net bw=1\naggtree t s1 s2\naggtree t s1 s3\n",
       "line 9: aggregation tree 't': node 's1' has two parents"},
      {"aggregation edge without a link",
       "node g gpu\nnode s1 switch reduce_gbps=1 reduce_dtypes=float32 reduce_ops=sum\n"
       "node s2 switch reduce_gbps=1 reduce_dtypes=float32 reduce_ops=sum\n"
       "link g s1 net bw=1\nlink g s2 net bw=1\naggtree t s1 s2\n",
       "line 6: aggregation tree 't': missing link between 's1' and 's2'"},
      {"tree over a switch that cannot reduce",
       "node g gpu\nnode s1 switch reduce_gbps=1 reduce_dtypes=float32 reduce_ops=sum\nnode s2 switch\n"
       "link g s1 net bw=1\nlink s1 s2 net bw=1\naggtree t s1 s2\n",
       "'s2' cannot reduce"},
  };
  for (const auto& c : cases) {
    Topology t;
    Status s = parseTopology(c.text, &t, "<t>");
    EXPECT_FALSE(s.ok()) << c.what;
    EXPECT_EQ(s.code(), tribInvalidArgument) << c.what;
    EXPECT_NE(s.message().find(c.expect), std::string::npos) << c.what << ": got '" << s.message() << "'";
  }
}

// A rail-optimized fabric: GPUs of the same index meet one leaf away; a pair on different rails
// goes PXN (NVLink to the source node's GPU on the destination's rail, then its NIC), not over a
// spine. Without rails (every NIC of a node on one leaf) no GPU relays.
TEST(Routes, RailsKeepSameIndexPairsOnALeafAndPxnTheOthers) {
  Topology t;
  ASSERT_TRUE(generateTopology("dgx-h100:2", {"rails=1"}, &t).ok());
  EXPECT_EQ(t.countType(NodeType::Switch), 8 + 16);  // a leaf per rail, 16 spines
  Router r(t);
  auto names = [](const Topology& g, const std::vector<DirLink>& path, int from) {
    std::string out = g.node(from).name;
    for (DirLink d : path) {
      const Link& l = g.link(dirLinkId(d));
      out += " " + g.node((d & 1) ? l.a : l.b).name;
    }
    return out;
  };
  const int a0 = t.find("n0.gpu0"), b0 = t.find("n1.gpu0"), b3 = t.find("n1.gpu3");
  EXPECT_EQ(names(t, r.route(a0, b0), a0), "n0.gpu0 n0.pcie0 n0.nic0 leaf0 n1.nic0 n1.pcie0 n1.gpu0");
  EXPECT_EQ(names(t, r.route(a0, b3), a0),
            "n0.gpu0 n0.nvsw n0.gpu3 n0.pcie3 n0.nic3 leaf3 n1.nic3 n1.pcie3 n1.gpu3");
  EXPECT_EQ(names(t, r.route(b3, a0), b3),
            "n1.gpu3 n1.nvsw n1.gpu0 n1.pcie0 n1.nic0 leaf0 n0.nic0 n0.pcie0 n0.gpu0");
  EXPECT_EQ(names(t, r.route(a0, t.find("n0.gpu3")), a0), "n0.gpu0 n0.nvsw n0.gpu3");  // NVLink inside
  Topology flat = makeDgxH100(2);  // every NIC on leaf0: the direct way is shorter
  Router rf(flat);
  EXPECT_EQ(names(flat, rf.route(flat.find("n0.gpu0"), flat.find("n1.gpu3")), flat.find("n0.gpu0")),
            "n0.gpu0 n0.pcie0 n0.nic0 leaf0 n1.nic3 n1.pcie3 n1.gpu3");
  // More nodes than a leaf takes: each rail spreads over its own leaves (32 NICs a leaf on H100).
  Topology big;
  ASSERT_TRUE(generateTopology("dgx-h100:40", {"rails=1"}, &big).ok());
  EXPECT_EQ(big.countType(NodeType::Switch), 8 * 2 + 16);
  EXPECT_GT(relayHop(t, r.route(a0, b3)), 0u);
  EXPECT_EQ(relayHop(t, r.route(a0, b0)), 0u);
  // A node whose NICs are split over two leaves, not rail by rail (dgx-a100:4: 20 NICs a leaf, so
  // node 2's first four on leaf0, the rest on leaf1): no GPU relays, as NCCL's PXN (which picks the
  // relay by NIC index) would not to save a hop there.
  Topology split;
  ASSERT_TRUE(generateTopology("dgx-a100:4", {}, &split).ok());
  Router rs(split);
  EXPECT_FALSE(rs.relays());
  EXPECT_EQ(relayHop(split, rs.route(split.find("n2.gpu0"), split.find("n3.gpu0"))), 0u);
  EXPECT_TRUE(r.relays());
  // A rail over two leaves (40 nodes, 32 NICs a leaf): a relay would save the spine for some pairs
  // of two nodes and not for others, which the model does not price; no GPU relays.
  Router rb(big);
  EXPECT_FALSE(rb.relays());
  Topology bad;
  EXPECT_EQ(generateTopology("dgx-h100:2", {"rails=-1"}, &bad).code(), tribInvalidArgument);
}

// Rail-only (rails=2): each rail one leaf and no spine above; GPUs of other indices meet only
// through a PXN relay. More nodes than a leaf holds, or rails= on a system without HGX nodes, is a
// clear error.
TEST(Routes, RailOnlyFabricJoinsRailsOnlyThroughRelays) {
  Topology t;
  ASSERT_TRUE(generateTopology("dgx-h100:4", {"rails=2"}, &t).ok());
  EXPECT_EQ(t.name, "dgx-h100-x4-railonly");
  EXPECT_EQ(t.countType(NodeType::Switch), 8);  // a leaf per rail, nothing above
  EXPECT_TRUE(t.aggTrees().empty());
  Router r(t);
  EXPECT_TRUE(r.relays());
  const std::vector<int>& gpus = t.rankNodes();
  for (int a : gpus)
    for (int b : gpus) EXPECT_TRUE(r.reachable(a, b)) << t.node(a).name << " -> " << t.node(b).name;
  const int a0 = t.find("n0.gpu0"), b3 = t.find("n3.gpu3");
  const std::vector<DirLink>& path = r.route(a0, b3);
  const size_t h = relayHop(t, path);
  ASSERT_GT(h, 0u);
  const Link& out = t.link(dirLinkId(path[h]));
  EXPECT_EQ(t.node((path[h] & 1) ? out.b : out.a).name, "n0.gpu3");  // n3.gpu3's rail
  Topology bad;
  const Status tooMany = generateTopology("dgx-h100:40", {"rails=2"}, &bad);
  EXPECT_EQ(tooMany.code(), tribInvalidArgument);
  EXPECT_NE(tooMany.message().find("leaf_down = 32"), std::string::npos) << tooMany.message();
  const Status notHgx = generateTopology("nvl72-cluster:2", {"rails=1"}, &bad);
  EXPECT_EQ(notHgx.code(), tribInvalidArgument);
  EXPECT_NE(notHgx.message().find("dgx-*"), std::string::npos) << notHgx.message();
  EXPECT_EQ(generateTopology("dgx-h100:2", {"rails=3"}, &bad).code(), tribInvalidArgument);
}

// PXN off (pxn=0, NCCL_PXN_DISABLE=1's routes): on a rail-optimized fabric each GPU sends by its
// own NIC, a pair on different rails over a spine; a topology file keeps the setting; the
// communicator's planner, whose executor has no relay, never relays. Rail-only without relays, or
// pxn= where there are no rails, is a clear error.
TEST(Routes, PxnOffSendsEveryGpuByItsOwnNic) {
  Topology t;
  ASSERT_TRUE(generateTopology("dgx-h100:2", {"rails=1", "pxn=0"}, &t).ok());
  EXPECT_EQ(t.name, "dgx-h100-x2-rails-nopxn");
  EXPECT_FALSE(t.pxn);
  Router r(t);
  EXPECT_FALSE(r.relays());
  EXPECT_TRUE(r.railOptimized());
  const int a0 = t.find("n0.gpu0"), b3 = t.find("n1.gpu3");
  const std::vector<DirLink>& path = r.route(a0, b3);
  EXPECT_EQ(relayHop(t, path), 0u);
  std::string hops;  // the node each hop enters: the link's end it does not leave
  for (DirLink d : path)
    hops += " " + t.node(t.link(dirLinkId(d)).a ^ t.link(dirLinkId(d)).b ^ dirLinkFrom(t, d)).name;
  EXPECT_NE(hops.find(" n0.nic0 leaf0 spine"), std::string::npos) << hops;  // its own NIC, then a spine
  EXPECT_NE(hops.find("leaf3 n1.nic3"), std::string::npos) << hops;

  Topology back;  // a file written from it parses back with PXN off
  const std::string text = dumpTopology(t);
  EXPECT_NE(text.find("\npxn off\n"), std::string::npos);
  ASSERT_TRUE(parseTopology(text, &back, "<dump>").ok());
  EXPECT_FALSE(back.pxn);
  EXPECT_FALSE(Router(back).relays());
  Topology on;
  ASSERT_TRUE(generateTopology("dgx-h100:2", {"rails=1"}, &on).ok());
  EXPECT_EQ(dumpTopology(on).find("pxn"), std::string::npos);  // the default is not written
  Topology bad;
  Status s = parseTopology("topology x\npxn maybe\n", &bad, "<t>");
  EXPECT_NE(s.message().find("<t>:2: expected 'pxn on' or 'pxn off'"), std::string::npos) << s.message();

  // A communicator's planner (its executor has no relay) routes without PXN, whatever the file says.
  char file[] = "/tmp/trib-pxn-XXXXXX";
  const int fd = mkstemp(file);
  ASSERT_GE(fd, 0);
  const std::string railText = dumpTopology(on);
  ASSERT_EQ(write(fd, railText.data(), railText.size()), static_cast<ssize_t>(railText.size()));
  close(fd);
  const char* was = getenv("TRIB_TOPO_FILE");
  const std::string saved = was ? was : "";
  setenv("TRIB_TOPO_FILE", file, 1);
  std::shared_ptr<Planner> planner;
  s = makePlanner(RankPlacement::singleHost(16), {}, CommConfig{}, &planner);
  if (was)
    setenv("TRIB_TOPO_FILE", saved.c_str(), 1);
  else
    unsetenv("TRIB_TOPO_FILE");
  std::remove(file);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_FALSE(planner->topology().pxn);
  EXPECT_TRUE(Router(on).relays());
  EXPECT_FALSE(Router(planner->topology()).relays());
  s = generateTopology("dgx-h100:4", {"rails=2", "pxn=0"}, &bad);
  EXPECT_EQ(s.code(), tribInvalidArgument);
  EXPECT_NE(s.message().find("needs pxn=1"), std::string::npos) << s.message();
  s = generateTopology("nvl72-cluster:2", {"pxn=0"}, &bad);
  EXPECT_EQ(s.code(), tribInvalidArgument);
  EXPECT_NE(s.message().find("pxn= applies to the dgx-*"), std::string::npos) << s.message();
  EXPECT_EQ(generateTopology("dgx-h100:2", {"rails=1", "pxn=2"}, &bad).code(), tribInvalidArgument);
}

// GPUDirect RDMA: a GPU meets the network by a NIC on its own side of the CPU. On DGX A100 rails
// without PXN the network's links (25 GB/s) weigh more than PCIe's (32), and by weight alone the
// route to a GPU of another rail came in by the NIC of the sender's rail and crossed the
// receiver's CPU (n1.nic0 -> n1.pcie0 -> n1.cpu0 -> n1.pcie1 -> n1.gpu1): that NIC carried 1.2x
// its bytes and direct replayed 1.3-6.8x the model. Where the NIC hangs off the CPU itself, the
// route through the CPU is the only one, and stays.
TEST(Routes, AGpuMeetsTheNetworkByANicOnItsOwnSideOfTheCpu) {
  auto names = [](const Topology& t, const std::vector<DirLink>& path) {
    std::string s;
    for (DirLink d : path) s += t.node(dirLinkFrom(t, d)).name + " ";
    return s;
  };
  Topology t;
  ASSERT_TRUE(generateTopology("dgx-a100:2", {"rails=1", "pxn=0"}, &t).ok());
  Router r(t);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j) {
      const std::string from = strprintf("n0.gpu%d", i), to = strprintf("n1.gpu%d", j);
      const std::string hops = names(t, r.route(t.find(from), t.find(to)));
      EXPECT_EQ(hops.find("cpu"), std::string::npos) << from << " -> " << to << ": " << hops;
      EXPECT_NE(hops.find(strprintf("n1.nic%d n1.pcie%d ", j, j)), std::string::npos) << hops;
      EXPECT_EQ(hops.find("spine") != std::string::npos, i != j) << hops;
    }
  const std::vector<DirLink>& cross = r.route(t.find("n0.gpu0"), t.find("n1.gpu1"));
  std::vector<DirLink> path;
  std::vector<std::vector<DirLink>> alternatives;
  r.paths(t.find("n0.gpu0"), t.find("n1.gpu1"), &path, &alternatives);
  EXPECT_EQ(path, cross);
  ASSERT_EQ(alternatives.size(), path.size());
  size_t widest = 0;  // the spine bundle, from the search without the CPU
  for (size_t h = 0; h < path.size(); ++h) {
    EXPECT_NE(std::find(alternatives[h].begin(), alternatives[h].end(), path[h]), alternatives[h].end());
    widest = std::max(widest, alternatives[h].size());
  }
  EXPECT_GT(widest, 1u);

  Topology cpuNics;
  const char* text =
      "topology cpu-nics\n"
      "node a.cpu cpu\nnode a.gpu gpu\nnode a.nic nic\n"
      "node b.cpu cpu\nnode b.gpu gpu\nnode b.nic nic\nnode sw switch\n"
      "link a.gpu a.cpu pcie bw=32 lat=0.3\nlink a.nic a.cpu pcie bw=32 lat=0.3\nlink a.nic sw net bw=25 "
      "lat=0.6\n"
      "link b.gpu b.cpu pcie bw=32 lat=0.3\nlink b.nic b.cpu pcie bw=32 lat=0.3\nlink b.nic sw net bw=25 "
      "lat=0.6\n";
  ASSERT_TRUE(parseTopology(text, &cpuNics, "<t>").ok());
  Router c(cpuNics);
  EXPECT_EQ(names(cpuNics, c.route(cpuNics.find("a.gpu"), cpuNics.find("b.gpu"))),
            "a.gpu a.cpu a.nic sw b.nic b.cpu ");
}

TEST(Routes, NvlinkInsideANodeNetworkAcrossAndSpreadOverSpines) {
  Topology dgx = makeDgxH100();
  Router r(dgx);
  const auto& p = r.route(dgx.find("gpu0"), dgx.find("gpu1"));  // same PCIe switch, but NVLink is faster
  ASSERT_EQ(p.size(), 2u);
  for (DirLink d : p) EXPECT_EQ(dgx.link(dirLinkId(d)).type, LinkType::NvLink);

  Topology c = makeNvl72Cluster(4);
  Router rc(c);
  const auto& q = rc.route(c.find("r0.gpu0"), c.find("r2.gpu5"));
  ASSERT_EQ(q.size(), 6u);  // gpu-nic-leaf-spine-leaf-nic-gpu
  EXPECT_EQ(c.link(dirLinkId(q[0])).type, LinkType::Pcie);
  EXPECT_EQ(c.link(dirLinkId(q[2])).type, LinkType::Net);
  EXPECT_DOUBLE_EQ(rc.bottleneckGBps(c.find("r0.gpu0"), c.find("r2.gpu5")), 100);
  std::set<int> spines;
  for (int g = 0; g < 72; ++g) {
    const auto& path = rc.route(c.find(strprintf("r0.gpu%d", g)), c.find(strprintf("r1.gpu%d", g)));
    const Link& l = c.link(dirLinkId(path[2]));
    spines.insert((path[2] & 1) ? l.a : l.b);
  }
  EXPECT_GT(spines.size(), 20u);  // hashed over 36 spines, not all on one
  EXPECT_TRUE(rc.route(c.find("r0.gpu0"), c.find("r0.gpu0")).empty());
}

// paths(): every hop's equal-cost links, the hashed path's among them. Two tiers: the leaf's 36
// uplinks and the 36 spines' downlinks to the other leaf; three tiers: a plane's links at every
// hop from the leaf up and back down; in one rack, no choice.
TEST(Routes, EqualCostHopsAreTheSpineBundles) {
  Topology c = makeNvl72Cluster(4);
  Router r(c);
  std::vector<DirLink> path;
  std::vector<std::vector<DirLink>> alt;
  r.paths(c.find("r0.gpu0"), c.find("r2.gpu5"), &path, &alt);
  EXPECT_EQ(path, r.route(c.find("r0.gpu0"), c.find("r2.gpu5")));
  ASSERT_EQ(alt.size(), path.size());
  const std::vector<size_t> twoTier = {1, 1, 36, 36, 1, 1};
  for (size_t i = 0; i < path.size(); ++i) {
    EXPECT_EQ(alt[i].size(), twoTier[i]) << "hop " << i;
    EXPECT_TRUE(std::find(alt[i].begin(), alt[i].end(), path[i]) != alt[i].end()) << "hop " << i;
    std::set<int> from, to;  // one leaf up to 36 spines, then 36 spines down to one leaf
    for (DirLink d : alt[i]) {
      const Link& l = c.link(dirLinkId(d));
      from.insert((d & 1) ? l.b : l.a);
      to.insert((d & 1) ? l.a : l.b);
      EXPECT_DOUBLE_EQ(dirLinkBw(c, d), dirLinkBw(c, path[i]));
    }
    EXPECT_EQ(std::min(from.size(), to.size()), 1u) << "hop " << i;
  }
  r.paths(c.find("r0.gpu0"), c.find("r0.gpu5"), &path, &alt);  // NVLink in the rack
  ASSERT_EQ(alt.size(), path.size());
  for (const auto& a : alt) EXPECT_EQ(a.size(), 1u);
  r.paths(c.find("r0.gpu0"), c.find("r0.gpu0"), &path, &alt);
  EXPECT_TRUE(path.empty() && alt.empty());

  Topology three;
  ASSERT_TRUE(generateTopology("nvl72-cluster:4", {"tiers=3", "radix=4"}, &three).ok());  // pods of 2 leaves
  Router r3(three);
  r3.paths(three.find("r0.gpu0"), three.find("r3.gpu1"), &path, &alt);  // pod 0 to pod 1
  ASSERT_EQ(path.size(), 8u);  // gpu-nic-leaf-spine-core-spine-leaf-nic-gpu
  const std::vector<size_t> threeTier = {1, 1, 36, 36, 36, 36, 1, 1};
  for (size_t i = 0; i < path.size(); ++i) EXPECT_EQ(alt[i].size(), threeTier[i]) << "hop " << i;
}

TEST(Detect, LocalMachineIsAValidTopology) {
  std::string log;
  Topology t = detectLocal(&log);
  EXPECT_TRUE(t.validate().ok()) << t.validate().message();
  EXPECT_GE(t.countType(NodeType::Cpu), 1) << log;
  EXPECT_FALSE(t.rankNodes().empty());
  // The CPUs' maker, as /proc/cpuinfo names it (the cost model's LL ceiling across hosts uses it).
  std::ifstream cpuinfo("/proc/cpuinfo");
  const std::string info((std::istreambuf_iterator<char>(cpuinfo)), std::istreambuf_iterator<char>());
#if defined(__aarch64__)
  const CpuVendor expect = CpuVendor::Arm;
#else
  const CpuVendor expect = info.find("GenuineIntel") != std::string::npos   ? CpuVendor::Intel
                           : info.find("AuthenticAMD") != std::string::npos ? CpuVendor::Amd
                                                                            : CpuVendor::Unknown;
#endif
  for (int i = 0; i < t.numNodes(); ++i)
    if (t.node(i).type == NodeType::Cpu) {
      EXPECT_EQ(t.node(i).vendor, expect) << t.node(i).name << ": " << log;
    }
  Topology back;
  ASSERT_TRUE(parseTopology(dumpTopology(t), &back).ok());
  for (int i = 0; i < t.numNodes(); ++i) EXPECT_EQ(back.node(i).vendor, t.node(i).vendor);
}

// Detection frees what it allocates, hwloc's share included: LeakSanitizer used to count
// hwloc's PCI plugin allocations, orphaned when hwloc unloads the plugin, on every detection.
// Only an AddressSanitizer build can tell.
TEST(Detect, RepeatedDetectionLeaksNothing) {
#if !defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "needs an AddressSanitizer build (-DTRIB_SANITIZE=address,undefined)";
#else
  for (int i = 0; i < 3; ++i) {
    Topology t;
    ASSERT_TRUE(detectLocalWith(DetectSource::Auto, &t).ok());
  }
  EXPECT_EQ(__lsan_do_recoverable_leak_check(), 0) << "see LeakSanitizer's report above";
#endif
}

TEST(Detect, HwlocFindsThisMachineAndAgreesWithSys) {
#ifndef TRIB_HAVE_HWLOC
  Topology none;
  Status no = detectLocalWith(DetectSource::Hwloc, &none);
  EXPECT_EQ(no.code(), tribNotSupported);
  EXPECT_NE(no.message().find("libhwloc-dev"), std::string::npos) << no.message();
  GTEST_SKIP() << "built without hwloc (needs libhwloc-dev; cmake/TribOptional.cmake links it)";
#else
  Topology hw, sys;
  DetectReport hwRep, sysRep;
  Status s = detectLocalWith(DetectSource::Hwloc, &hw, &hwRep);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_TRUE(detectLocalWith(DetectSource::Sys, &sys, &sysRep).ok());
  EXPECT_EQ(hwRep.source, "hwloc");
  EXPECT_EQ(sysRep.source, "sys");
  EXPECT_GE(hw.countType(NodeType::Cpu), 1) << hwRep.log;
  EXPECT_GE(hwRep.cores(), 1) << hwRep.log;
  for (int i = 0, numa = 0; i < hw.numNodes(); ++i)  // the graph carries the cores, node by node
    if (hw.node(i).type == NodeType::Cpu) {
      EXPECT_EQ(hw.node(i).cores, hwRep.coresPerNuma[numa++]);
    }
  // Same machine, two readers: same NUMA nodes (by name), same physical cores per node, same GPUs/NICs.
  EXPECT_EQ(hw.countType(NodeType::Cpu), sys.countType(NodeType::Cpu)) << hwRep.log << "\n" << sysRep.log;
  for (int i = 0; i < sys.numNodes(); ++i)
    if (sys.node(i).type == NodeType::Cpu) {
      EXPECT_GE(hw.find(sys.node(i).name), 0) << sys.node(i).name;
    }
  EXPECT_EQ(hwRep.coresPerNuma, sysRep.coresPerNuma) << hwRep.log << "\n" << sysRep.log;
  EXPECT_EQ(hwRep.gpus, sysRep.gpus);
  EXPECT_EQ(hwRep.nics, sysRep.nics);
  EXPECT_LE(hwRep.netDevices, hwRep.pciDevices);
  // The detected graph round-trips through the topology file format.
  ASSERT_TRUE(hw.validate().ok()) << hw.validate().message();
  Topology back;
  ASSERT_TRUE(parseTopology(dumpTopology(hw), &back).ok());
  EXPECT_EQ(dumpTopology(back), dumpTopology(hw));
  EXPECT_EQ(back.rankNodes().size(), hw.rankNodes().size());
#endif
}

TEST(TopoFile, CpuCoresRoundTripAndBelongToCpus) {
  Topology t;
  ASSERT_TRUE(
      parseTopology("node cpu0 cpu cores=16\nnode cpu1 cpu cores=16\nlink cpu0 cpu1 c2c bw=40\n", &t).ok());
  EXPECT_EQ(t.node(t.find("cpu1")).cores, 16);
  Topology back;
  ASSERT_TRUE(parseTopology(dumpTopology(t), &back).ok());
  EXPECT_EQ(back.node(back.find("cpu0")).cores, 16);
  Status s = parseTopology("node g0 gpu cores=4\n", &back, "x.topo");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("x.topo:1"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("'cores'"), std::string::npos) << s.message();
}

// A GPU's generation and a CPU's maker: declared, dumped, kept through a merge, checked.
TEST(TopoFile, GpuArchAndCpuVendorRoundTripAndBelongToTheirNodes) {
  Topology t;
  ASSERT_TRUE(
      parseTopology("node g0 gpu arch=hopper\nnode c0 cpu vendor=amd\nlink g0 c0 pcie bw=32\n", &t).ok());
  EXPECT_EQ(t.node(t.find("g0")).arch, GpuArch::Hopper);
  EXPECT_EQ(t.node(t.find("c0")).vendor, CpuVendor::Amd);
  Topology back;
  ASSERT_TRUE(parseTopology(dumpTopology(t), &back).ok());
  EXPECT_EQ(back.node(back.find("g0")).arch, GpuArch::Hopper);
  EXPECT_EQ(back.node(back.find("c0")).vendor, CpuVendor::Amd);
  Topology merged;
  ASSERT_TRUE(mergeHostTopologies({dumpTopology(t), dumpTopology(t)}, 50, 1, &merged).ok());
  EXPECT_EQ(merged.node(merged.find("h1.g0")).arch, GpuArch::Hopper);
  EXPECT_EQ(merged.node(merged.find("h1.c0")).vendor, CpuVendor::Amd);
  const BadCase bad[] = {
      {"unknown arch", "node g0 gpu arch=kepler\n", "x.topo:1: unknown GPU arch 'kepler'"},
      {"arch spelled unknown", "node g0 gpu arch=unknown\n", "x.topo:1: unknown GPU arch 'unknown'"},
      {"unknown vendor", "node c0 cpu vendor=via\n", "x.topo:1: unknown CPU vendor 'via'"},
      {"arch on a cpu", "node c0 cpu arch=hopper\n", "x.topo:1: unknown field 'arch' for a cpu node"},
      {"vendor on a gpu", "node g0 gpu vendor=amd\n", "x.topo:1: unknown field 'vendor' for a gpu node"},
  };
  for (const auto& c : bad) {
    Status s = parseTopology(c.text, &back, "x.topo");
    EXPECT_EQ(s.code(), tribInvalidArgument) << c.what;
    EXPECT_NE(s.message().find(c.expect), std::string::npos) << c.what << ": got '" << s.message() << "'";
  }
  // The generators say what their systems are.
  EXPECT_EQ(makeDgxH100().node(makeDgxH100().rankNodes()[0]).arch, GpuArch::Hopper);
  const Topology a100 = makeHgx(*hgxPreset("dgx-a100"), 2);
  EXPECT_EQ(a100.node(a100.rankNodes()[0]).arch, GpuArch::Ampere);
  EXPECT_EQ(a100.node(a100.nearestCpu(a100.rankNodes()[0])).vendor, CpuVendor::Amd);
  const Topology nvl = makeNvl72();
  EXPECT_EQ(nvl.node(nvl.rankNodes()[71]).arch, GpuArch::Blackwell);
  EXPECT_EQ(nvl.node(nvl.nearestCpu(nvl.rankNodes()[71])).vendor, CpuVendor::Arm);
}

TEST(Merge, HostViewsBecomeOneGraph) {
  std::vector<std::string> views{dumpTopology(makeDgxH100()), dumpTopology(makeDgxH100())};
  Topology t;
  Status s = mergeHostTopologies(views, 50, 1, &t);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(t.countType(NodeType::Gpu), 16);
  EXPECT_EQ(t.numDomains(), 2);
  EXPECT_EQ(t.numHosts(), 2);
  EXPECT_GE(t.find("h1.gpu7"), 0);
  Router r(t);
  EXPECT_DOUBLE_EQ(r.bottleneckGBps(t.find("h0.gpu0"), t.find("h1.gpu0")), 50);
  // CPU-only hosts join through their CPU.
  std::vector<std::string> cpus{"node cpu0 cpu\n", "node cpu0 cpu\n", "node cpu0 cpu\n"};
  ASSERT_TRUE(mergeHostTopologies(cpus, 10, 5, &t).ok());
  EXPECT_EQ(t.rankNodes().size(), 3u);
  EXPECT_EQ(t.numHosts(), 3);
  s = mergeHostTopologies({"node a gpu\nbogus\n", "node cpu0 cpu\n"}, 10, 5, &t);
  EXPECT_NE(s.message().find("host 0:2: unknown statement 'bogus'"), std::string::npos) << s.message();
}
