// Authentication (docs/SECURITY.md): the HMAC proofs of bootstrap/auth.hpp and the switch's
// challenge-response (the store's is tested in test_store.cpp, TcpStoreAuth.*).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include "bootstrap/auth.hpp"
#include "bootstrap/net.hpp"
#include "shm_util.hpp"
#include "switch_util.hpp"

using namespace trib;
using namespace trib::sw;
using namespace trib::sw::testing;

namespace {

auth::Nonce filled(uint8_t v) {
  auth::Nonce n;
  n.fill(v);
  return n;
}

bool eventSeen(const SwitchNode& n, const std::string& what) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  do {
    for (const auto& e : n.events())
      if (e.find(what) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  } while (std::chrono::steady_clock::now() < deadline);
  return false;
}

std::unique_ptr<SwitchNode> startNode(const std::string& key = "test-job") {
  SwitchConfig cfg = nodeConfig(8, 4096);
  cfg.key = key;
  std::unique_ptr<SwitchNode> n;
  Status s = SwitchNode::create(cfg, &n);
  EXPECT_TRUE(s.ok()) << s.message();
  if (n) n->start();
  return n;
}

int rawConnect(const std::string& address) {
  net::SockAddr a;
  EXPECT_TRUE(net::parseHostPort(address, &a).ok());
  int fd = -1;
  EXPECT_TRUE(net::connectTo(a, net::deadlineAfter(2000), &fd).ok());
  return fd;
}

}  // namespace

TEST(AuthProof, IsTheDocumentedHmacSha256) {
  const std::string key = "k3y";
  auth::Nonce c = filled(1), s = filled(2);
  auth::Proof p{};
  ASSERT_TRUE(auth::makeProof(key, "ctx", c, s, &p).ok());
  // HMAC-SHA256(key, u32 len(context) || context || client nonce || server nonce), by OpenSSL.
  std::vector<uint8_t> msg{3, 0, 0, 0, 'c', 't', 'x'};
  msg.insert(msg.end(), c.begin(), c.end());
  msg.insert(msg.end(), s.begin(), s.end());
  uint8_t want[32];
  unsigned len = 0;
  ASSERT_NE(HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), msg.data(), msg.size(), want, &len),
            nullptr);
  ASSERT_EQ(len, 32u);
  EXPECT_EQ(std::memcmp(p.data(), want, 32), 0);
}

TEST(AuthProof, DependsOnKeyContextAndBothNonces) {
  auth::Nonce c = filled(1), s = filled(2);
  auth::Proof base{}, other{};
  ASSERT_TRUE(auth::makeProof("key", "ctx", c, s, &base).ok());
  ASSERT_TRUE(auth::makeProof("key", "ctx", c, s, &other).ok());
  EXPECT_TRUE(auth::proofsEqual(base, other)) << "a proof is deterministic";
  ASSERT_TRUE(auth::makeProof("kez", "ctx", c, s, &other).ok());
  EXPECT_FALSE(auth::proofsEqual(base, other));
  ASSERT_TRUE(auth::makeProof("key", "ctx2", c, s, &other).ok());
  EXPECT_FALSE(auth::proofsEqual(base, other));
  ASSERT_TRUE(auth::makeProof("key", "ctx", s, c, &other).ok());  // the nonces swapped
  EXPECT_FALSE(auth::proofsEqual(base, other));
  EXPECT_TRUE(auth::verifyProof("key", "ctx", c, s, base));
  EXPECT_FALSE(auth::verifyProof("key", "ctx", c, filled(3), base));
}

TEST(AuthProof, ConstantTimeCompareFindsADifferenceAtEveryByte) {
  // proofsEqual is CRYPTO_memcmp; this checks its answers, every position, both bit ends.
  auth::Proof a{};
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint8_t>(i * 37 + 5);
  for (size_t i = 0; i < a.size(); ++i)
    for (uint8_t bit : {uint8_t{1}, uint8_t{0x80}}) {
      auth::Proof b = a;
      b[i] ^= bit;
      EXPECT_FALSE(auth::proofsEqual(a, b)) << "byte " << i;
    }
  EXPECT_TRUE(auth::proofsEqual(a, auth::Proof(a)));
}

TEST(AuthProof, FreshNoncesDiffer) {
  auth::Nonce a{}, b{};
  ASSERT_TRUE(auth::freshNonce(&a).ok());
  ASSERT_TRUE(auth::freshNonce(&b).ok());
  EXPECT_NE(a, b);
  EXPECT_NE(a, auth::Nonce{});
}

TEST(SwitchAuth, RightKeyJoinsWrongKeyRefusedOnBothSides) {
  auto node = startNode();
  ASSERT_TRUE(node);
  std::unique_ptr<SwitchClient> c;
  Status s = SwitchClient::connect(clientConfig(node->address(), 1, {{1, 0}}), &c);
  EXPECT_TRUE(s.ok()) << s.message();
  c.reset();
  SwitchClientConfig wrong = clientConfig(node->address(), 2, {{1, 0}});
  wrong.key = "another-job";
  s = SwitchClient::connect(wrong, &c);
  EXPECT_EQ(s.code(), tribRemoteError) << s.message();
  EXPECT_NE(s.message().find("wrong job key"), std::string::npos) << s.message();
  EXPECT_TRUE(eventSeen(*node, "wrong job key: the proof does not verify"));
}

TEST(SwitchAuth, ReplayedProofIsRefused) {
  auto node = startNode();
  ASSERT_TRUE(node);
  // An honest handshake by hand: its nonce and the switch's challenge recorded.
  auth::Nonce mine{}, first{}, second{};
  ASSERT_TRUE(auth::freshNonce(&mine).ok());
  int fd = rawConnect(node->address());
  ASSERT_TRUE(rawHandshake(fd, "test-job", &first, &mine).ok());
  close(fd);
  std::vector<uint8_t> recorded;
  ASSERT_TRUE(proofMessage("test-job", Role::Rank, mine, first, &recorded).ok());
  // Replayed: the same hello, then the recorded proof against the new challenge.
  fd = rawConnect(node->address());
  auto hello = helloMessage(Role::Rank, mine);
  ASSERT_TRUE(net::sendAll(fd, hello.data(), hello.size(), net::deadlineAfter(2000)).ok());
  uint8_t hb[kHeaderBytes];
  ASSERT_TRUE(net::recvAll(fd, hb, kHeaderBytes, net::deadlineAfter(2000)).ok());
  Header h;
  ASSERT_TRUE(parseHeader(hb, 0, &h).ok());
  ASSERT_EQ(h.type, MsgType::Challenge);
  ASSERT_TRUE(net::recvAll(fd, second.data(), second.size(), net::deadlineAfter(2000)).ok());
  EXPECT_NE(first, second) << "the switch repeated a challenge";
  ASSERT_TRUE(net::sendAll(fd, recorded.data(), recorded.size(), net::deadlineAfter(2000)).ok());
  ASSERT_TRUE(net::recvAll(fd, hb, kHeaderBytes, net::deadlineAfter(2000)).ok());
  ASSERT_TRUE(parseHeader(hb, 0, &h).ok());
  EXPECT_EQ(h.type, MsgType::Error);
  close(fd);
  EXPECT_TRUE(eventSeen(*node, "wrong job key"));
}

TEST(SwitchAuth, OldVersionHelloRefusedNamingTheVersions) {
  auto node = startNode();
  ASSERT_TRUE(node);
  int fd = rawConnect(node->address());
  // A version-2 hello: header of 64 bytes with the key hash in arg64, no payload.
  uint8_t v2[kHeaderBytes];
  encodeHeader(Header{}, v2);
  v2[4] = 2;
  v2[5] = 0;
  ASSERT_TRUE(net::sendAll(fd, v2, kHeaderBytes, net::deadlineAfter(2000)).ok());
  EXPECT_TRUE(eventSeen(*node, "protocol version 2, this side speaks 4"));
  close(fd);
}

TEST(SwitchAuth, ImpostorSwitchRefusedByTheClient) {
  // A "switch" without the key: it challenges, then acks with a made-up proof.
  net::SockAddr a, bound;
  ASSERT_TRUE(net::parseHostPort("127.0.0.1:0", &a).ok());
  int lfd = -1;
  ASSERT_TRUE(net::listenOn(a, &lfd, &bound).ok());
  std::atomic<size_t> afterAck{999};
  std::thread fake([&] {
    pollfd p{lfd, POLLIN, 0};
    if (poll(&p, 1, 5000) != 1) return;
    int fd = accept4(lfd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    uint8_t buf[kHeaderBytes + kHandshakeBytes];
    auto deadline = net::deadlineAfter(3000);
    auth::Nonce n{};
    (void)auth::freshNonce(&n);
    if (net::recvAll(fd, buf, sizeof buf, deadline).ok()) {
      auto ch = challengeMessage(n);
      (void)net::sendAll(fd, ch.data(), ch.size(), deadline);
      if (net::recvAll(fd, buf, sizeof buf, deadline).ok()) {
        std::vector<uint8_t> ack;
        (void)acceptMessage("not-the-key", filled(0), n, &ack);
        (void)net::sendAll(fd, ack.data(), ack.size(), deadline);
        size_t more = 0;  // what the client sends after the ack: it must register nothing
        while (net::recvAll(fd, buf, 1, net::deadlineAfter(1000)).ok()) ++more;
        afterAck = more;
      }
    }
    close(fd);
  });
  std::unique_ptr<SwitchClient> c;
  Status s = SwitchClient::connect(clientConfig(bound.str(), 1, {{1, 0}}), &c);
  fake.join();
  close(lfd);
  EXPECT_EQ(s.code(), tribRemoteError) << s.message();
  EXPECT_NE(s.message().find("did not prove it holds the job key"), std::string::npos) << s.message();
  EXPECT_EQ(afterAck.load(), 0u);
}

TEST(SwitchAuth, OversizedMessagesBeforeAuthenticationAreRefused) {
  auto node = startNode();
  ASSERT_TRUE(node);
  // A hello whose payload is one byte longer than a nonce.
  int fd = rawConnect(node->address());
  auth::Nonce n{};
  auto hello = helloMessage(Role::Rank, n);
  Header h;
  ASSERT_TRUE(parseHeader(hello.data(), 0, &h).ok());
  h.payloadBytes = kHandshakeBytes + 1;
  uint8_t hb[kHeaderBytes];
  encodeHeader(h, hb);
  ASSERT_TRUE(net::sendAll(fd, hb, kHeaderBytes, net::deadlineAfter(2000)).ok());
  EXPECT_TRUE(eventSeen(*node, "hello carries 33 payload bytes, expected 32"));
  close(fd);
  // A chunk as the first message: refused from its header, its payload never read.
  fd = rawConnect(node->address());
  Header chunk;
  chunk.type = MsgType::Chunk;
  chunk.group = 1;
  chunk.dtype = tribInt32;
  chunk.count = 1024;
  chunk.payloadBytes = 4096;
  encodeHeader(chunk, hb);
  ASSERT_TRUE(net::sendAll(fd, hb, kHeaderBytes, net::deadlineAfter(2000)).ok());
  EXPECT_TRUE(eventSeen(*node, "chunk of 4096 bytes before authenticating"));
  close(fd);
}

TEST(ShmSegments, AreCreatedMode0600ForThisUserOnly) {
  // Segments are unlinked once every local rank has mapped them, so look while rank 0 waits for a
  // rank 1 that never comes: its segment is on /dev/shm for the whole (bounded) wait.
  std::unique_ptr<TcpStoreServer> server;
  ASSERT_TRUE(TcpStoreServer::start(trib::testing::storeOptions("shm-auth"), &server).ok());
  std::unique_ptr<TcpStore> client;
  ASSERT_TRUE(TcpStore::connect(server->address(), "shm-auth", 5000, &client).ok());
  Bootstrap bs(std::move(client), 0, 2, "shm-mode", 800);
  std::atomic<bool> done{false};
  std::thread create([&] {
    std::unique_ptr<ShmTransport> t;
    Status s = ShmTransport::create(0, 2, {0, 1}, bs.oobAllGather(), ShmOptions{}, &t);
    EXPECT_FALSE(s.ok()) << "rank 1 never joined";
    done = true;
  });
  std::vector<std::string> names;
  while (!done && names.empty()) {
    names = trib::testing::shmLeftovers(getpid());
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_FALSE(names.empty()) << "no segment seen while rank 0 waited";
  for (const auto& n : names) {
    struct stat sb {};
    ASSERT_EQ(stat(("/dev/shm/" + n).c_str(), &sb), 0) << n;
    EXPECT_EQ(sb.st_mode & 0777, 0600u) << n;
    EXPECT_EQ(sb.st_uid, geteuid()) << n;
  }
  create.join();
  EXPECT_TRUE(trib::testing::shmLeftovers(getpid()).empty()) << "the failed create removed its segment";
}

TEST(ShmSegments, PeerSegmentOpenToOthersOrTooShortIsRefused) {
  const std::string name =
      "/" + std::string(ShmTransport::kSegmentPrefix) + "authtest-" + std::to_string(getpid());
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0) << strerror(errno);
  ASSERT_EQ(ftruncate(fd, 8192), 0);
  EXPECT_TRUE(checkPeerSegment(fd, 8192, 1, name).ok());
  Status s = checkPeerSegment(fd, 8193, 1, name);  // the blob claims one byte more than there is
  EXPECT_EQ(s.code(), tribInvalidUsage);
  EXPECT_NE(s.message().find("has 8192 bytes, its blob says 8193"), std::string::npos) << s.message();
  ASSERT_EQ(fchmod(fd, 0644), 0);  // readable by every user of the host
  s = checkPeerSegment(fd, 8192, 1, name);
  EXPECT_EQ(s.code(), tribInvalidUsage);
  EXPECT_NE(s.message().find("mode 644: refused"), std::string::npos) << s.message();
  ASSERT_EQ(fchmod(fd, 0660), 0);
  EXPECT_FALSE(checkPeerSegment(fd, 8192, 1, name).ok());
  close(fd);
  shm_unlink(name.c_str());
}
