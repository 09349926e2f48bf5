#include "common/shared_alloc.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

namespace trib {

namespace {

struct Allocation {
  size_t bytes;
  int fd;
  uint64_t id;
};

struct Registry {
  std::mutex mu;
  std::map<uintptr_t, Allocation> byBase;  // keyed by base address
  // byBase.size(), readable without the lock: every call classifies its buffers, and a process
  // with no shared allocation should not take a global lock for it.
  std::atomic<size_t> live{0};
  uint64_t nextId = 1;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: frees may run during exit
  return *r;
}

}  // namespace

Status sharedAlloc(size_t bytes, void** ptr) {
  if (!ptr) return errorf(tribInvalidArgument, "tribMemAlloc: ptr is NULL");
  *ptr = nullptr;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  if (bytes == 0 || bytes > (size_t{1} << 46))
    return errorf(tribInvalidArgument, "tribMemAlloc: size %zu is outside [1, 2^46] bytes", bytes);
  const size_t rounded = (bytes + page - 1) / page * page;
  int fd = memfd_create("trib-buffer", MFD_CLOEXEC);
  if (fd < 0) return errorf(tribSystemError, "tribMemAlloc: memfd_create: %s", strerror(errno));
  if (ftruncate(fd, static_cast<off_t>(rounded)) != 0) {
    int e = errno;
    close(fd);
    return errorf(tribSystemError, "tribMemAlloc: sizing a %zu-byte memfd: %s", rounded, strerror(e));
  }
  void* m = mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) {
    int e = errno;
    close(fd);
    return errorf(tribSystemError, "tribMemAlloc: mapping %zu bytes: %s", rounded, strerror(e));
  }
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.byBase[reinterpret_cast<uintptr_t>(m)] = Allocation{rounded, fd, r.nextId++};
  r.live.store(r.byBase.size(), std::memory_order_relaxed);
  *ptr = m;
  return Status::Ok();
}

Status sharedFree(void* ptr) {
  if (!ptr) return Status::Ok();
  Registry& r = registry();
  Allocation a;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.byBase.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == r.byBase.end())
      return errorf(tribInvalidArgument, "tribMemFree: %p was not returned by tribMemAlloc (or was freed)",
                    ptr);
    a = it->second;
    r.byBase.erase(it);
    r.live.store(r.byBase.size(), std::memory_order_relaxed);
  }
  // Peers that mapped it keep their pages until they unmap; the memory goes with the last mapping.
  munmap(ptr, a.bytes);
  close(a.fd);
  return Status::Ok();
}

bool findSharedRegion(const void* p, size_t bytes, SharedRegion* region) {
  if (!p) return false;
  const auto addr = reinterpret_cast<uintptr_t>(p);
  Registry& r = registry();
  if (r.live.load(std::memory_order_relaxed) == 0) return false;
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.byBase.upper_bound(addr);
  if (it == r.byBase.begin()) return false;
  --it;
  const uintptr_t off = addr - it->first;
  if (off >= it->second.bytes || bytes > it->second.bytes - off) return false;
  *region = SharedRegion{it->second.id, it->second.fd, 0, it->second.bytes, off};
  return true;
}

}  // namespace trib
