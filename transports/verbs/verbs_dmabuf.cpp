// verbs_dmabuf.hpp's pure part: built in every build (no libibverbs needed) and tested everywhere.
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "transports/verbs/verbs_dmabuf.hpp"

namespace trib::verbs {

Status dmabufSpan(uint64_t addr, uint64_t bytes, uint64_t pageSize, DmabufSpan* out) {
  *out = DmabufSpan{};
  if (pageSize == 0 || (pageSize & (pageSize - 1)) != 0)
    return errorf(tribInvalidArgument, "dma-buf span: page size %llu is not a power of two",
                  static_cast<unsigned long long>(pageSize));
  if (bytes == 0)
    return errorf(tribInvalidArgument, "dma-buf span: zero bytes at %#llx (nothing to register)",
                  static_cast<unsigned long long>(addr));
  const uint64_t mask = pageSize - 1;
  const uint64_t last = addr + (bytes - 1);  // the buffer's last byte
  // Past the end of the address space, or in its last page (the rounded-up end would wrap to 0).
  if (last < addr || last >= UINT64_MAX - mask)
    return errorf(
        tribInvalidArgument,
        "dma-buf span: [%#llx, +%llu bytes) passes the end of the address space (pages of %llu bytes)",
        static_cast<unsigned long long>(addr), static_cast<unsigned long long>(bytes),
        static_cast<unsigned long long>(pageSize));
  out->base = addr & ~mask;
  out->size = ((last | mask) + 1) - out->base;
  out->offset = addr - out->base;
  return Status::Ok();
}

DeviceRegChoice chooseDeviceReg(const DeviceRegFacts& f) {
  if (!f.cudaBuilt)
    return {DeviceRegPath::Refuse,
            "this build of Tributary has no CUDA, so it cannot register device memory"};
  if (!f.verbsDmabuf)
    return {DeviceRegPath::PeerMem, "the rdma-core this build used has no ibv_reg_dmabuf_mr"};
  if (!f.driverDmabuf) return {DeviceRegPath::PeerMem, "the CUDA driver offers no dma-buf for this device"};
  if (f.dmabufErrno == 0) return {DeviceRegPath::Dmabuf, ""};
  // What libibverbs and the kernel answer where the NIC's driver has no dma-buf support (NCCL
  // tests for the first two, the kernel's missing verb gives the third).
  const int e = f.dmabufErrno;
  const std::string what = std::string("ibv_reg_dmabuf_mr failed: ") + std::strerror(e);
  if (e == EOPNOTSUPP || e == EPROTONOSUPPORT || e == ENOSYS)
    return {DeviceRegPath::PeerMem, what + " (the NIC's driver has no dma-buf support)"};
  return {DeviceRegPath::Refuse, what};
}

bool dmabufRegistrationBuilt() {
#ifdef TRIB_HAVE_IBV_REG_DMABUF_MR
  return true;
#else
  return false;
#endif
}

bool deviceMemoryReachable(const DeviceReachFacts& f, std::string* why) {
  const auto answer = [&](bool yes, const char* text) {
    if (why) *why = text;
    return yes;
  };
  if (!f.cudaBuilt) return answer(false, "this build has no CUDA");
  if (!f.cudaContext) return answer(false, "this process had no current CUDA context at init");
  // The path registerDeviceMemory would take, given how the trial went.
  DeviceRegFacts reg;
  reg.cudaBuilt = f.cudaBuilt;
  reg.verbsDmabuf = f.verbsDmabuf;
  reg.driverDmabuf = f.driverDmabuf;
  reg.dmabufErrno = f.nicDmabufErrno;
  const DeviceRegChoice choice = chooseDeviceReg(reg);
  if (choice.path == DeviceRegPath::Dmabuf) return answer(true, "dma-buf");
  if (choice.path == DeviceRegPath::Refuse) {
    if (why) *why = "a trial registration on the NIC failed: " + choice.why;
    return false;
  }
  if (f.peerMem) return answer(true, "nvidia-peermem");
  if (why) *why = choice.why + ", and nvidia-peermem is not loaded";
  return false;
}

bool peerMemLoaded(const std::string& sysModule) {
  struct stat st {};
  for (const char* name : {"nvidia_peermem", "nv_peer_mem"}) {
    if (::stat((sysModule + "/" + name).c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return true;
  }
  return false;
}

}  // namespace trib::verbs
