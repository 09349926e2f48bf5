#include "work.hpp"

namespace torch_tributary {

TribWork::TribWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs)
    : c10d::Work(rank, type),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

void TribWork::complete(std::exception_ptr e) {
  finish(e);
  if (e) {
    future_->setError(e);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

}  // namespace torch_tributary
