// The communicator: who the ranks are, how to reach each peer, and the state every call
// checks (abort, async error, timeouts). The C ABI's tribComm_t is a handle on one of these.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "algo/schedule.hpp"
#include "bootstrap/cancellable_store.hpp"
#include "common/dtype.hpp"
#include "common/memory_kind.hpp"
#include "common/status.hpp"
#include "core/registration.hpp"
#include "exec/executor.hpp"
#include "exec/scratch_pool.hpp"
#include "transports/registry.hpp"
#include "transports/transport.hpp"

namespace trib {

class Store;
class StoreGroups;
class TcpStoreServer;
class Planner;
struct RankNodes;
class Topology;
struct SwitchRun;    // core/switch_coll.cpp
struct StreamState;  // core/stream_coll.hpp
struct StreamStateDeleter {
  void operator()(StreamState* s) const;
};

// Per-communicator settings: the config struct's fields, else the environment's.
struct CommConfig {
  std::chrono::milliseconds timeout{300000};
  std::string algo;         // TRIB_ALGO syntax
  bool algoStrict = false;  // TRIB_ALGO_STRICT: a forced algorithm that cannot run fails the call
  std::string transport;    // TRIB_TRANSPORT
  std::string name;
  uint64_t chunkBytes = 0;      // 0: the planner chooses
  int windowStreaming = -1;     // TRIB_WINDOW_STREAMING: -1 measured (auto), 0 plain, 1 streaming
  bool shareTransports = true;  // TRIB_SHARE_TRANSPORTS: transport contexts shared in the process
};
Status resolveConfig(const tribConfig_t* config, CommConfig* out);

// A request handed to the executor, after validation: what to run and where.
struct CollCall {
  Coll coll = Coll::AllReduce;
  const void* sendbuff = nullptr;
  void* recvbuff = nullptr;
  uint64_t count = 0;
  DataType dtype = tribFloat32;
  RedOp op = tribSum;
  int root = 0;
  // What the buffers are (classified once, at the API, after validation; Host for a NULL one).
  MemoryKind sendKind = MemoryKind::Host, recvKind = MemoryKind::Host;
};
// A tribRedOpCreatePreMulSum operator (core/premul.hpp).
struct PreMulSum {
  DataType dtype = tribFloat32;
  bool immediate = true;            // the scalar was copied at creation (tribScalarHostImmediate)
  std::vector<uint8_t> scalar;      // its bytes when immediate
  const void* scalarPtr = nullptr;  // read at each launch otherwise (tribScalarDevice)
};

// The kind a call's plan is made for: the kinds of both buffers, folded into the least capable.
MemoryKind callMemoryKind(const CollCall& call);

}  // namespace trib

// A materialised schedule, keyed by everything that shapes it. Repeated calls (the training-loop
// case) skip algorithm choice and generation entirely.
struct PlanKey {
  uint8_t coll;
  bool inPlace;
  int root;
  uint64_t count;
  trib::DataType dtype;
  trib::RedOp op;
  trib::MemoryKind memory;
  uint8_t windowCell;  // peer-memory schedules differ by the cell they start in
  bool operator==(const PlanKey&) const = default;
};
struct PlanKeyHash {
  size_t operator()(const PlanKey& k) const {
    size_t h = k.count * 0x9e3779b97f4a7c15ull;
    h ^= (static_cast<size_t>(k.coll) << 1) ^ (static_cast<size_t>(k.root) << 9) ^
         (static_cast<size_t>(k.dtype) << 40) ^ (static_cast<size_t>(k.op) << 48) ^
         (static_cast<size_t>(k.memory) << 56) ^ (static_cast<size_t>(k.windowCell) << 60) ^ k.inPlace;
    return h;
  }
};
struct CachedPlan {
  const trib::AlgoInfo* algo;
  std::shared_ptr<const std::vector<trib::Step>> steps;
  uint64_t scratchCount;
  // The last finished inline execution of these steps (ops.cpp runInline), rearmed for the next
  // call instead of building a new one.
  mutable std::shared_ptr<trib::Execution> idle;
  // The repeated call (Communicator::RepeatCall::id) whose buffers and options `idle` last ran
  // with, 0 if none, and which window cells that run moved on (bit 0: the host windows', bit 1:
  // the device windows'): a run of the same repeat reruns it as it is (ops.cpp runInline).
  mutable uint64_t idleCall = 0;
  mutable uint8_t idleCellMoves = 0;
};

namespace trib {

// A communicator's state: src/core alone reads and changes it. Callers hold a tribComm handle.
struct Communicator {
  // Identity and per-peer sequence counters; transports and the planner are added by the caller.
  Communicator(int rank_, int nranks_, uint64_t commId_, const trib::CommConfig& config_)
      : rank(rank_),
        nranks(nranks_),
        commId(commId_),
        config(config_),
        p2pSendSeq(nranks_, 0),
        p2pRecvSeq(nranks_, 0),
        creatorPid(currentPid()) {}
  int rank = 0;
  int nranks = 1;
  uint64_t commId = 0;  // identifies this communicator's world (splits derive theirs from it)
  trib::CommConfig config;
  // How it was created and where its ranks live: what its splits derive theirs from, so a split
  // repeats no exchange its parent already made (core/comm.cpp and core/connect.cpp only).
  struct Origin {
    std::shared_ptr<trib::Store> store;                 // rendezvous store (null for tribCommInitAll)
    std::shared_ptr<trib::TcpStoreServer> storeServer;  // held where this process serves the store
    std::shared_ptr<trib::StoreGroups> stores;          // instead of store: several, and
    std::vector<int> storeOf;                           // each rank's (CommSpec)
    std::string prefix;                                 // this communicator's keys in the store
    std::vector<trib::RankLocation> locations;          // every rank's, in rank order
    std::vector<int> hostOfRank;                        // index into hostDumps
    std::vector<std::string> hostDumps;                 // every host's topology when several; else empty
  } origin;
  std::shared_ptr<trib::Planner> planner;
  trib::Registrations registrations;  // tribCommRegister's buffers
  // Runs the local steps of host-memory calls, and gives their scratch (reused across calls).
  trib::Engine* engine = &trib::hostEngine();
  trib::ScratchPool scratchPool{*engine};
  // Executions given up mid-flight (a failed switch phase) whose operations a transport still
  // holds: declared before the transports, so they are destroyed after them. Pruned as their
  // operations complete (core/switch_coll.cpp), so a training loop does not grow it.
  // Each keeps the scratch its operations may still point into (the pool, declared above, outlives it).
  struct AbandonedExec {
    std::unique_ptr<trib::Execution> exec;
    std::shared_ptr<trib::Scratch> scratch;
  };
  std::vector<AbandonedExec> abandonedExecs;
  std::vector<std::unique_ptr<trib::Transport>> ownedTransports;
  std::vector<trib::Transport*> peers;  // peers[p]: how to reach rank p (self included)
  std::string transportSummary;         // the connected transports' names, "a+b": for logs and trib-perf

  uint32_t collSeq = 0;  // tags of collectives
  std::vector<uint32_t> p2pSendSeq, p2pRecvSeq;
  uint32_t splitSeq = 0;
  uint32_t shrinkSeq = 0;  // the same on every surviving rank: each makes the same shrinks

  // Set only after every transport has let go of in-flight operations (abortTransports), so a
  // thread that sees it may free its requests at once.
  std::atomic<bool> aborted{false};
  std::mutex abortMu;  // serialises aborting the transports (user abort vs. failure)
  // Fails everything in flight on every transport, once; then sets `aborted`. Any thread.
  void abortTransports(const trib::Status& why);
  std::atomic<bool> finalized{false};
  std::mutex errorMu;
  trib::Status asyncError;           // the error that broke the communicator, if any
  std::atomic<bool> broken{false};   // asyncError is set (checkUsable reads it without errorMu)
  std::atomic<int> outstanding{0};   // live requests
  std::vector<tribRequest*> active;  // requests still running: progressed together
  std::unordered_map<PlanKey, CachedPlan, PlanKeyHash> planCache;
  // Bumped by clearPlans(): what points into planCache (recentPlans) compares it.
  uint64_t planEpoch = 0;
  void clearPlans() {
    planCache.clear();
    ++planEpoch;
  }
  // The last plan looked up for each window cell (a repeated peer-memory call alternates cells),
  // checked before the hash lookup (core/ops.cpp planFor).
  struct RecentPlan {
    PlanKey key{};
    const CachedPlan* plan = nullptr;
    uint64_t epoch = 0;
  } recentPlans[2];
  // The last call that was validated and classified (core/ops.cpp checkedCall), as made and as
  // classified: the same call again (the training-loop case) is not validated and classified
  // again while the memory it was classified by is unchanged (the process's shared allocations
  // and this communicator's registrations have the same generations).
  struct RepeatCall {
    bool valid = false;
    trib::CollCall made, call;
    trib::CollArgs args;
    uint64_t sharedGeneration = 0, registrationGeneration = 0;
    // A number no other call recorded here had (from repeatCalls): what a run of it may keep.
    uint64_t id = 0;
    // The plans it ran with, one per window cell, while planEpoch is theirs (ops.cpp runBlocking).
    const CachedPlan* plans[2] = {nullptr, nullptr};
    uint64_t plansEpoch[2] = {0, 0};
  } lastCall;
  uint64_t repeatCalls = 0;  // calls recorded in lastCall so far
  // tribRedOpCreatePreMulSum's operators, by value (from tribNumOps up; core/premul.hpp).
  std::map<int, trib::PreMulSum> preMulSums;
  int nextPreMulSum = tribNumOps;

  // In-network reduction (core/switch_coll.cpp): this rank's aggregation-switch client, if any.
  std::unique_ptr<trib::CollectiveOffload> switchOffload;
  // hier_switch: this rank's slice group at the switch (the ranks with its rank mod sliceStride,
  // one per domain of sliceStride ranks); null when the domains do not allow one.
  std::unique_ptr<trib::CollectiveOffload> sliceOffload;
  int sliceStride = 0;
  // Every rank's window, when a transport maps them all (owned by it; the shm transport's when
  // every rank is on this host): what peer-memory schedules (one-shot, two-shot) run over.
  // windowCell: the cell the next such call starts in (algo/schedule.hpp), the same on every rank.
  trib::PeerWindows* windows = nullptr;
  int windowCell = 0;
  // The same for device memory: every rank's device window (the nvlink provider's), and its cell.
  trib::PeerWindows* deviceWindows = nullptr;
  int deviceWindowCell = 0;
  trib::WindowWriteModes windowWrites{config.windowStreaming};  // plain or streaming window stores
  bool switchDisabled = false;  // set on every rank alike once the ranks agreed the switch failed
  // Collectives (a bit each) whose forced algorithm could not run and was warned about.
  mutable std::atomic<uint32_t> forcedAlgoWarned{0};

  // A fork()ed child inherits the communicator's memory but not its threads, and its shared
  // segments and sockets are the parent's: it can neither use nor destroy it (tribInvalidUsage).
  int creatorPid;
  static int currentPid();
  trib::Status checkProcess() const;

  void setAsyncError(const trib::Status& s);
  trib::Status checkUsable() const;  // another process / aborted / finalized / broken -> error

  // The CUDA device its stream-ordered calls run on, named at creation (tribCommInitAll's devlist);
  // -1: the device of its first stream-ordered call's buffers, else the caller's current one.
  int boundDevice = -1;

  // Stream-ordered calls (core/stream_coll.hpp), made at the first; last, so destroyed (its progress
  // thread drained and joined) before everything it uses.
  std::unique_ptr<trib::StreamState, trib::StreamStateDeleter> streams;
};

}  // namespace trib

// The C ABI's opaque communicator (tribComm_t): a handle on the core's Communicator. The API layer
// passes impl() to the core's entry points (below) and reads nothing else of it.
struct tribComm {
  explicit tribComm(std::unique_ptr<trib::Communicator> impl);
  ~tribComm();
  trib::Communicator* impl() const { return impl_.get(); }
  // Non-blocking init (tribConfig_t.blocking = 0): the handle exists before its communicator.
  // `join` runs on a thread of its own and makes the communicator; until it has, ready() is
  // tribInProgress; a failed join leaves its error there. tribCommAbort meanwhile is kept for when
  // it exists, and `join`'s waits on its peers in the store end at once (its `cancelled` flag is
  // set; bootstrap/cancellable_store.hpp). The destructor waits for the join.
  static tribComm* initInBackground(std::function<trib::Status(const trib::CancelFlag&, tribComm**)> join);
  trib::Status ready() const;
  bool joining() const;
  trib::Status abortWhenJoined();  // an abort: now, or once the join has made the communicator
  // What the C API answers or checks directly (comm.cpp).
  int rank() const;
  int nranks() const;
  tribResult_t asyncError() const;    // tribSuccess, the error that broke it, or tribAborted
  trib::Status checkProcess() const;  // refuses a fork()ed child
  trib::Status registerBuffer(void* buf, size_t bytes, void** handle);
  trib::Status deregisterBuffer(void* handle);

 private:
  tribComm() = default;
  std::unique_ptr<trib::Communicator> impl_;
  mutable std::mutex joinMu_;
  // Set once the communicator exists (made here, or joined successfully): ready() then takes no
  // lock, which every call paid for (two locked instructions of an 8-byte all-reduce's path).
  std::atomic<bool> joined_{false};
  bool joining_ = false, abortAfterJoin_ = false;
  std::shared_ptr<std::atomic<bool>> joinCancelled_;  // set by an abort while joining
  trib::Status joinResult_;
  std::thread joinThread_;
};

// The C ABI's opaque request: one rank's run of one operation.
struct tribRequest {
  trib::Communicator* comm = nullptr;
  std::unique_ptr<trib::Execution> exec;
  trib::Scratch scratch;      // from the communicator's pool
  trib::Scratch preMulInput;  // a pre-multiplied sum's scaled input (core/premul.hpp)
  // What it runs, for messages ("allreduce(count 1024, float32, sum) on rank 0 of 4 [ring]"):
  // kept as fields and formatted by what() only when a message needs it, off the hot path.
  trib::CollCall call;
  int p2pPeer = -1;  // >= 0: a send (p2pSend) or receive with this peer instead of `call`
  bool p2pSend = false;
  const char* algo = nullptr;      // the schedule's algorithm
  const char* fallback = nullptr;  // the host algorithm a switch collective fell back to
  std::string what() const;
  bool done = false;
  trib::Status result;
  std::chrono::steady_clock::time_point started;
  std::shared_ptr<trib::SwitchRun> switchRun;  // Algo::Switch: agreement and host fallback phases
  // A peer-memory plan's execution starts only once the communicator's earlier one finished (their
  // cells and signal counts follow each other); until then it waits here, not started.
  bool usesWindows = false;
  bool deferred = false;
};

namespace trib {

// Creation. Every communicator (tribCommInitAll, InitRank, InitFromEnv, Split) is made by
// createComm from a CommSpec; the entry points differ only in how they fill it.
struct CommSpec {
  int rank = 0, nranks = 1;
  uint64_t commId = 0;  // the same on every rank
  CommConfig config;
  // The rendezvous: ranks in any processes meet under `prefix` in `store`. Without a store the
  // ranks are in this process, created together, and connect with no exchange.
  std::shared_ptr<Store> store;
  std::string prefix;
  std::shared_ptr<TcpStoreServer> server;  // where this process serves the store (this rank's own)
  // Instead of `store`, several (tribCommInitRankScalable): rank r meets the others through store
  // storeOf[r] (bootstrap/store_groups.hpp).
  std::shared_ptr<StoreGroups> stores;
  std::vector<int> storeOf;
  // A non-blocking init's: an abort sets it, and the exchange's waits in the store end at once.
  CancelFlag cancelled;
  // Where every rank lives and, with several hosts, every host's topology (in order of the hosts'
  // first ranks), when already known (ranks created together; a split, from its parent): then
  // nothing is exchanged for them.
  std::vector<RankLocation> locations;
  std::vector<std::string> hostDumps;
  std::shared_ptr<Planner> planner;  // one to share (a split of the same shape); null: made here
};
// Collective over spec.nranks ranks (through the store, when there is one): learns what the spec
// does not say, makes the planner, connects the transports, attaches the switch (connect.cpp).
Status createComm(const CommSpec& spec, tribComm** out);
// N ranks in this process, no store; `devices` (may be null): rank r's CUDA device, checked here
// against the devices the driver reports.
Status commCreateLocal(int nranks, const int* devices, tribComm** comms);
// `cancelled` (may be null): a non-blocking init's abort flag (CommSpec::cancelled).
Status commInitRank(int nranks, const tribUniqueId& id, int rank, const tribConfig_t* config, tribComm** out,
                    const CancelFlag& cancelled = nullptr);
// Over nIds root stores (nIds == 1: commInitRank); the caller checked nIds and ids.
Status commInitRankScalable(int nranks, int nIds, const tribUniqueId* ids, int rank,
                            const tribConfig_t* config, tribComm** out,
                            const CancelFlag& cancelled = nullptr);
Status commInitFromEnv(const tribConfig_t* config, tribComm** out);
// Gives every peer of `comm` the transport the registry (transports/registry.hpp) chooses for the
// pair, under config.transport, and connects those transports: collective over the comm's ranks
// through `oob`; without one (ranks created together in this process), only transports that need
// no exchange can serve.
Status connectTransports(Communicator* comm, const std::vector<RankLocation>& locations,
                         const OobAllGather& oob);
Status makeUniqueId(tribUniqueId* id);
Status commSplit(Communicator* comm, int color, int key, const tribConfig_t* config, tribComm** out);
// tribCommShrink: a communicator of the ranks not excluded, made by them alone (no call on comm).
Status commShrink(Communicator* comm, const int* exclude, int excludeCount, const tribConfig_t* config,
                  int flags, tribComm** out);
// A communicator of the parent's `oldRanks`, in that order (split and shrink).
Status commOfMembers(Communicator* parent, const std::vector<int>& oldRanks, uint64_t commId,
                     const std::string& prefixSuffix, const tribConfig_t* cfg, tribComm** out);
Status commAbort(Communicator* comm);
Status commDestroy(tribComm* comm);  // the handle and its communicator
Status commFinalize(Communicator* comm);

// Operations. validate -> plan -> materialise the schedule -> executor.
// validateCall: a clear error, nothing touched; on success *argsOut (when given) is argsFor(call).
Status validateCall(const Communicator* comm, const CollCall& call, CollArgs* argsOut = nullptr);
Status launchCollective(Communicator* comm, const CollCall& call, tribRequest** out);
// A blocking collective: launched and waited for (or joined to the current group).
Status runBlocking(Communicator* comm, const CollCall& call);
// "allreduce(count 1024, float32, sum) on rank 0 of 4 [ring]" (algo may be null).
std::string describeCall(const Communicator* comm, const CollCall& call, const char* algo);
Status launchP2p(Communicator* comm, bool isSend, const void* buf, uint64_t count, DataType dtype, int peer,
                 tribRequest** out);

// How a waiting thread spends its idle rounds: ranks are often more threads or processes than
// cores, so spin a while (adapted per thread, core/ops.cpp), then yield, and once idle for a
// while, sleep a little per round so the peers that must act can run. Time-based, so a cheap poll
// does not reach the sleep sooner.
class Backoff {
 public:
  // A communicator with this many ranks on this host was made: with more ranks than the process
  // may use cores, every wait spins the least before it yields (the peer may need this core).
  static void noteRanksOnThisHost(int ranks);

  ~Backoff() { ended(); }
  void reset() {  // something moved: the wait so far ended
    ended();
    idle_ = 0;
  }
  void idle();

 private:
  void ended();      // adapts this thread's spin budget to how the wait ended
  unsigned spins();  // this wait's spins before yielding (chosen at its first idle round)
  unsigned idle_ = 0, spins_ = 0;
  std::chrono::steady_clock::time_point since_;
};

// Progress and completion. `timeout` < 0 waits forever.
Status requestTest(tribRequest* req, bool* done);
Status requestWait(tribRequest* req, std::chrono::milliseconds timeout, bool abortOnTimeout);
void requestFree(tribRequest* req);

// Where each rank lives: its host's index and its rank among that host's ranks.
struct RankPlacement {
  std::vector<int> hostOfRank, localRankOf;
  static RankPlacement singleHost(int nranks) {
    RankPlacement p;
    p.hostOfRank.assign(nranks, 0);
    for (int r = 0; r < nranks; ++r) p.localRankOf.push_back(r);
    return p;
  }
};
// The communicator's planner (plan_select.cpp). hostDumps: every host's topology dump, one per
// host, when ranks span several hosts (else empty).
Status makePlanner(const RankPlacement& placement, const std::vector<std::string>& hostDumps,
                   const CommConfig& config, std::shared_ptr<Planner>* out);
// The topology node of each rank, as makePlanner places them: rank r on its host's rank nodes
// (GPUs, else CPUs) round-robin by local rank; merged: node names carry "h<host>." (mergeHostTopologies).
// Empty when the topology has no rank nodes.
RankNodes placeRanks(const Topology& topo, const RankPlacement& placement, bool merged);
Status localTopologyDump(std::string* out);  // this host's topology, for the exchange at init
// Who asks chooseAlgorithm: the user's call; the host fallback a switch collective finishes on
// after the switch failed mid-call (it must run, so TRIB_ALGO_STRICT does not refuse it); the
// ranks' agreement on whether the switch phase succeeded (host algorithms only: the switch is in
// doubt; internal, so a forced algorithm it cannot use is not reported).
enum class ChoiceFor { Call, Failover, SwitchAgreement };
// The algorithm for `call` (the planner, told its dtype, op and memory kind, under TRIB_ALGO /
// TRIB_TUNE / config.algo); also sets the slice size and domain size in *args. A forced algorithm
// that cannot run is warned about once, or with TRIB_ALGO_STRICT refused (see ChoiceFor).
Status chooseAlgorithm(const Communicator* comm, const CollCall& call, CollArgs* args, const AlgoInfo** out,
                       ChoiceFor purpose = ChoiceFor::Call);
// The collective offload that runs `algo`'s switch_reduce steps (nullptr for host algorithms).
CollectiveOffload* offloadFor(const Communicator* comm, Algo algo);
// The windows a call's peer-memory steps use: the device windows for device memory on their
// device, the host windows for host memory (nullptr: none).
PeerWindows* callWindows(const Communicator* comm, const CollCall& call);
// Sets a's window size and cell from callWindows (none: no window size).
void setWindowArgs(const Communicator* comm, const CollCall& call, CollArgs* a);
// The schedule's request for a validated call on this communicator (its window cell included).
CollArgs argsFor(const Communicator* comm, const CollCall& call);
// What an execution of `algo` for `call` runs on besides the transports: sets opts' nranks and
// offload and, for a peer-memory schedule, the windows and the call's fingerprint, and moves the
// communicator's next window cell past the cells this call uses (every rank alike).
void attachRunResources(Communicator* comm, const CollCall& call, const CollArgs& args, Algo algo,
                        ExecOptions* opts);

}  // namespace trib
