#include "transports/nvlink/nvlink_transport.hpp"

#include "common/env.hpp"
#include "common/log.hpp"
#include "cuda/cuda_api.hpp"
#include "cuda/cuda_vmm.hpp"

namespace trib {
namespace nvlink {
namespace {

bool pairConnects(const RankLocation& a, const RankLocation& b) {
  return sameHost(a, b) && (a.flags & kLocationCudaContext) && (b.flags & kLocationCudaContext);
}

Status connect(const TransportConnectArgs& args, std::unique_ptr<Transport>* out) {
  WindowsArgs w;
  w.rank = args.rank;
  w.nranks = args.nranks;
  w.commId = args.commId;
  w.locations = *args.locations;
  w.oob = args.oob;
  w.timeout = args.timeout;
  const int64_t bytes = envInt("TRIB_WINDOW_BYTES");
  w.windowBytes = bytes > 0 ? static_cast<uint64_t>(bytes) : 0;
  std::unique_ptr<NvlinkWindows> windows;
  if (w.windowBytes > 0) {
    int device = 0;
    TRIB_RETURN_IF_ERROR(cuda::currentDevice(&device).prefix("nvlink windows: "));
    std::unique_ptr<WindowMemory> memory;
    TRIB_RETURN_IF_ERROR(cudaWindowMemory(device, &memory).prefix("nvlink windows: "));
    std::string why;
    TRIB_RETURN_IF_ERROR(NvlinkWindows::create(w, std::move(memory), &windows, &why));
    if (windows)
      TRIB_INFO("nvlink", "rank %d: device windows of %llu bytes on device %d (%s)", args.rank,
                static_cast<unsigned long long>(w.windowBytes), device, windowHandleName(windows->handle()));
  }
  *out = std::make_unique<NvlinkTransport>(std::move(windows));
  return Status::Ok();
}

}  // namespace

uint32_t locationFlags() {
  if (!cuda::built() || envInt("TRIB_NVLINK") == 0) return 0;
  return cuda::hasCurrentContext() ? kLocationCudaContext : 0;
}

}  // namespace nvlink

TransportDescriptor nvlinkTransportDescriptor() {
  TransportDescriptor d{};
  d.name = "nvlink";
  d.reaches =
      "every rank of a communicator on one host, each having set its CUDA device before init (device "
      "windows)";
  d.notBuilt = cuda::built() ? nullptr : "this build has no CUDA";
  d.caps.reads = d.caps.writes = memoryKindBit(MemoryKind::Device);  // its windows' memory
  d.caps.twoSided = false;
  d.caps.windows = true;
  d.caps.zeroCopy = true;  // peers load and store each other's device memory directly
  d.priority = 300;
  d.needsExchange = true;
  d.canConnect = nvlink::pairConnects;
  d.connect = nvlink::connect;
  return d;
}

}  // namespace trib
