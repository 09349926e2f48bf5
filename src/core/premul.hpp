// Pre-multiplied sums (tribRedOpCreatePreMulSum, as NCCL's): an operator, made per communicator and
// datatype, that multiplies each rank's input by a scalar before summing. A call that uses one is
// validated as given, then rewritten at launch as a sum of a scaled copy of the input (this rank's
// scratch), which the request owns: every reduction collective, blocking, non-blocking or grouped,
// plans and runs a plain sum. A stream-ordered call is planned as a sum too; its input is scaled
// on the call's engine when the stream reaches it (core/stream_progress.cpp).
#pragma once
#include <chrono>
#include <vector>

#include "core/comm.hpp"
#include "exec/engine.hpp"

namespace trib {

Status createPreMulSum(Communicator* comm, const void* scalar, DataType dtype,
                       tribScalarResidence_t residence, RedOp* out);
Status destroyPreMulSum(Communicator* comm, RedOp op);
inline bool isPreMulSum(RedOp op) { return static_cast<int>(op) >= tribNumOps; }
// The operator of a reduction call that is not built in: made on this communicator, for its dtype.
Status checkPreMulSum(const Communicator* comm, const CollCall& call);
// Scales the call's input into `scaled` and makes `call` a sum of it (a validated host call).
Status applyPreMulSum(Communicator* comm, CollCall* call, Scratch* scaled);
// The scalar of a validated call's operator, read now (a tribScalarDevice pointer included).
std::vector<uint8_t> preMulScalar(const Communicator* comm, RedOp op);
// *out (from `pool`) <- src x scalar, n elements of dtype multiplied in the type's arithmetic by
// `engine` (the CPU's reducer, or kernels on the device's memory), waited for until `deadline`.
// Stream-ordered calls run it on their progress thread once the stream reaches them.
Status scaleInput(Engine& engine, ScratchPool& pool, const void* src, uint64_t n, DataType dtype,
                  const void* scalar, std::chrono::steady_clock::time_point deadline, Scratch* out);

}  // namespace trib
