// What every rank of the CUDA-IPC window provider publishes at connect, through the bootstrap's
// exchange, in two rounds: first its device (facts) and the Unix socket that passes its file
// descriptors; then, once every rank knows every device, its window (a pointer for ranks of its
// own process, a legacy IPC handle, or "fds over the socket") and the path it chose to each peer.
// Blobs are versioned and size-checked: a malformed or foreign one (another version, another
// communicator, another rank's) is refused with a message that names the peer, never read past
// its end.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/process.hpp"
#include "common/status.hpp"
#include "transports/nvlink/pair_choice.hpp"
#include "transports/nvlink/window_memory.hpp"

namespace trib::nvlink {

// Every blob starts so.
struct BlobHeader {
  uint32_t magic = 0;
  uint32_t version = 0;
  uint32_t size = 0;  // bytes of the whole blob
  int32_t rank = -1;
  int32_t nranks = 0;
  uint32_t reserved = 0;
  uint64_t commId = 0;
};

// Round one.
struct DeviceBlob {
  static constexpr uint32_t kMagic = 0x44564e54;  // "TNVD"
  static constexpr uint32_t kVersion = 1;
  BlobHeader header;
  int32_t device = -1;  // the device ordinal in its own process (messages only)
  uint32_t reserved = 0;
  ProcessIdentity process;   // who watches it for liveness
  uint64_t windowBytes = 0;  // requested; must be equal on every rank
  DeviceFacts facts;
  char socketName[96] = {};  // abstract unix socket passing its window's and signal page's fds
};

// Round two (followed by nranks PairPath bytes: the sender's row).
struct WindowBlob {
  static constexpr uint32_t kMagic = 0x57564e54;  // "TNVW"
  static constexpr uint32_t kVersion = 1;
  BlobHeader header;
  uint32_t handle = 0;  // WindowHandle
  uint32_t reserved = 0;
  uint64_t mappedBytes = 0;    // the window allocation's size (granularity-rounded): what a peer maps
  uint64_t windowAddress = 0;  // in the sender's process: used as is by ranks of the same process
  uint64_t signalAddress = 0;
  uint8_t ipcHandle[64] = {};  // WindowHandle::LegacyIpc
};

std::vector<uint8_t> encodeDeviceBlob(int rank, int nranks, uint64_t commId, const DeviceBlob& b);
// Checks and decodes rank `peer`'s round-one blob (errors: tribRemoteError, naming the peer and
// what was wrong).
Status decodeDeviceBlob(const std::vector<uint8_t>& bytes, int peer, int nranks, uint64_t commId,
                        DeviceBlob* out);

std::vector<uint8_t> encodeWindowBlob(int rank, int nranks, uint64_t commId, const WindowBlob& b,
                                      const std::vector<PairPath>& row);
Status decodeWindowBlob(const std::vector<uint8_t>& bytes, int peer, int nranks, uint64_t commId,
                        WindowBlob* out, std::vector<PairPath>* row);

// What one rank sends another over the socket with its descriptors (window, then signal page).
struct FdMessage {
  static constexpr uint32_t kMagic = 0x46464e54;  // "TNFF"
  BlobHeader header;
  int32_t nfds = 0;
  uint32_t reserved = 0;
};
FdMessage makeFdMessage(int rank, int nranks, uint64_t commId, int nfds);
// Checks a received message (errors name `from`); *rank is the sender it claims to be.
Status checkFdMessage(const FdMessage& m, int nranks, uint64_t commId, const std::string& from, int* rank);

}  // namespace trib::nvlink
