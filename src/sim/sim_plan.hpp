// A planned algorithm replayed in the simulator: the plan's chunk and domain size, the
// communicator's default window, the ranks where the planner put them. What `trib-plan --simulate`
// and the model-against-simulator grid (tests/test_sim_grid.cpp) both run, so they compare alike.
#pragma once
#include "plan/planner.hpp"
#include "sim/sim.hpp"

namespace trib {

struct PlannedSim {
  double predictedUs = 0;  // the cost model's time for that algorithm (0: it does not model it)
  uint64_t chunkElems = 0;
  Protocol protocol = Protocol::Simple;  // the plan's; the replay runs on its constants
  SimResult sim;
};

// The CollArgs the planner's plan for algorithm `a` runs with (chunk, domain size, window), the
// model's time for it (*predictedUs = 0 when the model does not cover it) and its protocol.
CollArgs plannedArgs(Planner& planner, const PlanRequest& req, PlanAlgo a, double* predictedUs,
                     Protocol* protocol = nullptr);
// Simulates algorithm `a` for `req` as the planner would run it, at its plan's protocol (opt.k for
// that protocol: CostConstants::forProtocol); out->predictedUs = 0 when the model does not cover it (the
// schedule then runs with its default chunk). rankToNode: the ranks' nodes (empty: the planner's).
Status simulatePlanned(Planner& planner, const PlanRequest& req, PlanAlgo a, PlannedSim* out,
                       const std::vector<int>& rankToNode = {}, const SimOptions& opt = {});

}  // namespace trib
