// The byte-stream links of the aggregation switch: a rank to its leaf switch, a switch to its
// parent. The framing (switch_protocol) runs unchanged on top; a link only moves bytes.
//
// Two kinds: TCP sockets (the default: nothing to install, works everywhere) and UCX (the UCP
// stream API over a UCP listener: UCX picks the fastest transport it has between the two hosts,
// RDMA where there is some). Both ends of a link must use the same kind; a mismatch makes the
// hello exchange fail within its timeout.
#pragma once
#include <poll.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.hpp"

namespace trib::sw {

enum class LinkKind : uint8_t { Tcp, Ucx };
const char* linkKindName(LinkKind k);
// "tcp" or "ucx" (case-insensitive); anything else is an error naming the choices.
Status parseLinkKind(const std::string& s, LinkKind* out);
// Whether this build can make links of kind `k` (UCX needs libucx-dev at build time).
bool linkKindAvailable(LinkKind k);

using LinkClock = std::chrono::steady_clock;

class Link {
 public:
  virtual ~Link() = default;
  // Non-blocking. *sent: bytes taken (0 = try later). An error means the link is gone.
  virtual Status send(const void* data, size_t n, size_t* sent) = 0;
  // Non-blocking. *got: bytes read (0 = nothing yet). An error (with the reason) means the peer
  // closed or is gone.
  virtual Status recv(void* data, size_t n, size_t* got) = 0;
  // The socket to poll for this link, or -1 when its hub's wake-up fd covers it (UCX).
  virtual int pollFd() const = 0;
  // Sleeps until this link may have something to read, at most `timeoutMs`.
  virtual void wait(int timeoutMs) = 0;
  virtual std::string peer() const = 0;
};

// Blocking-style I/O over a link, bounded by `deadline` (handshakes).
Status linkSendAll(Link& l, const void* data, size_t n, LinkClock::time_point deadline);
Status linkRecvAll(Link& l, void* data, size_t n, LinkClock::time_point deadline);

// What links of one kind share in a process: the UCX context and worker, the listener.
// Links must be destroyed before their hub.
class LinkHub {
 public:
  static Status create(LinkKind kind, std::unique_ptr<LinkHub>* out);
  virtual ~LinkHub() = default;
  LinkKind kind() const { return kind_; }

  // Accept links on host:port (port 0 picks a free one); address() is then the bound one.
  virtual Status listen(const std::string& hostPort) = 0;
  virtual std::string address() const = 0;
  // A link to host:port. TCP retries refused connections until `deadline`; UCX connects in the
  // background (a failure shows as an error of the link's first send/recv).
  virtual Status connect(const std::string& hostPort, LinkClock::time_point deadline,
                         std::unique_ptr<Link>* out) = 0;
  // The next accepted link, or nullptr when none is waiting.
  virtual std::unique_ptr<Link> accept() = 0;

  // poll() integration: the fds to wait on besides the links' own, with POLLIN. Returns false
  // when there is work already (poll with timeout 0), e.g. bytes a progress moved into a link.
  virtual bool preparePoll(std::vector<pollfd>* fds) = 0;
  // Makes progress after poll() (UCX: progresses the worker).
  virtual void progress() = 0;

 protected:
  explicit LinkHub(LinkKind k) : kind_(k) {}
  LinkKind kind_;
};

}  // namespace trib::sw
