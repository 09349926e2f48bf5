// Tensor checks and the mapping of torch dtypes and reduce ops onto Tributary's.
#pragma once
#include <ATen/ATen.h>

#include <vector>

#include "compat.hpp"
#include "tributary/tributary.h"

namespace torch_tributary {

// Refuses (with a Python exception) what the backend cannot take: an undefined, sparse or
// non-CPU tensor. Non-contiguous tensors are accepted: they travel through a contiguous copy.
void checkTensor(const at::Tensor& t, const char* op);
// One tensor per process, as every CPU backend takes; returns it, checked.
const at::Tensor& single(const std::vector<at::Tensor>& tensors, const char* op);
// Every tensor of `ts` has `like`'s dtype and `numel` elements.
void checkSameShape(const std::vector<at::Tensor>& ts, const at::Tensor& like, int64_t numel, const char* op,
                    const char* what);

// How a tensor's bytes travel when nothing is reduced: its own type when Tributary has it,
// otherwise as bytes (int16, complex, ...).
struct Wire {
  tribDataType_t dtype;
  size_t count;
};
Wire wireOf(const at::Tensor& contiguous);

// A reduction as Tributary runs it: the type and op, and how the tensor is seen (complex as
// pairs of reals) or pre-scaled (premul_sum scales locally, then sums).
struct Reduction {
  tribDataType_t dtype = tribFloat32;
  tribRedOp_t op = tribSum;
  bool asReal = false;  // complex tensor reduced through its real view
  bool premul = false;
  double factor = 1.0;
  at::Tensor factorTensor;  // premul_sum given a tensor factor
  // Applies the pre-scaling (premul_sum) to `buf` in place.
  void prescale(at::Tensor& buf) const;
  // The buffer Tributary reduces: buf itself or its real view; its element count.
  at::Tensor view(const at::Tensor& buf) const;
};
Reduction reductionOf(const c10d::ReduceOp& op, const at::Tensor& t, const char* opName);

// A tensor the backend writes: the user's, or a contiguous stand-in copied back by finish(); an
// in-place one (allreduce, broadcast) starts with the user's data.
struct Output {
  explicit Output(const at::Tensor& user, bool inPlace = false);
  at::Tensor user;
  at::Tensor buf;
  void finish();
};

}  // namespace torch_tributary
