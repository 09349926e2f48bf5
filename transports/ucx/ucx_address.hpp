// What each rank publishes for the UCX transport at bootstrap: a small header (who it is, its
// communicator slot on its worker, its tag secret), then its UCX worker address. Plain C++, built
// in every build, so that the check runs (and is fuzzed, tests/fuzz) without UCX.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/process.hpp"
#include "common/status.hpp"

namespace trib::ucx {

// The proc identity lets a peer in the same pid space be watched directly (/proc,
// common/process.hpp), which catches a dead peer even on transports where UCX's own keepalive does
// not (shared memory). Every peer's tags name the slot. The tag secret is XOR-ed into every tag
// sent to this rank (ucx_transport.hpp): blobs travel only through the authenticated store, so a
// host outside the job does not know it and its messages match none of this rank's receives.
// Version 1 (no version field: the slot followed the magic) had neither version nor secret.
struct AddressHeader {
  static constexpr uint32_t kMagic = 0x54554359;  // "TUCY"
  static constexpr uint16_t kVersion = 2;         // 2: version, header size and tag secret
  uint32_t magic = kMagic;
  uint16_t version = kVersion;
  uint16_t headerBytes = sizeof(AddressHeader);
  uint32_t slot = 0;
  uint32_t reserved = 0;
  uint64_t tagSecret = 0;
  ProcessIdentity proc;
};

std::vector<uint8_t> encodeAddress(const AddressHeader& head, const void* address, size_t bytes);
// Rank `rank`'s blob: a header with the magic, this build's version and header size, a slot below
// 2^commBits, then a non-empty worker address (*address points into `blob`). Errors name the rank.
Status decodeAddress(const std::vector<uint8_t>& blob, int rank, int commBits, AddressHeader* head,
                     const uint8_t** address, size_t* addressBytes);

}  // namespace trib::ucx
