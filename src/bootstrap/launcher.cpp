#include "bootstrap/launcher.hpp"

#include <cerrno>
#include <cstdlib>

#include "common/log.hpp"

namespace trib {

namespace {

struct LauncherVars {
  const char* name;
  const char* rank;
  const char* size;
  const char* localRank;
  const char* localSize;
  const char* nodeId;
  const char* jobId;
};

// In precedence order (see launcher.hpp).
constexpr LauncherVars kLaunchers[] = {
    {"trib", "TRIB_RANK", "TRIB_NRANKS", "TRIB_LOCAL_RANK", "TRIB_LOCAL_SIZE", "TRIB_NODE_ID", "TRIB_JOB_ID"},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "TORCHELASTIC_RUN_ID"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_NODE_RANK", "OMPI_MCA_orte_ess_jobid"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "SLURM_NODEID",
     "SLURM_JOB_ID"},
    {"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", nullptr, "PMI_KVSNAME"},
};

// Strict integer parse: the whole string, in range.
Status parseInt(const EnvLookup& env, const char* var, long lo, long hi, int* out, bool required) {
  const char* v = var ? env(var) : nullptr;
  if (!v || !*v) {
    if (required) return errorf(tribInvalidArgument, "%s is not set", var);
    *out = -1;
    return Status::Ok();
  }
  char* end = nullptr;
  errno = 0;
  long x = std::strtol(v, &end, 10);
  if (*end != '\0' || errno != 0 || x < lo || x > hi)
    return errorf(tribInvalidArgument, "%s='%s' is not an integer in [%ld, %ld]", var, v, lo, hi);
  *out = static_cast<int>(x);
  return Status::Ok();
}

}  // namespace

Status detectLauncher(LaunchInfo* info) {
  return detectLauncher(info, [](const char* name) { return static_cast<const char*>(std::getenv(name)); });
}

Status detectLauncher(LaunchInfo* info, const EnvLookup& env) {
  *info = LaunchInfo{};
  const LauncherVars* found = nullptr;
  for (const auto& l : kLaunchers) {
    if (env(l.rank) || env(l.size)) {
      found = &l;
      break;
    }
  }
  if (!found)
    return errorf(tribInvalidUsage,
                  "no launcher environment found: set TRIB_RANK and TRIB_NRANKS, or start under torchrun "
                  "(RANK/WORLD_SIZE), mpirun (OMPI_COMM_WORLD_*), srun (SLURM_PROCID/SLURM_NTASKS) or "
                  "Hydra (PMI_RANK/PMI_SIZE)");
  const LauncherVars& l = *found;
  info->launcher = l.name;
  auto ctx = [&](Status s) { return s.prefix(strprintf("launcher %s: ", l.name)); };
  if (Status s = parseInt(env, l.size, 1, 1 << 24, &info->nranks, true); !s.ok()) return ctx(s);
  if (Status s = parseInt(env, l.rank, 0, 1 << 24, &info->rank, true); !s.ok()) return ctx(s);
  if (info->rank >= info->nranks)
    return errorf(tribInvalidArgument, "launcher %s: %s=%d is not below %s=%d", l.name, l.rank, info->rank,
                  l.size, info->nranks);
  if (Status s = parseInt(env, l.localSize, 1, 1 << 24, &info->localSize, false); !s.ok()) return ctx(s);
  if (Status s = parseInt(env, l.localRank, 0, 1 << 24, &info->localRank, false); !s.ok()) return ctx(s);
  if (Status s = parseInt(env, l.nodeId, 0, 1 << 24, &info->nodeId, false); !s.ok()) return ctx(s);
  if (info->localSize > info->nranks)
    return errorf(tribInvalidArgument, "launcher %s: %s=%d exceeds %s=%d", l.name, l.localSize,
                  info->localSize, l.size, info->nranks);
  if (info->localRank >= 0 && info->localSize > 0 && info->localRank >= info->localSize)
    return errorf(tribInvalidArgument, "launcher %s: %s=%d is not below %s=%d", l.name, l.localRank,
                  info->localRank, l.localSize, info->localSize);
  if (const char* j = env(l.jobId); j && *j) info->jobId = j;
  // Slurm's per-node task count may be "4(x2)"; only a plain number is taken (parsed above).

  // Where the store lives.
  const char* store = env("TRIB_STORE");
  const char* maddr = env("MASTER_ADDR");
  const char* mport = env("MASTER_PORT");
  const char* dir = env("TRIB_STORE_DIR");
  if (store && *store) {
    net::SockAddr a;
    if (Status s = net::parseHostPort(store, &a); !s.ok()) return s.prefix("TRIB_STORE: ");
    info->storeAddr = store;
  } else if (maddr && *maddr) {
    int port = -1;
    if (Status s = parseInt(env, "MASTER_PORT", 1, 65535, &port, true); !s.ok())
      return s.prefix("MASTER_ADDR is set, so: ");
    info->storeAddr = std::string(maddr).find(':') != std::string::npos ? strprintf("[%s]:%d", maddr, port)
                                                                        : strprintf("%s:%d", maddr, port);
    info->rank0ServesStore = true;
  } else if (mport && *mport) {
    return errorf(tribInvalidArgument, "MASTER_PORT is set but MASTER_ADDR is not; set both (or TRIB_STORE)");
  } else if (dir && *dir) {
    info->storeDir = dir;
  } else {
    return errorf(tribInvalidUsage,
                  "launcher %s gives rank %d of %d but no rendezvous: set TRIB_STORE=host:port (a running "
                  "store), MASTER_ADDR and MASTER_PORT (rank 0 serves the store), or TRIB_STORE_DIR (a "
                  "shared directory)",
                  l.name, info->rank, info->nranks);
  }
  if (const char* k = env("TRIB_AUTH_KEY"); k && *k) {
    info->authKey = k;
  } else {
    info->authKey = strprintf("trib-default:%s:%s:%s", l.name, info->jobId.c_str(), info->storeAddr.c_str());
    if (!info->storeAddr.empty() && info->rank == 0)
      TRIB_WARN("bootstrap",
                "TRIB_AUTH_KEY is not set: the store at %s uses a job key derived from the launcher's job "
                "id, which is not secret; set TRIB_AUTH_KEY to a random string shared by the job",
                info->storeAddr.c_str());
  }
  return Status::Ok();
}

Status openLaunchStore(const LaunchInfo& info, int timeoutMs, std::shared_ptr<Store>* store,
                       StoreServerHandle* server) {
  if (!info.storeDir.empty()) {
    std::unique_ptr<FileStore> fs;
    TRIB_RETURN_IF_ERROR(FileStore::open(info.storeDir, &fs));
    *store = std::move(fs);
    return Status::Ok();
  }
  if (info.storeAddr.empty())
    return errorf(tribInvalidArgument,
                  "launch info names no store (set TRIB_STORE, MASTER_ADDR or TRIB_STORE_DIR)");
  if (info.rank0ServesStore && info.rank == 0) {
    StoreServerOptions opt;
    opt.listen = info.storeAddr;
    opt.authKey = info.authKey;
    std::unique_ptr<TcpStoreServer> s;
    TRIB_RETURN_IF_ERROR(TcpStoreServer::start(opt, &s).prefix("rank 0 serving the store at MASTER_ADDR: "));
    *server = std::move(s);
  }
  std::unique_ptr<TcpStore> c;
  TRIB_RETURN_IF_ERROR(TcpStore::connect(info.storeAddr, info.authKey, timeoutMs, &c));
  *store = std::move(c);
  return Status::Ok();
}

}  // namespace trib
