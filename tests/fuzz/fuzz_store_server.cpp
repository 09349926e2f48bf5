// The store server's side: a byte stream from a client after the handshake, cut into messages by
// their u32 length prefix and decoded by storeproto::decodeRequest (the server's only reading).
// A decoded request must re-encode to the bytes it came from (nothing skipped or invented; a
// wait's "values" flag reads any non-zero byte as yes).
#include "bootstrap/store.hpp"
#include "fuzz_check.hpp"

using namespace trib;
using namespace trib::storeproto;

namespace {

net::Writer encode(const Request& q) {  // as TcpStore's calls write them
  net::Writer w;
  w.u8(q.op);
  switch (q.op) {
    case kSet:
      w.str(q.key);
      w.bytes(q.value.data(), q.value.size());
      break;
    case kAdd:
      w.str(q.key);
      w.u64(q.delta);
      break;
    case kWait:
      w.u32(q.timeoutMs);
      w.u8(q.values ? 1 : 0);
      w.u32(static_cast<uint32_t>(q.keys.size()));
      for (const auto& k : q.keys) w.str(k);
      break;
    case kWaitRange:
      w.u32(q.timeoutMs);
      w.u8(q.values ? 1 : 0);
      w.str(q.key);
      w.u32(q.first);
      w.u32(q.count);
      break;
    case kRemove:
      w.str(q.key);
      break;
  }
  return w;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr size_t kMax = 1 << 16;  // a small server limit, so that the limit itself is reached
  size_t off = 0;
  while (size - off >= 4) {
    uint32_t len;
    std::memcpy(&len, data + off, 4);
    if (!frameLengthOk(len, kMax)) {
      FUZZ_CHECK(len == 0 || len > kMax);
      break;
    }
    if (size - off - 4 < len) break;  // the rest has not arrived yet
    const uint8_t* body = data + off + 4;
    Request q;
    if (decodeRequest(body, len, &q)) {
      FUZZ_CHECK((q.op >= kSet && q.op <= kRemove) || q.op == kWaitRange);
      FUZZ_CHECK(q.keys.size() <= len / 4);
      // A range stays within its bounds, so the server's scan of it is bounded.
      FUZZ_CHECK(q.count <= kMaxRangeKeys && uint64_t{q.first} + q.count <= uint64_t{UINT32_MAX} + 1);
      FUZZ_CHECK(q.op != kWaitRange || rangePrefixOk(q.key));
      std::vector<uint8_t> sent(body, body + len);
      if (q.op == kWait || q.op == kWaitRange)
        sent[5] = sent[5] != 0;  // any non-zero "values" byte means yes
      FUZZ_CHECK(encode(q).data() == sent);
    }
    off += 4 + len;
  }
  return 0;
}
