#include "nccl/translate.hpp"

#include <cstdarg>
#include <cstddef>
#include <cstdio>

namespace tribnccl {
namespace {

thread_local std::string tLastError;

// The first fields every ncclConfig_t has had (size, magic, version, blocking): a smaller size is
// not a config struct.
constexpr size_t kConfigMinSize = offsetof(ncclConfig_t, blocking) + sizeof(int);

// NCCL_VERSION(2, 14, 0): the first release with ncclConfig_t.
constexpr unsigned kConfigFirstVersion = 21400;

template <typename T>
bool hasField(const ncclConfig_t* c, size_t offset) {
  return c->size >= offset + sizeof(T);
}

}  // namespace

ncclResult_t fail(ncclResult_t code, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  tLastError = buf;
  return code;
}

ncclResult_t resultToNccl(tribResult_t r) {
  switch (r) {
    case tribSuccess:
      return ncclSuccess;
    case tribUnhandledCudaError:
      return ncclUnhandledCudaError;
    case tribSystemError:
      return ncclSystemError;
    case tribInternalError:
      return ncclInternalError;
    case tribInvalidArgument:
      return ncclInvalidArgument;
    case tribInvalidUsage:
      return ncclInvalidUsage;
    case tribRemoteError:
      return ncclRemoteError;
    case tribInProgress:
      return ncclInProgress;
    case tribTimeout:  // NCCL has no timeout code: a peer that does not answer in time
      return ncclRemoteError;
    case tribAborted:  // a call on (or blocked in) an aborted communicator
      return ncclInvalidUsage;
    case tribNotSupported:  // a valid request this build cannot serve: NCCL says invalid usage
      return ncclInvalidUsage;
    default:
      return ncclInternalError;
  }
}

ncclResult_t fromTrib(tribResult_t r) {
  if (r == tribSuccess) return ncclSuccess;
  const ncclResult_t code = resultToNccl(r);
  tLastError = tribGetLastError(nullptr);
  if (tLastError.empty()) tLastError = tribGetErrorString(r);
  return code;
}

const char* lastError() { return tLastError.c_str(); }

const char* resultString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error";
    case ncclSystemError:
      return "unhandled system error (out of memory, socket or OS failure)";
    case ncclInternalError:
      return "internal error (a Tributary bug: please report it)";
    case ncclInvalidArgument:
      return "invalid argument";
    case ncclInvalidUsage:
      return "invalid usage";
    case ncclRemoteError:
      return "remote process exited or there was a network error (or a peer timed out)";
    case ncclInProgress:
      return "NCCL operation in progress";
    default:
      return "unknown result code";
  }
}

bool dataTypeToTrib(ncclDataType_t in, tribDataType_t* out) {
  switch (in) {
    case ncclInt8:
      *out = tribInt8;
      return true;
    case ncclUint8:
      *out = tribUint8;
      return true;
    case ncclInt32:
      *out = tribInt32;
      return true;
    case ncclUint32:
      *out = tribUint32;
      return true;
    case ncclInt64:
      *out = tribInt64;
      return true;
    case ncclUint64:
      *out = tribUint64;
      return true;
    case ncclFloat16:
      *out = tribFloat16;
      return true;
    case ncclFloat32:
      *out = tribFloat32;
      return true;
    case ncclFloat64:
      *out = tribFloat64;
      return true;
    case ncclBfloat16:
      *out = tribBfloat16;
      return true;
    case ncclFloat8e4m3:
      *out = tribFp8E4M3;
      return true;
    case ncclFloat8e5m2:
      *out = tribFp8E5M2;
      return true;
    default:
      return false;
  }
}

bool builtinOpToTrib(ncclRedOp_t in, tribRedOp_t* out) {
  switch (in) {
    case ncclSum:
      *out = tribSum;
      return true;
    case ncclProd:
      *out = tribProd;
      return true;
    case ncclMax:
      *out = tribMax;
      return true;
    case ncclMin:
      *out = tribMin;
      return true;
    case ncclAvg:
      *out = tribAvg;
      return true;
    default:
      return false;
  }
}

bool scalarResidenceToTrib(ncclScalarResidence_t in, tribScalarResidence_t* out) {
  switch (in) {
    case ncclScalarDevice:
      *out = tribScalarDevice;
      return true;
    case ncclScalarHostImmediate:
      *out = tribScalarHostImmediate;
      return true;
    default:
      return false;
  }
}

ncclResult_t configToTrib(const char* fn, const ncclConfig_t* in, tribConfig_t* out) {
  *out = tribConfig_t TRIB_CONFIG_INITIALIZER;
  if (!in) return ncclSuccess;
  if (in->magic != TRIB_NCCL_CONFIG_MAGIC || in->size < kConfigMinSize) {
    return fail(ncclInvalidArgument,
                "%s: config not initialised (magic 0x%x, size %zu): declare it as "
                "'ncclConfig_t config = NCCL_CONFIG_INITIALIZER;'",
                fn, in->magic, in->size);
  }
  if (in->version < kConfigFirstVersion) {
    return fail(ncclInvalidArgument, "%s: config.version %u is older than NCCL 2.14's ncclConfig_t (%u)", fn,
                in->version, kConfigFirstVersion);
  }
  if (in->blocking != TRIB_NCCL_UNDEF_INT) {
    if (in->blocking != 0 && in->blocking != 1)
      return fail(ncclInvalidArgument, "%s: config.blocking %d must be 0 or 1", fn, in->blocking);
    out->blocking = in->blocking;
  }
  if (hasField<int>(in, offsetof(ncclConfig_t, splitShare)) && in->splitShare != TRIB_NCCL_UNDEF_INT) {
    if (in->splitShare != 0 && in->splitShare != 1)
      return fail(ncclInvalidArgument, "%s: config.splitShare %d must be 0 or 1", fn, in->splitShare);
    out->shareTransports = in->splitShare;
  }
  if (hasField<const char*>(in, offsetof(ncclConfig_t, commName))) out->commName = in->commName;
  // The other fields tune CUDA kernels and NCCL's own network plugins (CTAs, CGA clusters, NVLS,
  // collnet, traffic class, netName): Tributary's planner chooses those itself; they are accepted and
  // have no effect (docs/NCCL.md).
  return ncclSuccess;
}

}  // namespace tribnccl
