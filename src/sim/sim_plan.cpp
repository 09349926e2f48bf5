#include "sim/sim_plan.hpp"

#include <algorithm>

#include "sim/ring_quotient.hpp"

namespace trib {
CollArgs plannedArgs(Planner& planner, const PlanRequest& req, PlanAlgo a, double* predictedUs,
                     Protocol* protocol) {
  CollArgs args;
  args.coll = req.coll;
  args.nranks = req.nranks;
  const size_t es = std::max<size_t>(1, dataTypeSize(req.dtype));
  args.count = req.bytes / es;
  if (req.coll == Coll::AllGather || req.coll == Coll::ReduceScatter || req.coll == Coll::AlltoAll)
    args.count /= req.nranks;
  // The plan's chunk for that algorithm and its prediction, when the model covers it (else the
  // schedule's defaults, and no prediction).
  *predictedUs = 0;
  if (protocol) *protocol = Protocol::Simple;
  for (const auto& c : planner.explain(req))
    if (c.plan.algo == a && c.plan.predictedUs > 0) {
      args.chunkElems = c.plan.chunkElems, args.ranksPerDomain = c.plan.ranksPerDomain;
      *predictedUs = c.plan.predictedUs;
      if (protocol) *protocol = c.plan.protocol;
    }
  // Peer-memory schedules: the communicator's default window, two cells of
  // CostConstants::boardChunkBytes (the default TRIB_WINDOW_BYTES is two 1 MiB cells).
  if (needsWindows(toScheduleAlgo(a))) args.windowElems = 2 * planner.constants().boardChunkBytes / es;
  return args;
}

Status simulatePlanned(Planner& planner, const PlanRequest& req, PlanAlgo a, PlannedSim* out,
                       const std::vector<int>& rankToNode, const SimOptions& options) {
  *out = PlannedSim{};
  if (dataTypeSize(req.dtype) == 0) return errorf(tribInvalidArgument, "simulatePlanned: invalid datatype");
  const CollArgs args = plannedArgs(planner, req, a, &out->predictedUs, &out->protocol);
  out->chunkElems = args.chunkElems;
  SimOptions opt = options;  // the replay at the plan's protocol: its link shares, step costs, ceiling
  const FabricView& fabric = planner.fabric(req.nranks, req.memory);
  opt.k = options.k.forProtocol(out->protocol, a, fabric.domains);
  opt.rankCeilingGBps = rankCeilingGBps(fabric, options.k, out->protocol);
  const std::vector<int> nodes = rankToNode.empty() ? planner.rankNodes(req.memory, req.nranks) : rankToNode;
  const Topology& t = planner.topology();
  if (isNvlsPlan(a))  // no schedule yet: modelled directly
    return simulateInNetwork(t, a, args, req.dtype, &out->sim, nodes, opt);
  const AlgoInfo* info = findAlgorithm(req.coll, toScheduleAlgo(a));
  if (!info)
    return errorf(tribNotSupported, "no schedule generator for %s %s in this build", planAlgoName(a),
                  collName(req.coll));
  // Ring all-reduce: a quotient by the shift of one period of alike ranks (a rack), where sound.
  std::string full;
  // Not the rail ring (several channels): its hops are not rank r to r + 1, which the quotient's
  // link checks are about.
  if (opt.symmetry && opt.replayRanks == 0 && a == PlanAlgo::Ring && req.coll == Coll::AllReduce &&
      channelsOf(*info, args) == 1) {
    RingQuotient q;
    if (findRingQuotient(t, nodes, *info, args, opt, &q)) {
      SimOptions o = opt;
      o.replayRanks = q.period;
      CollArgs c = args;
      c.count = q.highCount, o.replayFirst = q.highFirst;
      TRIB_RETURN_IF_ERROR(simulate(q.upper ? *q.upper : t, *info, c, req.dtype, &out->sim, nodes, o));
      SimResult& r = out->sim;
      if (!q.exact) {
        SimResult low;
        c.count = q.lowCount, o.replayFirst = q.lowFirst;
        TRIB_RETURN_IF_ERROR(simulate(t, *info, c, req.dtype, &low, nodes, o));
        r.timeLowUs = low.timeUs;
        r.steps += low.steps, r.messages += low.messages, r.wallSeconds += low.wallSeconds;
      }
      // A bracket wider than 1% is no answer (ranks that are not whole racks: every hop out of a
      // 2-rank window priced as a network hop): replay every rank instead.
      if (!q.exact && r.timeUs - r.timeLowUs > kMaxBracket * r.timeUs)
        q.why = strprintf("its bracket [%.1f, %.1f] us is wider than %.0f%%", r.timeLowUs, r.timeUs,
                          100 * kMaxBracket);
      // Bandwidths of the request's bytes, not the rounded ones.
      const double factor = r.algbwGBps > 0 ? r.busbwGBps / r.algbwGBps : 0;
      r.algbwGBps = static_cast<double>(args.count * dataTypeSize(req.dtype)) / r.timeUs / 1e3;
      r.busbwGBps = r.algbwGBps * factor;
      if (q.why.empty()) {
        r.reduction =
            q.exact ? strprintf(
                          "ring quotient: %d of %d ranks replayed, exact (every rank's steps are the "
                          "first's shifted, equal blocks; every %d ranks alike, hops link-disjoint and "
                          "alike)",
                          q.period, args.nranks, q.period)
                    : strprintf(
                          "ring quotient: %d of %d ranks replayed twice, a bound: %zu class(es) of the %zu "
                          "hops out of each %d ranks%s%s; lower: the fastest hop out, blocks of %llu "
                          "elements (ranks from %d); upper: the slowest, blocks of %llu (ranks from %d)",
                          q.period, args.nranks, q.classes, q.hopsOut, q.period,
                          q.lowCount == q.highCount ? "" : ", blocks of two sizes",
                          q.upper ? " (the upper's hop out slowed to the slowest class's at each hop)" : "",
                          static_cast<unsigned long long>(q.lowCount / args.nranks), q.lowFirst,
                          static_cast<unsigned long long>(q.highCount / args.nranks), q.highFirst);
        return Status::Ok();
      }
    }
    full = "full replay (no ring quotient: " + q.why + ")";
  }
  Status st = simulate(t, *info, args, req.dtype, &out->sim, nodes, opt);
  out->sim.reduction = full;
  if (!st.ok() && !full.empty()) return errorf(st.code(), "%s; %s", st.message().c_str(), full.c_str());
  return st;
}

}  // namespace trib
