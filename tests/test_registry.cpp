// The transport registry: what it lists, and the transport it chooses for every pair of ranks
// (by priority among those that can connect the pair; TRIB_TRANSPORT forces one).
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>
#include <thread>

#include "bootstrap/store.hpp"
#include "core/comm.hpp"
#include "support/launcher.hpp"
#include "transports/loopback/loopback.hpp"
#include "transports/registry.hpp"
#include "tributary/tributary.h"
#ifdef TRIB_HAVE_UCX
#include "transports/ucx/ucx_transport.hpp"
#endif

namespace trib {
namespace {

RankLocation at(const char* host, uint64_t process) {
  RankLocation l{};
  std::snprintf(l.host, sizeof l.host, "%s/boot", host);
  l.process = process;
  l.pid = static_cast<int32_t>(process);
  return l;
}

std::string nameOf(const TransportChoice& c, int peer) { return c.peer[peer]->name; }

std::string usedNames(const TransportChoice& c) {
  std::string s;
  for (const TransportDescriptor* d : c.used) s += (s.empty() ? "" : "+") + std::string(d->name);
  return s;
}

bool ucxBuilt() {
  const TransportDescriptor* d = findTransport("ucx");
  return d && !d->notBuilt;
}

TEST(TransportRegistry, ListsEveryTransportInPriorityOrderWithCapabilities) {
  const auto& reg = transportRegistry();
  ASSERT_EQ(reg.size(), 4u);
  std::set<std::string> names;
  for (size_t i = 0; i < reg.size(); ++i) {
    const TransportDescriptor& d = reg[i];
    names.insert(d.name);
    if (i > 0) {
      EXPECT_GT(reg[i - 1].priority, d.priority) << d.name;
    }
    EXPECT_NE(d.canConnect, nullptr) << d.name;
    EXPECT_NE(d.reaches, nullptr) << d.name;
    if (d.notBuilt) continue;
    EXPECT_NE(d.connect, nullptr) << d.name;
    EXPECT_TRUE(d.caps.twoSided) << d.name;
    // Every transport of this build reads, writes and reduces into host memory of every host
    // kind; device memory only where its probe says this process can (verbs: GPUDirect RDMA),
    // and none reduces into device memory (they combine on the CPU).
    EXPECT_EQ(d.caps.reads & ~d.caps.probed, kHostMemoryKinds) << d.name;
    EXPECT_EQ(d.caps.writes & ~d.caps.probed, kHostMemoryKinds) << d.name;
    EXPECT_EQ(d.caps.reduces, kHostMemoryKinds) << d.name;
    EXPECT_EQ(d.caps.probed != 0, d.caps.probe != nullptr) << d.name;
    EXPECT_EQ(d.caps.probed & ~memoryKindBit(MemoryKind::Device), 0) << d.name;
  }
  EXPECT_EQ(names, (std::set<std::string>{"loopback", "shm", "verbs", "ucx"}));
  EXPECT_TRUE(findTransport("shm")->caps.windows);
  EXPECT_FALSE(findTransport("loopback")->needsExchange);
  EXPECT_EQ(findTransport("nope"), nullptr);
  EXPECT_EQ(memoryKindSetNames(kHostMemoryKinds), "host, host-shared, registered");
}

bool probeSays = false;
int probesAsked = 0;
bool fakeProbe(const TransportConnectArgs&) {
  ++probesAsked;
  return probeSays;
}

// The memory a connected transport is given: its caps, the probed kinds only where its probe
// says this process can reach them.
TEST(TransportRegistry, ProbedMemoryKindsFollowTheProbe) {
  const MemoryKindSet device = memoryKindBit(MemoryKind::Device);
  TransportCaps caps;
  caps.reads = caps.writes = kHostMemoryKinds | device;
  caps.reduces = kHostMemoryKinds;
  caps.probed = device;
  caps.probe = fakeProbe;
  TransportConnectArgs args;
  probeSays = false;
  MemoryReach r = transportMemoryReach(caps, args);
  EXPECT_EQ(r.reads, kHostMemoryKinds);
  EXPECT_EQ(r.writes, kHostMemoryKinds);
  EXPECT_EQ(r.reduces, kHostMemoryKinds);
  probeSays = true;
  r = transportMemoryReach(caps, args);
  EXPECT_EQ(r.reads, kHostMemoryKinds | device);
  EXPECT_EQ(r.writes, kHostMemoryKinds | device);
  EXPECT_EQ(r.reduces, kHostMemoryKinds) << "reaching device memory is not reducing into it";
  EXPECT_EQ(probesAsked, 2);
  // Probed kinds without a probe are never reached; caps without probed kinds ask nothing.
  caps.probe = nullptr;
  EXPECT_EQ(transportMemoryReach(caps, args).reads, kHostMemoryKinds);
  caps.probed = 0;
  caps.probe = fakeProbe;
  EXPECT_EQ(transportMemoryReach(caps, args).reads, kHostMemoryKinds | device);
  EXPECT_EQ(probesAsked, 2);
  // What a transport is given: reductions only into memory it receives into.
  caps.reduces = kHostMemoryKinds | device;
  caps.probed = device;
  probeSays = false;
  EXPECT_EQ(transportMemoryReach(caps, args).reduces, kHostMemoryKinds);
}

// The verbs transport's probe, where this process had no CUDA context at init (this test's):
// no device memory, whatever the machine has.
TEST(TransportRegistry, VerbsReachesDeviceMemoryOnlyWithAContext) {
  const TransportDescriptor* v = findTransport("verbs");
  ASSERT_NE(v, nullptr);
  if (v->notBuilt) GTEST_SKIP() << "this build has no verbs transport: " << v->notBuilt;
  EXPECT_EQ(v->caps.probed, memoryKindBit(MemoryKind::Device));
  EXPECT_TRUE(v->caps.reads & memoryKindBit(MemoryKind::Device));
  EXPECT_FALSE(v->caps.reduces & memoryKindBit(MemoryKind::Device));
  std::vector<RankLocation> locations = {at("a", 1), at("b", 1)};
  TransportConnectArgs args;
  args.rank = 0;
  args.nranks = 2;
  args.locations = &locations;
  ASSERT_NE(v->caps.probe, nullptr);
  EXPECT_FALSE(v->caps.probe(args));
  EXPECT_EQ(transportMemoryReach(v->caps, args).reads, kHostMemoryKinds);
}

TEST(TransportRegistry, LocationsCompareByHostAndProcess) {
  RankLocation a = at("a", 1), a2 = at("a", 2), b = at("b", 1);
  EXPECT_TRUE(sameProcess(a, a));
  EXPECT_FALSE(sameProcess(a, a2));
  EXPECT_TRUE(sameHost(a, a2));
  EXPECT_FALSE(sameHost(a, b));
  EXPECT_FALSE(sameProcess(a, b));  // the same token on another host is another process
  RankLocation me = thisRankLocation();
  EXPECT_TRUE(sameProcess(me, thisRankLocation()));
  EXPECT_NE(describeLocation(a).find("host a, pid 1"), std::string::npos) << describeLocation(a);
}

// Ranks 0, 1: one process on host a; 2: another process on a; 3: host b.
std::vector<RankLocation> mixedWorld() { return {at("a", 1), at("a", 1), at("a", 2), at("b", 3)}; }

TEST(TransportRegistry, ChoosesPerPairLoopbackShmUcx) {
  auto locs = mixedWorld();
  TransportChoice c;
  Status st = chooseTransports(locs, 0, "", true, &c);
  if (!ucxBuilt()) {
    // Host b is reachable only by UCX: the error says which pair and what is missing.
    EXPECT_EQ(st.code(), tribNotSupported);
    EXPECT_NE(st.message().find("rank 0"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("rank 3"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("ucx could"), std::string::npos) << st.message();
    locs.pop_back();
    ASSERT_TRUE(chooseTransports(locs, 0, "", true, &c).ok());
  } else {
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(nameOf(c, 3), "ucx");
  }
  EXPECT_EQ(nameOf(c, 0), "loopback");  // self
  EXPECT_EQ(nameOf(c, 1), "loopback");  // same process
  EXPECT_EQ(nameOf(c, 2), "shm");       // same host
  EXPECT_EQ(usedNames(c), ucxBuilt() ? "loopback+shm+ucx" : "loopback+shm");
}

TEST(TransportRegistry, EveryRankConnectsTheSameTransports) {
  auto locs = mixedWorld();
  if (!ucxBuilt()) locs.pop_back();
  std::string first;
  for (int r = 0; r < static_cast<int>(locs.size()); ++r) {
    TransportChoice c;
    ASSERT_TRUE(chooseTransports(locs, r, "", true, &c).ok());
    if (r == 0) first = usedNames(c);
    EXPECT_EQ(usedNames(c), first) << "rank " << r;
    EXPECT_EQ(nameOf(c, r), "loopback") << "rank " << r;
  }
  // Rank 2 is alone in its process: it uses no loopback peer but itself, and still connects
  // shm with rank 0 and 1.
  TransportChoice c;
  ASSERT_TRUE(chooseTransports(locs, 2, "", true, &c).ok());
  EXPECT_EQ(nameOf(c, 0), "shm");
  EXPECT_EQ(nameOf(c, 1), "shm");
}

TEST(TransportRegistry, OneProcessIsAllLoopbackOneHostNeedsNoUcx) {
  std::vector<RankLocation> oneProcess(4, at("a", 7));
  TransportChoice c;
  ASSERT_TRUE(chooseTransports(oneProcess, 2, "", false, &c).ok());  // no exchange needed
  EXPECT_EQ(usedNames(c), "loopback");
  std::vector<RankLocation> oneHost = {at("a", 1), at("a", 2), at("a", 3)};
  ASSERT_TRUE(chooseTransports(oneHost, 1, "", true, &c).ok());
  EXPECT_EQ(usedNames(c), "loopback+shm");
  EXPECT_EQ(nameOf(c, 0), "shm");
  EXPECT_EQ(nameOf(c, 2), "shm");
}

TEST(TransportRegistry, ForcingGivesEveryOtherRankThatTransport) {
  std::vector<RankLocation> oneHost = {at("a", 1), at("a", 1), at("a", 2)};
  TransportChoice c;
  ASSERT_TRUE(chooseTransports(oneHost, 0, "shm", true, &c).ok());
  EXPECT_EQ(nameOf(c, 0), "loopback");  // a rank's messages to itself never leave the process
  EXPECT_EQ(nameOf(c, 1), "shm");       // forced even within the process
  EXPECT_EQ(nameOf(c, 2), "shm");
  EXPECT_EQ(usedNames(c), "loopback+shm");
  // Rank 2 forced too: the same transports on every rank.
  ASSERT_TRUE(chooseTransports(oneHost, 2, "shm", true, &c).ok());
  EXPECT_EQ(usedNames(c), "loopback+shm");
  if (ucxBuilt()) {
    ASSERT_TRUE(chooseTransports(oneHost, 0, "ucx", true, &c).ok());
    EXPECT_EQ(nameOf(c, 1), "ucx");
    EXPECT_EQ(nameOf(c, 2), "ucx");
    EXPECT_EQ(usedNames(c), "loopback+ucx");
  }
  std::vector<RankLocation> oneProcess(3, at("a", 1));
  ASSERT_TRUE(chooseTransports(oneProcess, 1, "loopback", false, &c).ok());
  EXPECT_EQ(usedNames(c), "loopback");
}

TEST(TransportRegistry, ForcedTransportThatCannotConnectAPairIsAClearError) {
  TransportChoice c;
  std::vector<RankLocation> twoProcesses = {at("a", 1), at("a", 2)};
  Status st = chooseTransports(twoProcesses, 0, "loopback", true, &c);
  EXPECT_EQ(st.code(), tribInvalidArgument);
  EXPECT_NE(st.message().find("TRIB_TRANSPORT=loopback cannot connect rank 0"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("ranks in the same process"), std::string::npos) << st.message();
  // Every rank refuses alike (none would wait in an exchange the others skip).
  EXPECT_EQ(chooseTransports(twoProcesses, 1, "loopback", true, &c).code(), tribInvalidArgument);

  std::vector<RankLocation> twoHosts = {at("a", 1), at("a", 2), at("b", 3)};
  st = chooseTransports(twoHosts, 1, "shm", true, &c);
  EXPECT_EQ(st.code(), tribInvalidArgument);
  EXPECT_NE(st.message().find(
                "TRIB_TRANSPORT=shm cannot connect rank 0 (host a, pid 1) with rank 2 (host b, pid 3)"),
            std::string::npos)
      << st.message();

  st = chooseTransports(twoHosts, 0, "tcp", true, &c);
  EXPECT_EQ(st.code(), tribInvalidArgument);
  EXPECT_NE(st.message().find("TRIB_TRANSPORT='tcp' is not one of loopback, shm, verbs, ucx"),
            std::string::npos)
      << st.message();

  // Ranks created together in one process (no exchange) cannot be given shm.
  std::vector<RankLocation> oneProcess(2, at("a", 1));
  st = chooseTransports(oneProcess, 0, "shm", false, &c);
  EXPECT_EQ(st.code(), tribInvalidArgument);
  EXPECT_NE(st.message().find("tribCommInitAll"), std::string::npos) << st.message();

  if (!ucxBuilt()) {
    st = chooseTransports(twoHosts, 0, "ucx", true, &c);
    EXPECT_EQ(st.code(), tribNotSupported);
    EXPECT_NE(st.message().find("no ucx transport"), std::string::npos) << st.message();
  }
}

// Through the API: ranks that are threads of one process, joined by a unique id, reach each
// other through loopback; TRIB_TRANSPORT forces shm among them (it connects any pair on a host).
void initThreads(int n, const char* transport, std::vector<tribComm_t>* comms,
                 std::vector<std::string>* errors) {
  tribUniqueId id;
  ASSERT_EQ(tribGetUniqueId(&id), tribSuccess);
  comms->assign(n, nullptr);
  errors->assign(n, "");
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      tribConfig_t cfg = TRIB_CONFIG_INITIALIZER;
      cfg.transport = transport;
      cfg.timeoutMs = 30000;
      if (tribCommInitRankConfig(&(*comms)[r], n, id, r, &cfg) != tribSuccess)
        (*errors)[r] = tribGetLastError(nullptr);
    });
  }
  for (auto& t : threads) t.join();
}

TEST(TransportRegistry, InitRankThreadsOfOneProcessGetLoopbackOrTheForcedOne) {
  for (const char* forced : {static_cast<const char*>(nullptr), "shm"}) {
    std::vector<tribComm_t> comms;
    std::vector<std::string> errors;
    initThreads(3, forced, &comms, &errors);
    for (int r = 0; r < 3; ++r) {
      ASSERT_EQ(errors[r], "") << "rank " << r;
      tribComm* c = comms[r];
      EXPECT_STREQ(c->impl()->peers[r]->name(), "loopback");
      EXPECT_STREQ(c->impl()->peers[(r + 1) % 3]->name(), forced ? "shm" : "loopback");
      EXPECT_EQ(c->impl()->transportSummary, forced ? "loopback+shm" : "loopback");
    }
    // And it works: an all-reduce over the chosen transports.
    std::vector<std::thread> threads;
    std::vector<float> out(3, 0);
    for (int r = 0; r < 3; ++r) {
      threads.emplace_back([&, r] {
        float in = static_cast<float>(r + 1);
        EXPECT_EQ(tribAllReduce(&in, &out[r], 1, tribFloat32, tribSum, comms[r], nullptr), tribSuccess);
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < 3; ++r) EXPECT_EQ(out[r], 6.0f) << "rank " << r;
    for (tribComm_t c : comms) EXPECT_EQ(tribCommDestroy(c), tribSuccess);
  }
}

TEST(TransportRegistry, InitRankUnknownTransportFailsOnEveryRank) {
  std::vector<tribComm_t> comms;
  std::vector<std::string> errors;
  initThreads(2, "carrier-pigeon", &comms, &errors);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(comms[r], nullptr);
    EXPECT_NE(errors[r].find("'carrier-pigeon' is not one of loopback, shm, verbs, ucx"), std::string::npos)
        << errors[r];
  }
}

// Two processes on this host: shm between them by default; TRIB_TRANSPORT=loopback cannot
// connect them, and both ranks say so (neither waits for the other).
TEST(TransportRegistry, TwoProcessesGetShmAndForcedLoopbackFailsOnBoth) {
  for (const char* forced : {static_cast<const char*>(nullptr), "loopback"}) {
    testing::ParentChannel channel(2);
    auto results = testing::runProcesses(
        2,
        [&](int rank, std::string& report) {
          tribUniqueId id;
          if (!channel.receive(rank, &id, sizeof id, 30000)) {
            report = "no unique id from the parent";
            return 1;
          }
          tribConfig_t cfg = TRIB_CONFIG_INITIALIZER;
          cfg.transport = forced;
          cfg.timeoutMs = 30000;
          tribComm_t comm = nullptr;
          tribResult_t rc = tribCommInitRankConfig(&comm, 2, id, rank, &cfg);
          if (forced) {
            std::string err = tribGetLastError(nullptr);
            if (rc == tribInvalidArgument &&
                err.find("TRIB_TRANSPORT=loopback cannot connect rank 0") != std::string::npos)
              return 0;
            report = "forced loopback: rc " + std::to_string(rc) + ": " + err;
            return 1;
          }
          if (rc != tribSuccess) {
            report = std::string("init: ") + tribGetLastError(nullptr);
            return 1;
          }
          std::string got = comm->impl()->peers[1 - rank]->name();
          std::string summary = comm->impl()->transportSummary;
          float in = 1, out = 0;
          rc = tribAllReduce(&in, &out, 1, tribFloat32, tribSum, comm, nullptr);
          tribCommDestroy(comm);
          if (got != "shm" || summary != "loopback+shm" || rc != tribSuccess || out != 2.0f) {
            report =
                "peer transport " + got + ", summary " + summary + ", all-reduce rc " + std::to_string(rc);
            return 1;
          }
          return 0;
        },
        std::chrono::minutes(2),
        [&](const std::vector<int>&) {
          tribUniqueId id;
          ASSERT_EQ(tribGetUniqueId(&id), tribSuccess) << tribGetLastError(nullptr);
          for (int r = 0; r < 2; ++r) channel.send(r, &id, sizeof id);
        });
    EXPECT_EQ(testing::describeFailures(results), "") << (forced ? forced : "default");
  }
}

// A split's UCX transport reuses the UCP context of its parent's (same options, same process):
// ucp_init runs once for the world, not again for the split.
TEST(TransportRegistry, SplitSharesTheUcxContext) {
#ifndef TRIB_HAVE_UCX
  GTEST_SKIP() << "needs the UCX transport (build with libucx-dev)";
#else
  const uint64_t before = ucxContextsCreated();
  std::vector<tribComm_t> comms;
  std::vector<std::string> errors;
  initThreads(2, "ucx", &comms, &errors);
  for (int r = 0; r < 2; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
  EXPECT_STREQ(comms[0]->impl()->peers[1]->name(), "ucx");
  EXPECT_LE(ucxContextsCreated() - before, 1u);  // both ranks' transports: one context
  ASSERT_GE(ucxContextsCreated(), 1u)
      << "the count sees no context at all: the split check below would be vacuous";
  const uint64_t world = ucxContextsCreated(), worlds = ucxWorkersCreated();
  std::vector<tribComm_t> subs(2, nullptr);
  std::vector<float> out(2, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      ASSERT_EQ(tribCommSplit(comms[r], 0, 1 - r, &subs[r], nullptr), tribSuccess)
          << tribGetLastError(nullptr);
      float in = static_cast<float>(r + 1);
      EXPECT_EQ(tribAllReduce(&in, &out[r], 1, tribFloat32, tribSum, subs[r], nullptr), tribSuccess);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ucxContextsCreated(), world) << "the split initialised UCX again";
  EXPECT_EQ(ucxWorkersCreated(), worlds) << "the split created a UCX worker instead of sharing one";
  for (int r = 0; r < 2; ++r) {
    ASSERT_NE(subs[r], nullptr);
    EXPECT_STREQ(subs[r]->impl()->peers[1 - subs[r]->rank()]->name(), "ucx");
    EXPECT_EQ(out[r], 3.0f);
  }
  // The parent goes first; the split still works on the shared context.
  for (tribComm_t c : comms) EXPECT_EQ(tribCommDestroy(c), tribSuccess);
  threads.clear();
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      float in = 1;
      EXPECT_EQ(tribAllReduce(&in, &out[r], 1, tribFloat32, tribSum, subs[r], nullptr), tribSuccess);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) EXPECT_EQ(out[r], 2.0f);
  for (tribComm_t c : subs) EXPECT_EQ(tribCommDestroy(c), tribSuccess);
#endif
}

// A parent and its split on one shared UCX worker, each driven by threads of its own at the same
// time: every all-reduce gets its own communicator's sum. With config.shareTransports = 0 (what
// TRIB_SHARE_TRANSPORTS=0 sets) the split gets a worker of its own and works the same.
TEST(TransportRegistry, CommunicatorsOnASharedUcxWorkerRunAtOnce) {
#ifndef TRIB_HAVE_UCX
  GTEST_SKIP() << "needs the UCX transport (build with libucx-dev)";
#else
  for (bool share : {true, false}) {
    std::vector<tribComm_t> comms, subs(2, nullptr);
    std::vector<std::string> errors;
    initThreads(2, "ucx", &comms, &errors);
    for (int r = 0; r < 2; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
    const uint64_t workers = ucxWorkersCreated();
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        tribConfig_t cfg = TRIB_CONFIG_INITIALIZER;  // a split's config replaces its parent's
        cfg.transport = "ucx";
        cfg.timeoutMs = 30000;  // as the parent's: UCX's keepalive follows it, and a context is per setting
        cfg.shareTransports = share ? 1 : 0;
        EXPECT_EQ(tribCommSplit(comms[r], 0, r, &subs[r], &cfg), tribSuccess) << tribGetLastError(nullptr);
      });
    }
    for (auto& t : threads) t.join();
    threads.clear();
    ASSERT_TRUE(subs[0] && subs[1]);
    EXPECT_STREQ(subs[0]->impl()->peers[1]->name(), "ucx");
    EXPECT_EQ(ucxWorkersCreated() - workers, share ? 0u : 2u) << "share " << share;
    // Rank r of comm c adds (c + 1) * (r + 1) * (i + 1) in iteration i: the sums differ per
    // communicator and per iteration, so a message taken by the wrong one shows.
    for (int c = 0; c < 2; ++c) {
      for (int r = 0; r < 2; ++r) {
        threads.emplace_back([&, c, r] {
          tribComm_t comm = c == 0 ? comms[r] : subs[r];
          std::vector<float> in(3000), out(3000);
          for (int i = 0; i < 40; ++i) {
            std::fill(in.begin(), in.end(), static_cast<float>((c + 1) * (r + 1) * (i + 1)));
            ASSERT_EQ(tribAllReduce(in.data(), out.data(), in.size(), tribFloat32, tribSum, comm, nullptr),
                      tribSuccess)
                << tribGetLastError(nullptr);
            const float want = static_cast<float>((c + 1) * 3 * (i + 1));
            ASSERT_EQ(out.front(), want) << "comm " << c << " rank " << r << " iteration " << i;
            ASSERT_EQ(out.back(), want) << "comm " << c << " rank " << r << " iteration " << i;
          }
        });
      }
    }
    for (auto& t : threads) t.join();
    for (tribComm_t c : subs) EXPECT_EQ(tribCommDestroy(c), tribSuccess);
    for (tribComm_t c : comms) EXPECT_EQ(tribCommDestroy(c), tribSuccess);
  }
#endif
}

// A split through the store takes its members' locations from its parent: it publishes no size
// and no location of its own (the parent's join keys are there; the split's are not), and works.
TEST(CommCreation, AStoreSplitRepeatsNoJoinExchange) {
  std::vector<tribComm_t> comms;
  std::vector<std::string> errors;
  initThreads(3, nullptr, &comms, &errors);
  for (int r = 0; r < 3; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
  std::vector<tribComm_t> subs(3, nullptr);
  std::vector<float> out(3, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      // Ranks 0 and 2 in reverse order; rank 1 alone.
      ASSERT_EQ(tribCommSplit(comms[r], r % 2, -r, &subs[r], nullptr), tribSuccess)
          << tribGetLastError(nullptr);
      float in = static_cast<float>(r + 1);
      EXPECT_EQ(tribAllReduce(&in, &out[r], 1, tribFloat32, tribSum, subs[r], nullptr), tribSuccess);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(out, (std::vector<float>{4, 2, 4}));
  ASSERT_TRUE(subs[0] && subs[2]);
  EXPECT_EQ(subs[2]->rank(), 0);
  Store& store = *comms[0]->impl()->origin.store;
  Blob value;
  EXPECT_TRUE(store.get(comms[0]->impl()->origin.prefix + "/join/0", &value, 0).ok())
      << "the parent's join key";
  const std::string split = subs[0]->impl()->origin.prefix;
  EXPECT_NE(split, comms[0]->impl()->origin.prefix);
  EXPECT_EQ(store.get(split + "/nranks", &value, 0).code(), tribTimeout);
  EXPECT_EQ(store.get(split + "/join/0", &value, 0).code(), tribTimeout);
  EXPECT_EQ(subs[0]->impl()->origin.locations.size(), 2u);
  for (tribComm_t c : subs) EXPECT_EQ(tribCommDestroy(c), tribSuccess);
  for (tribComm_t c : comms) EXPECT_EQ(tribCommDestroy(c), tribSuccess);
}

TEST(TransportRegistry, InitAllRefusesAForcedTransportThatNeedsAnExchange) {
  setenv("TRIB_TRANSPORT", "shm", 1);
  tribComm_t comms[2] = {nullptr, nullptr};
  tribResult_t rc = tribCommInitAll(comms, 2, nullptr);
  std::string err = tribGetLastError(nullptr);
  setenv("TRIB_TRANSPORT", "loopback", 1);
  tribComm_t ok[2] = {nullptr, nullptr};
  tribResult_t rcLoop = tribCommInitAll(ok, 2, nullptr);
  unsetenv("TRIB_TRANSPORT");
  EXPECT_EQ(rc, tribInvalidArgument);
  EXPECT_NE(err.find("TRIB_TRANSPORT=shm cannot connect this communicator"), std::string::npos) << err;
  ASSERT_EQ(rcLoop, tribSuccess);
  EXPECT_STREQ(ok[0]->impl()->peers[1]->name(), "loopback");
  for (tribComm_t c : ok) EXPECT_EQ(tribCommDestroy(c), tribSuccess);
}

}  // namespace
}  // namespace trib

namespace trib {
namespace {

// An init that failed part-way leaves a half-joined loopback world: once its ranks dropped the
// fabric, a retry with the same communicator id starts afresh (it found its ranks "joined twice").
TEST(LoopbackWorld, ARetryAfterAFailedInitStartsAfresh) {
  const uint64_t id = 0x5eed0123456789ull;
  std::shared_ptr<LoopbackFabric> first;
  ASSERT_TRUE(joinLoopbackFabric(id, 2, 2, 0, &first).ok());  // rank 1 never comes: init fails
  first.reset();                                              // and rank 0's transport goes away
  std::shared_ptr<LoopbackFabric> a, b;
  const Status st = joinLoopbackFabric(id, 2, 2, 0, &a);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_TRUE(joinLoopbackFabric(id, 2, 2, 1, &b).ok());
  EXPECT_EQ(a, b);  // the retry's ranks share one fabric
  // While a joined rank still holds it, a second join of that rank is refused.
  std::shared_ptr<LoopbackFabric> c, d;
  ASSERT_TRUE(joinLoopbackFabric(id + 1, 2, 2, 0, &c).ok());
  EXPECT_EQ(joinLoopbackFabric(id + 1, 2, 2, 0, &d).code(), tribInvalidUsage);
}

}  // namespace
}  // namespace trib
