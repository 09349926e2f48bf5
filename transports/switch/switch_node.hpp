// An aggregation node: one software switch of an in-network reduction tree (what trib-switchd
// runs, and what tests run in a thread).
//
// Resources are those of a hardware switch: `slots` aggregation slots of `slotBytes` each,
// shared by all groups. A group reserves a quota of slots when its first member registers (or
// is refused with the reason); a member keeps at most `quota` chunks in flight, so the group
// never holds more slots than it reserved. A slot reduces the contributions of a chunk in child
// order (child 0, then 1, ...: the reduction order is fixed, hence deterministic), forwards the
// partial to the parent switch if there is one, and multicasts the result to every child; the
// slot is free again as soon as its result has been handed down. Per collective (docs/SWITCH.md):
// reduce and reduce-scatter hand data only toward the chunk's owner (the others get a payload-free
// completion), broadcast carries only the root's data, all-gather places each rank's piece by rank,
// barrier is an empty chunk.
//
// Faults stay local: a connection that sends garbage, the wrong job key, or a chunk for a group
// it is not in is disconnected with a logged reason; a group whose member leaves or disconnects
// fails (every remaining member gets an Error message, so nobody waits for it); other groups and
// connections keep being served.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/status.hpp"
#include "transports/switch/switch_link.hpp"

namespace trib::sw {

struct SwitchConfig {
  std::string listen = "127.0.0.1:0";  // host:port; port 0 picks a free one
  std::string parent;                  // host:port of the parent switch; empty = this is a root
  uint32_t slots = 64;
  uint64_t slotBytes = 256 * 1024;
  std::string key;  // the job key: peers must present the same (hashed) key
  int connectTimeoutMs = 10000;
  LinkKind link = LinkKind::Tcp;  // of --listen and --parent alike (docs/SWITCH.md)
};

struct SwitchStats {
  uint64_t chunksReduced = 0;  // slots that completed at this switch
  uint64_t resultsSent = 0;    // result messages handed to children
  uint64_t payloadIn = 0;      // contribution bytes received from children
  uint64_t payloadOut = 0;     // result bytes sent to children
  uint64_t disconnects = 0;    // connections dropped for a protocol/key/membership violation
  uint64_t groupsEnded = 0;    // groups gone: members left or disconnected, or failed
  uint32_t freeSlots = 0;
};

class SwitchNode {
 public:
  // Binds the listen address and, with a parent, connects and says hello to it.
  static Status create(const SwitchConfig& cfg, std::unique_ptr<SwitchNode>* out);
  ~SwitchNode();

  std::string address() const;  // "127.0.0.1:45678"
  // Serve until `stop` becomes true (the foreground loop of trib-switchd).
  Status run(const std::atomic<bool>& stop);
  // Serve in a background thread (tests); stop() (or the destructor) ends it.
  void start();
  void stop();

  SwitchStats stats() const;
  // Reasons of disconnections and group failures so far (tests assert on them; also logged).
  std::vector<std::string> events() const;

  struct Impl;

 private:
  explicit SwitchNode(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace trib::sw
