// In-network collectives through the communicator: TRIB_ALGO=switch conformance for every
// collective the switch runs, bit-identity with the ring for integers, determinism for floats, the
// byte counts behind the bandwidth claim, and failover (switch missing, slots exhausted by another
// group, switch SIGKILLed mid-all-reduce, mid-reduce-scatter, mid-broadcast).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "common/log.hpp"
#include "conformance.hpp"
#include "core/comm.hpp"
#include "core/switch_coll.hpp"
#include "support/launcher.hpp"
#include "switch_util.hpp"
#include "transports/registry.hpp"

using namespace trib;
using namespace trib::sw;

namespace {

using sw::testing::ScopedEnv;

// threadRanks with 64 KiB pipeline slices, which the switch tests here are sized for.
std::vector<std::string> runRanks(int n, const std::string& algo,
                                  const std::function<std::string(int, tribComm_t)>& body,
                                  uint64_t chunkBytes = 1 << 16) {
  return sw::testing::threadRanks(n, algo, body, chunkBytes);
}

std::string conformanceBody(const conformance::Case& c, int rank, tribComm_t comm) {
  conformance::RankBuffers b;
  conformance::prepare(c, rank, &b);
  tribResult_t r = conformance::runCase(c, comm, &b);
  if (r != tribSuccess) return std::string(tribGetErrorString(r)) + ": " + tribGetLastError(nullptr);
  return conformance::check(c, rank, b);
}

void expectAllOk(const std::vector<std::string>& errors) {
  for (size_t r = 0; r < errors.size(); ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// Every one of n ranks must run without the switch (it was refused, missing, ...) and still
// pass a conformance all-reduce on host algorithms; `failure` is the error if one attached.
void expectHostFallback(int n, uint64_t count, DataType dtype, const char* failure) {
  const conformance::Case c{.algo = "switch", .dtype = dtype, .nranks = n, .count = count};
  expectAllOk(runRanks(n, "switch", [&](int r, tribComm_t comm) {
    if (switchUsable(comm->impl())) return std::string(failure);
    return conformanceBody(c, r, comm);
  }));
}

class SwitchComm : public ::testing::Test {
 protected:
  void SetUp() override {
    SwitchConfig cfg = sw::testing::nodeConfig(256, 8192);
    ASSERT_TRUE(SwitchNode::create(cfg, &node_).ok());
    node_->start();
    env_.set("TRIB_SWITCH", node_->address());
    env_.set("TRIB_SWITCH_KEY", "test-job");
    sw::testing::allowSlowAttach(env_);
  }
  std::unique_ptr<SwitchNode> node_;
  ScopedEnv env_;
};

}  // namespace

TEST_F(SwitchComm, ConformanceThroughOneSwitch) {
  int cases = 0;
  for (int n : {1, 2, 3, 4}) {
    for (uint64_t count : {0ull, 1ull, 7ull, 4093ull, 70001ull}) {
      for (DataType dt : {tribInt32, tribFloat32, tribFloat16, tribInt8, tribFloat64, tribBfloat16}) {
        for (RedOp op : {tribSum, tribProd, tribMin, tribMax, tribAvg}) {
          for (bool inPlace : {false, true}) {
            // Keep it short: every dtype/op on 2 and 4 ranks, the common ones on 1 and 3, one large size.
            if (count > 4093 && (dt != tribFloat32 || op != tribSum)) continue;
            if ((n == 1 || n == 3) && dt != tribInt32 && dt != tribFloat32) continue;
            const conformance::Case c{.coll = Coll::AllReduce,
                                      .algo = "switch",
                                      .dtype = dt,
                                      .op = op,
                                      .nranks = n,
                                      .count = count,
                                      .inPlace = inPlace};
            SCOPED_TRACE(c.name());
            expectAllOk(runRanks(n, "switch", [&](int r, tribComm_t comm) {
              if (!switchUsable(comm->impl())) return std::string("the switch is not in use");
              return conformanceBody(c, r, comm);
            }));
            ++cases;
          }
        }
      }
    }
  }
  EXPECT_GT(node_->stats().chunksReduced, 100u);
  EXPECT_TRUE(node_->events().empty()) << node_->events().front();
  std::printf("%d conformance cases through the switch\n", cases);
}

// Reduce, broadcast, all-gather, reduce-scatter and barrier through the switch: the conformance
// core's values and checks, plus what each rank moved through the switch (S = count x elem size):
//   reduce         S out, S in on the root only      broadcast      S out from the root, S in elsewhere
//   allgather      S out, n x S in                    reducescatter  n x S out, S in
//   barrier        nothing (one empty chunk)
// (With one rank the planner runs a local copy instead: nothing through the switch.)
TEST_F(SwitchComm, EveryOtherCollectiveConformsAndMovesWhatItShould) {
  int cases = 0;
  const Coll colls[] = {Coll::Reduce, Coll::Broadcast, Coll::AllGather, Coll::ReduceScatter, Coll::Barrier};
  for (Coll coll : colls) {
    for (int n : {1, 2, 3, 4}) {
      for (uint64_t count : {0ull, 1ull, 7ull, 4093ull, 70001ull}) {
        if (coll == Coll::Barrier && count) continue;
        for (DataType dt : {tribInt32, tribFloat32, tribFloat16, tribInt8, tribFloat64, tribBfloat16}) {
          for (RedOp op : {tribSum, tribProd, tribMin, tribMax, tribAvg}) {
            const bool common = dt == tribInt32 || dt == tribFloat32;
            if (!conformance::hasOp(coll) && op != tribSum) continue;
            if (!common && op != tribSum && op != tribMax) continue;
            if (count > 4093 && (dt != tribFloat32 || op != tribSum)) continue;
            if ((n == 1 || n == 3) && !common) continue;
            if (coll == Coll::Barrier && (dt != tribInt32 || op != tribSum)) continue;
            for (bool inPlace : {false, true}) {
              std::vector<int> roots{0};
              if (conformance::hasRoot(coll) && n > 1) roots.push_back(n - 1);
              for (int root : roots) {
                const conformance::Case c{.coll = coll,
                                          .algo = "switch",
                                          .dtype = dt,
                                          .op = op,
                                          .nranks = n,
                                          .count = count,
                                          .inPlace = inPlace,
                                          .root = root};
                SCOPED_TRACE(c.name());
                const uint64_t reducedBefore = node_->stats().chunksReduced;
                const uint64_t S = count * dataTypeSize(dt), nS = static_cast<uint64_t>(n) * S;
                expectAllOk(runRanks(n, "switch", [&](int r, tribComm_t comm) -> std::string {
                  if (!switchUsable(comm->impl())) return "the switch is not in use";
                  uint64_t s0 = 0, r0 = 0, s1 = 0, r1 = 0;
                  switchTraffic(comm->impl(), &s0, &r0);
                  std::string err = conformanceBody(c, r, comm);
                  if (!err.empty()) return err;
                  if (!switchUsable(comm->impl())) return "the switch was given up";
                  switchTraffic(comm->impl(), &s1, &r1);
                  uint64_t out = S, in = S;
                  const bool isRoot = r == root;
                  if (coll == Coll::Reduce) in = isRoot ? S : 0;
                  if (coll == Coll::Broadcast) out = isRoot ? S : 0, in = isRoot ? 0 : S;
                  if (coll == Coll::AllGather) in = nS;
                  if (coll == Coll::ReduceScatter) out = nS;
                  if (n == 1) out = in = 0;  // one rank: the planner runs a local copy
                  if (s1 - s0 != out || r1 - r0 != in)
                    return strprintf(
                        "moved %llu out / %llu in through the switch, expected %llu / %llu",
                        static_cast<unsigned long long>(s1 - s0), static_cast<unsigned long long>(r1 - r0),
                        static_cast<unsigned long long>(out), static_cast<unsigned long long>(in));
                  return "";
                }));
                if (n > 1 && (count > 0 || coll == Coll::Barrier)) {
                  EXPECT_GT(node_->stats().chunksReduced, reducedBefore)
                      << "it did not go through the switch";
                }
                ++cases;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_TRUE(node_->events().empty()) << node_->events().front();
  std::printf("%d conformance cases of the other collectives through the switch\n", cases);
}

TEST_F(SwitchComm, IntegersBitIdenticalToRingFloatsDeterministicAndBytesCounted) {
  const int n = 4;
  const uint64_t count = 100003;
  auto input = [](int r, uint64_t i) { return static_cast<uint32_t>((i * 2654435761u) ^ (r * 40503u)); };
  std::vector<std::vector<int32_t>> ints[2];
  std::vector<std::vector<float>> floats[3];
  std::vector<std::pair<uint64_t, uint64_t>> traffic(n);
  const char* algos[3] = {"ring", "switch", "switch"};
  for (int run = 0; run < 3; ++run) {
    if (run < 2) ints[run].assign(n, std::vector<int32_t>(count));
    floats[run].assign(n, std::vector<float>(count));
    expectAllOk(runRanks(n, algos[run], [&](int r, tribComm_t comm) -> std::string {
      if (run > 0 && !switchUsable(comm->impl())) return "the switch is not in use";
      std::vector<int32_t> in(count);
      std::vector<float> fin(count);
      for (uint64_t i = 0; i < count; ++i) {
        in[i] = static_cast<int32_t>(input(r, i));
        fin[i] = static_cast<float>(static_cast<int32_t>(input(r, i)) % 100000) / 7.0f;
      }
      if (run < 2 && tribAllReduce(in.data(), ints[run][r].data(), count, tribInt32, tribSum, comm,
                                   nullptr) != tribSuccess)
        return tribGetLastError(nullptr);
      uint64_t s0 = 0, r0 = 0, s1 = 0, r1 = 0;
      bool have = switchTraffic(comm->impl(), &s0, &r0);
      if (tribAllReduce(fin.data(), floats[run][r].data(), count, tribFloat32, tribSum, comm, nullptr) !=
          tribSuccess)
        return tribGetLastError(nullptr);
      if (have && switchTraffic(comm->impl(), &s1, &r1)) traffic[r] = {s1 - s0, r1 - r0};
      return "";
    }));
  }
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(std::memcmp(ints[0][r].data(), ints[1][r].data(), count * 4), 0) << "rank " << r;
    EXPECT_EQ(std::memcmp(floats[1][r].data(), floats[2][r].data(), count * 4), 0) << "rank " << r;
    // S out and S in per rank through the switch (the ring moves 2(n-1)/n * S each way).
    EXPECT_EQ(traffic[r].first, count * 4);
    EXPECT_EQ(traffic[r].second, count * 4);
  }
}

// A loop of switch collectives keeps no finished execution behind (each used to be kept until
// the communicator was destroyed).
TEST_F(SwitchComm, FinishedExecutionsAreNotKept) {
  const int n = 3, iterations = 50;
  expectAllOk(runRanks(n, "switch", [&](int r, tribComm_t comm) -> std::string {
    if (!switchUsable(comm->impl())) return "the switch is not in use";
    std::vector<float> in(1024, static_cast<float>(r + 1)), out(1024);
    for (int it = 0; it < iterations; ++it) {
      if (tribAllReduce(in.data(), out.data(), in.size(), tribFloat32, tribSum, comm, nullptr) != tribSuccess)
        return tribGetLastError(nullptr);
      if (out[0] != 6.0f) return "wrong sum " + std::to_string(out[0]);
    }
    if (comm->impl()->switchDisabled) return "the switch was given up";
    if (!comm->impl()->abandonedExecs.empty())
      return std::to_string(comm->impl()->abandonedExecs.size()) + " executions kept after " +
             std::to_string(iterations) + " switch all-reduces";
    return "";
  }));
}

// Core reaches the switch only through the offload registry; the switch's own settings (address,
// key, slots) are read by its descriptor. One member attached through it runs an all-reduce at the node.
// A rank that never calls: the others' switch all-reduce times out, and its message names the rank
// the switch still lacks (the switch's step names no peer of its own: the fault campaign's
// survivors used to report "still waiting for: step 0 switch_reduce(...)" and nobody).
TEST_F(SwitchComm, ATimeoutNamesTheRankTheSwitchLacks) {
  std::atomic<int> returned{0};
  const std::vector<std::string> errors = sw::testing::threadRanks(
      3, "switch",
      [&](int r, tribComm_t comm) -> std::string {
        if (!switchUsable(comm->impl())) return "the switch did not attach";
        if (r == 2) {  // never calls; stays a member until the others have their answer
          const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
          while (returned.load() < 2 && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
          return "";
        }
        std::vector<float> buf(1000, 1.f);
        const tribResult_t res =
            tribAllReduce(buf.data(), buf.data(), buf.size(), tribFloat32, tribSum, comm, nullptr);
        ++returned;
        return res == tribSuccess ? "completed without rank 2" : tribGetLastError(nullptr);
      },
      0, 1500);
  // The first to time out asks the switch, which names rank 2; the other then fails on the switch
  // (the first left) and in the failover's agreement, waiting for rank 2 or for the first.
  int namedBySwitch = 0;
  for (int r = 0; r < 2; ++r) {
    namedBySwitch += errors[r].find("lacks the contribution of rank 2") != std::string::npos ||
                     errors[r].find("still lacked rank 2") != std::string::npos;
    const bool namesAPeer = errors[r].find(r == 0 ? "rank 1" : "rank 0") != std::string::npos ||
                            errors[r].find("rank 2") != std::string::npos;
    EXPECT_TRUE(namesAPeer) << "rank " << r << ": " << errors[r];
  }
  EXPECT_GE(namedBySwitch, 1) << errors[0] << "\n" << errors[1];
  EXPECT_EQ(errors[2], "");
}

TEST(SwitchOffloadRegistry, AttachesThroughTheDescriptorWithTheSwitchsSettings) {
  const OffloadDescriptor* d = aggregationOffload();
  ASSERT_NE(d, nullptr);
  EXPECT_STREQ(d->name, "switch");
  ScopedEnv env;
  std::unique_ptr<SwitchNode> node = sw::testing::startSwitchFor(env, 4, 4096);
  ASSERT_TRUE(node);
  env.set("TRIB_SWITCH_SLOTS", "2");
  EXPECT_EQ(d->configuredAddress(), node->address());
  OffloadAttachArgs args;
  args.address = d->configuredAddress();
  args.group = 0x77;
  args.path = {{1, 0}};
  args.timeout = std::chrono::milliseconds(2000);
  std::unique_ptr<CollectiveOffload> off;
  std::string granted;
  Status st = d->attach(args, &off, &granted);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_TRUE(off);
  EXPECT_EQ(granted, "2 slots of 4096 bytes");
  const int32_t in[3] = {5, -7, 11};
  int32_t out[3] = {0, 0, 0};
  TransferOp done;
  ASSERT_TRUE(off->postAllReduce(in, out, 3, tribInt32, tribSum, &done).ok());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done.done() && std::chrono::steady_clock::now() < deadline) ASSERT_TRUE(off->progress().ok());
  ASSERT_EQ(done.state.load(), TransferOp::kDone) << done.error.message();
  EXPECT_EQ(std::vector<int32_t>(out, out + 3), std::vector<int32_t>(in, in + 3));  // one member: its own
  // The key comes from TRIB_SWITCH_KEY: a wrong one is refused, and nothing is attached.
  env.set("TRIB_SWITCH_KEY", "not-the-job");
  std::unique_ptr<CollectiveOffload> refused;
  args.group = 0x78;
  EXPECT_FALSE(d->attach(args, &refused, &granted).ok());
  EXPECT_FALSE(refused);
}

TEST(SwitchFailover, MissingSwitchFallsBackToHost) {
  ScopedEnv env;
  env.set("TRIB_SWITCH", "127.0.0.1:1");  // nothing listens there
  expectHostFallback(3, 5000, tribInt32, "a missing switch must not be used");
}

TEST(SwitchFailover, SlotsExhaustedByAnotherGroupFallsBackToHost) {
  ScopedEnv env;
  std::unique_ptr<SwitchNode> node = sw::testing::startSwitchFor(env, 16, 4096);
  ASSERT_TRUE(node);
  std::unique_ptr<SwitchClient> hog;  // another job's group holds every slot
  ASSERT_TRUE(
      SwitchClient::connect(sw::testing::clientConfig(node->address(), 0x51, {{2, 0}}, 16), &hog).ok());
  expectHostFallback(3, 5000, tribFloat32, "a refused group must not use the switch");
  bool refused = false;
  for (const auto& e : node->events()) refused |= e.find("slots exhausted") != std::string::npos;
  EXPECT_TRUE(refused);
}

TEST(SwitchFailover, WrongKeyFallsBackToHost) {
  ScopedEnv env;
  std::unique_ptr<SwitchNode> node = sw::testing::startSwitchFor(env, 16, 4096, "not-the-job");
  ASSERT_TRUE(node);
  expectHostFallback(2, 3000, tribInt64, "a switch of another job must not be used");
  EXPECT_EQ(node->stats().disconnects, 2u);
}

namespace {

// A switch in a child process (so that it can be SIGKILLed), started before any thread.
struct ForkedSwitch {
  pid_t pid = -1;
  std::string address;
};

ForkedSwitch forkSwitch(LinkKind link = LinkKind::Tcp) {
  ForkedSwitch fs;
  int pipefd[2];
  if (pipe(pipefd) != 0) return fs;
  pid_t pid = fork();
  if (pid < 0) return fs;
  if (pid == 0) {
    close(pipefd[0]);
    std::unique_ptr<SwitchNode> node;
    SwitchConfig cfg = sw::testing::nodeConfig(64, 4096);
    cfg.link = link;
    if (!SwitchNode::create(cfg, &node).ok()) _exit(3);
    std::string addr = node->address() + "\n";
    if (write(pipefd[1], addr.data(), addr.size()) != static_cast<ssize_t>(addr.size())) _exit(4);
    std::atomic<bool> stop{false};
    alarm(60);  // never outlive a broken test
    (void)node->run(stop);
    _exit(0);
  }
  close(pipefd[1]);
  char buf[128] = {};
  ssize_t got = 0;
  while (got < 127 && (got == 0 || buf[got - 1] != '\n')) {
    ssize_t r = read(pipefd[0], buf + got, 127 - got);
    if (r <= 0) break;
    got += r;
  }
  close(pipefd[0]);
  fs.pid = pid;
  if (got > 1) fs.address.assign(buf, got - 1);
  return fs;
}

// n ranks run `iteration(rank, comm, it)` `iters` times through a forked switch that is SIGKILLed
// during the second iteration. Every result must be right (the body checks), every communicator
// must have given up the switch, and each rank must say so in exactly one WARN line.
void killSwitchMidStream(int n, int iters,
                         const std::function<std::string(int rank, tribComm_t comm, int it)>& iteration,
                         LinkKind link = LinkKind::Tcp) {
  ScopedEnv env;
  // UCX 1.13's sm transports can abort a process whose peer dies (openucx/ucx#8175).
  if (link == LinkKind::Ucx) env.set("UCX_TLS", "tcp");
  env.set("TRIB_SWITCH_LINK", linkKindName(link));
  ForkedSwitch fs = forkSwitch(link);  // before any thread of this test starts
  ASSERT_GT(fs.pid, 0);
  ASSERT_FALSE(fs.address.empty()) << "the switch process did not start";
  env.set("TRIB_SWITCH", fs.address);
  env.set("TRIB_SWITCH_KEY", "test-job");
  env.set("TRIB_SWITCH_SLOTS", "2");  // a narrow window: each collective takes a while
  sw::testing::allowSlowAttach(env);
  std::atomic<int> warns{0};
  std::mutex logMu;
  std::string switchLog;  // what the ranks said about the switch: why an attach failed, if one did
  setLogSink([&](LogLevel level, const char* subsys, const std::string& line) {
    if (std::string(subsys) != "switch") return;
    if (level == LogLevel::kWarn && line.find("stops using it") != std::string::npos) warns.fetch_add(1);
    std::lock_guard<std::mutex> g(logMu);
    switchLog += line + "\n";
  });
  std::atomic<int> firstDone{0};
  std::thread killer([&] {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (firstDone.load() < n && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // into the second iteration
    kill(fs.pid, SIGKILL);
  });
  std::vector<int> usedSwitchFirst(n, 0), disabledAtEnd(n, 0);
  // TRIB_ALGO=switch: on this machine the planner would pick the ring (docs/SWITCH.md); after the
  // failover the same override finds no usable switch and runs the fastest host algorithm.
  auto errors = runRanks(n, "switch", [&](int r, tribComm_t comm) -> std::string {
    usedSwitchFirst[r] = switchUsable(comm->impl());
    for (int it = 0; it < iters; ++it) {
      std::string err = iteration(r, comm, it);
      if (!err.empty()) return strprintf("iteration %d: %s", it, err.c_str());
      if (it == 0) firstDone.fetch_add(1);
    }
    disabledAtEnd[r] = comm->impl()->switchDisabled;
    return "";
  });
  killer.join();
  setLogSink(nullptr);
  int status = 0;
  waitpid(fs.pid, &status, 0);
  expectAllOk(errors);
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(usedSwitchFirst[r]) << "rank " << r << " never used the switch; the switch log:\n"
                                    << switchLog;
    EXPECT_TRUE(disabledAtEnd[r]) << "rank " << r << " still uses the killed switch";
  }
  EXPECT_EQ(warns.load(), n) << "one WARN per rank when the switch is given up";
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

}  // namespace

// One iteration of the all-reduce failover tests: an exact int32 all-reduce of `count` elements.
std::function<std::string(int, tribComm_t, int)> exactInt32AllReduce(int n, uint64_t count) {
  return [n, count](int r, tribComm_t comm, int it) -> std::string {
    std::vector<int32_t> in(count), out(count);
    for (uint64_t i = 0; i < count; ++i) in[i] = static_cast<int32_t>(i % 1000) * (r + 1) + it;
    if (tribAllReduce(in.data(), out.data(), count, tribInt32, tribSum, comm, nullptr) != tribSuccess)
      return tribGetLastError(nullptr);
    for (uint64_t i = 0; i < count; ++i) {
      int32_t want = static_cast<int32_t>(i % 1000) * (n * (n + 1) / 2) + n * it;
      if (out[i] != want)
        return strprintf("element %llu: %d, expected %d", static_cast<unsigned long long>(i), out[i], want);
    }
    return "";
  };
}

// The switch is SIGKILLed while the ranks (threads here) are in the middle of their all-reduces.
// A switch that does not answer (frozen here; behind a downed link in the fault campaign): the
// stalled member cannot learn whose contribution is missing, and says whom its step waits on.
TEST(SwitchStall, ASilentSwitchLeavesTheStepNamingTheOtherMembers) {
  ForkedSwitch fs = forkSwitch();
  ASSERT_GT(fs.pid, 0);
  ASSERT_FALSE(fs.address.empty());
  std::unique_ptr<SwitchClient> a, b;
  auto config = [&](uint32_t index) {
    SwitchClientConfig cfg = sw::testing::clientConfig(fs.address, 0x95, {{3, index}});
    cfg.leafRanks = {4, 5, 6};
    return cfg;
  };
  ASSERT_TRUE(SwitchClient::connect(config(0), &a).ok());
  ASSERT_TRUE(SwitchClient::connect(config(1), &b).ok());
  std::vector<int32_t> in(100, 1), out(100);
  TransferOp done;
  ASSERT_TRUE(a->postAllReduce(in.data(), out.data(), in.size(), tribInt32, tribSum, &done).ok());
  ASSERT_EQ(kill(fs.pid, SIGSTOP), 0);
  const std::string why = a->explainStall(std::chrono::milliseconds(200));
  kill(fs.pid, SIGKILL);
  waitpid(fs.pid, nullptr, 0);
  EXPECT_NE(why.find("did not say within 200 ms which contributions it lacks; the step waits on ranks 5, 6"),
            std::string::npos)
      << why;
}

TEST(SwitchFailover, SwitchKilledMidAllReduce) {
  const int n = 4;
  killSwitchMidStream(n, 6, exactInt32AllReduce(n, 1 << 18));  // 1 MiB: 256 chunks of 4 KiB each
}

// The same over UCX links: the ranks' endpoints report the dead switch (error handling mode PEER).
TEST(SwitchFailover, UcxSwitchKilledMidAllReduce) {
  if (!linkKindAvailable(LinkKind::Ucx)) GTEST_SKIP() << "needs a build with UCX (libucx-dev)";
  const int n = 3;
  killSwitchMidStream(n, 6, exactInt32AllReduce(n, 1 << 18), LinkKind::Ucx);
}

// The same during in-place reduce-scatters: the fallback re-runs from the input the switch
// schedule saved (the output lies inside the input, where the switch had started writing).
TEST(SwitchFailover, SwitchKilledMidReduceScatterInPlace) {
  const int n = 4;
  const uint64_t count = 1 << 16;  // per rank: 1 MiB of int32 input, 256 chunks of 4 KiB
  killSwitchMidStream(n, 6, [&](int r, tribComm_t comm, int it) -> std::string {
    std::vector<int32_t> buf(n * count);
    for (uint64_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<int32_t>(i % 1000) * (r + 1) + it;
    int32_t* mine = buf.data() + r * count;
    if (tribReduceScatter(buf.data(), mine, count, tribInt32, tribSum, comm, nullptr) != tribSuccess)
      return tribGetLastError(nullptr);
    for (uint64_t i = 0; i < count; ++i) {
      const uint64_t idx = r * count + i;
      int32_t want = static_cast<int32_t>(idx % 1000) * (n * (n + 1) / 2) + n * it;
      if (mine[i] != want)
        return strprintf("element %llu: %d, expected %d", static_cast<unsigned long long>(i), mine[i], want);
    }
    return "";
  });
}

// And during broadcasts from a non-zero root.
TEST(SwitchFailover, SwitchKilledMidBroadcast) {
  const int n = 3, root = 2;
  const uint64_t count = 1 << 18;
  killSwitchMidStream(n, 6, [&](int r, tribComm_t comm, int it) -> std::string {
    std::vector<int32_t> buf(count, -1);
    if (r == root)
      for (uint64_t i = 0; i < count; ++i) buf[i] = static_cast<int32_t>(i * 3) + it;
    if (tribBroadcast(buf.data(), buf.data(), count, tribInt32, root, comm, nullptr) != tribSuccess)
      return tribGetLastError(nullptr);
    for (uint64_t i = 0; i < count; ++i) {
      if (buf[i] != static_cast<int32_t>(i * 3) + it)
        return strprintf("element %llu: %d", static_cast<unsigned long long>(i), buf[i]);
    }
    return "";
  });
}

// Ranks as processes (shm between them, the switch in the parent): they join through the
// bootstrap, agree that all attached, run all-reduces through the switch, and when the parent
// takes the switch away mid-stream every rank agrees over shm, falls back, and stays exact.
TEST(SwitchProcesses, ConformanceThenSwitchLostMidStream) {
  struct Hello {
    tribUniqueId id;
    char addr[64];
  };
  const int n = 4;
  trib::testing::ParentChannel channel(n);
  std::unique_ptr<SwitchNode> node;
  std::thread killer;
  auto results = trib::testing::runProcesses(
      n,
      [&](int rank, std::string& report) -> int {
        Hello h{};
        if (!channel.receive(rank, &h, sizeof h, 30000)) {
          report = "no hello from the parent";
          return 1;
        }
        setenv("TRIB_SWITCH", h.addr, 1);
        setenv("TRIB_SWITCH_KEY", "test-job", 1);
        setenv("TRIB_SWITCH_SLOTS", "2", 1);
        setenv("TRIB_SWITCH_ATTACH_TIMEOUT", sw::testing::kSlowAttachSeconds, 1);
        tribConfig_t cfg = TRIB_CONFIG_INITIALIZER;
        cfg.timeoutMs = 60000;
        cfg.transport = "shm";
        // The planner would pick shm host algorithms on this machine: pin the switch while it
        // lasts (TRIB_TUNE); after the failover the pin no longer applies and TRIB_ALGO leaves
        // one-shot, whose windows the fallback must get.
        setenv("TRIB_TUNE", "allreduce:0-inf:@switch", 1);
        cfg.algo = "switch,oneshot";
        tribComm_t comm = nullptr;
        if (tribCommInitRankConfig(&comm, n, h.id, rank, &cfg) != tribSuccess) {
          report = std::string("init: ") + tribGetLastError(nullptr);
          return 1;
        }
        if (!switchUsable(comm->impl())) {
          report = "the switch is not in use after init";
          return 1;
        }
        for (DataType dt : {tribInt32, tribFloat32, tribFloat16}) {
          for (bool inPlace : {false, true}) {
            const conformance::Case c{
                .algo = "switch", .dtype = dt, .nranks = n, .count = 70001, .inPlace = inPlace};
            std::string err = conformanceBody(c, rank, comm);
            if (!err.empty()) {
              report = c.name() + ": " + err;
              return 1;
            }
          }
        }
        // Until the communicators agree the switch is gone (the parent kills it), bounded.
        std::vector<int32_t> in(1 << 16), out(in.size());
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        int it = 0;
        for (; !comm->impl()->switchDisabled && std::chrono::steady_clock::now() < deadline; ++it) {
          for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int32_t>(i) * (rank + 1) + it;
          if (tribAllReduce(in.data(), out.data(), in.size(), tribInt32, tribSum, comm, nullptr) !=
              tribSuccess) {
            report = strprintf("iteration %d: %s", it, tribGetLastError(nullptr));
            return 1;
          }
          for (size_t i = 0; i < in.size(); ++i) {
            if (out[i] != static_cast<int32_t>(i) * (n * (n + 1) / 2) + n * it) {
              report = strprintf("iteration %d element %zu: %d", it, i, out[i]);
              return 1;
            }
          }
        }
        if (!comm->impl()->switchDisabled) {
          report = "the switch was never given up";
          return 1;
        }
        // One more all-reduce on the host path; the plans made since the failover (the plan cache
        // was cleared then) must be one-shot's.
        for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int32_t>(i) * (rank + 1);
        if (tribAllReduce(in.data(), out.data(), in.size(), tribInt32, tribSum, comm, nullptr) !=
                tribSuccess ||
            out[7] != 7 * (n * (n + 1) / 2)) {
          report = std::string("after the failover: ") + tribGetLastError(nullptr);
          return 1;
        }
        bool oneShotAfter = false;
        for (const auto& [key, plan] : comm->impl()->planCache)
          oneShotAfter |= plan.algo->algo == Algo::OneShot;
        if (!oneShotAfter) {
          report = "after the failover the all-reduce did not run one-shot";
          return 1;
        }
        tribCommDestroy(comm);
        return 0;
      },
      std::chrono::minutes(2),
      [&](const std::vector<int>&) {
        ASSERT_TRUE(SwitchNode::create(sw::testing::nodeConfig(64, 4096), &node).ok());
        node->start();
        Hello h{};
        ASSERT_EQ(tribGetUniqueId(&h.id), tribSuccess);
        std::snprintf(h.addr, sizeof h.addr, "%s", node->address().c_str());
        for (int r = 0; r < n; ++r) channel.send(r, &h, sizeof h);
        killer = std::thread([&] {
          std::this_thread::sleep_for(std::chrono::seconds(4));
          node.reset();  // the switch goes away with its sockets, mid-stream
        });
      });
  if (killer.joinable()) killer.join();
  EXPECT_EQ(trib::testing::describeFailures(results), "");
}

// ---- switch links over UCX (TRIB_SWITCH_LINK) -------------------------------------------------

TEST(SwitchUcxLinks, CommunicatorThroughAUcxSwitch) {
  if (!linkKindAvailable(LinkKind::Ucx)) GTEST_SKIP() << "needs a build with UCX (libucx-dev)";
  ScopedEnv env;
  env.set("UCX_TLS", "tcp");  // UCX 1.13's sm transports can abort on a dead peer (openucx/ucx#8175)
  sw::testing::allowSlowAttach(env);
  SwitchConfig cfg = sw::testing::nodeConfig(64, 8192);
  cfg.link = LinkKind::Ucx;
  std::unique_ptr<SwitchNode> node;
  Status s = SwitchNode::create(cfg, &node);
  ASSERT_TRUE(s.ok()) << s.message();
  node->start();
  env.set("TRIB_SWITCH", node->address());
  env.set("TRIB_SWITCH_KEY", "test-job");
  env.set("TRIB_SWITCH_LINK", "ucx");
  const conformance::Case c{.algo = "switch", .dtype = tribInt32, .nranks = 3, .count = 5000};
  expectAllOk(runRanks(3, "switch", [&](int r, tribComm_t comm) {
    if (!switchUsable(comm->impl())) return std::string("the UCX switch must be attached");
    return conformanceBody(c, r, comm);
  }));
  EXPECT_GT(node->stats().chunksReduced, 0u);
}

TEST(SwitchUcxLinks, LinkMismatchFallsBackToHost) {
  if (!linkKindAvailable(LinkKind::Ucx)) GTEST_SKIP() << "needs a build with UCX (libucx-dev)";
  std::unique_ptr<SwitchNode> node;  // a TCP switch; the ranks ask for UCX links
  ASSERT_TRUE(SwitchNode::create(sw::testing::nodeConfig(16, 4096), &node).ok());
  node->start();
  ScopedEnv env;
  env.set("UCX_TLS", "tcp");
  env.set("TRIB_SWITCH", node->address());
  env.set("TRIB_SWITCH_KEY", "test-job");
  env.set("TRIB_SWITCH_LINK", "ucx");
  auto t0 = std::chrono::steady_clock::now();
  expectHostFallback(2, 3000, tribInt32, "a switch on another link kind must not be used");
  // The attach gives up after its 1 s timeout (plus teardown), not the communicator's 30 s.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  EXPECT_EQ(node->stats().chunksReduced, 0u);
}

TEST(SwitchUcxLinks, UnknownLinkKindFallsBackToHost) {
  ScopedEnv env;
  std::unique_ptr<SwitchNode> node = sw::testing::startSwitchFor(env, 16, 4096);
  ASSERT_TRUE(node);
  env.set("TRIB_SWITCH_LINK", "carrier-pigeon");
  expectHostFallback(2, 1000, tribInt32, "an unknown TRIB_SWITCH_LINK must not attach");
}
