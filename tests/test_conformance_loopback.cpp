// The conformance suite over the loopback transport: ranks are threads of this process, each
// joined through tribCommInitRankConfig with the algorithm forced by the config struct.
#include <gtest/gtest.h>

#include <cstdlib>
#include <thread>

#include "conformance.hpp"

namespace trib::conformance {
namespace {

void runThreaded(const Case& c) {
  // Strict, so a forced algorithm that quietly ran another one fails the case; except for those
  // that need what threads of one host lack (hierarchical: several domains), which run the fallback.
  Algo forced;
  const bool strict = !c.algo.empty() && parseAlgo(c.algo, &forced) && !algoNeeds(forced);
  if (strict) setenv("TRIB_ALGO_STRICT", "1", 1);
  struct Unset {
    ~Unset() { unsetenv("TRIB_ALGO_STRICT"); }
  } unset;
  tribUniqueId id;
  ASSERT_EQ(tribGetUniqueId(&id), tribSuccess);
  std::vector<std::string> errors(c.nranks);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < c.nranks; ++rank) {
    threads.emplace_back([&, rank] {
      tribConfig_t cfg = TRIB_CONFIG_INITIALIZER;
      cfg.algo = c.algo.c_str();
      cfg.timeoutMs = 60000;
      cfg.chunkBytes = 4096;  // small slices: exercise pipelining even on small buffers
      tribComm_t comm = nullptr;
      tribResult_t r = tribCommInitRankConfig(&comm, c.nranks, id, rank, &cfg);
      if (r != tribSuccess) {
        errors[rank] = std::string("init: ") + tribGetLastError(nullptr);
        return;
      }
      RankBuffers b;
      prepare(c, rank, &b);
      r = runCase(c, comm, &b);
      if (r != tribSuccess) {
        errors[rank] = std::string("call: ") + tribGetErrorString(r) + ": " + tribGetLastError(nullptr);
      } else {
        errors[rank] = check(c, rank, b);
      }
      tribCommDestroy(comm);
    });
  }
  for (auto& t : threads) t.join();
  for (int rank = 0; rank < c.nranks; ++rank) EXPECT_EQ(errors[rank], "") << "rank " << rank;
}

class Structural : public ::testing::TestWithParam<Case> {};
TEST_P(Structural, MatchesReference) { runThreaded(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Loopback, Structural,
                         ::testing::ValuesIn(structuralCases({1, 2, 3, 4, 5, 7, 8, 16}, {0, 1, 7, 4093})),
                         [](const auto& info) { return info.param.name(); });

// >= 1 MiB, odd element count: many pipeline slices per block.
class Large : public ::testing::TestWithParam<Case> {};
TEST_P(Large, MatchesReference) { runThreaded(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Loopback, Large, ::testing::ValuesIn(structuralCases({2, 3, 4, 7}, {262147})),
                         [](const auto& info) { return info.param.name(); });

class Arithmetic : public ::testing::TestWithParam<Case> {};
TEST_P(Arithmetic, MatchesReference) { runThreaded(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Loopback, Arithmetic, ::testing::ValuesIn(arithmeticCases({3, 4}, {7, 4093})),
                         [](const auto& info) { return info.param.name(); });

}  // namespace
}  // namespace trib::conformance
