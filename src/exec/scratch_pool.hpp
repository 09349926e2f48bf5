// A communicator's scratch memory: buffers of an engine's kind, kept for reuse, so a training loop
// that repeats its calls stops allocating (each request used to allocate and zero its own).
// Sizes are rounded up to a quarter of their power of two (at most 25% more than asked, 64-byte
// multiples); a Scratch lease returns its buffer when destroyed, and the pool keeps a few idle
// buffers per size, within a byte budget, freeing the rest.
// Contents start undefined: schedules write scratch before reading it (the verifier checks).
#pragma once
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "exec/engine.hpp"

namespace trib {

class ScratchPool;

// One buffer, owned until destroyed (then back to its pool, which must outlive it).
class Scratch {
 public:
  Scratch() = default;
  Scratch(Scratch&& o) noexcept { *this = std::move(o); }
  Scratch& operator=(Scratch&& o) noexcept;
  ~Scratch() { release(); }
  void* data() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  size_t capacity() const { return capacity_; }
  bool empty() const { return bytes_ == 0; }
  void release();

 private:
  friend class ScratchPool;
  ScratchPool* pool_ = nullptr;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;     // what was asked for
  size_t capacity_ = 0;  // what was allocated (the pool's size key)
};

class ScratchPool {
 public:
  explicit ScratchPool(Engine& engine) : engine_(engine) {}
  ~ScratchPool();
  ScratchPool(const ScratchPool&) = delete;
  ScratchPool& operator=(const ScratchPool&) = delete;
  // At least `bytes` (0: an empty lease). tribSystemError when the engine has no memory.
  Status acquire(size_t bytes, Scratch* out);
  size_t cachedBuffers() const;  // idle buffers held for reuse
  size_t idleBytes() const;      // their bytes (at most kMaxIdleBytes)

  static constexpr size_t kKeepPerSize = 2;           // idle buffers kept per size
  static constexpr size_t kMaxIdleBytes = 256 << 20;  // all idle buffers together

 private:
  friend class Scratch;
  void giveBack(void* p, size_t capacity);
  static constexpr size_t kMaxBytes = size_t{1} << 50;
  Engine& engine_;
  mutable std::mutex mu_;
  std::map<size_t, std::vector<void*>> idle_;  // by capacity
  size_t idleBytes_ = 0;
};

}  // namespace trib
