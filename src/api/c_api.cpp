// The C ABI: argument checks that need no communicator, error-string plumbing, and the
// guarantee that no C++ exception crosses into the caller.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <string>

#include "common/dtype.hpp"
#include "common/log.hpp"
#include "common/shared_alloc.hpp"
#include "core/comm.hpp"
#include "core/group.hpp"
#include "core/premul.hpp"
#include "core/stream_coll.hpp"
#include "cuda/cuda_vmm.hpp"

using trib::Coll;
using trib::CollCall;
using trib::errorf;
using trib::Status;

namespace {

thread_local std::string tLastError;

tribResult_t report(const Status& st) {
  if (!st.ok()) tLastError = st.message();
  return st.code();
}

// Runs `body` and converts any exception into a result code with a message. It cannot catch one
// thrown by a destructor (noexcept: std::terminate first), so destructors must never throw.
template <typename F>
tribResult_t guarded(const char* fn, F&& body) {
  try {
    return report(body());
  } catch (const std::bad_alloc&) {
    return report(errorf(tribSystemError, "%s: out of memory", fn));
  } catch (const std::exception& e) {
    return report(errorf(tribInternalError, "%s: internal error: %s", fn, e.what()));
  } catch (...) {
    return report(errorf(tribInternalError, "%s: unknown internal error", fn));
  }
}

Status needComm(const char* fn, const tribComm* comm) {
  if (!comm) return errorf(tribInvalidArgument, "%s: comm is NULL", fn);
  Status st = comm->ready();  // a non-blocking init still joining, or failed
  if (!st.ok()) st.prefix(std::string(fn) + ": ");
  return st;
}

// How a rank joins (commInitRank or commInitRankScalable), given the config to use.
// `cancelled`: a non-blocking init's abort flag (null for a blocking init).
using Join = std::function<Status(const tribConfig_t*, const trib::CancelFlag& cancelled, tribComm**)>;

// config->blocking = 0 (a config resolveConfig accepted): the join runs in the background, with
// its own copy of the config and of the strings it points to.
Status initNonBlocking(const char* fn, int nranks, int rank, const tribConfig_t* config, tribComm_t* comm,
                       Join join) {
  struct Copy {
    tribConfig_t cfg;
    std::string algo, transport, name;
  };
  auto copy = std::make_shared<Copy>();
  copy->cfg = tribConfig_t TRIB_CONFIG_INITIALIZER;
  // An older header's struct is smaller: only its bytes are read; later fields keep their defaults.
  std::memcpy(&copy->cfg, config, std::min(config->size, sizeof(tribConfig_t)));
  copy->cfg.size = sizeof(tribConfig_t);
  copy->cfg.blocking = 1;
  auto keep = [](const char* s, std::string* into) -> const char* {
    if (!s) return nullptr;
    *into = s;
    return into->c_str();
  };
  copy->cfg.algo = keep(config->algo, &copy->algo);
  copy->cfg.transport = keep(config->transport, &copy->transport);
  copy->cfg.commName = keep(config->commName, &copy->name);
  *comm = tribComm::initInBackground(
      [copy, join = std::move(join)](const trib::CancelFlag& cancelled, tribComm** out) {
        return join(&copy->cfg, cancelled, out);
      });
  return errorf(tribInProgress, "%s: rank %d of %d joins in the background (non-blocking init)", fn, rank,
                nranks);
}

// The checks every init by rank makes, then the join itself, in the background when
// config->blocking is 0.
Status initRank(const char* fn, tribComm_t* comm, int nranks, int rank, const tribConfig_t* config,
                Join join) {
  if (!comm) return errorf(tribInvalidArgument, "%s: comm is NULL", fn);
  *comm = nullptr;
  if (nranks < 1) return errorf(tribInvalidArgument, "%s: nranks %d must be >= 1", fn, nranks);
  if (rank < 0 || rank >= nranks)
    return errorf(tribInvalidArgument, "%s: rank %d is out of range 0..%d", fn, rank, nranks - 1);
  if (config) {
    trib::CommConfig checked;  // a bad config fails now, not in the background
    TRIB_RETURN_IF_ERROR(trib::resolveConfig(config, &checked));
    if (config->blocking == 0) return initNonBlocking(fn, nranks, rank, config, comm, std::move(join));
  }
  return join(config, nullptr, comm);
}

// Blocking collective: on host memory without a stream, launch, then wait (or join the current
// group); with a stream or on device memory, enqueued on the stream (core/stream_coll.hpp).
tribResult_t blocking(const char* fn, tribComm_t comm, tribStream_t stream, const CollCall& call) {
  return guarded(fn, [&]() -> Status {
    TRIB_RETURN_IF_ERROR(needComm(fn, comm));
    return trib::runBlocking(comm->impl(), call, stream);
  });
}

tribResult_t nonblocking(const char* fn, tribComm_t comm, tribRequest_t* request, const CollCall& call) {
  return guarded(fn, [&]() -> Status {
    TRIB_RETURN_IF_ERROR(needComm(fn, comm));
    if (!request) return errorf(tribInvalidArgument, "%s: request is NULL", fn);
    *request = nullptr;
    return trib::launchCollective(comm->impl(), call, request);
  });
}

CollCall makeCall(Coll coll, const void* s, void* r, size_t count, tribDataType_t dt, tribRedOp_t op,
                  int root) {
  CollCall c;
  c.coll = coll;
  c.sendbuff = s;
  c.recvbuff = r;
  c.count = count;
  c.dtype = dt;
  c.op = op;
  c.root = root;
  return c;
}

}  // namespace

extern "C" {

TRIB_API tribResult_t tribGetVersion(int* version) {
  return guarded("tribGetVersion", [&]() -> Status {
    if (!version) return errorf(tribInvalidArgument, "tribGetVersion: version is NULL");
    *version = TRIB_VERSION_CODE;
    return Status::Ok();
  });
}

TRIB_API const char* tribGetErrorString(tribResult_t r) {
  switch (r) {
    case tribSuccess:
      return "no error";
    case tribUnhandledCudaError:
      return "unhandled CUDA error";
    case tribSystemError:
      return "system error (out of memory, socket or OS failure)";
    case tribInternalError:
      return "internal error (a Tributary bug: please report it)";
    case tribInvalidArgument:
      return "invalid argument";
    case tribInvalidUsage:
      return "invalid usage";
    case tribRemoteError:
      return "remote error (a peer failed or disconnected)";
    case tribInProgress:
      return "operation in progress";
    case tribTimeout:
      return "timeout";
    case tribAborted:
      return "communicator aborted";
    case tribNotSupported:
      return "not supported";
    default:
      return "unknown result code";
  }
}

TRIB_API const char* tribGetLastError(tribComm_t) { return tLastError.c_str(); }
TRIB_API const char* tribDataTypeName(tribDataType_t t) { return trib::dataTypeName(t); }
TRIB_API const char* tribRedOpName(tribRedOp_t op) { return trib::redOpName(op); }

TRIB_API tribResult_t tribDataTypeSize(tribDataType_t t, size_t* bytes) {
  return guarded("tribDataTypeSize", [&]() -> Status {
    if (!bytes) return errorf(tribInvalidArgument, "tribDataTypeSize: bytes is NULL");
    if (!trib::validDataType(t))
      return errorf(tribInvalidArgument, "unknown datatype %d", static_cast<int>(t));
    *bytes = trib::dataTypeSize(t);
    return Status::Ok();
  });
}

TRIB_API tribResult_t tribMemAlloc(void** ptr, size_t size) {
  return guarded("tribMemAlloc", [&] { return trib::sharedAlloc(size, ptr); });
}

TRIB_API tribResult_t tribMemFree(void* ptr) {
  return guarded("tribMemFree", [&]() -> Status {
    bool device = false;  // tribMemAllocDevice's
    TRIB_RETURN_IF_ERROR(trib::cuda::memFreeDevice(ptr, &device));
    return device ? Status::Ok() : trib::sharedFree(ptr);
  });
}

TRIB_API tribResult_t tribMemAllocDevice(void** ptr, size_t size) {
  return guarded("tribMemAllocDevice", [&]() -> Status {
    if (!ptr) return trib::errorf(tribInvalidArgument, "tribMemAllocDevice: ptr is NULL");
    *ptr = nullptr;
    if (size == 0) return trib::errorf(tribInvalidArgument, "tribMemAllocDevice: size is 0");
    return trib::cuda::memAllocDevice(size, ptr);
  });
}

TRIB_API tribResult_t tribCommRegister(const tribComm_t comm, void* buff, size_t size, void** handle) {
  return guarded("tribCommRegister", [&]() -> Status {
    TRIB_RETURN_IF_ERROR(needComm("tribCommRegister", comm));
    return comm->registerBuffer(buff, size, handle);
  });
}

TRIB_API tribResult_t tribCommDeregister(const tribComm_t comm, void* handle) {
  return guarded("tribCommDeregister", [&]() -> Status {
    TRIB_RETURN_IF_ERROR(needComm("tribCommDeregister", comm));
    return comm->deregisterBuffer(handle);
  });
}

TRIB_API tribResult_t tribGetUniqueId(tribUniqueId* id) {
  return guarded("tribGetUniqueId", [&]() -> Status {
    if (!id) return errorf(tribInvalidArgument, "tribGetUniqueId: uniqueId is NULL");
    return trib::makeUniqueId(id);
  });
}

TRIB_API tribResult_t tribCommInitRankConfig(tribComm_t* comm, int nranks, tribUniqueId id, int rank,
                                             const tribConfig_t* config) {
  return guarded("tribCommInitRank", [&]() -> Status {
    return initRank(
        "tribCommInitRank", comm, nranks, rank, config,
        [nranks, id, rank](const tribConfig_t* c, const trib::CancelFlag& cancelled, tribComm** out) {
          return trib::commInitRank(nranks, id, rank, c, out, cancelled);
        });
  });
}

TRIB_API tribResult_t tribCommInitRankScalable(tribComm_t* comm, int nranks, int rank, int nIds,
                                               const tribUniqueId* ids, const tribConfig_t* config) {
  const char* fn = "tribCommInitRankScalable";
  return guarded(fn, [&]() -> Status {
    if (comm) *comm = nullptr;
    if (nIds < 1 || (nranks >= 1 && nIds > nranks))
      return errorf(tribInvalidArgument, "%s: nIds %d must be in 1..nranks (%d)", fn, nIds, nranks);
    if (!ids) return errorf(tribInvalidArgument, "%s: ids is NULL", fn);
    // The background join keeps its own copy of the ids.
    std::vector<tribUniqueId> copy(ids, ids + nIds);
    return initRank(fn, comm, nranks, rank, config,
                    [nranks, rank, copy = std::move(copy)](
                        const tribConfig_t* c, const trib::CancelFlag& cancelled, tribComm** out) {
                      return trib::commInitRankScalable(nranks, static_cast<int>(copy.size()), copy.data(),
                                                        rank, c, out, cancelled);
                    });
  });
}

TRIB_API tribResult_t tribCommInitRank(tribComm_t* comm, int nranks, tribUniqueId id, int rank) {
  return tribCommInitRankConfig(comm, nranks, id, rank, nullptr);
}

TRIB_API tribResult_t tribCommInitFromEnv(tribComm_t* comm, const tribConfig_t* config) {
  return guarded("tribCommInitFromEnv", [&]() -> Status {
    if (!comm) return errorf(tribInvalidArgument, "tribCommInitFromEnv: comm is NULL");
    *comm = nullptr;
    return trib::commInitFromEnv(config, comm);
  });
}

TRIB_API tribResult_t tribCommInitAll(tribComm_t* comms, int ndev, const int* devlist) {
  return guarded("tribCommInitAll", [&]() -> Status {
    if (!comms) return errorf(tribInvalidArgument, "tribCommInitAll: comms is NULL");
    if (ndev < 1) return errorf(tribInvalidArgument, "tribCommInitAll: ndev %d must be >= 1", ndev);
    return trib::commCreateLocal(ndev, devlist, comms);
  });
}

TRIB_API tribResult_t tribCommSplit(tribComm_t comm, int color, int key, tribComm_t* newcomm,
                                    const tribConfig_t* config) {
  return guarded("tribCommSplit", [&]() -> Status {
    TRIB_RETURN_IF_ERROR(needComm("tribCommSplit", comm));
    if (!newcomm) return errorf(tribInvalidArgument, "tribCommSplit: newcomm is NULL");
    return trib::commSplit(comm->impl(), color, key, config, newcomm);
  });
}

TRIB_API tribResult_t tribCommShrink(tribComm_t comm, const int* excludeRanks, int excludeCount,
                                     tribComm_t* newcomm, const tribConfig_t* config, int flags) {
  return guarded("tribCommShrink", [&]() -> Status {
    TRIB_RETURN_IF_ERROR(needComm("tribCommShrink", comm));
    if (!newcomm) return errorf(tribInvalidArgument, "tribCommShrink: newcomm is NULL");
    *newcomm = nullptr;
    return trib::commShrink(comm->impl(), excludeRanks, excludeCount, config, flags, newcomm);
  });
}

TRIB_API tribResult_t tribCommFinalize(tribComm_t comm) {
  return guarded("tribCommFinalize", [&]() -> Status {
    TRIB_RETURN_IF_ERROR(needComm("tribCommFinalize", comm));
    return trib::commFinalize(comm->impl());
  });
}

TRIB_API tribResult_t tribCommDestroy(tribComm_t comm) {
  return guarded("tribCommDestroy", [&]() -> Status {
    if (!comm) return Status::Ok();  // like free(NULL)
    return trib::commDestroy(comm);
  });
}

TRIB_API tribResult_t tribCommAbort(tribComm_t comm) {
  return guarded("tribCommAbort", [&]() -> Status {
    if (!comm) return Status::Ok();
    return comm->abortWhenJoined();
  });
}

TRIB_API tribResult_t tribCommGetAsyncError(tribComm_t comm, tribResult_t* asyncError) {
  return guarded("tribCommGetAsyncError", [&]() -> Status {
    if (!comm) return errorf(tribInvalidArgument, "tribCommGetAsyncError: comm is NULL");
    if (!asyncError) return errorf(tribInvalidArgument, "tribCommGetAsyncError: asyncError is NULL");
    const Status ready = comm->ready();  // a non-blocking init: tribInProgress, or its error
    *asyncError = ready.ok() ? comm->asyncError() : ready.code();
    return Status::Ok();
  });
}

TRIB_API tribResult_t tribCommCount(const tribComm_t comm, int* count) {
  return guarded("tribCommCount", [&]() -> Status {
    TRIB_RETURN_IF_ERROR(needComm("tribCommCount", comm));
    if (!count) return errorf(tribInvalidArgument, "tribCommCount: count is NULL");
    *count = comm->nranks();
    return Status::Ok();
  });
}

TRIB_API tribResult_t tribCommUserRank(const tribComm_t comm, int* rank) {
  return guarded("tribCommUserRank", [&]() -> Status {
    TRIB_RETURN_IF_ERROR(needComm("tribCommUserRank", comm));
    if (!rank) return errorf(tribInvalidArgument, "tribCommUserRank: rank is NULL");
    *rank = comm->rank();
    return Status::Ok();
  });
}

// ---- Collectives ----------------------------------------------------------------------------
TRIB_API tribResult_t tribAllReduce(const void* s, void* r, size_t count, tribDataType_t dt, tribRedOp_t op,
                                    tribComm_t comm, tribStream_t stream) {
  return blocking("tribAllReduce", comm, stream, makeCall(Coll::AllReduce, s, r, count, dt, op, 0));
}
TRIB_API tribResult_t tribReduce(const void* s, void* r, size_t count, tribDataType_t dt, tribRedOp_t op,
                                 int root, tribComm_t comm, tribStream_t stream) {
  return blocking("tribReduce", comm, stream, makeCall(Coll::Reduce, s, r, count, dt, op, root));
}
TRIB_API tribResult_t tribBroadcast(const void* s, void* r, size_t count, tribDataType_t dt, int root,
                                    tribComm_t comm, tribStream_t stream) {
  return blocking("tribBroadcast", comm, stream, makeCall(Coll::Broadcast, s, r, count, dt, tribSum, root));
}
TRIB_API tribResult_t tribAllGather(const void* s, void* r, size_t count, tribDataType_t dt, tribComm_t comm,
                                    tribStream_t stream) {
  return blocking("tribAllGather", comm, stream, makeCall(Coll::AllGather, s, r, count, dt, tribSum, 0));
}
TRIB_API tribResult_t tribReduceScatter(const void* s, void* r, size_t count, tribDataType_t dt,
                                        tribRedOp_t op, tribComm_t comm, tribStream_t stream) {
  return blocking("tribReduceScatter", comm, stream, makeCall(Coll::ReduceScatter, s, r, count, dt, op, 0));
}
TRIB_API tribResult_t tribAlltoAll(const void* s, void* r, size_t count, tribDataType_t dt, tribComm_t comm,
                                   tribStream_t stream) {
  return blocking("tribAlltoAll", comm, stream, makeCall(Coll::AlltoAll, s, r, count, dt, tribSum, 0));
}
TRIB_API tribResult_t tribGather(const void* s, void* r, size_t count, tribDataType_t dt, int root,
                                 tribComm_t comm, tribStream_t stream) {
  return blocking("tribGather", comm, stream, makeCall(Coll::Gather, s, r, count, dt, tribSum, root));
}
TRIB_API tribResult_t tribScatter(const void* s, void* r, size_t count, tribDataType_t dt, int root,
                                  tribComm_t comm, tribStream_t stream) {
  return blocking("tribScatter", comm, stream, makeCall(Coll::Scatter, s, r, count, dt, tribSum, root));
}
// A barrier's schedule sends each rank's one-byte arrival token (schedule.hpp): the library's.
static CollCall barrierCall() {
  static const int8_t kArrivalToken = 1;
  return makeCall(Coll::Barrier, &kArrivalToken, nullptr, 0, tribInt8, tribSum, 0);
}
TRIB_API tribResult_t tribBarrier(tribComm_t comm, tribStream_t stream) {
  return blocking("tribBarrier", comm, stream, barrierCall());
}

TRIB_API tribResult_t tribSend(const void* buf, size_t count, tribDataType_t dt, int peer, tribComm_t comm,
                               tribStream_t stream) {
  return guarded("tribSend", [&]() -> Status {
    TRIB_RETURN_IF_ERROR(needComm("tribSend", comm));
    return trib::runP2p(comm->impl(), true, buf, count, dt, peer, stream);
  });
}
TRIB_API tribResult_t tribRecv(void* buf, size_t count, tribDataType_t dt, int peer, tribComm_t comm,
                               tribStream_t stream) {
  return guarded("tribRecv", [&]() -> Status {
    TRIB_RETURN_IF_ERROR(needComm("tribRecv", comm));
    return trib::runP2p(comm->impl(), false, buf, count, dt, peer, stream);
  });
}

TRIB_API tribResult_t tribIallReduce(const void* s, void* r, size_t count, tribDataType_t dt, tribRedOp_t op,
                                     tribComm_t comm, tribRequest_t* req) {
  return nonblocking("tribIallReduce", comm, req, makeCall(Coll::AllReduce, s, r, count, dt, op, 0));
}
TRIB_API tribResult_t tribIreduce(const void* s, void* r, size_t count, tribDataType_t dt, tribRedOp_t op,
                                  int root, tribComm_t comm, tribRequest_t* req) {
  return nonblocking("tribIreduce", comm, req, makeCall(Coll::Reduce, s, r, count, dt, op, root));
}
TRIB_API tribResult_t tribIbroadcast(const void* s, void* r, size_t count, tribDataType_t dt, int root,
                                     tribComm_t comm, tribRequest_t* req) {
  return nonblocking("tribIbroadcast", comm, req, makeCall(Coll::Broadcast, s, r, count, dt, tribSum, root));
}
TRIB_API tribResult_t tribIallGather(const void* s, void* r, size_t count, tribDataType_t dt, tribComm_t comm,
                                     tribRequest_t* req) {
  return nonblocking("tribIallGather", comm, req, makeCall(Coll::AllGather, s, r, count, dt, tribSum, 0));
}
TRIB_API tribResult_t tribIreduceScatter(const void* s, void* r, size_t count, tribDataType_t dt,
                                         tribRedOp_t op, tribComm_t comm, tribRequest_t* req) {
  return nonblocking("tribIreduceScatter", comm, req, makeCall(Coll::ReduceScatter, s, r, count, dt, op, 0));
}
TRIB_API tribResult_t tribIalltoAll(const void* s, void* r, size_t count, tribDataType_t dt, tribComm_t comm,
                                    tribRequest_t* req) {
  return nonblocking("tribIalltoAll", comm, req, makeCall(Coll::AlltoAll, s, r, count, dt, tribSum, 0));
}
TRIB_API tribResult_t tribIgather(const void* s, void* r, size_t count, tribDataType_t dt, int root,
                                  tribComm_t comm, tribRequest_t* req) {
  return nonblocking("tribIgather", comm, req, makeCall(Coll::Gather, s, r, count, dt, tribSum, root));
}
TRIB_API tribResult_t tribIscatter(const void* s, void* r, size_t count, tribDataType_t dt, int root,
                                   tribComm_t comm, tribRequest_t* req) {
  return nonblocking("tribIscatter", comm, req, makeCall(Coll::Scatter, s, r, count, dt, tribSum, root));
}
TRIB_API tribResult_t tribIbarrier(tribComm_t comm, tribRequest_t* req) {
  return nonblocking("tribIbarrier", comm, req, barrierCall());
}
TRIB_API tribResult_t tribIsend(const void* buf, size_t count, tribDataType_t dt, int peer, tribComm_t comm,
                                tribRequest_t* req) {
  return guarded("tribIsend", [&]() -> Status {
    TRIB_RETURN_IF_ERROR(needComm("tribIsend", comm));
    if (!req) return errorf(tribInvalidArgument, "tribIsend: request is NULL");
    return trib::launchP2p(comm->impl(), true, buf, count, dt, peer, req);
  });
}
TRIB_API tribResult_t tribIrecv(void* buf, size_t count, tribDataType_t dt, int peer, tribComm_t comm,
                                tribRequest_t* req) {
  return guarded("tribIrecv", [&]() -> Status {
    TRIB_RETURN_IF_ERROR(needComm("tribIrecv", comm));
    if (!req) return errorf(tribInvalidArgument, "tribIrecv: request is NULL");
    return trib::launchP2p(comm->impl(), false, buf, count, dt, peer, req);
  });
}

TRIB_API tribResult_t tribTest(tribRequest_t* request, int* done) {
  return guarded("tribTest", [&]() -> Status {
    if (!request || !*request) return errorf(tribInvalidArgument, "tribTest: request is NULL");
    if (!done) return errorf(tribInvalidArgument, "tribTest: done is NULL");
    TRIB_RETURN_IF_ERROR((*request)->comm->checkProcess());
    bool finished = false;
    Status st = trib::requestTest(*request, &finished);
    *done = finished ? 1 : 0;
    if (finished) {
      trib::requestFree(*request);
      *request = nullptr;
    }
    return st;
  });
}

TRIB_API tribResult_t tribWait(tribRequest_t* request, int timeoutMs) {
  return guarded("tribWait", [&]() -> Status {
    if (!request || !*request) return errorf(tribInvalidArgument, "tribWait: request is NULL");
    tribRequest* req = *request;
    TRIB_RETURN_IF_ERROR(req->comm->checkProcess());
    std::chrono::milliseconds timeout = timeoutMs == TRIB_TIMEOUT_DEFAULT ? req->comm->config.timeout
                                        : timeoutMs < 0                   ? std::chrono::milliseconds(-1)
                                                        : std::chrono::milliseconds(timeoutMs);
    // An explicit short timeout leaves the request valid (poll again later); the
    // communicator's own timeout means the operation is lost and breaks the communicator.
    Status st = trib::requestWait(req, timeout, timeoutMs == TRIB_TIMEOUT_DEFAULT);
    if (req->done) {
      trib::requestFree(req);
      *request = nullptr;
    }
    return st;
  });
}

TRIB_API tribResult_t tribRequestFree(tribRequest_t* request) {
  return guarded("tribRequestFree", [&]() -> Status {
    if (!request || !*request) return Status::Ok();
    tribRequest* req = *request;
    TRIB_RETURN_IF_ERROR(req->comm->checkProcess());
    if (!req->done && !req->comm->aborted.load()) {
      return errorf(tribInvalidUsage,
                    "tribRequestFree: %s is still running: wait for it or abort the communicator",
                    req->what().c_str());
    }
    trib::requestFree(req);
    *request = nullptr;
    return Status::Ok();
  });
}

TRIB_API tribResult_t tribRedOpCreatePreMulSum(tribRedOp_t* op, void* scalar, tribDataType_t datatype,
                                               tribScalarResidence_t residence, tribComm_t comm) {
  return guarded("tribRedOpCreatePreMulSum", [&]() -> Status {
    TRIB_RETURN_IF_ERROR(needComm("tribRedOpCreatePreMulSum", comm));
    if (!op) return errorf(tribInvalidArgument, "tribRedOpCreatePreMulSum: op is NULL");
    return trib::createPreMulSum(comm->impl(), scalar, datatype, residence, op);
  });
}

TRIB_API tribResult_t tribRedOpDestroy(tribRedOp_t op, tribComm_t comm) {
  return guarded("tribRedOpDestroy", [&]() -> Status {
    TRIB_RETURN_IF_ERROR(needComm("tribRedOpDestroy", comm));
    return trib::destroyPreMulSum(comm->impl(), op);
  });
}

TRIB_API tribResult_t tribGroupStart(void) {
  return guarded("tribGroupStart", [] { return trib::groupStart(); });
}
TRIB_API tribResult_t tribGroupEnd(void) {
  return guarded("tribGroupEnd", [] { return trib::groupEnd(); });
}
TRIB_API tribResult_t tribGroupSimulateEnd(tribSimInfo_t* info) {
  return guarded("tribGroupSimulateEnd", [&]() -> Status {
    if (!trib::inGroup())
      return errorf(tribInvalidUsage, "tribGroupSimulateEnd without a matching tribGroupStart");
    if (!info) return errorf(tribInvalidArgument, "tribGroupSimulateEnd: info is NULL");
    if (info->magic != TRIB_SIM_INFO_MAGIC || info->size < TRIB_SIM_INFO_MIN_SIZE)
      return errorf(tribInvalidArgument,
                    "tribGroupSimulateEnd: info not initialised (size %zu, magic 0x%x): declare it as "
                    "'tribSimInfo_t info = TRIB_SIM_INFO_INITIALIZER;'",
                    info->size, info->magic);
    if (info->version < TRIB_SIM_INFO_FIRST_VERSION)
      return errorf(tribInvalidArgument,
                    "tribGroupSimulateEnd: info.version %u is older than the first tribSimInfo_t (%u)",
                    info->version, TRIB_SIM_INFO_FIRST_VERSION);
    double us = 0;
    TRIB_RETURN_IF_ERROR(trib::groupSimulateEnd(&us));
    info->estimatedTime = static_cast<float>(us);
    return Status::Ok();
  });
}

}  // extern "C"
