#include "bootstrap/unique_id.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/env.hpp"
#include "common/random.hpp"

namespace trib {

namespace {

uint32_t fnv1a(const uint8_t* p, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 16777619u;
  return h;
}

}  // namespace

std::string toHex(const uint8_t* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    s[2 * i] = digits[p[i] >> 4];
    s[2 * i + 1] = digits[p[i] & 15];
  }
  return s;
}

Status makeUniqueId(tribUniqueId* id, StoreServerHandle* server) {
  std::string listen = envString("TRIB_BOOTSTRAP_ADDR");
  if (listen.empty()) listen = "127.0.0.1";
  // A bare address gets a free port.
  bool hasPort = listen[0] == '[' ? listen.find("]:") != std::string::npos
                                  : std::count(listen.begin(), listen.end(), ':') == 1;
  if (!hasPort) listen = listen.find(':') != std::string::npos ? "[" + listen + "]:0" : listen + ":0";
  return makeUniqueId(id, server, listen);
}

Status makeUniqueId(tribUniqueId* id, StoreServerHandle* server, const std::string& listen) {
  if (!id || !server) return errorf(tribInvalidArgument, "makeUniqueId: null argument");
  UniqueIdLayout u{};
  u.magic = UniqueIdLayout::kMagic;
  u.version = UniqueIdLayout::kVersion;
  TRIB_RETURN_IF_ERROR(randomBytes(u.jobKey, sizeof u.jobKey));
  TRIB_RETURN_IF_ERROR(randomBytes(&u.commId, sizeof u.commId));
  StoreServerOptions opt;
  opt.listen = listen;
  opt.authKey = toHex(u.jobKey, sizeof u.jobKey);
  std::unique_ptr<TcpStoreServer> s;
  Status st = TcpStoreServer::start(opt, &s);
  if (!st.ok())
    return st.prefix("tribGetUniqueId: cannot start the rendezvous server (TRIB_BOOTSTRAP_ADDR): ");
  net::SockAddr bound;
  TRIB_RETURN_IF_ERROR(net::parseHostPort(s->address(), &bound));
  if (bound.ss.ss_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&bound.ss)->sin_addr, u.host, sizeof u.host);
  else
    inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&bound.ss)->sin6_addr, u.host, sizeof u.host);
  if (std::strcmp(u.host, "0.0.0.0") == 0 || std::strcmp(u.host, "::") == 0)
    return errorf(tribInvalidArgument,
                  "TRIB_BOOTSTRAP_ADDR '%s' is a wildcard; give this host's address other ranks can reach",
                  listen.c_str());
  u.port = static_cast<uint16_t>(s->port());
  u.checksum = fnv1a(reinterpret_cast<const uint8_t*>(&u), offsetof(UniqueIdLayout, checksum));
  std::memcpy(id->internal, &u, sizeof u);
  *server = std::move(s);
  return Status::Ok();
}

Status parseUniqueId(const tribUniqueId& id, UniqueIdInfo* info) {
  UniqueIdLayout u;
  std::memcpy(&u, id.internal, sizeof u);
  if (u.magic != UniqueIdLayout::kMagic)
    return errorf(tribInvalidArgument,
                  "unique id has magic 0x%08x, not 0x%08x: it was not made by tribGetUniqueId (or was "
                  "zeroed/truncated in transit)",
                  u.magic, UniqueIdLayout::kMagic);
  if (u.version != UniqueIdLayout::kVersion)
    return errorf(tribInvalidArgument,
                  "unique id version %u; this library reads version %u (mixed library versions?)", u.version,
                  UniqueIdLayout::kVersion);
  if (u.checksum != fnv1a(reinterpret_cast<const uint8_t*>(&u), offsetof(UniqueIdLayout, checksum)))
    return errorf(tribInvalidArgument, "unique id checksum mismatch: the id was corrupted in transit");
  if (std::memchr(u.host, '\0', sizeof u.host) == nullptr || u.host[0] == '\0')
    return errorf(tribInvalidArgument, "unique id carries no valid root address");
  in6_addr a6;
  in_addr a4;
  bool v4 = inet_pton(AF_INET, u.host, &a4) == 1;
  if (!v4 && inet_pton(AF_INET6, u.host, &a6) != 1)
    return errorf(tribInvalidArgument, "unique id root address '%.48s' is not a numeric IP", u.host);
  if (u.port == 0) return errorf(tribInvalidArgument, "unique id root port is 0");
  for (uint8_t b : u.reserved)
    if (b != 0) return errorf(tribInvalidArgument, "unique id has non-zero reserved bytes (corrupted?)");
  info->storeAddr = v4 ? strprintf("%s:%u", u.host, u.port) : strprintf("[%s]:%u", u.host, u.port);
  info->jobKey = toHex(u.jobKey, sizeof u.jobKey);
  info->commId = u.commId;
  return Status::Ok();
}

}  // namespace trib
