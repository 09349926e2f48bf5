// trib-verify: runs the symbolic verifier on one schedule (or the default set) and reports.
//   trib-verify [--ranks N] [--coll C] [--algo A] [--count N] [--chunk N] [--in-place] [--root R]
//               [--ranks-per-domain D] [--window-elems N] [--window-cell C] [--calls N]
// Without --coll/--algo it checks all-reduce ring, tree and rhd at 4,608 ranks, count 4,608.
// --calls N verifies N consecutive calls on one communicator (windows and their signals carry over).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "algo/schedule.hpp"
#include "verify/verify.hpp"

using namespace trib;

static void usage() {
  std::fprintf(
      stderr,
      "usage: trib-verify [--ranks N] [--coll C] [--algo A] [--count N] [--chunk N] [--root R] [--in-place]\n"
      "                   [--ranks-per-domain D] [--window-elems N] [--window-cell C] [--calls N]\n"
      "  C: allreduce reduce broadcast allgather reducescatter alltoall gather scatter barrier\n"
      "  A: ring tree rhd direct binomial chain hierarchical switch oneshot hier_switch twoshot\n"
      "     allgather_reduce\n"
      "     (default: every algorithm of C; with no --coll, allreduce ring, tree and rhd at 4608\n"
      "     ranks, count 4608)\n"
      "  --ranks-per-domain D  hierarchical, hier_switch, direct, allgather_reduce: ranks per\n"
      "                        domain (default 0: flat; direct and allgather_reduce send in\n"
      "                        rack order when D makes 2+ equal domains)\n"
      "  --window-elems N      oneshot, twoshot: each rank's window, two cells (default 524288:\n"
      "                        two cells of 1 MiB of 4-byte elements)\n"
      "  --window-cell C       the cell (0 or 1) the first call starts in\n"
      "  --calls N             N consecutive calls of the request on one communicator (default 1)\n");
}

static bool parseU64(const char* s, unsigned long long* out) {
  char* end = nullptr;
  *out = std::strtoull(s, &end, 10);
  return s[0] != '\0' && s[0] != '-' && end && *end == '\0';
}

int main(int argc, char** argv) {
  CollArgs args;
  args.nranks = 4608;
  args.count = 4608;
  args.windowElems = 2 * ((1u << 20) / 4);
  unsigned long long calls = 1;
  bool haveColl = false, haveAlgo = false;
  Algo algo = Algo::Ring;
  for (int i = 1; i < argc; ++i) {
    std::string opt = argv[i];
    auto value = [&](const char* name) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "trib-verify: %s needs a value\n", name);
        std::exit(2);
      }
      return argv[++i];
    };
    unsigned long long v = 0;
    if (opt == "--ranks" || opt == "--count" || opt == "--chunk" || opt == "--root" ||
        opt == "--ranks-per-domain" || opt == "--window-elems" || opt == "--window-cell" ||
        opt == "--calls") {
      const char* s = value(opt.c_str());
      if (!parseU64(s, &v) || (opt == "--ranks" && (v < 1 || v > 1u << 24)) || (opt == "--chunk" && v < 1) ||
          ((opt == "--root" || opt == "--ranks-per-domain") && v > 1u << 24) ||
          (opt == "--window-cell" && v > 1) || (opt == "--calls" && (v < 1 || v > 1000))) {
        std::fprintf(
            stderr,
            "trib-verify: bad value '%s' for %s (ranks 1..16M, chunk >= 1, window cell 0 or 1, calls "
            "1..1000)\n",
            s, opt.c_str());
        return 2;
      }
      if (opt == "--ranks-per-domain") args.ranksPerDomain = static_cast<int>(v);
      if (opt == "--window-elems") args.windowElems = v;
      if (opt == "--window-cell") args.windowCell = static_cast<int>(v);
      if (opt == "--calls") calls = v;
      if (opt == "--ranks") args.nranks = static_cast<int>(v);
      if (opt == "--count") args.count = v;
      if (opt == "--chunk") args.chunkElems = v;
      if (opt == "--root") args.root = static_cast<int>(v);
    } else if (opt == "--coll") {
      const char* s = value("--coll");
      if (!parseColl(s, &args.coll)) {
        std::fprintf(stderr, "trib-verify: unknown collective '%s'\n", s);
        usage();
        return 2;
      }
      haveColl = true;
    } else if (opt == "--algo") {
      const char* s = value("--algo");
      if (!parseAlgo(s, &algo)) {
        std::fprintf(stderr, "trib-verify: unknown algorithm '%s'\n", s);
        usage();
        return 2;
      }
      haveAlgo = true;
    } else if (opt == "--in-place") {
      args.inPlace = true;
    } else if (opt == "-h" || opt == "--help") {
      usage();
      return 0;
    } else {
      std::fprintf(stderr, "trib-verify: unknown option '%s'\n", opt.c_str());
      usage();
      return 2;
    }
  }
  if (args.root >= args.nranks) {
    std::fprintf(stderr, "trib-verify: --root %d is not below --ranks %d\n", args.root, args.nranks);
    return 2;
  }

  std::vector<const AlgoInfo*> todo;
  if (haveAlgo) {
    const AlgoInfo* info = findAlgorithm(args.coll, algo);
    if (!info) {
      std::fprintf(stderr, "trib-verify: no %s algorithm for %s; available:", algoName(algo),
                   collName(args.coll));
      for (const AlgoInfo* a : algorithmsFor(args.coll)) std::fprintf(stderr, " %s", algoName(a->algo));
      std::fprintf(stderr, "\n");
      return 2;
    }
    todo.push_back(info);
  } else {
    todo = algorithmsFor(args.coll);
    if (!haveColl) {
      std::erase_if(todo, [](const AlgoInfo* a) { return a->algo == Algo::Direct; });
    }
  }

  int failures = 0;
  for (const AlgoInfo* info : todo) {
    VerifyStats stats;
    // The window only matters to the algorithms that use one; the others keep their usual request.
    CollArgs a = args;
    if (!needsWindows(info->algo)) a.windowElems = 0;
    const std::vector<VerifyCall> seq(calls, VerifyCall{info, a});
    Status st = verifySequence(seq, &stats);
    std::string extra;
    if (needsWindows(info->algo))
      extra +=
          strprintf(" window %llu cell %d", static_cast<unsigned long long>(a.windowElems), a.windowCell);
    if (a.ranksPerDomain) extra += strprintf(" ranks/domain %d", a.ranksPerDomain);
    if (calls > 1) extra += strprintf(" x%llu calls", calls);
    std::printf("%-13s %-8s ranks %d count %llu chunk %llu root %d%s%s: %s\n", collName(args.coll),
                algoName(info->algo), args.nranks, static_cast<unsigned long long>(args.count),
                static_cast<unsigned long long>(args.chunkElems), args.root, args.inPlace ? " in-place" : "",
                extra.c_str(), st.ok() ? "OK" : "FAILED");
    if (!st.ok()) {
      std::printf("  %s\n", st.message().c_str());
      ++failures;
      continue;
    }
    std::printf(
        "  %llu steps (busiest rank %llu), %llu messages, %llu elements sent (max per rank: sent %llu, "
        "received %llu), %llu window steps, %llu signals, peak %llu runs, %.2f s\n",
        static_cast<unsigned long long>(stats.steps), static_cast<unsigned long long>(stats.maxRankSteps),
        static_cast<unsigned long long>(stats.messages), static_cast<unsigned long long>(stats.elementsSent),
        static_cast<unsigned long long>(stats.maxRankSent),
        static_cast<unsigned long long>(stats.maxRankRecv),
        static_cast<unsigned long long>(stats.windowSteps), static_cast<unsigned long long>(stats.signals),
        static_cast<unsigned long long>(stats.peakSegments), stats.seconds);
  }
  return failures ? 1 : 0;
}
