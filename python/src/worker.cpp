#include "worker.hpp"

#include <Python.h>

#include <stdexcept>

namespace torch_tributary {

Worker::Worker(tribComm_t comm, std::string label, std::chrono::milliseconds timeout)
    : comm_(comm), label_(std::move(label)), timeout_(timeout), thread_([this] { loop(); }) {}

Worker::~Worker() {
  // A job's last reference to a tensor, and a future's Python callbacks, take the GIL on the
  // worker thread: let go of it (before taking mu_) while the worker finishes.
  PyThreadState* saved = nullptr;
  if (Py_IsInitialized() && PyGILState_Check()) saved = PyEval_SaveThread();
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  if (saved) PyEval_RestoreThread(saved);
}

void Worker::post(c10::intrusive_ptr<TribWork> work, const char* op, Task task, After after) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    queue_.push_back(Job{std::move(work), op, std::move(task), std::move(after)});
  }
  cv_.notify_one();
}

void Worker::loop() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    if (queue_.empty()) {
      if (started_.empty()) {
        if (stop_) break;
        cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      } else {
        // Requests progress only inside tribTest: poll them, but wake at once for new work.
        cv_.wait_for(lk, std::chrono::microseconds(50), [&] { return !queue_.empty(); });
      }
    }
    if (!queue_.empty()) {
      auto job = std::make_unique<Job>(std::move(queue_.front()));
      queue_.pop_front();
      lk.unlock();
      run(*job);
      job.reset();  // unlocked: dropping its tensors may take the GIL
      lk.lock();
    }
    if (!started_.empty()) {
      lk.unlock();
      poll();
      lk.lock();
    }
  }
}

void Worker::run(Job& job) {
  if (!broken_.empty()) return fail(job, "the process group failed earlier: " + broken_);
  try {
    job.request = job.task();
  } catch (const std::exception& e) {
    return fail(job, e.what());
  }
  if (!job.request) return succeed(job);
  job.deadline = std::chrono::steady_clock::now() + timeout_;
  started_.push_back(std::move(job));
}

void Worker::poll() {
  for (size_t i = 0; i < started_.size();) {
    Job& job = started_[i];
    int done = 0;
    tribResult_t r = tribTest(&job.request, &done);
    bool finished = true;
    if (r != tribSuccess) {
      std::string why = std::string(tribGetErrorString(r)) + ": " + tribGetLastError(nullptr);
      fail(job, why);
    } else if (done) {
      succeed(job);
    } else if (std::chrono::steady_clock::now() > job.deadline) {
      fail(job, "timed out after " + std::to_string(timeout_.count()) + " ms (the process group's timeout)");
    } else {
      finished = false;
    }
    if (finished) {
      started_.erase(started_.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
}

void Worker::succeed(Job& job) {
  try {
    if (job.after) job.after();
  } catch (const std::exception& e) {
    return fail(job, e.what());
  }
  job.work->complete(nullptr);
}

void Worker::fail(Job& job, const std::string& why) {
  std::string msg = std::string("tributary ") + job.op + " failed on " + label_ + ": " + why;
  if (broken_.empty()) {
    broken_ = why;
    // Ends every started request and any peer's wait on this rank promptly.
    tribCommAbort(comm_);
  }
  if (job.request) tribRequestFree(&job.request);  // legal once aborted
  job.work->complete(std::make_exception_ptr(std::runtime_error(msg)));
}

}  // namespace torch_tributary
