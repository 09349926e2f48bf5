// src/cuda/cuda_api.hpp in a build without CUDA (TRIB_WITH_CUDA=OFF, or no nvcc found).
#include "cuda/cuda_api.hpp"

namespace trib::cuda {

Status notBuiltStatus();

namespace {
Status notBuilt() {
  return errorf(tribUnhandledCudaError,
                "no CUDA driver/device: this build of Tributary has no CUDA (configure with nvcc present, "
                "TRIB_WITH_CUDA=AUTO or ON)");
}
}  // namespace

Status notBuiltStatus() { return notBuilt(); }
bool built() { return false; }
Status deviceStatus() { return notBuilt(); }
bool isDevicePointer(const void*) { return false; }
Status createEngine(int, std::unique_ptr<Engine>*) { return notBuilt(); }
Status synchronize(Engine&) { return notBuilt(); }
int deviceOf(const void*) { return -1; }
Status currentDevice(int*) { return notBuilt(); }
Status setDevice(int) { return notBuilt(); }
Status createStreamOrdering(int, std::unique_ptr<StreamOrdering>*) { return notBuilt(); }
Status deviceCount(int*) { return notBuilt(); }
Status deviceAlloc(int, size_t, void**) { return notBuilt(); }
void deviceFree(void*) {}
Status copy(void*, const void*, size_t, void*) { return notBuilt(); }
Status streamCreate(int, void**) { return notBuilt(); }
void streamDestroy(void*) {}
Status streamSynchronize(void*) { return notBuilt(); }
Status countMismatches(int, void*, const void*, uint64_t, DataType, const perf::Check&, int64_t*) {
  return notBuilt();
}

}  // namespace trib::cuda

// cuda_vmm.hpp without CUDA.
#include "cuda/cuda_vmm.hpp"

namespace trib::cuda {

Status deviceInfo(int, DeviceInfo* out) {
  *out = DeviceInfo{};
  return notBuiltStatus();
}
int deviceWithUuid(const uint8_t*) { return -1; }
bool canAccessPeer(int, int) { return false; }
Status enablePeerAccess(int, int) { return notBuiltStatus(); }
bool hasCurrentContext() { return false; }
Status vmmAlloc(int, size_t, VmmAllocation*) { return notBuiltStatus(); }
Status vmmExportFd(const VmmAllocation&, int*) { return notBuiltStatus(); }
Status vmmImportFd(int, int, size_t, VmmAllocation*) { return notBuiltStatus(); }
void vmmFree(VmmAllocation&) {}
Status ipcAlloc(int, size_t, void**, uint8_t*) { return notBuiltStatus(); }
void ipcFree(void*) {}
Status ipcOpen(int, const uint8_t*, void**) { return notBuiltStatus(); }
void ipcClose(void*) {}
bool dmabufSupported(int) { return false; }
Status dmabufExport(uintptr_t, size_t, int* fd) {
  *fd = -1;
  return notBuiltStatus();
}
bool deviceAllocation(const void*, DeviceAllocation* out) {
  *out = DeviceAllocation{};
  return false;
}
Status memAllocDevice(size_t, void**) { return notBuiltStatus(); }
Status memFreeDevice(void*, bool* mine) {
  *mine = false;
  return Status::Ok();
}

}  // namespace trib::cuda
