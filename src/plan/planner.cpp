// Planner: candidates, overrides, cache, explanations.
#include "plan/planner.hpp"
#include "common/env.hpp"
#include "common/log.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/text.hpp"

namespace trib {
namespace {

// CollArgs::count for a request (see PlanRequest::bytes).
uint64_t countOf(const PlanRequest& r) {
  uint64_t es = dataTypeSize(r.dtype);
  uint64_t c = es ? r.bytes / es : 0;
  switch (r.coll) {
    case Coll::AllGather:
    case Coll::ReduceScatter:
    case Coll::AlltoAll:
    case Coll::Gather:
    case Coll::Scatter:
      return r.nranks > 0 ? c / static_cast<uint64_t>(r.nranks) : c;
    default:
      return c;
  }
}

}  // namespace

Planner::Planner(Topology topo, RankNodes nodes, CostConstants k)
    : topo_(std::move(topo)), nodes_(std::move(nodes)), k_(k) {
  if (nodes_.device.empty()) nodes_.device = topo_.rankNodes();
  if (nodes_.host.empty()) nodes_.host = hostNodesOf(topo_, nodes_.device);
  router_ = std::make_unique<Router>(topo_);
}

std::vector<int> hostNodesOf(const Topology& topo, const std::vector<int>& device) {
  std::vector<int> host;
  host.reserve(device.size());
  for (int node : device) {
    const int cpu = topo.nearestCpu(node);
    if (cpu >= 0) host.push_back(cpu);
  }
  return host;
}

const std::vector<int>& Planner::placement(MemoryKind memory) const {
  // A topology without CPU nodes (a hand-written GPU file) places host calls on its rank nodes.
  return onHost(memory) && !nodes_.host.empty() ? nodes_.host : nodes_.device;
}

std::vector<int> Planner::rankNodes(MemoryKind memory, int nranks) const {
  const std::vector<int>& p = placement(memory);
  const bool repeat = onHost(memory) || (!p.empty() && topo_.node(p[0]).type != NodeType::Gpu);
  std::vector<int> out;
  for (int r = 0; r < nranks && !p.empty(); ++r) {
    if (r >= static_cast<int>(p.size()) && !repeat) break;
    out.push_back(p[r % p.size()]);
  }
  return out;
}

Status Planner::setOverrides(const std::string& algoSpec, const std::string& tuneSpec,
                             const std::string& protoSpec) {
  AlgoFilter f;
  std::vector<TuneRule> t;
  uint32_t protocols = 0;
  TRIB_RETURN_IF_ERROR(parseAlgoOverride(algoSpec, &f));
  TRIB_RETURN_IF_ERROR(parseTuneString(tuneSpec, &t));
  TRIB_RETURN_IF_ERROR(parseProtocolOverride(protoSpec, &protocols));
  std::lock_guard<std::mutex> g(mu_);
  filter_ = f;
  algoSpec_ = algoSpec;
  tune_ = std::move(t);
  protocols_ = protocols;
  protoSpec_ = protoSpec;
  cache_.clear();
  return Status::Ok();
}

Status Planner::setOverridesFromEnv() {
  return setOverrides(envString("TRIB_ALGO"), envString("TRIB_TUNE"), envString("TRIB_PROTO"));
}

std::string planName(const Plan& p) {
  return p.protocol == Protocol::Simple ? planAlgoName(p.algo)
                                        : strprintf("%s/%s", planAlgoName(p.algo), protocolName(p.protocol));
}

Status attachedSwitchFromEnv(AttachedSwitch* out) {
  AttachedSwitch s;
  const double bw = envDouble("TRIB_SWITCH_BW"), lat = envDouble("TRIB_SWITCH_LAT");
  if (!(bw > 0) || !std::isfinite(bw))
    return errorf(tribInvalidArgument,
                  "TRIB_SWITCH_BW=%s: want the switch's throughput in GB/s (> 0, e.g. 1.0)",
                  envString("TRIB_SWITCH_BW").c_str());
  if (!(lat >= 0) || !std::isfinite(lat))
    return errorf(tribInvalidArgument, "TRIB_SWITCH_LAT=%s: want a latency in microseconds (>= 0, e.g. 50)",
                  envString("TRIB_SWITCH_LAT").c_str());
  s.gbps = bw;
  s.latUs = lat;
  *out = s;
  return Status::Ok();
}

void Planner::setAttachedSwitch(const AttachedSwitch& sw) {
  std::lock_guard<std::mutex> g(mu_);
  attached_ = true;
  sw_ = sw;
  for (auto& f : fabrics_) f.clear();
  cache_.clear();
}

bool Planner::hasAttachedSwitch() const {
  std::lock_guard<std::mutex> g(mu_);
  return attached_;
}

void Planner::domainShape(int nranks, MemoryKind memory, int* domains, int* perDomain, bool* uniform) {
  std::lock_guard<std::mutex> g(mu_);
  const FabricView& f = fabric(nranks, memory);
  *domains = f.domains;
  *perDomain = f.perDomain;
  *uniform = f.uniform;
}

// The attached switch replaces the topology's switch figures (unless the topology describes it):
// every rank sends S up and receives S down through a switch that shares its throughput among its
// children, one tier after another.
static void applyAttachedSwitch(FabricView* f, const AttachedSwitch& sw, const CostConstants& k) {
  if (f->n < 2) return;
  if (sw.fromTopology && f->switchGBps > 0) {
    f->summary += strprintf("; the switch at %s is the topology's", sw.where.c_str());
    return;
  }
  const int fanIn = sw.fanIn > 0 ? std::min(sw.fanIn, f->n) : f->n;
  double perRank = sw.gbps / fanIn;
  if (f->bwInterLoaded > 0) perRank = std::min(perRank, f->bwInterLoaded);  // the host's NIC is shared
  f->switchGBps = perRank;
  f->switchTiers = std::max(1, sw.tiers);
  f->switchLatUs = sw.latUs * f->switchTiers + k.stepOverheadUs;
  ReduceCapability cap;
  cap.reduceGBps = sw.gbps;
  cap.dtypeMask = (1u << tribNumTypes) - 1;  // trib-switchd reduces with trib::reduce: every dtype
  cap.opMask = (1u << tribNumOps) - 1;       // avg travels as sum
  f->switchCap = cap;
  f->summary +=
      strprintf("; attached switch %s: %.2f GB/s per rank (%.2f over %d), %d tier(s), %.1f us one way",
                sw.where.c_str(), perRank, sw.gbps, fanIn, f->switchTiers, f->switchLatUs);
}

const FabricView& Planner::fabric(int nranks, MemoryKind memory) {
  auto& cache = fabrics_[onHost(memory)];
  auto it = cache.find(nranks);
  if (it != cache.end()) return it->second;
  // More ranks than CPUs: processes spread round-robin over them.
  FabricView f = computeFabric(topo_, *router_, rankNodes(memory, nranks), k_);
  if (attached_) applyAttachedSwitch(&f, sw_, k_);
  return cache.emplace(nranks, std::move(f)).first->second;
}

std::vector<Candidate> Planner::explain(const PlanRequest& req) {
  std::lock_guard<std::mutex> g(mu_);
  return explainLocked(req);
}

std::vector<Candidate> Planner::explainLocked(const PlanRequest& req) {
  std::vector<Candidate> out;
  const int slots = req.nranks < 1 ? 0 : static_cast<int>(rankNodes(req.memory, req.nranks).size());
  if (slots < req.nranks || req.nranks < 1 || !dataTypeSize(req.dtype)) {
    Candidate c;
    c.eligible = false;
    c.reason = req.nranks < 1 || !dataTypeSize(req.dtype)
                   ? "invalid request (nranks < 1 or bad dtype)"
                   : strprintf("topology '%s' has %d rank slots for %s memory, %d asked", topo_.name.c_str(),
                               slots, memoryKindName(req.memory), req.nranks);
    out.push_back(c);
    return out;
  }
  FabricView f = fabric(req.nranks, req.memory);
  f.remoteWindows = req.remoteWindows;
  size_t es = dataTypeSize(req.dtype);
  // A tune rule (the last matching one wins) pins the algorithm when it supports the request.
  const TuneRule* rule = tuneRuleFor(req);
  // Model-only requests on GPU ranks price the point-to-point algorithms at each protocol that
  // TRIB_PROTO allows and keep the fastest; the executor runs Simple, so the others are model only.
  const bool protocols = req.includeModelOnly && !f.hostRanks;
  // [0]: the ring's shares (every algorithm but the tree); [1]: the tree's (CostConstants::protocolShare).
  FabricView views[2][kNumProtocols];
  CostConstants constants[2][kNumProtocols];
  if (protocols)
    for (int q = 1; q < kNumProtocols; ++q)
      for (int tree = 0; tree < 2; ++tree) {
        const PlanAlgo like = tree ? PlanAlgo::Tree : PlanAlgo::Ring;
        views[tree][q] = protocolView(f, k_, static_cast<Protocol>(q), like);
        constants[tree][q] = k_.forProtocol(static_cast<Protocol>(q), like, f.domains);
      }
  const bool simpleAllowed = protocols_ & 1u;
  PredictScratch scratch;
  for (int i = 0; i < kNumPlanAlgos; ++i) {
    auto a = static_cast<PlanAlgo>(i);
    Prediction p = predict(a, req.coll, req.bytes, req.dtype, req.op, f, k_, 1e300, &scratch);
    if (!p.supported && (p.reason == "not modelled" || p.reason == "not for this collective")) continue;
    Candidate c;
    c.plan.algo = a;
    std::string protoExcluded;  // set when TRIB_PROTO leaves this algorithm no protocol
    if (protocols && protocolApplies(a) && p.supported) {
      const Prediction simple = p;
      bool have = simpleAllowed;
      for (int q = 1; q < kNumProtocols; ++q) {
        if (!(protocols_ >> q & 1)) continue;
        const int tree = a == PlanAlgo::Tree;
        Prediction pq = predict(a, req.coll, req.bytes, req.dtype, req.op, views[tree][q], constants[tree][q],
                                have ? p.us : 1e300, &scratch);
        if (pq.supported && (!have || pq.us < p.us))
          p = pq, c.plan.protocol = static_cast<Protocol>(q), have = true;
      }
      if (c.plan.protocol != Protocol::Simple)
        p.reason =
            strprintf("%s: %s; Simple %.1f us", protocolName(c.plan.protocol), p.reason.c_str(), simple.us);
      if (!have) protoExcluded = "TRIB_PROTO allows no protocol that prices this request";
    } else if (protocols && !simpleAllowed) {
      protoExcluded = strprintf("excluded by TRIB_PROTO (%s runs Simple only)", planAlgoName(a));
    }
    c.plan.predictedUs = p.us;
    c.plan.chunkElems = chunkElemsOf(p.chunkBytes, es);
    if (a == PlanAlgo::Hierarchical || a == PlanAlgo::HierSwitch) c.plan.ranksPerDomain = f.perDomain;
    // Direct and allgather_reduce send in rack order across contiguous domains, the last possibly
    // smaller (PeerOrder); the ring all-reduce runs one ring per rank of a domain across equal ones
    // (rails: ring.cpp).
    if ((a == PlanAlgo::Direct || a == PlanAlgo::AllgatherReduce) && f.domains > 1 && f.perFullDomain > 1)
      c.plan.ranksPerDomain = f.perFullDomain;
    if (a == PlanAlgo::Ring && req.coll == Coll::AllReduce && f.perDomain <= kMaxRailChannels && f.uniform &&
        f.domains > 1 && f.perDomain > 1)
      c.plan.ranksPerDomain = f.perDomain;
    // Executable: a generator in the registry that accepts the request and that the executor runs
    // at this rank count (AlgoInfo::maxRunRanks). Switch plans also need an attached, usable switch.
    const bool switchPlan = a == PlanAlgo::Switch || a == PlanAlgo::HierSwitch;
    const bool switchReady =
        attached_ && !req.switchDown && (a != PlanAlgo::HierSwitch || req.sliceStride == f.perDomain);
    const AlgoInfo* info =
        isNvlsPlan(a) || (switchPlan && !switchReady) ? nullptr : findAlgorithm(req.coll, toScheduleAlgo(a));
    bool pastRunRanks = false;  // the schedule accepts the request, but not to be run on this many ranks
    if (info) {
      CollArgs args;
      args.coll = req.coll;
      args.nranks = req.nranks;
      args.root = req.root;
      args.count = countOf(req);
      args.inPlace = req.inPlace;
      args.chunkElems = c.plan.chunkElems;
      args.ranksPerDomain = c.plan.ranksPerDomain;
      args.windowElems = 2 * (req.oneShotBytes / es);  // peer-memory schedules: two cells a window
      c.plan.executable = executorRuns(*info, args);
      pastRunRanks = !c.plan.executable && info->supports(args);
    } else {
      c.plan.executable = false;
    }
    if (c.plan.protocol != Protocol::Simple) c.plan.executable = false;  // the executor runs Simple
    if (!p.supported) {
      c.eligible = false;
      c.reason = p.reason;
    } else if (!protoExcluded.empty()) {
      c.eligible = false;
      c.reason = protoExcluded;
    } else if (a == PlanAlgo::TwoShot && !req.oneShotBytes && !req.includeModelOnly) {
      c.eligible = false;
      c.reason = "no peer windows (no transport maps or reaches every rank's, or TRIB_WINDOW_BYTES=0)";
    } else if (a == PlanAlgo::OneShot && req.bytes > req.oneShotBytes && !req.includeModelOnly) {
      c.eligible = false;
      c.reason = req.oneShotBytes
                     ? strprintf("larger than a window cell (%s)", formatBytes(req.oneShotBytes).c_str())
                     : "no peer windows (no transport maps or reaches every rank's, or TRIB_WINDOW_BYTES=0)";
    } else if (!c.plan.executable && !req.includeModelOnly) {
      c.eligible = false;
      c.reason = switchPlan && !attached_       ? "no switch attached (model only; set TRIB_SWITCH)"
                 : switchPlan && req.switchDown ? "the attached switch is not usable (failed or refused)"
                 : switchPlan && !switchReady   ? "the switch has no slice groups for these domains"
                 : pastRunRanks                 ? strprintf(
                                                      "past %d ranks its sends could wait on receives beyond the "
                                                                      "executor's window (model only)",
                                                      info->maxRunRanks)
                 : info ? "its schedule does not accept this request"
                        : "no executable schedule yet (model only)";
    } else if (!(filter_.allowed[static_cast<int>(req.coll)] >> i & 1)) {
      c.eligible = false;
      c.reason = "excluded by TRIB_ALGO";
    } else if (rule && rule->algo != a) {
      c.eligible = false;
      c.reason = strprintf("TRIB_TUNE pins %s for this size", planAlgoName(rule->algo));
    } else {
      c.reason = p.reason;
    }
    c.plan.why = p.reason;
    if (p.supported && p.us > 0) {
      c.algbwGBps = req.bytes / p.us / 1e3;
      c.busbwGBps = c.algbwGBps * busBandwidthFactor(req.coll, req.nranks);
    }
    out.push_back(c);
  }
  // A tune rule naming an algorithm that cannot run this request is ignored (say so).
  bool anyEligible = std::any_of(out.begin(), out.end(), [](const Candidate& c) { return c.eligible; });
  if (rule && !anyEligible) {
    for (auto& c : out)
      if (c.reason.rfind("TRIB_TUNE pins", 0) == 0) c.eligible = true, c.reason = c.plan.why;
  }
  std::stable_sort(out.begin(), out.end(), [](const Candidate& a, const Candidate& b) {
    if (a.eligible != b.eligible) return a.eligible;
    bool sa = a.plan.predictedUs > 0, sb = b.plan.predictedUs > 0;
    if (sa != sb) return sa;
    return a.plan.predictedUs < b.plan.predictedUs;
  });
  return out;
}

const TuneRule* Planner::tuneRuleFor(const PlanRequest& req) const {
  const TuneRule* rule = nullptr;
  for (const auto& r : tune_)
    if ((r.collMask >> static_cast<int>(req.coll) & 1) && req.bytes >= r.lo && req.bytes < r.hi &&
        req.nranks >= r.minRanks && req.nranks <= r.maxRanks)
      rule = &r;
  return rule;
}

static std::string cacheKey(const PlanRequest& r) {
  return strprintf("%d/%llu/%d/%d/%d/%d/%d/%d/%d/%d/%llu", static_cast<int>(r.coll),
                   static_cast<unsigned long long>(r.bytes), static_cast<int>(r.dtype),
                   static_cast<int>(r.op), static_cast<int>(r.memory), r.nranks, r.root, r.inPlace,
                   r.includeModelOnly, r.switchDown * 1000 + r.sliceStride,
                   static_cast<unsigned long long>(r.oneShotBytes) * 2 + r.remoteWindows);
}

Plan Planner::choose(const PlanRequest& req) {
  std::lock_guard<std::mutex> g(mu_);
  std::string key = cacheKey(req);
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  auto cands = explainLocked(req);
  Plan plan;
  if (!cands.empty() && cands[0].eligible) {
    plan = cands[0].plan;
    const Candidate* runner = cands.size() > 1 && cands[1].eligible ? &cands[1] : nullptr;
    plan.why =
        strprintf("%s: predicted %.1f us (%s)", planName(plan).c_str(), plan.predictedUs, plan.why.c_str());
    if (runner)
      plan.why +=
          strprintf("; next best %s %.1f us", planName(runner->plan).c_str(), runner->plan.predictedUs);
    if (filter_.set[static_cast<int>(req.coll)]) plan.why += "; TRIB_ALGO applied";
    // With a switch attached, say where its plans stood when they lost.
    for (const auto& c : cands) {
      const bool sw = c.plan.algo == PlanAlgo::Switch || c.plan.algo == PlanAlgo::HierSwitch;
      if (!attached_ || !sw || c.plan.algo == plan.algo || &c == runner) continue;
      if (c.eligible)
        plan.why += strprintf("; %s %.1f us", planAlgoName(c.plan.algo), c.plan.predictedUs);
      else
        plan.why += strprintf("; %s not eligible: %s", planAlgoName(c.plan.algo), c.reason.c_str());
    }
  } else {
    // Nothing eligible (overrides excluded everything that works): fall back to the fastest
    // executable candidate and say so.
    const Candidate* best = nullptr;
    for (const auto& c : cands)
      if (c.plan.executable && c.plan.predictedUs > 0 &&
          (!best || c.plan.predictedUs < best->plan.predictedUs))
        best = &c;
    if (best) {
      plan = best->plan;
      plan.why =
          strprintf("%s: overrides left no usable algorithm for %s; using the fastest that runs (%.1f us)",
                    planAlgoName(plan.algo), collName(req.coll), plan.predictedUs);
      // (One rank has nothing to communicate: every algorithm would be the same copy.)
      if (filter_.set[static_cast<int>(req.coll)] && req.nranks > 1) {
        // Why each algorithm TRIB_ALGO allows cannot run; one the model has no row for does not
        // exist for this collective.
        std::string why;
        const uint32_t allowed = filter_.allowed[static_cast<int>(req.coll)];
        for (int i = 0; i < kNumPlanAlgos; ++i) {
          if (!(allowed >> i & 1)) continue;
          auto a = static_cast<PlanAlgo>(i);
          auto it =
              std::find_if(cands.begin(), cands.end(), [&](const Candidate& c) { return c.plan.algo == a; });
          std::string reason = it == cands.end() ? strprintf("%s has no such algorithm", collName(req.coll))
                               : it->reason.empty() ? it->plan.why
                                                    : it->reason;
          why += strprintf("%s%s: %s", why.empty() ? "" : "; ", planAlgoName(a), reason.c_str());
        }
        plan.overrideUnmet = strprintf(
            "TRIB_ALGO '%s' allows no algorithm that can run %s of %s on %d ranks here (%s)",
            algoSpec_.c_str(), collName(req.coll), formatBytes(req.bytes).c_str(), req.nranks, why.c_str());
      }
    } else {
      plan.algo = PlanAlgo::Ring;
      plan.executable = findAlgorithm(req.coll, Algo::Ring) != nullptr;
      plan.why = "no modelled algorithm supports this request; ring by default";
    }
  }
  // The executor runs Simple: a TRIB_PROTO without it cannot be met by a plan it runs.
  if (!req.includeModelOnly && !(protocols_ & 1u) && plan.overrideUnmet.empty() && req.nranks > 1)
    plan.overrideUnmet =
        strprintf("TRIB_PROTO '%s' excludes Simple, the only protocol the executor runs", protoSpec_.c_str());
  // A TRIB_TUNE pin that cannot run was ignored: as unmet as a TRIB_ALGO that cannot (one rank
  // has nothing to communicate, so nothing to report).
  const TuneRule* rule = tuneRuleFor(req);
  if (rule && plan.algo != rule->algo && plan.overrideUnmet.empty() && req.nranks > 1) {
    auto it = std::find_if(cands.begin(), cands.end(),
                           [&](const Candidate& c) { return c.plan.algo == rule->algo; });
    const std::string reason = it == cands.end() ? strprintf("%s has no such algorithm", collName(req.coll))
                               : it->reason.empty() ? it->plan.why
                                                    : it->reason;
    plan.overrideUnmet = strprintf("TRIB_TUNE pins %s for %s of %s on %d ranks, which cannot run here (%s)",
                                   planAlgoName(rule->algo), collName(req.coll),
                                   formatBytes(req.bytes).c_str(), req.nranks, reason.c_str());
  }
  TRIB_INFO("tuning", "%s %s on %d ranks -> %s", collName(req.coll), formatBytes(req.bytes).c_str(),
            req.nranks, plan.why.c_str());
  cache_.emplace(std::move(key), plan);
  return plan;
}

std::vector<Planner::Crossover> Planner::crossovers(PlanRequest req, uint64_t lo, uint64_t hi) {
  std::vector<Crossover> out;
  using Choice = std::pair<PlanAlgo, Protocol>;
  auto best = [&](uint64_t b) {
    req.bytes = b;
    auto c = explain(req);
    return c.empty() || !c[0].eligible ? Choice{PlanAlgo::Ring, Protocol::Simple}
                                       : Choice{c[0].plan.algo, c[0].plan.protocol};
  };
  uint64_t prev = std::max<uint64_t>(lo, 1);
  Choice pa = best(prev);
  for (uint64_t b = prev * 2; b <= hi && b > prev; prev = b, b *= 2) {
    const Choice na = best(b);
    // Every change in (prev, b]: bisect for the first size past the current choice, then go on
    // from there until the choice at b is reached (two changes can fall within one doubling).
    for (uint64_t from = prev; pa != na && from < b;) {
      uint64_t l = from, h = b;
      while (h - l > 1 && h - l > l / 256) {
        uint64_t m = l + (h - l) / 2;
        (best(m) == pa ? l : h) = m;
      }
      const Choice to = best(h);
      out.push_back({h, pa.first, to.first, pa.second, to.second});
      pa = to, from = h;
    }
    pa = na;
  }
  return out;
}

std::string formatBytes(uint64_t b) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  double v = static_cast<double>(b);
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  if (v == std::floor(v)) return strprintf("%.0f %s", v, units[u]);
  return strprintf("%.2f %s", v, units[u]);
}

std::string formatExplain(const PlanRequest& req, const std::vector<Candidate>& cands) {
  std::string s = strprintf("%s of %s (%s) on %d ranks\n", collName(req.coll), formatBytes(req.bytes).c_str(),
                            dataTypeName(req.dtype), req.nranks);
  s += strprintf("  %-18s %12s %11s %11s %10s  %s\n", "algorithm", "time(us)", "algbw(GB/s)", "busbw(GB/s)",
                 "chunk", "note");
  for (const auto& c : cands) {
    if (c.plan.predictedUs > 0) {
      s += strprintf("  %-18s %12.1f %11.2f %11.2f %10s  %s%s\n", planName(c.plan).c_str(),
                     c.plan.predictedUs, c.algbwGBps, c.busbwGBps,
                     formatBytes(c.plan.chunkElems * dataTypeSize(req.dtype)).c_str(),
                     c.eligible ? "" : "[excluded] ", c.reason.c_str());
    } else {
      s += strprintf("  %-18s %12s %11s %11s %10s  [n/a] %s\n", planName(c.plan).c_str(), "-", "-", "-", "-",
                     c.reason.c_str());
    }
  }
  return s;
}

}  // namespace trib
