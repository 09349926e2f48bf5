#include "transports/switch/switch_link.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <thread>
#include <utility>

#include "bootstrap/net.hpp"

#ifdef TRIB_HAVE_UCX
#include <ucp/api/ucp.h>
#endif

namespace trib::sw {

const char* linkKindName(LinkKind k) { return k == LinkKind::Ucx ? "ucx" : "tcp"; }

Status parseLinkKind(const std::string& s, LinkKind* out) {
  std::string v = s;
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char ch) { return std::tolower(ch); });
  if (v == "tcp") {
    *out = LinkKind::Tcp;
  } else if (v == "ucx") {
    *out = LinkKind::Ucx;
  } else {
    return errorf(tribInvalidArgument, "unknown switch link '%s' (use tcp or ucx)", s.c_str());
  }
  return Status::Ok();
}

bool linkKindAvailable(LinkKind k) {
#ifdef TRIB_HAVE_UCX
  (void)k;
  return true;
#else
  return k == LinkKind::Tcp;
#endif
}

Status linkSendAll(Link& l, const void* data, size_t n, LinkClock::time_point deadline) {
  auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    size_t w = 0;
    TRIB_RETURN_IF_ERROR(l.send(p, n, &w));
    p += w;
    n -= w;
    if (n == 0) break;
    if (LinkClock::now() >= deadline) return errorf(tribTimeout, "send to %s timed out", l.peer().c_str());
    if (w == 0) l.wait(1);
  }
  return Status::Ok();
}

Status linkRecvAll(Link& l, void* data, size_t n, LinkClock::time_point deadline) {
  auto* p = static_cast<uint8_t*>(data);
  while (n > 0) {
    size_t r = 0;
    TRIB_RETURN_IF_ERROR(l.recv(p, n, &r));
    p += r;
    n -= r;
    if (n == 0) break;
    if (LinkClock::now() >= deadline)
      return errorf(tribTimeout, "no answer from %s in time (is it up, and using the same link kind?)",
                    l.peer().c_str());
    if (r == 0) l.wait(std::max(1, net::msLeft(deadline)));
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// TCP

namespace {

class TcpLink : public Link {
 public:
  TcpLink(int fd, std::string peer) : fd_(fd), peer_(std::move(peer)) {
    // Results are latency-critical: no Nagle delay on the last segment of a chunk.
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~TcpLink() override { close(fd_); }

  Status send(const void* data, size_t n, size_t* sent) override {
    *sent = 0;
    ssize_t w = ::send(fd_, data, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return Status::Ok();
      return errorf(tribRemoteError, "send failed: %s", strerror(errno));
    }
    *sent = static_cast<size_t>(w);
    return Status::Ok();
  }
  Status recv(void* data, size_t n, size_t* got) override {
    *got = 0;
    ssize_t r = ::recv(fd_, data, n, MSG_DONTWAIT);
    if (r == 0) return errorf(tribRemoteError, "connection closed");
    if (r < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return Status::Ok();
      return errorf(tribRemoteError, "recv: %s", strerror(errno));
    }
    *got = static_cast<size_t>(r);
    return Status::Ok();
  }
  int pollFd() const override { return fd_; }
  void wait(int timeoutMs) override {
    pollfd p{fd_, POLLIN, 0};
    (void)::poll(&p, 1, timeoutMs);
  }
  std::string peer() const override { return peer_; }

 private:
  int fd_;
  std::string peer_;
};

class TcpHub : public LinkHub {
 public:
  TcpHub() : LinkHub(LinkKind::Tcp) {}
  ~TcpHub() override {
    if (listenFd_ >= 0) close(listenFd_);
  }
  Status listen(const std::string& hostPort) override {
    net::SockAddr addr;
    TRIB_RETURN_IF_ERROR(net::parseHostPort(hostPort, &addr));
    return net::listenOn(addr, &listenFd_, &bound_);
  }
  std::string address() const override { return bound_.str(); }
  Status connect(const std::string& hostPort, LinkClock::time_point deadline,
                 std::unique_ptr<Link>* out) override {
    net::SockAddr addr;
    TRIB_RETURN_IF_ERROR(net::parseHostPort(hostPort, &addr));
    int fd = -1;
    TRIB_RETURN_IF_ERROR(net::connectTo(addr, deadline, &fd));
    out->reset(new TcpLink(fd, addr.str()));
    return Status::Ok();
  }
  std::unique_ptr<Link> accept() override {
    if (listenFd_ < 0) return nullptr;
    net::SockAddr a;
    a.len = sizeof a.ss;
    int fd = ::accept4(listenFd_, reinterpret_cast<sockaddr*>(&a.ss), &a.len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return nullptr;
    return std::make_unique<TcpLink>(fd, a.str());
  }
  bool preparePoll(std::vector<pollfd>* fds) override {
    if (listenFd_ >= 0) fds->push_back({listenFd_, POLLIN, 0});
    return true;
  }
  void progress() override {}

 private:
  int listenFd_ = -1;
  net::SockAddr bound_;
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// UCX: the UCP stream API. Sends copy the bytes (the callers reuse their buffers at once) and
// complete in the background; receives take what UCX has buffered for the endpoint.

#ifdef TRIB_HAVE_UCX
namespace {

constexpr size_t kMaxInFlight = 8u << 20;  // bytes handed to UCX and not yet sent: then back-pressure

// What outlives a link: its error state, read by callbacks that may run after it is gone.
struct UcxEpState {
  bool failed = false;
  std::string why;
  size_t inFlight = 0;
  void fail(ucs_status_t s) {
    if (failed) return;
    failed = true;
    why = strprintf("connection closed (UCX: %s)", ucs_status_string(s));
  }
};

struct SendRec {
  std::vector<uint8_t> bytes;
  std::shared_ptr<UcxEpState> st;
};

void onEpError(void* arg, ucp_ep_h, ucs_status_t status) { static_cast<UcxEpState*>(arg)->fail(status); }

void onSendDone(void* req, ucs_status_t status, void* user) {
  auto* rec = static_cast<SendRec*>(user);
  rec->st->inFlight -= rec->bytes.size();
  if (status != UCS_OK) rec->st->fail(status);
  ucp_request_free(req);
  delete rec;
}

std::string sockStr(const sockaddr_storage& ss) {
  net::SockAddr a;
  a.ss = ss;
  a.len = ss.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  return a.str();
}

class UcxHub;

class UcxLink : public Link {
 public:
  UcxLink(UcxHub* hub, ucp_ep_h ep, std::shared_ptr<UcxEpState> st, std::string peer)
      : hub_(hub), ep_(ep), st_(std::move(st)), peer_(std::move(peer)) {}
  ~UcxLink() override;
  Status send(const void* data, size_t n, size_t* sent) override;
  Status recv(void* data, size_t n, size_t* got) override;
  int pollFd() const override { return -1; }
  void wait(int timeoutMs) override;
  std::string peer() const override { return peer_; }

 private:
  Status broken() const { return errorf(tribRemoteError, "%s", st_->why.c_str()); }
  UcxHub* hub_;
  ucp_ep_h ep_;
  std::shared_ptr<UcxEpState> st_;
  std::string peer_;
  void* rdata_ = nullptr;  // a buffer from ucp_stream_recv_data_nb, partly consumed
  size_t rlen_ = 0, roff_ = 0;
};

class UcxHub : public LinkHub {
 public:
  UcxHub() : LinkHub(LinkKind::Ucx) {}
  ~UcxHub() override {
    if (listener_) {
      for (ucp_conn_request_h r : pending_) (void)ucp_listener_reject(listener_, r);
      ucp_listener_destroy(listener_);
    }
    if (worker_) ucp_worker_destroy(worker_);
    if (ctx_) ucp_cleanup(ctx_);
  }

  Status init() {
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_STREAM | UCP_FEATURE_WAKEUP;
    ucs_status_t s = ucp_init(&params, nullptr, &ctx_);
    if (s != UCS_OK) {
      ctx_ = nullptr;
      return errorf(tribSystemError, "UCX: ucp_init failed (%s); check UCX_TLS and `ucx_info -d`",
                    ucs_status_string(s));
    }
    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
    s = ucp_worker_create(ctx_, &wp, &worker_);
    if (s != UCS_OK) {
      worker_ = nullptr;
      return errorf(tribSystemError, "UCX: ucp_worker_create failed: %s", ucs_status_string(s));
    }
    s = ucp_worker_get_efd(worker_, &efd_);
    if (s != UCS_OK)
      return errorf(tribSystemError, "UCX: ucp_worker_get_efd failed: %s", ucs_status_string(s));
    return Status::Ok();
  }

  Status listen(const std::string& hostPort) override {
    net::SockAddr addr;
    TRIB_RETURN_IF_ERROR(net::parseHostPort(hostPort, &addr));
    ucp_listener_params_t lp{};
    lp.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    lp.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr.ss);
    lp.sockaddr.addrlen = addr.len;
    lp.conn_handler.cb = [](ucp_conn_request_h r, void* arg) {
      static_cast<UcxHub*>(arg)->pending_.push_back(r);
    };
    lp.conn_handler.arg = this;
    ucs_status_t s = ucp_listener_create(worker_, &lp, &listener_);
    if (s != UCS_OK) {
      listener_ = nullptr;
      return errorf(tribSystemError, "UCX: cannot listen on %s: %s", addr.str().c_str(),
                    ucs_status_string(s));
    }
    ucp_listener_attr_t la{};
    la.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
    s = ucp_listener_query(listener_, &la);
    if (s != UCS_OK)
      return errorf(tribSystemError, "UCX: ucp_listener_query failed: %s", ucs_status_string(s));
    bound_ = sockStr(la.sockaddr);
    return Status::Ok();
  }
  std::string address() const override { return bound_; }

  // Like TCP's connect, retries a refused connection until `deadline` (the peer may not be up
  // yet); connected = a flush of the new endpoint completed (UCX wires up in the background).
  Status connect(const std::string& hostPort, LinkClock::time_point deadline,
                 std::unique_ptr<Link>* out) override {
    net::SockAddr addr;
    TRIB_RETURN_IF_ERROR(net::parseHostPort(hostPort, &addr));
    int backoffMs = 1;
    // An attempt that neither connects nor fails in this long is cut and made again: a handshake
    // that raced the peer's start (refused at first, then half-accepted) can leave a flush that
    // never completes, which must not use up the whole deadline. Doubles, so a slow machine's
    // genuine handshake still fits.
    int attemptMs = 500;
    std::string last = "timed out";
    do {
      auto st = std::make_shared<UcxEpState>();
      ucp_ep_params_t ep{};
      ep.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                      UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
      ep.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
      ep.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr.ss);
      ep.sockaddr.addrlen = addr.len;
      ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;  // a dead peer is an error, not a hang
      ep.err_handler.cb = onEpError;
      ep.err_handler.arg = st.get();
      ucp_ep_h h = nullptr;
      ucs_status_t s = ucp_ep_create(worker_, &ep, &h);
      if (s != UCS_OK)
        return errorf(tribSystemError, "UCX: cannot connect to %s: %s", addr.str().c_str(),
                      ucs_status_string(s));
      auto link = std::make_unique<UcxLink>(this, h, st, addr.str());
      ucp_request_param_t fp{};
      ucs_status_ptr_t r = ucp_ep_flush_nbx(h, &fp);
      ucs_status_t fs = UCS_OK;
      if (UCS_PTR_IS_ERR(r)) {
        fs = UCS_PTR_STATUS(r);
      } else if (r != nullptr) {
        const auto attemptEnd = std::min(deadline, LinkClock::now() + std::chrono::milliseconds(attemptMs));
        while (ucp_request_check_status(r) == UCS_INPROGRESS && !st->failed && LinkClock::now() < attemptEnd)
          waitEvents(std::max(1, std::min(10, net::msLeft(attemptEnd))));
        fs = ucp_request_check_status(r);
        ucp_request_free(r);
      }
      if (fs == UCS_OK && !st->failed) {
        *out = std::move(link);
        return Status::Ok();
      }
      // Not connected: the link is cut (a graceful close would wait for a peer that is not there).
      st->fail(fs == UCS_INPROGRESS ? UCS_ERR_TIMED_OUT : fs);
      last = st->why;
      link.reset();
      std::this_thread::sleep_for(
          std::chrono::milliseconds(std::min(backoffMs, std::max(1, net::msLeft(deadline)))));
      backoffMs = std::min(backoffMs * 2, 100);
      attemptMs = std::min(attemptMs * 2, 8000);
    } while (LinkClock::now() < deadline);
    return errorf(tribTimeout, "cannot connect to %s over UCX: %s (is it up, and using UCX links?)",
                  addr.str().c_str(), last.c_str());
  }

  std::unique_ptr<Link> accept() override {
    while (!pending_.empty()) {
      ucp_conn_request_h r = pending_.front();
      pending_.pop_front();
      std::string peer = "?";
      ucp_conn_request_attr_t ca{};
      ca.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR;
      if (ucp_conn_request_query(r, &ca) == UCS_OK) peer = sockStr(ca.client_address);
      auto st = std::make_shared<UcxEpState>();
      ucp_ep_params_t ep{};
      ep.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
      ep.conn_request = r;
      ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
      ep.err_handler.cb = onEpError;
      ep.err_handler.arg = st.get();
      ucp_ep_h h = nullptr;
      if (ucp_ep_create(worker_, &ep, &h) != UCS_OK) continue;  // the client sees its connect fail
      return std::make_unique<UcxLink>(this, h, std::move(st), peer);
    }
    return nullptr;
  }

  // Whether to sleep on the hub's fd. Not after a progress that moved data: the bytes may now
  // wait in an endpoint's stream queue, which no longer wakes the fd, so its links are read first.
  bool preparePoll(std::vector<pollfd>* fds) override {
    progress();
    fds->push_back({efd_, POLLIN, 0});
    if (!pending_.empty() || std::exchange(progressed_, false)) return false;
    return ucp_worker_arm(worker_) == UCS_OK;  // BUSY: events arrived meanwhile
  }
  void progress() override {
    for (int i = 0; i < 1000 && ucp_worker_progress(worker_); ++i) progressed_ = true;
  }
  // Sleeps until the worker has events or `timeoutMs` pass; returns at once when a progress since
  // the last sleep moved data (the caller looks for it first, as preparePoll says).
  void waitEvents(int timeoutMs) {
    progress();
    if (std::exchange(progressed_, false)) return;
    if (ucp_worker_arm(worker_) == UCS_OK) {
      pollfd p{efd_, POLLIN, 0};
      (void)::poll(&p, 1, timeoutMs);
      progress();
    }
  }
  ucp_worker_h worker() const { return worker_; }
  // Error states of closed links whose close did not finish: callbacks may still reach them.
  std::vector<std::shared_ptr<UcxEpState>> graveyard;

 private:
  ucp_context_h ctx_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_listener_h listener_ = nullptr;
  int efd_ = -1;
  std::deque<ucp_conn_request_h> pending_;
  bool progressed_ = false;  // a progress moved something since the hub last slept
  std::string bound_;
};

// Progresses the worker until `r` completes or `ms` pass; whether it completed.
bool completeWithin(ucp_worker_h w, ucs_status_ptr_t r, int ms) {
  auto deadline = LinkClock::now() + std::chrono::milliseconds(ms);
  while (ucp_request_check_status(r) == UCS_INPROGRESS && LinkClock::now() < deadline) {
    if (!ucp_worker_progress(w)) std::this_thread::yield();
  }
  return ucp_request_check_status(r) != UCS_INPROGRESS;
}

UcxLink::~UcxLink() {
  if (rdata_) ucp_stream_data_release(ep_, rdata_);
  ucp_worker_h w = hub_->worker();
  // A healthy link first delivers what it sent (e.g. the reason of a disconnect), bounded; one
  // that is broken, or whose sends do not drain (a peer that never answered: the wrong link kind),
  // is cut: sends left pending at a graceful close would abort UCX when the worker goes.
  bool drained = !st_->failed && st_->inFlight == 0;
  ucs_status_ptr_t flush = nullptr;
  if (!st_->failed && !drained) {
    ucp_request_param_t fp{};
    flush = ucp_ep_flush_nbx(ep_, &fp);
    if (flush == nullptr) {
      drained = true;
    } else if (!UCS_PTR_IS_ERR(flush)) {
      drained = completeWithin(w, flush, 200) && !st_->failed;
    } else {
      flush = nullptr;
    }
  }
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = drained ? 0 : UCP_EP_CLOSE_FLAG_FORCE;
  ucs_status_ptr_t r = ucp_ep_close_nbx(ep_, &p);
  if (r != nullptr && !UCS_PTR_IS_ERR(r)) {
    if (!completeWithin(w, r, 200)) hub_->graveyard.push_back(st_);
    ucp_request_free(r);
  }
  if (flush) ucp_request_free(flush);
}

Status UcxLink::send(const void* data, size_t n, size_t* sent) {
  *sent = 0;
  if (st_->failed) return broken();
  if (st_->inFlight >= kMaxInFlight) {
    hub_->progress();
    return Status::Ok();
  }
  auto* rec = new SendRec{
      std::vector<uint8_t>(static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + n), st_};
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.cb.send = onSendDone;
  p.user_data = rec;
  ucs_status_ptr_t r = ucp_stream_send_nbx(ep_, rec->bytes.data(), n, &p);
  if (r == nullptr) {
    delete rec;  // completed at once: no callback
  } else if (UCS_PTR_IS_ERR(r)) {
    delete rec;
    st_->fail(UCS_PTR_STATUS(r));
    return broken();
  } else {
    st_->inFlight += n;
  }
  *sent = n;
  return Status::Ok();
}

Status UcxLink::recv(void* data, size_t n, size_t* got) {
  *got = 0;
  if (!rdata_) {
    hub_->progress();
    size_t len = 0;
    ucs_status_ptr_t d = ucp_stream_recv_data_nb(ep_, &len);
    if (d == nullptr) return st_->failed ? broken() : Status::Ok();
    if (UCS_PTR_IS_ERR(d)) {
      st_->fail(UCS_PTR_STATUS(d));
      return broken();
    }
    rdata_ = d;
    rlen_ = len;
    roff_ = 0;
  }
  const size_t k = std::min(n, rlen_ - roff_);
  std::memcpy(data, static_cast<const uint8_t*>(rdata_) + roff_, k);
  roff_ += k;
  if (roff_ == rlen_) {
    ucp_stream_data_release(ep_, rdata_);
    rdata_ = nullptr;
  }
  *got = k;
  return Status::Ok();
}

void UcxLink::wait(int timeoutMs) {
  if (!rdata_ && !st_->failed) hub_->waitEvents(timeoutMs);
}

}  // namespace
#endif  // TRIB_HAVE_UCX

Status LinkHub::create(LinkKind kind, std::unique_ptr<LinkHub>* out) {
  if (kind == LinkKind::Tcp) {
    out->reset(new TcpHub());
    return Status::Ok();
  }
#ifdef TRIB_HAVE_UCX
  auto h = std::make_unique<UcxHub>();
  TRIB_RETURN_IF_ERROR(h->init());
  *out = std::move(h);
  return Status::Ok();
#else
  return errorf(
      tribNotSupported,
      "switch links over UCX need a build with UCX: install libucx-dev and rebuild (or use tcp links)");
#endif
}

}  // namespace trib::sw
