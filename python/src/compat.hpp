// The one place that knows which PyTorch is being built against: 1.x process groups derive from
// c10d::ProcessGroup, 2.x backends from c10d::Backend (same operations, same creator signature).
#pragma once
#include <torch/version.h>

#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
namespace torch_tributary {
using BackendBase = c10d::Backend;
}
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
namespace torch_tributary {
using BackendBase = c10d::ProcessGroup;
}
#endif
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
