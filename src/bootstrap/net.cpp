#include "bootstrap/net.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <thread>

namespace trib::net {

int msLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return left > 1 << 30 ? 1 << 30 : static_cast<int>(left);
}

std::string SockAddr::str() const {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (ss.ss_family == AF_INET) {
    auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
    port = ntohs(a->sin_port);
    return strprintf("%s:%d", host, port);
  }
  auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
  inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
  port = ntohs(a->sin6_port);
  return strprintf("[%s]:%d", host, port);
}

Status parseHostPort(const std::string& hostPort, SockAddr* out) {
  std::string host, port;
  if (!hostPort.empty() && hostPort[0] == '[') {
    size_t close = hostPort.find(']');
    if (close == std::string::npos || close + 1 >= hostPort.size() || hostPort[close + 1] != ':')
      return errorf(tribInvalidArgument, "address '%s' is not [ipv6]:port", hostPort.c_str());
    host = hostPort.substr(1, close - 1);
    port = hostPort.substr(close + 2);
  } else {
    size_t colon = hostPort.rfind(':');
    if (colon == std::string::npos || colon == 0)
      return errorf(tribInvalidArgument, "address '%s' is not host:port (e.g. 127.0.0.1:29500)",
                    hostPort.c_str());
    host = hostPort.substr(0, colon);
    port = hostPort.substr(colon + 1);
  }
  char* end = nullptr;
  long p = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || p < 0 || p > 65535)
    return errorf(tribInvalidArgument, "address '%s': port '%s' is not a number in 0..65535",
                  hostPort.c_str(), port.c_str());
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0 || !res)
    return errorf(tribInvalidArgument, "address '%s': cannot resolve host '%s': %s", hostPort.c_str(),
                  host.c_str(), gai_strerror(rc));
  std::memcpy(&out->ss, res->ai_addr, res->ai_addrlen);
  out->len = res->ai_addrlen;
  freeaddrinfo(res);
  return Status::Ok();
}

void setNonBlocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

static void tuneSocket(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

Status listenOn(const SockAddr& addr, int* fd, SockAddr* bound) {
  int s = socket(addr.ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (s < 0) return errorf(tribSystemError, "socket(): %s", strerror(errno));
  int one = 1;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(s, reinterpret_cast<const sockaddr*>(&addr.ss), addr.len) != 0) {
    int e = errno;
    close(s);
    return errorf(tribSystemError,
                  "cannot listen on %s: bind: %s (is the port in use, or the address not local?)",
                  addr.str().c_str(), strerror(e));
  }
  if (listen(s, 1024) != 0) {
    int e = errno;
    close(s);
    return errorf(tribSystemError, "listen on %s: %s", addr.str().c_str(), strerror(e));
  }
  bound->len = sizeof bound->ss;
  getsockname(s, reinterpret_cast<sockaddr*>(&bound->ss), &bound->len);
  *fd = s;
  return Status::Ok();
}

Status connectTo(const SockAddr& addr, Clock::time_point deadline, int* fd,
                 const std::atomic<bool>* cancelled) {
  auto cut = [&] { return cancelled && cancelled->load(std::memory_order_acquire); };
  int backoffMs = 1;
  std::string last = "timed out";
  do {
    int s = socket(addr.ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0) return errorf(tribSystemError, "socket(): %s", strerror(errno));
    int rc = connect(s, reinterpret_cast<const sockaddr*>(&addr.ss), addr.len);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{s, POLLOUT, 0};
      int ready = 0;
      // An unanswered SYN waits out the deadline: in slices where an abort can cut it short.
      do {
        const int left = msLeft(deadline);
        ready = poll(&p, 1, cancelled ? std::min(left, kCancelPollMs) : left);
      } while (ready == 0 && msLeft(deadline) > 0 && !cut());
      if (ready == 1) {
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len);
        rc = err == 0 ? 0 : -1;
        errno = err;
      } else {
        errno = ETIMEDOUT;
      }
    }
    if (rc == 0) {
      tuneSocket(s);
      *fd = s;
      return Status::Ok();
    }
    last = strerror(errno);
    close(s);
    if (cut())
      return errorf(tribAborted,
                    "connecting to store at %s was cut short: the communicator was aborted (tribCommAbort) "
                    "during its init (last attempt: %s)",
                    addr.str().c_str(), last.c_str());
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::min(backoffMs, std::max(1, msLeft(deadline)))));
    backoffMs = std::min(backoffMs * 2, 100);
  } while (Clock::now() < deadline);
  return errorf(tribTimeout,
                "cannot connect to store at %s: %s (is the server running, and the address right?)",
                addr.str().c_str(), last.c_str());
}

Status sendAll(int fd, const void* data, size_t n, Clock::time_point deadline) {
  auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w > 0) {
      p += w;
      n -= static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return errorf(tribRemoteError, "send to store: %s (the server closed the connection)", strerror(errno));
    pollfd pfd{fd, POLLOUT, 0};
    if (poll(&pfd, 1, msLeft(deadline)) == 0 && Clock::now() >= deadline)
      return errorf(tribTimeout, "send to store timed out");
  }
  return Status::Ok();
}

Status recvAll(int fd, void* data, size_t n, Clock::time_point deadline) {
  auto* p = static_cast<uint8_t*>(data);
  while (n > 0) {
    ssize_t r = recv(fd, p, n, 0);
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
      continue;
    }
    if (r == 0) return errorf(tribRemoteError, "the store server closed the connection");
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return errorf(tribRemoteError, "recv from store: %s", strerror(errno));
    pollfd pfd{fd, POLLIN, 0};
    if (poll(&pfd, 1, msLeft(deadline)) == 0 && Clock::now() >= deadline)
      return errorf(tribTimeout, "no reply from the store within the timeout");
  }
  return Status::Ok();
}

std::vector<uint8_t> Writer::frame() const {
  std::vector<uint8_t> out(4 + buf_.size());
  uint32_t n = static_cast<uint32_t>(buf_.size());
  std::memcpy(out.data(), &n, 4);
  if (!buf_.empty()) std::memcpy(out.data() + 4, buf_.data(), buf_.size());
  return out;
}

bool Reader::bytes(std::vector<uint8_t>* v) {
  uint32_t n;
  if (!u32(&n)) return false;
  if (n_ - off_ < n) return ok_ = false;
  v->assign(p_ + off_, p_ + off_ + n);
  off_ += n;
  return true;
}

bool Reader::str(std::string* s) {
  uint32_t n;
  if (!u32(&n)) return false;
  if (n_ - off_ < n) return ok_ = false;
  s->assign(reinterpret_cast<const char*>(p_ + off_), n);
  off_ += n;
  return true;
}

}  // namespace trib::net
