// Bootstrap collectives over forked processes, unique ids, and launcher environment detection.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/launcher.hpp"
#include "bootstrap/unique_id.hpp"
#include "common/random.hpp"
#include "store_util.hpp"

using namespace trib;
using trib::testing::runChildren;

namespace {

Blob rankBlob(int rank, int round) {
  // Different lengths per rank (including empty for rank 0 of round 0) catch framing mistakes.
  Blob b(static_cast<size_t>(rank * 37 + round));
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(rank * 13 + round * 7 + i);
  return b;
}

// The body every rank runs: several allGathers, barriers and broadcasts, checking every result.
int collectiveBody(Bootstrap& bs) {
  int rank = bs.rank(), n = bs.nranks();
  for (int round = 0; round < 3; ++round) {
    std::vector<Blob> all;
    CHILD_OK(bs.allGather(rankBlob(rank, round), &all), 10);
    CHILD_CHECK(static_cast<int>(all.size()) == n, 11);
    for (int i = 0; i < n; ++i) CHILD_CHECK(all[i] == rankBlob(i, round), 12);
    CHILD_OK(bs.barrier(), 13);
    int root = (round * 5) % n;
    Blob b = rank == root ? rankBlob(100 + root, round) : Blob{};
    CHILD_OK(bs.broadcast(root, &b), 14);
    CHILD_CHECK(b == rankBlob(100 + root, round), 15);
  }
  // Forked processes share this host.
  std::vector<int> local;
  CHILD_OK(bs.sameHostRanks(&local), 18);
  CHILD_CHECK(static_cast<int>(local.size()) == n && local.front() == 0 && local.back() == n - 1, 19);
  // The OobAllGather adapter gives the same answer transports expect.
  OobAllGather oob = bs.oobAllGather();
  std::vector<std::vector<uint8_t>> all;
  CHILD_OK(oob(rankBlob(rank, 9), all), 16);
  for (int i = 0; i < n; ++i) CHILD_CHECK(all[i] == rankBlob(i, 9), 17);
  return 0;
}

// In-process server for single-process tests (multi-process tests use runWithStore).
std::unique_ptr<TcpStoreServer> startServer(const std::string& key) {
  StoreServerOptions opt;
  opt.authKey = key;
  std::unique_ptr<TcpStoreServer> s;
  EXPECT_TRUE(TcpStoreServer::start(opt, &s).ok());
  return s;
}

}  // namespace

class BootstrapRanks : public ::testing::TestWithParam<int> {};

TEST_P(BootstrapRanks, CollectivesOverTcpStore) {
  const int n = GetParam();
  auto run = trib::testing::runWithStore(n, 60, trib::testing::storeOptions("k"),
                                         [&](int rank, const std::string& addr) {
                                           std::unique_ptr<TcpStore> c;
                                           CHILD_OK(TcpStore::connect(addr, "k", 10000, &c), 1);
                                           Bootstrap bs(std::move(c), rank, n, "comm1", 20000);
                                           return collectiveBody(bs);
                                         });
  ASSERT_TRUE(run.error.empty()) << run.error;
  for (auto& r : run.results) EXPECT_EQ(r.code, 0) << "rank pid " << r.pid;
}

TEST_P(BootstrapRanks, CollectivesOverFileStore) {
  const int n = GetParam();
  char tmpl[] = "/tmp/trib-bs-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  auto res = runChildren(n, 60, [&](int rank) {
    std::unique_ptr<FileStore> s;
    CHILD_OK(FileStore::open(dir, &s), 1);
    Bootstrap bs(std::move(s), rank, n, "comm1", 20000);
    return collectiveBody(bs);
  });
  for (auto& r : res) EXPECT_EQ(r.code, 0) << "rank pid " << r.pid;
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Ranks, BootstrapRanks, ::testing::Values(1, 2, 3, 5, 8));

TEST(Bootstrap, AllGatherCostsTwoMessagesPerRank) {
  // The figure docs/BOOTSTRAP.md states: n HELLOs + n AUTHs (the challenge-response), then per
  // allGather n SETs + n multi-gets in and n + n replies out; the reply bytes are n * (sum of blobs
  // + framing).
  const int n = 6;
  auto run = trib::testing::runWithStore(
      n, 30, trib::testing::storeOptions("k"), [&](int rank, const std::string& addr) {
        std::unique_ptr<TcpStore> c;
        CHILD_OK(TcpStore::connect(addr, "k", 10000, &c), 1);
        Bootstrap bs(std::move(c), rank, n, "cost", 10000);
        std::vector<Blob> all;
        CHILD_OK(bs.allGather(Blob(100, static_cast<uint8_t>(rank)), &all), 2);
        return 0;
      });
  ASSERT_TRUE(run.error.empty()) << run.error;
  for (auto& r : run.results) ASSERT_EQ(r.code, 0);
  StoreServerStats st = run.stats;
  EXPECT_EQ(st.messagesIn, 4u * n);
  EXPECT_EQ(st.messagesOut, 4u * n);
  // Each multi-get reply carries n blobs of 100 bytes plus 4-byte length each, a count and a header.
  uint64_t replyBytes = 4 + 1 + 4 + n * (4 + 100);
  uint64_t setReply = 5, handshakeReplies = 2 * (5 + 32);  // the challenge, the store's proof
  EXPECT_EQ(st.bytesOut, n * (replyBytes + setReply + handshakeReplies));
}

// Over several stores (tribCommInitRankScalable): n thread ranks, each with its own connections.
struct StoresRun {
  std::vector<std::unique_ptr<TcpStoreServer>> servers;
  std::vector<int> codes;
};
StoresRun runOverStores(int n, int k, const std::function<int(Bootstrap&)>& body,
                        std::vector<int> storeOf = {}) {
  StoresRun run;
  std::vector<StoreGroups::Root> roots;
  for (int s = 0; s < k; ++s) {
    run.servers.push_back(startServer("key" + std::to_string(s)));
    roots.push_back({run.servers.back()->address(), "key" + std::to_string(s), static_cast<uint64_t>(s + 1)});
  }
  if (storeOf.empty())
    for (int r = 0; r < n; ++r) storeOf.push_back(storeOfRank(r, n, k));
  run.codes.assign(n, -1);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      Bootstrap bs(std::make_shared<StoreGroups>(roots, 20000), storeOf, r, "groups", 20000);
      run.codes[r] = body(bs);
    });
  for (auto& t : threads) t.join();
  return run;
}

TEST(Bootstrap, CollectivesOverSeveralStores) {
  // 7 ranks over 3 stores: groups of 3, 2 and 2, and every leader writes to all three.
  const int n = 7, k = 3;
  StoresRun run = runOverStores(n, k, [&](Bootstrap& bs) {
    if (int rc = collectiveBody(bs)) return rc;
    // The first rank of each store hosts it: it returns once every user of its store has left.
    const bool leader = bs.rank() == 0 || storeOfRank(bs.rank() - 1, n, k) != storeOfRank(bs.rank(), n, k);
    CHILD_OK(bs.finalize(leader), 20);
    return 0;
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(run.codes[r], 0) << "rank " << r;
  // Each store has its own ranks' connections and the other stores' leaders', nothing more.
  for (int s = 0; s < k; ++s) EXPECT_EQ(run.servers[s]->stats().connections, (s == 0 ? 3u : 2u) + (k - 1));
}

TEST(Bootstrap, CollectivesOverInterleavedStoresWithAnEmptyOne) {
  // As a split of a communicator over several stores may leave them: a store's ranks are not
  // consecutive (no range waits then) and store 1 has none (nobody writes to it).
  const int n = 5, k = 3;
  const std::vector<int> storeOf{2, 0, 2, 0, 2};
  StoresRun run = runOverStores(
      n, k,
      [&](Bootstrap& bs) {
        if (int rc = collectiveBody(bs)) return rc;
        CHILD_OK(bs.finalize(bs.rank() == 0 || bs.rank() == 1), 20);  // the leaders host
        return 0;
      },
      storeOf);
  for (int r = 0; r < n; ++r) EXPECT_EQ(run.codes[r], 0) << "rank " << r;
  EXPECT_EQ(run.servers[0]->stats().connections, 3u);  // ranks 1 and 3, and store 2's leader
  EXPECT_EQ(run.servers[1]->stats().connections, 0u);
  EXPECT_EQ(run.servers[2]->stats().connections, 4u);  // ranks 0, 2 and 4, and store 0's leader
}

TEST(Bootstrap, AllGatherOverStoresCostsEachStoreItsShare) {
  // One allGather of B-byte blobs, 10 ranks over 3 stores (4, 3, 3 ranks): store s with m ranks
  // gets m SETs and m multi-gets from its ranks, its leader's multi-get of m keys and one group
  // blob SET from every leader; it sends each of its ranks every group blob, m * n * B bytes,
  // where one store would send n * n * B.
  const int n = 10, k = 3;
  const size_t B = 100;
  StoresRun run = runOverStores(n, k, [&](Bootstrap& bs) {
    std::vector<Blob> all;
    CHILD_OK(bs.allGather(Blob(B, static_cast<uint8_t>(bs.rank())), &all), 1);
    for (int r = 0; r < n; ++r) CHILD_CHECK(all[r] == Blob(B, static_cast<uint8_t>(r)), 2);
    return 0;
  });
  for (int r = 0; r < n; ++r) ASSERT_EQ(run.codes[r], 0) << "rank " << r;
  const uint64_t sizes[k] = {4, 3, 3};
  uint64_t groupBlobs = 0;  // what a rank's multi-get of the k group blobs returns
  for (uint64_t m : sizes) groupBlobs += 4 + (4 + m * (4 + B));
  for (int s = 0; s < k; ++s) {
    const uint64_t m = sizes[s], conns = m + (k - 1);
    const StoreServerStats st = run.servers[s]->stats();
    EXPECT_EQ(st.messagesIn, 2 * conns + 2 * m + 1 + k) << "store " << s;
    const uint64_t handshake = 2 * (5 + 32), setReply = 5, leaderGather = 9 + m * (4 + B);
    EXPECT_EQ(st.bytesOut, conns * handshake + (m + k) * setReply + leaderGather + m * (9 + groupBlobs))
        << "store " << s;
  }
}

TEST(Bootstrap, MissingRankTimesOutWithClearStatus) {
  auto server = startServer("k");
  std::unique_ptr<TcpStore> c;
  ASSERT_TRUE(TcpStore::connect(server->address(), "k", 2000, &c).ok());
  Bootstrap bs(std::move(c), 0, 2, "lonely", 300);  // rank 1 never comes
  std::vector<Blob> all;
  auto t0 = net::Clock::now();
  Status st = bs.allGather(Blob{1}, &all);
  EXPECT_EQ(st.code(), tribTimeout) << st.message();
  EXPECT_NE(st.message().find("lonely/ag/0/1"), std::string::npos) << st.message();  // names rank 1's key
  st = bs.barrier();
  EXPECT_EQ(st.code(), tribTimeout) << st.message();
  EXPECT_NE(st.message().find("barrier"), std::string::npos) << st.message();
  Blob b;
  EXPECT_EQ(bs.broadcast(1, &b).code(), tribTimeout);
  EXPECT_EQ(bs.broadcast(2, &b).code(), tribInvalidArgument);
  double ms = std::chrono::duration<double, std::milli>(net::Clock::now() - t0).count();
  EXPECT_LT(ms, 5000);
}

TEST(Bootstrap, EachFinalizeWaitsForItsOwnRound) {
  auto server = startServer("k");
  std::unique_ptr<TcpStore> c0, c1;
  ASSERT_TRUE(TcpStore::connect(server->address(), "k", 2000, &c0).ok());
  ASSERT_TRUE(TcpStore::connect(server->address(), "k", 2000, &c1).ok());
  Bootstrap host(std::move(c0), 0, 2, "fin", 200), other(std::move(c1), 1, 2, "fin", 200);
  ASSERT_TRUE(other.finalize(false).ok());
  ASSERT_TRUE(host.finalize(true).ok());
  // Rank 1 has not left a second time: the host's second finalize must wait, then time out.
  Status st = host.finalize(true);
  EXPECT_EQ(st.code(), tribTimeout) << st.message();
  EXPECT_NE(st.message().find("fin/fin/1/1"), std::string::npos) << st.message();
}

TEST(UniqueId, RoundTripAndRendezvous) {
  tribUniqueId id;
  StoreServerHandle server;
  ASSERT_TRUE(makeUniqueId(&id, &server, "127.0.0.1:0").ok());
  UniqueIdInfo info;
  Status st = parseUniqueId(id, &info);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(info.storeAddr, server->address());
  EXPECT_EQ(info.jobKey.size(), 64u);
  tribUniqueId id2;
  StoreServerHandle server2;
  ASSERT_TRUE(makeUniqueId(&id2, &server2, "127.0.0.1:0").ok());
  UniqueIdInfo info2;
  ASSERT_TRUE(parseUniqueId(id2, &info2).ok());
  EXPECT_NE(info.commId, info2.commId);
  EXPECT_NE(info.jobKey, info2.jobKey);

  // Ranks in other processes rendezvous through the id alone; the other id's key is refused.
  // They are forked before the id's server thread exists and receive the id through a pipe, as
  // a user would broadcast it.
  server.reset();
  server2.reset();
  const int n = 3;
  int pipes[2];
  ASSERT_EQ(pipe(pipes), 0);
  auto pids = trib::testing::forkChildren(n, 30, [&](int rank) {
    close(pipes[1]);
    tribUniqueId ids[2];  // one 256-byte record per child: pipe writes under PIPE_BUF are atomic
    CHILD_CHECK(read(pipes[0], ids, sizeof ids) == sizeof ids, 20);
    const tribUniqueId& got = ids[0];
    const tribUniqueId& other = ids[1];
    UniqueIdInfo mine, info2;
    CHILD_OK(parseUniqueId(got, &mine), 1);
    CHILD_OK(parseUniqueId(other, &info2), 22);
    std::unique_ptr<TcpStore> c;
    CHILD_OK(TcpStore::connect(mine.storeAddr, mine.jobKey, 5000, &c), 2);
    Bootstrap bs(std::move(c), rank, n, std::to_string(mine.commId), 10000);
    std::vector<Blob> all;
    CHILD_OK(bs.allGather(Blob{static_cast<uint8_t>(rank)}, &all), 3);
    for (int i = 0; i < n; ++i) CHILD_CHECK(all[i] == Blob{static_cast<uint8_t>(i)}, 4);
    std::unique_ptr<TcpStore> wrong;
    CHILD_CHECK(TcpStore::connect(mine.storeAddr, info2.jobKey, 2000, &wrong).code() == tribRemoteError, 5);
    return 0;
  });
  close(pipes[0]);
  ASSERT_TRUE(makeUniqueId(&id, &server, "127.0.0.1:0").ok());
  ASSERT_TRUE(makeUniqueId(&id2, &server2, "127.0.0.1:0").ok());
  tribUniqueId record[2] = {id, id2};
  for (int i = 0; i < n; ++i)
    ASSERT_EQ(write(pipes[1], record, sizeof record), static_cast<ssize_t>(sizeof record));
  close(pipes[1]);
  for (auto& r : trib::testing::waitChildren(pids, 30)) EXPECT_EQ(r.code, 0);
}

// The one random source (common/random.hpp): draws differ, so ids and secrets do not repeat.
TEST(Random, DrawsDoNotRepeat) {
  std::set<uint64_t> ids;
  for (int i = 0; i < 1000; ++i) ids.insert(randomId64());
  EXPECT_EQ(ids.size(), 1000u);
  uint8_t a[64] = {}, b[64] = {};
  ASSERT_TRUE(randomBytes(a, sizeof a).ok());
  ASSERT_TRUE(randomBytes(b, sizeof b).ok());
  EXPECT_NE(std::memcmp(a, b, sizeof a), 0);
  EXPECT_TRUE(randomBytes(nullptr, 0).ok());
}

TEST(UniqueId, EnvironmentAddressAndWildcardRefused) {
  tribUniqueId id;
  StoreServerHandle server;
  setenv("TRIB_BOOTSTRAP_ADDR", "127.0.0.1", 1);
  ASSERT_TRUE(makeUniqueId(&id, &server).ok());
  EXPECT_EQ(server->address().rfind("127.0.0.1:", 0), 0u);
  setenv("TRIB_BOOTSTRAP_ADDR", "0.0.0.0", 1);
  StoreServerHandle s2;
  Status st = makeUniqueId(&id, &s2);
  EXPECT_EQ(st.code(), tribInvalidArgument);
  EXPECT_NE(st.message().find("wildcard"), std::string::npos) << st.message();
  setenv("TRIB_BOOTSTRAP_ADDR", "not an address", 1);
  EXPECT_FALSE(makeUniqueId(&id, &s2).ok());
  unsetenv("TRIB_BOOTSTRAP_ADDR");
}

TEST(UniqueId, MalformedIdsRejected) {
  tribUniqueId good;
  StoreServerHandle server;
  ASSERT_TRUE(makeUniqueId(&good, &server, "127.0.0.1:0").ok());
  UniqueIdInfo info;
  auto expectReject = [&](const tribUniqueId& id, const char* needle) {
    Status st = parseUniqueId(id, &info);
    EXPECT_EQ(st.code(), tribInvalidArgument) << needle;
    EXPECT_NE(st.message().find(needle), std::string::npos) << st.message();
  };
  // Re-sign a modified layout so the check under test, not the checksum, is what rejects it.
  auto resign = [](UniqueIdLayout u) {
    uint32_t h = 2166136261u;
    auto* p = reinterpret_cast<const uint8_t*>(&u);
    for (size_t i = 0; i < offsetof(UniqueIdLayout, checksum); ++i) h = (h ^ p[i]) * 16777619u;
    u.checksum = h;
    tribUniqueId id;
    std::memcpy(id.internal, &u, sizeof u);
    return id;
  };
  UniqueIdLayout u;
  std::memcpy(&u, good.internal, sizeof u);

  tribUniqueId zero{};
  expectReject(zero, "magic");
  tribUniqueId flipped = good;
  flipped.internal[70] ^= 1;  // inside the job key
  expectReject(flipped, "checksum");
  UniqueIdLayout v = u;
  v.version = 99;
  expectReject(resign(v), "version 99");
  v = u;
  std::strcpy(v.host, "not-an-ip");
  expectReject(resign(v), "not a numeric IP");
  v = u;
  std::memset(v.host, 'x', sizeof v.host);  // no terminator
  expectReject(resign(v), "no valid root address");
  v = u;
  v.port = 0;
  expectReject(resign(v), "port is 0");
  v = u;
  v.reserved[3] = 1;
  expectReject(resign(v), "reserved");
  EXPECT_TRUE(parseUniqueId(resign(u), &info).ok());
}

// ---- launcher detection ----

namespace {
struct FakeEnv {
  std::map<std::string, std::string> vars;
  EnvLookup lookup() const {
    return [this](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};
}  // namespace

TEST(Launcher, EachLauncherDetected) {
  struct Case {
    std::map<std::string, std::string> vars;
    const char* launcher;
    int rank, size, localRank, localSize, node;
  };
  std::vector<Case> cases = {
      {{{"TRIB_RANK", "2"}, {"TRIB_NRANKS", "4"}, {"TRIB_LOCAL_RANK", "0"}, {"TRIB_STORE_DIR", "/tmp/x"}},
       "trib",
       2,
       4,
       0,
       -1,
       -1},
      {{{"RANK", "3"},
        {"WORLD_SIZE", "8"},
        {"LOCAL_RANK", "1"},
        {"LOCAL_WORLD_SIZE", "2"},
        {"MASTER_ADDR", "127.0.0.1"},
        {"MASTER_PORT", "29500"}},
       "torchrun",
       3,
       8,
       1,
       2,
       -1},
      {{{"OMPI_COMM_WORLD_RANK", "5"},
        {"OMPI_COMM_WORLD_SIZE", "6"},
        {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
        {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
        {"TRIB_STORE", "127.0.0.1:4000"}},
       "openmpi",
       5,
       6,
       1,
       2,
       -1},
      {{{"SLURM_PROCID", "7"},
        {"SLURM_NTASKS", "16"},
        {"SLURM_LOCALID", "3"},
        {"SLURM_NODEID", "1"},
        {"TRIB_STORE_DIR", "/shared/rdv"}},
       "slurm",
       7,
       16,
       3,
       -1,
       1},
      {{{"PMI_RANK", "0"}, {"PMI_SIZE", "1"}, {"MPI_LOCALRANKID", "0"}, {"TRIB_STORE", "localhost:5000"}},
       "pmi",
       0,
       1,
       0,
       -1,
       -1},
  };
  for (auto& c : cases) {
    FakeEnv env{c.vars};
    LaunchInfo info;
    Status st = detectLauncher(&info, env.lookup());
    ASSERT_TRUE(st.ok()) << c.launcher << ": " << st.message();
    EXPECT_EQ(info.launcher, c.launcher);
    EXPECT_EQ(info.rank, c.rank) << c.launcher;
    EXPECT_EQ(info.nranks, c.size) << c.launcher;
    EXPECT_EQ(info.localRank, c.localRank) << c.launcher;
    EXPECT_EQ(info.localSize, c.localSize) << c.launcher;
    EXPECT_EQ(info.nodeId, c.node) << c.launcher;
    EXPECT_FALSE(info.authKey.empty());
  }
}

TEST(Launcher, PrecedenceAndStoreLocation) {
  // Explicit TRIB_* beats torchrun, which beats Open MPI and Slurm.
  FakeEnv env{{{"TRIB_RANK", "1"},
               {"TRIB_NRANKS", "2"},
               {"RANK", "5"},
               {"WORLD_SIZE", "9"},
               {"OMPI_COMM_WORLD_RANK", "3"},
               {"OMPI_COMM_WORLD_SIZE", "4"},
               {"SLURM_PROCID", "0"},
               {"SLURM_NTASKS", "1"},
               {"MASTER_ADDR", "127.0.0.1"},
               {"MASTER_PORT", "29500"},
               {"TRIB_STORE", "10.0.0.1:7000"},
               {"TRIB_AUTH_KEY", "secret"}}};
  LaunchInfo info;
  ASSERT_TRUE(detectLauncher(&info, env.lookup()).ok());
  EXPECT_EQ(info.launcher, "trib");
  EXPECT_EQ(info.rank, 1);
  EXPECT_EQ(info.storeAddr, "10.0.0.1:7000");  // TRIB_STORE beats MASTER_ADDR
  EXPECT_FALSE(info.rank0ServesStore);
  EXPECT_EQ(info.authKey, "secret");
  env.vars.erase("TRIB_RANK");
  env.vars.erase("TRIB_NRANKS");
  env.vars.erase("TRIB_STORE");
  ASSERT_TRUE(detectLauncher(&info, env.lookup()).ok());
  EXPECT_EQ(info.launcher, "torchrun");
  EXPECT_EQ(info.storeAddr, "127.0.0.1:29500");
  EXPECT_TRUE(info.rank0ServesStore);
  env.vars.erase("RANK");
  env.vars.erase("WORLD_SIZE");
  env.vars.erase("MASTER_ADDR");
  env.vars.erase("MASTER_PORT");
  env.vars["TRIB_STORE_DIR"] = "/tmp/d";
  ASSERT_TRUE(detectLauncher(&info, env.lookup()).ok());
  EXPECT_EQ(info.launcher, "openmpi");
  EXPECT_EQ(info.storeDir, "/tmp/d");
  EXPECT_TRUE(info.storeAddr.empty());
}

TEST(Launcher, InconsistentValuesGiveClearErrors) {
  struct Case {
    std::map<std::string, std::string> vars;
    tribResult_t code;
    const char* needle;
  };
  std::vector<Case> cases = {
      {{}, tribInvalidUsage, "no launcher environment"},
      {{{"RANK", "4"}, {"WORLD_SIZE", "4"}, {"TRIB_STORE_DIR", "/t"}},
       tribInvalidArgument,
       "RANK=4 is not below"},
      {{{"RANK", "x1"}, {"WORLD_SIZE", "4"}, {"TRIB_STORE_DIR", "/t"}}, tribInvalidArgument, "RANK='x1'"},
      {{{"RANK", "1"}, {"TRIB_STORE_DIR", "/t"}}, tribInvalidArgument, "WORLD_SIZE is not set"},
      {{{"TRIB_RANK", "0"}, {"TRIB_NRANKS", "0"}, {"TRIB_STORE_DIR", "/t"}},
       tribInvalidArgument,
       "TRIB_NRANKS='0'"},
      {{{"OMPI_COMM_WORLD_RANK", "-1"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"TRIB_STORE_DIR", "/t"}},
       tribInvalidArgument,
       "OMPI_COMM_WORLD_RANK='-1'"},
      {{{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "12abc"}, {"TRIB_STORE_DIR", "/t"}},
       tribInvalidArgument,
       "SLURM_LOCALID='12abc'"},
      {{{"RANK", "1"},
        {"WORLD_SIZE", "4"},
        {"LOCAL_RANK", "2"},
        {"LOCAL_WORLD_SIZE", "2"},
        {"TRIB_STORE_DIR", "/t"}},
       tribInvalidArgument,
       "LOCAL_RANK=2 is not below LOCAL_WORLD_SIZE=2"},
      {{{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}}, tribInvalidUsage, "TRIB_STORE_DIR"},
      {{{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}},
       tribInvalidArgument,
       "MASTER_PORT"},
      {{{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "29500"}},
       tribInvalidArgument,
       "MASTER_ADDR is not"},
      {{{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"TRIB_STORE", "nocolon"}}, tribInvalidArgument, "TRIB_STORE"},
  };
  for (auto& c : cases) {
    FakeEnv env{c.vars};
    LaunchInfo info;
    Status st = detectLauncher(&info, env.lookup());
    EXPECT_EQ(st.code(), c.code) << c.needle << ": " << st.message();
    EXPECT_NE(st.message().find(c.needle), std::string::npos)
        << "want '" << c.needle << "' in: " << st.message();
  }
}

TEST(Launcher, SlurmWithFileStoreRendezvous) {
  char tmpl[] = "/tmp/trib-launch-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  const int n = 3;
  auto res = runChildren(n, 30, [&](int rank) {
    FakeEnv env{{{"SLURM_PROCID", std::to_string(rank)},
                 {"SLURM_NTASKS", std::to_string(n)},
                 {"SLURM_LOCALID", std::to_string(rank)},
                 {"SLURM_JOB_ID", "777"},
                 {"TRIB_STORE_DIR", dir}}};
    LaunchInfo info;
    CHILD_OK(detectLauncher(&info, env.lookup()), 1);
    std::shared_ptr<Store> store;
    StoreServerHandle server;
    CHILD_OK(openLaunchStore(info, 10000, &store, &server), 2);
    CHILD_CHECK(server == nullptr && info.jobId == "777", 3);
    Bootstrap bs(store, info.rank, info.nranks, info.jobId, 10000);
    Blob b = info.rank == 1 ? Blob{4, 2} : Blob{};
    CHILD_OK(bs.broadcast(1, &b), 4);
    CHILD_CHECK((b == Blob{4, 2}), 5);
    return 0;
  });
  for (auto& r : res) EXPECT_EQ(r.code, 0);
  std::filesystem::remove_all(dir);
}

TEST(Launcher, TorchrunStyleRendezvousServedByRankZero) {
  // Rank 0 serves the store at MASTER_ADDR:MASTER_PORT, the others connect; all allGather.
  StoreServerHandle probe;
  tribUniqueId unused;
  ASSERT_TRUE(makeUniqueId(&unused, &probe, "127.0.0.1:0").ok());
  int port = probe->port();
  probe.reset();  // free the port for rank 0 (a small race with other programs; fine on a test box)
  const int n = 4;
  auto res = runChildren(n, 30, [&](int rank) {
    std::map<std::string, std::string> vars = {{"RANK", std::to_string(rank)},
                                               {"WORLD_SIZE", std::to_string(n)},
                                               {"MASTER_ADDR", "127.0.0.1"},
                                               {"MASTER_PORT", std::to_string(port)},
                                               {"TRIB_AUTH_KEY", "job-42"}};
    FakeEnv env{vars};
    LaunchInfo info;
    CHILD_OK(detectLauncher(&info, env.lookup()), 1);
    std::shared_ptr<Store> store;
    StoreServerHandle server;
    CHILD_OK(openLaunchStore(info, 10000, &store, &server), 2);
    CHILD_CHECK((rank == 0) == (server != nullptr), 3);
    Bootstrap bs(store, rank, n, "torch", 10000);
    std::vector<Blob> all;
    CHILD_OK(bs.allGather(Blob{static_cast<uint8_t>(rank + 1)}, &all), 4);
    for (int i = 0; i < n; ++i) CHILD_CHECK(all[i] == Blob{static_cast<uint8_t>(i + 1)}, 5);
    CHILD_OK(bs.barrier(), 6);
    CHILD_OK(bs.finalize(rank == 0), 7);  // rank 0 keeps serving until everyone is done
    // A second round (e.g. init, then destroy) waits again rather than seeing the first one's keys.
    CHILD_OK(bs.allGather(Blob{static_cast<uint8_t>(rank)}, &all), 8);
    CHILD_OK(bs.finalize(rank == 0), 9);
    return 0;
  });
  for (auto& r : res) EXPECT_EQ(r.code, 0);
}
