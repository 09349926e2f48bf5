#include "support/launcher.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <thread>

namespace trib::testing {

ParentChannel::ParentChannel(int n) : readFds_(n, -1), writeFds_(n, -1) {
  for (int r = 0; r < n; ++r) {
    int fds[2];
    if (pipe(fds) == 0) {
      readFds_[r] = fds[0];
      writeFds_[r] = fds[1];
    }
  }
}

ParentChannel::~ParentChannel() {
  for (int fd : readFds_) close(fd);
  for (int fd : writeFds_) close(fd);
}

void ParentChannel::send(int rank, const void* data, size_t bytes) {
  (void)!write(writeFds_[rank], data, bytes);
}

bool ParentChannel::receive(int rank, void* data, size_t bytes, int timeoutMs) {
  size_t got = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  while (got < bytes) {
    pollfd p{readFds_[rank], POLLIN, 0};
    int left = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now())
            .count());
    if (left <= 0 || poll(&p, 1, left) <= 0) return false;
    ssize_t r = read(readFds_[rank], static_cast<char*>(data) + got, bytes - got);
    if (r <= 0) return false;
    got += static_cast<size_t>(r);
  }
  return true;
}

std::vector<ProcessResult> runProcesses(int n, const std::function<int(int rank, std::string& report)>& body,
                                        std::chrono::milliseconds timeout,
                                        const std::function<void(const std::vector<int>& pids)>& afterFork) {
  std::vector<ProcessResult> results(n);
  std::vector<pid_t> pids(n, -1);
  std::vector<int> pipes(n, -1);
  std::fflush(nullptr);  // a child flushes what it prints (below), not what the parent had buffered
  for (int r = 0; r < n; ++r) {
    int fds[2];
    if (pipe(fds) != 0) break;
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      std::string report;
      int code = 1;
      try {
        code = body(r, report);
      } catch (const std::exception& e) {
        report += std::string("exception: ") + e.what();
      }
      (void)!write(fds[1], report.data(), report.size());
      close(fds[1]);
      std::fflush(nullptr);  // _exit would drop what the body printed
      _exit(code);
    }
    close(fds[1]);
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    pids[r] = pid;
    pipes[r] = fds[0];
    results[r].rank = r;
  }
  if (afterFork) afterFork(std::vector<int>(pids.begin(), pids.end()));
  auto deadline = std::chrono::steady_clock::now() + timeout;
  int left = n;
  while (left > 0) {
    for (int r = 0; r < n; ++r) {
      if (pids[r] <= 0) continue;
      char buf[4096];
      ssize_t got;
      while ((got = read(pipes[r], buf, sizeof buf)) > 0)
        results[r].output.append(buf, static_cast<size_t>(got));
      int status = 0;
      if (waitpid(pids[r], &status, WNOHANG) == pids[r]) {
        while ((got = read(pipes[r], buf, sizeof buf)) > 0)
          results[r].output.append(buf, static_cast<size_t>(got));
        results[r].exited = WIFEXITED(status);
        results[r].exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        results[r].signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        close(pipes[r]);
        pids[r] = -1;
        --left;
      }
    }
    if (left == 0) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      for (int r = 0; r < n; ++r) {
        if (pids[r] <= 0) continue;
        kill(pids[r], SIGKILL);
        int status = 0;
        waitpid(pids[r], &status, 0);
        results[r].exited = false;
        results[r].signal = SIGKILL;
        results[r].output += " [killed: still running at the test's deadline]";
        close(pipes[r]);
        pids[r] = -1;
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return results;
}

std::string describeFailures(const std::vector<ProcessResult>& results) {
  std::string out;
  for (const ProcessResult& r : results) {
    if (r.exited && r.exitCode == 0) continue;
    out += "rank " + std::to_string(r.rank) + ": ";
    out += r.exited ? "exit code " + std::to_string(r.exitCode) : "signal " + std::to_string(r.signal);
    if (!r.output.empty()) out += ": " + r.output;
    out += "\n";
  }
  return out;
}

}  // namespace trib::testing
