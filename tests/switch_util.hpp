// Helpers for switch tests: run members' collectives through SwitchClients, bounded in time.
#pragma once
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "algo/schedule.hpp"
#include "bootstrap/net.hpp"
#include "net_util.hpp"
#include "transports/switch/switch_auth.hpp"
#include "transports/switch/switch_client.hpp"
#include "transports/switch/switch_node.hpp"
#include "tributary/tributary.h"

namespace trib::sw::testing {

using trib::testing::freeListenAddress;

// Environment variables set for the communicators a test creates, restored afterwards.
struct ScopedEnv {
  std::vector<std::pair<std::string, std::string>> saved;  // "\x01": was unset
  void set(const char* k, const std::string& v) {
    const char* old = getenv(k);
    saved.emplace_back(k, old ? old : std::string("\x01"));
    setenv(k, v.c_str(), 1);
  }
  ~ScopedEnv() {
    for (auto it = saved.rbegin(); it != saved.rend(); ++it) {
      if (it->second == "\x01")
        unsetenv(it->first.c_str());
      else
        setenv(it->first.c_str(), it->second.c_str(), 1);
    }
  }
};

// n threads as ranks of one communicator (through the bootstrap, forcing `algo`; chunkBytes 0:
// the config's default); body(rank, comm) returns that rank's error ("" = ok).
inline std::vector<std::string> threadRanks(int n, const std::string& algo,
                                            const std::function<std::string(int, tribComm_t)>& body,
                                            uint64_t chunkBytes = 0, int timeoutMs = 30000) {
  tribUniqueId id;
  EXPECT_EQ(tribGetUniqueId(&id), tribSuccess);
  std::vector<std::string> errors(n);
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r) {
    ts.emplace_back([&, r] {
      tribConfig_t cfg = TRIB_CONFIG_INITIALIZER;
      cfg.algo = algo.c_str();
      cfg.timeoutMs = timeoutMs;
      if (chunkBytes) cfg.chunkBytes = static_cast<int>(chunkBytes);
      tribComm_t comm = nullptr;
      if (tribCommInitRankConfig(&comm, n, id, r, &cfg) != tribSuccess) {
        errors[r] = std::string("init: ") + tribGetLastError(nullptr);
        return;
      }
      errors[r] = body(r, comm);
      tribCommDestroy(comm);
    });
  }
  for (auto& t : ts) t.join();
  return errors;
}

inline SwitchConfig nodeConfig(uint32_t slots = 8, uint64_t slotBytes = 4096, std::string parent = "") {
  SwitchConfig c;
  c.slots = slots;
  c.slotBytes = slotBytes;
  c.key = "test-job";
  c.parent = std::move(parent);
  return c;
}

// A switch node (nodeConfig(slots, slotBytes)), started, with `env` pointing the communicators a
// test creates at it under `key`. Null (and a test failure) when it cannot start.
// A communicator gives up attaching to its switch after TRIB_SWITCH_ATTACH_TIMEOUT (1 s by default:
// a standing service that does not answer at once is skipped). A sanitizer build on a busy machine
// can take longer to connect (SwitchFailover.UcxSwitchKilledMidAllReduce under ASan in CI: every
// rank timed out at 1.0 s and ran on the host), so tests that need the switch attached allow more.
constexpr const char* kSlowAttachSeconds = "20";
inline void allowSlowAttach(ScopedEnv& env) { env.set("TRIB_SWITCH_ATTACH_TIMEOUT", kSlowAttachSeconds); }

inline std::unique_ptr<SwitchNode> startSwitchFor(ScopedEnv& env, uint32_t slots, uint64_t slotBytes,
                                                  const std::string& key = "test-job") {
  std::unique_ptr<SwitchNode> node;
  Status st = SwitchNode::create(nodeConfig(slots, slotBytes), &node);
  EXPECT_TRUE(st.ok()) << st.message();
  if (!st.ok()) return nullptr;
  node->start();
  env.set("TRIB_SWITCH", node->address());
  env.set("TRIB_SWITCH_KEY", key);
  allowSlowAttach(env);
  return node;
}

inline SwitchClientConfig clientConfig(const std::string& addr, uint64_t group, std::vector<PathLevel> path,
                                       uint32_t slots = 4) {
  SwitchClientConfig c;
  c.address = addr;
  c.key = "test-job";
  c.group = group;
  c.path = std::move(path);
  c.slots = slots;
  c.timeoutMs = 2000;
  return c;
}

// Drives one posted operation on `c` until it completes, fails, or `timeout` passes.
inline Status waitFor(SwitchClient& c, TransferOp& done, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done.done()) {
    TRIB_RETURN_IF_ERROR(c.progress());
    if (std::chrono::steady_clock::now() > deadline) return errorf(tribTimeout, "switch operation timed out");
    std::this_thread::yield();
  }
  return done.state.load() == TransferOp::kFailed ? done.error : Status::Ok();
}

// One all-reduce on `c`, bounded in time.
inline Status runAllReduce(SwitchClient& c, const void* src, void* dst, uint64_t count, DataType dt, RedOp op,
                           std::chrono::milliseconds timeout = std::chrono::milliseconds(20000)) {
  TransferOp done;
  TRIB_RETURN_IF_ERROR(c.postAllReduce(src, dst, count, dt, op, &done));
  return waitFor(c, done, timeout);
}

// One collective on `c`, bounded in time.
inline Status runCollective(SwitchClient& c, const OffloadCall& call,
                            std::chrono::milliseconds timeout = std::chrono::milliseconds(20000)) {
  TransferOp done;
  TRIB_RETURN_IF_ERROR(c.postCollective(call, &done));
  return waitFor(c, done, timeout);
}

// The client's side of the switch handshake on a raw TCP socket (tests that then send hand-made
// bytes); *theirs (optional) receives the switch's nonce.
inline Status rawHandshake(int fd, const std::string& key, auth::Nonce* theirs = nullptr,
                           const auth::Nonce* mineIn = nullptr) {
  auto deadline = net::deadlineAfter(3000);
  auth::Nonce mine{}, server{};
  if (mineIn)
    mine = *mineIn;
  else
    TRIB_RETURN_IF_ERROR(auth::freshNonce(&mine));
  auto recvOne = [&](std::vector<uint8_t>* payload, Header* h) -> Status {
    uint8_t hb[kHeaderBytes];
    TRIB_RETURN_IF_ERROR(net::recvAll(fd, hb, kHeaderBytes, deadline));
    TRIB_RETURN_IF_ERROR(parseHeader(hb, 0, h));
    payload->resize(h->payloadBytes);
    return net::recvAll(fd, payload->data(), payload->size(), deadline);
  };
  std::vector<uint8_t> msg = helloMessage(Role::Rank, mine), payload;
  Header h;
  TRIB_RETURN_IF_ERROR(net::sendAll(fd, msg.data(), msg.size(), deadline));
  TRIB_RETURN_IF_ERROR(recvOne(&payload, &h));
  if (h.type != MsgType::Challenge) return errorf(tribRemoteError, "no challenge: %s", msgTypeName(h.type));
  std::memcpy(server.data(), payload.data(), server.size());
  if (theirs) *theirs = server;
  TRIB_RETURN_IF_ERROR(proofMessage(key, Role::Rank, mine, server, &msg));
  TRIB_RETURN_IF_ERROR(net::sendAll(fd, msg.data(), msg.size(), deadline));
  TRIB_RETURN_IF_ERROR(recvOne(&payload, &h));
  if (h.type != MsgType::HelloAck)
    return errorf(tribRemoteError, "%s: %s", msgTypeName(h.type),
                  std::string(payload.begin(), payload.end()).c_str());
  if (!switchProofValid(key, mine, server, payload))
    return errorf(tribRemoteError, "the switch's proof is wrong");
  return Status::Ok();
}

}  // namespace trib::sw::testing
