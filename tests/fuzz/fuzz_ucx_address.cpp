// The UCX transport's bootstrap blob (transports/ucx/ucx_address.hpp) as a peer published it:
// a header (magic, version, header size, communicator slot, tag secret, process identity), then
// the worker address UCX itself reads.
// Input: [peer] [commBits] blob... decodeAddress must refuse with a message naming the peer, or
// return a slot below 2^commBits and a non-empty address lying inside the blob.
#include "fuzz_check.hpp"
#include "transports/ucx/ucx_address.hpp"

using namespace trib;
using namespace trib::ucx;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const int peer = data[0];
  const int commBits = data[1] % 33;  // UcxOptions::commBits; 0 and 32 are the edges
  const std::vector<uint8_t> blob(data + 2, data + size);
  AddressHeader head;
  const uint8_t* address = nullptr;
  size_t bytes = 0;
  Status st = decodeAddress(blob, peer, commBits, &head, &address, &bytes);
  if (!st.ok()) {
    FUZZ_CHECK(st.code() == tribRemoteError || st.code() == tribInvalidUsage);
    FUZZ_CHECK(st.message().find("rank " + std::to_string(peer)) != std::string::npos);
    return 0;
  }
  FUZZ_CHECK(head.magic == AddressHeader::kMagic);
  FUZZ_CHECK(head.version == AddressHeader::kVersion && head.headerBytes == sizeof(AddressHeader));
  FUZZ_CHECK(commBits < 32 && head.slot < (1u << commBits));
  FUZZ_CHECK(bytes > 0 && address == blob.data() + sizeof(AddressHeader));
  FUZZ_CHECK(address + bytes == blob.data() + blob.size());
  FUZZ_CHECK(encodeAddress(head, address, bytes) == blob);
  return 0;
}
