// The shared-memory segment each rank creates and its local peers map (shm_transport.cpp): its
// header, where each part lies, and the header of every ring slot. Peers write all of it, so every
// field read from another rank's segment or slot is checked here before it is used (a corrupt or
// foreign segment fails the connection or the peer, never this process); tests/fuzz reads these.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/process.hpp"
#include "common/status.hpp"
#include "transports/expose_table.hpp"

namespace trib::shm {

constexpr uint64_t kSegMagic = 0x314d485342495254ull;  // "TRIBSHM1"
constexpr uint32_t kNumCma = 64;                       // outstanding single-copy sends per rank
// The largest message a slot may declare: no buffer is larger than a 47-bit user address space.
constexpr uint64_t kMaxMessageBytes = 1ull << 47;

struct SegHeader {
  uint64_t magic;
  int32_t ownerRank;
  int32_t ownerPid;
  uint32_t nlocal;
  uint32_t nslots;
  uint64_t slotBytes;
  uint64_t ringsOffset, ringBytes, cmaOffset, totalBytes;
  uint64_t probe;                      // a random value peers read through CMA to test single-copy
  uint64_t signalsOffset;              // nlocal signal lines: [j] counts local rank j's signals to the owner
  uint64_t windowOffset, windowBytes;  // the owner's window (windowBytes 0: none)
  uint64_t exposeOffset;               // the owner's ExposeTable (with a window)
  uint32_t broken;                     // 1 once the owner's transport failed or was aborted (atomic_ref)
  uint32_t pad;
};

enum SlotKind : uint32_t { kData = 1, kCmaRts = 2 };
struct SlotHeader {
  uint64_t tag, total, offset;
  uint32_t len, kind;
  uint32_t cmaIndex, pad;
  uint64_t cmaGen;
  uint8_t reserved[16];
};
static_assert(sizeof(SlotHeader) == 64);

struct RingCtl {
  alignas(64) std::atomic<uint64_t> head;  // written by the sender
  alignas(64) std::atomic<uint64_t> tail;  // written by the receiver
};
static_assert(sizeof(RingCtl) == 128);
static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free);

// A single-copy send published by its owner; the receiver claims it READY -> READING -> DONE.
enum CmaState : uint32_t {
  kFree = 0,
  kReady = 1,
  kReading = 2,
  kCmaDone = 3,
  kDetaching = 4,
  kCmaFailed = 5
};
struct alignas(64) CmaDesc {
  std::atomic<uint32_t> state;
  uint32_t pad;
  uint64_t addr, bytes, gen;
};

// A window signal line: [count << kFingerprintBits | the call's fingerprint], stored by the one
// sender it belongs to (release), loaded by the owner (acquire). One cache line each. Signal
// `count` may carry up to 16 bytes of the sender's window (PeerWindows::carryNext) in slot
// count % 2, stored before the word: `tag` is [count's low 16 bits | bytes (5 bits) | window
// offset (43 bits)], 0 while the slot is being written (a sequence lock: a reader that sees the
// same nonzero tag before and after copying the data has a whole copy).
struct CarrySlot {
  std::atomic<uint64_t> tag;
  std::atomic<uint64_t> data[2];
};
struct alignas(64) SignalLine {
  std::atomic<uint64_t> word;
  CarrySlot carry[2];
};
static_assert(sizeof(SignalLine) == 64, "a signal and what it carries share one cache line");
constexpr int kFingerprintBits = 20;

// Where each part of a segment lies: a function of the transport's options alone, so every rank
// of a communicator computes the same layout, and a peer's header must say exactly this.
struct SegLayout {
  uint64_t ringsOffset, ringBytes, cmaOffset, signalsOffset, exposeOffset, windowOffset, totalBytes;
};
SegLayout segLayout(uint32_t nlocal, uint32_t nslots, uint64_t slotBytes, uint64_t windowBytes);
// The header of rank `rank`'s segment with that layout (probe 0: the owner draws it).
SegHeader segHeader(int rank, int32_t pid, uint32_t nlocal, uint32_t nslots, uint64_t slotBytes,
                    uint64_t windowBytes);

// A peer's segment header, mapped `mappedBytes` long (what its blob said): its magic, owner, and
// every size and offset must be the layout this rank computed (tribInvalidUsage naming `rank`).
Status checkPeerSegment(const SegHeader& h, int rank, uint32_t nlocal, uint32_t nslots, uint64_t slotBytes,
                        uint64_t windowBytes, uint64_t mappedBytes);

// A slot read from a peer's ring: a known kind, a total of at most kMaxMessageBytes, a CMA
// descriptor index in range, a length that fits the slot and a [offset, offset+len) inside the
// message's total (tribInternalError naming `rank`).
Status checkSlot(const SlotHeader& sh, int rank, uint64_t slotBytes);

// What each rank publishes to the others at connect (through the bootstrap's exchange): who it is,
// where its probe value lies (single-copy test), which local ranks it counts, and its segment.
struct ConnBlob {
  static constexpr uint32_t kMagic = 0x53484d42;  // "BMHS"
  uint32_t rank = 0;
  ProcessIdentity proc;  // pid, start time, pid namespace
  uint64_t probeAddr = 0, probeValue = 0;
  uint64_t localHash = 0;  // of the local ranks' list: every rank must agree
  uint64_t segBytes = 0;
  int32_t probeFd = -1;  // a memfd holding the probe value, or -1
  std::string boot;      // hostIdentity(): the same kernel
  std::string segName;   // the segment's shm_open name
};
std::vector<uint8_t> encodeConnBlob(const ConnBlob& b);
// Rank `rank`'s blob: every field present and nothing after, the magic, that rank, a pid namespace
// that fits ProcessIdentity, and a segment name "/<segPrefix>..." with no other '/' or NUL (a
// peer names only segments of this transport). Errors are tribInternalError naming the rank.
Status decodeConnBlob(const std::vector<uint8_t>& bytes, int rank, const char* segPrefix, ConnBlob* out);

}  // namespace trib::shm
