// The CUDA-IPC / NVLink transport: a window provider only. It maps every rank's device window
// into every rank of one host (nvlink_windows.hpp) so that the one-shot and two-shot schedules'
// peer-memory steps run on device memory, the CUDA engine copying (copy engine) and reducing
// (kernels) straight through NVLink or PCIe peer mappings. Two-sided messages stay with the pair
// transports (loopback, shm, UCX), which stage device memory through pinned host memory.
#pragma once
#include <memory>

#include "transports/nvlink/nvlink_windows.hpp"
#include "transports/registry.hpp"

namespace trib {

// The registry's entry (registry.hpp: windowProviderRegistry).
TransportDescriptor nvlinkTransportDescriptor();

namespace nvlink {

class NvlinkTransport final : public Transport {
 public:
  explicit NvlinkTransport(std::unique_ptr<NvlinkWindows> windows) : windows_(std::move(windows)) {}
  const char* name() const override { return "nvlink"; }
  Status postSend(int peer, uint64_t, const void*, size_t, TransferOp*) override { return twoSided(peer); }
  Status postRecv(int peer, uint64_t, void*, size_t, const ReduceSpec*, TransferOp*) override {
    return twoSided(peer);
  }
  Status progress() override { return Status::Ok(); }
  void abort(const Status& why) override {
    if (windows_) windows_->abort(why);
  }
  // nullptr where some pair cannot map the other's device memory (host staging then).
  PeerWindows* windows() override { return windows_.get(); }

 private:
  static Status twoSided(int peer) {
    return errorf(tribInternalError,
                  "the nvlink transport provides windows only; a message to rank %d was posted "
                  "on it",
                  peer);
  }
  std::unique_ptr<NvlinkWindows> windows_;
};

// This process's RankLocation::flags: kLocationCudaContext where the calling thread has a current
// CUDA context (it set its device before init, as NCCL programs do) and TRIB_NVLINK is not 0.
// Two ranks connect the nvlink windows when both have it and share a host.
uint32_t locationFlags();

}  // namespace nvlink
}  // namespace trib
