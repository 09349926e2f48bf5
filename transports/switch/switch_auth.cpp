#include "transports/switch/switch_auth.hpp"

#include <cstring>

namespace trib::sw {

static_assert(kHandshakeBytes == auth::kNonceBytes && kHandshakeBytes == auth::kProofBytes);

namespace {

std::string clientContext(Role role) {
  return role == Role::Switch ? "trib-switch/3/client/switch" : "trib-switch/3/client/rank";
}
constexpr const char* kSwitchContext = "trib-switch/3/switch";

bool asProof(const std::vector<uint8_t>& payload, auth::Proof* out) {
  if (payload.size() != out->size()) return false;
  std::memcpy(out->data(), payload.data(), out->size());
  return true;
}

std::vector<uint8_t> withPayload(MsgType type, uint32_t arg32, const uint8_t* p, size_t n) {
  Header h;
  h.type = type;
  h.arg32 = arg32;
  return encodeMessage(h, p, n);
}

// Reads one message of type `want` whose payload parseHeader bounded; Error/Refuse: their reason.
Status recvMessage(Link& link, MsgType want, LinkClock::time_point deadline, std::vector<uint8_t>* payload) {
  uint8_t buf[kHeaderBytes];
  Header h;
  TRIB_RETURN_IF_ERROR(linkRecvAll(link, buf, kHeaderBytes, deadline));
  TRIB_RETURN_IF_ERROR(parseHeader(buf, 0, &h));
  payload->resize(h.payloadBytes);  // at most kMaxTextBytes for every type that may come here
  if (h.type != want && h.type != MsgType::Error && h.type != MsgType::Refuse)
    return errorf(tribRemoteError, "answered %s during the handshake, expected %s", msgTypeName(h.type),
                  msgTypeName(want));
  TRIB_RETURN_IF_ERROR(linkRecvAll(link, payload->data(), payload->size(), deadline));
  if (h.type == want) return Status::Ok();
  return errorf(h.type == MsgType::Refuse ? tribNotSupported : tribRemoteError, "refused: %s",
                std::string(payload->begin(), payload->end()).c_str());
}

}  // namespace

std::vector<uint8_t> helloMessage(Role role, const auth::Nonce& client) {
  return withPayload(MsgType::Hello, static_cast<uint32_t>(role), client.data(), client.size());
}

std::vector<uint8_t> challengeMessage(const auth::Nonce& server) {
  return withPayload(MsgType::Challenge, 0, server.data(), server.size());
}

Status proofMessage(const std::string& key, Role role, const auth::Nonce& client, const auth::Nonce& server,
                    std::vector<uint8_t>* out) {
  auth::Proof p{};
  TRIB_RETURN_IF_ERROR(auth::makeProof(key, clientContext(role), client, server, &p));
  *out = withPayload(MsgType::Proof, 0, p.data(), p.size());
  return Status::Ok();
}

Status acceptMessage(const std::string& key, const auth::Nonce& client, const auth::Nonce& server,
                     std::vector<uint8_t>* out) {
  auth::Proof p{};
  TRIB_RETURN_IF_ERROR(auth::makeProof(key, kSwitchContext, client, server, &p));
  *out = withPayload(MsgType::HelloAck, 0, p.data(), p.size());
  return Status::Ok();
}

bool clientProofValid(const std::string& key, Role role, const auth::Nonce& client, const auth::Nonce& server,
                      const std::vector<uint8_t>& payload) {
  auth::Proof got{};
  return asProof(payload, &got) && auth::verifyProof(key, clientContext(role), client, server, got);
}

bool switchProofValid(const std::string& key, const auth::Nonce& client, const auth::Nonce& server,
                      const std::vector<uint8_t>& payload) {
  auth::Proof got{};
  return asProof(payload, &got) && auth::verifyProof(key, kSwitchContext, client, server, got);
}

Status clientHandshake(Link& link, const std::string& key, Role role, LinkClock::time_point deadline) {
  auth::Nonce mine{}, theirs{};
  TRIB_RETURN_IF_ERROR(auth::freshNonce(&mine));
  std::vector<uint8_t> msg = helloMessage(role, mine), payload;
  TRIB_RETURN_IF_ERROR(linkSendAll(link, msg.data(), msg.size(), deadline));
  TRIB_RETURN_IF_ERROR(recvMessage(link, MsgType::Challenge, deadline, &payload));
  std::memcpy(theirs.data(), payload.data(), theirs.size());  // parseHeader: exactly kNonceBytes
  TRIB_RETURN_IF_ERROR(proofMessage(key, role, mine, theirs, &msg));
  TRIB_RETURN_IF_ERROR(linkSendAll(link, msg.data(), msg.size(), deadline));
  TRIB_RETURN_IF_ERROR(recvMessage(link, MsgType::HelloAck, deadline, &payload));
  if (!switchProofValid(key, mine, theirs, payload))
    return errorf(tribRemoteError,
                  "did not prove it holds the job key (it serves another job, or is not a Tributary "
                  "switch): check TRIB_SWITCH and TRIB_SWITCH_KEY / TRIB_AUTH_KEY");
  return Status::Ok();
}

}  // namespace trib::sw
