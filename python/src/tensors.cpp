#include "tensors.hpp"

#include <c10/util/Exception.h>

#include <optional>

namespace torch_tributary {

namespace {

std::optional<tribDataType_t> tribTypeOf(at::ScalarType t) {
  switch (t) {
    case at::kChar:
      return tribInt8;
    case at::kByte:
      return tribUint8;
    case at::kInt:
      return tribInt32;
    case at::kLong:
      return tribInt64;
    case at::kHalf:
      return tribFloat16;
    case at::kBFloat16:
      return tribBfloat16;
    case at::kFloat:
      return tribFloat32;
    case at::kDouble:
      return tribFloat64;
    case at::kBool:  // one byte, 0 or 1
      return tribUint8;
    default:
      return std::nullopt;
  }
}

const char* opName(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM:
      return "SUM";
    case c10d::ReduceOp::AVG:
      return "AVG";
    case c10d::ReduceOp::PRODUCT:
      return "PRODUCT";
    case c10d::ReduceOp::MIN:
      return "MIN";
    case c10d::ReduceOp::MAX:
      return "MAX";
    case c10d::ReduceOp::BAND:
      return "BAND";
    case c10d::ReduceOp::BOR:
      return "BOR";
    case c10d::ReduceOp::BXOR:
      return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM:
      return "PREMUL_SUM";
    default:
      return "an unknown op";
  }
}

}  // namespace

void checkTensor(const at::Tensor& t, const char* op) {
  TORCH_CHECK_VALUE(t.defined(), "tributary ", op, ": got an undefined tensor");
  TORCH_CHECK_VALUE(t.layout() == at::kStrided, "tributary ", op,
                    ": only dense (strided) tensors are supported, got ", t.layout());
  TORCH_CHECK_VALUE(t.device().is_cpu(), "tributary ", op, ": tensor is on device ", t.device(),
                    "; the tributary backend takes CPU tensors (CUDA tensors are not supported yet)");
}

const at::Tensor& single(const std::vector<at::Tensor>& tensors, const char* op) {
  TORCH_CHECK_VALUE(tensors.size() == 1, "tributary ", op, ": takes one tensor per process, got ",
                    tensors.size());
  checkTensor(tensors[0], op);
  return tensors[0];
}

void checkSameShape(const std::vector<at::Tensor>& ts, const at::Tensor& like, int64_t numel, const char* op,
                    const char* what) {
  for (size_t i = 0; i < ts.size(); ++i) {
    checkTensor(ts[i], op);
    TORCH_CHECK_TYPE(ts[i].scalar_type() == like.scalar_type(), "tributary ", op, ": ", what, " tensor ", i,
                     " has dtype ", ts[i].scalar_type(), ", expected ", like.scalar_type());
    TORCH_CHECK_VALUE(ts[i].numel() == numel, "tributary ", op, ": ", what, " tensor ", i, " has ",
                      ts[i].numel(), " elements, expected ", numel);
  }
}

Wire wireOf(const at::Tensor& t) {
  if (auto d = tribTypeOf(t.scalar_type())) return {*d, static_cast<size_t>(t.numel())};
  return {tribUint8, static_cast<size_t>(t.numel()) * t.element_size()};
}

void Reduction::prescale(at::Tensor& buf) const {
  if (!premul) return;
  if (factorTensor.defined()) {
    buf.mul_(factorTensor);
  } else {
    buf.mul_(factor);
  }
}

at::Tensor Reduction::view(const at::Tensor& buf) const { return asReal ? at::view_as_real(buf) : buf; }

Reduction reductionOf(const c10d::ReduceOp& rop, const at::Tensor& t, const char* opName_) {
  Reduction r;
  const auto op = static_cast<c10d::ReduceOp::RedOpType>(rop);
  at::ScalarType type = t.scalar_type();
  if (at::isComplexType(type)) {
    TORCH_CHECK_TYPE(
        op == c10d::ReduceOp::SUM || op == c10d::ReduceOp::AVG || op == c10d::ReduceOp::PREMUL_SUM,
        "tributary ", opName_, ": ", opName(op), " is not defined for complex dtype ", type,
        " (SUM, AVG and PREMUL_SUM are)");
    r.asReal = true;
    type = c10::toRealValueType(type);
  }
  auto d = tribTypeOf(type);
  TORCH_CHECK_TYPE(
      d.has_value(), "tributary ", opName_, ": cannot reduce dtype ", t.scalar_type(),
      "; it reduces int8, uint8, int32, int64, float16, bfloat16, float32, float64, bool and complex");
  r.dtype = *d;
  switch (op) {
    case c10d::ReduceOp::SUM:
      r.op = tribSum;
      break;
    case c10d::ReduceOp::AVG:
      r.op = tribAvg;
      break;
    case c10d::ReduceOp::PRODUCT:
      r.op = tribProd;
      break;
    case c10d::ReduceOp::MIN:
      r.op = tribMin;
      break;
    case c10d::ReduceOp::MAX:
      r.op = tribMax;
      break;
    case c10d::ReduceOp::PREMUL_SUM: {
      r.op = tribSum;
      r.premul = true;
      // Only PREMUL_SUM carries this supplement (torch.distributed._make_nccl_premul_sum).
      auto* s = static_cast<c10d::NCCLPreMulSumSupplement*>(rop.supplement_.get());
      TORCH_CHECK_VALUE(s != nullptr, "tributary ", opName_, ": PREMUL_SUM without its factor");
      if (!s->tensor_factors.empty()) {
        r.factorTensor = s->tensor_factors.front();
        checkTensor(r.factorTensor, opName_);
      } else {
        r.factor = s->double_factor;
      }
      break;
    }
    default:
      TORCH_CHECK_VALUE(false, "tributary ", opName_, ": reduce op ", opName(op),
                        " is not supported (SUM, AVG, PRODUCT, MIN, MAX and PREMUL_SUM are)");
  }
  if (t.scalar_type() == at::kBool) {
    // As other backends: a logical or for SUM, a logical and for PRODUCT.
    TORCH_CHECK_TYPE(r.op != tribAvg && !r.premul, "tributary ", opName_, ": ", opName(op),
                     " is not defined for bool tensors");
    if (r.op == tribSum) r.op = tribMax;
    if (r.op == tribProd) r.op = tribMin;
  }
  return r;
}

Output::Output(const at::Tensor& u, bool inPlace) : user(u) {
  if (u.is_contiguous()) {
    buf = u;
  } else {
    buf = inPlace ? u.contiguous() : at::empty_like(u, at::MemoryFormat::Contiguous);
  }
}

void Output::finish() {
  if (!buf.is_same(user)) user.copy_(buf);
}

}  // namespace torch_tributary
