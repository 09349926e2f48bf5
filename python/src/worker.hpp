// The backend's worker thread: runs the process group's operations one after another, in the
// order they were issued (the same order on every rank, as collectives need), so the caller's
// thread never blocks; point-to-point operations are started there and polled until done.
// After a failure the communicator is aborted and every later operation fails at once with the
// first error, which names the rank and step that failed.
#pragma once
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tributary/tributary.h"
#include "work.hpp"

namespace torch_tributary {

class Worker {
 public:
  // Runs the operation's Tributary calls; returns a started request still to complete
  // (send, recv) or nullptr when done. Throws on failure.
  using Task = std::function<tribRequest_t()>;
  using After = std::function<void()>;  // runs once the task's request completed (copy-backs)

  Worker(tribComm_t comm, std::string label, std::chrono::milliseconds timeout);
  ~Worker();  // runs what was posted, then stops
  void post(c10::intrusive_ptr<TribWork> work, const char* op, Task task, After after = {});

 private:
  struct Job {
    c10::intrusive_ptr<TribWork> work;
    const char* op;
    Task task;
    After after;
    tribRequest_t request = nullptr;
    std::chrono::steady_clock::time_point deadline{};
  };
  void loop();
  void run(Job& job);
  void poll();  // the started requests
  void succeed(Job& job);
  void fail(Job& job, const std::string& why);

  tribComm_t comm_;
  std::string label_;  // "rank R of N", in every message
  std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool stop_ = false;
  std::vector<Job> started_;  // the worker thread's own
  std::string broken_;        // the first failure (worker thread only)
  std::thread thread_;
};

}  // namespace torch_tributary
