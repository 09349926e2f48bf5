// TCP store: one server thread multiplexes every connection with poll(); waits that cannot be
// answered yet are parked and answered when their last key arrives (or their deadline passes).
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <map>
#include <unordered_map>

#include "bootstrap/store.hpp"
#include "bootstrap/store_handshake.hpp"
#include "common/log.hpp"

namespace trib {

using namespace storeproto;
using net::Clock;

namespace {

std::string decimal(int64_t v) { return std::to_string(v); }

bool parseDecimal(const Blob& b, int64_t* v) {
  std::string s(b.begin(), b.end());
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long long x = std::strtoll(s.c_str(), &end, 10);
  if (*end != '\0' || errno) return false;
  *v = x;
  return true;
}

}  // namespace

struct TcpStoreServer::Impl {
  struct Conn {
    int fd = -1;
    uint64_t id = 0;
    std::string peer;
    enum class Auth : uint8_t { Hello, Proof, Done } auth = Auth::Hello;  // handshake stage
    bool authed() const { return auth == Auth::Done; }
    auth::Nonce clientNonce{}, serverNonce{};
    bool parked = false;      // a wait is pending: stop parsing further requests until answered
    bool closeAfter = false;  // close once the output buffer drains (refused HELLO)
    Clock::time_point helloDeadline;
    std::vector<uint8_t> in;
    // Replies not yet sent, in order; a range wait's reply is one buffer shared by its waiters.
    std::deque<std::shared_ptr<const std::vector<uint8_t>>> out;
    size_t outOff = 0;  // into out.front()
  };
  struct Waiter {
    uint64_t conn;
    std::vector<std::string> keys;
    bool values;
    size_t missing;
    Clock::time_point deadline;
    std::string range;  // a range wait's (keys empty): its entry in `ranges`
  };
  // Every range wait with the same (prefix, first, count, values) shares one entry: its missing
  // count is kept up as keys come and go (no lookups per waiter), and its reply is built once.
  struct Range {
    std::string prefix;
    uint32_t first = 0, count = 0;
    bool values = false;
    size_t missing = 0;
    std::vector<uint64_t> waiters;                      // parked
    std::shared_ptr<const std::vector<uint8_t>> reply;  // framed, while every key is unchanged
  };

  StoreServerOptions opt;
  int listenFd = -1;
  int wakePipe[2] = {-1, -1};
  std::atomic<bool> stopping{false};
  int port = 0;
  std::thread thread;    // in Impl so that a fork()ed child can abandon both without touching either
  clockid_t cpuClock{};  // the thread's CPU clock (stats), set once at start
  bool cpuClockValid = false;

  // fork() pauses the thread at the top of its loop (see forkPrepare).
  std::mutex pauseMu;
  std::condition_variable pauseCv;
  bool pauseWanted = false, paused = false;
  void pauseIfAsked();

  std::unordered_map<uint64_t, Conn> conns;
  uint64_t nextConn = 1;
  std::unordered_map<std::string, Blob> data;
  std::map<uint64_t, Waiter> waiters;  // by id
  uint64_t nextWaiter = 1;
  std::unordered_map<std::string, std::vector<uint64_t>> watchers;  // missing key -> waiter ids
  std::unordered_map<std::string, Range> ranges;                    // by rangeId()
  std::unordered_map<std::string, std::vector<std::string>> rangesByPrefix;

  mutable std::mutex statsMu;
  StoreServerStats stats;

  void run();
  void acceptAll();
  bool readConn(Conn& c);         // false: close it
  bool parse(Conn& c);            // handle buffered complete messages; false: close it
  std::vector<uint64_t> reparse;  // connections unparked since their last parse
  bool handle(Conn& c, const uint8_t* body, size_t n);
  bool handshake(Conn& c, const uint8_t* body, size_t n);  // the messages before authentication
  size_t messageLimit(const Conn& c) const {
    return c.authed() ? opt.maxMessageBytes : std::min(opt.maxMessageBytes, kMaxHandshakeBytes);
  }
  void reply(Conn& c, uint8_t code, const net::Writer& payload);
  void send(Conn& c, std::shared_ptr<const std::vector<uint8_t>> framed);  // counts it
  void replyMsg(Conn& c, uint8_t code, const std::string& msg) {
    net::Writer w;
    w.str(msg);
    reply(c, code, w);
  }
  void keyArrived(const std::string& key);
  // `key` arrived (delta -1), was removed (+1) or changed (0): the ranges holding it follow.
  void rangeKeyChanged(const std::string& key, int delta);
  void waitRange(Conn& c, Request& q);
  void dropRangeWaiter(const Waiter& w, uint64_t id);
  void forgetRange(const std::string& id);
  void finishWaiter(uint64_t id, bool timedOut);
  void closeConn(uint64_t id);
  bool flush(Conn& c);
  void bump(uint64_t StoreServerStats::*field, uint64_t n = 1) {
    std::lock_guard<std::mutex> l(statsMu);
    stats.*field += n;
  }
};

namespace {

// The serving threads of this process. fork() waits until each is parked at the top of its loop,
// holding nothing: a thread caught inside malloc/mmap at the fork leaves its locks held forever in
// the child, and libucm (UCX, hooked into mmap when the library loads) guards every mmap with a
// process-wide rwlock that the child's ucp_init then waits on for writing: a hang, not an error.
struct LiveServers {
  std::mutex mu;
  std::vector<TcpStoreServer::Impl*> list;
};
LiveServers& live() {
  static auto* l = new LiveServers;  // never destroyed: fork may run during exit
  return *l;
}

void forkPrepare() {
  LiveServers& l = live();
  l.mu.lock();  // held across the fork: no server starts or stops meanwhile
  for (TcpStoreServer::Impl* s : l.list) {
    std::lock_guard<std::mutex> g(s->pauseMu);
    s->pauseWanted = true;
    char c = 1;
    (void)!write(s->wakePipe[1], &c, 1);
  }
  for (TcpStoreServer::Impl* s : l.list) {
    std::unique_lock<std::mutex> g(s->pauseMu);
    // Bounded: a thread that cannot park in time only risks the hang this avoids.
    s->pauseCv.wait_for(g, std::chrono::seconds(2), [&] { return s->paused; });
  }
}

void forkParent() {
  LiveServers& l = live();
  for (TcpStoreServer::Impl* s : l.list) {
    std::lock_guard<std::mutex> g(s->pauseMu);
    s->pauseWanted = false;
    s->pauseCv.notify_all();
  }
  l.mu.unlock();
}

void forkChild() {
  LiveServers& l = live();
  l.list.clear();  // their threads stayed in the parent
  l.mu.unlock();
}

}  // namespace

void TcpStoreServer::Impl::pauseIfAsked() {
  std::unique_lock<std::mutex> g(pauseMu);
  if (!pauseWanted) return;
  paused = true;
  pauseCv.notify_all();
  pauseCv.wait(g, [&] { return !pauseWanted; });
  paused = false;
}

Status TcpStoreServer::start(const StoreServerOptions& options, std::unique_ptr<TcpStoreServer>* out) {
  if (options.authKey.empty())
    return errorf(tribInvalidArgument, "store server needs a non-empty job key (set TRIB_AUTH_KEY)");
  if (options.maxMessageBytes < 64)
    return errorf(tribInvalidArgument, "store maxMessageBytes %zu is too small", options.maxMessageBytes);
  net::SockAddr addr, bound;
  TRIB_RETURN_IF_ERROR(net::parseHostPort(options.listen, &addr));
  std::unique_ptr<TcpStoreServer> s(new TcpStoreServer());
  s->impl_ = std::make_unique<Impl>();
  Impl& im = *s->impl_;
  im.opt = options;
  TRIB_RETURN_IF_ERROR(net::listenOn(addr, &im.listenFd, &bound));
  if (pipe2(im.wakePipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    close(im.listenFd);
    return errorf(tribSystemError, "pipe2: %s", strerror(errno));
  }
  s->address_ = bound.str();
  im.port = bound.ss.ss_family == AF_INET ? ntohs(reinterpret_cast<sockaddr_in*>(&bound.ss)->sin_port)
                                          : ntohs(reinterpret_cast<sockaddr_in6*>(&bound.ss)->sin6_port);
  static std::once_flag atfork;
  std::call_once(atfork, [] { pthread_atfork(forkPrepare, forkParent, forkChild); });
  s->ownerPid_ = static_cast<int>(getpid());
  {
    std::lock_guard<std::mutex> l(live().mu);
    im.thread = std::thread([p = &im] { p->run(); });
    im.cpuClockValid = pthread_getcpuclockid(im.thread.native_handle(), &im.cpuClock) == 0;
    live().list.push_back(&im);
  }
  TRIB_INFO("bootstrap", "store server listening on %s", s->address_.c_str());
  *out = std::move(s);
  return Status::Ok();
}

TcpStoreServer::~TcpStoreServer() {
  stop();
  if (impl_ && !ownedHere()) {
    // A fork()ed child's copy: its std::thread names a thread of the parent (destroying it
    // would terminate), and the maps may be mid-update by that thread at the fork. Never touch
    // them; keep the block reachable so leak checkers do not count it.
    static std::vector<Impl*>* abandoned = new std::vector<Impl*>;
    abandoned->push_back(impl_.release());
  }
}

bool TcpStoreServer::ownedHere() const { return static_cast<int>(getpid()) == ownerPid_; }

int TcpStoreServer::port() const { return impl_->port; }

StoreServerStats TcpStoreServer::stats() const {
  StoreServerStats s;
  {
    std::lock_guard<std::mutex> l(impl_->statsMu);
    s = impl_->stats;
  }
  timespec ts{};  // the thread's clock fails once it has exited: then 0
  if (ownedHere() && impl_->cpuClockValid && clock_gettime(impl_->cpuClock, &ts) == 0)
    s.cpuSeconds = static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
  return s;
}

void TcpStoreServer::stop() {
  if (!impl_) return;
  if (ownedHere()) {
    // Out of fork's list before the thread leaves its loop, so fork never waits for it.
    std::lock_guard<std::mutex> l(live().mu);
    auto& v = live().list;
    v.erase(std::remove(v.begin(), v.end(), impl_.get()), v.end());
  }
  if (impl_->stopping.exchange(true)) return;
  if (ownedHere()) {
    char c = 1;
    (void)!write(impl_->wakePipe[1], &c, 1);
    if (impl_->thread.joinable()) impl_->thread.join();
    for (auto& [id, c2] : impl_->conns) close(c2.fd);
    impl_->conns.clear();
  }
  // In a fork()ed child these are copies of the parent's descriptors (set before the thread
  // started, so intact): closing them leaves the parent's server running. The connections are
  // the parent thread's state and are left alone.
  close(impl_->listenFd);
  close(impl_->wakePipe[0]);
  close(impl_->wakePipe[1]);
}

void TcpStoreServer::Impl::run() {
  std::vector<pollfd> fds;
  std::vector<uint64_t> ids;
  while (!stopping.load()) {
    pauseIfAsked();
    fds.clear();
    ids.clear();
    fds.push_back({wakePipe[0], POLLIN, 0});
    fds.push_back({listenFd, POLLIN, 0});
    auto now = Clock::now();
    Clock::time_point next = now + std::chrono::seconds(1);
    for (auto& [id, c] : conns) {
      short ev = 0;
      if (!c.parked && !c.closeAfter) ev |= POLLIN;
      if (!c.out.empty()) ev |= POLLOUT;
      fds.push_back({c.fd, ev, 0});
      ids.push_back(id);
      if (!c.authed()) next = std::min(next, c.helloDeadline);
    }
    for (auto& [id, w] : waiters) next = std::min(next, w.deadline);
    int timeout = net::msLeft(next);
    int rc = poll(fds.data(), fds.size(), timeout);
    if (rc < 0 && errno != EINTR) {
      TRIB_WARN("bootstrap", "store server poll: %s", strerror(errno));
      continue;
    }
    if (fds[0].revents & POLLIN) {
      char buf[64];
      while (read(wakePipe[0], buf, sizeof buf) > 0) {
      }
    }
    if (fds[1].revents & POLLIN) acceptAll();
    for (size_t i = 2; i < fds.size(); ++i) {
      auto it = conns.find(ids[i - 2]);
      if (it == conns.end()) continue;
      Conn& c = it->second;
      bool keep = true;
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) keep = readConn(c);
      if (keep && (fds[i].revents & POLLOUT)) keep = flush(c);
      if (!keep) closeConn(ids[i - 2]);
    }
    while (!reparse.empty()) {
      uint64_t id = reparse.back();
      reparse.pop_back();
      auto it = conns.find(id);
      if (it != conns.end() && !(parse(it->second) && flush(it->second))) closeConn(id);
    }
    now = Clock::now();
    // Expired waits answer with a timeout; unauthenticated connections past their deadline are dropped.
    std::vector<uint64_t> expired;
    for (auto& [id, w] : waiters)
      if (w.deadline <= now) expired.push_back(id);
    for (uint64_t id : expired) finishWaiter(id, true);
    std::vector<uint64_t> slow;
    for (auto& [id, c] : conns)
      if (!c.authed() && !c.closeAfter && c.helloDeadline <= now) slow.push_back(id);
    for (uint64_t id : slow) {
      TRIB_WARN("bootstrap", "store: connection from %s did not prove the job key within %d ms; closed",
                conns[id].peer.c_str(), opt.helloTimeoutMs);
      bump(&StoreServerStats::refused);
      closeConn(id);
    }
  }
}

void TcpStoreServer::Impl::acceptAll() {
  for (;;) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    int fd = accept4(listenFd, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        TRIB_WARN("bootstrap", "store accept: %s", strerror(errno));
      return;
    }
    net::SockAddr peer;
    peer.ss = ss;
    peer.len = len;
    if (static_cast<int>(conns.size()) >= opt.maxConnections) {
      TRIB_WARN("bootstrap", "store: refusing connection from %s: %d connections open (the limit)",
                peer.str().c_str(), opt.maxConnections);
      bump(&StoreServerStats::refused);
      close(fd);
      continue;
    }
    Conn c;
    c.fd = fd;
    c.id = nextConn++;
    c.peer = peer.str();
    c.helloDeadline = Clock::now() + std::chrono::milliseconds(opt.helloTimeoutMs);
    conns.emplace(c.id, std::move(c));
    bump(&StoreServerStats::connections);
  }
}

bool TcpStoreServer::Impl::readConn(Conn& c) {
  uint8_t buf[65536];
  for (;;) {
    ssize_t r = recv(c.fd, buf, sizeof buf, 0);
    if (r == 0) return false;  // peer closed
    if (r < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      if (errno == EINTR) continue;
      return false;
    }
    c.in.insert(c.in.end(), buf, buf + r);
    if (!parse(c)) return false;
    // Bound the buffered input of a parked connection: one maximal message plus its header.
    if (c.parked || c.closeAfter) {
      if (c.in.size() > messageLimit(c) + 4) {
        TRIB_WARN("bootstrap", "store: connection from %s pipelines too much while waiting; closed",
                  c.peer.c_str());
        bump(&StoreServerStats::malformed);
        return false;
      }
      break;
    }
  }
  return flush(c);
}

bool TcpStoreServer::Impl::parse(Conn& c) {
  // Parse complete messages; stop while a wait is parked so replies stay in request order.
  size_t off = 0;
  bool keep = true;
  while (!c.parked && !c.closeAfter && c.in.size() - off >= 4) {
    uint32_t len;
    std::memcpy(&len, c.in.data() + off, 4);
    if (!frameLengthOk(len, messageLimit(c))) {
      TRIB_WARN("bootstrap", "store: connection from %s sent a %u-byte message (limit %zu%s); closed",
                c.peer.c_str(), len, messageLimit(c), c.authed() ? "" : " before authenticating");
      bump(&StoreServerStats::malformed);
      keep = false;
      break;
    }
    if (c.in.size() - off - 4 < len) break;
    bump(&StoreServerStats::messagesIn);
    bump(&StoreServerStats::bytesIn, 4 + len);
    if (!handle(c, c.in.data() + off + 4, len)) {
      keep = false;
      break;
    }
    off += 4 + len;
  }
  c.in.erase(c.in.begin(), c.in.begin() + static_cast<long>(off));
  return keep;
}

bool TcpStoreServer::Impl::handshake(Conn& c, const uint8_t* body, size_t n) {
  auto refuse = [&](const char* why, const std::string& told) {
    TRIB_WARN("bootstrap", "store: connection from %s %s; refused", c.peer.c_str(), why);
    replyMsg(c, kError, told);
    c.closeAfter = true;
    bump(&StoreServerStats::refused);
    return true;
  };
  if (c.auth == Conn::Auth::Hello) {
    HelloMsg hello;
    if (!decodeHello(body, n, &hello)) {
      TRIB_WARN("bootstrap", "store: connection from %s did not start with a handshake (op %u); refused",
                c.peer.c_str(), n ? body[0] : 0u);
      bump(&StoreServerStats::refused);
      return false;
    }
    if (hello.version != kVersion)
      return refuse(strprintf("speaks store protocol %u, this server %u", hello.version, kVersion).c_str(),
                    strprintf("store protocol version %u, client sent %u (mixed Tributary versions: run the "
                              "same release on every rank and trib-store)",
                              kVersion, hello.version));
    if (!auth::freshNonce(&c.serverNonce).ok())
      return refuse("could not be challenged (no random source)", "the store has no random source");
    c.clientNonce = hello.client;
    c.auth = Conn::Auth::Proof;
    net::Writer w;
    w.raw(c.serverNonce.data(), c.serverNonce.size());
    reply(c, kOk, w);
    return true;
  }
  auth::Proof got{}, mine{};
  if (!decodeAuth(body, n, &got)) {
    TRIB_WARN("bootstrap", "store: connection from %s did not answer the challenge (op %u); refused",
              c.peer.c_str(), n ? body[0] : 0u);
    bump(&StoreServerStats::refused);
    return false;
  }
  if (!auth::verifyProof(opt.authKey, kClientContext, c.clientNonce, c.serverNonce, got))
    return refuse("answered the challenge with a wrong job key",
                  "wrong job key: the answer to the store's challenge was not made with this job's key "
                  "(check TRIB_AUTH_KEY or the unique id)");
  if (!auth::makeProof(opt.authKey, kServerContext, c.clientNonce, c.serverNonce, &mine).ok())
    return refuse("could not be answered (HMAC failed)", "the store could not compute its proof");
  c.auth = Conn::Auth::Done;
  net::Writer w;
  w.raw(mine.data(), mine.size());
  reply(c, kOk, w);
  return true;
}

bool TcpStoreServer::Impl::handle(Conn& c, const uint8_t* body, size_t n) {
  net::Reader r(body, n);
  uint8_t op = 0;
  r.u8(&op);
  if (!c.authed()) return handshake(c, body, n);
  Request q;
  switch (decodeRequest(body, n, &q) ? q.op : 0) {
    case kSet: {
      bool isNew = data.find(q.key) == data.end();
      data[q.key] = std::move(q.value);
      reply(c, kOk, net::Writer());
      if (isNew) keyArrived(q.key);
      rangeKeyChanged(q.key, isNew ? -1 : 0);
      return true;
    }
    case kAdd: {
      int64_t v = 0;
      auto it = data.find(q.key);
      bool isNew = it == data.end();
      if (!isNew && !parseDecimal(it->second, &v)) {
        replyMsg(c, kError, strprintf("add: key '%s' holds a non-integer value", q.key.c_str()));
        return true;
      }
      v += static_cast<int64_t>(q.delta);
      std::string s = decimal(v);
      data[q.key] = Blob(s.begin(), s.end());
      net::Writer w;
      w.u64(static_cast<uint64_t>(v));
      reply(c, kOk, w);
      if (isNew) keyArrived(q.key);
      rangeKeyChanged(q.key, isNew ? -1 : 0);
      return true;
    }
    case kWaitRange:
      waitRange(c, q);
      return true;
    case kWait: {
      Waiter w{c.id, std::move(q.keys), q.values, 0, Clock::now() + std::chrono::milliseconds(q.timeoutMs),
               {}};
      uint64_t id = nextWaiter++;
      for (auto& k : w.keys)
        if (data.find(k) == data.end()) {
          ++w.missing;
          watchers[k].push_back(id);
        }
      bool ready = w.missing == 0;
      waiters.emplace(id, std::move(w));
      c.parked = true;
      if (ready) finishWaiter(id, false);
      return true;
    }
    case kRemove: {
      const bool existed = data.erase(q.key) > 0;
      net::Writer w;
      w.u8(existed ? 1 : 0);
      reply(c, kOk, w);
      if (existed) rangeKeyChanged(q.key, +1);
      return true;
    }
    default:
      break;
  }
  TRIB_WARN("bootstrap", "store: malformed message (op %u, %zu bytes) from %s; connection closed", op, n,
            c.peer.c_str());
  bump(&StoreServerStats::malformed);
  return false;
}

namespace {

std::vector<uint8_t> framedReply(uint8_t code, const net::Writer& payload) {
  const uint32_t len = static_cast<uint32_t>(1 + payload.data().size());
  std::vector<uint8_t> out(4 + len);
  std::memcpy(out.data(), &len, 4);
  out[4] = code;
  if (!payload.data().empty()) std::memcpy(out.data() + 5, payload.data().data(), payload.data().size());
  return out;
}

// The entry of `ranges` that a range wait belongs to.
std::string rangeId(const Request& q) {
  return q.key + '\0' + std::to_string(q.first) + '/' + std::to_string(q.count) + (q.values ? "/v" : "/-");
}

// A key as (prefix, index) when it ends in a canonical decimal index (no leading zero), the only
// way a range can hold it (range prefixes never end in a digit).
bool splitRangeKey(const std::string& key, std::string* prefix, uint64_t* index) {
  size_t j = key.size();
  while (j > 0 && key[j - 1] >= '0' && key[j - 1] <= '9') --j;
  const size_t digits = key.size() - j;
  if (digits == 0 || digits > 10 || (digits > 1 && key[j] == '0')) return false;
  *index = std::stoull(key.substr(j));
  *prefix = key.substr(0, j);
  return true;
}

}  // namespace

void TcpStoreServer::Impl::reply(Conn& c, uint8_t code, const net::Writer& payload) {
  send(c, std::make_shared<const std::vector<uint8_t>>(framedReply(code, payload)));
}

void TcpStoreServer::Impl::send(Conn& c, std::shared_ptr<const std::vector<uint8_t>> framed) {
  bump(&StoreServerStats::messagesOut);
  bump(&StoreServerStats::bytesOut, framed->size());
  c.out.push_back(std::move(framed));
}

void TcpStoreServer::Impl::waitRange(Conn& c, Request& q) {
  const std::string id = rangeId(q);
  auto [it, fresh] = ranges.try_emplace(id);
  Range& g = it->second;
  if (fresh) {  // the only scan of its keys while it lives
    g.prefix = q.key;
    g.first = q.first;
    g.count = q.count;
    g.values = q.values;
    for (uint64_t i = 0; i < q.count; ++i)
      g.missing += data.count(rangeKey(q.key, uint64_t{q.first} + i)) == 0;
    rangesByPrefix[q.key].push_back(id);
  }
  const uint64_t wid = nextWaiter++;
  waiters.emplace(wid,
                  Waiter{c.id, {}, q.values, 0, Clock::now() + std::chrono::milliseconds(q.timeoutMs), id});
  c.parked = true;
  if (g.missing == 0) {
    finishWaiter(wid, false);
  } else {
    g.waiters.push_back(wid);
  }
}

void TcpStoreServer::Impl::rangeKeyChanged(const std::string& key, int delta) {
  if (ranges.empty()) return;
  std::string prefix;
  uint64_t index = 0;
  if (!splitRangeKey(key, &prefix, &index)) return;
  auto pit = rangesByPrefix.find(prefix);
  if (pit == rangesByPrefix.end()) return;
  std::vector<std::string> complete, unused;
  for (const std::string& id : pit->second) {
    Range& g = ranges.at(id);
    if (index < g.first || index - g.first >= g.count) continue;
    g.reply.reset();
    g.missing = static_cast<size_t>(static_cast<int64_t>(g.missing) + delta);
    if (g.missing == 0 && !g.waiters.empty()) complete.push_back(id);
    if (g.missing > 0 && g.waiters.empty()) unused.push_back(id);  // nobody waits, nothing cached
  }
  for (const std::string& id : complete) {
    std::vector<uint64_t> ids = std::move(ranges.at(id).waiters);
    ranges.at(id).waiters.clear();
    for (uint64_t w : ids) finishWaiter(w, false);
  }
  for (const std::string& id : unused) forgetRange(id);
}

void TcpStoreServer::Impl::forgetRange(const std::string& id) {
  auto it = ranges.find(id);
  if (it == ranges.end()) return;
  auto pit = rangesByPrefix.find(it->second.prefix);
  if (pit != rangesByPrefix.end()) {
    std::erase(pit->second, id);
    if (pit->second.empty()) rangesByPrefix.erase(pit);
  }
  ranges.erase(it);
}

// A range waiter that leaves without its reply (timed out, or its connection closed).
void TcpStoreServer::Impl::dropRangeWaiter(const Waiter& w, uint64_t id) {
  auto it = ranges.find(w.range);
  if (it == ranges.end()) return;
  Range& g = it->second;
  std::erase(g.waiters, id);
  if (g.waiters.empty() && g.missing > 0) forgetRange(w.range);  // nothing cached to keep
}

void TcpStoreServer::Impl::keyArrived(const std::string& key) {
  auto it = watchers.find(key);
  if (it == watchers.end()) return;
  std::vector<uint64_t> ids = std::move(it->second);
  watchers.erase(it);
  for (uint64_t id : ids) {
    auto w = waiters.find(id);
    if (w == waiters.end()) continue;
    if (--w->second.missing == 0) finishWaiter(id, false);
  }
}

namespace {

std::string timeoutMessage(const std::vector<std::string>& firstMissing, size_t missing, size_t total) {
  std::string list;
  for (size_t i = 0; i < firstMissing.size(); ++i) list += (i ? ", '" : "'") + firstMissing[i] + "'";
  if (missing > firstMissing.size()) list += strprintf(" and %zu more", missing - firstMissing.size());
  return strprintf("%zu of %zu keys still missing: %s", missing, total, list.c_str());
}

}  // namespace

void TcpStoreServer::Impl::finishWaiter(uint64_t id, bool timedOut) {
  auto wit = waiters.find(id);
  if (wit == waiters.end()) return;
  Waiter& w = wit->second;
  auto cit = conns.find(w.conn);
  if (cit == conns.end()) {
    waiters.erase(wit);
    return;
  }
  Conn& c = cit->second;
  if (!w.range.empty()) {
    Range& g = ranges.at(w.range);
    if (g.missing > 0) {  // only a timeout finishes an incomplete range
      std::vector<std::string> first;
      for (uint64_t i = 0; i < g.count && first.size() < 4; ++i) {
        std::string k = rangeKey(g.prefix, uint64_t{g.first} + i);
        if (data.find(k) == data.end()) first.push_back(std::move(k));
      }
      replyMsg(c, kTimeoutReply, timeoutMessage(first, g.missing, g.count));
      dropRangeWaiter(w, id);
    } else {
      if (!g.reply) {  // built once, sent to every waiter until one of its keys changes
        net::Writer out;
        if (g.values) {
          out.u32(g.count);
          for (uint64_t i = 0; i < g.count; ++i) {
            const Blob& v = data[rangeKey(g.prefix, uint64_t{g.first} + i)];
            out.bytes(v.data(), v.size());
          }
        }
        g.reply = std::make_shared<const std::vector<uint8_t>>(framedReply(kOk, out));
        bump(&StoreServerStats::rangeRepliesBuilt);
      }
      send(c, g.reply);
    }
  } else {
    std::vector<std::string> missing;
    for (auto& k : w.keys)
      if (data.find(k) == data.end()) missing.push_back(k);
    if (!missing.empty() && !timedOut) {
      // A key was removed after it arrived: keep waiting for it.
      w.missing = missing.size();
      for (auto& k : missing) watchers[k].push_back(id);
      return;
    }
    if (!missing.empty()) {
      const size_t count = missing.size();
      missing.resize(std::min<size_t>(count, 4));
      replyMsg(c, kTimeoutReply, timeoutMessage(missing, count, w.keys.size()));
    } else {
      net::Writer out;
      if (w.values) {
        out.u32(static_cast<uint32_t>(w.keys.size()));
        for (auto& k : w.keys) {
          const Blob& v = data[k];
          out.bytes(v.data(), v.size());
        }
      }
      reply(c, kOk, out);
    }
  }
  waiters.erase(wit);
  c.parked = false;
  // Requests that arrived while parked are parsed by the run loop (never recursively here).
  reparse.push_back(c.id);
}

bool TcpStoreServer::Impl::flush(Conn& c) {
  while (!c.out.empty()) {
    const std::vector<uint8_t>& b = *c.out.front();
    ssize_t w = ::send(c.fd, b.data() + c.outOff, b.size() - c.outOff, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      if (errno == EINTR) continue;
      return false;
    }
    c.outOff += static_cast<size_t>(w);
    if (c.outOff == b.size()) {
      c.out.pop_front();
      c.outOff = 0;
    }
  }
  return !c.closeAfter;
}

void TcpStoreServer::Impl::closeConn(uint64_t id) {
  auto it = conns.find(id);
  if (it == conns.end()) return;
  close(it->second.fd);
  conns.erase(it);
  // Its parked waits die with it (watchers lists skip ids no longer in waiters; ranges forget them).
  for (auto w = waiters.begin(); w != waiters.end();) {
    if (w->second.conn != id) {
      ++w;
      continue;
    }
    if (!w->second.range.empty()) dropRangeWaiter(w->second, w->first);
    w = waiters.erase(w);
  }
}

// ---------------------------------------------------------------------------------------------
// Client

Status TcpStore::connect(const std::string& hostPort, const std::string& authKey, int timeoutMs,
                         std::unique_ptr<TcpStore>* out, size_t maxMessageBytes,
                         const std::atomic<bool>* cancelled) {
  if (timeoutMs < 0)
    return errorf(tribInvalidArgument, "store connect timeout %d ms must be >= 0", timeoutMs);
  net::SockAddr addr;
  TRIB_RETURN_IF_ERROR(net::parseHostPort(hostPort, &addr));
  auto deadline = net::deadlineAfter(timeoutMs);
  std::unique_ptr<TcpStore> s(new TcpStore());
  s->addr_ = addr.str();
  s->maxMessage_ = maxMessageBytes;
  s->ioTimeoutMs_ = std::max(timeoutMs, 1000);
  TRIB_RETURN_IF_ERROR(net::connectTo(addr, deadline, &s->fd_, cancelled));
  TRIB_RETURN_IF_ERROR(s->authenticate(authKey));
  *out = std::move(s);
  return Status::Ok();
}

Status TcpStore::authenticate(const std::string& authKey) {
  const std::string where = "store at " + addr_;
  auth::Nonce mine{}, theirs{};
  auth::Proof proof{};
  TRIB_RETURN_IF_ERROR(auth::freshNonce(&mine));
  std::vector<uint8_t> reply;
  Status st = call(encodeHello(mine), 0, &reply);
  if (!st.ok()) return st.prefix(where + " refused this client: ");
  if (!decodeChallenge(reply.data(), reply.size(), &theirs))
    return dropWith(errorf(tribRemoteError,
                           "%s sent a malformed challenge (%zu bytes; not a Tributary store?)", where.c_str(),
                           reply.size()));
  TRIB_RETURN_IF_ERROR(auth::makeProof(authKey, kClientContext, mine, theirs, &proof));
  st = call(encodeAuth(proof), 0, &reply);
  if (!st.ok()) return st.prefix(where + " refused this client: ");
  if (!decodeAccept(reply.data(), reply.size(), &proof) ||
      !auth::verifyProof(authKey, kServerContext, mine, theirs, proof))
    return dropWith(errorf(tribRemoteError,
                           "%s did not prove it holds the job key: it serves another job, or is not the "
                           "job's store (check TRIB_STORE and TRIB_AUTH_KEY); nothing was stored there",
                           where.c_str()));
  return Status::Ok();
}

Status TcpStore::dropWith(const Status& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  return why;
}

TcpStore::~TcpStore() {
  if (fd_ >= 0) close(fd_);
}

Status TcpStore::call(const net::Writer& req, int waitMs, std::vector<uint8_t>* reply) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ < 0) return errorf(tribRemoteError, "connection to store at %s was lost earlier", addr_.c_str());
  // The server enforces waitMs; the client allows a grace period on top before giving up.
  auto deadline = net::deadlineAfter(waitMs + ioTimeoutMs_);
  std::vector<uint8_t> framed = req.frame();
  if (framed.size() - 4 > maxMessage_)
    return errorf(tribInvalidArgument, "store request of %zu bytes exceeds the %zu-byte message limit",
                  framed.size() - 4, maxMessage_);
  Status st = net::sendAll(fd_, framed.data(), framed.size(), deadline);
  uint32_t len = 0;
  if (st.ok()) st = net::recvAll(fd_, &len, 4, deadline);
  if (st.ok() && !frameLengthOk(len, maxMessage_))
    st = errorf(tribRemoteError, "store sent a malformed reply (%u bytes)", len);
  if (st.ok()) {
    reply->resize(len);
    st = net::recvAll(fd_, reply->data(), len, deadline);
  }
  if (!st.ok()) {
    // The stream is out of step after a partial exchange: drop the connection.
    close(fd_);
    fd_ = -1;
    return st.prefix(strprintf("store at %s: ", addr_.c_str()));
  }
  return decodeReply(reply, addr_);
}

Status TcpStore::set(const std::string& key, const Blob& value) {
  net::Writer w;
  w.u8(kSet);
  w.str(key);
  w.bytes(value.data(), value.size());
  std::vector<uint8_t> reply;
  return call(w, 0, &reply);
}

Status TcpStore::add(const std::string& key, int64_t delta, int64_t* result) {
  net::Writer w;
  w.u8(kAdd);
  w.str(key);
  w.u64(static_cast<uint64_t>(delta));
  std::vector<uint8_t> reply;
  TRIB_RETURN_IF_ERROR(call(w, 0, &reply));
  uint64_t v = 0;
  net::Reader r(reply.data(), reply.size());
  if (!r.u64(&v)) return errorf(tribRemoteError, "store at %s: malformed add reply", addr_.c_str());
  if (result) *result = static_cast<int64_t>(v);
  return Status::Ok();
}

Status TcpStore::waitImpl(const std::vector<std::string>& keys, int timeoutMs, bool values,
                          std::vector<Blob>* out) {
  if (timeoutMs < 0) return errorf(tribInvalidArgument, "store wait timeout %d ms must be >= 0", timeoutMs);
  net::Writer w;
  w.u8(kWait);
  w.u32(static_cast<uint32_t>(timeoutMs));
  w.u8(values ? 1 : 0);
  w.u32(static_cast<uint32_t>(keys.size()));
  for (auto& k : keys) w.str(k);
  std::vector<uint8_t> reply;
  TRIB_RETURN_IF_ERROR(call(w, timeoutMs, &reply));
  if (!values) return Status::Ok();
  return decodeValues(reply, keys.size(), addr_, out);
}

Status TcpStore::get(const std::string& key, Blob* value, int timeoutMs) {
  std::vector<Blob> v;
  TRIB_RETURN_IF_ERROR(waitImpl({key}, timeoutMs, true, &v));
  *value = std::move(v[0]);
  return Status::Ok();
}

Status TcpStore::wait(const std::vector<std::string>& keys, int timeoutMs) {
  return waitImpl(keys, timeoutMs, false, nullptr);
}

Status TcpStore::multiGet(const std::vector<std::string>& keys, std::vector<Blob>* values, int timeoutMs) {
  return waitImpl(keys, timeoutMs, true, values);
}

Status TcpStore::multiGetRange(const std::string& prefix, uint32_t first, uint32_t count,
                               std::vector<Blob>* values, int timeoutMs) {
  if (timeoutMs < 0) return errorf(tribInvalidArgument, "store wait timeout %d ms must be >= 0", timeoutMs);
  if (!rangePrefixOk(prefix) || count > kMaxRangeKeys || uint64_t{first} + count > uint64_t{UINT32_MAX} + 1)
    return errorf(tribInvalidArgument,
                  "store range wait '%s'[%u, +%u): the prefix must not end in a digit, and at most %u keys "
                  "below index 2^32",
                  prefix.c_str(), first, count, kMaxRangeKeys);
  net::Writer w;
  w.u8(kWaitRange);
  w.u32(static_cast<uint32_t>(timeoutMs));
  w.u8(1);
  w.str(prefix);
  w.u32(first);
  w.u32(count);
  std::vector<uint8_t> reply;
  TRIB_RETURN_IF_ERROR(call(w, timeoutMs, &reply));
  return decodeValues(reply, count, addr_, values);
}

Status TcpStore::remove(const std::string& key, bool* existed) {
  net::Writer w;
  w.u8(kRemove);
  w.str(key);
  std::vector<uint8_t> reply;
  TRIB_RETURN_IF_ERROR(call(w, 0, &reply));
  if (existed) *existed = !reply.empty() && reply[0] == 1;
  return Status::Ok();
}

}  // namespace trib
