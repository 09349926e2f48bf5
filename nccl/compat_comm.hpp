// The ncclComm_t handle: a Tributary communicator plus what NCCL's API adds on top of it, the table
// of operators ncclRedOpCreatePreMulSum made (NCCL's values from ncclNumOps up, each naming a
// Tributary operator), and the count of calls inside it so that ncclCommAbort from another thread
// frees it only once they have returned.
#pragma once
#include <atomic>
#include <map>
#include <mutex>

#include "nccl/nccl_abi.h"
#include "tributary/tributary.h"

struct ncclComm {
  explicit ncclComm(tribComm_t t) : trib(t) {}
  tribComm_t trib;
  std::atomic<int> activeCalls{0};
  std::atomic<bool> aborting{false};
  std::mutex opsMu;
  std::map<int, tribRedOp_t> ops;  // NCCL operator value -> Tributary operator
  int nextOp = ncclNumOps;
};

namespace tribnccl {

// Holds a communicator in use for the length of one call.
class CallScope {
 public:
  explicit CallScope(ncclComm* c) : c_(c) {
    if (c_) c_->activeCalls.fetch_add(1, std::memory_order_acq_rel);
  }
  ~CallScope() {
    if (c_) c_->activeCalls.fetch_sub(1, std::memory_order_acq_rel);
  }
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;

 private:
  ncclComm* c_;
};

// The Tributary operator for NCCL's `op` on `comm`: a built-in one, or one ncclRedOpCreatePreMulSum
// made on this communicator. Fails (with a message) for any other value.
ncclResult_t opToTrib(const char* fn, ncclComm* comm, ncclRedOp_t op, tribRedOp_t* out);

}  // namespace tribnccl
