// The switch protocol (transports/switch/switch_protocol.hpp) as a switch or a rank receives it:
// a 64-byte header, then (for Register) the path payload. parseHeader must refuse with a reason
// or accept a header that re-encodes to the same bytes and keeps the payload limits; parsePath
// must refuse or return levels whose index lies below members.
#include <cstring>

#include "algo/schedule.hpp"
#include "fuzz_check.hpp"
#include "transports/switch/switch_protocol.hpp"

using namespace trib;
using namespace trib::sw;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr size_t kMaxData = 4096;  // the receiver's slot size
  if (size >= kHeaderBytes) {
    Header h;
    Status s = parseHeader(data, kMaxData, &h);
    if (!s.ok()) {
      FUZZ_CHECK(!s.message().empty());
    } else {
      uint8_t again[kHeaderBytes];
      encodeHeader(h, again);
      FUZZ_CHECK(std::memcmp(data, again, kHeaderBytes) == 0);
      if (h.type == MsgType::Chunk || h.type == MsgType::Result) {
        FUZZ_CHECK(h.payloadBytes <= kMaxData);
        FUZZ_CHECK(dataBytes(h) == h.payloadBytes);
        const uint64_t pieces =
            h.type == MsgType::Result && h.coll == static_cast<uint8_t>(Coll::AllGather) ? h.arg32 : 1;
        if (!(h.flags & kFlagNoData))
          FUZZ_CHECK(h.count * dataTypeSize(static_cast<DataType>(h.dtype)) * pieces == h.payloadBytes);
      }
      if (h.type == MsgType::Error || h.type == MsgType::Refuse) FUZZ_CHECK(h.payloadBytes <= kMaxTextBytes);
      if (h.type == MsgType::Waiting)
        FUZZ_CHECK(h.arg32 <= kMaxWaitingChildren && h.payloadBytes == 4ull * h.arg32 && h.arg64 <= 1);
      if (h.type == MsgType::Stalled || h.type == MsgType::Leave) FUZZ_CHECK(h.payloadBytes == 0);
    }
  }
  const uint8_t* payload = size >= kHeaderBytes ? data + kHeaderBytes : data;
  const size_t n = size >= kHeaderBytes ? size - kHeaderBytes : size;
  std::vector<PathLevel> path;
  Status s = parsePath(payload, n, &path);
  if (!s.ok()) {
    FUZZ_CHECK(!s.message().empty());
    return 0;
  }
  FUZZ_CHECK(!path.empty() && path.size() <= kMaxLevels);
  for (const PathLevel& l : path) FUZZ_CHECK(l.index < l.members);
  FUZZ_CHECK(encodePath(path) == std::vector<uint8_t>(payload, payload + n));
  return 0;
}
