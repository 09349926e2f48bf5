// The verbs transport's memory registrations: one per buffer range in use, shared by the
// operations that use it at once, and up to `keep` released ones kept for reuse, least recently
// used evicted first. Generic over the registrar so the policy is tested without a device.
// Keyed by memory kind too: host and device memory register differently (verbs_dmabuf.hpp), and a
// kept registration never serves memory of another kind mapped at its address since.
//
// Why so few are kept by default (TRIB_IB_REG_CACHE=0): a registration pins the pages that were
// mapped when it was made. A buffer freed and a new one mapped at the same address would reuse a
// stale registration and the NIC would read and write the old pages: a corrupted result. Keeping
// released registrations is therefore for applications that keep their buffers (or register them
// with tribCommRegister).
#pragma once
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <utility>

#include "common/memory_kind.hpp"
#include "common/status.hpp"

namespace trib::verbs {

template <class Region>
class RegCache {
 public:
  // reg: registers [addr, addr + bytes), memory of `kind`, into *out; dereg releases one.
  using Reg = std::function<Status(uintptr_t addr, uint64_t bytes, MemoryKind kind, Region* out)>;
  using Dereg = std::function<void(Region&)>;
  RegCache(size_t keep, Reg reg, Dereg dereg) : keep_(keep), reg_(std::move(reg)), dereg_(std::move(dereg)) {}
  ~RegCache() { clear(); }
  RegCache(const RegCache&) = delete;
  RegCache& operator=(const RegCache&) = delete;

  // A registration covering [addr, addr + bytes) of `kind`, made or reused; release it with
  // release(id).
  Status acquire(uintptr_t addr, uint64_t bytes, MemoryKind kind, uint64_t* id, Region** region) {
    for (auto& [eid, e] : entries_) {
      if (e.kind == kind && e.addr <= addr && addr + bytes <= e.addr + e.bytes) {
        if (e.users++ == 0) lru_.erase(e.lruPos);
        ++hits_;
        *id = eid;
        *region = &e.region;
        return Status::Ok();
      }
    }
    Entry e;
    e.addr = addr;
    e.bytes = bytes;
    e.kind = kind;
    TRIB_RETURN_IF_ERROR(reg_(addr, bytes, kind, &e.region));
    ++registered_;
    e.users = 1;
    const uint64_t eid = nextId_++;
    auto [it, _] = entries_.emplace(eid, std::move(e));
    *id = eid;
    *region = &it->second.region;
    return Status::Ok();
  }

  void release(uint64_t id) {
    auto it = entries_.find(id);
    if (it == entries_.end() || it->second.users == 0) return;
    if (--it->second.users > 0) return;
    it->second.lruPos = lru_.insert(lru_.end(), id);
    while (lru_.size() > keep_) evict(lru_.front());
  }

  void clear() {
    for (auto& [id, e] : entries_) dereg_(e.region);
    entries_.clear();
    lru_.clear();
  }

  size_t size() const { return entries_.size(); }      // in use + kept
  size_t kept() const { return lru_.size(); }          // released, kept for reuse
  uint64_t hits() const { return hits_; }              // acquisitions that registered nothing
  uint64_t registered() const { return registered_; }  // registrations made

 private:
  struct Entry {
    uintptr_t addr = 0;
    uint64_t bytes = 0;
    MemoryKind kind = MemoryKind::Host;
    Region region{};
    uint32_t users = 0;
    std::list<uint64_t>::iterator lruPos;
  };
  void evict(uint64_t id) {
    auto it = entries_.find(id);
    lru_.erase(it->second.lruPos);
    dereg_(it->second.region);
    entries_.erase(it);
  }

  size_t keep_;
  Reg reg_;
  Dereg dereg_;
  std::map<uint64_t, Entry> entries_;
  std::list<uint64_t> lru_;  // released entries, least recently used first
  uint64_t nextId_ = 1, hits_ = 0, registered_ = 0;
};

}  // namespace trib::verbs
