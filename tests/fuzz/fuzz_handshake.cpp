// The authentication handshakes, as each side reads them before it knows the peer holds the job
// key (src/bootstrap/store_handshake.hpp, transports/switch/switch_auth.hpp). Input: [0: a body
// the store server reads (HELLO, AUTH) | 1: an OK payload the store client reads (challenge,
// accept) | 2: a switch message (header, payload)] [bytes]. What is accepted must be exactly what
// the side that writes it writes: no field is skipped, read past or left unchecked (a HELLO of
// another version reads only its version: the server refuses it, naming both). A proof that was
// not made with the key never verifies.
#include <cstring>

#include "bootstrap/store.hpp"
#include "bootstrap/store_handshake.hpp"
#include "fuzz_check.hpp"
#include "transports/switch/switch_protocol.hpp"

using namespace trib;

namespace {

const std::string kKey = "fuzz-job-key";

bool sameBytes(const net::Writer& w, const uint8_t* p, size_t n) {
  return w.data().size() == n && std::memcmp(w.data().data(), p, n) == 0;
}

// Whatever 32 bytes came as a proof, under the key and these nonces, must not verify.
void checkNotAProof(std::string_view context, const uint8_t* p, size_t n) {
  if (n < auth::kProofBytes) return;
  auth::Proof got{};
  std::memcpy(got.data(), p + n - got.size(), got.size());
  auth::Nonce client{}, server{};
  client[0] = 1;
  FUZZ_CHECK(!auth::verifyProof(kKey, context, client, server, got));
}

void storeServer(const uint8_t* p, size_t n) {
  using namespace storeproto;
  HelloMsg hello;
  if (decodeHello(p, n, &hello)) {
    FUZZ_CHECK(n >= 9 && p[0] == kHello);
    if (hello.version == kVersion)
      FUZZ_CHECK(sameBytes(encodeHello(hello.client), p, n));
    else
      FUZZ_CHECK(hello.client == auth::Nonce{});  // another version's nonce is not this one's to read
  }
  auth::Proof proof{};
  if (decodeAuth(p, n, &proof)) FUZZ_CHECK(sameBytes(encodeAuth(proof), p, n));
  checkNotAProof(kClientContext, p, n);
}

void storeClient(const uint8_t* p, size_t n) {
  auth::Nonce nonce{};
  auth::Proof proof{};
  if (storeproto::decodeChallenge(p, n, &nonce))
    FUZZ_CHECK(n == nonce.size() && std::memcmp(nonce.data(), p, n) == 0);
  if (storeproto::decodeAccept(p, n, &proof))
    FUZZ_CHECK(n == proof.size() && std::memcmp(proof.data(), p, n) == 0);
  checkNotAProof(storeproto::kServerContext, p, n);
}

void switchMessage(const uint8_t* p, size_t n) {
  using namespace sw;
  if (n < kHeaderBytes) return;
  Header h;
  const Status st = parseHeader(p, 0, &h);  // before authentication no chunk fits
  if (!st.ok()) {
    FUZZ_CHECK(st.code() == tribRemoteError && !st.message().empty());
    return;
  }
  if (h.type != MsgType::Hello && h.type != MsgType::Challenge && h.type != MsgType::Proof &&
      h.type != MsgType::HelloAck)
    return;
  // Only the type, the role (hello) and the payload's length may be set: the header is the one
  // the handshake's builders write, byte for byte.
  Header canonical;
  canonical.type = h.type;
  canonical.payloadBytes = kHandshakeBytes;
  if (h.type == MsgType::Hello) {
    FUZZ_CHECK(h.arg32 <= static_cast<uint32_t>(Role::Switch));
    canonical.arg32 = h.arg32;
  }
  uint8_t again[kHeaderBytes];
  encodeHeader(canonical, again);
  FUZZ_CHECK(std::memcmp(p, again, kHeaderBytes) == 0);
  checkNotAProof("trib-switch/3/client/rank", p + kHeaderBytes, n - kHeaderBytes);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t* p = data + 1;
  const size_t n = size - 1;
  switch (data[0] % 3) {
    case 0:
      storeServer(p, n);
      break;
    case 1:
      storeClient(p, n);
      break;
    default:
      switchMessage(p, n);
      break;
  }
  return 0;
}
