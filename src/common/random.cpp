#include "common/random.hpp"

#include <sys/random.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace trib {

Status randomBytes(void* out, size_t n) {
  auto* p = static_cast<uint8_t*>(out);
  while (n > 0) {
    ssize_t r = getrandom(p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return errorf(tribSystemError, "getrandom: %s", strerror(errno));
    p += r;
    n -= static_cast<size_t>(r);
  }
  return Status::Ok();
}

uint64_t randomId64() {
  uint64_t id = 0;
  if (randomBytes(&id, sizeof id).ok()) return id;
  static std::atomic<uint64_t> counter{0};
  const auto now = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  return now ^ (static_cast<uint64_t>(getpid()) << 40) ^ (counter.fetch_add(1) * 0x9e3779b97f4a7c15ull);
}

}  // namespace trib
