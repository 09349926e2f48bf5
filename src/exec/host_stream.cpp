#include "exec/host_stream.hpp"

namespace trib {

HostStream::HostStream() : thread_([this] { loop(); }) {}

HostStream::~HostStream() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void HostStream::enqueue(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(task));
    ++enqueued_;
  }
  wake_.notify_one();
}

bool HostStream::synchronize(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t target = enqueued_;
  return drained_.wait_for(lock, timeout, [&] { return ran_ >= target; });
}

void HostStream::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;
    std::function<void()> task = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    task();
    lock.lock();
    ++ran_;
    drained_.notify_all();
  }
}

HostStreamOrdering::HostStreamOrdering() : words_(std::make_shared<Words>()) {
  for (auto& w : words_->start) w.store(0, std::memory_order_relaxed);
}

Status HostStreamOrdering::markStart(void* stream, uint32_t ticket) {
  if (!stream) return errorf(tribInvalidArgument, "the host stream ordering needs a stream (a HostStream)");
  static_cast<HostStream*>(stream)->enqueue(
      [w = words_, ticket] { w->start[ticket % kRing].store(ticket, std::memory_order_release); });
  return Status::Ok();
}

Status HostStreamOrdering::holdUntilDone(void* stream, uint32_t ticket) {
  if (!stream) return errorf(tribInvalidArgument, "the host stream ordering needs a stream (a HostStream)");
  static_cast<HostStream*>(stream)->enqueue([w = words_, ticket] {
    // cuStreamWaitValue32's GEQ: (int32_t)(*addr - value) >= 0.
    while (static_cast<int32_t>(w->done.load(std::memory_order_acquire) - ticket) < 0)
      std::this_thread::sleep_for(std::chrono::microseconds(20));
  });
  return Status::Ok();
}

bool HostStreamOrdering::reached(uint32_t ticket) {
  return words_->start[ticket % kRing].load(std::memory_order_acquire) == ticket;
}

void HostStreamOrdering::release(uint32_t ticket) { words_->done.store(ticket, std::memory_order_release); }

}  // namespace trib
