// The conformance suite over real processes: shared memory and UCX (TCP, and UCX's shared
// memory). Each test forks its ranks once; they join through tribGetUniqueId's store, split one
// communicator per algorithm (exercising split across processes), and run every case.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include <unistd.h>

#include "conformance.hpp"
#include "core/comm.hpp"
#include "shm_util.hpp"
#include "support/launcher.hpp"
#include "transports/shm/shm_transport.hpp"
#ifdef TRIB_HAVE_VERBS
#include "transports/verbs/verbs_transport.hpp"
#endif

namespace trib::conformance {
namespace {

struct TransportSetup {
  const char* transport;  // TRIB_TRANSPORT
  const char* ucxTls;     // UCX_TLS, for ucx
  int nranks;
  std::string name() const {
    std::string tls = ucxTls ? std::string("_") + ucxTls : "";
    std::replace(tls.begin(), tls.end(), ',', '_');
    return std::string(transport) + tls + "_n" + std::to_string(nranks);
  }
  // UCX over UCX's verbs transports: needs an RDMA device, as the verbs transport does.
  bool needsRdma() const {
    return std::string(transport) == "verbs" || (ucxTls && std::string(ucxTls) == "rc,self");
  }
};

std::vector<Case> casesFor(const TransportSetup& s) {
  const int n = s.nranks;
  std::vector<Case> all;
  for (auto cases : {structuralCases({n}, {0, 1, 7, 4093, 262147}), arithmeticCases({n}, {7, 4093})}) {
    // Hierarchical needs ranks in several domains (hosts); on one host the planner cannot run it
    // (test_conformance_loopback covers it with domains set by hand).
    // Peer-memory schedules need every rank's window: over shm and verbs (below), not over UCX.
    for (const Case& c : cases)
      if (c.algo != "hierarchical" && c.algo != "oneshot" && c.algo != "twoshot") all.push_back(c);
  }
  // With every rank on shm, the peer windows: one-shot (every dtype and op, in and out of place, up
  // to a cell of the default window: 4093 doubles = 32 KiB) and two-shot (also 300,007 elements:
  // several 1 MiB chunks), two-shot also with tribMemAlloc buffers. Over verbs, the same over
  // remote windows (RDMA READ/WRITE; tribMemAlloc buffers are not exposed there) in a few dtypes
  // and ops.
  const bool shm = std::string(s.transport) == "shm";
  if (shm || std::string(s.transport) == "verbs") {
    for (Case c : arithmeticCases({n}, {0, 1, 7, 4093, 300007})) {
      if (c.coll != Coll::AllReduce || c.algo != "ring") continue;
      for (const char* algo : {"oneshot", "twoshot"}) {
        if (c.count > 4093 && std::string(algo) == "oneshot") continue;
        // Over verbs (soft-RoCE in an emulated guest: CI time) three dtype/op pairs, several cells
        // only in float32 sum; every dtype and op runs over shm, and the same executor path under
        // test_remote_windows.
        const bool f32sum = c.dtype == tribFloat32 && c.op == tribSum;
        if (!shm && !f32sum && !(c.dtype == tribInt32 && c.op == tribMax) &&
            !(c.dtype == tribFloat64 && c.op == tribAvg))
          continue;
        if (!shm && c.count > 4093 && !f32sum) continue;
        c.algo = algo;
        for (bool inPlace : {false, true}) {
          c.inPlace = inPlace;
          all.push_back(c);
          if (shm && std::string(algo) == "twoshot") {
            Case shared = c;
            shared.sharedBuffers = true;
            all.push_back(shared);
          }
        }
      }
    }
  }
  return all;
}

// Runs one case on this rank: "" when the call succeeded with the expected result, else why.
std::string runAndCheck(const Case& c, tribComm_t comm, int rank, tribResult_t* r) {
  RankBuffers b;
  prepare(c, rank, &b);
  *r = runCase(c, comm, &b);
  return *r == tribSuccess ? check(c, rank, b) : std::string("call failed: ") + tribGetLastError(comm);
}

// One rank: join, then for each algorithm a split communicator that forces it, then every case.
int rankMain(const TransportSetup& s, int rank, const tribUniqueId& id, std::string& report) {
  tribConfig_t cfg = TRIB_CONFIG_INITIALIZER;
  cfg.timeoutMs = 60000;
  cfg.transport = s.transport;
  tribComm_t world = nullptr;
  if (tribCommInitRankConfig(&world, s.nranks, id, rank, &cfg) != tribSuccess) {
    report = std::string("init: ") + tribGetLastError(nullptr);
    return 1;
  }
  std::map<std::string, std::vector<Case>> byAlgo;
  for (const Case& c : casesFor(s)) byAlgo[c.algo].push_back(c);
  int failures = 0;
  for (auto& [algo, cases] : byAlgo) {
    tribConfig_t sub = cfg;
    sub.algo = algo.c_str();
    tribComm_t comm = nullptr;
    if (tribCommSplit(world, 0, rank, &comm, &sub) != tribSuccess) {
      report += "split for " + algo + ": " + tribGetLastError(nullptr) + "\n";
      return 1;
    }
    const uint64_t exposedBefore = comm->impl()->windows ? comm->impl()->windows->exposedReads() : 0;
    bool sharedTwoShot = false;
    for (const Case& c : cases) {
      sharedTwoShot |= c.sharedBuffers && c.count > 0;
      tribResult_t r;
      const std::string err = runAndCheck(c, comm, rank, &r);
      if (!err.empty() && ++failures <= 5) report += c.name() + ": " + err + "\n";
      if (r != tribSuccess) break;  // the communicator is unusable after a failed call
    }
    // A forced algorithm must really have run (not a fallback) in every collective that has it:
    // the plan cache says what did. (Run at least once anywhere was too weak: barrier's direct
    // hid that direct all-reduce quietly ran ring.)
    Algo forced;
    bool ran = !parseAlgo(algo, &forced);
    for (const auto& [key, plan] : comm->impl()->planCache) {
      const auto coll = static_cast<Coll>(key.coll);
      ran |= plan.algo->algo == forced;
      if (plan.algo->algo != forced && findAlgorithm(coll, forced) && ++failures <= 5)
        report += "split for " + algo + ": " + collName(coll) + " ran " + algoName(plan.algo->algo) + "\n";
    }
    if (!ran) report += "split for " + algo + ": no call ran " + algo + "\n", ++failures;
    // Two-shot of tribMemAlloc buffers read the peers' buffers directly (expose), where the
    // processes may take each other's fds, rather than quietly staging copies.
    if (sharedTwoShot && testing::fdTakingAllowed() &&
        (!comm->impl()->windows || comm->impl()->windows->exposedReads() == exposedBefore))
      report += "split for " + algo + ": no read of a peer's tribMemAlloc buffer was mapped\n", ++failures;
    tribCommDestroy(comm);
  }
  tribCommDestroy(world);
  if (failures > 5) report += std::to_string(failures) + " failing cases in all\n";
  return failures ? 1 : 0;
}

// Runs n rank processes; each gets one unique id, made by the parent once they all exist.
std::vector<testing::ProcessResult> runRanks(
    int n, std::chrono::milliseconds limit,
    const std::function<int(int rank, const tribUniqueId& id, std::string& report)>& body) {
  testing::ParentChannel channel(n);
  return testing::runProcesses(
      n,
      [&](int rank, std::string& report) {
        tribUniqueId id;
        if (!channel.receive(rank, &id, sizeof id, 30000)) {
          report = "no unique id from the parent";
          return 1;
        }
        return body(rank, id, report);
      },
      limit,
      [&](const std::vector<int>&) {
        tribUniqueId id;
        ASSERT_EQ(tribGetUniqueId(&id), tribSuccess) << tribGetLastError(nullptr);
        for (int r = 0; r < n; ++r) channel.send(r, &id, sizeof id);
      });
}

class MultiProcess : public ::testing::TestWithParam<TransportSetup> {};

TEST_P(MultiProcess, EveryCollectiveAlgorithmDtypeOp) {
  const TransportSetup s = GetParam();
#ifndef TRIB_HAVE_UCX
  if (std::string(s.transport) == "ucx") GTEST_SKIP() << "needs the UCX transport (build with libucx-dev)";
#endif
  if (s.needsRdma()) {
#ifdef TRIB_HAVE_VERBS
    if (!verbsPortAvailable())
#endif
      GTEST_SKIP() << "needs an RDMA device (no active RDMA port here; tests/vm/ has one)";
  }
  if (s.ucxTls) setenv("UCX_TLS", s.ucxTls, 1);
  auto results =
      runRanks(s.nranks, std::chrono::minutes(8), [&](int rank, const tribUniqueId& id, std::string& report) {
        // Over verbs in the RDMA test guest (tests/vm/), ranks alternate between its two devices.
        if (const char* hca = std::getenv(rank % 2 ? "TRIB_VM_HCA1" : "TRIB_VM_HCA0")) {
          setenv("TRIB_IB_HCA", hca, 1);
          if (s.needsRdma() && std::string(s.transport) == "ucx") {
            // No UCX_UD_VERBS_ETH_DGID_CHECK here: on rxe the transport turns UCX's UD
            // destination-GID check off itself (transports/ucx/ucx_rxe.hpp, docs/VERBS.md), and
            // this case shows that it does (its CTest entry runs without the variable).
            setenv("UCX_NET_DEVICES", (std::string(hca) + ":1").c_str(), 1);
          }
        }
        return rankMain(s, rank, id, report);
      });
  if (s.ucxTls) unsetenv("UCX_TLS");
  EXPECT_EQ(testing::describeFailures(results), "");
}

// Direct across domains, over real processes: a topology file (TRIB_TOPO_FILE, read by every
// process) puts 6 ranks in 3 hosts of 2, so the planner gives direct plans ranksPerDomain 2 and
// every process builds the rack order (src/algo/direct.cpp PeerOrder), which differs from the flat
// rank + k there. Every direct collective, in and out of place, must match the reference.
std::string writeThreeHostTopology() {
  const std::string path = strprintf("/tmp/trib_three_hosts_%d.topo", static_cast<int>(getpid()));
  std::ofstream f(path);
  f << "topology three-hosts\nnode sw switch\n";
  for (int h = 0; h < 3; ++h) {
    f << "node h" << h << "c0 cpu\nnode h" << h << "c1 cpu\nnode h" << h << "nic nic\n";
    f << "link h" << h << "c0 h" << h << "c1 shm bw=20\n";
    f << "link h" << h << "c0 h" << h << "nic pcie bw=20\nlink h" << h << "c1 h" << h << "nic pcie bw=20\n";
    f << "link h" << h << "nic sw net bw=10 lat=2\n";
  }
  return path;
}

// Joins over shm with TRIB_ALGO = `algo` and runs every structural and arithmetic case of that
// algorithm against the reference: the failures (described in `report`), or -1 if the init failed.
int joinAndRunCasesOf(const std::string& algo, int rank, int n, const tribUniqueId& id, std::string& report,
                      tribComm_t* comm) {
  tribConfig_t cfg = TRIB_CONFIG_INITIALIZER;
  cfg.timeoutMs = 60000;
  cfg.transport = "shm";
  cfg.algo = algo.c_str();
  if (tribCommInitRankConfig(comm, n, id, rank, &cfg) != tribSuccess) {
    report = std::string("init: ") + tribGetLastError(nullptr);
    return -1;
  }
  int failures = 0;
  for (auto cases : {structuralCases({n}, {0, 1, 7, 4093, 262147}), arithmeticCases({n}, {7, 4093})}) {
    for (const Case& c : cases) {
      if (c.algo != algo || c.sharedBuffers) continue;
      tribResult_t r;
      const std::string err = runAndCheck(c, *comm, rank, &r);
      if (!err.empty() && ++failures <= 5) report += c.name() + ": " + err + "\n";
      if (r != tribSuccess) break;
    }
  }
  return failures;
}

// An all-reduce of `probe` ones on `comm` (a call of its own: the cases before may have filled the
// plan cache past its bound and cleared it): its sum checked, and the steps of the plan it ran if
// that was `want`'s, else nullptr; what was wrong goes to `report`, counted in `failures`.
const std::vector<Step>* probeSteps(tribComm_t comm, uint64_t probe, int n, Algo want, std::string& report,
                                    int& failures) {
  std::vector<float> in(probe, 1.0f), out(probe, 0.0f);
  if (tribAllReduce(in.data(), out.data(), probe, tribFloat32, tribSum, comm, nullptr) != tribSuccess) {
    report += std::string("probe all-reduce: ") + tribGetLastError(comm) + "\n", ++failures;
    return nullptr;
  }
  for (uint64_t i = 0; i < probe; ++i)
    if (out[i] != static_cast<float>(n)) {
      report += strprintf("probe element %llu: %g\n", (unsigned long long)i, out[i]), ++failures;
      return nullptr;
    }
  for (const auto& [key, plan] : comm->impl()->planCache) {
    if (static_cast<Coll>(key.coll) != Coll::AllReduce || key.count != probe) continue;
    if (plan.algo->algo == want) return plan.steps.get();
    report += std::string("all-reduce ran ") + algoName(plan.algo->algo) + "\n", ++failures;
    return nullptr;
  }
  report += "no all-reduce plan cached\n", ++failures;
  return nullptr;
}

// Joins over shm with TRIB_ALGO = `algo`, runs its cases (joinAndRunCasesOf), then the probe
// (probeSteps) and `check` on the steps of its plan, which returns the failures it found (described
// in `report`): the rank's exit code.
int casesThenProbe(const std::string& algo, Algo want, uint64_t probe, int rank, int n,
                   const tribUniqueId& id, std::string& report,
                   const std::function<int(const std::vector<Step>&)>& check) {
  tribComm_t comm = nullptr;
  int failures = joinAndRunCasesOf(algo, rank, n, id, report, &comm);
  if (failures < 0) return 1;
  if (const std::vector<Step>* steps = probeSteps(comm, probe, n, want, report, failures))
    failures += check(*steps);
  tribCommDestroy(comm);
  return failures ? 1 : 0;
}

int directRackOrderRank(int rank, int n, const tribUniqueId& id, std::string& report) {
  // The all-reduce ran direct in rack order, remote domains first: domains of 2, so rank R*2+l
  // sends first to ((R+1) % 3)*2 + l, the next domain's rank of its own local index (rank + 1 in
  // the flat order).
  return casesThenProbe(
      "direct", Algo::Direct, 601, rank, n, id, report, [&](const std::vector<Step>& steps) {
        const int want = (rank / 2 + 1) % 3 * 2 + rank % 2;
        for (const Step& st : steps) {
          if (st.kind != StepKind::Send) continue;
          if (st.peer == want) return 0;
          report += strprintf("first send to rank %d, the rack order's is %d\n", st.peer, want);
          return 1;
        }
        return 0;
      });
}

// The ring all-reduce over the same three hosts: the planner gives ring plans ranksPerDomain 2, so
// it runs as rails (src/algo/ring.cpp): two channels, each a ring of all 6 ranks that enters every
// host at a different local rank. Every ring collective must match the reference, and each rank's
// all-reduce must use both channels and leave its host on exactly one: channel (local rank + 1) % 2.
int ringRailsRank(int rank, int n, const tribUniqueId& id, std::string& report) {
  return casesThenProbe("ring", Algo::Ring, 601, rank, n, id, report, [&](const std::vector<Step>& steps) {
    std::set<int> channels, crossing;
    for (const Step& st : steps) {
      if (st.kind != StepKind::Send) continue;
      channels.insert(st.channel);
      if (st.peer / 2 != rank / 2) crossing.insert(st.channel);
    }
    if (channels == std::set<int>{0, 1} && crossing == std::set<int>{(rank % 2 + 1) % 2}) return 0;
    report += strprintf("sends on %zu channel(s), leaving the host on %zu (want both; one, %d)\n",
                        channels.size(), crossing.size(), (rank % 2 + 1) % 2);
    return 1;
  });
}

// hierarchical over the same three hosts (domains of 2, m = 3): every hierarchical case against the
// reference, and a probe large enough for pipeline slices (algo::hierarchicalSliceElems: 20 steps a
// slice, d x m chunks) whose schedule leaves the host within its first slice: before its first send
// to another host a rank sends only the first slice's reduce-scatter in the host, (d - 1) x m
// chunks, where one pass would send the whole count's.
int hierarchicalSlicesRank(int rank, int n, const tribUniqueId& id, std::string& report) {
  // 32 MiB: blocks across hosts past the 4 MiB chunk, so slices.
  return casesThenProbe("hierarchical", Algo::Hierarchical, 8 << 20, rank, n, id, report,
                        [&](const std::vector<Step>& steps) {
                          int inHost = 0;
                          for (const Step& st : steps) {
                            if (st.kind != StepKind::Send) continue;
                            if (st.peer / 2 != rank / 2) break;
                            ++inHost;
                          }
                          if (inHost == 3) return 0;
                          report += strprintf("%d sends in the host before leaving it (want 3)\n", inHost);
                          return 1;
                        });
}

// Runs `rankFn` on 6 processes placed on the three hosts of writeThreeHostTopology(); the failures,
// described ("" when none).
std::string runOnThreeHosts(int (*rankFn)(int rank, int n, const tribUniqueId& id, std::string& report)) {
  const int n = 6;
  const std::string topo = writeThreeHostTopology();
  setenv("TRIB_TOPO_FILE", topo.c_str(), 1);
  auto results = runRanks(
      n, std::chrono::minutes(4),
      [&](int rank, const tribUniqueId& id, std::string& report) { return rankFn(rank, n, id, report); });
  unsetenv("TRIB_TOPO_FILE");
  std::remove(topo.c_str());
  return testing::describeFailures(results);
}

TEST(MultiProcessDomains, RingRailsAcrossProcesses) { EXPECT_EQ(runOnThreeHosts(ringRailsRank), ""); }

TEST(MultiProcessDomains, HierarchicalInPipelineSlicesAcrossProcesses) {
  EXPECT_EQ(runOnThreeHosts(hierarchicalSlicesRank), "");
}

TEST(MultiProcessDomains, DirectInRackOrderAcrossProcesses) {
  EXPECT_EQ(runOnThreeHosts(directRackOrderRank), "");
}

INSTANTIATE_TEST_SUITE_P(
    Transports, MultiProcess,
    ::testing::Values(TransportSetup{"shm", nullptr, 2}, TransportSetup{"shm", nullptr, 3},
                      TransportSetup{"shm", nullptr, 4}, TransportSetup{"ucx", "tcp", 2},
                      TransportSetup{"ucx", "tcp", 3}, TransportSetup{"ucx", "sm", 4},
                      TransportSetup{"verbs", nullptr, 2}, TransportSetup{"verbs", nullptr, 3},
                      TransportSetup{"verbs", nullptr, 4}, TransportSetup{"ucx", "rc,self", 2},
                      TransportSetup{"ucx", "rc,self", 3}),
    [](const auto& info) { return info.param.name(); });

}  // namespace
}  // namespace trib::conformance
