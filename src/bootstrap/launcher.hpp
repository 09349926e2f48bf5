// Launcher environment detection: who am I (rank, size, local rank) and where is the store.
//
// Precedence (first match wins; docs/BOOTSTRAP.md):
//   1. TRIB_RANK + TRIB_NRANKS (+ TRIB_LOCAL_RANK, TRIB_LOCAL_SIZE)   explicit, always wins
//   2. torchrun:  RANK + WORLD_SIZE (+ LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT)
//   3. Open MPI:  OMPI_COMM_WORLD_RANK + OMPI_COMM_WORLD_SIZE (+ _LOCAL_RANK, _LOCAL_SIZE)
//   4. Slurm:     SLURM_PROCID + SLURM_NTASKS (+ SLURM_LOCALID, SLURM_NODEID)
//   5. MPICH/PMI: PMI_RANK + PMI_SIZE (+ MPI_LOCALRANKID)
// Store location: TRIB_STORE=host:port (a running store, e.g. trib-store), else
// MASTER_ADDR:MASTER_PORT (rank 0 serves it, as torchrun expects), else a file store in
// TRIB_STORE_DIR, else an error naming these variables.
// Job key: TRIB_AUTH_KEY; without it a key derived from the launcher's job id (not secret:
// a warning says so) so that all ranks of one job agree.
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "bootstrap/store.hpp"
#include "bootstrap/unique_id.hpp"

namespace trib {

struct LaunchInfo {
  std::string launcher;  // "trib", "torchrun", "openmpi", "slurm", "pmi"
  int rank = -1, nranks = -1;
  int localRank = -1, localSize = -1;  // -1 when the launcher does not say
  int nodeId = -1;
  std::string storeAddr;          // host:port of a TCP store ("" with a file store)
  bool rank0ServesStore = false;  // MASTER_ADDR: rank 0 starts the server there
  std::string storeDir;           // file store directory
  std::string authKey;
  std::string jobId;  // namespaces keys in a shared store
};

using EnvLookup = std::function<const char*(const char*)>;
Status detectLauncher(LaunchInfo* info);                           // from the process environment
Status detectLauncher(LaunchInfo* info, const EnvLookup& getenv);  // from any lookup (tests)

// Open the store `info` describes: rank 0 starts the server when rank0ServesStore (kept alive
// by *server), every rank connects.
Status openLaunchStore(const LaunchInfo& info, int timeoutMs, std::shared_ptr<Store>* store,
                       StoreServerHandle* server);

}  // namespace trib
