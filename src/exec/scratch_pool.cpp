#include "exec/scratch_pool.hpp"

#include <algorithm>

namespace trib {
namespace {

// `bytes` rounded up to a multiple of a quarter of its power of two (64 at least).
size_t capacityFor(size_t bytes) {
  const size_t pow2 = size_t{1} << (63 - __builtin_clzll(bytes));
  const size_t grain = std::max<size_t>(64, pow2 / 4);
  return (bytes + grain - 1) / grain * grain;
}

}  // namespace

Scratch& Scratch::operator=(Scratch&& o) noexcept {
  if (this == &o) return *this;
  release();
  pool_ = o.pool_;
  ptr_ = o.ptr_;
  bytes_ = o.bytes_;
  capacity_ = o.capacity_;
  o.pool_ = nullptr;
  o.ptr_ = nullptr;
  o.bytes_ = 0;
  o.capacity_ = 0;
  return *this;
}

void Scratch::release() {
  if (pool_ && ptr_) pool_->giveBack(ptr_, capacity_);
  pool_ = nullptr;
  ptr_ = nullptr;
  bytes_ = 0;
  capacity_ = 0;
}

ScratchPool::~ScratchPool() {
  for (auto& [capacity, bufs] : idle_)
    for (void* p : bufs) engine_.freeScratch(p, capacity);
}

Status ScratchPool::acquire(size_t bytes, Scratch* out) {
  out->release();
  if (bytes == 0) return Status::Ok();
  if (bytes > kMaxBytes) return errorf(tribInvalidArgument, "scratch of %zu bytes is too large", bytes);
  const size_t capacity = capacityFor(bytes);
  void* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = idle_.find(capacity);
    if (it != idle_.end() && !it->second.empty()) {
      p = it->second.back();
      it->second.pop_back();
      idleBytes_ -= capacity;
    }
  }
  if (!p) p = engine_.allocScratch(capacity);
  if (!p)
    return errorf(tribSystemError, "out of %s memory for %zu bytes of scratch",
                  memoryKindName(engine_.memory()), bytes);
  out->pool_ = this;
  out->ptr_ = p;
  out->bytes_ = bytes;
  out->capacity_ = capacity;
  return Status::Ok();
}

void ScratchPool::giveBack(void* p, size_t capacity) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<void*>& bufs = idle_[capacity];
    if (bufs.size() < kKeepPerSize && idleBytes_ + capacity <= kMaxIdleBytes) {
      bufs.push_back(p);
      idleBytes_ += capacity;
      return;
    }
  }
  engine_.freeScratch(p, capacity);
}

size_t ScratchPool::cachedBuffers() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [capacity, bufs] : idle_) n += bufs.size();
  return n;
}

size_t ScratchPool::idleBytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return idleBytes_;
}

}  // namespace trib
