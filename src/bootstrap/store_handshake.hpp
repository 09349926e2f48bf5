// The TCP store's authentication handshake (protocol version 2), encoders and decoders in one
// place for the client, the server, tests and fuzzers:
//   client -> HELLO  {u8 kHello, u32 kMagic, u32 version, client nonce[32]}
//   server <- OK     {server nonce[32]}                 (or ERROR "protocol version ...")
//   client -> AUTH   {u8 kAuth, HMAC(key, "trib-store/2/client", nonces)[32]}
//   server <- OK     {HMAC(key, "trib-store/2/server", nonces)[32]}   (or ERROR "wrong job key")
// The client proves first, so a host that can reach the store but not the key learns nothing it
// could test guesses against; the client then checks the server's proof, so a rank never gives
// its addresses to a store that does not hold the job key. Both nonces are fresh per connection:
// a recorded handshake replayed later does not verify. A version-1 HELLO (which carried the key
// itself) gets an ERROR naming both versions, and its key is never looked at.
#pragma once
#include <cstdint>
#include <string_view>

#include "bootstrap/auth.hpp"
#include "bootstrap/net.hpp"

namespace trib::storeproto {

constexpr std::string_view kClientContext = "trib-store/2/client";
constexpr std::string_view kServerContext = "trib-store/2/server";
// Bound on a message before authentication (a v2 HELLO is 41 bytes, AUTH 33): an unauthenticated
// host cannot make the server buffer more than this per connection.
constexpr size_t kMaxHandshakeBytes = 256;

struct HelloMsg {
  uint32_t version = 0;
  auth::Nonce client{};  // only for version == kVersion
};

net::Writer encodeHello(const auth::Nonce& client);
// False when the body is not a HELLO (another op, wrong magic, truncated). A HELLO of another
// version decodes with only `version` set: the rest is not this version's to read.
bool decodeHello(const uint8_t* body, size_t n, HelloMsg* out);

net::Writer encodeAuth(const auth::Proof& proof);
bool decodeAuth(const uint8_t* body, size_t n, auth::Proof* out);

// The server's OK payloads: exactly one nonce (challenge) or one proof (accept).
bool decodeChallenge(const uint8_t* payload, size_t n, auth::Nonce* out);
bool decodeAccept(const uint8_t* payload, size_t n, auth::Proof* out);

}  // namespace trib::storeproto
