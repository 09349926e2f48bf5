#include "exec/scratch_pool.hpp"

namespace trib {
namespace {

// The smallest class c with 64 << c >= bytes; kClasses when none is that large.
int sizeClassOf(size_t bytes, int classes) {
  int c = 0;
  while (c < classes && (size_t{64} << c) < bytes) ++c;
  return c;
}

}  // namespace

Scratch& Scratch::operator=(Scratch&& o) noexcept {
  if (this == &o) return *this;
  release();
  pool_ = o.pool_;
  ptr_ = o.ptr_;
  bytes_ = o.bytes_;
  sizeClass_ = o.sizeClass_;
  o.pool_ = nullptr;
  o.ptr_ = nullptr;
  o.bytes_ = 0;
  o.sizeClass_ = -1;
  return *this;
}

void Scratch::release() {
  if (pool_ && ptr_) pool_->giveBack(ptr_, sizeClass_);
  pool_ = nullptr;
  ptr_ = nullptr;
  bytes_ = 0;
  sizeClass_ = -1;
}

ScratchPool::~ScratchPool() {
  for (int c = 0; c < kClasses; ++c)
    for (void* p : idle_[c]) engine_.freeScratch(p, size_t{64} << c);
}

Status ScratchPool::acquire(size_t bytes, Scratch* out) {
  out->release();
  if (bytes == 0) return Status::Ok();
  const int c = sizeClassOf(bytes, kClasses);
  if (c >= kClasses) return errorf(tribInvalidArgument, "scratch of %zu bytes is too large", bytes);
  void* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_[c].empty()) {
      p = idle_[c].back();
      idle_[c].pop_back();
    }
  }
  if (!p) p = engine_.allocScratch(size_t{64} << c);
  if (!p)
    return errorf(tribSystemError, "out of %s memory for %zu bytes of scratch",
                  memoryKindName(engine_.memory()), bytes);
  out->pool_ = this;
  out->ptr_ = p;
  out->bytes_ = bytes;
  out->sizeClass_ = c;
  return Status::Ok();
}

void ScratchPool::giveBack(void* p, int c) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (idle_[c].size() < kKeepPerClass) {
      idle_[c].push_back(p);
      return;
    }
  }
  engine_.freeScratch(p, size_t{64} << c);
}

size_t ScratchPool::cachedBuffers() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& v : idle_) n += v.size();
  return n;
}

}  // namespace trib
