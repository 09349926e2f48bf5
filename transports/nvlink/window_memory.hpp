// Where the CUDA-IPC window provider's windows come from and how a peer maps one: the CUDA
// backend (cuda_window_memory.cu: VMM with POSIX fd handles, else cudaMalloc + legacy IPC) on a
// GPU, and a host-memory stand-in (memfd, the same fd protocol) with which the CPU tests run the
// provider's whole exchange between forked processes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/memory_kind.hpp"
#include "common/status.hpp"
#include "transports/nvlink/fd_passing.hpp"
#include "transports/nvlink/pair_choice.hpp"

namespace trib::nvlink {

enum class WindowHandle : uint32_t {
  None = 0,
  VmmFd = 1,      // cuMemCreate with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR: the fd over the socket
  LegacyIpc = 2,  // cudaMalloc + cudaIpcGetMemHandle: the 64-byte handle in the window blob
  HostMemfd = 3,  // host memory in a memfd (the CPU stand-in): the fd over the socket
};
const char* windowHandleName(WindowHandle h);

// This rank's window.
struct LocalWindow {
  void* ptr = nullptr;
  size_t mappedBytes = 0;  // granularity-rounded
  UniqueFd fd;             // VmmFd / HostMemfd: what peers import
  uint8_t ipc[64] = {};    // LegacyIpc
  uint64_t token = 0;      // the backend's (a CUmemGenericAllocationHandle, say)
};

// A peer's window mapped here.
struct MappedWindow {
  void* ptr = nullptr;
  size_t bytes = 0;
  uint64_t token = 0;
};

class WindowMemory {
 public:
  virtual ~WindowMemory() = default;
  virtual MemoryKind kind() const = 0;  // Device; HostShared for the stand-in
  virtual int device() const = 0;
  virtual DeviceFacts facts() const = 0;
  // Whether this rank's device can access (load/store) the device `peer` describes; false where
  // that device is not visible in this process (CUDA_VISIBLE_DEVICES).
  virtual bool canAccess(const DeviceFacts& peer) = 0;
  // Makes a same-process peer's memory on the device `peer` describes accessible here
  // (cudaDeviceEnablePeerAccess; nothing for the same device).
  virtual Status enablePeer(const DeviceFacts& peer) = 0;
  // This rank's window of at least `bytes`, exportable as `handle`, zero-filled.
  virtual Status allocate(size_t bytes, WindowHandle handle, LocalWindow* out) = 0;
  virtual void free(LocalWindow& w) = 0;
  // Maps a peer's window: from its fd (VmmFd, HostMemfd), or its legacy IPC handle.
  virtual Status importFd(int fd, size_t mappedBytes, MappedWindow* out) = 0;
  virtual Status openIpc(const uint8_t* handle, size_t mappedBytes, MappedWindow* out) = 0;
  virtual void unmap(MappedWindow& w) = 0;
};

// The host stand-in: windows in memfds, "devices" told apart by `uuidByte` (every rank of a test
// on one "device" unless it says otherwise), peer access as `peerAccess` says.
std::unique_ptr<WindowMemory> hostWindowMemory(uint8_t uuidByte = 1, bool peerAccess = true);
// The CUDA backend on `device` (errors: no CUDA in this build, no driver or device).
Status cudaWindowMemory(int device, std::unique_ptr<WindowMemory>* out);

}  // namespace trib::nvlink
