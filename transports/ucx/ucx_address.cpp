#include "transports/ucx/ucx_address.hpp"

#include <cstring>

namespace trib::ucx {

// No padding: every byte of the header is a field the decoder reads.
static_assert(sizeof(AddressHeader) == 24 + sizeof(ProcessIdentity));

std::vector<uint8_t> encodeAddress(const AddressHeader& head, const void* address, size_t bytes) {
  std::vector<uint8_t> out(sizeof head + bytes);
  std::memcpy(out.data(), &head, sizeof head);
  if (bytes) std::memcpy(out.data() + sizeof head, address, bytes);
  return out;
}

Status decodeAddress(const std::vector<uint8_t>& blob, int rank, int commBits, AddressHeader* head,
                     const uint8_t** address, size_t* addressBytes) {
  if (blob.empty())
    return errorf(tribRemoteError, "rank %d could not initialise UCX (it sent no worker address)", rank);
  uint32_t magic = 0;
  if (blob.size() >= sizeof magic) std::memcpy(&magic, blob.data(), sizeof magic);
  if (magic != AddressHeader::kMagic)
    return errorf(tribInvalidUsage,
                  "rank %d sent a malformed UCX address (%zu bytes); is it a different build?", rank,
                  blob.size());
  // Version and header size sit right after the magic (where version 1 had the slot).
  uint16_t version = 0, headerBytes = 0;
  if (blob.size() >= 8) {
    std::memcpy(&version, blob.data() + 4, sizeof version);
    std::memcpy(&headerBytes, blob.data() + 6, sizeof headerBytes);
  }
  if (version != AddressHeader::kVersion || headerBytes != sizeof(AddressHeader))
    return errorf(tribInvalidUsage,
                  "rank %d sent a UCX address of format version %u with a %u-byte header; this build "
                  "speaks version %u (%zu bytes): every rank must run the same Tributary",
                  rank, version, headerBytes, AddressHeader::kVersion, sizeof(AddressHeader));
  if (blob.size() <= sizeof(AddressHeader))
    return errorf(tribInvalidUsage, "rank %d sent a UCX address header (%zu bytes) with no worker address",
                  rank, blob.size());
  std::memcpy(head, blob.data(), sizeof *head);
  if (commBits < 0 || commBits > 31 || head->slot >= (1u << commBits))
    return errorf(tribInvalidUsage, "rank %d sent communicator slot %u, beyond commBits=%d (another build?)",
                  rank, head->slot, commBits);
  *address = blob.data() + sizeof(AddressHeader);
  *addressBytes = blob.size() - sizeof(AddressHeader);
  return Status::Ok();
}

}  // namespace trib::ucx
