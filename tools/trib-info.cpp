// trib-info: what this build of Tributary contains and every environment variable it reads.
#include <cstdio>
#include <cstring>

#include "algo/schedule.hpp"
#include "common/env.hpp"
#include "core/comm.hpp"
#include "reduce/reduce.hpp"
#include "transports/registry.hpp"
#include "transports/switch/switch_link.hpp"
#include "tributary/tributary.h"

int main(int argc, char** argv) {
  if (argc > 1) {  // it takes none: say so rather than ignore a mistyped option
    const bool help = std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0;
    std::fprintf(help ? stdout : stderr,
                 "%susage: trib-info  (no arguments: prints what this build contains and every environment "
                 "variable Tributary reads)\n",
                 help ? "" : "trib-info: takes no arguments\n");
    return help ? 0 : 2;
  }
  std::printf("Tributary %s\n", TRIB_VERSION_STRING);
  std::printf("  reduce kernels : %s\n", trib::reduceIsa());
  // From the tables the library chooses from, so this cannot drift from what the build has.
  std::printf("  transports     :");
  const char* sep = " ";
  for (const trib::TransportDescriptor& t : trib::transportRegistry()) {
    if (!t.notBuilt) std::printf("%s%s (%s)", sep, t.name, t.reaches), sep = ", ";
  }
  for (const trib::TransportDescriptor& t : trib::transportRegistry()) {
    if (t.notBuilt) std::printf("\n                   %s: not built (%s)", t.name, t.notBuilt);
  }
  // What each can do, in the order the registry prefers them for a pair of ranks.
  for (const trib::TransportDescriptor& t : trib::transportRegistry()) {
    if (t.notBuilt) continue;
    std::printf("\n    %-10s priority %d; reads %s; writes %s; reduces into %s; %s%s%s", t.name, t.priority,
                trib::memoryKindSetNames(t.caps.reads).c_str(),
                trib::memoryKindSetNames(t.caps.writes).c_str(),
                trib::memoryKindSetNames(t.caps.reduces).c_str(), t.caps.twoSided ? "two-sided" : "",
                t.caps.windows ? ", windows" : "", t.caps.zeroCopy ? ", zero-copy" : "");
    if (t.caps.probed)
      std::printf("\n               %s only where this process can (probed at connect)",
                  trib::memoryKindSetNames(t.caps.probed).c_str());
  }
  // Window providers (device windows): never a pair's transport, connected beside them.
  for (const trib::TransportDescriptor& t : trib::windowProviderRegistry()) {
    if (t.notBuilt)
      std::printf("\n  windows        : %s: not built (%s)", t.name, t.notBuilt);
    else
      std::printf("\n  windows        : %s (%s); reads %s; writes %s; windows only%s", t.name, t.reaches,
                  trib::memoryKindSetNames(t.caps.reads).c_str(),
                  trib::memoryKindSetNames(t.caps.writes).c_str(), t.caps.zeroCopy ? ", zero-copy" : "");
  }
  std::printf("\n  switch client  : links");
  sep = " ";
  for (trib::sw::LinkKind k : {trib::sw::LinkKind::Tcp, trib::sw::LinkKind::Ucx}) {
    if (trib::sw::linkKindAvailable(k)) std::printf("%s%s", sep, trib::sw::linkKindName(k)), sep = ", ";
  }
  std::printf(" (used with TRIB_SWITCH or a topology switch with addr=)");
  std::printf("\n\nAlgorithms:\n");
  for (int c = 0; c < trib::kNumColls; ++c) {
    auto coll = static_cast<trib::Coll>(c);
    // Those that always run, then each that runs only when the communicator has what it needs.
    std::printf("  %-14s", trib::collName(coll));
    for (const trib::AlgoInfo* a : trib::algorithmsFor(coll)) {
      if (!trib::algoNeeds(a->algo)) std::printf(" %s", trib::algoName(a->algo));
    }
    std::printf("\n");
    for (const trib::AlgoInfo* a : trib::algorithmsFor(coll)) {
      if (const char* needs = trib::algoNeeds(a->algo))
        std::printf("  %-14s %s (needs %s)\n", "", trib::algoName(a->algo), needs);
    }
  }
  std::printf("\nEnvironment variables:\n");
  for (const trib::EnvVarInfo& v : trib::envVars()) {
    std::printf("  %-20s default '%s'\n      %s\n", v.name, v.defaultValue, v.doc);
  }
  return 0;
}
