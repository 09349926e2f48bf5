// The unique id (tribUniqueId, 128 bytes) as another process handed it over: parseUniqueId must
// refuse it with a message or decode an address that parses as host:port and a 64-hex job key.
#include <cstring>

#include "bootstrap/unique_id.hpp"
#include "fuzz_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tribUniqueId id{};
  std::memcpy(id.internal, data, std::min(size, sizeof id.internal));
  trib::UniqueIdInfo info;
  trib::Status st = trib::parseUniqueId(id, &info);
  if (!st.ok()) {
    FUZZ_CHECK(!st.message().empty());
    return 0;
  }
  FUZZ_CHECK(info.jobKey.size() == 64);
  trib::net::SockAddr addr;
  FUZZ_CHECK(trib::net::parseHostPort(info.storeAddr, &addr).ok());
  return 0;
}
