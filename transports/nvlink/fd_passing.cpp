#include "transports/nvlink/fd_passing.hpp"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <thread>

namespace trib::nvlink {
namespace {

using Clock = std::chrono::steady_clock;

Status sysError(const char* what) { return errorf(tribSystemError, "%s: %s", what, std::strerror(errno)); }

Status abstractAddress(const std::string& name, sockaddr_un* addr, socklen_t* len) {
  std::memset(addr, 0, sizeof *addr);
  addr->sun_family = AF_UNIX;
  if (name.empty() || name.size() + 1 > sizeof addr->sun_path)
    return errorf(tribInternalError, "unix socket name '%s' is empty or longer than %zu bytes", name.c_str(),
                  sizeof addr->sun_path - 1);
  std::memcpy(addr->sun_path + 1, name.data(), name.size());  // sun_path[0] == 0: abstract
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return Status::Ok();
}

int msLeft(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 1000));  // re-check at least every second
}

// Waits until `fd` is readable (POLLIN or a hang-up) or the deadline passes.
Status waitReadable(int fd, Clock::time_point deadline, const char* what) {
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    const int n = poll(&p, 1, msLeft(deadline));
    if (n > 0) return Status::Ok();
    if (n < 0 && errno != EINTR) return sysError("poll");
    if (Clock::now() >= deadline) return errorf(tribTimeout, "%s: nothing arrived within the timeout", what);
  }
}

}  // namespace

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) reset(o.release());
  return *this;
}

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) close(fd_);
  fd_ = fd;
}

Status listenAbstract(const std::string& name, UniqueFd* out) {
  sockaddr_un addr;
  socklen_t len = 0;
  TRIB_RETURN_IF_ERROR(abstractAddress(name, &addr, &len));
  UniqueFd s(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (s.get() < 0) return sysError("socket(AF_UNIX, SOCK_SEQPACKET)");
  if (bind(s.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0)
    return sysError("bind (abstract unix socket)");
  if (listen(s.get(), SOMAXCONN) != 0) return sysError("listen (unix socket)");
  *out = std::move(s);
  return Status::Ok();
}

Status connectAbstract(const std::string& name, std::chrono::milliseconds timeout, UniqueFd* out) {
  sockaddr_un addr;
  socklen_t len = 0;
  TRIB_RETURN_IF_ERROR(abstractAddress(name, &addr, &len));
  const auto deadline = Clock::now() + timeout;
  for (auto pause = std::chrono::microseconds(50);;
       pause = std::min(pause * 2, std::chrono::microseconds(20000))) {
    UniqueFd s(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    if (s.get() < 0) return sysError("socket(AF_UNIX, SOCK_SEQPACKET)");
    if (connect(s.get(), reinterpret_cast<sockaddr*>(&addr), len) == 0) {
      *out = std::move(s);
      return Status::Ok();
    }
    // Not listening yet (ECONNREFUSED) or its backlog is full (EAGAIN): try again, bounded.
    if (errno != ECONNREFUSED && errno != EAGAIN && errno != ENOENT && errno != EINTR)
      return sysError("connect (unix socket)");
    if (Clock::now() >= deadline)
      return errorf(tribTimeout, "connecting to unix socket '%s': nobody listened within the timeout",
                    name.c_str());
    std::this_thread::sleep_for(pause);
  }
}

Status acceptWithin(int listener, std::chrono::milliseconds timeout, UniqueFd* out) {
  TRIB_RETURN_IF_ERROR(waitReadable(listener, Clock::now() + timeout, "accepting a peer's connection"));
  UniqueFd s(accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
  if (s.get() < 0) return sysError("accept (unix socket)");
  *out = std::move(s);
  return Status::Ok();
}

Status checkPeer(int sock, const ProcessIdentity* expected, const std::string& who) {
  ucred c{};
  socklen_t len = sizeof c;
  if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &c, &len) != 0 || len != sizeof c)
    return sysError("getsockopt(SO_PEERCRED)");
  const uid_t uid = geteuid();
  if (c.uid != uid)
    return errorf(tribRemoteError,
                  "refused %s: the process at the other end of the socket (pid %d) runs as uid %u, this "
                  "process as uid %u",
                  who.c_str(), static_cast<int>(c.pid), static_cast<unsigned>(c.uid),
                  static_cast<unsigned>(uid));
  static const ProcessIdentity self = selfIdentity();
  if (!expected || !samePidSpace(self, *expected)) return Status::Ok();  // the uid is all we can tell
  if (c.pid != expected->pid)
    return errorf(tribRemoteError,
                  "refused %s: the process at the other end of the socket is pid %d, not pid %d (the one "
                  "that published it)",
                  who.c_str(), static_cast<int>(c.pid), static_cast<int>(expected->pid));
  // The peer may have exited since it connected (its message still counts), but its pid must not
  // have gone to another process: then this connection may be that process's.
  if (pidTakenByAnother(*expected))
    return errorf(tribRemoteError,
                  "refused %s: pid %d now belongs to another process than the one that published it "
                  "(another start time)",
                  who.c_str(), static_cast<int>(c.pid));
  return Status::Ok();
}

Status sendFds(int sock, const void* payload, size_t bytes, const int* fds, int nfds) {
  if (bytes == 0 || nfds < 0 || nfds > kMaxPassedFds)
    return errorf(tribInternalError,
                  "sendFds: %zu payload bytes and %d descriptors (need >= 1 byte, <= %d fds)", bytes, nfds,
                  kMaxPassedFds);
  iovec iov{const_cast<void*>(payload), bytes};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPassedFds)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (nfds > 0) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
    std::memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
  }
  for (;;) {
    const ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL);
    if (n == static_cast<ssize_t>(bytes)) return Status::Ok();
    if (n >= 0) return errorf(tribSystemError, "sendmsg sent %zd of %zu bytes", n, bytes);
    if (errno == EINTR) continue;
    if (errno == EPIPE || errno == ECONNRESET)
      return errorf(tribRemoteError, "sendmsg: the peer closed its socket (%s)", std::strerror(errno));
    return sysError("sendmsg (SCM_RIGHTS)");
  }
}

Status recvFds(int sock, void* payload, size_t bytes, UniqueFd* fds, int nfds,
               std::chrono::milliseconds timeout, const std::string& from) {
  for (int i = 0; i < nfds; ++i) fds[i].reset();
  if (nfds < 0 || nfds > kMaxPassedFds)
    return errorf(tribInternalError, "recvFds: %d descriptors (at most %d)", nfds, kMaxPassedFds);
  TRIB_RETURN_IF_ERROR(
      waitReadable(sock, Clock::now() + timeout, ("receiving descriptors from " + from).c_str()));
  // One byte more than expected, so that a longer message shows as one (with MSG_TRUNC).
  std::string buf(bytes + 1, '\0');
  iovec iov{buf.data(), buf.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * (kMaxPassedFds + 1))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do {
    n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return sysError(("recvmsg from " + from).c_str());
  // Take ownership of whatever descriptors came, so that every error path closes them.
  UniqueFd got[kMaxPassedFds + 1];
  int ngot = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const int k = static_cast<int>((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
    for (int i = 0; i < k; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      if (ngot <= kMaxPassedFds)
        got[ngot++].reset(fd);
      else
        close(fd);
    }
  }
  if (n == 0)
    return errorf(tribRemoteError, "%s closed its socket before sending its descriptors", from.c_str());
  if (msg.msg_flags & MSG_CTRUNC)
    return errorf(tribRemoteError, "the message from %s carried more than %d descriptors", from.c_str(),
                  kMaxPassedFds);
  if (static_cast<size_t>(n) != bytes || (msg.msg_flags & MSG_TRUNC))
    return errorf(tribRemoteError,
                  "the message from %s was truncated or malformed: %zd%s bytes, expected %zu", from.c_str(),
                  n, (msg.msg_flags & MSG_TRUNC) ? "+" : "", bytes);
  if (ngot != nfds)
    return errorf(tribRemoteError, "the message from %s carried %d file descriptor(s), expected %d",
                  from.c_str(), ngot, nfds);
  std::memcpy(payload, buf.data(), bytes);
  for (int i = 0; i < nfds; ++i) fds[i] = std::move(got[i]);
  return Status::Ok();
}

}  // namespace trib::nvlink
