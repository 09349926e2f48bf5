// trib-info: what this build of Tributary contains and every environment variable it reads.
#include <cstdio>

#include "algo/schedule.hpp"
#include "common/env.hpp"
#include "reduce/reduce.hpp"
#include "tributary/tributary.h"

int main() {
  std::printf("Tributary %s\n", TRIB_VERSION_STRING);
  std::printf("  reduce kernels : %s\n", trib::reduceIsa());
#ifdef TRIB_HAVE_UCX
  std::printf("  UCX transport  : built\n");
#else
  std::printf("  UCX transport  : not built (libucx-dev not found)\n");
#endif
  std::printf("  transports     : loopback");
#ifdef TRIB_HAVE_SHM
  std::printf(", shm");
#endif
#ifdef TRIB_HAVE_UCX
  std::printf(", ucx");
#endif
  std::printf("\n\nAlgorithms:\n");
  for (int c = 0; c < trib::kNumColls; ++c) {
    auto coll = static_cast<trib::Coll>(c);
    std::printf("  %-14s", trib::collName(coll));
    for (const trib::AlgoInfo* a : trib::algorithmsFor(coll)) std::printf(" %s", trib::algoName(a->algo));
    std::printf("\n");
  }
  std::printf("\nEnvironment variables:\n");
  for (const trib::EnvVarInfo& v : trib::envVars()) {
    std::printf("  %-20s default '%s'\n      %s\n", v.name, v.defaultValue, v.doc);
  }
  return 0;
}
