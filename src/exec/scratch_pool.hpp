// A communicator's scratch memory: buffers of an engine's kind, kept for reuse, so a training loop
// that repeats its calls stops allocating (each request used to allocate and zero its own).
// Buffers come in power-of-two size classes; a Scratch lease returns its buffer when destroyed.
// Contents start undefined: schedules write scratch before reading it (the verifier checks).
#pragma once
#include <cstddef>
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
  bool empty() const { return bytes_ == 0; }
  void release();

 private:
  friend class ScratchPool;
  ScratchPool* pool_ = nullptr;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;  // what was asked for
  int sizeClass_ = -1;
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

 private:
  friend class Scratch;
  void giveBack(void* p, int sizeClass);
  static constexpr int kClasses = 48;         // 64 B .. 2^53 B
  static constexpr size_t kKeepPerClass = 4;  // idle buffers kept per class; more are freed
  Engine& engine_;
  mutable std::mutex mu_;
  std::vector<void*> idle_[kClasses];
};

}  // namespace trib
