#include "transports/shm/shm_layout.hpp"

namespace trib::shm {

SegLayout segLayout(uint32_t nlocal, uint32_t nslots, uint64_t slotBytes, uint64_t windowBytes) {
  SegLayout l;
  const uint64_t slotStride = sizeof(SlotHeader) + slotBytes;
  l.ringBytes = sizeof(RingCtl) + nslots * slotStride;
  l.ringsOffset = 4096;
  l.cmaOffset = l.ringsOffset + nlocal * l.ringBytes;
  l.signalsOffset = l.cmaOffset + kNumCma * sizeof(CmaDesc);
  l.exposeOffset = l.signalsOffset + nlocal * sizeof(SignalLine);
  l.windowOffset = (l.exposeOffset + sizeof(ExposeTable) + 4095) / 4096 * 4096;
  l.totalBytes = l.windowOffset + windowBytes;
  return l;
}

Status checkPeerSegment(const SegHeader& h, int rank, uint32_t nlocal, uint32_t nslots, uint64_t slotBytes,
                        uint64_t windowBytes, uint64_t mappedBytes) {
  const SegLayout l = segLayout(nlocal, nslots, slotBytes, windowBytes);
  if (h.magic != kSegMagic || h.ownerRank != rank || h.nlocal != nlocal || h.slotBytes != slotBytes ||
      h.nslots != nslots || h.totalBytes != mappedBytes || h.windowBytes != windowBytes)
    return errorf(tribInvalidUsage,
                  "rank %d's shm segment has a different layout (slot size or count, or TRIB_WINDOW_BYTES, "
                  "differ?)",
                  rank);
  if (h.ringsOffset != l.ringsOffset || h.ringBytes != l.ringBytes || h.cmaOffset != l.cmaOffset ||
      h.signalsOffset != l.signalsOffset || h.exposeOffset != l.exposeOffset ||
      h.windowOffset != l.windowOffset || h.totalBytes != l.totalBytes)
    return errorf(tribInvalidUsage,
                  "rank %d's shm segment places its parts elsewhere (%llu bytes, this build expects %llu): "
                  "a different Tributary build, or a corrupt segment",
                  rank, static_cast<unsigned long long>(h.totalBytes),
                  static_cast<unsigned long long>(l.totalBytes));
  return Status::Ok();
}

Status checkSlot(const SlotHeader& sh, int rank, uint64_t slotBytes) {
  const bool ok = sh.kind == kCmaRts ? sh.cmaIndex < kNumCma
                                     : sh.kind == kData && sh.len <= slotBytes && sh.offset <= sh.total &&
                                           sh.len <= sh.total - sh.offset;
  if (ok) return Status::Ok();
  return errorf(tribInternalError,
                "shm: corrupt stream from rank %d (slot of kind %u for tag %llu: %u bytes at offset %llu of "
                "%llu, descriptor %u)",
                rank, sh.kind, static_cast<unsigned long long>(sh.tag), sh.len,
                static_cast<unsigned long long>(sh.offset), static_cast<unsigned long long>(sh.total),
                sh.cmaIndex);
}

}  // namespace trib::shm
