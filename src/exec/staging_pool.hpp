// Host staging buffers of an engine, kept for reuse and sized in advance. A CUDA engine's are
// page-locked, and page-locking is one of CUDA's implicit synchronisations: it waits for work on
// the context's blocking streams (CUDA programming guide, "Implicit Synchronization"). A
// stream-ordered call holds its caller's stream until it ends, so staging allocated while it runs
// would wait for itself. Hence reserve(): the caller's thread grows the pool before its stream is
// held, and the run then only takes and gives buffers.
// Sizes are rounded up to powers of two (at least 4 KiB); buffers live as long as the pool.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "common/status.hpp"

namespace trib {

class StagingPool {
 public:
  using Allocate = std::function<void*(size_t bytes)>;  // nullptr: out of memory
  using Release = std::function<void(void* p)>;
  StagingPool(Allocate allocate, Release release)
      : allocate_(std::move(allocate)), release_(std::move(release)) {}
  ~StagingPool();
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  // Grows the pool until every size in `sizes` can be held at once, counting the buffers it
  // already has (idle or taken): a work whose needs were reserved takes them all without
  // allocating, once the works before it gave theirs back. tribSystemError when out of memory.
  Status reserve(const std::vector<size_t>& sizes);
  // A buffer of at least `bytes`: an idle one, else a new one (counted: allocationsOnTake()).
  void* take(size_t bytes);
  // Returns what take() gave for the same `bytes`.
  void give(void* p, size_t bytes);
  // How many take() calls had to allocate (what reserve() is there to keep at 0).
  uint64_t allocationsOnTake() const;
  static size_t sizeClass(size_t bytes);

 private:
  void* allocateLocked(size_t size);
  struct Class {
    std::vector<void*> idle;
    size_t total = 0;  // idle and taken
  };
  Allocate allocate_;
  Release release_;
  mutable std::mutex mu_;
  std::map<size_t, Class> classes_;  // by size
  std::vector<void*> all_;
  uint64_t allocationsOnTake_ = 0;
};

}  // namespace trib
