// A rank's published exposures (schedule.hpp: expose; transport.hpp: PeerWindows::expose): which
// ranges of its window peers read from one of its buffers instead, and how to reach that buffer
// (a handle the windows' provider defines: an address for threads of one process, a
// SharedRegion for processes). It lives where every rank can read it (the fabric, the owner's
// shm segment); only the owner writes it.
//
// Publication is ordered by the signals (the owner publishes before its signal, a reader looks
// after its wait), but the owner may rewrite one entry while a peer scans the table for another,
// so each entry is a seqlock: a reader skips one being rewritten, which is never the one it needs
// (the schedule's proof: an exposure a peer reads is not rewritten before that read is done).
// Field stores are releases and loads acquires (no fences: ThreadSanitizer does not model them):
// a reader that sees any field of a rewrite then sees its odd sequence number.
#pragma once
#include <atomic>
#include <cstdint>

namespace trib {

struct alignas(64) ExposeEntry {
  std::atomic<uint64_t> seq;     // odd while the owner rewrites the entry
  std::atomic<uint64_t> offset;  // the window range, in bytes
  std::atomic<uint64_t> bytes;   // 0: free
  std::atomic<uint64_t> handle[4];
};
static_assert(sizeof(ExposeEntry) == 64 && std::atomic<uint64_t>::is_always_lock_free);

struct ExposeHandle {
  uint64_t w[4] = {0, 0, 0, 0};
};

// Enough for two-shot's three exposures per cell in both cells; a full table means a copy instead.
constexpr int kExposeEntries = 8;

struct ExposeTable {
  ExposeEntry entry[kExposeEntries];
  // How many entries are in use (the owner's count, on a line of its own). A reader that finds 0
  // skips the scan: most calls expose nothing, and reading the eight entries was ~250 instructions
  // of every 8-byte one-shot. An exposure a reader needs was counted before the signal the reader
  // waited for, and stays until that read is done, so the count it sees then is not 0.
  alignas(64) std::atomic<uint64_t> inUse{0};

  // Owner: every exposure overlapping [offset, offset+bytes) ends (whole: its other bytes are the
  // window's again, which nobody reads before rewriting them).
  void drop(uint64_t offset, uint64_t bytes) {
    for (ExposeEntry& e : entry) {
      const uint64_t eb = e.bytes.load(std::memory_order_relaxed);
      const uint64_t eo = e.offset.load(std::memory_order_relaxed);
      if (eb == 0 || eo >= offset + bytes || offset >= eo + eb) continue;
      const uint64_t s = e.seq.load(std::memory_order_relaxed);
      e.seq.store(s + 1, std::memory_order_relaxed);
      e.bytes.store(0, std::memory_order_release);
      e.seq.store(s + 2, std::memory_order_release);
      inUse.store(inUse.load(std::memory_order_relaxed) - 1, std::memory_order_release);
    }
  }
  // Owner: [offset, offset+bytes) is read from `h` now; false when the table is full.
  bool publish(uint64_t offset, uint64_t bytes, const ExposeHandle& h) {
    drop(offset, bytes);
    for (ExposeEntry& e : entry) {
      if (e.bytes.load(std::memory_order_relaxed) != 0) continue;
      inUse.store(inUse.load(std::memory_order_relaxed) + 1, std::memory_order_release);
      const uint64_t s = e.seq.load(std::memory_order_relaxed);
      e.seq.store(s + 1, std::memory_order_relaxed);
      e.offset.store(offset, std::memory_order_release);
      for (int i = 0; i < 4; ++i) e.handle[i].store(h.w[i], std::memory_order_release);
      e.bytes.store(bytes, std::memory_order_release);
      e.seq.store(s + 2, std::memory_order_release);
      return true;
    }
    return false;
  }
  // Reader: 1 and *h, *into (the range's offset in the exposed bytes) when one exposure holds
  // all of [offset, offset+bytes); 0 when none touches it (it is in the window); -1 when
  // exposures hold only part of it (a schedule the verifier rejects).
  int find(uint64_t offset, uint64_t bytes, ExposeHandle* h, uint64_t* into) const {
    if (inUse.load(std::memory_order_acquire) == 0) return 0;
    int found = 0;
    for (const ExposeEntry& e : entry) {
      const uint64_t s1 = e.seq.load(std::memory_order_acquire);
      if (s1 & 1) continue;
      const uint64_t eo = e.offset.load(std::memory_order_acquire);
      const uint64_t eb = e.bytes.load(std::memory_order_acquire);
      ExposeHandle got;
      for (int i = 0; i < 4; ++i) got.w[i] = e.handle[i].load(std::memory_order_acquire);
      if (e.seq.load(std::memory_order_relaxed) != s1) continue;
      if (eb == 0 || eo >= offset + bytes || offset >= eo + eb) continue;
      if (eo > offset || eo + eb < offset + bytes) {
        found = -1;
        continue;
      }
      *h = got;
      *into = offset - eo;
      return 1;
    }
    return found;
  }
};

}  // namespace trib
