// tribGroupSimulateEnd (issue 15): a group ended without running, with the planner's and
// simulator's estimate of its calls; the same number `trib-plan --simulate` prints for the call.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "thread_comms.hpp"
#include "tributary/tributary.h"

namespace {

std::string lastError() { return tribGetLastError(nullptr); }

using Comms = ThreadComms;

// Rank r's buffers for an all-reduce of `count` floats: input r + 1, output a sentinel.
struct Buffers {
  Buffers(int n, size_t count)
      : send(n, std::vector<float>(count)), recv(n, std::vector<float>(count, -7.f)) {
    for (int r = 0; r < n; ++r)
      for (float& x : send[r]) x = static_cast<float>(r + 1);
  }
  std::vector<std::vector<float>> send, recv;
};

// Every rank's all-reduce queued in the open group.
void queueAllReduce(Comms& comms, Buffers& b, size_t count) {
  for (size_t r = 0; r < comms.c.size(); ++r)
    ASSERT_EQ(
        tribAllReduce(b.send[r].data(), b.recv[r].data(), count, tribFloat32, tribSum, comms.c[r], nullptr),
        tribSuccess)
        << lastError();
}

// The estimate of one all-reduce of `count` floats on every rank (the calls not run: checked).
double simulateAllReduce(Comms& comms, size_t count, int callsPerRank = 1) {
  Buffers b(static_cast<int>(comms.c.size()), count);
  EXPECT_EQ(tribGroupStart(), tribSuccess);
  for (int i = 0; i < callsPerRank; ++i) queueAllReduce(comms, b, count);
  tribSimInfo_t info = TRIB_SIM_INFO_INITIALIZER;
  EXPECT_EQ(tribGroupSimulateEnd(&info), tribSuccess) << lastError();
  for (const auto& out : b.recv)
    for (float x : out) {
      EXPECT_EQ(x, -7.f) << "a simulated group wrote its output";
      if (x != -7.f) return -1;
    }
  return info.estimatedTime;
}

TEST(GroupSimulateEnd, EstimateGrowsWithSizeAndNothingRuns) {
  Comms comms(4);
  const double small = simulateAllReduce(comms, 1024);
  const double mid = simulateAllReduce(comms, 256 * 1024);
  const double large = simulateAllReduce(comms, 4 * 1024 * 1024);
  EXPECT_GT(small, 0);
  EXPECT_GT(mid, small);
  EXPECT_GT(large, mid);
  // Two calls of each communicator run one after the other: twice the time.
  const double two = simulateAllReduce(comms, 256 * 1024, 2);
  EXPECT_NEAR(two, 2 * mid, 1e-4 * mid);
  // The dropped calls took no sequence number: the communicators still agree and compute.
  Buffers b(4, 1000);
  ASSERT_EQ(tribGroupStart(), tribSuccess);
  queueAllReduce(comms, b, 1000);
  ASSERT_EQ(tribGroupEnd(), tribSuccess) << lastError();
  for (const auto& out : b.recv) EXPECT_EQ(out[999], 10.f);
}

// The same call through trib-plan: same topology file, same forced algorithm, same ranks.
TEST(GroupSimulateEnd, MatchesTribPlanSimulate) {
  char dir[] = "/tmp/trib-groupsim-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string topo = std::string(dir) + "/host.topo";
  FILE* f = std::fopen(topo.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("node cpu0 cpu\n", f);
  std::fclose(f);
  setenv("TRIB_TOPO_FILE", topo.c_str(), 1);
  for (const char* algo : {"ring", "tree"}) {
    setenv("TRIB_ALGO", (std::string("allreduce:") + algo).c_str(), 1);
    for (size_t bytes : {size_t{64} << 10, size_t{8} << 20}) {
      double ours = 0;
      {
        Comms comms(4);
        ours = simulateAllReduce(comms, bytes / 4);
      }
      const std::string cmd = std::string(TRIB_PLAN_PATH) + " --topo " + topo +
                              " --ranks 4 --coll allreduce --dtype float32 --executable-only --bytes " +
                              std::to_string(bytes) + " --simulate --algo " + algo;
      FILE* p = popen(cmd.c_str(), "r");
      ASSERT_NE(p, nullptr);
      std::string out;
      char line[512];
      while (std::fgets(line, sizeof line, p)) out += line;
      ASSERT_EQ(pclose(p), 0) << cmd << "\n" << out;
      const std::string key = std::string("simulated ") + algo + ": time ";
      const size_t at = out.find(key);
      ASSERT_NE(at, std::string::npos) << out;
      const double theirs = std::atof(out.c_str() + at + key.size());
      std::printf("%s all-reduce of %zu B on 4 ranks: tribGroupSimulateEnd %.3f us, trib-plan %.1f us\n",
                  algo, bytes, ours, theirs);
      // trib-plan prints one decimal; the estimate is a float.
      EXPECT_NEAR(ours, theirs, 0.051 + 1e-6 * theirs) << algo << " " << bytes << " B\n" << out;
    }
  }
  unsetenv("TRIB_ALGO");
  unsetenv("TRIB_TOPO_FILE");
  std::remove(topo.c_str());
  rmdir(dir);
}

TEST(GroupSimulateEnd, BadInputIsRefusedAndTheGroupStaysOpen) {
  tribSimInfo_t info = TRIB_SIM_INFO_INITIALIZER;
  EXPECT_EQ(tribGroupSimulateEnd(&info), tribInvalidUsage);
  EXPECT_NE(lastError().find("without a matching tribGroupStart"), std::string::npos) << lastError();

  Comms comms(2);
  Buffers b(2, 100);
  ASSERT_EQ(tribGroupStart(), tribSuccess);
  queueAllReduce(comms, b, 100);
  EXPECT_EQ(tribGroupSimulateEnd(nullptr), tribInvalidArgument);
  EXPECT_NE(lastError().find("info is NULL"), std::string::npos) << lastError();
  tribSimInfo_t zero;
  std::memset(&zero, 0, sizeof zero);
  zero.size = sizeof zero;
  EXPECT_EQ(tribGroupSimulateEnd(&zero), tribInvalidArgument);
  EXPECT_NE(lastError().find("TRIB_SIM_INFO_INITIALIZER"), std::string::npos) << lastError();
  tribSimInfo_t small = TRIB_SIM_INFO_INITIALIZER;
  small.size = offsetof(tribSimInfo_t, estimatedTime);
  EXPECT_EQ(tribGroupSimulateEnd(&small), tribInvalidArgument);
  EXPECT_NE(lastError().find("size 16"), std::string::npos) << lastError();
  tribSimInfo_t old = TRIB_SIM_INFO_INITIALIZER;
  old.version = 99;
  EXPECT_EQ(tribGroupSimulateEnd(&old), tribInvalidArgument);
  EXPECT_NE(lastError().find("version 99"), std::string::npos) << lastError();
  // A nested group is not the one that runs.
  ASSERT_EQ(tribGroupStart(), tribSuccess);
  EXPECT_EQ(tribGroupSimulateEnd(&info), tribInvalidUsage);
  EXPECT_NE(lastError().find("nested"), std::string::npos) << lastError();
  EXPECT_EQ(tribGroupEnd(), tribSuccess);
  EXPECT_EQ(info.estimatedTime, -1.0f) << "a refused simulation wrote its result";
  // Nothing was dropped: the group still ends and runs its calls.
  ASSERT_EQ(tribGroupEnd(), tribSuccess) << lastError();
  for (const auto& out : b.recv) EXPECT_EQ(out[99], 3.f);

  // A split makes a communicator: a group holding one is refused, and still runs when ended.
  std::vector<tribComm_t> sub(2, nullptr);
  ASSERT_EQ(tribGroupStart(), tribSuccess);
  for (int r = 0; r < 2; ++r)
    ASSERT_EQ(tribCommSplit(comms.c[r], 0, r, &sub[r], nullptr), tribSuccess) << lastError();
  EXPECT_EQ(tribGroupSimulateEnd(&info), tribInvalidUsage);
  EXPECT_NE(lastError().find("tribCommSplit"), std::string::npos) << lastError();
  ASSERT_EQ(tribGroupEnd(), tribSuccess) << lastError();
  for (tribComm_t s : sub) {
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(tribCommDestroy(s), tribSuccess);
  }
}

// A pre-multiplied sum is scaled when its call is made: its operator may be destroyed before the
// group ends, which then runs (or simulates) a plain sum of the scaled input.
TEST(GroupSimulateEnd, PreMulSumInAGroup) {
  Comms comms(2);
  std::vector<tribRedOp_t> ops(2);
  float half = 0.5f;
  for (int r = 0; r < 2; ++r)
    ASSERT_EQ(tribRedOpCreatePreMulSum(&ops[r], &half, tribFloat32, tribScalarHostImmediate, comms.c[r]),
              tribSuccess);
  Buffers b(2, 64);
  ASSERT_EQ(tribGroupStart(), tribSuccess);
  for (int r = 0; r < 2; ++r)
    ASSERT_EQ(tribAllReduce(b.send[r].data(), b.recv[r].data(), 64, tribFloat32, ops[r], comms.c[r], nullptr),
              tribSuccess)
        << lastError();
  for (int r = 0; r < 2; ++r) ASSERT_EQ(tribRedOpDestroy(ops[r], comms.c[r]), tribSuccess);
  ASSERT_EQ(tribGroupEnd(), tribSuccess) << lastError();
  for (const auto& out : b.recv) EXPECT_EQ(out[63], 1.5f);  // 0.5 * 1 + 0.5 * 2

  for (int r = 0; r < 2; ++r)
    ASSERT_EQ(tribRedOpCreatePreMulSum(&ops[r], &half, tribFloat32, tribScalarHostImmediate, comms.c[r]),
              tribSuccess);
  Buffers c(2, 64);
  ASSERT_EQ(tribGroupStart(), tribSuccess);
  for (int r = 0; r < 2; ++r)
    ASSERT_EQ(tribAllReduce(c.send[r].data(), c.recv[r].data(), 64, tribFloat32, ops[r], comms.c[r], nullptr),
              tribSuccess);
  tribSimInfo_t info = TRIB_SIM_INFO_INITIALIZER;
  ASSERT_EQ(tribGroupSimulateEnd(&info), tribSuccess) << lastError();
  EXPECT_GT(info.estimatedTime, 0);
  for (const auto& out : c.recv) EXPECT_EQ(out[63], -7.f);
  for (int r = 0; r < 2; ++r) EXPECT_EQ(tribRedOpDestroy(ops[r], comms.c[r]), tribSuccess);
}

// Sends and receives are dropped with the group and not timed.
TEST(GroupSimulateEnd, SendRecvAreDroppedUntimed) {
  Comms comms(2);
  std::vector<float> x(16, 1.f), y(16, -7.f);
  ASSERT_EQ(tribGroupStart(), tribSuccess);
  ASSERT_EQ(tribSend(x.data(), 16, tribFloat32, 1, comms.c[0], nullptr), tribSuccess) << lastError();
  ASSERT_EQ(tribRecv(y.data(), 16, tribFloat32, 0, comms.c[1], nullptr), tribSuccess) << lastError();
  tribSimInfo_t info = TRIB_SIM_INFO_INITIALIZER;
  ASSERT_EQ(tribGroupSimulateEnd(&info), tribSuccess) << lastError();
  EXPECT_EQ(info.estimatedTime, 0.0f);
  EXPECT_EQ(y[0], -7.f);
  // The pair still matches afterwards (no sequence number was taken).
  ASSERT_EQ(tribGroupStart(), tribSuccess);
  ASSERT_EQ(tribSend(x.data(), 16, tribFloat32, 1, comms.c[0], nullptr), tribSuccess);
  ASSERT_EQ(tribRecv(y.data(), 16, tribFloat32, 0, comms.c[1], nullptr), tribSuccess);
  ASSERT_EQ(tribGroupEnd(), tribSuccess) << lastError();
  EXPECT_EQ(y[15], 1.f);
}

}  // namespace
