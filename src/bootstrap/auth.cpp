#include "bootstrap/auth.hpp"

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <climits>
#include <cstring>
#include <vector>

namespace trib::auth {

namespace {
// libcrypto's exit handler frees its global tables while a store or switch thread may still be
// running (a process may exit without destroying its communicators; TSan saw it at exit in a test):
// keep them for the process's life instead. Once, before the first use.
void initOpenSsl() {
  static const bool once = OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, nullptr) == 1;
  (void)once;
}

std::string opensslError() {
  char buf[256] = "unknown error";
  unsigned long e = ERR_get_error();
  if (e) ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}
}  // namespace

Status freshNonce(Nonce* out) {
  initOpenSsl();
  if (RAND_bytes(out->data(), static_cast<int>(out->size())) != 1)
    return errorf(tribSystemError, "RAND_bytes: %s (no usable random source)", opensslError().c_str());
  return Status::Ok();
}

Status makeProof(const std::string& key, std::string_view context, const Nonce& client, const Nonce& server,
                 Proof* out) {
  initOpenSsl();
  if (key.size() > static_cast<size_t>(INT_MAX) || context.size() > 1024)
    return errorf(tribInvalidArgument, "authentication: key or context too long");
  // Length-prefixed context, then the two fixed-size nonces: no two inputs encode alike.
  std::vector<unsigned char> msg;
  msg.reserve(4 + context.size() + 2 * kNonceBytes);
  uint32_t len = static_cast<uint32_t>(context.size());
  const auto* l = reinterpret_cast<const unsigned char*>(&len);
  msg.insert(msg.end(), l, l + 4);
  msg.insert(msg.end(), context.begin(), context.end());
  msg.insert(msg.end(), client.begin(), client.end());
  msg.insert(msg.end(), server.begin(), server.end());
  unsigned int outLen = 0;
  if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), msg.data(), msg.size(), out->data(),
            &outLen) ||
      outLen != kProofBytes)
    return errorf(tribSystemError, "HMAC-SHA256: %s", opensslError().c_str());
  return Status::Ok();
}

bool proofsEqual(const Proof& a, const Proof& b) { return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0; }

bool verifyProof(const std::string& key, std::string_view context, const Nonce& client, const Nonce& server,
                 const Proof& got) {
  Proof want{};
  if (!makeProof(key, context, client, server, &want).ok()) return false;
  return proofsEqual(want, got);
}

}  // namespace trib::auth
