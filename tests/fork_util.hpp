// Helpers for multi-process tests: run a function in N forked children, each bounded by alarm(),
// and collect their exit codes. A child reports failure through its exit code (and stderr), since
// GoogleTest assertions in a child cannot reach the parent.
#pragma once
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <thread>
#include <vector>

namespace trib::testing {

// Exit codes: 0 success, 1..99 a check failed (the code says which), 128+sig a signal.
struct ChildResult {
  pid_t pid = -1;
  int code = -1;  // exit code, or 128+signal
};

inline std::vector<pid_t> forkChildren(int n, int timeoutSec, const std::function<int(int)>& body) {
  std::vector<pid_t> pids;
  std::fflush(nullptr);
  for (int i = 0; i < n; ++i) {
    pid_t pid = fork();
    if (pid == 0) {
      alarm(static_cast<unsigned>(timeoutSec));  // a hung child dies by SIGALRM, never hangs the test
      int rc = body(i);
      std::fflush(nullptr);
      _exit(rc);
    }
    pids.push_back(pid);
  }
  return pids;
}

// Wait for all children, killing any still alive after timeoutSec (+1 s grace).
inline std::vector<ChildResult> waitChildren(const std::vector<pid_t>& pids, int timeoutSec) {
  std::vector<ChildResult> out(pids.size());
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeoutSec + 1);
  size_t left = pids.size();
  for (size_t i = 0; i < pids.size(); ++i) out[i].pid = pids[i];
  while (left > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (out[i].code != -1) continue;
      int status = 0;
      if (waitpid(pids[i], &status, WNOHANG) == pids[i]) {
        out[i].code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        --left;
      }
    }
    if (left == 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      for (size_t i = 0; i < pids.size(); ++i)
        if (out[i].code == -1) kill(pids[i], SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return out;
}

inline std::vector<ChildResult> runChildren(int n, int timeoutSec, const std::function<int(int)>& body) {
  return waitChildren(forkChildren(n, timeoutSec, body), timeoutSec);
}

}  // namespace trib::testing

// Inside a child: fail with a distinct exit code and a message.
#define CHILD_CHECK(cond, code)                                                             \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      std::fprintf(stderr, "child check failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      return code;                                                                          \
    }                                                                                       \
  } while (0)
#define CHILD_OK(status, code)                                                                      \
  do {                                                                                              \
    ::trib::Status s_ = (status);                                                                   \
    if (!s_.ok()) {                                                                                 \
      std::fprintf(stderr, "child status failed at %s:%d: %s -> %s\n", __FILE__, __LINE__, #status, \
                   s_.message().c_str());                                                           \
      return code;                                                                                  \
    }                                                                                               \
  } while (0)
