// Runs a test body in N forked processes (real ranks for the shm/UCX transports), bounded in
// time: a child that does not finish is killed, and the result says which ranks failed how.
#pragma once
#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace trib::testing {

struct ProcessResult {
  int rank = 0;
  bool exited = false;   // false: killed by a signal (or by us at the deadline)
  int exitCode = -1;     // when exited
  int signal = 0;        // when killed
  std::string output;    // what the child wrote to its report pipe
};

// Forks `n` children; child r runs body(r, report) where `report` appends a message for the
// parent, then _exit(return value). Waits up to `timeout`; kills stragglers with SIGKILL.
std::vector<ProcessResult> runProcesses(int n, const std::function<int(int rank, std::string& report)>& body,
                                        std::chrono::milliseconds timeout);

// "" if every rank exited 0, else one line per failed rank.
std::string describeFailures(const std::vector<ProcessResult>& results);

}  // namespace trib::testing
