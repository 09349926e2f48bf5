#include "plan/calibrate.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/env.hpp"
#include "plan/planner.hpp"

namespace trib {

namespace {

// The value after "key": in text[from, to); npos when absent. trib-perf writes flat, known keys.
size_t valueAt(const std::string& text, const std::string& key, size_t from, size_t to) {
  size_t p = text.find("\"" + key + "\":", from);
  if (p == std::string::npos || p >= to) return std::string::npos;
  return p + key.size() + 3;
}

}  // namespace

Status parsePerfJson(const std::string& text, PerfRun* out, const std::string& src) {
  PerfRun r;
  const size_t end = text.size();
  size_t p = valueAt(text, "coll", 0, end);
  size_t q = valueAt(text, "ranks", 0, end);
  size_t m = valueAt(text, "memcpy_GBps", 0, end);
  size_t res = valueAt(text, "results", 0, end);
  if (p == std::string::npos || q == std::string::npos || res == std::string::npos)
    return errorf(tribInvalidArgument,
                  "%s: no \"coll\", \"ranks\" or \"results\"; is it trib-perf -J output?", src.c_str());
  if (text[p] == '"') r.coll = text.substr(p + 1, text.find('"', p + 1) - p - 1);
  r.ranks = std::atoi(text.c_str() + q);
  if (m != std::string::npos) r.memcpyGBps = std::atof(text.c_str() + m);
  if (size_t a = valueAt(text, "ranks_as", 0, end); a != std::string::npos && text[a] == '"')
    r.ranksAs = text.substr(a + 1, text.find('"', a + 1) - a - 1);
  if (r.ranks < 1) return errorf(tribInvalidArgument, "%s: \"ranks\" must be >= 1", src.c_str());
  // Each result: {"size":S,...,"out_of_place":{...,"busbw":B,...},...}
  for (size_t s = valueAt(text, "size", res, end); s != std::string::npos;) {
    size_t next = valueAt(text, "size", s, end);
    size_t oop = valueAt(text, "out_of_place", s, next == std::string::npos ? end : next);
    size_t bus = oop == std::string::npos ? oop : valueAt(text, "busbw", oop, end);
    if (bus == std::string::npos)
      return errorf(tribInvalidArgument, "%s: result %zu has no out_of_place busbw", src.c_str(),
                    r.points.size());
    r.points.push_back({std::strtoull(text.c_str() + s, nullptr, 10), std::atof(text.c_str() + bus)});
    s = next;
  }
  if (r.points.empty()) return errorf(tribInvalidArgument, "%s: \"results\" is empty", src.c_str());
  *out = std::move(r);
  return Status::Ok();
}

Status loadPerfJson(const std::string& path, PerfRun* out) {
  std::ifstream f(path);
  if (!f)
    return errorf(tribInvalidArgument, "cannot read '%s' (write it with trib-perf -J FILE)", path.c_str());
  std::stringstream ss;
  ss << f.rdbuf();
  return parsePerfJson(ss.str(), out, path);
}

Status calibrate(Topology topo, const std::vector<int>& rankToNode, const PerfRun& run, double memGBps,
                 std::vector<CalibrationRow>* out, std::string* fabricSummary) {
  PlanRequest req;
  if (!parseColl(run.coll, &req.coll))
    return errorf(tribInvalidArgument, "calibration: unknown collective '%s'", run.coll.c_str());
  if (!rankToNode.empty() && static_cast<int>(rankToNode.size()) != run.ranks)
    return errorf(tribInvalidArgument, "calibration: %zu rank placements for a run of %d ranks",
                  rankToNode.size(), run.ranks);
  if (memGBps > 0)
    for (int i = 0; i < topo.numNodes(); ++i)
      if (topo.node(i).type == NodeType::Cpu && topo.node(i).reduceGBps <= 0)
        topo.node(i).reduceGBps = memGBps;
  req.nranks = run.ranks;
  // trib-perf's host runs: ranks on CPUs, host memory (the request's default).
  Planner planner(std::move(topo), RankNodes{{}, rankToNode});
  if (fabricSummary) *fabricSummary = planner.fabric(req.nranks, req.memory).summary;
  out->clear();
  for (const PerfRun::Point& pt : run.points) {
    req.bytes = pt.bytes;
    Plan plan = planner.choose(req);  // executable algorithms only, as the communicator asks
    CalibrationRow row;
    row.bytes = pt.bytes;
    row.algo = planAlgoName(plan.algo);
    row.predictedUs = plan.predictedUs;
    row.predictedBusbw = plan.predictedUs > 0
                             ? pt.bytes / plan.predictedUs / 1e3 * busBandwidthFactor(req.coll, req.nranks)
                             : 0;
    row.measuredBusbw = pt.busbw;
    row.ratio = row.predictedBusbw > 0 ? pt.busbw / row.predictedBusbw : 0;
    out->push_back(row);
  }
  return Status::Ok();
}

std::string formatCalibration(const PerfRun& run, double memGBps, const std::vector<CalibrationRow>& rows) {
  std::string s = strprintf("# %s, %d ranks as %s; memory rate %.2f GB/s%s\n", run.coll.c_str(), run.ranks,
                            run.ranksAs.empty() ? "?" : run.ranksAs.c_str(), memGBps,
                            memGBps > 0 ? " (measured memcpy)" : " (cost-model default)");
  s += strprintf("%12s  %-13s %12s %14s %14s %9s\n", "size", "choice", "pred(us)", "pred busbw", "meas busbw",
                 "meas/pred");
  for (const CalibrationRow& r : rows)
    s += strprintf("%12s  %-13s %12.1f %14.3f %14.3f %9.2f\n", formatBytes(r.bytes).c_str(), r.algo.c_str(),
                   r.predictedUs, r.predictedBusbw, r.measuredBusbw, r.ratio);
  return s;
}

}  // namespace trib
