// Passing file descriptors between processes of one host (SCM_RIGHTS over a Unix-domain socket):
// how a CUDA VMM allocation's POSIX file-descriptor handle (and a signal page's memfd) reaches a
// peer process. Sockets are SOCK_SEQPACKET, so a message arrives whole or is reported truncated,
// and live in the abstract namespace (nothing in the file system to clean up after a crash). An
// abstract name has no permissions: any process of the host's network namespace may connect to
// it, or bind a name first. So each side checks who is at the other end (checkPeer) before it
// sends a descriptor or uses one it received. Every wait is bounded by the caller's timeout.
#pragma once
#include <chrono>
#include <cstddef>
#include <string>

#include "common/process.hpp"
#include "common/status.hpp"

namespace trib::nvlink {

constexpr int kMaxPassedFds = 4;

// An open file descriptor, closed with its owner.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }
  int get() const { return fd_; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// A listening socket at abstract name `name` (at most 100 bytes).
Status listenAbstract(const std::string& name, UniqueFd* out);
// Connects to the listener at `name`, retrying until `timeout` while it does not exist yet.
Status connectAbstract(const std::string& name, std::chrono::milliseconds timeout, UniqueFd* out);
// Accepts one connection on `listener` within `timeout`.
Status acceptWithin(int listener, std::chrono::milliseconds timeout, UniqueFd* out);

// Refuses (tribRemoteError, naming `who`) the process at the other end of the connected socket
// `sock` (SO_PEERCRED: the connecting process, or for a connecting side the listening one) when
// it runs as another user than this process, or, where `expected` is given and its pid means the
// same here (samePidSpace), when it is not that very process: another pid, or its pid now held
// by a process with another start time (a peer that exited after it connected still passes).
Status checkPeer(int sock, const ProcessIdentity* expected, const std::string& who);

// Sends one message: `bytes` of `payload` (at least 1) and `nfds` descriptors (0..kMaxPassedFds).
Status sendFds(int sock, const void* payload, size_t bytes, const int* fds, int nfds);
// Receives one message of exactly `bytes` payload carrying exactly `nfds` descriptors within
// `timeout`; on success `fds[0..nfds)` own the received descriptors. Errors (tribRemoteError, the
// message naming `from`): the peer closed the socket, the message was shorter or longer than
// expected, it carried fewer or more descriptors, or none arrived in time. On error no
// descriptor is left open.
Status recvFds(int sock, void* payload, size_t bytes, UniqueFd* fds, int nfds,
               std::chrono::milliseconds timeout, const std::string& from);

}  // namespace trib::nvlink
