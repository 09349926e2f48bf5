// NCCL's values to Tributary's and back: every enum value translated by name (the numbering
// differs: ncclMax is 2 where tribMax is 3, ncclFloat32 is 7 where tribFloat32 is 8), results
// mapped to NCCL's codes, and the per-thread last-error message ncclGetLastError returns.
#pragma once
#include <string>

#include "nccl/nccl_abi.h"
#include "tributary/tributary.h"

namespace tribnccl {

// Sets this thread's last error and returns `code`.
ncclResult_t fail(ncclResult_t code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
// A Tributary result as NCCL's: on failure, Tributary's message becomes this thread's last error.
ncclResult_t fromTrib(tribResult_t r);
ncclResult_t resultToNccl(tribResult_t r);
const char* lastError();
const char* resultString(ncclResult_t r);

// false for a value NCCL does not define (the caller reports it).
bool dataTypeToTrib(ncclDataType_t in, tribDataType_t* out);
bool builtinOpToTrib(ncclRedOp_t in, tribRedOp_t* out);
bool scalarResidenceToTrib(ncclScalarResidence_t in, tribScalarResidence_t* out);

// ncclConfig_t by NCCL's rule: the magic proves it was initialised with NCCL_CONFIG_INITIALIZER, the
// caller's `size` says which fields its header had (later ones take defaults), fields left at
// NCCL_CONFIG_UNDEF_* take Tributary's defaults. NULL gives the defaults. `fn` names the call.
ncclResult_t configToTrib(const char* fn, const ncclConfig_t* in, tribConfig_t* out);

}  // namespace tribnccl
