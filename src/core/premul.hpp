// Pre-multiplied sums (tribRedOpCreatePreMulSum, as NCCL's): an operator, made per communicator and
// datatype, that multiplies each rank's input by a scalar before summing. A call that uses one is
// validated as given, then rewritten at launch as a sum of a scaled copy of the input (this rank's
// scratch), which the request owns: every reduction collective, blocking, non-blocking or grouped,
// plans and runs a plain sum. Stream-ordered calls do not take these operators yet.
#pragma once
#include "core/comm.hpp"

namespace trib {

Status createPreMulSum(Communicator* comm, const void* scalar, DataType dtype,
                       tribScalarResidence_t residence, RedOp* out);
Status destroyPreMulSum(Communicator* comm, RedOp op);
inline bool isPreMulSum(RedOp op) { return static_cast<int>(op) >= tribNumOps; }
// The operator of a reduction call that is not built in: made on this communicator, for its dtype.
Status checkPreMulSum(const Communicator* comm, const CollCall& call);
// Scales the call's input into `scaled` and makes `call` a sum of it (a validated host call).
Status applyPreMulSum(Communicator* comm, CollCall* call, Scratch* scaled);

}  // namespace trib
