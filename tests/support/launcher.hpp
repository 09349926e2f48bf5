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
  bool exited = false;  // false: killed by a signal (or by us at the deadline)
  int exitCode = -1;    // when exited
  int signal = 0;       // when killed
  std::string output;   // what the child wrote to its report pipe
};

// Forks `n` children; child r runs body(r, report) where `report` appends a message for the
// parent, then _exit(return value). Waits up to `timeout`; kills stragglers with SIGKILL.
// `afterFork`, if given, runs in the parent once every child exists: start servers there, not
// before forking (a child of a multi-threaded parent may inherit a lock held by another thread).
std::vector<ProcessResult> runProcesses(
    int n, const std::function<int(int rank, std::string& report)>& body, std::chrono::milliseconds timeout,
    const std::function<void(const std::vector<int>& pids)>& afterFork = {});

// Sends `bytes` to a child through a pipe it inherited (see ParentChannel), bounded in time.
class ParentChannel {
 public:
  explicit ParentChannel(int n);  // create before runProcesses
  ~ParentChannel();
  void send(int rank, const void* data, size_t bytes);              // parent
  bool receive(int rank, void* data, size_t bytes, int timeoutMs);  // child
 private:
  std::vector<int> readFds_, writeFds_;
};

// "" if every rank exited 0, else one line per failed rank.
std::string describeFailures(const std::vector<ProcessResult>& results);

}  // namespace trib::testing
