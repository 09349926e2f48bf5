// The TCP store's message decoding (store.hpp): what the server reads from a client and the client
// from the server, free of sockets so that tests/fuzz drives exactly this code.
#include "bootstrap/store.hpp"

namespace trib {

// Stores without range waits of their own (the file store) wait for the keys one by one.
Status Store::multiGetRange(const std::string& prefix, uint32_t first, uint32_t count,
                            std::vector<Blob>* values, int timeoutMs) {
  std::vector<std::string> keys(count);
  for (uint32_t i = 0; i < count; ++i) keys[i] = storeproto::rangeKey(prefix, uint64_t{first} + i);
  return multiGet(keys, values, timeoutMs);
}

}  // namespace trib

namespace trib::storeproto {

bool decodeRequest(const uint8_t* body, size_t n, Request* out) {
  net::Reader r(body, n);
  Request q;
  r.u8(&q.op);
  switch (q.op) {
    case kSet:
      r.str(&q.key);
      r.bytes(&q.value);
      break;
    case kAdd:
      r.str(&q.key);
      r.u64(&q.delta);
      break;
    case kWait: {
      uint32_t count = 0;
      uint8_t values = 0;
      r.u32(&q.timeoutMs);
      r.u8(&values);
      r.u32(&count);
      q.values = values != 0;
      // Each key takes >= 4 bytes: an absurd count is refused before anything is allocated, and
      // keys are added as they are read, so memory follows the bytes actually received.
      if (!r.ok() || count > n / 4) return false;
      for (uint32_t i = 0; i < count && r.ok(); ++i) r.str(&q.keys.emplace_back());
      break;
    }
    case kWaitRange: {
      uint8_t values = 0;
      r.u32(&q.timeoutMs);
      r.u8(&values);
      r.str(&q.key);
      r.u32(&q.first);
      r.u32(&q.count);
      q.values = values != 0;
      if (q.count > kMaxRangeKeys || uint64_t{q.first} + q.count > uint64_t{UINT32_MAX} + 1 ||
          !rangePrefixOk(q.key))
        return false;
      break;
    }
    case kRemove:
      r.str(&q.key);
      break;
    default:
      return false;
  }
  if (!r.ok() || !r.atEnd()) return false;
  *out = std::move(q);
  return true;
}

Status decodeReply(std::vector<uint8_t>* reply, const std::string& server) {
  if (reply->empty()) return errorf(tribRemoteError, "store at %s sent an empty reply", server.c_str());
  const uint8_t code = (*reply)[0];
  if (code == kOk) {
    reply->erase(reply->begin());
    return Status::Ok();
  }
  net::Reader r(reply->data() + 1, reply->size() - 1);
  std::string msg;
  r.str(&msg);
  if (code != kTimeoutReply && code != kError)
    return errorf(tribRemoteError, "store at %s sent unknown reply code %u", server.c_str(), code);
  return errorf(code == kTimeoutReply ? tribTimeout : tribRemoteError, "store at %s: %s", server.c_str(),
                msg.c_str());
}

Status decodeValues(const std::vector<uint8_t>& payload, size_t expected, const std::string& server,
                    std::vector<std::vector<uint8_t>>* out) {
  net::Reader r(payload.data(), payload.size());
  uint32_t n = 0;
  r.u32(&n);
  if (!r.ok() || n != expected)
    return errorf(tribRemoteError, "store at %s: reply has %u values for %zu keys", server.c_str(), n,
                  expected);
  out->resize(n);
  for (auto& v : *out) r.bytes(&v);
  if (!r.ok()) return errorf(tribRemoteError, "store at %s: truncated multi-get reply", server.c_str());
  return Status::Ok();
}

}  // namespace trib::storeproto
