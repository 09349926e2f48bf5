#include "transports/shm/shm_layout.hpp"

#include <climits>
#include <cstring>

#include "bootstrap/net.hpp"

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

SegHeader segHeader(int rank, int32_t pid, uint32_t nlocal, uint32_t nslots, uint64_t slotBytes,
                    uint64_t windowBytes) {
  const SegLayout l = segLayout(nlocal, nslots, slotBytes, windowBytes);
  return SegHeader{kSegMagic,
                   rank,
                   pid,
                   nlocal,
                   nslots,
                   slotBytes,
                   l.ringsOffset,
                   l.ringBytes,
                   l.cmaOffset,
                   l.totalBytes,
                   0,
                   l.signalsOffset,
                   l.windowOffset,
                   windowBytes,
                   l.exposeOffset,
                   0,
                   0};
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
  if (sh.total > kMaxMessageBytes)
    return errorf(tribInternalError,
                  "shm: corrupt stream from rank %d (a message for tag %llu of %llu bytes, more than %llu)",
                  rank, static_cast<unsigned long long>(sh.tag), static_cast<unsigned long long>(sh.total),
                  static_cast<unsigned long long>(kMaxMessageBytes));
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

std::vector<uint8_t> encodeConnBlob(const ConnBlob& b) {
  net::Writer w;
  w.u32(ConnBlob::kMagic);
  w.u32(b.rank);
  w.u32(static_cast<uint32_t>(b.proc.pid));
  w.u64(b.proc.startTime);
  w.str(std::string(b.proc.space, strnlen(b.proc.space, sizeof b.proc.space)));
  w.u64(b.probeAddr);
  w.u64(b.probeValue);
  w.u64(b.localHash);
  w.u64(b.segBytes);
  w.u32(static_cast<uint32_t>(b.probeFd));
  w.str(b.boot);
  w.str(b.segName);
  return w.data();
}

Status decodeConnBlob(const std::vector<uint8_t>& bytes, int rank, const char* segPrefix, ConnBlob* out) {
  net::Reader r(bytes.data(), bytes.size());
  ConnBlob b;
  uint32_t magic = 0, pid = 0, probeFd = 0;
  std::string space;
  r.u32(&magic);
  r.u32(&b.rank);
  r.u32(&pid);
  r.u64(&b.proc.startTime);
  r.str(&space);
  r.u64(&b.probeAddr);
  r.u64(&b.probeValue);
  r.u64(&b.localHash);
  r.u64(&b.segBytes);
  r.u32(&probeFd);
  r.str(&b.boot);
  r.str(&b.segName);
  if (!r.ok() || !r.atEnd() || magic != ConnBlob::kMagic || static_cast<int>(b.rank) != rank ||
      space.size() >= sizeof b.proc.space || space.find('\0') != std::string::npos)
    return errorf(tribInternalError, "rank %d sent a malformed shm connection blob", rank);
  const std::string prefix = std::string("/") + segPrefix;
  const std::string& n = b.segName;
  if (n.size() <= prefix.size() || n.size() > NAME_MAX || n.compare(0, prefix.size(), prefix) != 0 ||
      n.find('/', 1) != std::string::npos || n.find('\0') != std::string::npos)
    return errorf(tribInternalError, "rank %d named shm segment '%s', not one of this transport's ('%s...')",
                  rank, n.c_str(), prefix.c_str());
  b.proc.pid = static_cast<int32_t>(pid);
  std::memcpy(b.proc.space, space.data(), space.size());
  b.probeFd = static_cast<int32_t>(probeFd);
  *out = std::move(b);
  return Status::Ok();
}

}  // namespace trib::shm
