#include "transports/verbs/verbs_wire.hpp"

#include <algorithm>
#include <cstring>

namespace trib::verbs {

std::vector<uint8_t> encodeBlob(const Blob& b) {
  const size_t qpBytes = b.qp.size() * sizeof(QpInfo), extraBytes = b.extra.size() * sizeof(QpAddr);
  std::vector<uint8_t> out(sizeof(BlobHeader) + qpBytes + extraBytes);
  std::memcpy(out.data(), &b.header, sizeof(BlobHeader));
  if (qpBytes) std::memcpy(out.data() + sizeof(BlobHeader), b.qp.data(), qpBytes);
  if (extraBytes) std::memcpy(out.data() + sizeof(BlobHeader) + qpBytes, b.extra.data(), extraBytes);
  return out;
}

Status decodeBlob(const std::vector<uint8_t>& bytes, int from, int nranks, Blob* out) {
  auto bad = [&](const std::string& why) {
    return errorf(tribRemoteError, "verbs: the connection blob of rank %d is malformed: %s", from,
                  why.c_str());
  };
  if (bytes.size() < sizeof(BlobHeader))
    return bad(strprintf("%zu bytes, less than its %zu-byte header", bytes.size(), sizeof(BlobHeader)));
  BlobHeader h;
  std::memcpy(&h, bytes.data(), sizeof h);
  if (h.magic != kBlobMagic) return bad(strprintf("magic %#x, not %#x", h.magic, kBlobMagic));
  if (h.version != kBlobVersion || h.headerBytes != sizeof(BlobHeader))
    return bad(
        strprintf("version %u with a %u-byte header; this build speaks version %u (%zu bytes): "
                  "every rank must run the same Tributary",
                  h.version, h.headerBytes, kBlobVersion, sizeof(BlobHeader)));
  if (h.rank != from || h.nranks != nranks)
    return bad(strprintf("it says rank %d of %d, expected rank %d of %d", h.rank, h.nranks, from, nranks));
  if (h.qpsPerConnection < 1 || h.qpsPerConnection > kMaxQpsPerConnection)
    return bad(
        strprintf("%u queue pairs per connection, not 1 to %u", h.qpsPerConnection, kMaxQpsPerConnection));
  const size_t extras = static_cast<size_t>(nranks) * (h.qpsPerConnection - 1);
  const size_t want =
      sizeof(BlobHeader) + static_cast<size_t>(nranks) * sizeof(QpInfo) + extras * sizeof(QpAddr);
  if (bytes.size() != want)
    return bad(strprintf("%zu bytes, expected %zu for %d ranks and %u queue pairs each", bytes.size(), want,
                         nranks, h.qpsPerConnection));
  if (h.recvBuffers == 0 || h.fifoSlots == 0 || h.eagerBytes <= sizeof(MsgHeader))
    return bad(
        strprintf("%u receive buffers of %u bytes, %u FIFO slots", h.recvBuffers, h.eagerBytes, h.fifoSlots));
  if (h.device[sizeof h.device - 1] != 0) return bad("device name not terminated");
  // The window region: whole 64-byte lines, within the limit, its signal words inside the address
  // space; none means no address and no key.
  if (h.readsInFlight < 1 || h.readsInFlight > 255)
    return bad(strprintf("%u RDMA READs in flight, not 1 to 255", h.readsInFlight));
  if (h.windowBytes % 64 != 0 || h.windowBytes > kMaxWindowBytes)
    return bad(strprintf("a %llu-byte window (a multiple of 64 up to %llu expected)",
                         static_cast<unsigned long long>(h.windowBytes),
                         static_cast<unsigned long long>(kMaxWindowBytes)));
  if (h.windowBytes == 0 ? (h.windowAddr != 0 || h.windowRkey != 0)
                         : (h.windowAddr == 0 || h.windowAddr > UINT64_MAX - h.windowBytes -
                                                                    sizeof(SignalRecord) * uint64_t(nranks)))
    return bad(strprintf("window address %#llx for %llu bytes", static_cast<unsigned long long>(h.windowAddr),
                         static_cast<unsigned long long>(h.windowBytes)));
  out->header = h;
  out->qp.resize(nranks);
  std::memcpy(out->qp.data(), bytes.data() + sizeof(BlobHeader), nranks * sizeof(QpInfo));
  out->extra.resize(extras);
  if (extras)
    std::memcpy(out->extra.data(), bytes.data() + sizeof(BlobHeader) + nranks * sizeof(QpInfo),
                extras * sizeof(QpAddr));
  return Status::Ok();
}

std::vector<Chunk> chunksOf(uint64_t bytes, uint64_t chunk, uint32_t qps) {
  std::vector<Chunk> out;
  if (qps <= 1) {
    if (bytes == 0 || chunk == 0) {
      out.push_back({0, bytes, true});
      return out;
    }
    for (uint64_t off = 0; off < bytes; off += chunk) {
      const uint64_t n = std::min(chunk, bytes - off);
      out.push_back({off, n, off + n == bytes});
    }
    return out;
  }
  const uint64_t part = (bytes + qps - 1) / qps,
                 aligned = (part + kQpSplitAlign - 1) / kQpSplitAlign * kQpSplitAlign;
  for (uint32_t q = 0; q < qps && uint64_t{q} * aligned < bytes; ++q) {
    const uint64_t start = q * aligned, end = std::min(bytes, start + aligned);
    for (const Chunk& c : chunksOf(end - start, chunk)) out.push_back({start + c.offset, c.bytes, false, q});
  }
  return out;
}

Status parseHcaSpec(const std::string& text, HcaSpec* out) {
  HcaSpec s;
  size_t i = 0;
  if (i < text.size() && text[i] == '^') s.exclude = true, ++i;
  if (i < text.size() && text[i] == '=') s.exact = true, ++i;
  std::string rest = text.substr(i);
  if (rest.empty() && !text.empty())
    return errorf(tribInvalidArgument, "TRIB_IB_HCA='%s' names no device", text.c_str());
  size_t start = 0;
  while (start <= rest.size() && !rest.empty()) {
    size_t comma = rest.find(',', start);
    std::string item = rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    HcaSpec::Item it;
    size_t colon = item.find(':');
    it.name = item.substr(0, colon);
    if (it.name.empty())
      return errorf(tribInvalidArgument, "TRIB_IB_HCA='%s': an empty device name", text.c_str());
    if (colon != std::string::npos) {
      const std::string p = item.substr(colon + 1);
      char* end = nullptr;
      long v = std::strtol(p.c_str(), &end, 10);
      if (p.empty() || *end || v < 1 || v > 255)
        return errorf(tribInvalidArgument, "TRIB_IB_HCA='%s': port '%s' of %s is not a number 1..255",
                      text.c_str(), p.c_str(), it.name.c_str());
      it.port = static_cast<int>(v);
    }
    s.items.push_back(it);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  *out = std::move(s);
  return Status::Ok();
}

bool hcaSelected(const HcaSpec& spec, const std::string& name, int port) {
  if (spec.items.empty()) return true;
  bool listed = false;
  for (const HcaSpec::Item& it : spec.items) {
    const bool nameMatches = spec.exact ? name == it.name : name.compare(0, it.name.size(), it.name) == 0;
    if (nameMatches && (it.port == 0 || it.port == port)) listed = true;
  }
  return spec.exclude ? !listed : listed;
}

PortPick pickPort(const HcaSpec& spec, const std::vector<PortCandidate>& candidates, const PciPlace& anchor,
                  int localIndex) {
  std::vector<int> selected;
  std::vector<PciPlace> places;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (!hcaSelected(spec, candidates[i].device, candidates[i].port)) continue;
    selected.push_back(static_cast<int>(i));
    places.push_back(candidates[i].place);
  }
  PortPick pick;
  if (selected.empty()) return pick;
  if (selected.size() == 1) {
    pick.index = selected[0];
    pick.why = spec.items.empty() ? "the only active port" : "the only port TRIB_IB_HCA selects";
    return pick;
  }
  const NicRank r = rankNics(anchor, places, localIndex);
  pick.index = selected[r.index];
  pick.why = describeRank(r, anchor);
  return pick;
}

}  // namespace trib::verbs
