// What a local peer hands the shm transport (transports/shm/shm_layout.hpp): its connection blob
// (through the bootstrap), the header of its segment, checked once at connect, and the header of
// each ring slot, checked before the slot is read. Input: [0: segment | 1: slot | 2: blob] [this
// rank's options, 8 bytes] [the header's or blob's bytes]. An accepted segment header must place
// every part inside the mapping, in order, without overlap; an accepted slot must name a
// descriptor that exists or bytes inside the slot and the message; an accepted blob re-encodes
// to the same bytes and names a segment of this transport.
#include <cstring>

#include "fuzz_check.hpp"
#include "transports/shm/shm_layout.hpp"

using namespace trib;
using namespace trib::shm;

namespace {

template <class T>
T take(const uint8_t*& p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  p += sizeof v;
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 9) return 0;
  const uint8_t* p = data + 1;
  // This rank's own options, within what ShmTransport::create accepts.
  const uint32_t nlocal = 1 + take<uint8_t>(p) % 64;
  const uint32_t nslots = 2 + take<uint16_t>(p) % 65535;
  const uint64_t slotBytes = 64 * (1 + uint64_t{take<uint16_t>(p)} % (1 << 14));  // up to 1 GiB
  const uint64_t windowBytes = uint64_t{take<uint16_t>(p)} << 20;
  const int rank = static_cast<int>(take<uint8_t>(p) % nlocal);
  const size_t rest = size - 9;
  if (data[0] % 3 == 2) {
    const std::vector<uint8_t> bytes(p, p + rest);
    ConnBlob b;
    Status st = decodeConnBlob(bytes, rank, "trib-", &b);
    if (!st.ok()) {
      FUZZ_CHECK(st.code() == tribInternalError);
      FUZZ_CHECK(st.message().find("rank " + std::to_string(rank)) != std::string::npos);
      return 0;
    }
    FUZZ_CHECK(static_cast<int>(b.rank) == rank);
    FUZZ_CHECK(b.segName.rfind("/trib-", 0) == 0 && b.segName.find('/', 1) == std::string::npos);
    FUZZ_CHECK(strnlen(b.proc.space, sizeof b.proc.space) < sizeof b.proc.space);
    FUZZ_CHECK(encodeConnBlob(b) == bytes);
    return 0;
  }
  if (data[0] % 3 == 1) {
    if (rest < sizeof(SlotHeader)) return 0;
    SlotHeader sh;
    std::memcpy(&sh, p, sizeof sh);
    Status st = checkSlot(sh, rank, slotBytes);
    if (!st.ok()) {
      FUZZ_CHECK(st.code() == tribInternalError && !st.message().empty());
      return 0;
    }
    if (sh.kind == kCmaRts) {
      FUZZ_CHECK(sh.cmaIndex < kNumCma);
    } else {
      FUZZ_CHECK(sh.kind == kData && sh.len <= slotBytes);
      FUZZ_CHECK(sh.offset <= sh.total && sh.offset + sh.len <= sh.total && sh.offset + sh.len >= sh.offset);
    }
    return 0;
  }
  if (rest < sizeof(SegHeader) + 8) return 0;
  SegHeader h;
  std::memcpy(&h, p, sizeof h);
  p += sizeof h;
  const uint64_t mapped = take<uint64_t>(p);  // what the peer's blob said (and its file's size)
  Status st = checkPeerSegment(h, rank, nlocal, nslots, slotBytes, windowBytes, mapped);
  if (!st.ok()) {
    FUZZ_CHECK(st.code() == tribInvalidUsage);
    FUZZ_CHECK(st.message().find("rank " + std::to_string(rank)) != std::string::npos);
    return 0;
  }
  // Every part the transport reaches through this header lies inside the mapping, in order.
  FUZZ_CHECK(h.totalBytes == mapped && h.ownerRank == rank);
  FUZZ_CHECK(h.ringsOffset >= sizeof(SegHeader));
  FUZZ_CHECK(h.ringBytes >= sizeof(RingCtl) + uint64_t{nslots} * (sizeof(SlotHeader) + slotBytes));
  FUZZ_CHECK(h.ringsOffset + uint64_t{nlocal} * h.ringBytes <= h.cmaOffset);
  FUZZ_CHECK(h.cmaOffset + kNumCma * sizeof(CmaDesc) <= h.signalsOffset);
  FUZZ_CHECK(h.signalsOffset + nlocal * sizeof(SignalLine) <= h.exposeOffset);
  FUZZ_CHECK(h.exposeOffset + sizeof(ExposeTable) <= h.windowOffset);
  FUZZ_CHECK(h.windowOffset + h.windowBytes == h.totalBytes && h.windowBytes == windowBytes);
  return 0;
}
