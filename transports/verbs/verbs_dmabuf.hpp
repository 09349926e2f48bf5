// Registering device (CUDA) memory with the NIC, as NCCL's net_ib does (docs/VERBS.md): the CUDA
// driver exports the buffer's pages as a dma-buf (cuMemGetHandleForAddressRange) and the NIC
// registers the buffer within it (ibv_reg_dmabuf_mr). Where dma-buf is unsupported (by the CUDA
// driver, by the rdma-core this was built with, or by the NIC's kernel driver), plain ibv_reg_mr,
// which works only with the nvidia-peermem kernel module loaded. The page arithmetic and the choice
// between the two are pure functions, tested on any machine (tests/test_verbs_dmabuf.cpp);
// registerDeviceMemory itself needs a GPU and an RDMA device.
#pragma once
#include <cstdint>
#include <string>

#include "common/status.hpp"

struct ibv_pd;
struct ibv_mr;

namespace trib::verbs {

// The page-aligned range a dma-buf is exported for, and where the buffer lies in it.
struct DmabufSpan {
  uint64_t base = 0;    // the buffer's address rounded down to its page
  uint64_t size = 0;    // whole pages, covering the buffer
  uint64_t offset = 0;  // address - base: ibv_reg_dmabuf_mr's offset into the dma-buf
};
// The span of [addr, addr + bytes). Errors (tribInvalidArgument, naming the range): zero bytes, a
// page size that is not a power of two, a range whose end (rounded up to its page) passes the end
// of the address space.
Status dmabufSpan(uint64_t addr, uint64_t bytes, uint64_t pageSize, DmabufSpan* out);

enum class DeviceRegPath : uint8_t {
  Dmabuf,   // cuMemGetHandleForAddressRange + ibv_reg_dmabuf_mr
  PeerMem,  // ibv_reg_mr on the device address (nvidia-peermem)
  Refuse,   // neither can work
};
// What is known when choosing: the facts of the build and driver, then how a dma-buf
// registration failed, once one was tried.
struct DeviceRegFacts {
  bool cudaBuilt = false;     // this library has CUDA (cuda::built())
  bool verbsDmabuf = false;   // the rdma-core it was built with has ibv_reg_dmabuf_mr
  bool driverDmabuf = false;  // the device's driver exports dma-bufs (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED)
  int dmabufErrno = 0;        // errno of the ibv_reg_dmabuf_mr tried; 0: none tried
};
struct DeviceRegChoice {
  DeviceRegPath path = DeviceRegPath::Refuse;
  std::string why;  // PeerMem: why not dma-buf; Refuse: why nothing; Dmabuf: ""
};
// dma-buf where the build and driver support it; ibv_reg_mr only where dma-buf is unsupported (not
// built, not offered by the driver, or refused by the NIC with EOPNOTSUPP, EPROTONOSUPPORT or
// ENOSYS); any other dma-buf failure, or a build without CUDA, refuses.
DeviceRegChoice chooseDeviceReg(const DeviceRegFacts& facts);

// Whether this build's rdma-core has ibv_reg_dmabuf_mr (TRIB_HAVE_IBV_REG_DMABUF_MR).
bool dmabufRegistrationBuilt();

// Whether the verbs transport may be given device memory (its caps' probe): this process can
// register it with the NIC, by dma-buf or through nvidia-peermem. Decided at connect from these
// facts, the last of them a trial: the driver's attributes cannot say whether the NIC's kernel
// driver takes dma-bufs, so a small device buffer is registered once on the NIC (dmabufTrial).
struct DeviceReachFacts {
  bool cudaBuilt = false;     // cuda::built()
  bool cudaContext = false;   // this rank's process had a current CUDA context at init
  bool verbsDmabuf = false;   // dmabufRegistrationBuilt()
  bool driverDmabuf = false;  // the current device's driver exports dma-bufs
  bool peerMem = false;       // nvidia-peermem (or nv_peer_mem) is loaded: peerMemLoaded()
  int nicDmabufErrno = 0;     // errno of the trial ibv_reg_dmabuf_mr; 0: it took, or none was tried
};
// True with a why ("dma-buf" or "nvidia-peermem"), or false with why not, for the log.
bool deviceMemoryReachable(const DeviceReachFacts& facts, std::string* why);
// Whether a kernel module that lets ibv_reg_mr pin device memory is loaded: nvidia_peermem, or
// the older nv_peer_mem, under `sysModule` (/sys/module; tests pass a directory of their own).
bool peerMemLoaded(const std::string& sysModule = "/sys/module");

// The trial of DeviceReachFacts::nicDmabufErrno: registers a small buffer of CUDA device `device`
// on `pd` by dma-buf and releases it; the errno of a refusal, 0 when the NIC took it, and 0 too
// where nothing could be tried (no buffer, no export: then the registration itself reports it).
// Verbs builds only; needs a GPU and an RDMA device to do anything.
int dmabufTrial(ibv_pd* pd, int device);

// Registers [addr, addr + bytes) (bytes > 0) of CUDA device `device`'s memory on `pd` (of NIC
// `nic`, named in messages) with `access`, by chooseDeviceReg's path. Errors name the device, the
// NIC and the reason: tribNotSupported without CUDA, tribUnhandledCudaError where the driver
// cannot export the range, tribSystemError where the NIC refuses. Verbs builds only.
Status registerDeviceMemory(ibv_pd* pd, const std::string& nic, int device, uint64_t addr, uint64_t bytes,
                            int access, ibv_mr** out);

}  // namespace trib::verbs
