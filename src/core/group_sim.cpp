// tribGroupSimulateEnd's estimate: each queued collective is planned as the communicator would
// plan it at launch (chooseAlgorithm: the planner, its overrides and the communicator's windows),
// and that schedule is run by the simulator (src/sim) on the planner's topology with the ranks
// where the planner placed them: the same computation as `trib-plan --simulate` for that call.
#include <map>

#include "core/group.hpp"
#include "plan/planner.hpp"
#include "sim/sim.hpp"

namespace trib {

namespace {

Status simulateCall(const Communicator* comm, const CollCall& call, double* us) {
  CollArgs args = argsFor(comm, call);
  const AlgoInfo* algo = nullptr;
  TRIB_RETURN_IF_ERROR(chooseAlgorithm(comm, call, &args, &algo));
  SimResult res;
  TRIB_RETURN_IF_ERROR(
      simulate(comm->planner->topology(), *algo, args, call.dtype, &res,
               comm->planner->rankNodes(callMemoryKind(call), comm->nranks))
          .prefix(strprintf("tribGroupSimulateEnd: simulating %s [%s]: ",
                            describeCall(comm, call, nullptr).c_str(), algoName(algo->algo))));
  *us = res.timeUs;
  return Status::Ok();
}

}  // namespace

Status estimateQueuedCalls(const std::vector<QueuedCall>& calls, double* estimatedUs) {
  std::map<const Communicator*, double> perComm;
  for (const QueuedCall& q : calls) {
    double& sum = perComm[q.comm];
    if (q.p2p) continue;  // a send or receive has no schedule of the communicator to simulate
    double us = 0;
    TRIB_RETURN_IF_ERROR(simulateCall(q.comm, q.call, &us));
    sum += us;
  }
  double worst = 0;
  for (const auto& [comm, us] : perComm) worst = std::max(worst, us);
  *estimatedUs = worst;
  return Status::Ok();
}

}  // namespace trib
