// Key-value stores for rendezvous: a TCP store (a poll()-driven server thread plus a client) and a
// file store on a shared directory. Both implement Store; the Bootstrap is built on any Store.
//
// Every wait is bounded: timeoutMs >= 0, a wait that expires returns tribTimeout naming the keys.
// TCP protocol (docs/BOOTSTRAP.md): each message is a u32 little-endian body length then the body;
// a connection starts with the challenge-response of bootstrap/store_handshake.hpp (HELLO, AUTH),
// else it is refused and logged. Bodies over maxMessageBytes, unknown opcodes or truncated fields close that
// connection with a logged error; the server itself keeps running.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/net.hpp"
#include "common/status.hpp"

namespace trib {

using Blob = std::vector<uint8_t>;

class Store {
 public:
  virtual ~Store() = default;
  virtual Status set(const std::string& key, const Blob& value) = 0;
  // Wait until `key` exists (up to timeoutMs), then return its value.
  virtual Status get(const std::string& key, Blob* value, int timeoutMs) = 0;
  // Atomically add `delta` to the integer at `key` (created as 0; stored as decimal text).
  virtual Status add(const std::string& key, int64_t delta, int64_t* result) = 0;
  // Wait until every key exists.
  virtual Status wait(const std::vector<std::string>& keys, int timeoutMs) = 0;
  // Wait until every key exists and return all values in key order: one round trip on TCP.
  virtual Status multiGet(const std::vector<std::string>& keys, std::vector<Blob>* values, int timeoutMs) = 0;
  // The same for the keys prefix + decimal(first + i), i < count (prefix not ending in a digit):
  // on TCP one small request, and one reply that the server builds once for identical waiters.
  virtual Status multiGetRange(const std::string& prefix, uint32_t first, uint32_t count,
                               std::vector<Blob>* values, int timeoutMs);
  // Remove `key`; *existed (optional) tells whether it was there.
  virtual Status remove(const std::string& key, bool* existed = nullptr) = 0;
};

// Protocol constants shared by client, server and tests.
namespace storeproto {
constexpr uint32_t kMagic = 0x54535452;  // "RTST": HELLO payload starts with it
constexpr uint32_t kVersion = 3;         // 3: range waits; 2: challenge-response (1 sent the key itself)
enum Op : uint8_t { kHello = 1, kSet = 2, kAdd = 3, kWait = 4, kRemove = 5, kAuth = 6, kWaitRange = 7 };
enum Reply : uint8_t { kOk = 0, kTimeoutReply = 1, kError = 2 };
constexpr size_t kDefaultMaxMessage = 64u << 20;
// Most keys one range wait may name (4 Mi ranks' worth): what the server scans for it is bounded.
constexpr uint32_t kMaxRangeKeys = 1u << 22;
// A range's prefix must not end in a digit, so that a key splits into (prefix, index) one way only.
inline bool rangePrefixOk(const std::string& prefix) {
  return prefix.empty() || prefix.back() < '0' || prefix.back() > '9';
}
// The key a range wait names at `index`.
inline std::string rangeKey(const std::string& prefix, uint64_t index) {
  return prefix + std::to_string(index);
}

// Decoding, apart from the sockets so that tests/fuzz reaches it (store_codec.cpp).
// A message's u32 length prefix: 1..maxBytes, else the stream is out of step (or hostile).
inline bool frameLengthOk(uint32_t len, size_t maxBytes) { return len != 0 && len <= maxBytes; }
// A client's request after the handshake, as the server reads it.
struct Request {
  uint8_t op = 0;
  std::string key;                // set, add, remove; wait range: the prefix
  std::vector<uint8_t> value;     // set
  uint64_t delta = 0;             // add
  uint32_t timeoutMs = 0;         // wait
  bool values = false;            // wait: reply with the values
  std::vector<std::string> keys;  // wait
  uint32_t first = 0, count = 0;  // wait range
};
// False for an unknown op, a field cut short, bytes left over, more keys than the body can hold,
// or a range past kMaxRangeKeys, past index 2^32 - 1 or with a prefix ending in a digit.
bool decodeRequest(const uint8_t* body, size_t n, Request* out);
// Client side: a reply body (status byte, payload). kOk leaves the payload in *reply; a timeout or
// error reply becomes tribTimeout / tribRemoteError with the server's message (naming `server`).
Status decodeReply(std::vector<uint8_t>* reply, const std::string& server);
// A wait's reply payload carrying `expected` values.
Status decodeValues(const std::vector<uint8_t>& payload, size_t expected, const std::string& server,
                    std::vector<std::vector<uint8_t>>* out);
}  // namespace storeproto

struct StoreServerOptions {
  std::string listen = "127.0.0.1:0";  // host:port; port 0 picks a free port
  std::string authKey;                 // must be non-empty
  size_t maxMessageBytes = storeproto::kDefaultMaxMessage;
  int maxConnections = 16384;
  int helloTimeoutMs = 10000;  // a connection that does not authenticate in time is dropped
};

// Counters for tests and docs (message count and bytes per operation).
struct StoreServerStats {
  uint64_t connections = 0, refused = 0, malformed = 0, messagesIn = 0, messagesOut = 0, bytesIn = 0,
           bytesOut = 0;
  uint64_t rangeRepliesBuilt = 0;  // range waits' replies encoded (identical waiters share one)
  double cpuSeconds = 0;           // the serving thread's CPU time so far (what one server can sustain)
};

class TcpStoreServer {
 public:
  static Status start(const StoreServerOptions& options, std::unique_ptr<TcpStoreServer>* out);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  std::string address() const { return address_; }  // "ip:port" actually bound
  int port() const;
  StoreServerStats stats() const;
  void stop();  // idempotent; joins the thread
  // False in a fork()ed child: it inherits this object but not the thread that serves it.
  bool ownedHere() const;

  struct Impl;

 private:
  TcpStoreServer() = default;
  std::unique_ptr<Impl> impl_;  // holds the serving thread too
  int ownerPid_ = 0;            // the process that started the thread
  std::string address_;
};

class TcpStore : public Store {
 public:
  // Connect to host:port (retrying until timeoutMs while the server starts) and authenticate.
  // `cancelled` set (a non-blocking init aborted): the retries stop with tribAborted.
  static Status connect(const std::string& hostPort, const std::string& authKey, int timeoutMs,
                        std::unique_ptr<TcpStore>* out,
                        size_t maxMessageBytes = storeproto::kDefaultMaxMessage,
                        const std::atomic<bool>* cancelled = nullptr);
  ~TcpStore() override;

  Status set(const std::string& key, const Blob& value) override;
  Status get(const std::string& key, Blob* value, int timeoutMs) override;
  Status add(const std::string& key, int64_t delta, int64_t* result) override;
  Status wait(const std::vector<std::string>& keys, int timeoutMs) override;
  Status multiGet(const std::vector<std::string>& keys, std::vector<Blob>* values, int timeoutMs) override;
  Status multiGetRange(const std::string& prefix, uint32_t first, uint32_t count, std::vector<Blob>* values,
                       int timeoutMs) override;
  Status remove(const std::string& key, bool* existed) override;

 private:
  TcpStore() = default;
  // Send one request and read its reply body (status byte stripped into *reply payload).
  Status call(const net::Writer& req, int waitMs, std::vector<uint8_t>* reply);
  // The challenge-response of store_handshake.hpp; on failure the connection is closed.
  Status authenticate(const std::string& authKey);
  Status dropWith(const Status& why);  // close the connection, return `why`
  Status waitImpl(const std::vector<std::string>& keys, int timeoutMs, bool values, std::vector<Blob>* out);
  std::mutex mu_;
  int fd_ = -1;
  std::string addr_;
  size_t maxMessage_ = storeproto::kDefaultMaxMessage;
  int ioTimeoutMs_ = 30000;  // bound on a non-waiting request's round trip
};

// A store on a directory every rank can see (local disk for one host, NFS/Lustre across hosts).
// set writes a temporary file then rename()s it into place, so readers never see a partial value;
// add serialises through flock() on a lock file, waiting for it at most `lockTimeoutMs` (as long
// as a TcpStore request by default).
class FileStore : public Store {
 public:
  static Status open(const std::string& dir, std::unique_ptr<FileStore>* out, int lockTimeoutMs = 30000);
  Status set(const std::string& key, const Blob& value) override;
  Status get(const std::string& key, Blob* value, int timeoutMs) override;
  Status add(const std::string& key, int64_t delta, int64_t* result) override;
  Status wait(const std::vector<std::string>& keys, int timeoutMs) override;
  Status multiGet(const std::vector<std::string>& keys, std::vector<Blob>* values, int timeoutMs) override;
  Status remove(const std::string& key, bool* existed) override;

 private:
  std::string pathOf(const std::string& key) const;
  bool readKey(const std::string& key, Blob* value) const;
  std::string dir_;
  int lockTimeoutMs_ = 30000;
};

}  // namespace trib
