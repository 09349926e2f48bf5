// cuda_vmm.hpp in a CUDA build. The VMM functions are the driver's (cuMem*), looked up once through
// the runtime's cudaGetDriverEntryPointByVersion (CUDA 12.0 ABI), so libcuda is never linked.
#include <cuda.h>  // driver types only: the functions come from the runtime's entry-point lookup
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "cuda/cuda_api.hpp"
#include "cuda/cuda_util.hpp"
#include "cuda/cuda_vmm.hpp"

namespace trib::cuda {
namespace {

struct Vmm {
  CUresult (*deviceGet)(CUdevice*, int) = nullptr;
  CUresult (*deviceGetAttribute)(int*, CUdevice_attribute, CUdevice) = nullptr;
  CUresult (*granularity)(size_t*, const CUmemAllocationProp*, CUmemAllocationGranularity_flags) = nullptr;
  CUresult (*create)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                     unsigned long long) = nullptr;
  CUresult (*release)(CUmemGenericAllocationHandle) = nullptr;
  CUresult (*exportHandle)(void*, CUmemGenericAllocationHandle, CUmemAllocationHandleType,
                           unsigned long long) = nullptr;
  CUresult (*importHandle)(CUmemGenericAllocationHandle*, void*, CUmemAllocationHandleType) = nullptr;
  CUresult (*reserve)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long) = nullptr;
  CUresult (*addressFree)(CUdeviceptr, size_t) = nullptr;
  CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long) = nullptr;
  CUresult (*unmap)(CUdeviceptr, size_t) = nullptr;
  CUresult (*setAccess)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t) = nullptr;
  CUresult (*addressRange)(CUdeviceptr*, size_t*, CUdeviceptr) = nullptr;
  CUresult (*pointerAttribute)(void*, CUpointer_attribute, CUdeviceptr) = nullptr;
  CUresult (*ctxGetCurrent)(CUcontext*) = nullptr;
  CUresult (*rangeHandle)(void*, CUdeviceptr, size_t, CUmemRangeHandleType, unsigned long long) = nullptr;
  Status status;
  Status rangeHandleStatus;  // why rangeHandle is null when status is ok
};

template <class F>
bool lookup(const char* name, F* fn, Status* status) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t e = cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &found);
  if (e != cudaSuccess || found != cudaDriverEntryPointSuccess || !p) {
    (void)cudaGetLastError();
    *status =
        errorf(tribUnhandledCudaError,
               "the CUDA driver has no %s (cudaGetDriverEntryPointByVersion: %s, lookup result %d): the "
               "CUDA-IPC windows need a driver of CUDA 12 or later",
               name, cudaGetErrorName(e), static_cast<int>(found));
    return false;
  }
  *fn = reinterpret_cast<F>(p);
  return true;
}

const Vmm& vmm() {
  static const Vmm v = [] {
    Vmm r;
    if (r.status = deviceStatus(); !r.status.ok()) return r;
    Status& s = r.status;
    (void)(lookup("cuDeviceGet", &r.deviceGet, &s) &&
           lookup("cuDeviceGetAttribute", &r.deviceGetAttribute, &s) &&
           lookup("cuMemGetAllocationGranularity", &r.granularity, &s) &&
           lookup("cuMemCreate", &r.create, &s) && lookup("cuMemRelease", &r.release, &s) &&
           lookup("cuMemExportToShareableHandle", &r.exportHandle, &s) &&
           lookup("cuMemImportFromShareableHandle", &r.importHandle, &s) &&
           lookup("cuMemAddressReserve", &r.reserve, &s) && lookup("cuMemAddressFree", &r.addressFree, &s) &&
           lookup("cuMemMap", &r.map, &s) && lookup("cuMemUnmap", &r.unmap, &s) &&
           lookup("cuMemSetAccess", &r.setAccess, &s) &&
           lookup("cuMemGetAddressRange", &r.addressRange, &s) &&
           lookup("cuPointerGetAttribute", &r.pointerAttribute, &s) &&
           lookup("cuCtxGetCurrent", &r.ctxGetCurrent, &s));
    // Only the dma-buf export needs it: a driver without it keeps every other call.
    if (s.ok() && !lookup("cuMemGetHandleForAddressRange", &r.rangeHandle, &r.rangeHandleStatus))
      r.rangeHandle = nullptr;
    return r;
  }();
  return v;
}

Status driverFailure(CUresult r, const char* what) {
  return errorf(tribUnhandledCudaError, "%s failed: CUDA driver error %d", what, static_cast<int>(r));
}

#define TRIB_CU_RETURN_IF_ERROR(call)                                      \
  do {                                                                     \
    const CUresult trib_cu_r = (call);                                     \
    if (trib_cu_r != CUDA_SUCCESS) return driverFailure(trib_cu_r, #call); \
  } while (0)

CUmemAllocationProp propFor(int device, bool exportFd) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  if (exportFd) prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return prop;
}

// Reserves an address range for `bytes`, maps `handle` there and grants `devices` read-write access.
Status mapAt(const Vmm& v, CUmemGenericAllocationHandle handle, size_t bytes, size_t align,
             const int* devices, int ndevices, CUdeviceptr* out) {
  CUdeviceptr ptr = 0;
  TRIB_CU_RETURN_IF_ERROR(v.reserve(&ptr, bytes, align, 0, 0));
  CUresult r = v.map(ptr, bytes, 0, handle, 0);
  if (r != CUDA_SUCCESS) {
    v.addressFree(ptr, bytes);
    return driverFailure(r, "cuMemMap");
  }
  std::vector<CUmemAccessDesc> access(ndevices);
  for (int i = 0; i < ndevices; ++i) {
    access[i].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access[i].location.id = devices[i];
    access[i].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  }
  r = v.setAccess(ptr, bytes, access.data(), access.size());
  if (r != CUDA_SUCCESS) {
    v.unmap(ptr, bytes);
    v.addressFree(ptr, bytes);
    return driverFailure(r, "cuMemSetAccess");
  }
  *out = ptr;
  return Status::Ok();
}

// Zero-fills new device memory on a stream of its own, waited for: neither the legacy stream nor
// the device is synchronised, since a caller's stream may be held for another rank's call.
cudaError_t zeroFill(void* p, size_t bytes) {
  cudaStream_t s = nullptr;
  cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (e != cudaSuccess) return e;
  e = cudaMemsetAsync(p, 0, bytes, s);
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);
  cudaStreamDestroy(s);
  return e;
}

// tribMemAlloc's device allocations, by address.
std::mutex gMemMu;
std::unordered_map<uintptr_t, VmmAllocation> gMem;

}  // namespace

Status deviceInfo(int device, DeviceInfo* out) {
  *out = DeviceInfo{};
  TRIB_RETURN_IF_ERROR(deviceStatus());
  cudaDeviceProp props{};
  TRIB_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&props, device));
  static_assert(sizeof props.uuid.bytes == 16);
  std::memcpy(out->uuid, props.uuid.bytes, 16);
  std::snprintf(out->pciBusId, sizeof out->pciBusId, "%04x:%02x:%02x.0",
                static_cast<unsigned>(props.pciDomainID) & 0xffffu,
                static_cast<unsigned>(props.pciBusID) & 0xffu,
                static_cast<unsigned>(props.pciDeviceID) & 0x1fu);
  out->legacyIpc = true;  // Linux, every device: cudaIpcGetMemHandle fails later if not
  const Vmm& v = vmm();
  if (!v.status.ok()) return Status::Ok();  // no VMM: legacy IPC only
  CUdevice dev = 0;
  int vmmOk = 0, fdOk = 0;
  if (v.deviceGet(&dev, device) == CUDA_SUCCESS &&
      v.deviceGetAttribute(&vmmOk, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev) ==
          CUDA_SUCCESS &&
      v.deviceGetAttribute(&fdOk, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, dev) ==
          CUDA_SUCCESS)
    out->vmmFd = vmmOk && fdOk;
  return Status::Ok();
}

int deviceWithUuid(const uint8_t* uuid) {
  int n = 0;
  if (!deviceStatus().ok() || cudaGetDeviceCount(&n) != cudaSuccess) return -1;
  for (int d = 0; d < n; ++d) {
    cudaDeviceProp props{};
    if (cudaGetDeviceProperties(&props, d) == cudaSuccess && std::memcmp(props.uuid.bytes, uuid, 16) == 0)
      return d;
  }
  (void)cudaGetLastError();
  return -1;
}

bool canAccessPeer(int device, int peer) {
  if (device == peer) return true;
  int yes = 0;
  if (cudaDeviceCanAccessPeer(&yes, device, peer) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return yes != 0;
}

Status enablePeerAccess(int device, int peer) {
  if (device == peer) return Status::Ok();
  DeviceScope scope(device, true);
  const cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
  if (e == cudaErrorPeerAccessAlreadyEnabled) {
    (void)cudaGetLastError();
    return Status::Ok();
  }
  TRIB_CUDA_RETURN_IF_ERROR(e);
  return Status::Ok();
}

bool hasCurrentContext() {
  if (!deviceStatus().ok()) return false;
  const Vmm& v = vmm();
  CUcontext ctx = nullptr;
  return v.status.ok() && v.ctxGetCurrent(&ctx) == CUDA_SUCCESS && ctx != nullptr;
}

Status vmmAlloc(int device, size_t bytes, VmmAllocation* out) {
  *out = VmmAllocation{};
  const Vmm& v = vmm();
  TRIB_RETURN_IF_ERROR(v.status);
  DeviceScope scope(device, true);
  const CUmemAllocationProp prop = propFor(device, true);
  size_t gran = 0;
  TRIB_CU_RETURN_IF_ERROR(v.granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  const size_t rounded = (std::max<size_t>(bytes, 1) + gran - 1) / gran * gran;
  CUmemGenericAllocationHandle h = 0;
  TRIB_CU_RETURN_IF_ERROR(v.create(&h, rounded, &prop, 0));
  // This device, and every device that can reach it (ranks of this process on other GPUs).
  std::vector<int> devices{device};
  int n = 0;
  if (cudaGetDeviceCount(&n) == cudaSuccess) {
    for (int d = 0; d < n; ++d)
      if (d != device && canAccessPeer(d, device)) devices.push_back(d);
  }
  CUdeviceptr ptr = 0;
  if (Status s = mapAt(v, h, rounded, gran, devices.data(), static_cast<int>(devices.size()), &ptr);
      !s.ok()) {
    v.release(h);
    return s;
  }
  out->ptr = reinterpret_cast<void*>(ptr);
  out->bytes = rounded;
  out->handle = h;
  out->device = device;
  if (const cudaError_t e = zeroFill(out->ptr, rounded); e != cudaSuccess) {
    vmmFree(*out);
    return cudaFailure(e, "cudaMemset of a new VMM allocation");
  }
  return Status::Ok();
}

Status vmmExportFd(const VmmAllocation& a, int* fd) {
  const Vmm& v = vmm();
  TRIB_RETURN_IF_ERROR(v.status);
  int out = -1;
  TRIB_CU_RETURN_IF_ERROR(v.exportHandle(&out, a.handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  *fd = out;
  return Status::Ok();
}

Status vmmImportFd(int device, int fd, size_t bytes, VmmAllocation* out) {
  *out = VmmAllocation{};
  const Vmm& v = vmm();
  TRIB_RETURN_IF_ERROR(v.status);
  DeviceScope scope(device, true);
  const CUmemAllocationProp prop = propFor(device, true);
  size_t gran = 0;
  TRIB_CU_RETURN_IF_ERROR(v.granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  if (bytes == 0 || bytes % gran)
    return errorf(tribRemoteError,
                  "a peer's VMM allocation of %zu bytes is not a multiple of the granularity %zu", bytes,
                  gran);
  CUmemGenericAllocationHandle h = 0;
  TRIB_CU_RETURN_IF_ERROR(v.importHandle(&h, reinterpret_cast<void*>(static_cast<uintptr_t>(fd)),
                                         CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
  CUdeviceptr ptr = 0;
  if (Status s = mapAt(v, h, bytes, gran, &device, 1, &ptr); !s.ok()) {
    v.release(h);
    return s;
  }
  out->ptr = reinterpret_cast<void*>(ptr);
  out->bytes = bytes;
  out->handle = h;
  out->device = device;
  return Status::Ok();
}

void vmmFree(VmmAllocation& a) {
  const Vmm& v = vmm();
  if (!a.ptr || !v.status.ok()) return;
  const auto ptr = reinterpret_cast<CUdeviceptr>(a.ptr);
  v.unmap(ptr, a.bytes);
  v.addressFree(ptr, a.bytes);
  v.release(a.handle);
  a = VmmAllocation{};
}

Status ipcAlloc(int device, size_t bytes, void** ptr, uint8_t* handle64) {
  *ptr = nullptr;
  TRIB_RETURN_IF_ERROR(deviceStatus());
  DeviceScope scope(device, true);
  void* p = nullptr;
  TRIB_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, std::max<size_t>(bytes, 1)));
  cudaIpcMemHandle_t h{};
  cudaError_t e = zeroFill(p, bytes);
  if (e == cudaSuccess) e = cudaIpcGetMemHandle(&h, p);
  if (e != cudaSuccess) {
    cudaFree(p);
    return cudaFailure(e, "cudaIpcGetMemHandle");
  }
  static_assert(sizeof h == 64);
  std::memcpy(handle64, &h, 64);
  *ptr = p;
  return Status::Ok();
}

void ipcFree(void* ptr) {
  if (ptr && cudaFree(ptr) != cudaSuccess) (void)cudaGetLastError();
}

Status ipcOpen(int device, const uint8_t* handle64, void** ptr) {
  *ptr = nullptr;
  TRIB_RETURN_IF_ERROR(deviceStatus());
  DeviceScope scope(device, true);
  cudaIpcMemHandle_t h;
  std::memcpy(&h, handle64, 64);
  TRIB_CUDA_RETURN_IF_ERROR(cudaIpcOpenMemHandle(ptr, h, cudaIpcMemLazyEnablePeerAccess));
  return Status::Ok();
}

void ipcClose(void* ptr) {
  if (ptr && cudaIpcCloseMemHandle(ptr) != cudaSuccess) (void)cudaGetLastError();
}

bool deviceAllocation(const void* p, DeviceAllocation* out) {
  *out = DeviceAllocation{};
  if (!p || !isDevicePointer(p)) return false;
  const Vmm& v = vmm();
  if (!v.status.ok()) return false;
  const auto ptr = reinterpret_cast<CUdeviceptr>(p);
  CUdeviceptr base = 0;
  size_t bytes = 0;
  unsigned long long id = 0;
  if (v.addressRange(&base, &bytes, ptr) != CUDA_SUCCESS ||
      v.pointerAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, ptr) != CUDA_SUCCESS)
    return false;
  out->base = static_cast<uintptr_t>(base);
  out->bytes = bytes;
  out->device = deviceOf(p);
  out->bufferId = id;
  return true;
}

bool dmabufSupported(int device) {
  const Vmm& v = vmm();
  if (!v.status.ok() || !v.rangeHandle) return false;
  CUdevice dev = 0;
  int yes = 0;
  return v.deviceGet(&dev, device) == CUDA_SUCCESS &&
         v.deviceGetAttribute(&yes, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, dev) == CUDA_SUCCESS && yes;
}

Status dmabufExport(uintptr_t base, size_t bytes, int* fd) {
  *fd = -1;
  const Vmm& v = vmm();
  TRIB_RETURN_IF_ERROR(v.status);
  TRIB_RETURN_IF_ERROR(v.rangeHandleStatus);
  int handle = -1;
  TRIB_CU_RETURN_IF_ERROR(
      v.rangeHandle(&handle, static_cast<CUdeviceptr>(base), bytes, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0));
  *fd = handle;
  return Status::Ok();
}

Status memAllocDevice(size_t bytes, void** ptr) {
  *ptr = nullptr;
  int device = 0;
  TRIB_RETURN_IF_ERROR(currentDevice(&device));
  VmmAllocation a;
  TRIB_RETURN_IF_ERROR(vmmAlloc(device, bytes, &a));
  std::lock_guard<std::mutex> lock(gMemMu);
  gMem.emplace(reinterpret_cast<uintptr_t>(a.ptr), a);
  *ptr = a.ptr;
  return Status::Ok();
}

Status memFreeDevice(void* ptr, bool* mine) {
  VmmAllocation a;
  {
    std::lock_guard<std::mutex> lock(gMemMu);
    auto it = gMem.find(reinterpret_cast<uintptr_t>(ptr));
    *mine = it != gMem.end();
    if (!*mine) return Status::Ok();
    a = it->second;
    gMem.erase(it);
  }
  // Work still running on it must finish first (as cudaFree waits).
  if (const cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) (void)cudaGetLastError();
  vmmFree(a);
  return Status::Ok();
}

}  // namespace trib::cuda
