// Device memory that other processes can map (CUDA VMM with POSIX file-descriptor handles, and
// legacy IPC where VMM is unavailable), device facts for choosing how, allocation queries for the
// registration cache, and tribMemAlloc's device form. Plain C++ like cuda_api.hpp: implemented in
// cuda_vmm.cu (driver functions through cudaGetDriverEntryPointByVersion, libcuda never linked),
// and in stub/no_cuda.cpp as "no CUDA" without it. Every function is safe without a driver.
#pragma once
#include <cstddef>
#include <cstdint>

#include "common/status.hpp"

namespace trib::cuda {

struct DeviceInfo {
  uint8_t uuid[16] = {};
  bool vmmFd = false;      // VMM allocations with POSIX fd handles
  bool legacyIpc = false;  // cudaIpcGetMemHandle
  char pciBusId[16] = {};  // "0000:1b:00.0", as sysfs names it (NIC choice by locality)
};
Status deviceInfo(int device, DeviceInfo* out);
// The ordinal of the device with `uuid` in this process; -1 where it is not visible.
int deviceWithUuid(const uint8_t* uuid);
bool canAccessPeer(int device, int peer);
// Lets `device` access `peer`'s memory (already enabled is fine).
Status enablePeerAccess(int device, int peer);
// Whether the calling thread has a current CUDA context (a program that set its device); false
// without a driver. Creates none.
bool hasCurrentContext();

// A physical allocation mapped at `ptr` (this process's own, or imported from a peer's fd).
struct VmmAllocation {
  void* ptr = nullptr;
  size_t bytes = 0;  // granularity-rounded
  uint64_t handle = 0;
  int device = -1;
};
// At least `bytes` on `device`, rounded up to the allocation granularity, zero-filled, readable
// and writable by `device` and by every device that can access it; exportable as a POSIX fd.
Status vmmAlloc(int device, size_t bytes, VmmAllocation* out);
// A new fd for the allocation (the caller closes it).
Status vmmExportFd(const VmmAllocation& a, int* fd);
// Maps a peer's allocation from its fd on `device`, readable and writable there.
Status vmmImportFd(int device, int fd, size_t bytes, VmmAllocation* out);
void vmmFree(VmmAllocation& a);  // unmaps and releases (own or imported)

// Legacy IPC: cudaMalloc + cudaIpcGetMemHandle, and the peer's side.
Status ipcAlloc(int device, size_t bytes, void** ptr, uint8_t* handle64);
void ipcFree(void* ptr);
Status ipcOpen(int device, const uint8_t* handle64, void** ptr);
void ipcClose(void* ptr);

// The allocation that device memory at `p` lies in, and its unique buffer id (a new allocation
// at the same address has another): false for host memory, freed memory, and without a driver.
struct DeviceAllocation {
  uintptr_t base = 0;
  size_t bytes = 0;
  int device = -1;
  uint64_t bufferId = 0;
};
bool deviceAllocation(const void* p, DeviceAllocation* out);

// dma-buf exports of device memory, for registering it with an RDMA NIC (ibv_reg_dmabuf_mr,
// transports/verbs/verbs_dmabuf.hpp). Whether `device`'s driver exports its memory as dma-buf
// (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED); false without a driver or where it cannot be read.
bool dmabufSupported(int device);
// A new dma-buf file descriptor for device memory [base, base + bytes), both aligned to the host
// page size (cuMemGetHandleForAddressRange); the caller closes it. Errors name the driver's.
Status dmabufExport(uintptr_t base, size_t bytes, int* fd);

// tribMemAlloc's device form (as ncclMemAlloc): a VMM allocation of at least `bytes` on the
// current device, granularity-rounded, exportable; memFreeDevice takes only what it returned
// (*mine false: not one of them, nothing done).
Status memAllocDevice(size_t bytes, void** ptr);
Status memFreeDevice(void* ptr, bool* mine);

}  // namespace trib::cuda
