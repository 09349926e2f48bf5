// A communicator's registered buffers (tribCommRegister / tribCommDeregister, as NCCL's): ranges
// of this process's memory the caller promises to keep mapped until deregistered, so that
// transports may prepare them once (an RDMA memory region, a CUDA IPC handle, a peer mapping)
// and reuse that for every call on them. Handles are opaque tokens, never dereferenced, so a
// stale or foreign handle is an error, not a crash.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

#include "common/memory_kind.hpp"
#include "common/status.hpp"

namespace trib {

class Registrations {
 public:
  // `owner` tells this communicator's handles from other communicators'; by default the next of a
  // process-wide count (handles tell 2^24 communicators apart).
  Registrations();
  explicit Registrations(uint64_t owner) : owner_(owner) {}

  // Registers [buf, buf + bytes). Errors (tribInvalidArgument): NULL, 0 bytes, a range that wraps
  // the address space, memory not mapped in this process (for instance freed with munmap), or
  // overlap with a registration of this communicator.
  Status add(void* buf, size_t bytes, void** handle);
  // Errors (tribInvalidArgument): NULL, a handle of another communicator, one deregistered
  // already or never returned.
  Status remove(void* handle);
  // Whether [p, p + bytes) lies inside one registration.
  bool covers(const void* p, size_t bytes) const;
  size_t size() const;

 private:
  struct Range {
    uintptr_t end;
    uint64_t id;
  };
  const uint64_t owner_;
  mutable std::mutex mu_;
  std::map<uintptr_t, Range> ranges_;  // by start address; disjoint
  // ranges_.size(), readable without the lock: covers() runs on every call, mostly with none.
  std::atomic<size_t> count_{0};
  uint64_t nextId_ = 1;
};

// The kind of the `bytes` at `p` (a call's buffer), given the communicator's registrations.
MemoryKind classifyMemory(const void* p, size_t bytes, const Registrations* regs);

}  // namespace trib
