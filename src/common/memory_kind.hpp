// What kind of memory a buffer is: classified once per call at the API, and carried with the call
// (plan key, planner request, executor) so that what runs can depend on it.
#pragma once
#include <cstdint>

namespace trib {

enum class MemoryKind : uint8_t {
  Host,        // ordinary process memory
  HostShared,  // from tribMemAlloc: peers on this host can map it (registered implicitly)
  Registered,  // host memory the caller registered with the communicator (tribCommRegister)
  Device,      // GPU memory (CUDA builds)
};
constexpr int kNumMemoryKinds = 4;

inline const char* memoryKindName(MemoryKind k) {
  switch (k) {
    case MemoryKind::Host:
      return "host";
    case MemoryKind::HostShared:
      return "host-shared";
    case MemoryKind::Registered:
      return "registered";
    case MemoryKind::Device:
      return "device";
  }
  return "unknown";
}

// A set of memory kinds, one bit per kind.
using MemoryKindSet = uint8_t;
constexpr MemoryKindSet memoryKindBit(MemoryKind k) {
  return static_cast<MemoryKindSet>(1u << static_cast<int>(k));
}
constexpr MemoryKindSet kHostMemoryKinds = memoryKindBit(MemoryKind::Host) |
                                           memoryKindBit(MemoryKind::HostShared) |
                                           memoryKindBit(MemoryKind::Registered);

}  // namespace trib
