// Memory other processes on this host can map: what tribMemAlloc returns (the CPU counterpart of
// ncclMemAlloc). Each allocation is its own memfd mapped MAP_SHARED; a peer that may ptrace this
// process (the same permission process_vm_readv needs) duplicates the fd with pidfd_getfd and maps
// the same pages (how the shm windows let peers read what two-shot exposes, transport.hpp:
// PeerWindows::expose).
#pragma once
#include <cstddef>
#include <cstdint>

#include "common/status.hpp"

namespace trib {

// Where a buffer lies in a shared allocation, as a peer needs it to map the same bytes.
struct SharedRegion {
  uint64_t id = 0;  // unique per allocation in this process (never reused)
  int32_t fd = -1;  // the allocation's memfd in this process
  int32_t pad = 0;
  uint64_t mapBytes = 0;  // the allocation's whole size (what a peer maps)
  uint64_t offset = 0;    // the buffer's offset in it
};
static_assert(sizeof(SharedRegion) == 32);

// Allocates `bytes` (> 0) of page-aligned shared memory. Errors: bytes 0 or huge
// (tribInvalidArgument), no memfd or memory (tribSystemError).
Status sharedAlloc(size_t bytes, void** ptr);
// Frees what sharedAlloc returned; nullptr is a no-op; any other pointer is tribInvalidArgument.
Status sharedFree(void* ptr);
// Whether [p, p + bytes) lies inside one live shared allocation (or adopted mapping); fills
// *region if so.
bool findSharedRegion(const void* p, size_t bytes, SharedRegion* region);
// Changes whenever findSharedRegion's answer may have (an allocation, free, adoption or release
// in this process): what remembers a classification compares it (core/ops.cpp's repeat calls).
uint64_t sharedRegionsGeneration();

// Registered host memory that already is a shared file mapping (a memfd, a tmpfs file such as
// /dev/shm/*, shared anonymous memory) can be mapped by peers as tribMemAlloc's is: adoptShared
// finds the mapping that holds all of [p, p + bytes) in /proc/self/maps and, when it is MAP_SHARED
// and its file can be opened (/proc/self/map_files, or its path), records it so findSharedRegion
// answers for it. *adopted: false (and Ok) for memory that cannot be shared this way (private
// memory: malloc, the stack), which stays copied. Adoptions of one mapping are counted; each
// successful one is ended by releaseShared(p) with the same p.
Status adoptShared(const void* p, size_t bytes, bool* adopted);
void releaseShared(const void* p);

}  // namespace trib
