#include "core/registration.hpp"

#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <vector>

#include "common/shared_alloc.hpp"
#include "cuda/cuda_api.hpp"

namespace trib {
namespace {

// A handle is (owner, id) folded into a pointer-sized token: 24 bits of owner, 40 of id.
constexpr int kIdBits = 40;
void* makeHandle(uint64_t owner, uint64_t id) {
  return reinterpret_cast<void*>(static_cast<uintptr_t>((owner & 0xffffff) << kIdBits | id));
}
uint64_t handleOwner(void* h) { return reinterpret_cast<uintptr_t>(h) >> kIdBits; }
uint64_t handleId(void* h) { return reinterpret_cast<uintptr_t>(h) & ((uint64_t{1} << kIdBits) - 1); }

// Whether every page of [p, p + bytes) is mapped in this process (mincore fails with ENOMEM on
// a hole). It cannot see a free() that kept the pages (the allocator's), only unmapped ones.
bool mapped(uintptr_t p, size_t bytes) {
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t lo = p & ~(page - 1), hi = (p + bytes + page - 1) & ~(page - 1);
  constexpr size_t kChunkPages = 4096;  // bounded vector per mincore call
  std::vector<unsigned char> vec(kChunkPages);
  for (uintptr_t a = lo; a < hi; a += kChunkPages * page) {
    const size_t len = std::min<uintptr_t>(hi - a, kChunkPages * page);
    if (mincore(reinterpret_cast<void*>(a), len, vec.data()) != 0) return false;
  }
  return true;
}

}  // namespace

Registrations::Registrations()
    : owner_([] {
        static std::atomic<uint64_t> next{1};
        return next.fetch_add(1, std::memory_order_relaxed);
      }()) {}

Registrations::~Registrations() {
  for (const auto& [lo, r] : ranges_)
    if (r.adopted) releaseShared(reinterpret_cast<void*>(lo));
}

bool Registrations::freedSince(const Range& r, uintptr_t start) const {
  cuda::DeviceAllocation now;
  return !lookup_(reinterpret_cast<void*>(start), &now) || now.base != r.alloc.base ||
         now.bufferId != r.alloc.bufferId;
}

Status Registrations::add(void* buf, size_t bytes, void** handle) {
  if (!handle) return errorf(tribInvalidArgument, "tribCommRegister: handle is NULL");
  *handle = nullptr;
  if (!buf) return errorf(tribInvalidArgument, "tribCommRegister: buff is NULL");
  if (bytes == 0) return errorf(tribInvalidArgument, "tribCommRegister: size is 0");
  const auto lo = reinterpret_cast<uintptr_t>(buf);
  uintptr_t hi = 0;
  if (__builtin_add_overflow(lo, bytes, &hi))
    return errorf(tribInvalidArgument, "tribCommRegister: %p + %zu bytes wraps the address space", buf,
                  bytes);
  cuda::DeviceAllocation alloc;
  const bool device = lookup_(buf, &alloc);
  if (device && (lo < alloc.base || hi > alloc.base + alloc.bytes))
    return errorf(
        tribInvalidArgument,
        "tribCommRegister: [%p, +%zu bytes) runs past its CUDA allocation [%p, +%zu bytes) (freed, or "
        "a range of two allocations)",
        buf, bytes, reinterpret_cast<void*>(alloc.base), alloc.bytes);
  if (!device && !mapped(lo, bytes))
    return errorf(tribInvalidArgument,
                  "tribCommRegister: [%p, +%zu bytes) is not mapped in this process (freed, or never "
                  "allocated)",
                  buf, bytes);
  // Shareable host memory (a shared file mapping) is mapped by peers from now on, as tribMemAlloc's.
  bool adopted = false;
  if (!device) TRIB_RETURN_IF_ERROR(adoptShared(buf, bytes, &adopted));
  std::unique_lock<std::mutex> lock(mu_);
  auto refuse = [&](Status s) {
    lock.unlock();
    if (adopted) releaseShared(buf);
    return s;
  };
  auto next = ranges_.lower_bound(lo);
  auto clash = ranges_.end();
  if (next != ranges_.end() && next->first < hi) clash = next;
  if (clash == ranges_.end() && next != ranges_.begin() && std::prev(next)->second.end > lo)
    clash = std::prev(next);
  if (clash != ranges_.end())
    return refuse(errorf(tribInvalidArgument,
                         "tribCommRegister: [%p, +%zu bytes) overlaps the registration [%p, +%zu bytes) of "
                         "this communicator%s; deregister it first",
                         buf, bytes, reinterpret_cast<void*>(clash->first),
                         static_cast<size_t>(clash->second.end - clash->first),
                         clash->second.device && freedSince(clash->second, clash->first)
                             ? " (whose device memory was freed since it was registered)"
                             : ""));
  if (nextId_ >> kIdBits)
    return refuse(errorf(tribSystemError, "tribCommRegister: out of registration handles"));
  const uint64_t id = nextId_++;
  ranges_.emplace(lo, Range{hi, id, device, alloc, adopted});
  count_.store(ranges_.size(), std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  *handle = makeHandle(owner_, id);
  return Status::Ok();
}

Status Registrations::remove(void* handle) {
  if (!handle) return errorf(tribInvalidArgument, "tribCommDeregister: handle is NULL");
  if (handleOwner(handle) != (owner_ & 0xffffff))
    return errorf(tribInvalidArgument,
                  "tribCommDeregister: handle %p was not returned by this communicator's tribCommRegister",
                  handle);
  const uint64_t id = handleId(handle);
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = ranges_.begin(); it != ranges_.end(); ++it) {
    if (it->second.id != id) continue;
    if (it->second.adopted) releaseShared(reinterpret_cast<void*>(it->first));
    ranges_.erase(it);
    count_.store(ranges_.size(), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    return Status::Ok();
  }
  return errorf(tribInvalidArgument,
                "tribCommDeregister: handle %p is not registered (deregistered already?)", handle);
}

bool Registrations::covers(const void* p, size_t bytes) const {
  if (count_.load(std::memory_order_relaxed) == 0) return false;
  const auto lo = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ranges_.upper_bound(lo);
  if (it == ranges_.begin()) return false;
  --it;
  return !it->second.device && lo < it->second.end && bytes <= it->second.end - lo;
}

Status Registrations::checkDevice(const void* p, size_t bytes, cuda::DeviceAllocation* alloc) const {
  if (alloc) *alloc = cuda::DeviceAllocation{};
  if (count_.load(std::memory_order_relaxed) == 0) return Status::Ok();
  const auto lo = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ranges_.upper_bound(lo);
  if (it == ranges_.begin()) return Status::Ok();
  --it;
  const Range& r = it->second;
  if (!r.device || lo >= r.end) return Status::Ok();
  if (freedSince(r, lo))
    return errorf(
        tribInvalidArgument,
        "%p lies in the registration [%p, +%zu bytes) of this communicator, whose CUDA memory was freed "
        "since it was registered; deregister it (and register the new buffer)",
        p, reinterpret_cast<void*>(it->first), static_cast<size_t>(r.end - it->first));
  if (alloc && bytes <= r.end - lo) *alloc = r.alloc;  // a buffer past its end is simply not registered
  return Status::Ok();
}

size_t Registrations::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ranges_.size();
}

MemoryKind classifyMemory(const void* p, size_t bytes, const Registrations* regs) {
  if (!p || bytes == 0) return MemoryKind::Host;
  SharedRegion region;
  if (findSharedRegion(p, bytes, &region)) return MemoryKind::HostShared;
  if (regs && regs->covers(p, bytes)) return MemoryKind::Registered;
  return cuda::isDevicePointer(p) ? MemoryKind::Device : MemoryKind::Host;
}

}  // namespace trib
