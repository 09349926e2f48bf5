// The CUDA backend of the window memory (window_memory.hpp), over src/cuda/cuda_vmm.hpp: VMM
// allocations exported as POSIX fds, else cudaMalloc + legacy IPC handles; peer windows imported
// and mapped with read-write access for this rank's device. Without CUDA (or a device) creating
// it fails with cuda::deviceStatus()'s message.
#include <unistd.h>

#include <cstring>

#include "cuda/cuda_api.hpp"
#include "cuda/cuda_vmm.hpp"
#include "transports/nvlink/window_memory.hpp"

namespace trib::nvlink {
namespace {

class CudaWindowMemory final : public WindowMemory {
 public:
  CudaWindowMemory(int device, const cuda::DeviceInfo& info) : device_(device) {
    std::memcpy(facts_.uuid, info.uuid, sizeof facts_.uuid);
    facts_.vmmFd = info.vmmFd;
    facts_.legacyIpc = info.legacyIpc;
  }
  MemoryKind kind() const override { return MemoryKind::Device; }
  int device() const override { return device_; }
  DeviceFacts facts() const override { return facts_; }
  bool canAccess(const DeviceFacts& peer) override {
    const int d = cuda::deviceWithUuid(peer.uuid);
    return d >= 0 && cuda::canAccessPeer(device_, d) && cuda::canAccessPeer(d, device_);
  }
  Status enablePeer(const DeviceFacts& peer) override {
    const int d = cuda::deviceWithUuid(peer.uuid);
    if (d < 0) return errorf(tribInternalError, "a peer's device is not visible in this process");
    return cuda::enablePeerAccess(device_, d);
  }

  Status allocate(size_t bytes, WindowHandle handle, LocalWindow* out) override {
    if (handle != WindowHandle::VmmFd && handle != WindowHandle::LegacyIpc && handle != WindowHandle::None)
      return errorf(tribInternalError, "CUDA windows cannot be shared as %s", windowHandleName(handle));
    // Legacy IPC, or one process only (None) on a device without VMM: cudaMalloc'd memory.
    if (handle == WindowHandle::LegacyIpc || !facts_.vmmFd) {
      TRIB_RETURN_IF_ERROR(cuda::ipcAlloc(device_, bytes, &out->ptr, out->ipc));
      out->mappedBytes = bytes;
      out->token = 0;
      return Status::Ok();
    }
    cuda::VmmAllocation a;
    TRIB_RETURN_IF_ERROR(cuda::vmmAlloc(device_, bytes, &a));
    out->ptr = a.ptr;
    out->mappedBytes = a.bytes;
    out->token = a.handle;
    if (handle == WindowHandle::VmmFd) {
      int fd = -1;
      if (Status s = cuda::vmmExportFd(a, &fd); !s.ok()) {
        cuda::vmmFree(a);
        out->ptr = nullptr;
        return s;
      }
      out->fd.reset(fd);
    }
    return Status::Ok();
  }
  void free(LocalWindow& w) override {
    if (w.token) {
      cuda::VmmAllocation a{w.ptr, w.mappedBytes, w.token, device_};
      cuda::vmmFree(a);
    } else {
      cuda::ipcFree(w.ptr);
    }
    w.ptr = nullptr;
    w.fd.reset();
  }
  Status importFd(int fd, size_t mappedBytes, MappedWindow* out) override {
    cuda::VmmAllocation a;
    TRIB_RETURN_IF_ERROR(cuda::vmmImportFd(device_, fd, mappedBytes, &a));
    out->ptr = a.ptr;
    out->bytes = a.bytes;
    out->token = a.handle;
    return Status::Ok();
  }
  Status openIpc(const uint8_t* handle, size_t mappedBytes, MappedWindow* out) override {
    TRIB_RETURN_IF_ERROR(cuda::ipcOpen(device_, handle, &out->ptr));
    out->bytes = mappedBytes;
    out->token = 0;
    return Status::Ok();
  }
  void unmap(MappedWindow& w) override {
    if (w.token) {
      cuda::VmmAllocation a{w.ptr, w.bytes, w.token, device_};
      cuda::vmmFree(a);
    } else {
      cuda::ipcClose(w.ptr);
    }
    w.ptr = nullptr;
  }

 private:
  int device_;
  DeviceFacts facts_;
};

}  // namespace

Status cudaWindowMemory(int device, std::unique_ptr<WindowMemory>* out) {
  TRIB_RETURN_IF_ERROR(cuda::deviceStatus());
  cuda::DeviceInfo info;
  TRIB_RETURN_IF_ERROR(cuda::deviceInfo(device, &info));
  *out = std::make_unique<CudaWindowMemory>(device, info);
  return Status::Ok();
}

}  // namespace trib::nvlink
