// libnccl.so.2: NCCL 2.28's functions on Tributary's C API. Each is defined as pnccl* (the
// profiling name) with nccl* a weak alias of it, as NCCL itself exports them, so a profiler may
// interpose nccl* and call through to pnccl*.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "nccl/compat_comm.hpp"
#include "nccl/translate.hpp"

using tribnccl::CallScope;
using tribnccl::fail;
using tribnccl::fromTrib;

#define NCCL_EXPORT extern "C" __attribute__((visibility("default")))
#define NCCL_ALIAS(name) \
  extern "C" __attribute__((visibility("default"), weak, alias("p" #name))) decltype(p##name) name;

namespace {

// No C++ exception crosses into the caller.
template <typename F>
ncclResult_t guarded(const char* fn, F&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(ncclSystemError, "%s: out of memory", fn);
  } catch (const std::exception& e) {
    return fail(ncclInternalError, "%s: internal error: %s", fn, e.what());
  } catch (...) {
    return fail(ncclInternalError, "%s: unknown internal error", fn);
  }
}

ncclResult_t needComm(const char* fn, const ncclComm* comm) {
  if (!comm) return fail(ncclInvalidArgument, "%s: comm is NULL", fn);
  return ncclSuccess;
}

#define NCCL_CHECK(expr)              \
  do {                                \
    const ncclResult_t r_ = (expr);   \
    if (r_ != ncclSuccess) return r_; \
  } while (0)

ncclResult_t dataType(const char* fn, ncclDataType_t in, tribDataType_t* out) {
  if (!tribnccl::dataTypeToTrib(in, out))
    return fail(ncclInvalidArgument, "%s: unknown ncclDataType_t %d", fn, static_cast<int>(in));
  return ncclSuccess;
}

// Wraps a new Tributary communicator (NULL stays NULL: a split's NOCOLOR).
ncclResult_t wrap(const char* fn, tribComm_t t, ncclComm_t* out) {
  if (!t) {
    *out = nullptr;
    return ncclSuccess;
  }
  ncclComm* c = new (std::nothrow) ncclComm(t);
  if (!c) {
    tribCommDestroy(t);
    return fail(ncclSystemError, "%s: out of memory", fn);
  }
  *out = c;
  return ncclSuccess;
}

// One id: tribCommInitRankConfig (its errors name it); several: tribCommInitRankScalable.
tribResult_t joinTrib(tribComm_t* comm, int nranks, int rank, const std::vector<tribUniqueId>& ids,
                      const tribConfig_t* config) {
  if (ids.size() == 1) return tribCommInitRankConfig(comm, nranks, ids[0], rank, config);
  return tribCommInitRankScalable(comm, nranks, rank, static_cast<int>(ids.size()), ids.data(), config);
}

// What ncclGroupEnd completes on this thread: inside a group Tributary's split sets the new
// communicator at the group's end, and NCCL programs make ncclCommInitRank calls for several ranks
// in one group (one thread, several GPUs), which must then join together.
struct PendingInit {
  ncclComm* comm;
  int nranks, rank;
  std::vector<tribUniqueId> ids;  // one, or several (ncclCommInitRankScalable)
  tribConfig_t config;
  tribResult_t result = tribSuccess;
  std::string message;  // Tributary's, from the thread that ran it
};
struct GroupState {
  int depth = 0;
  std::vector<std::pair<ncclComm*, ncclComm_t*>> splits;  // the wrapper and where the caller holds it
  std::vector<std::pair<PendingInit, ncclComm_t*>> inits;
};
thread_local GroupState tGroup;

// Splits that made no communicator (NCCL_SPLIT_NOCOLOR, a failure) leave the caller NULL.
void settleSplits() {
  for (auto& [w, out] : tGroup.splits) {
    if (!w->trib) {
      delete w;
      *out = nullptr;
    }
  }
  tGroup.splits.clear();
}

// Runs the group's inits together, one thread each; a failed one leaves its caller NULL.
ncclResult_t runPendingInits() {
  auto inits = std::move(tGroup.inits);
  tGroup.inits.clear();
  std::vector<std::thread> threads;
  for (auto& [p, out] : inits) {
    PendingInit* pi = &p;
    threads.emplace_back([pi] {
      pi->result = joinTrib(&pi->comm->trib, pi->nranks, pi->rank, pi->ids, &pi->config);
      if (pi->result != tribSuccess) pi->message = tribGetLastError(nullptr);
    });
  }
  for (auto& t : threads) t.join();
  ncclResult_t first = ncclSuccess;
  for (auto& [p, out] : inits) {
    if (p.result == tribSuccess || p.result == tribInProgress) continue;
    if (first == ncclSuccess)
      first = fail(tribnccl::resultToNccl(p.result), "ncclCommInitRank (rank %d of %d, in a group): %s",
                   p.rank, p.nranks, p.message.c_str());
    delete p.comm;
    *out = nullptr;
  }
  return first;
}

// nIds ids: one store (ncclCommInitRank) or several (ncclCommInitRankScalable; nIds == 1 is the same).
ncclResult_t initRank(const char* fn, ncclComm_t* comm, int nranks, int nIds, const ncclUniqueId* ids,
                      int rank, const ncclConfig_t* config) {
  if (!comm) return fail(ncclInvalidArgument, "%s: comm is NULL", fn);
  *comm = nullptr;
  tribConfig_t tc;
  NCCL_CHECK(tribnccl::configToTrib(fn, config, &tc));
  std::vector<tribUniqueId> tids(static_cast<size_t>(nIds));
  static_assert(sizeof(tids[0].internal) == sizeof(ids[0].internal), "unique ids are both 128 bytes");
  for (int i = 0; i < nIds; ++i) std::memcpy(tids[i].internal, ids[i].internal, sizeof(tids[i].internal));
  if (tGroup.depth > 0) {  // joins at ncclGroupEnd, with the group's other inits
    PendingInit p{new ncclComm(nullptr), nranks, rank, std::move(tids), tc, tribSuccess, {}};
    ncclComm* made = p.comm;
    tGroup.inits.emplace_back(std::move(p), comm);
    *comm = made;
    return ncclSuccess;
  }
  tribComm_t t = nullptr;
  const tribResult_t r = joinTrib(&t, nranks, rank, tids, &tc);
  if (r != tribSuccess && r != tribInProgress) return fromTrib(r);
  NCCL_CHECK(wrap(fn, t, comm));
  return fromTrib(r);
}

// Waits (bounded) for calls still inside `comm` on other threads to return after an abort.
bool drainCalls(ncclComm* comm) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (comm->activeCalls.load(std::memory_order_acquire) > 0) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

ncclResult_t refuse(const char* fn, const char* why) {
  return fail(ncclInvalidUsage, "%s is not supported by Tributary's NCCL library: %s (docs/NCCL.md)", fn,
              why);
}

}  // namespace

namespace tribnccl {

ncclResult_t opToTrib(const char* fn, ncclComm* comm, ncclRedOp_t op, tribRedOp_t* out) {
  if (builtinOpToTrib(op, out)) return ncclSuccess;
  std::lock_guard<std::mutex> lock(comm->opsMu);
  auto it = comm->ops.find(static_cast<int>(op));
  if (it == comm->ops.end()) {
    return fail(
        ncclInvalidArgument,
        "%s: unknown ncclRedOp_t %d (not a built-in operator, nor one ncclRedOpCreatePreMulSum made on "
        "this communicator and not yet destroyed)",
        fn, static_cast<int>(op));
  }
  *out = it->second;
  return ncclSuccess;
}

}  // namespace tribnccl

// ---- Library, ids and errors --------------------------------------------------------------
NCCL_EXPORT ncclResult_t pncclGetVersion(int* version) {
  if (!version) return fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = TRIB_NCCL_API_VERSION;
  return ncclSuccess;
}
NCCL_ALIAS(ncclGetVersion)

NCCL_EXPORT ncclResult_t pncclGetUniqueId(ncclUniqueId* uniqueId) {
  return guarded("ncclGetUniqueId", [&] {
    if (!uniqueId) return fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
    tribUniqueId tid;
    NCCL_CHECK(fromTrib(tribGetUniqueId(&tid)));
    std::memcpy(uniqueId->internal, tid.internal, sizeof(uniqueId->internal));
    return ncclSuccess;
  });
}
NCCL_ALIAS(ncclGetUniqueId)

NCCL_EXPORT const char* pncclGetErrorString(ncclResult_t result) { return tribnccl::resultString(result); }
NCCL_ALIAS(ncclGetErrorString)

NCCL_EXPORT const char* pncclGetLastError(ncclComm_t) { return tribnccl::lastError(); }
NCCL_ALIAS(ncclGetLastError)

NCCL_EXPORT ncclResult_t pncclMemAlloc(void** ptr, size_t size) {
  return guarded("ncclMemAlloc", [&] {
    if (!ptr) return fail(ncclInvalidArgument, "ncclMemAlloc: ptr is NULL");
    return fromTrib(tribMemAlloc(ptr, size));
  });
}
NCCL_ALIAS(ncclMemAlloc)

NCCL_EXPORT ncclResult_t pncclMemFree(void* ptr) {
  return guarded("ncclMemFree", [&] { return fromTrib(tribMemFree(ptr)); });
}
NCCL_ALIAS(ncclMemFree)

// ---- Communicators ------------------------------------------------------------------------
NCCL_EXPORT ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                                 ncclConfig_t* config) {
  return guarded("ncclCommInitRankConfig",
                 [&] { return initRank("ncclCommInitRankConfig", comm, nranks, 1, &commId, rank, config); });
}
NCCL_ALIAS(ncclCommInitRankConfig)

NCCL_EXPORT ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return guarded("ncclCommInitRank",
                 [&] { return initRank("ncclCommInitRank", comm, nranks, 1, &commId, rank, nullptr); });
}
NCCL_ALIAS(ncclCommInitRank)

// Every rank holds all nId ids; the rendezvous is spread over their stores as NCCL spreads its
// bootstrap (tribCommInitRankScalable).
NCCL_EXPORT ncclResult_t pncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                                   ncclUniqueId* commIds, ncclConfig_t* config) {
  return guarded("ncclCommInitRankScalable", [&] {
    if (nId < 1 || (nranks >= 1 && nId > nranks))
      return fail(ncclInvalidArgument, "ncclCommInitRankScalable: nId %d must be in 1..nranks (%d)", nId,
                  nranks);
    if (!commIds) return fail(ncclInvalidArgument, "ncclCommInitRankScalable: commIds is NULL");
    return initRank("ncclCommInitRankScalable", newcomm, nranks, nId, commIds, myrank, config);
  });
}
NCCL_ALIAS(ncclCommInitRankScalable)

// devlist names CUDA devices; these communicators run on host memory (and on the device a
// stream-ordered call's memory is on), so it is not needed.
NCCL_EXPORT ncclResult_t pncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  return guarded("ncclCommInitAll", [&] {
    if (!comms) return fail(ncclInvalidArgument, "ncclCommInitAll: comms is NULL");
    if (ndev < 1) return fail(ncclInvalidArgument, "ncclCommInitAll: ndev %d must be >= 1", ndev);
    std::vector<tribComm_t> t(static_cast<size_t>(ndev), nullptr);
    NCCL_CHECK(fromTrib(tribCommInitAll(t.data(), ndev, devlist)));
    for (int i = 0; i < ndev; ++i) {
      const ncclResult_t r = wrap("ncclCommInitAll", t[i], &comms[i]);
      if (r != ncclSuccess) {  // wrap destroyed t[i]; undo the others
        for (int j = 0; j < i; ++j) {
          tribCommDestroy(comms[j]->trib);
          delete comms[j];
          comms[j] = nullptr;
        }
        for (int j = i + 1; j < ndev; ++j) tribCommDestroy(t[j]);
        return r;
      }
    }
    return ncclSuccess;
  });
}
NCCL_ALIAS(ncclCommInitAll)

NCCL_EXPORT ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                                        ncclConfig_t* config) {
  return guarded("ncclCommSplit", [&] {
    NCCL_CHECK(needComm("ncclCommSplit", comm));
    if (!newcomm) return fail(ncclInvalidArgument, "ncclCommSplit: newcomm is NULL");
    *newcomm = nullptr;
    CallScope scope(comm);
    tribConfig_t tc;
    NCCL_CHECK(tribnccl::configToTrib("ncclCommSplit", config, &tc));
    // Inside a group Tributary sets the new communicator at the group's end: into the wrapper.
    ncclComm* w = new ncclComm(nullptr);
    const tribResult_t r = tribCommSplit(comm->trib, color, key, &w->trib, config ? &tc : nullptr);
    if (r != tribSuccess && r != tribInProgress) {
      delete w;
      return fromTrib(r);
    }
    *newcomm = w;
    tGroup.splits.emplace_back(w, newcomm);
    if (tGroup.depth == 0) settleSplits();
    return fromTrib(r);
  });
}
NCCL_ALIAS(ncclCommSplit)

NCCL_EXPORT ncclResult_t pncclCommFinalize(ncclComm_t comm) {
  return guarded("ncclCommFinalize", [&] {
    NCCL_CHECK(needComm("ncclCommFinalize", comm));
    CallScope scope(comm);
    return fromTrib(tribCommFinalize(comm->trib));
  });
}
NCCL_ALIAS(ncclCommFinalize)

NCCL_EXPORT ncclResult_t pncclCommDestroy(ncclComm_t comm) {
  return guarded("ncclCommDestroy", [&] {
    if (!comm) return ncclSuccess;
    const ncclResult_t r = fromTrib(tribCommDestroy(comm->trib));
    if (r == ncclSuccess) delete comm;
    return r;
  });
}
NCCL_ALIAS(ncclCommDestroy)

// As NCCL's: stops the communicator's work (calls blocked in it on other threads return) and frees it.
NCCL_EXPORT ncclResult_t pncclCommAbort(ncclComm_t comm) {
  return guarded("ncclCommAbort", [&] {
    if (!comm) return ncclSuccess;
    if (comm->aborting.exchange(true))
      return fail(ncclInvalidUsage, "ncclCommAbort: the communicator is already being aborted");
    NCCL_CHECK(fromTrib(tribCommAbort(comm->trib)));
    if (!drainCalls(comm)) {
      return fail(ncclInternalError,
                  "ncclCommAbort: calls on other threads did not return within 60 s of the abort; the "
                  "communicator is left allocated");
    }
    const ncclResult_t r = fromTrib(tribCommDestroy(comm->trib));
    delete comm;
    return r;
  });
}
NCCL_ALIAS(ncclCommAbort)

NCCL_EXPORT ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  return refuse("ncclCommRevoke", "a revoked communicator cannot be quiesced and reused; use ncclCommAbort");
}
NCCL_ALIAS(ncclCommRevoke)

NCCL_EXPORT ncclResult_t pncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                                         ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  return guarded("ncclCommShrink", [&] {
    NCCL_CHECK(needComm("ncclCommShrink", comm));
    if (!newcomm) return fail(ncclInvalidArgument, "ncclCommShrink: newcomm is NULL");
    *newcomm = nullptr;
    int flags;  // NCCL_SHRINK_DEFAULT 0, NCCL_SHRINK_ABORT 1
    if (shrinkFlags == 0) {
      flags = TRIB_SHRINK_DEFAULT;
    } else if (shrinkFlags == 1) {
      flags = TRIB_SHRINK_ABORT;
    } else {
      return fail(ncclInvalidArgument,
                  "ncclCommShrink: shrinkFlags %d must be NCCL_SHRINK_DEFAULT or NCCL_SHRINK_ABORT",
                  shrinkFlags);
    }
    CallScope scope(comm);
    tribConfig_t tc;
    NCCL_CHECK(tribnccl::configToTrib("ncclCommShrink", config, &tc));
    tribComm_t t = nullptr;
    NCCL_CHECK(fromTrib(
        tribCommShrink(comm->trib, excludeRanksList, excludeRanksCount, &t, config ? &tc : nullptr, flags)));
    return wrap("ncclCommShrink", t, newcomm);
  });
}
NCCL_ALIAS(ncclCommShrink)

NCCL_EXPORT ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  return guarded("ncclCommGetAsyncError", [&] {
    NCCL_CHECK(needComm("ncclCommGetAsyncError", comm));
    if (!asyncError) return fail(ncclInvalidArgument, "ncclCommGetAsyncError: asyncError is NULL");
    tribResult_t e = tribSuccess;
    NCCL_CHECK(fromTrib(tribCommGetAsyncError(comm->trib, &e)));
    *asyncError = tribnccl::resultToNccl(e);
    return ncclSuccess;
  });
}
NCCL_ALIAS(ncclCommGetAsyncError)

NCCL_EXPORT ncclResult_t pncclCommCount(const ncclComm_t comm, int* count) {
  return guarded("ncclCommCount", [&] {
    NCCL_CHECK(needComm("ncclCommCount", comm));
    return fromTrib(tribCommCount(comm->trib, count));
  });
}
NCCL_ALIAS(ncclCommCount)

NCCL_EXPORT ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank) {
  return guarded("ncclCommUserRank", [&] {
    NCCL_CHECK(needComm("ncclCommUserRank", comm));
    return fromTrib(tribCommUserRank(comm->trib, rank));
  });
}
NCCL_ALIAS(ncclCommUserRank)

NCCL_EXPORT ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device) {
  return refuse("ncclCommCuDevice", "a Tributary communicator is not bound to a CUDA device at creation");
}
NCCL_ALIAS(ncclCommCuDevice)

NCCL_EXPORT ncclResult_t pncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  return guarded("ncclCommRegister", [&] {
    NCCL_CHECK(needComm("ncclCommRegister", comm));
    CallScope scope(comm);
    return fromTrib(tribCommRegister(comm->trib, buff, size, handle));
  });
}
NCCL_ALIAS(ncclCommRegister)

NCCL_EXPORT ncclResult_t pncclCommDeregister(const ncclComm_t comm, void* handle) {
  return guarded("ncclCommDeregister", [&] {
    NCCL_CHECK(needComm("ncclCommDeregister", comm));
    CallScope scope(comm);
    return fromTrib(tribCommDeregister(comm->trib, handle));
  });
}
NCCL_ALIAS(ncclCommDeregister)

NCCL_EXPORT ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                                 int winFlags) {
  return refuse("ncclCommWindowRegister", "symmetric windows serve NCCL's device-side API, which it lacks");
}
NCCL_ALIAS(ncclCommWindowRegister)

NCCL_EXPORT ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  return refuse("ncclCommWindowDeregister", "symmetric windows serve NCCL's device-side API, which it lacks");
}
NCCL_ALIAS(ncclCommWindowDeregister)

// ---- Reduction operators ------------------------------------------------------------------
NCCL_EXPORT ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                                   ncclScalarResidence_t residence, ncclComm_t comm) {
  return guarded("ncclRedOpCreatePreMulSum", [&] {
    NCCL_CHECK(needComm("ncclRedOpCreatePreMulSum", comm));
    if (!op) return fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: op is NULL");
    CallScope scope(comm);
    tribDataType_t dt;
    NCCL_CHECK(dataType("ncclRedOpCreatePreMulSum", datatype, &dt));
    tribScalarResidence_t where;
    if (!tribnccl::scalarResidenceToTrib(residence, &where)) {
      return fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: unknown ncclScalarResidence_t %d",
                  static_cast<int>(residence));
    }
    std::lock_guard<std::mutex> lock(comm->opsMu);
    if (comm->nextOp == ncclMaxRedOp)
      return fail(ncclInternalError, "ncclRedOpCreatePreMulSum: this communicator has made 2^31 operators");
    tribRedOp_t top;
    NCCL_CHECK(fromTrib(tribRedOpCreatePreMulSum(&top, scalar, dt, where, comm->trib)));
    const int value = comm->nextOp++;
    comm->ops.emplace(value, top);
    *op = static_cast<ncclRedOp_t>(value);
    return ncclSuccess;
  });
}
NCCL_ALIAS(ncclRedOpCreatePreMulSum)

NCCL_EXPORT ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  return guarded("ncclRedOpDestroy", [&] {
    NCCL_CHECK(needComm("ncclRedOpDestroy", comm));
    CallScope scope(comm);
    std::lock_guard<std::mutex> lock(comm->opsMu);
    auto it = comm->ops.find(static_cast<int>(op));
    if (it == comm->ops.end()) {
      return fail(
          ncclInvalidArgument,
          "ncclRedOpDestroy: operator %d was not made by ncclRedOpCreatePreMulSum on this communicator "
          "(or is already destroyed)",
          static_cast<int>(op));
    }
    NCCL_CHECK(fromTrib(tribRedOpDestroy(it->second, comm->trib)));
    comm->ops.erase(it);
    return ncclSuccess;
  });
}
NCCL_ALIAS(ncclRedOpDestroy)

// ---- Collectives --------------------------------------------------------------------------
// Host memory with a NULL stream runs on the calling thread (an extension: NCCL needs device
// memory); a stream, or device memory, makes the call stream-ordered as in NCCL.
#define NCCL_COLL_PROLOGUE(fn)    \
  NCCL_CHECK(needComm(fn, comm)); \
  CallScope scope(comm);          \
  tribDataType_t dt;              \
  NCCL_CHECK(dataType(fn, datatype, &dt))

#define NCCL_OP(fn, top) \
  tribRedOp_t top;       \
  NCCL_CHECK(tribnccl::opToTrib(fn, comm, op, &top))

NCCL_EXPORT ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                        ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                        cudaStream_t stream) {
  return guarded("ncclAllReduce", [&] {
    NCCL_COLL_PROLOGUE("ncclAllReduce");
    NCCL_OP("ncclAllReduce", top);
    return fromTrib(tribAllReduce(sendbuff, recvbuff, count, dt, top, comm->trib, stream));
  });
}
NCCL_ALIAS(ncclAllReduce)

NCCL_EXPORT ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                                     ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                                     cudaStream_t stream) {
  return guarded("ncclReduce", [&] {
    NCCL_COLL_PROLOGUE("ncclReduce");
    NCCL_OP("ncclReduce", top);
    return fromTrib(tribReduce(sendbuff, recvbuff, count, dt, top, root, comm->trib, stream));
  });
}
NCCL_ALIAS(ncclReduce)

NCCL_EXPORT ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                            ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                            cudaStream_t stream) {
  return guarded("ncclReduceScatter", [&] {
    NCCL_COLL_PROLOGUE("ncclReduceScatter");
    NCCL_OP("ncclReduceScatter", top);
    return fromTrib(tribReduceScatter(sendbuff, recvbuff, recvcount, dt, top, comm->trib, stream));
  });
}
NCCL_ALIAS(ncclReduceScatter)

NCCL_EXPORT ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                        ncclDataType_t datatype, int root, ncclComm_t comm,
                                        cudaStream_t stream) {
  return guarded("ncclBroadcast", [&] {
    NCCL_COLL_PROLOGUE("ncclBroadcast");
    return fromTrib(tribBroadcast(sendbuff, recvbuff, count, dt, root, comm->trib, stream));
  });
}
NCCL_ALIAS(ncclBroadcast)

// The legacy in-place form.
NCCL_EXPORT ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
                                    ncclComm_t comm, cudaStream_t stream) {
  return guarded("ncclBcast", [&] {
    NCCL_COLL_PROLOGUE("ncclBcast");
    return fromTrib(tribBroadcast(buff, buff, count, dt, root, comm->trib, stream));
  });
}
NCCL_ALIAS(ncclBcast)

NCCL_EXPORT ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                        ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return guarded("ncclAllGather", [&] {
    NCCL_COLL_PROLOGUE("ncclAllGather");
    return fromTrib(tribAllGather(sendbuff, recvbuff, sendcount, dt, comm->trib, stream));
  });
}
NCCL_ALIAS(ncclAllGather)

NCCL_EXPORT ncclResult_t pncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                                       ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return guarded("ncclAlltoAll", [&] {
    NCCL_COLL_PROLOGUE("ncclAlltoAll");
    return fromTrib(tribAlltoAll(sendbuff, recvbuff, count, dt, comm->trib, stream));
  });
}
NCCL_ALIAS(ncclAlltoAll)

NCCL_EXPORT ncclResult_t pncclGather(const void* sendbuff, void* recvbuff, size_t count,
                                     ncclDataType_t datatype, int root, ncclComm_t comm,
                                     cudaStream_t stream) {
  return guarded("ncclGather", [&] {
    NCCL_COLL_PROLOGUE("ncclGather");
    return fromTrib(tribGather(sendbuff, recvbuff, count, dt, root, comm->trib, stream));
  });
}
NCCL_ALIAS(ncclGather)

NCCL_EXPORT ncclResult_t pncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                                      ncclDataType_t datatype, int root, ncclComm_t comm,
                                      cudaStream_t stream) {
  return guarded("ncclScatter", [&] {
    NCCL_COLL_PROLOGUE("ncclScatter");
    return fromTrib(tribScatter(sendbuff, recvbuff, count, dt, root, comm->trib, stream));
  });
}
NCCL_ALIAS(ncclScatter)

NCCL_EXPORT ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                                   ncclComm_t comm, cudaStream_t stream) {
  return guarded("ncclSend", [&] {
    NCCL_COLL_PROLOGUE("ncclSend");
    return fromTrib(tribSend(sendbuff, count, dt, peer, comm->trib, stream));
  });
}
NCCL_ALIAS(ncclSend)

NCCL_EXPORT ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                                   ncclComm_t comm, cudaStream_t stream) {
  return guarded("ncclRecv", [&] {
    NCCL_COLL_PROLOGUE("ncclRecv");
    return fromTrib(tribRecv(recvbuff, count, dt, peer, comm->trib, stream));
  });
}
NCCL_ALIAS(ncclRecv)

// ---- Groups -------------------------------------------------------------------------------
NCCL_EXPORT ncclResult_t pncclGroupStart() {
  return guarded("ncclGroupStart", [] {
    NCCL_CHECK(fromTrib(tribGroupStart()));
    ++tGroup.depth;
    return ncclSuccess;
  });
}
NCCL_ALIAS(ncclGroupStart)

NCCL_EXPORT ncclResult_t pncclGroupEnd() {
  return guarded("ncclGroupEnd", [] {
    if (tGroup.depth == 0) return fail(ncclInvalidUsage, "ncclGroupEnd without a matching ncclGroupStart");
    if (tGroup.depth == 1) {
      // The inits first: the group's collectives (and splits) may use their communicators.
      const ncclResult_t inits = runPendingInits();
      const ncclResult_t r = fromTrib(tribGroupEnd());
      tGroup.depth = 0;
      settleSplits();
      return inits != ncclSuccess ? inits : r;
    }
    --tGroup.depth;
    return fromTrib(tribGroupEnd());
  });
}
NCCL_ALIAS(ncclGroupEnd)

// tribGroupSimulateEnd, with NCCL's rules: NULL, or a nested group, ends the group as ncclGroupEnd
// does; the struct is read up to its size (at most ours), and one without NCCL's magic is refused
// after the group's calls are dropped, as NCCL drops them.
NCCL_EXPORT ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  return guarded("ncclGroupSimulateEnd", [&] {
    if (tGroup.depth == 0)
      return fail(ncclInvalidUsage, "ncclGroupSimulateEnd without a matching ncclGroupStart");
    if (!simInfo || tGroup.depth > 1) return pncclGroupEnd();
    constexpr unsigned kMagic = 0x74685283;  // NCCL_SIM_INFO_INITIALIZER's
    size_t size = 0;
    std::memcpy(&size, &simInfo->size, sizeof size);
    size = std::min(size, sizeof(ncclSimInfo_t));
    ncclSimInfo_t info{sizeof(ncclSimInfo_t), 0, TRIB_NCCL_API_VERSION, 0.0f};
    std::memcpy(&info, simInfo, size);
    if (!tGroup.splits.empty())  // Tributary would refuse it and leave the group open: say why here
      return fail(ncclInvalidUsage,
                  "ncclGroupSimulateEnd: the group holds an ncclCommSplit, which Tributary cannot "
                  "simulate; the group is still open: end it with ncclGroupEnd");
    // The inits run, as NCCL's do: the group's collectives may be on their communicators.
    const ncclResult_t inits = runPendingInits();
    tribSimInfo_t t = TRIB_SIM_INFO_INITIALIZER;
    const ncclResult_t r = fromTrib(tribGroupSimulateEnd(&t));
    tGroup.depth = 0;
    if (inits != ncclSuccess) return inits;
    if (r != ncclSuccess) return r;
    if (info.magic != kMagic)
      return fail(ncclInvalidArgument,
                  "ncclGroupSimulateEnd: simInfo not initialised with NCCL_SIM_INFO_INITIALIZER (magic "
                  "0x%x); the group's calls were dropped",
                  info.magic);
    info.estimatedTime = t.estimatedTime;
    std::memcpy(simInfo, &info, size);
    return ncclSuccess;
  });
}
NCCL_ALIAS(ncclGroupSimulateEnd)
