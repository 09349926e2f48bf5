// The store client's side: a reply body from a server (status byte, payload). The first input byte
// says how many values the client's wait asked for; decodeReply then decodeValues must refuse with
// a message or return exactly that many values.
#include "bootstrap/store.hpp"
#include "fuzz_check.hpp"

using namespace trib;
using namespace trib::storeproto;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;  // a count and a non-empty body (the length prefix guarantees >= 1 byte)
  FUZZ_CHECK(frameLengthOk(static_cast<uint32_t>(size - 1), kDefaultMaxMessage));
  const size_t expected = data[0] % 8;
  std::vector<uint8_t> reply(data + 1, data + size);
  Status st = decodeReply(&reply, "fuzz:1");
  if (!st.ok()) {
    FUZZ_CHECK(st.code() == tribTimeout || st.code() == tribRemoteError);
    FUZZ_CHECK(!st.message().empty());
    return 0;
  }
  FUZZ_CHECK(data[1] == kOk && reply.size() == size - 2);
  std::vector<std::vector<uint8_t>> values;
  st = decodeValues(reply, expected, "fuzz:1", &values);
  if (!st.ok()) {
    FUZZ_CHECK(st.code() == tribRemoteError && !st.message().empty());
    return 0;
  }
  FUZZ_CHECK(values.size() == expected);
  size_t total = 4;
  for (const auto& v : values) total += 4 + v.size();
  FUZZ_CHECK(total <= reply.size());
  return 0;
}
