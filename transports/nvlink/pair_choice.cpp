#include "transports/nvlink/pair_choice.hpp"

#include <cstdio>

namespace trib::nvlink {

const char* pairPathName(PairPath p) {
  switch (p) {
    case PairPath::Self:
      return "self";
    case PairPath::Direct:
      return "direct pointer";
    case PairPath::VmmFd:
      return "VMM file descriptor";
    case PairPath::LegacyIpc:
      return "legacy CUDA IPC handle";
    case PairPath::HostStaging:
      return "host staging";
  }
  return "unknown";
}

PairPath choosePairPath(const PairFacts& f) {
  if (f.self) return PairPath::Self;
  // One GPU is always reachable from itself; two need peer access (NVLink or PCIe P2P).
  if (!f.sameDevice && !f.peerAccess) return PairPath::HostStaging;
  if (f.sameProcess) return PairPath::Direct;
  if (f.vmmFd) return PairPath::VmmFd;
  if (f.legacyIpc) return PairPath::LegacyIpc;
  return PairPath::HostStaging;
}

bool windowsUsable(const std::vector<std::vector<PairPath>>& rows, std::string* why) {
  const size_t n = rows.size();
  for (size_t r = 0; r < n; ++r) {
    if (rows[r].size() != n) {
      if (why)
        *why = "rank " + std::to_string(r) + " published " + std::to_string(rows[r].size()) + " paths for " +
               std::to_string(n) + " ranks";
      return false;
    }
    for (size_t p = 0; p < n; ++p) {
      if (rows[r][p] != PairPath::HostStaging) continue;
      if (why)
        *why = "rank " + std::to_string(r) + " cannot map rank " + std::to_string(p) +
               "'s device memory (no peer access between their GPUs, or no IPC handle type)";
      return false;
    }
  }
  return true;
}

}  // namespace trib::nvlink
