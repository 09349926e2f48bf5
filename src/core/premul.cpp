#include "core/premul.hpp"

#include <algorithm>
#include <cstring>

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

Status applyPreMulSum(Communicator* comm, CollCall* call, Scratch* scaled) {
  const PreMulSum& p = comm->preMulSums.at(static_cast<int>(call->op));
  const size_t es = dataTypeSize(call->dtype);
  const uint64_t n = inputCount(argsFor(comm, *call), comm->rank);
  call->op = tribSum;
  if (n == 0) return Status::Ok();
  // x * scalar is the type's own product: the reduction kernels' prod against a block of scalars.
  constexpr size_t kBlock = 1024;
  std::vector<uint8_t> scalars(kBlock * es);
  const void* scalar = p.immediate ? p.scalar.data() : p.scalarPtr;
  for (size_t i = 0; i < kBlock; ++i) std::memcpy(scalars.data() + i * es, scalar, es);
  TRIB_RETURN_IF_ERROR(comm->scratchPool.acquire(n * es, scaled));
  auto* dst = static_cast<uint8_t*>(scaled->data());
  const auto* src = static_cast<const uint8_t*>(call->sendbuff);
  for (uint64_t done = 0; done < n;) {
    const size_t m = static_cast<size_t>(std::min<uint64_t>(kBlock, n - done));
    reduce(dst + done * es, src + done * es, scalars.data(), m, call->dtype, tribProd);
    done += m;
  }
  call->sendbuff = scaled->data();
  call->sendKind = MemoryKind::Host;
  return Status::Ok();
}

}  // namespace trib
