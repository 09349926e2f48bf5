// trib-plan: what the planner would choose, and why, on a topology (a file or a generated system).
//   trib-plan (--topo FILE | --gen SYSTEM[,key=value...]) --coll allreduce --bytes 1G [--ranks N]
//             [--dtype float32] [--op sum] [--mem host|device] [--explain] [--sweep [--json FILE]]
//             [--simulate [--no-symmetry] [--hashed-routes] [--posting-order|--interleave-links]]
//             [--algo NAME]
//             [--executable-only] [--algo-override "allreduce:^ring"] [--tune "allreduce:0-64k:@tree"]
//             [--proto "^LL"]  (protocols GPU ranks may be planned with; default all, TRIB_PROTO's form)
//             [--remote-windows]  (every rank's 2 MiB window reached by RDMA, as over verbs)
//             [--attached-switch GBPS[:LATUS[:TIERS[:FANIN]]]]  (as a communicator with trib-switchd
//             attached: switch plans executable, predicted from these figures)
//   trib-plan --calibrate --measured PERF.json [--measured ...] [--mem-gbps X] [--topo FILE]
//             the prediction on this machine's topology (or FILE), ranks placed as the communicator
//             places them, next to trib-perf's measured busbw (docs/PLANNER.md, bench/calibrate.sh)
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/comm.hpp"
#include "plan/calibrate.hpp"
#include "plan/planner.hpp"
#include "sim/sim_plan.hpp"

using namespace trib;

static int usage() {
  std::fprintf(
      stderr,
      "usage: trib-plan (--topo FILE | --gen SYSTEM[,key=value...]) [--coll allreduce] [--bytes 1G]\n"
      "                 [--ranks N] [--dtype float32] [--op sum] [--mem host|device] [--explain]\n"
      "                 [--sweep [--json FILE]]\n"
      "                 [--simulate [--no-symmetry] [--hashed-routes] "
      "[--posting-order|--interleave-links]] [--algo NAME] "
      "[--executable-only]\n"
      "                 [--algo-override SPEC] [--tune SPEC] [--proto SPEC] [--attached-switch "
      "GBPS[:LATUS[:TIERS[:FANIN]]]]\n"
      "                 [--remote-windows]  (2 MiB windows reached by RDMA, as over verbs)\n"
      "       (without --topo/--gen: this host's topology, as a communicator detects it;\n"
      "        --mem: where the buffers live, which places the ranks: device on GPUs, host on CPUs;\n"
      "        default device when the topology has GPUs;\n"
      "        --no-symmetry: nvls/nvls_switch/nvls_ring/nvls_tree simulate every NVLink domain, not one per "
      "class of\n"
      "        identical ones, and ring every rank, not one period of alike ones (a rack);\n"
      "        --hashed-routes: each rank pair's messages on one hashed path (static ECMP), not\n"
      "        spread over the equal-cost spine links as adaptive routing does;\n"
      "        default: a rank's link serves the schedule's channels (the double tree's two\n"
      "        trees) round robin, each in posting order (--interleave-channels, as before);\n"
      "        --posting-order: one queue in posting order, for comparison; --interleave-links:\n"
      "        it serves its peers round robin)\n"
      "       trib-plan --calibrate --measured PERF.json [--measured ...] [--mem-gbps X] [--topo FILE]\n"
      "                 (PERF.json from trib-perf -J; X: memory rate, default the run's memcpy_GBps)\n"
      "systems: %s (trib-topo gen --help)\n",
      kGeneratorSystems);
  return 2;
}

static int fail(const Status& s) {
  std::fprintf(stderr, "trib-plan: %s\n", s.message().c_str());
  return 1;
}

int main(int argc, char** argv) {
  std::string topoFile, gen, coll = "allreduce", bytesS = "1G", dtypeS = "float32", opS = "sum", algoS, over,
                             proto, tune, memS;
  int ranks = 0;
  bool remoteWindows = false;  // --remote-windows
  bool explain = false, sweep = false, simulateIt = false, execOnly = false, calib = false, symmetry = true,
       spreadRoutes = true;
  SimOptions::LinkOrder linkOrder = SimOptions::LinkOrder::Channels;
  std::vector<std::string> measured;
  double memGBps = -1;    // < 0: each run's own memcpy_GBps
  std::string attached;   // --attached-switch
  std::string sweepJson;  // --json: the sweep, every algorithm's prediction per size (tools/plot_busbw.py)
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--topo")
      topoFile = val();
    else if (a == "--gen")
      gen = val();
    else if (a == "--coll")
      coll = val();
    else if (a == "--bytes" || a == "-b")
      bytesS = val();
    else if (a == "--ranks" || a == "-n") {
      const std::string v = val();
      char* end = nullptr;
      const long long n = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end != 0 || n < 1 || n > INT32_MAX)
        return fail(
            errorf(tribInvalidArgument, "--ranks '%s' must be an integer in [1, %d]", v.c_str(), INT32_MAX));
      ranks = static_cast<int>(n);
    } else if (a == "--dtype" || a == "-d")
      dtypeS = val();
    else if (a == "--op" || a == "-o")
      opS = val();
    else if (a == "--mem")
      memS = val();
    else if (a == "--algo")
      algoS = val();
    else if (a == "--algo-override")
      over = val();
    else if (a == "--tune")
      tune = val();
    else if (a == "--proto")
      proto = val();
    else if (a == "--remote-windows")
      remoteWindows = true;
    else if (a == "--explain")
      explain = true;
    else if (a == "--sweep")
      sweep = true;
    else if (a == "--json")
      sweepJson = val();
    else if (a == "--simulate")
      simulateIt = true;
    else if (a == "--no-symmetry")
      symmetry = false;
    else if (a == "--hashed-routes")
      spreadRoutes = false;
    else if (a == "--interleave-links")
      linkOrder = SimOptions::LinkOrder::Peers;
    else if (a == "--interleave-channels")  // the default; kept so that older commands still run
      linkOrder = SimOptions::LinkOrder::Channels;
    else if (a == "--posting-order")
      linkOrder = SimOptions::LinkOrder::Posting;
    else if (a == "--executable-only")
      execOnly = true;
    else if (a == "--calibrate")
      calib = true;
    else if (a == "--measured")
      measured.push_back(val());
    else if (a == "--attached-switch")
      attached = val();
    else if (a == "--mem-gbps") {
      const std::string v = val();
      char* end = nullptr;
      memGBps = std::strtod(v.c_str(), &end);
      if (v.empty() || *end || !(memGBps > 0 && std::isfinite(memGBps)))
        return fail(
            errorf(tribInvalidArgument, "--mem-gbps '%s' must be a positive number (GB/s)", v.c_str()));
    } else
      return usage();
  }
  Topology topo;
  if (!topoFile.empty()) {
    Status s = loadTopologyFile(topoFile, &topo);
    if (!s.ok()) return fail(s);
  } else if (!gen.empty()) {
    std::vector<std::string> parts;
    std::string cur;
    for (char c : gen + ",") {
      if (c == ',')
        parts.push_back(cur), cur.clear();
      else
        cur += c;
    }
    Status s = generateTopology(parts[0], {parts.begin() + 1, parts.end()}, &topo);
    if (!s.ok()) return fail(s);
  } else {
    Status s = topologyFromEnv(&topo);  // what the communicator plans on: TRIB_TOPO_FILE, else detected
    if (!s.ok()) return fail(s);
  }
  if (!sweepJson.empty() && !sweep) return fail(errorf(tribInvalidArgument, "--json goes with --sweep"));
  // --algo names what --simulate replays; alone it would do nothing, so say so rather than ignore it.
  PlanAlgo simAlgo{};
  if (!algoS.empty() && !parsePlanAlgo(algoS, &simAlgo))
    return fail(errorf(tribInvalidArgument, "--algo: unknown algorithm '%s' (%s)", algoS.c_str(),
                       planAlgoNames().c_str()));
  if (!algoS.empty() && !simulateIt)
    return fail(errorf(tribInvalidArgument,
                       "--algo %s picks the algorithm --simulate replays; without --simulate it does nothing "
                       "(to force the plan's choice: --algo-override %s)",
                       algoS.c_str(), algoS.c_str()));
  if (calib) {
    if (measured.empty()) return fail(errorf(tribInvalidArgument, "--calibrate needs --measured PERF.json"));
    std::printf("# topology %s (%d nodes, %d links)\n", topo.name.c_str(), topo.numNodes(), topo.numLinks());
    for (const std::string& file : measured) {
      PerfRun run;
      Status s = loadPerfJson(file, &run);
      if (!s.ok()) return fail(s);
      const double mem = memGBps >= 0 ? memGBps : run.memcpyGBps;
      std::vector<CalibrationRow> rows;
      std::string fabric;
      s = calibrate(topo, placeRanks(topo, RankPlacement::singleHost(run.ranks), false).host, run, mem, &rows,
                    &fabric);
      if (!s.ok()) return fail(s.prefix(file + ": "));
      std::printf("# %s: %s\n%s", file.c_str(), fabric.c_str(), formatCalibration(run, mem, rows).c_str());
    }
    return 0;
  }
  PlanRequest req;
  if (!parseColl(coll, &req.coll))
    return fail(errorf(tribInvalidArgument, "unknown collective '%s'", coll.c_str()));
  Status s = parseSize(bytesS, &req.bytes);
  if (!s.ok()) return fail(s);
  if (!parseDataType(dtypeS.c_str(), &req.dtype))
    return fail(errorf(tribInvalidArgument, "unknown dtype '%s'", dtypeS.c_str()));
  if (!parseRedOp(opS.c_str(), &req.op))
    return fail(errorf(tribInvalidArgument, "unknown op '%s'", opS.c_str()));
  const bool gpus = !topo.rankNodes().empty() && topo.node(topo.rankNodes()[0]).type == NodeType::Gpu;
  if (memS.empty())
    req.memory = gpus ? MemoryKind::Device : MemoryKind::Host;
  else if (memS == "host" || memS == "device")
    req.memory = memS == "host" ? MemoryKind::Host : MemoryKind::Device;
  else
    return fail(errorf(tribInvalidArgument, "--mem '%s': want host or device", memS.c_str()));
  req.nranks = ranks > 0 ? ranks : static_cast<int>(topo.rankNodes().size());
  // GPUs take one rank each; CPUs take any number (processes of one host).
  if (gpus && req.memory == MemoryKind::Device && req.nranks > static_cast<int>(topo.rankNodes().size()))
    return fail(errorf(tribInvalidArgument, "--ranks %d: topology '%s' has %zu GPUs, one rank each",
                       req.nranks, topo.name.c_str(), topo.rankNodes().size()));
  req.includeModelOnly = !execOnly;
  if (remoteWindows) {  // as a communicator over verbs across hosts has them (TRIB_WINDOW_BYTES' default)
    req.remoteWindows = true;
    req.oneShotBytes = (2u << 20) / 2;
  }

  auto t0 = std::chrono::steady_clock::now();
  Planner planner(std::move(topo));
  s = planner.setOverrides(over, tune, proto);
  if (!s.ok()) return fail(s);
  if (!attached.empty()) {
    AttachedSwitch sw;
    sw.where = "--attached-switch";
    char* end = nullptr;
    const char* p = attached.c_str();
    double v[4] = {sw.gbps, sw.latUs, 1, 0};
    for (int f = 0; f < 4 && *p; ++f) {
      v[f] = std::strtod(p, &end);
      if (end == p || (*end && *end != ':'))
        return fail(errorf(tribInvalidArgument, "--attached-switch '%s': want GBPS[:LATUS[:TIERS[:FANIN]]]",
                           attached.c_str()));
      p = *end ? end + 1 : end;
    }
    if (!(v[0] > 0) || v[1] < 0 || v[2] < 1 || v[3] < 0)
      return fail(errorf(tribInvalidArgument, "--attached-switch '%s': GBPS > 0, LATUS >= 0, TIERS >= 1",
                         attached.c_str()));
    sw.gbps = v[0];
    sw.latUs = v[1];
    sw.tiers = static_cast<int>(v[2]);
    sw.fanIn = static_cast<int>(v[3]);
    planner.setAttachedSwitch(sw);
    // As the communicator registers them: slice groups for equal, contiguous domains.
    int domains = 0, perDomain = 0;
    bool uniform = false;
    planner.domainShape(req.nranks, MemoryKind::Host, &domains, &perDomain,
                        &uniform);  // the switch reads host memory
    if (domains > 1 && perDomain > 1 && uniform) req.sliceStride = perDomain;
  }
  Plan plan = planner.choose(req);
  double planMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  auto t1 = std::chrono::steady_clock::now();
  Plan again = planner.choose(req);
  double cachedUs = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t1).count();
  (void)again;
  const Topology& t = planner.topology();
  std::printf("# topology %s, %s memory: %s\n", t.name.c_str(), memoryKindName(req.memory),
              planner.fabric(req.nranks, req.memory).summary.c_str());
  if (explain || (!sweep && !simulateIt)) {
    std::fputs(formatExplain(req, planner.explain(req)).c_str(), stdout);
    auto xs = planner.crossovers(req, 8, 16ull << 30);
    std::printf("crossovers (8 B .. 16 GiB):");
    if (xs.empty()) std::printf(" none");
    for (const auto& x : xs) {
      Plan from, to;
      from.algo = x.from, from.protocol = x.fromProtocol, to.algo = x.to, to.protocol = x.toProtocol;
      std::printf(" %s -> %s at %s;", planName(from).c_str(), planName(to).c_str(),
                  formatBytes(x.bytes).c_str());
    }
    std::printf("\n");
  }
  std::printf("choice: %s\n", plan.why.c_str());
  std::printf("planning time: %.2f ms (first call, includes the fabric summary); cached call %.2f us\n",
              planMs, cachedUs);
  if (sweep) {
    FILE* json = nullptr;
    if (!sweepJson.empty() && !(json = std::fopen(sweepJson.c_str(), "w")))
      return fail(errorf(tribSystemError, "--json %s: %s", sweepJson.c_str(), std::strerror(errno)));
    if (json)
      std::fprintf(json, "{\"topology\":\"%s\",\"coll\":\"%s\",\"ranks\":%d,\"dtype\":\"%s\",\"sizes\":[",
                   t.name.c_str(), collName(req.coll), req.nranks, dataTypeName(req.dtype));
    std::printf("%12s  %-18s %12s %11s %11s\n", "size", "choice", "time(us)", "algbw(GB/s)", "busbw(GB/s)");
    for (uint64_t b = 8; b <= (16ull << 30); b *= 2) {
      PlanRequest r = req;
      r.bytes = b;
      Plan p = planner.choose(r);
      double alg = b / p.predictedUs / 1e3;
      std::printf("%12s  %-18s %12.1f %11.3f %11.3f\n", formatBytes(b).c_str(), planName(p).c_str(),
                  p.predictedUs, alg, alg * trib::busBandwidthFactor(req.coll, req.nranks));
      if (!json) continue;
      // Every algorithm the model prices at this size, chosen or not (the plot's lines).
      std::fprintf(json, "%s{\"size\":%llu,\"choice\":\"%s\",\"choice_protocol\":\"%s\",\"algorithms\":{",
                   b == 8 ? "" : ",", static_cast<unsigned long long>(b), planAlgoName(p.algo),
                   protocolName(p.protocol));
      bool first = true;
      for (const Candidate& c : planner.explain(r)) {
        if (!(c.plan.predictedUs > 0) || c.reason.find("unsupported") != std::string::npos) continue;
        std::fprintf(json, "%s\"%s\":{\"time_us\":%.6g,\"busbw\":%.6g,\"protocol\":\"%s\",\"eligible\":%s}",
                     first ? "" : ",", planAlgoName(c.plan.algo), c.plan.predictedUs, c.busbwGBps,
                     protocolName(c.plan.protocol), c.eligible ? "true" : "false");
        first = false;
      }
      std::fprintf(json, "}}");
    }
    if (json) {
      std::fprintf(json, "]}\n");
      std::fclose(json);
    }
  }
  if (simulateIt) {
    const PlanAlgo a = algoS.empty() ? plan.algo : simAlgo;
    // Ranks as the planner placed them for this memory (host memory: processes share CPU nodes).
    PlannedSim ps;
    SimOptions so;
    so.symmetry = symmetry;
    so.spreadRoutes = spreadRoutes;
    so.linkOrder = linkOrder;
    s = simulatePlanned(planner, req, a, &ps, {}, so);
    const SimResult& res = ps.sim;
    const double predictedUs = ps.predictedUs;
    if (!s.ok()) return fail(s);
    Plan simulated;
    simulated.algo = a, simulated.protocol = ps.protocol;
    const std::string simName = planName(simulated);
    std::printf(
        "simulated %s: time %.1f us, algbw %.2f GB/s, busbw %.2f GB/s (%llu steps, %llu messages, "
        "simulation took %.2f s)\n",
        simName.c_str(), res.timeUs, res.algbwGBps, res.busbwGBps, (unsigned long long)res.steps,
        (unsigned long long)res.messages, res.wallSeconds);
    if (res.domains > 1)
      std::printf(
          "  NVLink domains simulated: %zu of %zu (one per class of identical domains, docs/PLANNER.md)\n",
          res.simulatedDomains, res.domains);
    if (!res.reduction.empty()) std::printf("  %s\n", res.reduction.c_str());
    if (res.timeLowUs > 0)
      std::printf("  the full replay's time lies in [%.1f, %.1f] us (printed: the upper bound)\n",
                  res.timeLowUs, res.timeUs);
    if (predictedUs > 0)
      std::printf("model %s: time %.1f us (simulated / model = %.3f)\n", simName.c_str(), predictedUs,
                  res.timeUs / predictedUs);
    for (const auto& l : res.busiest)
      std::printf("  busiest: %-40s %10.3f GB moved, busy %5.1f%%\n", l.name.c_str(), l.bytes / 1e9,
                  100 * l.utilization);
    // The ranks that finish last pace the call: where to look when model and replay disagree.
    std::vector<int> order(res.rankEndUs.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    const size_t shown = std::min<size_t>(3, order.size());
    std::partial_sort(order.begin(), order.begin() + shown, order.end(),
                      [&](int a, int b) { return res.rankEndUs[a] > res.rankEndUs[b]; });
    for (size_t i = 0; i < shown; ++i)
      std::printf("  last: rank %d done at %.1f us\n", res.rankEndFirst + order[i], res.rankEndUs[order[i]]);
  }
  return 0;
}
