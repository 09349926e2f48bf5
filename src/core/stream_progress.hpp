// The progress thread of a communicator's stream-ordered calls (NCCL's proxy): each call (or
// each group of calls) is one StreamWork with a ticket (exec/stream_order.hpp). In submission
// order, the thread waits until the caller's stream reaches the ticket, runs the executions
// (scratch from the pool, local work on their engine), and releases the ticket, whatever the
// outcome: a failed, timed-out or aborted call lets the stream go on and reports its error through
// `fail` (the communicator's async error). Every wait is bounded by `timeout`: the stream's
// reaching the call, and the run.
#pragma once
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "exec/executor.hpp"
#include "exec/scratch_pool.hpp"
#include "exec/stream_order.hpp"

namespace trib {

// One execution of a stream-ordered call, built on the progress thread (its scratch is taken there).
struct StreamRun {
  std::shared_ptr<const std::vector<Step>> steps;
  ExecBuffers buffers;  // scratch filled in by the progress thread
  ExecOptions options;
  ScratchPool* scratchPool = nullptr;  // of options.engine's kind
  size_t scratchBytes = 0;
  bool usesWindows = false;  // starts once the work's earlier window runs are done
  std::string what;          // for messages
  // A pre-multiplied sum's scalar (planned as a sum): the input is scaled into scratch by the
  // run's engine before the execution starts (core/premul.hpp). Empty: none.
  std::vector<uint8_t> preMulScalar;
};
struct StreamWork {
  uint32_t ticket = 0;
  std::vector<StreamRun> runs;  // started together (window runs one after another)
};

class StreamProgress {
 public:
  struct Hooks {
    std::function<bool()> aborted;            // the communicator was aborted
    std::function<void(const Status&)> fail;  // a call failed: break the communicator
  };
  StreamProgress(StreamOrdering& ordering, const std::vector<Transport*>& peers,
                 std::chrono::milliseconds timeout, Hooks hooks);
  // Finishes (or fails, bounded) everything submitted, releasing every ticket, then joins.
  ~StreamProgress();
  StreamProgress(const StreamProgress&) = delete;
  StreamProgress& operator=(const StreamProgress&) = delete;

  // Takes a place for one work before its ticket is marked on the stream: waits, bounded by the
  // timeout, while StreamOrdering::kRing / 2 are in flight (a ticket's start word is then free).
  Status reserve();
  void unreserve();  // the marks failed: nothing will be pushed for it
  // Queues `work` (its place reserved, its ticket marked on the stream).
  void push(StreamWork work);
  // Whether anything submitted is not released yet.
  bool busy() const;
  // Waits until nothing is in flight; tribTimeout after `timeout`.
  Status drain(std::chrono::milliseconds timeout);
  // Works run so far (tests).
  uint64_t completed() const;

 private:
  void loop();
  Status run(StreamWork& work);
  Status waitReached(const StreamWork& work);

  StreamOrdering& ordering_;
  const std::vector<Transport*>& peers_;
  const std::chrono::milliseconds timeout_;
  Hooks hooks_;
  mutable std::mutex mu_;
  std::condition_variable wake_, idle_;
  std::deque<StreamWork> queue_;
  size_t inFlight_ = 0;
  uint64_t completed_ = 0;
  bool stop_ = false;
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace trib
