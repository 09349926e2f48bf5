// Challenge-response authentication shared by the rendezvous store and the aggregation switch:
// fresh nonces from OpenSSL's RAND_bytes, proofs are HMAC-SHA256 under the job key, compared with
// CRYPTO_memcmp (constant time). The key itself never crosses the wire (docs/SECURITY.md).
//
// A proof covers (context, client nonce, server nonce), the context naming the protocol, its
// version and the side that proves ("trib-store/2/client"), so a proof made for one side, one
// protocol or one connection is worth nothing for another.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.hpp"

namespace trib::auth {

constexpr size_t kNonceBytes = 32;
constexpr size_t kProofBytes = 32;  // SHA-256
using Nonce = std::array<uint8_t, kNonceBytes>;
using Proof = std::array<uint8_t, kProofBytes>;

// A fresh random nonce (RAND_bytes); fails only if the system's random source does.
Status freshNonce(Nonce* out);

// HMAC-SHA256 under `key` of: u32 length of context, context, client nonce, server nonce.
Status makeProof(const std::string& key, std::string_view context, const Nonce& client, const Nonce& server,
                 Proof* out);

// Constant-time equality of two proofs (CRYPTO_memcmp): the time taken does not depend on where
// they first differ.
bool proofsEqual(const Proof& a, const Proof& b);

// makeProof then proofsEqual: true when `got` is the proof `key` gives.
bool verifyProof(const std::string& key, std::string_view context, const Nonce& client, const Nonce& server,
                 const Proof& got);

}  // namespace trib::auth
