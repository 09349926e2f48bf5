#include "exec/staging_pool.hpp"

namespace trib {

StagingPool::~StagingPool() {
  for (void* p : all_) release_(p);
}

size_t StagingPool::sizeClass(size_t bytes) {
  size_t size = 4096;
  while (size < bytes) size *= 2;
  return size;
}

void* StagingPool::allocateLocked(size_t size) {
  void* p = allocate_(size);
  if (!p) return nullptr;
  all_.push_back(p);
  ++classes_[size].total;
  return p;
}

Status StagingPool::reserve(const std::vector<size_t>& sizes) {
  std::map<size_t, size_t> wanted;  // buffers per class
  for (size_t bytes : sizes) ++wanted[sizeClass(bytes)];
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [size, count] : wanted) {
    while (classes_[size].total < count) {
      void* p = allocateLocked(size);
      if (!p)
        return errorf(tribSystemError, "out of memory reserving %zu staging buffers of %zu bytes", count,
                      size);
      classes_[size].idle.push_back(p);
    }
  }
  return Status::Ok();
}

void* StagingPool::take(size_t bytes) {
  const size_t size = sizeClass(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  Class& c = classes_[size];
  if (!c.idle.empty()) {
    void* p = c.idle.back();
    c.idle.pop_back();
    return p;
  }
  ++allocationsOnTake_;
  return allocateLocked(size);
}

void StagingPool::give(void* p, size_t bytes) {
  if (!p) return;
  std::lock_guard<std::mutex> lock(mu_);
  classes_[sizeClass(bytes)].idle.push_back(p);
}

uint64_t StagingPool::allocationsOnTake() const {
  std::lock_guard<std::mutex> lock(mu_);
  return allocationsOnTake_;
}

}  // namespace trib
