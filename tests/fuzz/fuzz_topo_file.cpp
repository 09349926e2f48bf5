// Topology files (src/topo/topo_file.cpp, docs/TOPOLOGY.md), as a user writes them or another host
// dumps them. parseTopology must refuse with a message naming the source, or accept a topology
// whose dump parses again to the same dump (the format is closed under its own writer).
#include <string>

#include "fuzz_check.hpp"
#include "topo/topology.hpp"

using namespace trib;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 16384) return 0;  // real files are a few KB; longer inputs only slow the search
  const std::string text(reinterpret_cast<const char*>(data), size);
  Topology t;
  Status st = parseTopology(text, &t, "fuzz.topo");
  if (!st.ok()) {
    FUZZ_CHECK(st.message().find("fuzz.topo") != std::string::npos);
    return 0;
  }
  FUZZ_CHECK(t.validate().ok());
  const std::string dump = dumpTopology(t);
  Topology again;
  st = parseTopology(dump, &again, "dump");
  if (!st.ok()) std::fprintf(stderr, "the dump does not parse: %s\n%s", st.message().c_str(), dump.c_str());
  FUZZ_CHECK(st.ok());
  FUZZ_CHECK(dumpTopology(again) == dump);
  return 0;
}
