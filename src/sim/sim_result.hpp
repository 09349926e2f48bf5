// What both replays (sim.cpp, nvls_sim.cpp) share around a run: the ranks' nodes and the result's
// bandwidths. Internal to src/sim.
#pragma once
#include <chrono>
#include <cstddef>
#include <vector>

#include "algo/schedule.hpp"
#include "common/status.hpp"
#include "sim/sim.hpp"
#include "topo/topology.hpp"

namespace trib::replay {

// Each rank's node: `given` where it is not empty, else the topology's ranks in order.
Status rankNodes(const Topology& t, int nranks, const std::vector<int>& given, std::vector<int>* out);
// nccl-tests' S for the request (all-gather, reduce-scatter and all-to-all: count x nranks).
double sizeOf(const CollArgs& a, size_t esize);
// Fills the result's algorithm and bus bandwidths from its time, and the replay's wall time.
void finish(const CollArgs& args, size_t esize, SimResult* out, std::chrono::steady_clock::time_point t0);

}  // namespace trib::replay
