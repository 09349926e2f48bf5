#include "transports/nvlink/nvlink_blob.hpp"

#include <cstring>
#include <type_traits>

namespace trib::nvlink {
namespace {

template <class T>
std::vector<uint8_t> encode(const T& blob, uint32_t magic, uint32_t version, int rank, int nranks,
                            uint64_t commId, size_t extra) {
  static_assert(std::is_trivially_copyable_v<T>);
  T b = blob;
  b.header.magic = magic;
  b.header.version = version;
  b.header.size = static_cast<uint32_t>(sizeof(T) + extra);
  b.header.rank = rank;
  b.header.nranks = nranks;
  b.header.commId = commId;
  std::vector<uint8_t> out(sizeof(T) + extra);
  std::memcpy(out.data(), &b, sizeof(T));
  return out;
}

// The header's checks, common to every blob: errors say what `what` from rank `peer` was.
Status checkHeader(const BlobHeader& h, size_t got, size_t want, uint32_t magic, uint32_t version, int peer,
                   int nranks, uint64_t commId, const char* what) {
  if (h.magic != magic)
    return errorf(tribRemoteError, "rank %d's %s is not one (magic %08x, expected %08x): another program?",
                  peer, what, h.magic, magic);
  if (h.version != version)
    return errorf(tribRemoteError,
                  "rank %d's %s has version %u, this process speaks %u: mixed Tributary versions", peer, what,
                  h.version, version);
  if (h.size != got || got != want)
    return errorf(tribRemoteError, "rank %d's %s has %zu bytes (it says %u), expected %zu: malformed", peer,
                  what, got, h.size, want);
  if (h.commId != commId || h.nranks != nranks)
    return errorf(
        tribRemoteError,
        "rank %d's %s belongs to another communicator (id %016llx of %d ranks, this one %016llx of %d)", peer,
        what, static_cast<unsigned long long>(h.commId), h.nranks, static_cast<unsigned long long>(commId),
        nranks);
  if (h.rank != peer) return errorf(tribRemoteError, "rank %d's %s says it is rank %d's", peer, what, h.rank);
  return Status::Ok();
}

template <class T>
Status decode(const std::vector<uint8_t>& bytes, size_t extra, int peer, int nranks, uint64_t commId,
              const char* what, T* out) {
  if (bytes.size() < sizeof(BlobHeader))
    return errorf(tribRemoteError, "rank %d's %s has %zu bytes, too short for a header: malformed", peer,
                  what, bytes.size());
  BlobHeader h;
  std::memcpy(&h, bytes.data(), sizeof h);
  TRIB_RETURN_IF_ERROR(
      checkHeader(h, bytes.size(), sizeof(T) + extra, T::kMagic, T::kVersion, peer, nranks, commId, what));
  std::memcpy(out, bytes.data(), sizeof(T));
  return Status::Ok();
}

}  // namespace

std::vector<uint8_t> encodeDeviceBlob(int rank, int nranks, uint64_t commId, const DeviceBlob& b) {
  return encode(b, DeviceBlob::kMagic, DeviceBlob::kVersion, rank, nranks, commId, 0);
}

Status decodeDeviceBlob(const std::vector<uint8_t>& bytes, int peer, int nranks, uint64_t commId,
                        DeviceBlob* out) {
  TRIB_RETURN_IF_ERROR(decode(bytes, 0, peer, nranks, commId, "nvlink device blob", out));
  if (strnlen(out->socketName, sizeof out->socketName) == sizeof out->socketName)
    return errorf(tribRemoteError, "rank %d's nvlink device blob has an unterminated socket name: malformed",
                  peer);
  return Status::Ok();
}

std::vector<uint8_t> encodeWindowBlob(int rank, int nranks, uint64_t commId, const WindowBlob& b,
                                      const std::vector<PairPath>& row) {
  std::vector<uint8_t> out =
      encode(b, WindowBlob::kMagic, WindowBlob::kVersion, rank, nranks, commId, row.size());
  for (size_t i = 0; i < row.size(); ++i) out[sizeof(WindowBlob) + i] = static_cast<uint8_t>(row[i]);
  return out;
}

Status decodeWindowBlob(const std::vector<uint8_t>& bytes, int peer, int nranks, uint64_t commId,
                        WindowBlob* out, std::vector<PairPath>* row) {
  TRIB_RETURN_IF_ERROR(
      decode(bytes, static_cast<size_t>(nranks), peer, nranks, commId, "nvlink window blob", out));
  row->resize(nranks);
  for (int i = 0; i < nranks; ++i) {
    const uint8_t p = bytes[sizeof(WindowBlob) + i];
    if (p >= kNumPairPaths)
      return errorf(tribRemoteError, "rank %d's nvlink window blob names path %u to rank %d: malformed", peer,
                    p, i);
    (*row)[i] = static_cast<PairPath>(p);
  }
  if ((*row)[peer] != PairPath::Self)
    return errorf(tribRemoteError, "rank %d's nvlink window blob does not name itself as self: malformed",
                  peer);
  return Status::Ok();
}

FdMessage makeFdMessage(int rank, int nranks, uint64_t commId, int nfds) {
  FdMessage m;
  m.header.magic = FdMessage::kMagic;
  m.header.version = WindowBlob::kVersion;
  m.header.size = sizeof(FdMessage);
  m.header.rank = rank;
  m.header.nranks = nranks;
  m.header.commId = commId;
  m.nfds = nfds;
  return m;
}

Status checkFdMessage(const FdMessage& m, int nranks, uint64_t commId, const std::string& from, int* rank) {
  *rank = -1;
  const BlobHeader& h = m.header;
  if (h.rank < 0 || h.rank >= nranks)
    return errorf(tribRemoteError, "the descriptor message from %s names rank %d of %d: malformed",
                  from.c_str(), h.rank, nranks);
  TRIB_RETURN_IF_ERROR(checkHeader(h, sizeof m, sizeof(FdMessage), FdMessage::kMagic, WindowBlob::kVersion,
                                   h.rank, nranks, commId, "descriptor message")
                           .prefix(from + ": "));
  *rank = h.rank;
  return Status::Ok();
}

}  // namespace trib::nvlink
