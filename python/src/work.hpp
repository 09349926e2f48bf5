// The Work object of one operation: completed by the backend's worker thread, with its Future
// (DDP communication hooks chain on it).
#pragma once
#include <ATen/core/ivalue.h>

#include <exception>
#include <vector>

#include "compat.hpp"

namespace torch_tributary {

class TribWork : public c10d::Work {
 public:
  TribWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs);
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  // Marks the work done (e == nullptr) or failed; wakes waiters, then completes the future.
  void complete(std::exception_ptr e);

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace torch_tributary
