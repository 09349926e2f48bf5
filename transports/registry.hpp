// The transport registry: every way of moving bytes between two ranks that this build has, each
// with what it can do, which pairs of ranks it can connect, and how to connect it. Core chooses
// a transport for every pair of ranks from this table (by priority, among those that can connect
// the pair; TRIB_TRANSPORT forces one) and never names a transport itself. The collective
// offloads (the aggregation switch) are listed here too, below.
//
// The table is built on first use from the descriptors each transport folder provides (no
// self-registering globals, so no static-initialisation order to get wrong), in priority order.
// A transport this build lacks (UCX without libucx-dev) is still listed, with why it is missing,
// so TRIB_TRANSPORT and trib-info can say so.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/memory_kind.hpp"
#include "common/status.hpp"
#include "transports/transport.hpp"

namespace trib {

// Where a rank lives, as every rank publishes it at init: what canConnect decides from.
struct RankLocation {
  char host[64] = {};    // hostname + boot id: equal means "same kernel", so shared memory works
  uint64_t process = 0;  // random per process: with the pid, equal means "same address space"
  int32_t pid = 0;
  uint32_t flags = 0;  // kLocation* bits
};
// RankLocation::flags: its process had a current CUDA context at init (it set its device).
constexpr uint32_t kLocationCudaContext = 1;
// RankLocation::flags: its process has an active RDMA port (what the verbs transport needs).
constexpr uint32_t kLocationRdma = 2;
RankLocation thisRankLocation();  // this process's location (the same for all its ranks)
bool sameHost(const RankLocation& a, const RankLocation& b);
bool sameProcess(const RankLocation& a, const RankLocation& b);  // implies sameHost
// "host x, pid 123": for messages.
std::string describeLocation(const RankLocation& loc);

std::string memoryKindSetNames(MemoryKindSet set);  // "host, host-shared, registered"

struct TransportConnectArgs;

// What a transport can do.
struct TransportCaps {
  MemoryKindSet reads = 0;    // buffers it can send from
  MemoryKindSet writes = 0;   // buffers it can receive into
  MemoryKindSet reduces = 0;  // buffers it can reduce-receive into (and read the local operand of)
  // Kinds of reads and writes it reaches only where probe() says this process can (device memory
  // through a NIC needs the driver's and the kernel's support): transportMemoryReach drops them
  // elsewhere. probe is asked at connect, once per transport connected.
  MemoryKindSet probed = 0;
  bool (*probe)(const TransportConnectArgs& args) = nullptr;
  bool twoSided = false;  // matched send/receive (Transport::postSend/postRecv)
  bool windows = false;   // every rank's window mapped for peer-memory steps (PeerWindows)
  bool zeroCopy = false;  // a send reaches the receiver with no staging copy of its own
};

// What a transport's connect is given. Connecting is collective over the communicator: every rank
// connects every transport that any pair of ranks was given (the same list, in registry order, on
// every rank), including one that reaches none of its own peers, so exchanges line up.
struct TransportConnectArgs {
  int rank = 0, nranks = 1;
  uint64_t commId = 0;                                   // distinguishes communicators (tags, names)
  const std::vector<RankLocation>* locations = nullptr;  // every rank's, in rank order
  std::vector<int> peers;                                // the ranks this rank reaches with it (may be empty)
  OobAllGather oob;                                      // over all nranks; empty: the comm has no exchange
  std::chrono::milliseconds timeout{300000};             // the communicator's (TRIB_TIMEOUT)
  // Share this process's transport contexts (a UCX worker, say) with its other communicators
  // (TRIB_SHARE_TRANSPORTS); false: contexts of its own.
  bool shareContexts = true;
};

// The memory a transport connected with `args` reaches: its caps, less the probed kinds where its
// probe says no (or it has none). What core gives the transport (Transport::setMemoryReach).
struct MemoryReach {
  MemoryKindSet reads = 0, writes = 0, reduces = 0;
};
MemoryReach transportMemoryReach(const TransportCaps& caps, const TransportConnectArgs& args);

struct TransportDescriptor {
  const char* name;      // TRIB_TRANSPORT's value; Transport::name() of what connect makes
  const char* reaches;   // which peers it serves, for messages and trib-info
  const char* notBuilt;  // nullptr: built; else why this build lacks it
  TransportCaps caps;    // what connect makes reaches (transportMemoryReach, Transport::setMemoryReach)
  int priority;          // higher is preferred where several can connect a pair
  bool needsExchange;    // connect calls args.oob (cannot connect a comm made without a store)
  // Whether it can connect a rank at `self` with one at `peer`. Symmetric, and decided from the
  // locations alone, so every rank reaches the same choice for every pair.
  bool (*canConnect)(const RankLocation& self, const RankLocation& peer);
  Status (*connect)(const TransportConnectArgs& args, std::unique_ptr<Transport>* out);
};

// Every transport, built or not, highest priority first.
const std::vector<TransportDescriptor>& transportRegistry();
const TransportDescriptor* findTransport(const std::string& name);  // nullptr: no such name

// The transport for every pair of ranks of a communicator, decided identically on every rank.
struct TransportChoice {
  std::vector<const TransportDescriptor*> used;  // connected on every rank, in registry order
  std::vector<const TransportDescriptor*> peer;  // peer[p]: what reaches p from `rank` (self included)
};
// `forced` (TRIB_TRANSPORT) empty: per pair, the highest-priority built transport that can connect
// it. Otherwise that transport for every pair of distinct ranks (a rank always reaches itself
// through the first choice: its messages to itself never leave the process). Errors name the pair
// and why: an unknown or unbuilt name, a forced transport that cannot connect a pair, a pair no
// built transport connects, or one that needs an exchange on a communicator without one.
Status chooseTransports(const std::vector<RankLocation>& locations, int rank, const std::string& forced,
                        bool haveExchange, TransportChoice* out);

// ---- window providers ------------------------------------------------------------------------
// Transports that only map every rank's window (no two-sided messages: caps.twoSided false), such
// as the CUDA-IPC / NVLink one for device memory. They are never a pair's choice; a communicator
// connects each one beside its pair transports when it connects every pair of its ranks.
const std::vector<TransportDescriptor>& windowProviderRegistry();
// The built providers that connect every pair of `locations` (in registry order, the same on
// every rank); none for a single rank or without an exchange when they need one.
std::vector<const TransportDescriptor*> chooseWindowProviders(const std::vector<RankLocation>& locations,
                                                              bool haveExchange);

// ---- collective offloads -------------------------------------------------------------------
// Services a communicator's ranks attach to as a group, beside their transports: an aggregation
// switch's in-network reduction. Core attaches through these descriptors and names none of them.

// What attaching one member of a group is given.
struct OffloadAttachArgs {
  std::string address;  // the node this member attaches at (its leaf)
  uint64_t group = 0;   // the same on every member; distinct per group
  // Per level, leaf first: (members below that node, this member's index among them).
  std::vector<std::pair<uint32_t, uint32_t>> path;
  std::vector<int> leafRanks;               // the communicator rank of each child of the leaf, by child index
  std::chrono::milliseconds timeout{1000};  // connect and register
};

struct OffloadDescriptor {
  const char* name;      // for messages and trib-info
  const char* notBuilt;  // nullptr: built; else why this build lacks it
  // Where this process's ranks attach when its environment says so (TRIB_SWITCH); "": wherever
  // the topology's addr= puts them.
  std::string (*configuredAddress)();
  // Attaches one member. Refusal or an unreachable node is an error the caller plans around; on
  // success *detail says what the group was granted, for the log ("16 slots of 65536 bytes").
  Status (*attach)(const OffloadAttachArgs& args, std::unique_ptr<CollectiveOffload>* out,
                   std::string* detail);
};

// Every collective offload, built or not.
const std::vector<OffloadDescriptor>& offloadRegistry();
// The in-network reduction service communicators attach to: the first built one (nullptr: none).
const OffloadDescriptor* aggregationOffload();

}  // namespace trib
