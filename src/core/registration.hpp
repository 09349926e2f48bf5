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
#include "cuda/cuda_vmm.hpp"

namespace trib {

// What the registrations learn of device memory: the allocation that `p` lies in (false: not
// device memory, or freed). cuda::deviceAllocation; tests pass a fake allocator's.
using DeviceAllocationLookup = bool (*)(const void* p, cuda::DeviceAllocation* out);

class Registrations {
 public:
  // `owner` tells this communicator's handles from other communicators'; by default the next of a
  // process-wide count (handles tell 2^24 communicators apart).
  Registrations();
  explicit Registrations(uint64_t owner, DeviceAllocationLookup lookup = cuda::deviceAllocation)
      : owner_(owner), lookup_(lookup) {}
  Registrations(const Registrations&) = delete;
  Registrations& operator=(const Registrations&) = delete;
  ~Registrations();  // ends the adoptions of shareable memory it made

  // Registers [buf, buf + bytes). Host memory that is a shared file mapping (a memfd, a /dev/shm
  // file, shared anonymous memory) is adopted (adoptShared): until deregistered it classifies as
  // HostShared, so peers on this host map it once and read it in place, as tribMemAlloc's; private
  // memory stays Registered (copied into the windows). Errors (tribInvalidArgument): NULL, 0 bytes, a range
  // that wraps the address space, memory not mapped in this process (for instance freed with munmap), device
  // memory past the end of its allocation, or overlap with a registration of this communicator.
  Status add(void* buf, size_t bytes, void** handle);
  // Errors (tribInvalidArgument): NULL, a handle of another communicator, one deregistered
  // already or never returned.
  Status remove(void* handle);
  // Whether [p, p + bytes) lies inside one registration of host memory.
  bool covers(const void* p, size_t bytes) const;
  // Device memory: tribInvalidArgument when `p` lies in a registration whose allocation was freed
  // since (or freed and allocated anew at the same address); else Ok, and *alloc (when given) is
  // the registered allocation where [p, p + bytes) lies inside a registration.
  Status checkDevice(const void* p, size_t bytes, cuda::DeviceAllocation* alloc = nullptr) const;
  size_t size() const;
  // Changes with every registration and deregistration: covers() may answer differently.
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }

 private:
  struct Range {
    uintptr_t end;
    uint64_t id;
    bool device = false;
    cuda::DeviceAllocation alloc;  // device: the allocation when registered
    bool adopted = false;          // adoptShared took it (releaseShared when it goes)
  };
  // Whether the allocation a device registration was made on is gone.
  bool freedSince(const Range& r, uintptr_t start) const;
  const uint64_t owner_;
  const DeviceAllocationLookup lookup_ = cuda::deviceAllocation;
  mutable std::mutex mu_;
  std::map<uintptr_t, Range> ranges_;  // by start address; disjoint
  // ranges_.size(), readable without the lock: covers() runs on every call, mostly with none.
  std::atomic<size_t> count_{0};
  std::atomic<uint64_t> generation_{0};
  uint64_t nextId_ = 1;
};

// The kind of the `bytes` at `p` (a call's buffer), given the communicator's registrations.
MemoryKind classifyMemory(const void* p, size_t bytes, const Registrations* regs);

}  // namespace trib
