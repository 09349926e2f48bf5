// trib-topo: detect the local machine, generate a system's topology, or summarise a topology file.
//   trib-topo detect [-o FILE]
//   trib-topo gen SYSTEM [key=value ...] [-o FILE]     (trib-topo gen --help lists the systems)
//   trib-topo show FILE | trib-topo show --gen SYSTEM [key=value ...]
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "topo/topology.hpp"

using namespace trib;

static int usage() {
  std::fprintf(stderr,
               "usage: trib-topo detect [-o FILE]\n"
               "       trib-topo gen SYSTEM [key=value ...] [-o FILE]\n"
               "       trib-topo show FILE | show --gen SYSTEM [key=value ...]\n"
               "       trib-topo gen --help\n"
               "systems: %s\nparams: %s\n",
               kGeneratorSystems, kGeneratorParams);
  return 2;
}

static void show(const Topology& t) {
  std::printf("topology %s\n", t.name.c_str());
  std::printf("nodes %d:", t.numNodes());
  for (int i = 0; i < kNumNodeTypes; ++i) {
    int c = t.countType(static_cast<NodeType>(i));
    if (c) std::printf(" %d %s", c, nodeTypeName(static_cast<NodeType>(i)));
  }
  std::printf("\nlinks %d:", t.numLinks());
  for (int ty = 0; ty < kNumLinkTypes; ++ty) {
    int c = 0;
    double bw = 0;
    for (int i = 0; i < t.numLinks(); ++i)
      if (static_cast<int>(t.link(i).type) == ty) ++c, bw += t.link(i).bwAB;
    if (c)
      std::printf(" %d %s (%.0f GB/s total per direction)", c, linkTypeName(static_cast<LinkType>(ty)), bw);
  }
  std::printf("\nranks %zu (%s), NVLink domains %d, hosts %d\n", t.rankNodes().size(),
              t.rankNodes().empty() ? "-" : nodeTypeName(t.node(t.rankNodes()[0]).type), t.numDomains(),
              t.numHosts());
  int reducers = 0;
  for (int i = 0; i < t.numNodes(); ++i) reducers += t.node(i).reduce.can();
  std::printf("bisection bandwidth %.1f GB/s per direction\n", t.bisectionGBps());
  std::printf("reduce-capable switches %d, aggregation trees %zu\n", reducers, t.aggTrees().size());
}

static int finish(const Topology& t, const std::string& outFile) {
  if (outFile.empty()) {
    std::fputs(dumpTopology(t).c_str(), stdout);
    return 0;
  }
  Status s = dumpTopologyFile(t, outFile);
  if (!s.ok()) {
    std::fprintf(stderr, "trib-topo: %s\n", s.message().c_str());
    return 1;
  }
  show(t);
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  std::string cmd = argv[1], out;
  std::vector<std::string> args;
  for (int i = 2; i < argc; ++i) {
    if (!std::strcmp(argv[i], "-o") && i + 1 < argc)
      out = argv[++i];
    else
      args.push_back(argv[i]);
  }
  Topology t;
  Status s;
  if (cmd == "detect") {
    std::string log;
    t = detectLocal(&log);
    std::fprintf(stderr, "detected: %s\n", log.c_str());
    return finish(t, out);
  }
  if (cmd == "gen") {
    if (args.empty()) return usage();
    if (args[0] == "--help" || args[0] == "-h") {
      std::printf("usage: trib-topo gen SYSTEM [key=value ...] [-o FILE]\nsystems:\n%sparams: %s\n",
                  generatorHelp(), kGeneratorParams);
      return 0;
    }
    s = generateTopology(args[0], {args.begin() + 1, args.end()}, &t);
    if (!s.ok()) {
      std::fprintf(stderr, "trib-topo: %s\n", s.message().c_str());
      return 1;
    }
    return finish(t, out);
  }
  if (cmd == "show") {
    if (args.empty()) return usage();
    if (args[0] == "--gen" && args.size() > 1)
      s = generateTopology(args[1], {args.begin() + 2, args.end()}, &t);
    else
      s = loadTopologyFile(args[0], &t);
    if (!s.ok()) {
      std::fprintf(stderr, "trib-topo: %s\n", s.message().c_str());
      return 1;
    }
    show(t);
    return 0;
  }
  return usage();
}
