// The layout of tribUniqueId (128 bytes), defined here and nowhere else, and the store server
// that tribGetUniqueId's caller runs for the communicator's rendezvous.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "bootstrap/store.hpp"
#include "tributary/tributary.h"

namespace trib {

struct UniqueIdLayout {
  static constexpr uint32_t kMagic = 0x44495254;  // "TRID"
  static constexpr uint16_t kVersion = 1;
  uint32_t magic;
  uint16_t version;
  uint16_t port;       // store server port (host order)
  char host[48];       // numeric IPv4/IPv6 address, NUL-terminated
  uint8_t jobKey[32];  // random; every store connection presents it
  uint64_t commId;     // random; namespaces keys and shm segment names
  uint8_t reserved[28];
  uint32_t checksum;  // FNV-1a of the preceding 124 bytes
};
static_assert(sizeof(UniqueIdLayout) == TRIB_UNIQUE_ID_BYTES, "unique id layout must fill tribUniqueId");

struct UniqueIdInfo {
  std::string storeAddr;  // "ip:port"
  std::string jobKey;     // 64 hex characters (what the store expects)
  uint64_t commId = 0;
};

// Keeps the root's store server alive; the communicator created with the id takes ownership.
using StoreServerHandle = std::shared_ptr<TcpStoreServer>;

// Start a store server on TRIB_BOOTSTRAP_ADDR (an ip or ip:port of this host; default
// 127.0.0.1 with a free port) and describe it, a fresh job key and comm id in *id.
Status makeUniqueId(tribUniqueId* id, StoreServerHandle* server);
// Same, with an explicit listen address (tests, tools).
Status makeUniqueId(tribUniqueId* id, StoreServerHandle* server, const std::string& listen);
// Validate and decode an id; a corrupt, truncated or foreign id gets a message saying so.
Status parseUniqueId(const tribUniqueId& id, UniqueIdInfo* info);

std::string toHex(const uint8_t* p, size_t n);

}  // namespace trib
