// A host stand-in for a CUDA stream, and the stream ordering over it: the same progress thread and
// executor path as the CUDA ordering, on host memory, for CPU tests. A HostStream runs closures
// in order on its own thread (the "kernels" a test enqueues, and the ordering's start and end
// marks); HostStreamOrdering marks a ticket's start as a closure that stores it, and holds the
// stream with a closure that waits for the release word, as cuStreamWriteValue32 and
// cuStreamWaitValue32 do on a GPU.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "exec/stream_order.hpp"

namespace trib {

class HostStream {
 public:
  HostStream();
  ~HostStream();  // runs what is queued, then joins
  HostStream(const HostStream&) = delete;
  HostStream& operator=(const HostStream&) = delete;
  void enqueue(std::function<void()> task);
  // Waits until every task enqueued so far has run; false when `timeout` passes first.
  bool synchronize(std::chrono::milliseconds timeout);

 private:
  void loop();
  std::mutex mu_;
  std::condition_variable wake_, drained_;
  std::deque<std::function<void()>> queue_;
  uint64_t enqueued_ = 0, ran_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

// Streams passed to it are HostStream*; NULL is refused (there is no default host stream).
class HostStreamOrdering final : public StreamOrdering {
 public:
  HostStreamOrdering();
  const char* name() const override { return "host"; }
  Status markStart(void* stream, uint32_t ticket) override;
  Status holdUntilDone(void* stream, uint32_t ticket) override;
  bool reached(uint32_t ticket) override;
  void release(uint32_t ticket) override;

 private:
  // Shared with the closures: a stream may run a hold after the ordering is gone.
  struct Words {
    std::atomic<uint32_t> start[kRing];
    std::atomic<uint32_t> done{0};
  };
  std::shared_ptr<Words> words_;
};

}  // namespace trib
