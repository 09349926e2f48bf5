// The switch's authentication handshake (protocol version 3): the challenge-response of
// bootstrap/auth.hpp over switch messages, in the same order as the store's (docs/SECURITY.md):
//   client -> Hello     {arg32 role, payload: client nonce}
//   switch <- Challenge {payload: switch nonce}
//   client -> Proof     {payload: HMAC(key, "trib-switch/3/client/<role>", nonces)}
//   switch <- HelloAck  {payload: HMAC(key, "trib-switch/3/switch", nonces)}
// A wrong proof gets an Error "wrong job key" and the connection closes; a client checks the
// switch's proof before it registers, so it never streams data to a switch without the key.
// The message builders serve the switch, its clients and tests that speak raw bytes.
#pragma once
#include <string>
#include <vector>

#include "bootstrap/auth.hpp"
#include "transports/switch/switch_link.hpp"
#include "transports/switch/switch_protocol.hpp"

namespace trib::sw {

std::vector<uint8_t> helloMessage(Role role, const auth::Nonce& client);
std::vector<uint8_t> challengeMessage(const auth::Nonce& server);
// The client's Proof, or the switch's HelloAck, for this connection's nonces.
Status proofMessage(const std::string& key, Role role, const auth::Nonce& client, const auth::Nonce& server,
                    std::vector<uint8_t>* out);
Status acceptMessage(const std::string& key, const auth::Nonce& client, const auth::Nonce& server,
                     std::vector<uint8_t>* out);
// Checks of what the other side sent (a payload of exactly kProofBytes; parseHeader bounds it).
bool clientProofValid(const std::string& key, Role role, const auth::Nonce& client, const auth::Nonce& server,
                      const std::vector<uint8_t>& payload);
bool switchProofValid(const std::string& key, const auth::Nonce& client, const auth::Nonce& server,
                      const std::vector<uint8_t>& payload);

// The client's side of the whole handshake over a connected link, bounded by `deadline`. An
// Error or Refuse from the switch returns its reason; a switch whose proof does not verify is
// refused here.
Status clientHandshake(Link& link, const std::string& key, Role role, LinkClock::time_point deadline);

}  // namespace trib::sw
