// The host stand-in of the window memory (window_memory.hpp): memfds mapped shared, so the CPU
// tests run the provider's whole exchange (blobs, sockets, descriptors, mapping, signals) between
// forked processes. Its "devices" are told apart by one UUID byte.
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "transports/nvlink/window_memory.hpp"

namespace trib::nvlink {
namespace {

class HostWindowMemory final : public WindowMemory {
 public:
  HostWindowMemory(uint8_t uuidByte, bool peerAccess) : peerAccess_(peerAccess) {
    facts_.uuid[0] = uuidByte;
    facts_.vmmFd = 1;  // its memfds travel as VMM fds do
  }
  MemoryKind kind() const override { return MemoryKind::HostShared; }
  int device() const override { return -1; }
  DeviceFacts facts() const override { return facts_; }
  bool canAccess(const DeviceFacts& peer) override {
    return peerAccess_ || std::memcmp(peer.uuid, facts_.uuid, sizeof peer.uuid) == 0;
  }
  Status enablePeer(const DeviceFacts&) override { return Status::Ok(); }

  Status allocate(size_t bytes, WindowHandle handle, LocalWindow* out) override {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t mapped = (bytes + page - 1) / page * page;
    UniqueFd fd(memfd_create("trib-nvlink-window", MFD_CLOEXEC));
    if (fd.get() < 0 || ftruncate(fd.get(), static_cast<off_t>(mapped)) != 0)
      return errorf(tribSystemError, "a memfd window of %zu bytes: %s", mapped, std::strerror(errno));
    void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
    if (p == MAP_FAILED) return errorf(tribSystemError, "mmap of a memfd window: %s", std::strerror(errno));
    out->ptr = p;
    out->mappedBytes = mapped;
    if (handle == WindowHandle::HostMemfd) out->fd = std::move(fd);
    return Status::Ok();
  }
  void free(LocalWindow& w) override {
    if (w.ptr) munmap(w.ptr, w.mappedBytes);
    w.ptr = nullptr;
    w.fd.reset();
  }
  Status importFd(int fd, size_t mappedBytes, MappedWindow* out) override {
    void* p = mmap(nullptr, mappedBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
      return errorf(tribSystemError, "mmap of a peer's memfd window: %s", std::strerror(errno));
    out->ptr = p;
    out->bytes = mappedBytes;
    return Status::Ok();
  }
  Status openIpc(const uint8_t*, size_t, MappedWindow*) override {
    return errorf(tribNotSupported, "host windows have no legacy IPC handles");
  }
  void unmap(MappedWindow& w) override {
    if (w.ptr) munmap(w.ptr, w.bytes);
    w.ptr = nullptr;
  }

 private:
  DeviceFacts facts_;
  bool peerAccess_;
};

}  // namespace

std::unique_ptr<WindowMemory> hostWindowMemory(uint8_t uuidByte, bool peerAccess) {
  return std::make_unique<HostWindowMemory>(uuidByte, peerAccess);
}

}  // namespace trib::nvlink
