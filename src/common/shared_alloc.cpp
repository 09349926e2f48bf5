#include "common/shared_alloc.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

namespace trib {

namespace {

struct Allocation {
  size_t bytes;  // of the mapping at the key's address
  int fd;
  uint64_t id;
  uint64_t fileOffset = 0;  // where the mapping starts in fd's file (adopted mappings)
  int adoptions = 0;        // > 0: an adopted mapping (adoptShared), not tribMemAlloc's
};

struct Registry {
  std::mutex mu;
  std::map<uintptr_t, Allocation> byBase;  // keyed by base address
  // byBase.size(), readable without the lock: every call classifies its buffers, and a process
  // with no shared allocation should not take a global lock for it.
  std::atomic<size_t> live{0};
  // Bumped by every change of byBase (sharedRegionsGeneration).
  std::atomic<uint64_t> generation{0};
  uint64_t nextId = 1;
  void changed() {
    live.store(byBase.size(), std::memory_order_relaxed);
    generation.fetch_add(1, std::memory_order_release);
  }
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
  r.changed();
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
    if (it == r.byBase.end() || it->second.adoptions > 0)
      return errorf(tribInvalidArgument, "tribMemFree: %p was not returned by tribMemAlloc (or was freed)",
                    ptr);
    a = it->second;
    r.byBase.erase(it);
    r.changed();
  }
  // Peers that mapped it keep their pages until they unmap; the memory goes with the last mapping.
  munmap(ptr, a.bytes);
  close(a.fd);
  return Status::Ok();
}

uint64_t sharedRegionsGeneration() { return registry().generation.load(std::memory_order_acquire); }

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
  // A peer maps the file from its start: adopted mappings may begin further in.
  const uint64_t at = it->second.fileOffset;
  *region = SharedRegion{it->second.id, it->second.fd, 0, at + it->second.bytes, at + off};
  return true;
}

namespace {

// The line of /proc/self/maps whose range holds [addr, addr + bytes).
struct MapsLine {
  uintptr_t lo = 0, hi = 0;
  bool shared = false;
  uint64_t offset = 0;
  dev_t dev = 0;
  ino_t inode = 0;
  std::string path;
};

bool mappingOf(uintptr_t addr, size_t bytes, MapsLine* out) {
  FILE* f = std::fopen("/proc/self/maps", "re");
  if (!f) return false;
  char line[4096 + 256];
  bool found = false;
  while (!found && std::fgets(line, sizeof line, f)) {
    unsigned long lo = 0, hi = 0, inode = 0;
    unsigned long long off = 0;
    unsigned major = 0, minor = 0;
    char perms[8] = {};
    int pathAt = 0;
    if (std::sscanf(line, "%lx-%lx %7s %llx %x:%x %lu %n", &lo, &hi, perms, &off, &major, &minor, &inode,
                    &pathAt) < 7)
      continue;
    if (addr < lo || addr >= hi || bytes > hi - addr) continue;
    out->lo = lo, out->hi = hi, out->shared = perms[3] == 's', out->offset = off;
    out->dev = makedev(major, minor), out->inode = inode;
    out->path = pathAt > 0 ? std::string(line + pathAt) : std::string();
    while (!out->path.empty() && (out->path.back() == '\n' || out->path.back() == ' ')) out->path.pop_back();
    found = true;
  }
  std::fclose(f);
  return found;
}

// A descriptor of the mapping's file: through /proc/self/map_files (needs CAP_SYS_ADMIN or
// CAP_CHECKPOINT_RESTORE), else by its path when that still names the same file.
int openMappedFile(const MapsLine& m) {
  const std::string entry = "/proc/self/map_files/" + strprintf("%lx-%lx", static_cast<unsigned long>(m.lo),
                                                                static_cast<unsigned long>(m.hi));
  int fd = open(entry.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0 && !m.path.empty() && m.path[0] == '/') fd = open(m.path.c_str(), O_RDWR | O_CLOEXEC);
  struct stat sb {};
  if (fd >= 0 && (fstat(fd, &sb) != 0 || sb.st_ino != m.inode || sb.st_dev != m.dev)) {
    close(fd);
    fd = -1;
  }
  return fd;
}

}  // namespace

Status adoptShared(const void* p, size_t bytes, bool* adopted) {
  *adopted = false;
  if (!p || bytes == 0) return Status::Ok();
  const auto addr = reinterpret_cast<uintptr_t>(p);
  MapsLine m;
  if (!mappingOf(addr, bytes, &m) || !m.shared || m.inode == 0) return Status::Ok();
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.byBase.find(m.lo);
    if (it != r.byBase.end()) {
      if (it->second.adoptions == 0 || it->second.bytes != m.hi - m.lo)
        return Status::Ok();  // tribMemAlloc's
      ++it->second.adoptions;
      *adopted = true;
      return Status::Ok();
    }
  }
  const int fd = openMappedFile(m);
  if (fd < 0) return Status::Ok();
  std::lock_guard<std::mutex> lock(r.mu);
  auto [it, fresh] = r.byBase.emplace(m.lo, Allocation{m.hi - m.lo, fd, r.nextId, m.offset, 1});
  if (!fresh) {  // another thread adopted it meanwhile
    close(fd);
    if (it->second.adoptions == 0) return Status::Ok();
    ++it->second.adoptions;
  } else {
    ++r.nextId;
    r.changed();
  }
  *adopted = true;
  return Status::Ok();
}

void releaseShared(const void* p) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  // The entry whose mapping holds p (the mapping itself may be gone from /proc/self/maps by now).
  const auto addr = reinterpret_cast<uintptr_t>(p);
  auto it = r.byBase.upper_bound(addr);
  if (it == r.byBase.begin()) return;
  --it;
  if (it->second.adoptions == 0 || addr - it->first >= it->second.bytes) return;
  if (--it->second.adoptions > 0) return;
  close(it->second.fd);
  r.byBase.erase(it);
  r.changed();
}

}  // namespace trib
