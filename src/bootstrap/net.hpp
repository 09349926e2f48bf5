// Socket helpers for the bootstrap: address parsing, listen/connect with deadlines, and a
// bounds-checked little-endian codec for the store's length-prefixed messages.
#pragma once
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/status.hpp"

namespace trib::net {

using Clock = std::chrono::steady_clock;
inline Clock::time_point deadlineAfter(int timeoutMs) {
  return Clock::now() + std::chrono::milliseconds(timeoutMs);
}
// Milliseconds left until `deadline` (0 once past), clamped for poll().
int msLeft(Clock::time_point deadline);

struct SockAddr {
  sockaddr_storage ss{};
  socklen_t len = 0;
  std::string str() const;  // "1.2.3.4:5" or "[::1]:5"
};

// Parse "host:port" / "[v6]:port"; the host is resolved (numeric or a name given by the user).
Status parseHostPort(const std::string& hostPort, SockAddr* out);
// Listen on `addr` (port 0 picks a free one); *bound receives the actual address. Non-blocking fd.
Status listenOn(const SockAddr& addr, int* fd, SockAddr* bound);
// Connect, retrying refused connections until `deadline` (the server may not be up yet). Once
// `cancelled` (if given) is set, it stops within kCancelPollMs with tribAborted: a non-blocking
// init's join that tribCommAbort ends.
constexpr int kCancelPollMs = 250;
Status connectTo(const SockAddr& addr, Clock::time_point deadline, int* fd,
                 const std::atomic<bool>* cancelled = nullptr);
// Blocking-style I/O on a non-blocking fd, bounded by `deadline`.
Status sendAll(int fd, const void* data, size_t n, Clock::time_point deadline);
Status recvAll(int fd, void* data, size_t n, Clock::time_point deadline);
void setNonBlocking(int fd);

// Append-only encoder.
class Writer {
 public:
  void u8(uint8_t v) { buf_.push_back(v); }
  void u32(uint32_t v) { put(&v, 4); }
  void u64(uint64_t v) { put(&v, 8); }
  void bytes(const void* p, size_t n) {
    u32(static_cast<uint32_t>(n));
    put(p, n);
  }
  void str(const std::string& s) { bytes(s.data(), s.size()); }
  void raw(const void* p, size_t n) { put(p, n); }  // fixed-size field: no length prefix
  // Prepend the 4-byte length prefix and return the framed message.
  std::vector<uint8_t> frame() const;
  const std::vector<uint8_t>& data() const { return buf_; }

 private:
  void put(const void* p, size_t n) {
    auto* b = static_cast<const uint8_t*>(p);
    buf_.insert(buf_.end(), b, b + n);
  }
  std::vector<uint8_t> buf_;
};

// Decoder: every read checks bounds; ok() turns false on the first malformed field.
class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  bool u8(uint8_t* v) { return get(v, 1); }
  bool u32(uint32_t* v) { return get(v, 4); }
  bool u64(uint64_t* v) { return get(v, 8); }
  bool bytes(std::vector<uint8_t>* v);
  bool str(std::string* s);
  bool raw(void* v, size_t n) { return get(v, n); }  // fixed-size field: no length prefix
  bool ok() const { return ok_; }
  bool atEnd() const { return off_ == n_; }

 private:
  bool get(void* v, size_t n) {
    if (!ok_ || n_ - off_ < n) return ok_ = false;
    std::memcpy(v, p_ + off_, n);
    off_ += n;
    return true;
  }
  const uint8_t* p_;
  size_t n_, off_ = 0;
  bool ok_ = true;
};

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the store protocol is little-endian");

}  // namespace trib::net
