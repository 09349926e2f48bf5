// The CUDA-IPC window provider's bootstrap blobs (transports/nvlink/nvlink_blob.hpp) as a peer
// published them, and the message that travels with its descriptors. Input: [nranks-1] [peer]
// [which: 0 device blob, 1 window blob, 2 fd message] bytes... Each decoder must refuse with a
// tribRemoteError or accept a blob that names that peer of nranks of this communicator.
#include <cstring>

#include "fuzz_check.hpp"
#include "transports/nvlink/nvlink_blob.hpp"

using namespace trib;
using namespace trib::nvlink;

namespace {
constexpr uint64_t kCommId = 0x5452494246555a5aull;  // the seeds were encoded with it
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const int nranks = 1 + data[0] % 8;
  const int peer = data[1] % nranks;
  const std::vector<uint8_t> bytes(data + 3, data + size);
  Status st;
  const BlobHeader* h = nullptr;
  DeviceBlob dev;
  WindowBlob win;
  FdMessage fdm;
  switch (data[2] % 3) {
    case 0:
      st = decodeDeviceBlob(bytes, peer, nranks, kCommId, &dev);
      if (st.ok()) FUZZ_CHECK(strnlen(dev.socketName, sizeof dev.socketName) < sizeof dev.socketName);
      h = &dev.header;
      break;
    case 1: {
      std::vector<PairPath> row;
      st = decodeWindowBlob(bytes, peer, nranks, kCommId, &win, &row);
      if (st.ok()) {
        FUZZ_CHECK(static_cast<int>(row.size()) == nranks && row[peer] == PairPath::Self);
        for (PairPath p : row) FUZZ_CHECK(static_cast<int>(p) < kNumPairPaths);
      }
      h = &win.header;
      break;
    }
    default: {
      if (bytes.size() < sizeof fdm) return 0;  // the socket reads a whole message or fails
      std::memcpy(&fdm, bytes.data(), sizeof fdm);
      int rank = -2;
      st = checkFdMessage(fdm, nranks, kCommId, "fuzz", &rank);
      if (st.ok()) {
        FUZZ_CHECK(rank >= 0 && rank < nranks);
        FUZZ_CHECK(fdm.header.rank == rank);
      } else {
        FUZZ_CHECK(rank == -1);
      }
      h = st.ok() ? &fdm.header : nullptr;
      break;
    }
  }
  if (!st.ok()) {
    FUZZ_CHECK(st.code() == tribRemoteError && !st.message().empty());
    return 0;
  }
  FUZZ_CHECK(h && h->nranks == nranks && h->commId == kCommId);
  if (data[2] % 3 != 2) FUZZ_CHECK(h->rank == peer && h->size == bytes.size());
  return 0;
}
