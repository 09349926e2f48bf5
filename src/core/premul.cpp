#include "core/premul.hpp"

#include <algorithm>
#include <cstring>
#include <deque>

#include "core/registration.hpp"
#include "reduce/reduce.hpp"

namespace trib {

Status createPreMulSum(Communicator* comm, const void* scalar, DataType dtype,
                       tribScalarResidence_t residence, RedOp* out) {
  TRIB_RETURN_IF_ERROR(comm->checkUsable());
  if (!scalar) return errorf(tribInvalidArgument, "tribRedOpCreatePreMulSum: scalar is NULL");
  if (!validDataType(dtype)) {
    return errorf(tribInvalidArgument, "tribRedOpCreatePreMulSum: unknown datatype %d",
                  static_cast<int>(dtype));
  }
  if (residence != tribScalarHostImmediate && residence != tribScalarDevice) {
    return errorf(
        tribInvalidArgument,
        "tribRedOpCreatePreMulSum: residence %d is neither tribScalarHostImmediate nor tribScalarDevice",
        static_cast<int>(residence));
  }
  const size_t es = dataTypeSize(dtype);
  if (classifyMemory(scalar, es, &comm->registrations) == MemoryKind::Device) {
    return errorf(tribNotSupported,
                  "tribRedOpCreatePreMulSum: the scalar is in CUDA device memory; only a host scalar is "
                  "supported yet");
  }
  if (comm->nextPreMulSum == INT32_MAX)
    return errorf(tribSystemError, "tribRedOpCreatePreMulSum: this communicator has made 2^31 operators");
  PreMulSum p;
  p.dtype = dtype;
  p.immediate = residence == tribScalarHostImmediate;
  if (p.immediate) {
    const auto* b = static_cast<const uint8_t*>(scalar);
    p.scalar.assign(b, b + es);
  } else {
    p.scalarPtr = scalar;
  }
  const int value = comm->nextPreMulSum++;
  comm->preMulSums.emplace(value, std::move(p));
  *out = static_cast<RedOp>(value);
  return Status::Ok();
}

Status destroyPreMulSum(Communicator* comm, RedOp op) {
  TRIB_RETURN_IF_ERROR(comm->checkProcess());
  if (!isPreMulSum(op)) {
    return errorf(tribInvalidArgument, "tribRedOpDestroy: %d is a built-in operator (%s), not one to destroy",
                  static_cast<int>(op), redOpName(op));
  }
  if (comm->preMulSums.erase(static_cast<int>(op)) == 0) {
    return errorf(
        tribInvalidArgument,
        "tribRedOpDestroy: operator %d was not made by tribRedOpCreatePreMulSum on this communicator "
        "(or is already destroyed)",
        static_cast<int>(op));
  }
  return Status::Ok();
}

Status checkPreMulSum(const Communicator* comm, const CollCall& call) {
  auto it = comm->preMulSums.find(static_cast<int>(call.op));
  if (it == comm->preMulSums.end()) {
    return errorf(
        tribInvalidArgument,
        "unknown reduction operator %d (valid: tribSum, tribProd, tribMin, tribMax, tribAvg, or one "
        "tribRedOpCreatePreMulSum made on this communicator and not yet destroyed)",
        static_cast<int>(call.op));
  }
  if (it->second.dtype != call.dtype) {
    return errorf(tribInvalidArgument, "reduction operator %d was made for %s, but the call is on %s",
                  static_cast<int>(call.op), dataTypeName(it->second.dtype), dataTypeName(call.dtype));
  }
  return Status::Ok();
}

std::vector<uint8_t> preMulScalar(const Communicator* comm, RedOp op) {
  const PreMulSum& p = comm->preMulSums.at(static_cast<int>(op));
  if (p.immediate) return p.scalar;
  const auto* b = static_cast<const uint8_t*>(p.scalarPtr);
  return std::vector<uint8_t>(b, b + dataTypeSize(p.dtype));
}

Status scaleInput(Engine& engine, ScratchPool& pool, const void* src, uint64_t n, DataType dtype,
                  const void* scalar, std::chrono::steady_clock::time_point deadline, Scratch* out) {
  if (n == 0) return Status::Ok();
  const size_t es = dataTypeSize(dtype);
  // x * scalar is the type's own product: the engine's prod against a block of scalars in its memory.
  constexpr uint64_t kBlock = 1 << 16;
  const uint64_t block = std::min(n, kBlock);
  std::vector<uint8_t> scalars(block * es);
  for (uint64_t i = 0; i < block; ++i) std::memcpy(scalars.data() + i * es, scalar, es);
  Scratch onEngine;
  TRIB_RETURN_IF_ERROR(pool.acquire(block * es, &onEngine));
  TRIB_RETURN_IF_ERROR(pool.acquire(n * es, out));
  std::deque<TransferOp> ops;
  auto waitAll = [&]() -> Status {
    Backoff backoff;
    for (;;) {
      bool pending = false;
      for (const TransferOp& op : ops) {
        if (op.state.load(std::memory_order_acquire) == TransferOp::kFailed) return op.error;
        pending |= !op.done();
      }
      if (!pending) return Status::Ok();
      TRIB_RETURN_IF_ERROR(engine.progress());
      if (std::chrono::steady_clock::now() >= deadline)
        return errorf(tribTimeout, "scaling a pre-multiplied sum's input on the %s engine timed out",
                      engine.name());
      backoff.idle();
    }
  };
  TRIB_RETURN_IF_ERROR(
      engine.postCopy(onEngine.data(), scalars.data(), block * es, &ops.emplace_back(), false));
  TRIB_RETURN_IF_ERROR(waitAll());  // `scalars` is read until then
  auto* dst = static_cast<uint8_t*>(out->data());
  const auto* in = static_cast<const uint8_t*>(src);
  for (uint64_t done = 0; done < n;) {
    const uint64_t m = std::min(block, n - done);
    TRIB_RETURN_IF_ERROR(engine.postReduce(dst + done * es, in + done * es, onEngine.data(), m, dtype,
                                           tribProd, &ops.emplace_back()));
    done += m;
  }
  return waitAll();
}

Status applyPreMulSum(Communicator* comm, CollCall* call, Scratch* scaled) {
  const std::vector<uint8_t> scalar = preMulScalar(comm, call->op);
  const uint64_t n = inputCount(argsFor(comm, *call), comm->rank);
  call->op = tribSum;
  if (n == 0) return Status::Ok();
  TRIB_RETURN_IF_ERROR(scaleInput(hostEngine(), comm->scratchPool, call->sendbuff, n, call->dtype,
                                  scalar.data(), std::chrono::steady_clock::now() + comm->config.timeout,
                                  scaled));
  call->sendbuff = scaled->data();
  call->sendKind = MemoryKind::Host;
  return Status::Ok();
}

}  // namespace trib
