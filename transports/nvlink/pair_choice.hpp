// How two ranks of one host reach each other's device windows, decided from facts about their
// processes and devices (so it is testable without a GPU): a pointer within one process, a VMM
// file descriptor or a legacy IPC handle between processes, or no window at all (host staging)
// where the devices cannot access each other.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace trib::nvlink {

// What a rank publishes about its device (ConnectBlob::facts).
struct DeviceFacts {
  uint8_t uuid[16] = {};  // the device's UUID: equal means the same GPU, whatever its ordinal
  uint8_t vmmFd = 0;      // cuMemCreate with POSIX fd handles works on it
  uint8_t legacyIpc = 0;  // cudaIpcGetMemHandle works on it
  uint8_t reserved[6] = {};
};

// What one rank knows of a pair after the first exchange.
struct PairFacts {
  bool self = false;         // the same rank
  bool sameProcess = false;  // the same address space
  bool sameDevice = false;   // the same GPU (UUIDs equal)
  bool peerAccess = false;   // this rank's device can access the peer's (cudaDeviceCanAccessPeer)
  bool vmmFd = false;        // both devices support VMM fd handles
  bool legacyIpc = false;    // both support legacy IPC
};

enum class PairPath : uint8_t {
  Self = 0,         // this rank's own window
  Direct = 1,       // same process: the peer's pointer (peer access enabled if another device)
  VmmFd = 2,        // other process: import the fd, cuMemMap, cuMemSetAccess
  LegacyIpc = 3,    // other process: cudaIpcOpenMemHandle
  HostStaging = 4,  // no peer access: no device windows; messages stage through pinned host memory
};
constexpr int kNumPairPaths = 5;
const char* pairPathName(PairPath p);

PairPath choosePairPath(const PairFacts& f);

// Every rank's row of paths (rows[r][p]: r's path to p), identical on every rank after the second
// exchange. Windows exist only when no pair stages, in either direction (a one-shot reads every
// rank's window); otherwise *why names the first pair that does.
bool windowsUsable(const std::vector<std::vector<PairPath>>& rows, std::string* why);

}  // namespace trib::nvlink
