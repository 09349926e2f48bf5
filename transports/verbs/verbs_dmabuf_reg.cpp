// verbs_dmabuf.hpp's registration: built with the verbs transport; runs only with a GPU and an
// RDMA device (tests/test_verbs_dmabuf.cpp skips without them).
#include <infiniband/verbs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "common/log.hpp"
#include "cuda/cuda_api.hpp"
#include "cuda/cuda_vmm.hpp"
#include "transports/verbs/verbs_dmabuf.hpp"

namespace trib::verbs {
namespace {

Status refused(const std::string& nic, int device, uint64_t addr, uint64_t bytes, tribResult_t code,
               const std::string& why) {
  return errorf(code, "verbs: cannot register %llu bytes of CUDA device %d memory at %#llx on %s: %s",
                static_cast<unsigned long long>(bytes), device, static_cast<unsigned long long>(addr),
                nic.c_str(), why.c_str());
}

// The dma-buf registration; *mr stays null with errno kept where ibv_reg_dmabuf_mr refused.
Status registerDmabuf(ibv_pd* pd, const std::string& nic, int device, uint64_t addr, uint64_t bytes,
                      int access, ibv_mr** mr, int* err) {
  *mr = nullptr;
  *err = 0;
#ifdef TRIB_HAVE_IBV_REG_DMABUF_MR
  // The driver exports whole host pages; the registration is the buffer itself within them, at
  // its own address as the iova, so work requests name it as they name host memory.
  DmabufSpan span;
  TRIB_RETURN_IF_ERROR(dmabufSpan(addr, bytes, static_cast<uint64_t>(sysconf(_SC_PAGESIZE)), &span));
  int fd = -1;
  if (Status s = cuda::dmabufExport(static_cast<uintptr_t>(span.base), span.size, &fd); !s.ok())
    return refused(nic, device, addr, bytes, s.code(),
                   strprintf("exporting [%#llx, +%llu bytes) as a dma-buf failed: %s",
                             static_cast<unsigned long long>(span.base),
                             static_cast<unsigned long long>(span.size), s.message().c_str()));
  *mr = ibv_reg_dmabuf_mr(pd, span.offset, bytes, addr, fd, access);
  *err = *mr ? 0 : (errno ? errno : EIO);
  ::close(fd);  // the registration holds the dma-buf itself
#else
  (void)pd, (void)nic, (void)device, (void)addr, (void)bytes, (void)access;
  *err = EOPNOTSUPP;  // not reached: chooseDeviceReg never picks dma-buf in this build
#endif
  return Status::Ok();
}

}  // namespace

int dmabufTrial(ibv_pd* pd, int device) {
  if (!dmabufRegistrationBuilt() || !cuda::dmabufSupported(device)) return 0;
  constexpr size_t kBytes = 64 << 10;
  void* mem = nullptr;
  if (!cuda::deviceAlloc(device, kBytes, &mem).ok()) return 0;
  ibv_mr* mr = nullptr;
  int err = 0;
  const Status s = registerDmabuf(pd, "the trial", device, reinterpret_cast<uintptr_t>(mem), kBytes,
                                  IBV_ACCESS_LOCAL_WRITE, &mr, &err);
  if (mr) ibv_dereg_mr(mr);
  cuda::deviceFree(mem);
  return s.ok() ? err : 0;
}

Status registerDeviceMemory(ibv_pd* pd, const std::string& nic, int device, uint64_t addr, uint64_t bytes,
                            int access, ibv_mr** out) {
  *out = nullptr;
  DeviceRegFacts facts;
  facts.cudaBuilt = cuda::built();
  facts.verbsDmabuf = dmabufRegistrationBuilt();
  facts.driverDmabuf = facts.cudaBuilt && cuda::dmabufSupported(device);
  DeviceRegChoice choice = chooseDeviceReg(facts);
  if (choice.path == DeviceRegPath::Dmabuf) {
    TRIB_RETURN_IF_ERROR(registerDmabuf(pd, nic, device, addr, bytes, access, out, &facts.dmabufErrno));
    if (*out) return Status::Ok();
    choice = chooseDeviceReg(facts);
  }
  if (choice.path == DeviceRegPath::Refuse)
    return refused(nic, device, addr, bytes, facts.cudaBuilt ? tribSystemError : tribNotSupported,
                   choice.why);
  // dma-buf is unsupported here: the device address itself, which only nvidia-peermem can pin.
  static std::atomic<bool> said{false};
  if (!said.exchange(true))
    TRIB_INFO("transport", "verbs: device memory is registered with ibv_reg_mr (needs nvidia-peermem): %s",
              choice.why.c_str());
  *out = ibv_reg_mr(pd, reinterpret_cast<void*>(static_cast<uintptr_t>(addr)), bytes, access);
  if (!*out)
    return refused(nic, device, addr, bytes, tribSystemError,
                   strprintf("no dma-buf (%s), and ibv_reg_mr failed: %s (is nvidia-peermem loaded?)",
                             choice.why.c_str(), std::strerror(errno)));
  return Status::Ok();
}

}  // namespace trib::verbs
