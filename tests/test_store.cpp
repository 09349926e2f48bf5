// TCP and file stores: operations, timeouts, authentication, hostile input, concurrency.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <poll.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <thread>

#include "bootstrap/cancellable_store.hpp"
#include "bootstrap/store.hpp"
#include "bootstrap/store_handshake.hpp"
#include "common/log.hpp"
#include "net_util.hpp"
#include "store_util.hpp"
#include "temp_tree.hpp"

using namespace trib;
using trib::testing::runChildren;

namespace {

const std::string kKey = "test-job-key";

std::unique_ptr<TcpStoreServer> startServer(size_t maxMessage = storeproto::kDefaultMaxMessage) {
  StoreServerOptions opt;
  opt.authKey = kKey;
  opt.maxMessageBytes = maxMessage;
  std::unique_ptr<TcpStoreServer> s;
  Status st = TcpStoreServer::start(opt, &s);
  EXPECT_TRUE(st.ok()) << st.message();
  return s;
}

std::unique_ptr<TcpStore> connectClient(const TcpStoreServer& s) {
  std::unique_ptr<TcpStore> c;
  Status st = TcpStore::connect(s.address(), kKey, 5000, &c);
  EXPECT_TRUE(st.ok()) << st.message();
  return c;
}

Blob blob(const std::string& s) { return Blob(s.begin(), s.end()); }

// Sends log lines to a temporary file while alive (TRIB_DEBUG_FILE) so tests can assert that an
// event was reported.
struct LogCapture {
  std::string path;
  LogCapture() {
    char tmpl[] = "/tmp/trib-log-XXXXXX";
    int fd = mkstemp(tmpl);
    close(fd);
    path = tmpl;
    setenv("TRIB_DEBUG_FILE", path.c_str(), 1);
    logReconfigure();
  }
  ~LogCapture() {
    unsetenv("TRIB_DEBUG_FILE");
    logReconfigure();
    unlink(path.c_str());
  }
  bool contains(const std::string& needle) {
    FILE* f = fopen(path.c_str(), "r");
    if (!f) return false;
    std::string text;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
    fclose(f);
    return text.find(needle) != std::string::npos;
  }
};

// A raw TCP connection for sending hand-made bytes.
int rawConnect(const TcpStoreServer& s) {
  net::SockAddr a;
  EXPECT_TRUE(net::parseHostPort(s.address(), &a).ok());
  int fd = -1;
  EXPECT_TRUE(net::connectTo(a, net::deadlineAfter(2000), &fd).ok());
  return fd;
}

// True when the server closes `fd` within 2 s.
bool closedByServer(int fd) {
  auto deadline = net::deadlineAfter(2000);
  uint8_t buf[256];
  while (net::Clock::now() < deadline) {
    ssize_t r = recv(fd, buf, sizeof buf, 0);
    if (r == 0) return true;
    if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// One framed request and its reply's body (status byte first), on a raw connection.
std::vector<uint8_t> rawCall(int fd, const net::Writer& w) {
  auto f = w.frame();
  std::vector<uint8_t> body;
  uint32_t len = 0;
  if (!net::sendAll(fd, f.data(), f.size(), net::deadlineAfter(2000)).ok() ||
      !net::recvAll(fd, &len, 4, net::deadlineAfter(2000)).ok() || len == 0 || len > 4096)
    return body;
  body.resize(len);
  if (!net::recvAll(fd, body.data(), len, net::deadlineAfter(2000)).ok()) body.clear();
  return body;
}

// The client's side of the challenge-response on a raw connection; true when the store accepted.
bool rawAuthenticate(int fd, const std::string& key) {
  auth::Nonce mine{}, theirs{};
  auth::Proof proof{};
  if (!auth::freshNonce(&mine).ok()) return false;
  auto challenge = rawCall(fd, storeproto::encodeHello(mine));
  if (challenge.empty() || challenge[0] != storeproto::kOk ||
      !storeproto::decodeChallenge(challenge.data() + 1, challenge.size() - 1, &theirs))
    return false;
  if (!auth::makeProof(key, storeproto::kClientContext, mine, theirs, &proof).ok()) return false;
  auto accept = rawCall(fd, storeproto::encodeAuth(proof));
  return !accept.empty() && accept[0] == storeproto::kOk &&
         storeproto::decodeAccept(accept.data() + 1, accept.size() - 1, &proof) &&
         auth::verifyProof(key, storeproto::kServerContext, mine, theirs, proof);
}

// Runs the same semantic checks against any Store.
void checkBasicOps(Store& s) {
  ASSERT_TRUE(s.set("a", blob("hello")).ok());
  Blob v;
  ASSERT_TRUE(s.get("a", &v, 1000).ok());
  EXPECT_EQ(v, blob("hello"));
  ASSERT_TRUE(s.set("a", blob("")).ok());  // overwrite with an empty value
  ASSERT_TRUE(s.get("a", &v, 1000).ok());
  EXPECT_TRUE(v.empty());
  Blob big(1 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 7 + 3);
  ASSERT_TRUE(s.set("weird/key with spaces\x01", big).ok());
  ASSERT_TRUE(s.get("weird/key with spaces\x01", &v, 1000).ok());
  EXPECT_EQ(v, big);

  int64_t r = 0;
  ASSERT_TRUE(s.add("ctr", 5, &r).ok());
  EXPECT_EQ(r, 5);
  ASSERT_TRUE(s.add("ctr", -7, &r).ok());
  EXPECT_EQ(r, -2);
  ASSERT_TRUE(s.get("ctr", &v, 1000).ok());
  EXPECT_EQ(v, blob("-2"));
  Status bad = s.add("a", 1, &r);  // "a" holds a non-integer
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("non-integer"), std::string::npos) << bad.message();

  std::vector<Blob> all;
  ASSERT_TRUE(s.set("m0", blob("x")).ok());
  ASSERT_TRUE(s.set("m1", blob("yy")).ok());
  ASSERT_TRUE(s.multiGet({"m1", "m0", "ctr"}, &all, 1000).ok());
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0], blob("yy"));
  EXPECT_EQ(all[1], blob("x"));
  EXPECT_EQ(all[2], blob("-2"));
  EXPECT_TRUE(s.wait({"m0", "m1"}, 0).ok());

  bool existed = false;
  ASSERT_TRUE(s.remove("m0", &existed).ok());
  EXPECT_TRUE(existed);
  ASSERT_TRUE(s.remove("m0", &existed).ok());
  EXPECT_FALSE(existed);

  // A wait on a missing key times out with tribTimeout, naming the key, close to the timeout.
  auto t0 = net::Clock::now();
  Status st = s.wait({"m1", "m0"}, 200);
  double ms = std::chrono::duration<double, std::milli>(net::Clock::now() - t0).count();
  EXPECT_EQ(st.code(), tribTimeout) << st.message();
  EXPECT_NE(st.message().find("m0"), std::string::npos) << st.message();
  EXPECT_GE(ms, 190);
  EXPECT_LT(ms, 3000);
  st = s.get("never", &v, 50);
  EXPECT_EQ(st.code(), tribTimeout);
  EXPECT_EQ(s.wait({"x"}, -1).code(), tribInvalidArgument);

  // Range waits: the keys rng/1 and rng/2, in order; an empty range; a missing key named.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(s.set("rng/" + std::to_string(i), blob(std::string(i, 'r'))).ok());
  ASSERT_TRUE(s.multiGetRange("rng/", 1, 2, &all, 1000).ok());
  EXPECT_EQ(all, (std::vector<Blob>{blob("r"), blob("rr")}));
  ASSERT_TRUE(s.multiGetRange("rng/", 7, 0, &all, 0).ok());
  EXPECT_TRUE(all.empty());
  st = s.multiGetRange("rng/", 2, 2, &all, 100);
  EXPECT_EQ(st.code(), tribTimeout) << st.message();
  EXPECT_NE(st.message().find("rng/3"), std::string::npos) << st.message();
  EXPECT_EQ(s.multiGetRange("rng/", 0, 1, &all, -1).code(), tribInvalidArgument);
}

}  // namespace

TEST(TcpStore, BasicOperations) {
  auto server = startServer();
  auto c = connectClient(*server);
  checkBasicOps(*c);
}

TEST(TcpStore, WaitReleasedBySetFromAnotherClient) {
  auto server = startServer();
  auto waiter = connectClient(*server);
  auto setter = connectClient(*server);
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_TRUE(setter->set("late", blob("v")).ok());
    EXPECT_TRUE(setter->add("late-ctr", 3, nullptr).ok());
  });
  std::vector<Blob> v;
  auto t0 = net::Clock::now();
  Status st = waiter->multiGet({"late", "late-ctr"}, &v, 5000);
  double ms = std::chrono::duration<double, std::milli>(net::Clock::now() - t0).count();
  t.join();
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(v[0], blob("v"));
  EXPECT_EQ(v[1], blob("3"));
  EXPECT_GE(ms, 80);
  EXPECT_LT(ms, 3000);
}

// A non-blocking init's store (bootstrap/cancellable_store.hpp): its waits go in slices, so a value
// set after several slices is still found, the caller's timeout still holds, and the flag ends a
// wait within a slice.
TEST(CancellableStore, WaitsAcrossSlicesAndEndsOnTheFlag) {
  auto server = startServer();
  auto flag = std::make_shared<std::atomic<bool>>(false);
  CancellableStore store(std::shared_ptr<Store>(connectClient(*server)), flag);
  checkBasicOps(store);
  auto setter = connectClient(*server);
  constexpr int kSlice = CancellableStore::kSliceMs;
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(3 * kSlice));
    EXPECT_TRUE(setter->set("late", blob("v")).ok());
  });
  Blob v;
  Status st = store.get("late", &v, 60000);  // found in its fourth slice or later
  t.join();
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(v, blob("v"));

  auto t0 = net::Clock::now();
  std::vector<Blob> vs;
  st = store.multiGet({"late", "never"}, &vs, 2 * kSlice + 100);  // the caller's timeout, not a slice's
  double ms = std::chrono::duration<double, std::milli>(net::Clock::now() - t0).count();
  EXPECT_EQ(st.code(), tribTimeout) << st.message();
  EXPECT_GE(ms, 2 * kSlice + 90);
  // Its message names the caller's timeout, not the last slice's, and still the missing key.
  EXPECT_NE(st.message().find(std::to_string(2 * kSlice + 100) + " ms in all"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("never"), std::string::npos) << st.message();

  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(2 * kSlice));
    flag->store(true);
  });
  t0 = net::Clock::now();
  st = store.wait({"never"}, 60000);
  ms = std::chrono::duration<double, std::milli>(net::Clock::now() - t0).count();
  canceller.join();
  EXPECT_EQ(st.code(), tribAborted) << st.message();
  EXPECT_NE(st.message().find("aborted (tribCommAbort) during its init"), std::string::npos) << st.message();
  EXPECT_LT(ms, 30000) << "the flag did not end the wait";   // the timeout was 60 s
  EXPECT_EQ(store.set("k", blob("x")).code(), tribAborted);  // and every later call
}

TEST(TcpStore, ConnectTimesOutWhenNoServer) {
  const std::string addr = trib::testing::freeListenAddress();  // nothing listens there
  std::unique_ptr<TcpStore> c;
  auto t0 = net::Clock::now();
  Status st = TcpStore::connect(addr, kKey, 300, &c);
  double ms = std::chrono::duration<double, std::milli>(net::Clock::now() - t0).count();
  EXPECT_EQ(st.code(), tribTimeout) << st.message();
  EXPECT_NE(st.message().find(addr), std::string::npos) << st.message();
  EXPECT_LT(ms, 3000);
}

TEST(TcpStore, WrongOrMissingKeyRefusedAndLogged) {
  LogCapture log;
  auto server = startServer();
  std::unique_ptr<TcpStore> c;
  Status st = TcpStore::connect(server->address(), "not-the-key", 2000, &c);
  EXPECT_EQ(st.code(), tribRemoteError);
  EXPECT_NE(st.message().find("wrong job key"), std::string::npos) << st.message();
  EXPECT_TRUE(log.contains("wrong job key"));

  EXPECT_TRUE(log.contains("answered the challenge with a wrong job key"));

  // A connection whose first message is not HELLO is dropped without a reply.
  int fd = rawConnect(*server);
  net::Writer w;
  w.u8(storeproto::kSet);
  w.str("k");
  w.str("v");
  auto f = w.frame();
  ASSERT_TRUE(net::sendAll(fd, f.data(), f.size(), net::deadlineAfter(1000)).ok());
  EXPECT_TRUE(closedByServer(fd));
  close(fd);
  EXPECT_TRUE(log.contains("did not start with a handshake"));
  EXPECT_EQ(server->stats().refused, 2u);

  // The refused SET did not happen, and honest clients still work.
  auto good = connectClient(*server);
  Blob v;
  EXPECT_EQ(good->get("k", &v, 50).code(), tribTimeout);
}

// A one-connection fake store on 127.0.0.1 running `serve(fd)` in a thread (impostors, old or
// broken servers).
struct FakeStore {
  int listenFd = -1;
  std::string address;
  std::thread thread;
  explicit FakeStore(std::function<void(int)> serve) {
    net::SockAddr a, bound;
    EXPECT_TRUE(net::parseHostPort("127.0.0.1:0", &a).ok());
    EXPECT_TRUE(net::listenOn(a, &listenFd, &bound).ok());
    address = bound.str();
    thread = std::thread([this, serve = std::move(serve)] {
      pollfd p{listenFd, POLLIN, 0};
      if (poll(&p, 1, 5000) != 1) return;
      int fd = accept4(listenFd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;
      serve(fd);
      close(fd);
    });
  }
  void finish() {
    if (thread.joinable()) thread.join();
  }
  ~FakeStore() {
    finish();
    close(listenFd);
  }
};

// Reads one framed request body (bounded), empty on failure.
std::vector<uint8_t> readRequest(int fd) {
  uint32_t len = 0;
  std::vector<uint8_t> body;
  if (!net::recvAll(fd, &len, 4, net::deadlineAfter(3000)).ok() || len == 0 || len > 4096) return body;
  body.resize(len);
  if (!net::recvAll(fd, body.data(), len, net::deadlineAfter(3000)).ok()) body.clear();
  return body;
}

void sendReply(int fd, uint8_t code, const uint8_t* p, size_t n) {
  net::Writer w;
  w.u8(code);
  w.raw(p, n);
  auto f = w.frame();
  (void)net::sendAll(fd, f.data(), f.size(), net::deadlineAfter(2000));
}

TEST(TcpStoreAuth, KeyNeverCrossesTheWireAndEachConnectionIsChallengedAfresh) {
  auto server = startServer();
  // Two handshakes by hand: the challenges differ, and neither message carries the key.
  auth::Nonce mine{}, first{}, second{};
  ASSERT_TRUE(auth::freshNonce(&mine).ok());
  for (auth::Nonce* got : {&first, &second}) {
    int fd = rawConnect(*server);
    auto hello = storeproto::encodeHello(mine);
    EXPECT_EQ(std::search(hello.data().begin(), hello.data().end(), kKey.begin(), kKey.end()),
              hello.data().end());
    auto reply = rawCall(fd, hello);
    ASSERT_EQ(reply.size(), 1 + auth::kNonceBytes);
    EXPECT_EQ(reply[0], storeproto::kOk);
    ASSERT_TRUE(storeproto::decodeChallenge(reply.data() + 1, reply.size() - 1, got));
    close(fd);
  }
  EXPECT_NE(first, second) << "the store repeated a challenge";
}

TEST(TcpStoreAuth, ReplayedHandshakeIsRefused) {
  LogCapture log;
  auto server = startServer();
  // An honest handshake, recorded: the client's nonce and its proof.
  int fd = rawConnect(*server);
  auth::Nonce mine{}, theirs{};
  auth::Proof proof{};
  ASSERT_TRUE(auth::freshNonce(&mine).ok());
  auto reply = rawCall(fd, storeproto::encodeHello(mine));
  ASSERT_TRUE(!reply.empty() && storeproto::decodeChallenge(reply.data() + 1, reply.size() - 1, &theirs));
  ASSERT_TRUE(auth::makeProof(kKey, storeproto::kClientContext, mine, theirs, &proof).ok());
  reply = rawCall(fd, storeproto::encodeAuth(proof));
  ASSERT_FALSE(reply.empty());
  EXPECT_EQ(reply[0], storeproto::kOk);
  close(fd);
  // The same bytes replayed on a new connection: the store's fresh nonce makes the proof stale.
  fd = rawConnect(*server);
  reply = rawCall(fd, storeproto::encodeHello(mine));
  ASSERT_FALSE(reply.empty());
  EXPECT_EQ(reply[0], storeproto::kOk);
  reply = rawCall(fd, storeproto::encodeAuth(proof));
  ASSERT_FALSE(reply.empty());
  EXPECT_EQ(reply[0], storeproto::kError);
  EXPECT_TRUE(closedByServer(fd));
  close(fd);
  EXPECT_TRUE(log.contains("answered the challenge with a wrong job key"));
  // A proof sent without a challenge first is no handshake at all.
  fd = rawConnect(*server);
  auto f = storeproto::encodeAuth(proof).frame();
  ASSERT_TRUE(net::sendAll(fd, f.data(), f.size(), net::deadlineAfter(1000)).ok());
  EXPECT_TRUE(closedByServer(fd));
  close(fd);
  EXPECT_EQ(server->stats().refused, 2u);
}

TEST(TcpStoreAuth, OldVersionClientRefusedWithBothVersions) {
  LogCapture log;
  auto server = startServer();
  int fd = rawConnect(*server);
  net::Writer v1;  // what a version-1 client sent: the key itself
  v1.u8(storeproto::kHello);
  v1.u32(storeproto::kMagic);
  v1.u32(1);
  v1.str(kKey);
  auto reply = rawCall(fd, v1);
  ASSERT_FALSE(reply.empty());
  EXPECT_EQ(reply[0], storeproto::kError);
  std::string msg(reply.begin() + 5, reply.end());  // status, u32 length, text
  EXPECT_NE(msg.find("store protocol version 3, client sent 1"), std::string::npos) << msg;
  EXPECT_TRUE(closedByServer(fd));
  close(fd);
  EXPECT_TRUE(log.contains("speaks store protocol 1, this server 3"));
}

TEST(TcpStoreAuth, ImpostorStoreIsRefusedByTheClient) {
  // A store that does not hold the key: it challenges, accepts any answer, and sends a made-up proof.
  std::atomic<int> afterAuth{-1};
  FakeStore fake([&](int fd) {
    auto hello = readRequest(fd);
    storeproto::HelloMsg h;
    if (!storeproto::decodeHello(hello.data(), hello.size(), &h)) return;
    auth::Nonce n{};
    (void)auth::freshNonce(&n);
    sendReply(fd, storeproto::kOk, n.data(), n.size());
    if (readRequest(fd).empty()) return;
    (void)auth::freshNonce(&n);  // 32 random bytes as the "proof"
    sendReply(fd, storeproto::kOk, n.data(), n.size());
    afterAuth = static_cast<int>(readRequest(fd).size());  // the client must send nothing more
  });
  std::unique_ptr<TcpStore> c;
  Status st = TcpStore::connect(fake.address, kKey, 3000, &c);
  EXPECT_EQ(st.code(), tribRemoteError) << st.message();
  EXPECT_NE(st.message().find("did not prove it holds the job key"), std::string::npos) << st.message();
  EXPECT_EQ(c, nullptr);
  fake.finish();
  EXPECT_EQ(afterAuth.load(), 0) << "the client sent a request to a store that failed its proof";
}

TEST(TcpStoreAuth, MessageBoundsPlusOneAreRefused) {
  LogCapture log;
  // Before authentication: a message of kMaxHandshakeBytes + 1 closes the connection.
  auto server = startServer(/*maxMessage=*/4096);
  int fd = rawConnect(*server);
  std::vector<uint8_t> big(4 + storeproto::kMaxHandshakeBytes + 1, 0);
  uint32_t len = storeproto::kMaxHandshakeBytes + 1;
  std::memcpy(big.data(), &len, 4);
  big[4] = storeproto::kHello;
  ASSERT_TRUE(net::sendAll(fd, big.data(), big.size(), net::deadlineAfter(1000)).ok());
  EXPECT_TRUE(closedByServer(fd));
  close(fd);
  EXPECT_TRUE(log.contains(strprintf("limit %zu before authenticating", storeproto::kMaxHandshakeBytes)));
  // After it: a length prefix of maxMessageBytes + 1 closes the connection before any body is read.
  fd = rawConnect(*server);
  ASSERT_TRUE(rawAuthenticate(fd, kKey));
  len = 4096 + 1;
  ASSERT_TRUE(net::sendAll(fd, &len, 4, net::deadlineAfter(1000)).ok());
  EXPECT_TRUE(closedByServer(fd));
  close(fd);
  EXPECT_TRUE(log.contains("sent a 4097-byte message (limit 4096)"));
  // The client bounds replies the same way: a reply of its limit + 1 is refused, not allocated.
  FakeStore fake([](int fd) {
    (void)readRequest(fd);
    uint32_t n = 4096 + 1;
    (void)net::sendAll(fd, &n, 4, net::deadlineAfter(2000));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  });
  std::unique_ptr<TcpStore> c;
  Status st = TcpStore::connect(fake.address, kKey, 3000, &c, /*maxMessageBytes=*/4096);
  EXPECT_EQ(st.code(), tribRemoteError) << st.message();
  EXPECT_NE(st.message().find("malformed reply (4097 bytes)"), std::string::npos) << st.message();
}

TEST(TcpStore, MalformedAndOversizedMessagesCloseOnlyThatConnection) {
  LogCapture log;
  auto server = startServer(/*maxMessage=*/4096);
  auto good = connectClient(*server);
  ASSERT_TRUE(good->set("keep", blob("alive")).ok());

  struct Case {
    const char* what;
    std::vector<uint8_t> bytes;  // sent after a valid HELLO
  };
  std::vector<Case> cases;
  {
    net::Writer w;  // oversized length prefix
    uint32_t huge = 0xFFFFFFF0u;
    std::vector<uint8_t> b(4);
    std::memcpy(b.data(), &huge, 4);
    cases.push_back({"oversized", b});
  }
  {
    std::vector<uint8_t> b(4, 0);  // zero-length message
    cases.push_back({"zero length", b});
  }
  {
    net::Writer w;  // unknown opcode
    w.u8(77);
    cases.push_back({"unknown op", w.frame()});
  }
  {
    net::Writer w;  // SET whose key length runs past the body
    w.u8(storeproto::kSet);
    w.u32(1000);
    w.u8('x');
    cases.push_back({"truncated", w.frame()});
  }
  {
    net::Writer w;  // WAIT claiming 2^31 keys
    w.u8(storeproto::kWait);
    w.u32(10);
    w.u8(1);
    w.u32(0x80000000u);
    cases.push_back({"absurd count", w.frame()});
  }
  auto range = [](const std::string& prefix, uint32_t first, uint32_t count) {
    net::Writer w;
    w.u8(storeproto::kWaitRange);
    w.u32(10);
    w.u8(1);
    w.str(prefix);
    w.u32(first);
    w.u32(count);
    return w.frame();
  };
  cases.push_back({"range prefix ending in a digit", range("r1", 0, 1)});
  cases.push_back({"range of too many keys", range("r/", 0, storeproto::kMaxRangeKeys + 1)});
  cases.push_back({"range past index 2^32 - 1", range("r/", 0xFFFFFFF0u, 17)});
  {
    net::Writer w;  // trailing garbage after a valid SET
    w.u8(storeproto::kSet);
    w.str("k");
    w.str("v");
    w.u8(0);
    cases.push_back({"trailing bytes", w.frame()});
  }
  for (auto& c : cases) {
    int fd = rawConnect(*server);
    ASSERT_TRUE(rawAuthenticate(fd, kKey)) << c.what;
    ASSERT_TRUE(net::sendAll(fd, c.bytes.data(), c.bytes.size(), net::deadlineAfter(1000)).ok()) << c.what;
    EXPECT_TRUE(closedByServer(fd)) << c.what;
    close(fd);
  }
  EXPECT_EQ(server->stats().malformed, cases.size());
  EXPECT_TRUE(log.contains("limit 4096"));
  EXPECT_TRUE(log.contains("malformed message"));
  // The server and the earlier client survive.
  Blob v;
  ASSERT_TRUE(good->get("keep", &v, 1000).ok());
  EXPECT_EQ(v, blob("alive"));
  // A client whose request is over the limit gets a clear error before sending.
  Status st = good->set("big", Blob(8192));
  EXPECT_EQ(st.code(), tribRemoteError) << st.message();  // server closes: request over its limit
}

TEST(TcpStore, IdenticalRangeWaitersShareOneReply) {
  auto server = startServer();
  auto setter = connectClient(*server);
  const int waiters = 5;
  std::vector<std::unique_ptr<TcpStore>> clients;
  for (int i = 0; i < waiters; ++i) clients.push_back(connectClient(*server));
  std::vector<std::vector<Blob>> got(waiters);
  std::vector<Status> st(waiters, Status::Ok());
  std::vector<std::thread> threads;
  for (int i = 0; i < waiters; ++i)
    threads.emplace_back([&, i] { st[i] = clients[i]->multiGetRange("ag/", 0, 3, &got[i], 10000); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // parked, mostly: either way one reply
  for (int k = 0; k < 3; ++k)
    ASSERT_TRUE(setter->set("ag/" + std::to_string(k), blob(std::to_string(k * 11))).ok());
  for (auto& t : threads) t.join();
  const std::vector<Blob> want{blob("0"), blob("11"), blob("22")};
  for (int i = 0; i < waiters; ++i) {
    ASSERT_TRUE(st[i].ok()) << st[i].message();
    EXPECT_EQ(got[i], want);
  }
  EXPECT_EQ(server->stats().rangeRepliesBuilt, 1u);
  // A waiter after completion gets the same reply; a changed key makes a new one.
  std::vector<Blob> again;
  ASSERT_TRUE(clients[0]->multiGetRange("ag/", 0, 3, &again, 1000).ok());
  EXPECT_EQ(again, want);
  EXPECT_EQ(server->stats().rangeRepliesBuilt, 1u);
  ASSERT_TRUE(setter->set("ag/1", blob("changed")).ok());
  ASSERT_TRUE(clients[1]->multiGetRange("ag/", 0, 3, &again, 1000).ok());
  EXPECT_EQ(again[1], blob("changed"));
  EXPECT_EQ(server->stats().rangeRepliesBuilt, 2u);
  // A removed key is missing again: the wait times out naming it; a later SET completes it.
  ASSERT_TRUE(setter->remove("ag/2", nullptr).ok());
  Status miss = clients[2]->multiGetRange("ag/", 0, 3, &again, 100);
  EXPECT_EQ(miss.code(), tribTimeout) << miss.message();
  EXPECT_NE(miss.message().find("1 of 3 keys still missing: 'ag/2'"), std::string::npos) << miss.message();
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_TRUE(setter->set("ag/2", blob("back")).ok());
  });
  ASSERT_TRUE(clients[3]->multiGetRange("ag/", 0, 3, &again, 10000).ok());
  late.join();
  EXPECT_EQ(again[2], blob("back"));
  // A prefix ending in a digit is refused before anything is sent.
  EXPECT_EQ(clients[4]->multiGetRange("ag1", 0, 1, &again, 10).code(), tribInvalidArgument);
  EXPECT_EQ(server->stats().malformed, 0u);
}

TEST(TcpStore, ConnectionLimitAndSilentClientsAreBounded) {
  LogCapture log;
  StoreServerOptions opt = trib::testing::storeOptions(kKey);
  opt.maxConnections = 2;
  opt.helloTimeoutMs = 200;
  std::unique_ptr<TcpStoreServer> server;
  ASSERT_TRUE(TcpStoreServer::start(opt, &server).ok());
  auto a = connectClient(*server);
  auto b = connectClient(*server);
  std::unique_ptr<TcpStore> c;
  Status st = TcpStore::connect(server->address(), kKey, 1000, &c);
  EXPECT_EQ(st.code(), tribRemoteError) << st.message();
  EXPECT_TRUE(log.contains("connections open (the limit)"));
  a.reset();  // frees a slot
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  // A connection that never says HELLO is dropped after helloTimeoutMs, freeing its slot.
  int fd = rawConnect(*server);
  auto t0 = net::Clock::now();
  EXPECT_TRUE(closedByServer(fd));
  double ms = std::chrono::duration<double, std::milli>(net::Clock::now() - t0).count();
  close(fd);
  EXPECT_GE(ms, 150);
  EXPECT_TRUE(log.contains("did not prove the job key within 200 ms"));
  ASSERT_TRUE(TcpStore::connect(server->address(), kKey, 1000, &c).ok());
  EXPECT_TRUE(c->set("x", blob("y")).ok());
  EXPECT_TRUE(b->wait({"x"}, 1000).ok());
}

TEST(TcpStore, ConcurrentClientsFromForkedProcesses) {
  const int kProcs = 6, kAdds = 200;
  std::string lastAddr;
  auto run = trib::testing::runWithStore(
      kProcs, 30, trib::testing::storeOptions(kKey), [&](int rank, const std::string& addr) {
        std::unique_ptr<TcpStore> c;
        CHILD_OK(TcpStore::connect(addr, kKey, 5000, &c), 1);
        for (int i = 0; i < kAdds; ++i) CHILD_OK(c->add("counter", 1, nullptr), 2);
        CHILD_OK(c->set("p/" + std::to_string(rank), blob(std::to_string(rank * 11))), 3);
        std::vector<std::string> keys;
        for (int i = 0; i < kProcs; ++i) keys.push_back("p/" + std::to_string(i));
        std::vector<Blob> all;
        CHILD_OK(c->multiGet(keys, &all, 10000), 4);
        for (int i = 0; i < kProcs; ++i) CHILD_CHECK(all[i] == blob(std::to_string(i * 11)), 5);
        // The last process to finish its adds sees the full count.
        Blob v;
        CHILD_OK(c->get("counter", &v, 1000), 6);
        int64_t count = std::stoll(std::string(v.begin(), v.end()));
        CHILD_CHECK(count >= kAdds && count <= kProcs * kAdds, 7);
        return 0;
      });
  ASSERT_TRUE(run.error.empty()) << run.error;
  for (auto& r : run.results) EXPECT_EQ(r.code, 0) << "child " << r.pid;
  // Every add reached the server exactly once: HELLO + AUTH + kAdds ADD + SET + WAIT + GET per process.
  EXPECT_EQ(run.stats.messagesIn, static_cast<uint64_t>(kProcs * (kAdds + 5)));
  EXPECT_EQ(run.stats.malformed, 0u);
}

// A fresh private folder per test (mkdtemp: mode 0700) for the store's files.
class FileStoreTest : public TempTreeTest {};

TEST_F(FileStoreTest, BasicOperations) {
  std::unique_ptr<FileStore> s;
  ASSERT_TRUE(FileStore::open(root + "/store", &s).ok());
  checkBasicOps(*s);
}

TEST_F(FileStoreTest, RejectsUnusableDirectory) {
  std::unique_ptr<FileStore> s;
  EXPECT_EQ(FileStore::open("", &s).code(), tribInvalidArgument);
  std::string file = root + "/plain";
  FILE* f = fopen(file.c_str(), "w");
  fclose(f);
  Status st = FileStore::open(file, &s);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find(file), std::string::npos) << st.message();
}

// A directory others may write to is refused, whatever its sticky bit (another user could create
// a key before the job does); group/other read is allowed. Nothing is created in a refused one.
TEST_F(FileStoreTest, RefusesADirectoryOthersCanWrite) {
  const std::string dir = root + "/shared";
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  std::unique_ptr<FileStore> s;
  for (mode_t mode : {0777, 01777, 0730, 0702}) {
    ASSERT_EQ(chmod(dir.c_str(), mode), 0);
    const Status st = FileStore::open(dir, &s);
    EXPECT_EQ(st.code(), tribInvalidUsage) << std::oct << mode;
    char want[64];
    std::snprintf(want, sizeof want, "has mode %04o: writable by group or others",
                  static_cast<unsigned>(mode));
    EXPECT_NE(st.message().find(dir + "' " + want), std::string::npos) << st.message();
    EXPECT_EQ(s, nullptr);
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  ASSERT_EQ(chmod(dir.c_str(), 0755), 0);
  EXPECT_TRUE(FileStore::open(dir, &s).ok());
}

TEST_F(FileStoreTest, RefusesADirectoryOfAnotherUser) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give the directory to another user";
  const std::string dir = root + "/theirs";
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(chown(dir.c_str(), 65534, 65534), 0);
  std::unique_ptr<FileStore> s;
  const Status st = FileStore::open(dir, &s);
  EXPECT_EQ(st.code(), tribInvalidUsage);
  EXPECT_NE(st.message().find("'" + dir + "' is owned by uid 65534, not by this process's uid 0"),
            std::string::npos)
      << st.message();
  EXPECT_EQ(s, nullptr);
}

// A link planted where a value is first written is not followed: the file it points to keeps its
// bytes, and values are files of mode 0600.
TEST_F(FileStoreTest, WritesNeverFollowALinkAndAre0600) {
  std::unique_ptr<FileStore> s;
  ASSERT_TRUE(FileStore::open(root, &s).ok());
  const std::string victim = root + "/../" + std::filesystem::path(root).filename().string() + "-victim";
  { std::ofstream(victim) << "precious"; }
  // The temporary names this process will use next (.tmp.<pid>.<n>, n counting writes from 0).
  for (int n = 0; n < 1024; ++n)
    ASSERT_EQ(symlink(victim.c_str(),
                      (root + "/.tmp." + std::to_string(getpid()) + "." + std::to_string(n)).c_str()),
              0);
  ASSERT_TRUE(s->set("key", blob("value")).ok());
  std::ifstream in(victim);
  std::string kept((std::istreambuf_iterator<char>(in)), {});
  std::filesystem::remove(victim);
  EXPECT_EQ(kept, "precious");
  Blob v;
  ASSERT_TRUE(s->get("key", &v, 1000).ok());
  EXPECT_EQ(v, blob("value"));
  struct stat st {};
  ASSERT_EQ(lstat((root + "/k.key").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

// add waits for the lock a bounded time: a holder that never lets go (a rank stopped inside add)
// costs a timeout naming the lock, and the key is left as it was.
TEST_F(FileStoreTest, AddWaitsForTheLockABoundedTime) {
  std::unique_ptr<FileStore> s;
  ASSERT_TRUE(FileStore::open(root, &s, 200).ok());
  ASSERT_TRUE(s->set("ctr", blob("5")).ok());
  const std::string lockPath = root + "/.lock";
  const int held = ::open(lockPath.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);  // its own lock
  ASSERT_GE(held, 0);
  ASSERT_EQ(flock(held, LOCK_EX), 0);
  std::thread release([held] {  // without the bound, add would return only once this lets go
    std::this_thread::sleep_for(std::chrono::seconds(3));
    flock(held, LOCK_UN);
  });
  const auto t0 = std::chrono::steady_clock::now();
  int64_t r = 0;
  const Status st = s->add("ctr", 1, &r);
  const auto took = std::chrono::steady_clock::now() - t0;
  release.join();
  close(held);
  EXPECT_EQ(st.code(), tribTimeout) << st.message();
  EXPECT_NE(st.message().find("'" + lockPath + "' stayed locked by another process for 200 ms"),
            std::string::npos)
      << st.message();
  EXPECT_LT(took, std::chrono::seconds(2));
  EXPECT_EQ(r, 0);
  Blob v;
  ASSERT_TRUE(s->get("ctr", &v, 1000).ok());
  EXPECT_EQ(v, blob("5"));
  ASSERT_TRUE(s->add("ctr", 1, &r).ok());  // free again
  EXPECT_EQ(r, 6);
}

TEST_F(FileStoreTest, ConcurrentProcessesAddAndGather) {
  const int kProcs = 4, kAdds = 50;
  std::string dir = root;
  auto res = runChildren(kProcs, 30, [&](int rank) {
    std::unique_ptr<FileStore> s;
    CHILD_OK(FileStore::open(dir, &s), 1);
    for (int i = 0; i < kAdds; ++i) CHILD_OK(s->add("counter", 1, nullptr), 2);
    CHILD_OK(s->set("p/" + std::to_string(rank), blob(std::string(1000 + rank, 'a' + rank))), 3);
    std::vector<std::string> keys;
    for (int i = 0; i < kProcs; ++i) keys.push_back("p/" + std::to_string(i));
    std::vector<Blob> all;
    CHILD_OK(s->multiGet(keys, &all, 10000), 4);
    for (int i = 0; i < kProcs; ++i) CHILD_CHECK(all[i] == blob(std::string(1000 + i, 'a' + i)), 5);
    return 0;
  });
  for (auto& r : res) EXPECT_EQ(r.code, 0);
  std::unique_ptr<FileStore> s;
  ASSERT_TRUE(FileStore::open(dir, &s).ok());
  Blob v;
  ASSERT_TRUE(s->get("counter", &v, 1000).ok());
  EXPECT_EQ(v, blob(std::to_string(kProcs * kAdds)));
  // No temporary files are left behind.
  for (auto& e : std::filesystem::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().rfind(".tmp.", 0), std::string::npos) << e.path();
}
