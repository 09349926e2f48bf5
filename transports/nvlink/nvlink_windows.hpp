// The CUDA-IPC window provider's PeerWindows (transport.hpp): every rank's window mapped into
// every rank of one host, on device memory (the CUDA backend) or, in the CPU tests, host memfds,
// with counted signals in a host signal page per rank. Connecting is collective and bounded by
// the timeout: two rounds of the bootstrap's exchange (nvlink_blob.hpp) and, between processes,
// one Unix-socket message per ordered pair carrying the signal page's and the window's file
// descriptors (fd_passing.hpp). Ranks of one process use each other's pointers directly.
#pragma once
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/process.hpp"
#include "transports/nvlink/nvlink_blob.hpp"
#include "transports/nvlink/window_memory.hpp"
#include "transports/registry.hpp"
#include "transports/transport.hpp"

namespace trib::nvlink {

struct WindowsArgs {
  int rank = 0, nranks = 1;
  uint64_t commId = 0;
  std::vector<RankLocation> locations;  // every rank's, in rank order
  OobAllGather oob;                     // over all nranks
  std::chrono::milliseconds timeout{300000};
  uint64_t windowBytes = 2 << 20;  // each rank's (two cells), rounded up to 64
};

// The handle type a communicator's windows use, from every rank's facts: one all ranks can
// export and import (VMM fds where every device supports them, else legacy IPC), or None.
WindowHandle chooseHandle(MemoryKind memory, const std::vector<DeviceFacts>& all);

class NvlinkWindows final : public PeerWindows {
 public:
  // Collective over all ranks. Where some pair cannot map the other's window (no peer access, no
  // common handle type) every rank returns Ok with *out null and *why saying which pair: device
  // calls then stage through host memory over the two-sided transports.
  static Status create(const WindowsArgs& args, std::unique_ptr<WindowMemory> memory,
                       std::unique_ptr<NvlinkWindows>* out, std::string* why);
  ~NvlinkWindows() override;

  uint64_t windowBytes() const override { return windowBytes_; }
  uint8_t* windowOf(int rank) const override { return static_cast<uint8_t*>(windows_[rank]); }
  void signal(int peer, uint32_t fingerprint) override;
  uint32_t fingerprintMask() const override { return kFingerprintMask; }
  Status pollSignals(int peer, uint64_t target, uint64_t* count, uint32_t* fingerprint) override;
  uint64_t& waitsPosted(int peer) override { return waitsPosted_[peer]; }

  MemoryKind memory() const { return memory_->kind(); }
  int device() const override { return memory_->device(); }  // -1: the host stand-in
  PairPath path(int peer) const { return paths_[peer]; }
  WindowHandle handle() const { return handle_; }
  void abort(const Status& why);

  static constexpr uint32_t kFingerprintMask = 0xffff;  // a signal word: count << 16 | fingerprint
  static constexpr size_t kLineBytes = 64;

 private:
  NvlinkWindows() = default;
  Status connect(const WindowsArgs& args, std::string* why);
  Status exchangeFds(const WindowsArgs& args, const std::vector<DeviceBlob>& devices,
                     const std::vector<WindowBlob>& blobs);
  std::atomic<uint64_t>* line(uint8_t* page, int from) const {
    return reinterpret_cast<std::atomic<uint64_t>*>(page + static_cast<size_t>(from) * kLineBytes);
  }

  int rank_ = 0, nranks_ = 1;
  uint64_t windowBytes_ = 0;
  std::unique_ptr<WindowMemory> memory_;
  WindowHandle handle_ = WindowHandle::None;
  LocalWindow local_;
  UniqueFd signalFd_, listener_;
  uint8_t* signalPage_ = nullptr;  // this rank's: line p holds what p has signalled it
  size_t signalBytes_ = 0;
  std::vector<void*> windows_;                // every rank's window, mapped here
  std::vector<MappedWindow> mapped_;          // the imported ones (unmapped at destruction)
  std::vector<uint8_t*> peerPages_;           // every peer's signal page, mapped here
  std::vector<bool> pageMapped_;              // mapped by this object (the pages of other processes)
  std::vector<PairPath> paths_;               // this rank's path to each rank
  std::vector<uint64_t> sent_, waitsPosted_;  // signals sent to / waited for from each peer
  std::vector<ProcessIdentity> peerProcess_;  // watched where the peer is another process
  std::vector<std::chrono::steady_clock::time_point> nextLivenessCheck_;
  std::atomic<bool> aborted_{false};
  std::mutex abortMu_;
  Status abortWhy_;
};

}  // namespace trib::nvlink
