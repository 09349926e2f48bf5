// Local calibration: the planner's prediction next to what trib-perf measured on this machine.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.hpp"
#include "topo/topology.hpp"

namespace trib {

// One trib-perf run (its -J JSON): collective, ranks, how they ran, the memcpy bandwidth measured in
// the same run, and the out-of-place busbw per size.
struct PerfRun {
  std::string coll;     // "allreduce", ...
  std::string ranksAs;  // "threads", "processes", ...
  int ranks = 0;
  double memcpyGBps = 0;
  struct Point {
    uint64_t bytes = 0;
    double busbw = 0;  // GB/s, out of place
  };
  std::vector<Point> points;
};
// Errors name the source and what is missing (e.g. "out.json: no \"results\" array; is it trib-perf -J
// output?").
Status parsePerfJson(const std::string& text, PerfRun* out, const std::string& sourceName = "<string>");
Status loadPerfJson(const std::string& path, PerfRun* out);

struct CalibrationRow {
  uint64_t bytes = 0;
  std::string algo;  // the planner's choice among executable algorithms
  double predictedUs = 0, predictedBusbw = 0, measuredBusbw = 0;
  double ratio = 0;  // measured / predicted busbw
};
// The planner's prediction for each size of `run` on `topo`, with rank r on node rankToNode[r] (as
// placeRanks places the communicator's ranks). memGBps > 0: the measured memcpy bandwidth becomes the
// memory rate of every CPU node that does not declare one (reduce_gbps), i.e. it replaces the cost
// model's CPU default (CostConstants::cpuReduceGBps); the link efficiencies stay the cost model's.
Status calibrate(Topology topo, const std::vector<int>& rankToNode, const PerfRun& run, double memGBps,
                 std::vector<CalibrationRow>* out, std::string* fabricSummary = nullptr);
// A table: size, choice, predicted time and busbw, measured busbw, ratio.
std::string formatCalibration(const PerfRun& run, double memGBps, const std::vector<CalibrationRow>& rows);

}  // namespace trib
