#include "sim/sim_plan.hpp"

#include <algorithm>

namespace trib {

CollArgs plannedArgs(Planner& planner, const PlanRequest& req, PlanAlgo a, double* predictedUs) {
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
  for (const auto& c : planner.explain(req))
    if (c.plan.algo == a && c.plan.predictedUs > 0) {
      args.chunkElems = c.plan.chunkElems, args.ranksPerDomain = c.plan.ranksPerDomain;
      *predictedUs = c.plan.predictedUs;
    }
  // Peer-memory schedules: the communicator's default window, two cells of
  // CostConstants::boardChunkBytes (the default TRIB_WINDOW_BYTES is two 1 MiB cells).
  if (needsWindows(toScheduleAlgo(a))) args.windowElems = 2 * planner.constants().boardChunkBytes / es;
  return args;
}

Status simulatePlanned(Planner& planner, const PlanRequest& req, PlanAlgo a, PlannedSim* out,
                       const std::vector<int>& rankToNode, const SimOptions& opt) {
  *out = PlannedSim{};
  if (dataTypeSize(req.dtype) == 0) return errorf(tribInvalidArgument, "simulatePlanned: invalid datatype");
  const CollArgs args = plannedArgs(planner, req, a, &out->predictedUs);
  out->chunkElems = args.chunkElems;
  const std::vector<int> nodes = rankToNode.empty() ? planner.rankNodes(req.memory, req.nranks) : rankToNode;
  const Topology& t = planner.topology();
  if (a == PlanAlgo::Nvls || a == PlanAlgo::NvlsSwitch)  // no schedule yet: modelled directly
    return simulateInNetwork(t, a, args, req.dtype, &out->sim, nodes, opt);
  const AlgoInfo* info = findAlgorithm(req.coll, toScheduleAlgo(a));
  if (!info)
    return errorf(tribNotSupported, "no schedule generator for %s %s in this build", planAlgoName(a),
                  collName(req.coll));
  return simulate(t, *info, args, req.dtype, &out->sim, nodes, opt);
}

}  // namespace trib
