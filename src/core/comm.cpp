// Communicator lifetime: creation (in-process worlds, unique ids, split), abort, destroy.
#include "core/comm.hpp"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "common/env.hpp"
#include "common/log.hpp"
#include "common/random.hpp"
#include "core/group.hpp"
#include "core/stream_coll.hpp"
#include "core/switch_coll.hpp"
#include "cuda/cuda_api.hpp"
#include "transports/registry.hpp"

void trib::Communicator::setAsyncError(const trib::Status& s) {
  std::lock_guard<std::mutex> lock(errorMu);
  if (asyncError.ok()) asyncError = s;
  broken.store(!asyncError.ok(), std::memory_order_release);
}

void trib::Communicator::abortTransports(const trib::Status& why) {
  std::lock_guard<std::mutex> lock(abortMu);
  if (aborted.load()) return;
  for (auto& t : ownedTransports) t->abort(why);
  if (switchOffload) switchOffload->abort(why);
  if (sliceOffload) sliceOffload->abort(why);
  aborted.store(true);
}

// getpid() is a system call (glibc no longer caches it) and checkProcess runs on every call, each
// tribTest poll included: the pid is cached, and a fork()ed child refreshes it before it runs.
namespace {
std::atomic<int> cachedPid{0};
void refreshPid() { cachedPid.store(static_cast<int>(getpid()), std::memory_order_relaxed); }
}  // namespace

int trib::Communicator::currentPid() {
  static std::once_flag once;
  std::call_once(once, [] {
    refreshPid();
    pthread_atfork(nullptr, nullptr, refreshPid);
  });
  return cachedPid.load(std::memory_order_relaxed);
}

trib::Status trib::Communicator::checkProcess() const {
  if (currentPid() == creatorPid) return trib::Status::Ok();
  return trib::errorf(tribInvalidUsage,
                      "communicator (rank %d of %d) was created by process %d; this process (%d) was "
                      "fork()ed from it and can neither use nor destroy it: create communicators "
                      "after fork(), in the process that uses them",
                      rank, nranks, creatorPid, currentPid());
}

trib::Status trib::Communicator::checkUsable() const {
  using trib::errorf;
  // Every call asks: the usual answer in four loads (currentPid() would take its once-flag).
  if (cachedPid.load(std::memory_order_relaxed) == creatorPid && !broken.load(std::memory_order_acquire) &&
      !aborted.load() && !finalized.load())
    return trib::Status::Ok();
  TRIB_RETURN_IF_ERROR(checkProcess());
  if (broken.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(const_cast<std::mutex&>(errorMu));
    if (!asyncError.ok()) {
      return trib::Status(asyncError.code(),
                          "communicator is broken by an earlier error: " + asyncError.message());
    }
  }
  if (aborted.load()) {
    return errorf(tribAborted, "communicator (rank %d of %d) was aborted; destroy it and create a new one",
                  rank, nranks);
  }
  if (finalized.load()) {
    return errorf(tribInvalidUsage,
                  "communicator (rank %d of %d) was finalized; only tribCommDestroy is allowed", rank,
                  nranks);
  }
  return trib::Status::Ok();
}

tribComm::tribComm(std::unique_ptr<trib::Communicator> impl)
    : impl_(std::move(impl)), joined_(impl_ != nullptr) {}
tribComm::~tribComm() {
  if (joinThread_.joinable()) joinThread_.join();
}

tribComm* tribComm::initInBackground(std::function<trib::Status(const trib::CancelFlag&, tribComm**)> join) {
  auto* h = new tribComm();
  h->joining_ = true;
  h->joinCancelled_ = std::make_shared<std::atomic<bool>>(false);
  h->joinThread_ = std::thread([h, join = std::move(join), cancelled = trib::CancelFlag(h->joinCancelled_)] {
    tribComm* made = nullptr;
    trib::Status st = join(cancelled, &made);
    std::lock_guard<std::mutex> lock(h->joinMu_);
    if (st.ok() && made) {
      h->impl_ = std::move(made->impl_);
      delete made;
      if (h->abortAfterJoin_) (void)trib::commAbort(h->impl_.get());
    } else if (st.ok()) {
      st = trib::errorf(tribInternalError, "non-blocking init made no communicator");
    }
    h->joinResult_ = st;
    h->joining_ = false;
    h->joined_.store(st.ok(), std::memory_order_release);
  });
  return h;
}

bool tribComm::joining() const {
  std::lock_guard<std::mutex> lock(joinMu_);
  return joining_;
}

trib::Status tribComm::ready() const {
  if (joined_.load(std::memory_order_acquire)) return trib::Status::Ok();
  std::lock_guard<std::mutex> lock(joinMu_);
  if (joining_) {
    return trib::errorf(tribInProgress,
                        "the communicator is still being initialised (non-blocking init): poll "
                        "tribCommGetAsyncError until it is no longer tribInProgress");
  }
  if (!joinResult_.ok()) {
    trib::Status e = joinResult_;
    return e.prefix("the communicator's non-blocking init failed: ");
  }
  return trib::Status::Ok();
}

trib::Status tribComm::abortWhenJoined() {
  {
    std::lock_guard<std::mutex> lock(joinMu_);
    if (joining_) {
      abortAfterJoin_ = true;  // should the join make it after all
      joinCancelled_->store(true, std::memory_order_release);
      return trib::Status::Ok();
    }
    if (!impl_) return trib::Status::Ok();  // a failed join: nothing to abort
  }
  return trib::commAbort(impl_.get());
}
int tribComm::rank() const { return impl_->rank; }
int tribComm::nranks() const { return impl_->nranks; }
tribResult_t tribComm::asyncError() const {
  std::lock_guard<std::mutex> lock(impl_->errorMu);
  return impl_->asyncError.ok() && impl_->aborted.load() ? tribAborted : impl_->asyncError.code();
}
trib::Status tribComm::checkProcess() const { return impl_->checkProcess(); }
trib::Status tribComm::registerBuffer(void* buf, size_t bytes, void** handle) {
  TRIB_RETURN_IF_ERROR(impl_->checkProcess());
  return impl_->registrations.add(buf, bytes, handle);
}
trib::Status tribComm::deregisterBuffer(void* handle) {
  TRIB_RETURN_IF_ERROR(impl_->checkProcess());
  return impl_->registrations.remove(handle);
}

namespace trib {

namespace {

uint64_t mix(uint64_t x) {  // splitmix64 finaliser: derives child ids deterministically
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

Status commCreateLocal(int nranks, const int* devices, tribComm** comms) {
  if (devices) {
    for (int r = 0; r < nranks; ++r)
      if (devices[r] < 0)
        return errorf(tribInvalidArgument,
                      "tribCommInitAll: devlist[%d] is %d; CUDA devices are numbered from 0", r, devices[r]);
    const char* why = "tribCommInitAll: devlist names CUDA devices, but ";
    TRIB_RETURN_IF_ERROR(cuda::deviceStatus().prefix(why));
    int count = 0;
    TRIB_RETURN_IF_ERROR(cuda::deviceCount(&count).prefix(why));
    for (int r = 0; r < nranks; ++r)
      if (devices[r] >= count)
        return errorf(tribInvalidArgument,
                      "tribCommInitAll: devlist[%d] is device %d, but there are %d CUDA device(s)", r,
                      devices[r], count);
  }
  CommSpec spec;
  TRIB_RETURN_IF_ERROR(resolveConfig(nullptr, &spec.config));
  spec.nranks = nranks;
  spec.commId = randomId64();
  spec.locations.assign(nranks, thisRankLocation());
  TRIB_RETURN_IF_ERROR(makePlanner(RankPlacement::singleHost(nranks), {}, spec.config, &spec.planner));
  for (int r = 0; r < nranks; ++r) {
    spec.rank = r;
    Status st = createComm(spec, &comms[r]);
    if (!st.ok()) {
      while (r > 0) delete comms[--r];
      return st;
    }
    if (devices) comms[r]->impl()->boundDevice = devices[r];
  }
  agreeSwitchLocal(comms, nranks);
  return Status::Ok();
}

Status commSplit(Communicator* comm, int color, int key, const tribConfig_t* cfg, tribComm** out) {
  return groupSplit(comm, color, key, cfg, out);
}

// Called once the (color, key) table of every rank is known.
Status finishSplit(Communicator* parent, const int32_t* table, uint32_t splitSeq, int color,
                   const tribConfig_t* cfg, tribComm** out) {
  *out = nullptr;
  if (color == TRIB_SPLIT_NOCOLOR) return Status::Ok();
  struct Member {
    int key, oldRank;
  };
  std::vector<Member> members;
  for (int r = 0; r < parent->nranks; ++r) {
    if (table[2 * r] == color) members.push_back({table[2 * r + 1], r});
  }
  std::stable_sort(members.begin(), members.end(), [](const Member& a, const Member& b) {
    return a.key != b.key ? a.key < b.key : a.oldRank < b.oldRank;
  });
  std::vector<int> oldRanks;
  for (const Member& m : members) oldRanks.push_back(m.oldRank);
  const uint64_t commId =
      mix(parent->commId ^ mix(splitSeq) ^ mix(static_cast<uint64_t>(static_cast<uint32_t>(color)) << 1));
  return commOfMembers(parent, oldRanks, commId, strprintf("/split%u/%d", splitSeq, color), cfg, out);
}

// A communicator of `oldRanks` (the parent's ranks, in their new order; the caller among them):
// what split and shrink make. Its ranks' locations and hosts' topologies are the parent's, so
// nothing is exchanged on the parent; ranks in other processes meet under the parent's store.
Status commOfMembers(Communicator* parent, const std::vector<int>& oldRanks, uint64_t commId,
                     const std::string& prefixSuffix, const tribConfig_t* cfg, tribComm** out) {
  CommSpec spec;
  for (size_t i = 0; i < oldRanks.size(); ++i) {
    if (oldRanks[i] == parent->rank) spec.rank = static_cast<int>(i);
  }
  spec.nranks = static_cast<int>(oldRanks.size());
  spec.commId = commId;
  spec.config = parent->config;
  if (cfg) TRIB_RETURN_IF_ERROR(resolveConfig(cfg, &spec.config));
  const Communicator::Origin& from = parent->origin;
  spec.store = from.store;
  spec.server = from.storeServer;
  spec.stores = from.stores;
  if (from.stores)
    for (int old : oldRanks) spec.storeOf.push_back(from.storeOf[old]);  // each rank keeps its store
  if (spec.store || spec.stores) spec.prefix = from.prefix + prefixSuffix;
  std::vector<int> hostIndex(from.hostDumps.size(), -1);  // the parent's host -> the new one's
  for (int old : oldRanks) {
    spec.locations.push_back(from.locations[old]);
    if (from.hostDumps.empty()) continue;
    int& h = hostIndex[from.hostOfRank[old]];
    if (h < 0) {
      h = static_cast<int>(spec.hostDumps.size());
      spec.hostDumps.push_back(from.hostDumps[from.hostOfRank[old]]);
    }
  }
  // Ranks created together share one planner, as the parent's do, while the shape is the same.
  if (!spec.store && !spec.stores && spec.nranks == parent->nranks && !cfg) spec.planner = parent->planner;
  return createComm(spec, out);
}

Status commShrink(Communicator* parent, const int* exclude, int excludeCount, const tribConfig_t* cfg,
                  int flags, tribComm** out) {
  *out = nullptr;
  TRIB_RETURN_IF_ERROR(parent->checkProcess());  // a broken or aborted parent may shrink
  if (parent->finalized.load())
    return errorf(tribInvalidUsage, "tribCommShrink: the communicator was finalized");
  if (flags != TRIB_SHRINK_DEFAULT && flags != TRIB_SHRINK_ABORT)
    return errorf(tribInvalidArgument,
                  "tribCommShrink: flags %d must be TRIB_SHRINK_DEFAULT or TRIB_SHRINK_ABORT", flags);
  if (excludeCount < 0 || excludeCount >= parent->nranks) {
    return errorf(tribInvalidArgument, "tribCommShrink: excludeRanksCount %d must be in 0..%d", excludeCount,
                  parent->nranks - 1);
  }
  if (excludeCount > 0 && !exclude)
    return errorf(tribInvalidArgument, "tribCommShrink: excludeRanksList is NULL but the count is %d",
                  excludeCount);
  std::vector<bool> gone(static_cast<size_t>(parent->nranks), false);
  uint64_t listHash = 0;
  for (int i = 0; i < excludeCount; ++i) {
    const int r = exclude[i];
    if (r < 0 || r >= parent->nranks) {
      return errorf(tribInvalidArgument, "tribCommShrink: excluded rank %d is out of range 0..%d", r,
                    parent->nranks - 1);
    }
    if (gone[r]) return errorf(tribInvalidArgument, "tribCommShrink: rank %d is excluded twice", r);
    if (r == parent->rank) {
      return errorf(tribInvalidArgument,
                    "tribCommShrink: rank %d excludes itself (excluded ranks do not call tribCommShrink)", r);
    }
    gone[r] = true;
    listHash ^= mix(static_cast<uint64_t>(r) + 1);
  }
  if (flags == TRIB_SHRINK_ABORT) TRIB_RETURN_IF_ERROR(commAbort(parent));
  std::vector<int> survivors;
  for (int r = 0; r < parent->nranks; ++r)
    if (!gone[r]) survivors.push_back(r);
  const uint32_t seq = parent->shrinkSeq++;
  const uint64_t commId = mix(parent->commId ^ mix((uint64_t{0x5348524bu} << 32) | seq) ^ listHash);
  return commOfMembers(parent, survivors, commId, strprintf("/shrink%u", seq), cfg, out);
}

Status commAbort(Communicator* comm) {
  TRIB_RETURN_IF_ERROR(comm->checkProcess());
  if (!comm->aborted.load()) {
    TRIB_WARN("init", "rank %d of %d: communicator aborted", comm->rank, comm->nranks);
    comm->abortTransports(errorf(tribAborted, "communicator (rank %d) was aborted", comm->rank));
  }
  return Status::Ok();
}

Status commFinalize(Communicator* comm) {
  TRIB_RETURN_IF_ERROR(comm->checkUsable());
  // Complete what is in flight (the caller still owns and frees the requests), bounded by the
  // communicator's timeout, then refuse new work.
  auto deadline = std::chrono::steady_clock::now() + comm->config.timeout;
  std::vector<tribRequest*> running = comm->active;
  for (tribRequest* req : running) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    Status st = requestWait(req, std::max(left, std::chrono::milliseconds(0)), /*abortOnTimeout=*/true);
    if (!st.ok()) return st.prefix("tribCommFinalize: ");
  }
  // And its stream-ordered calls (each bounded by the timeout on the progress thread).
  if (comm->streams)
    TRIB_RETURN_IF_ERROR(comm->streams->progress->drain(comm->config.timeout).prefix("tribCommFinalize: "));
  comm->finalized.store(true);
  return Status::Ok();
}

Status commDestroy(tribComm* handle) {
  const Communicator* comm = handle->impl();
  if (!comm) {  // a non-blocking init that is joining (the destructor waits for it) or failed
    delete handle;
    return Status::Ok();
  }
  TRIB_RETURN_IF_ERROR(comm->checkProcess());
  if (int n = comm->outstanding.load(); n > 0) {
    return errorf(tribInvalidUsage,
                  "%d request(s) on this communicator are still outstanding: wait for them (or abort the "
                  "communicator and free them) before destroying it",
                  n);
  }
  delete handle;
  return Status::Ok();
}

}  // namespace trib
