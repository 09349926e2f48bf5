// The verbs transport's connection blob (transports/verbs/verbs_wire.hpp) as a peer published it at
// bootstrap. Input: [nranks-1] [peer] blob... decodeBlob must refuse with a message naming the peer
// or return a header that says exactly that rank of nranks, with one QpInfo per rank, the other
// queue pairs of each connection, and a window region that is whole and does not wrap.
#include "fuzz_check.hpp"
#include "transports/verbs/verbs_wire.hpp"

using namespace trib;
using namespace trib::verbs;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const int nranks = 1 + data[0] % 8;
  const int peer = data[1] % nranks;
  const std::vector<uint8_t> bytes(data + 2, data + size);
  Blob b;
  Status st = decodeBlob(bytes, peer, nranks, &b);
  if (!st.ok()) {
    FUZZ_CHECK(st.code() == tribRemoteError);
    FUZZ_CHECK(st.message().find("rank " + std::to_string(peer)) != std::string::npos);
    return 0;
  }
  FUZZ_CHECK(b.header.rank == peer && b.header.nranks == nranks);
  FUZZ_CHECK(static_cast<int>(b.qp.size()) == nranks);
  FUZZ_CHECK(b.header.qpsPerConnection >= 1 && b.header.qpsPerConnection <= kMaxQpsPerConnection);
  FUZZ_CHECK(b.extra.size() == static_cast<size_t>(nranks) * (b.header.qpsPerConnection - 1));
  FUZZ_CHECK(b.header.recvBuffers > 0 && b.header.fifoSlots > 0 && b.header.eagerBytes > sizeof(MsgHeader));
  // A window: whole lines within the limit at an address whose signal words do not wrap; none: no
  // address or key.
  FUZZ_CHECK(b.header.readsInFlight >= 1 && b.header.readsInFlight <= 255);
  FUZZ_CHECK(b.header.windowBytes % 64 == 0 && b.header.windowBytes <= kMaxWindowBytes);
  if (b.header.windowBytes == 0) FUZZ_CHECK(b.header.windowAddr == 0 && b.header.windowRkey == 0);
  if (b.header.windowBytes)
    FUZZ_CHECK(b.header.windowAddr != 0 &&
               windowSignalAddr(b.header, nranks) >= b.header.windowAddr + b.header.windowBytes);
  FUZZ_CHECK(encodeBlob(b) == bytes);
  return 0;
}
