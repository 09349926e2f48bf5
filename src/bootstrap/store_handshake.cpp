#include "bootstrap/store_handshake.hpp"

#include "bootstrap/store.hpp"

namespace trib::storeproto {

net::Writer encodeHello(const auth::Nonce& client) {
  net::Writer w;
  w.u8(kHello);
  w.u32(kMagic);
  w.u32(kVersion);
  w.raw(client.data(), client.size());
  return w;
}

bool decodeHello(const uint8_t* body, size_t n, HelloMsg* out) {
  net::Reader r(body, n);
  uint8_t op = 0;
  uint32_t magic = 0;
  if (!r.u8(&op) || op != kHello || !r.u32(&magic) || magic != kMagic || !r.u32(&out->version)) return false;
  if (out->version != kVersion) return true;
  return r.raw(out->client.data(), out->client.size()) && r.atEnd();
}

net::Writer encodeAuth(const auth::Proof& proof) {
  net::Writer w;
  w.u8(kAuth);
  w.raw(proof.data(), proof.size());
  return w;
}

bool decodeAuth(const uint8_t* body, size_t n, auth::Proof* out) {
  net::Reader r(body, n);
  uint8_t op = 0;
  return r.u8(&op) && op == kAuth && r.raw(out->data(), out->size()) && r.atEnd();
}

bool decodeChallenge(const uint8_t* payload, size_t n, auth::Nonce* out) {
  net::Reader r(payload, n);
  return r.raw(out->data(), out->size()) && r.atEnd();
}

bool decodeAccept(const uint8_t* payload, size_t n, auth::Proof* out) {
  net::Reader r(payload, n);
  return r.raw(out->data(), out->size()) && r.atEnd();
}

}  // namespace trib::storeproto
