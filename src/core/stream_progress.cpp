#include "core/stream_progress.hpp"

#include "common/log.hpp"
#include "core/comm.hpp"
#include "core/premul.hpp"

namespace trib {

StreamProgress::StreamProgress(StreamOrdering& ordering, const std::vector<Transport*>& peers,
                               std::chrono::milliseconds timeout, Hooks hooks)
    : ordering_(ordering), peers_(peers), timeout_(timeout), hooks_(std::move(hooks)), thread_([this] {
        loop();
      }) {}

StreamProgress::~StreamProgress() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

Status StreamProgress::reserve() {
  std::unique_lock<std::mutex> lock(mu_);
  if (!idle_.wait_for(lock, timeout_, [&] { return inFlight_ < StreamOrdering::kRing / 2; }))
    return errorf(
        tribTimeout,
        "%zu stream-ordered calls are in flight on this communicator and none finished within %.1f s "
        "(TRIB_TIMEOUT)",
        inFlight_, timeout_.count() / 1000.0);
  ++inFlight_;
  return Status::Ok();
}

void StreamProgress::unreserve() {
  std::lock_guard<std::mutex> lock(mu_);
  --inFlight_;
  idle_.notify_all();
}

void StreamProgress::push(StreamWork work) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(work));
  }
  wake_.notify_one();
}

bool StreamProgress::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return inFlight_ > 0;
}

uint64_t StreamProgress::completed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return completed_;
}

Status StreamProgress::drain(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (idle_.wait_for(lock, timeout, [&] { return inFlight_ == 0; })) return Status::Ok();
  return errorf(tribTimeout,
                "%zu stream-ordered calls on this communicator did not finish within %.1f s (TRIB_TIMEOUT): "
                "has their stream reached them?",
                inFlight_, timeout.count() / 1000.0);
}

void StreamProgress::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopped, and everything submitted was run
    StreamWork work = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    (void)run(work);  // a failure is reported through hooks_.fail, before the stream goes on
    ordering_.release(work.ticket);
    work.runs.clear();
    lock.lock();
    --inFlight_;
    ++completed_;
    idle_.notify_all();
  }
}

Status StreamProgress::waitReached(const StreamWork& work) {
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  Backoff backoff;
  while (!ordering_.reached(work.ticket)) {
    if (hooks_.aborted()) return errorf(tribAborted, "the communicator was aborted");
    if (std::chrono::steady_clock::now() >= deadline)
      return errorf(
          tribTimeout,
          "the stream did not reach the call within %.1f s (TRIB_TIMEOUT): work enqueued on it before "
          "the call has not finished (or waits for something that never happens)",
          timeout_.count() / 1000.0);
    backoff.idle();
  }
  return Status::Ok();
}

Status StreamProgress::run(StreamWork& work) {
  const std::string what = work.runs.empty() ? std::string("stream-ordered call") : work.runs.front().what;
  if (Status st = waitReached(work); !st.ok()) {
    st = st.prefix(what + ": ");
    if (st.code() != tribAborted) TRIB_WARN("coll", "%s", st.message().c_str());
    hooks_.fail(st);
    return st;
  }
  const size_t n = work.runs.size();
  std::vector<Scratch> scratch(n), scaled(n);
  std::vector<std::unique_ptr<Execution>> execs(n);
  std::vector<bool> started(n, false), done(n, false);
  Status failure;
  size_t failed = n;
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  for (size_t i = 0; i < n && failure.ok(); ++i) {
    StreamRun& r = work.runs[i];
    Status st = r.scratchPool->acquire(r.scratchBytes, &scratch[i]);
    if (st.ok() && !r.preMulScalar.empty()) {
      // The stream has reached the call: its input is final now.
      st = scaleInput(*r.options.engine, *r.scratchPool, r.buffers.input, r.buffers.inputCount,
                      r.options.dtype, r.preMulScalar.data(), deadline, &scaled[i]);
      if (r.buffers.inputCount > 0) r.buffers.input = scaled[i].data();
    }
    if (!st.ok()) {
      failure = st;
      failed = i;
      break;
    }
    r.buffers.scratch = scratch[i].data();
    execs[i] = std::make_unique<Execution>(r.steps, r.buffers, peers_, r.options);
  }
  // Drives every execution until all are done (a window run starts once the earlier ones are:
  // their cells and signal counts follow each other), one fails, or the timeout passes.
  Backoff backoff;
  size_t left = failure.ok() ? n : 0, lastMark = 0;
  while (left > 0) {
    size_t mark = 0;
    bool windowRunning = false;
    for (size_t i = 0; i < n && failure.ok(); ++i) {
      if (done[i]) continue;
      bool finished = false;
      Status st;
      if (!started[i]) {
        if (work.runs[i].usesWindows && windowRunning) continue;
        started[i] = true;
        st = execs[i]->start();
        if (st.ok() && execs[i]->finished()) st = execs[i]->progress(&finished);
      } else {
        st = execs[i]->progress(&finished);
      }
      if (!st.ok()) {
        failure = st;
        failed = i;
      } else if (finished) {
        done[i] = true;
        --left;
      } else {
        windowRunning |= work.runs[i].usesWindows;
        mark += execs[i]->progressMark() + 1;
      }
    }
    if (!failure.ok() || left == 0) break;
    if (hooks_.aborted()) {
      failure = errorf(tribAborted, "the communicator was aborted");
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      std::string pending;
      for (size_t i = 0; i < n; ++i)
        if (started[i] && !done[i]) pending += (pending.empty() ? "" : "; ") + execs[i]->describePending();
      failure =
          errorf(tribTimeout,
                 "timed out after %.1f s (TRIB_TIMEOUT); still waiting for: %s. A peer may have died, be "
                 "stuck, or be calling a different collective.",
                 timeout_.count() / 1000.0, pending.c_str());
      break;
    }
    if (mark != lastMark)
      backoff.reset();
    else
      backoff.idle();
    lastMark = mark;
  }
  if (failure.ok()) return Status::Ok();
  const std::string failedWhat = failed < n ? work.runs[failed].what : what;
  if (failure.code() != tribAborted)
    TRIB_WARN("coll", "%s failed: %s", failedWhat.c_str(), failure.message().c_str());
  failure = failure.prefix(failedWhat + ": ");
  // The error is recorded before the stream goes on, so the stream's later work can see it. The
  // transports fail what they hold; the engine's posted work (kernels writing the caller's buffers)
  // must end before the stream goes on: wait for it, bounded.
  hooks_.fail(failure);
  const auto engineDeadline = std::chrono::steady_clock::now() + timeout_;
  for (size_t i = 0; i < n; ++i) {
    Engine* engine = work.runs[i].options.engine;
    while (engine && execs[i] && execs[i]->holdsPostedOps() &&
           std::chrono::steady_clock::now() < engineDeadline) {
      (void)engine->progress();
      backoff.idle();
    }
  }
  return failure;
}

}  // namespace trib
