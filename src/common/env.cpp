#include "common/env.hpp"

#include <strings.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/log.hpp"

namespace trib {

const std::vector<EnvVarInfo>& envVars() {
  static const std::vector<EnvVarInfo> vars = {
      {"TRIB_DEBUG", "WARN", "Log level: NONE, WARN, INFO or TRACE."},
      {"TRIB_DEBUG_SUBSYS", "ALL",
       "Comma list of subsystems to log (INIT, COLL, TUNING, TRANSPORT, BOOTSTRAP, SWITCH, ALL); ^ "
       "excludes."},
      {"TRIB_DEBUG_FILE", "", "Write logs to this file instead of stderr (%h host, %p pid)."},
      {"TRIB_ALGO", "",
       "Force algorithms: 'ring', 'ring,tree', '^ring' (exclude), or per collective "
       "'allreduce:rhd;broadcast:chain'."},
      {"TRIB_ALGO_STRICT", "0",
       "1: a call whose TRIB_ALGO (or config.algo) allows no algorithm that can run it, or whose "
       "TRIB_TUNE pin cannot run it, fails with "
       "tribInvalidUsage; 0: it runs the fastest algorithm that can, with one WARN per communicator "
       "and collective."},
      {"TRIB_TIMEOUT", "300",
       "Seconds any wait may last before failing with tribTimeout (fractions allowed)."},
      {"TRIB_CHUNK_BYTES", "0",
       "Pipeline slice size in bytes for chunked schedules (0: the planner chooses)."},
      {"TRIB_TRANSPORT", "", "Force the transport: loopback, shm, ucx or verbs (default: per peer pair)."},
      {"TRIB_TUNE", "",
       "Tune rules by size range (UCC-style), e.g. 'allreduce:0-64k:@rhd#allreduce:64k-inf:@ring'; see "
       "docs/PLANNER.md."},
      {"TRIB_PROTO", "",
       "Protocols the planner may price for GPU ranks (NCCL_PROTO style): 'LL,LL128,Simple', '^LL'. The "
       "executor runs Simple; without it a call is reported as TRIB_ALGO's are. See docs/PLANNER.md."},
      {"TRIB_TOPO_FILE", "", "Load the topology from this file instead of detecting it."},
      {"TRIB_TOPO_DUMP_FILE", "", "Write the detected topology to this file at init."},
      {"TRIB_REDUCE_ISA", "", "Force the CPU reduction kernels: scalar, avx2 or avx512 (default: best)."},
      {"TRIB_BOOTSTRAP_ADDR", "127.0.0.1",
       "IP (or IP:port) on which tribGetUniqueId's rendezvous server listens; give an address other hosts "
       "can "
       "reach for multi-host jobs."},
      {"TRIB_STORE", "", "host:port of an external TCP store for rendezvous."},
      {"TRIB_STORE_DIR", "", "Directory of a file store for rendezvous on a shared filesystem."},
      {"TRIB_AUTH_KEY", "",
       "Job key every bootstrap connection must present (default: random, in the unique id)."},
      {"TRIB_RANK", "", "This process's rank (overrides the launcher's variables)."},
      {"TRIB_NRANKS", "", "Number of ranks (overrides the launcher's variables)."},
      {"TRIB_LOCAL_RANK", "", "Rank within this host (overrides the launcher's variables)."},
      {"TRIB_LOCAL_SIZE", "", "Ranks on this host (with TRIB_RANK; optional)."},
      {"TRIB_NODE_ID", "", "Index of this host (with TRIB_RANK; optional)."},
      {"TRIB_JOB_ID", "", "Job id namespacing rendezvous keys (with TRIB_RANK; optional)."},
      {"TRIB_SHM_CMA", "1", "Shared-memory transport: use single-copy process_vm_readv for large messages."},
      {"TRIB_SHM_MAPPED", "1",
       "Shared-memory transport: peers read each other's tribMemAlloc buffers directly (pidfd_getfd) "
       "where a schedule exposes them, instead of staging copies in the windows."},
      {"TRIB_NVLINK", "1",
       "CUDA-IPC / NVLink device windows (transports/nvlink): 1 connects them where every rank of a "
       "communicator is on one host and set its CUDA device before init; 0: never (device calls stage "
       "through host memory)."},
      {"TRIB_WINDOW_BYTES", "2097152",
       "Peer window per rank (bytes, two cells), when a transport maps every rank's (shm: all on one "
       "host; loopback: all in one process): one-shot all-reduce takes up to a cell, two-shot runs a "
       "cell per chunk; 0: no windows."},
      {"TRIB_WINDOW_STREAMING", "auto",
       "Peer-window writes with plain or streaming (non-temporal) stores: auto measures both per call "
       "size and takes the faster; 0 plain; 1 streaming."},
      {"TRIB_SHARE_TRANSPORTS", "1",
       "1: the communicators of a process share transport contexts (a UCX worker serves up to 256 of "
       "them, so a split opens no interfaces); 0: every communicator gets its own."},
      {"TRIB_IB_HCA", "",
       "Verbs transport: the RDMA device(s) and port to use, NCCL's syntax: 'mlx5_0:1,mlx5_1', '^mlx5_2' "
       "excludes, '=' before the list makes names exact (default: all; each rank takes the selected port "
       "nearest its GPU or CPUs, docs/VERBS.md)."},
      {"TRIB_IB_GID_INDEX", "-1",
       "Verbs transport: the GID index to use (default -1: on RoCE the RoCE v2 GID of an IPv4 address)."},
      {"TRIB_IB_REG_CACHE", "0",
       "Verbs transport: released memory registrations kept for reuse (0: none; only for applications "
       "that never free and reallocate a buffer they sent or received, see docs/VERBS.md)."},
      {"TRIB_IB_CHUNK_BYTES", "1048576", "Verbs transport: the largest RDMA write of a large message."},
      {"TRIB_IB_QPS_PER_CONNECTION", "1",
       "Verbs transport: queue pairs to each peer (1 to 16, the same on every rank); a large message "
       "is split across them, as NCCL_IB_QPS_PER_CONNECTION."},
      {"TRIB_SWITCH", "", "host:port of this host's aggregation switch (trib-switchd)."},
      {"TRIB_SWITCH_ATTACH_TIMEOUT", "1",
       "Seconds a communicator waits at init for its aggregation switch to accept it (fractions "
       "allowed); past that its collectives run on host algorithms."},
      {"TRIB_SWITCH_KEY", "", "Key the aggregation switch expects (its --key); default: TRIB_AUTH_KEY."},
      {"TRIB_SWITCH_LINK", "tcp",
       "Link to the aggregation switch: tcp or ucx; must match the switch's --link (ucx needs a build with "
       "libucx-dev)."},
      {"TRIB_SWITCH_SLOTS", "16",
       "Aggregation slots a communicator reserves at its switch (chunks in flight)."},
      {"TRIB_SWITCH_BW", "1.0",
       "Planner: an attached aggregation switch's reduce throughput in GB/s, summed over its members "
       "(trib-switchd over TCP on this machine: about 1)."},
      {"TRIB_SWITCH_LAT", "50",
       "Planner: one-way latency in microseconds per tier of the attached aggregation switch tree."},
  };
  return vars;
}

static const EnvVarInfo& lookup(const char* name) {
  for (const EnvVarInfo& v : envVars()) {
    if (std::strcmp(v.name, name) == 0) return v;
  }
  std::fprintf(stderr, "tributary: internal error: environment variable %s is not declared in env.cpp\n",
               name);
  std::abort();
}

std::string envString(const char* name) {
  const EnvVarInfo& info = lookup(name);
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string(info.defaultValue);
}

template <typename T, typename Parse>
static T parseOrDefault(const char* name, Parse parse) {
  const EnvVarInfo& info = lookup(name);
  const char* v = std::getenv(name);
  T out{};
  if (v && *v) {
    if (parse(v, &out)) return out;
    TRIB_WARN("init", "ignoring %s=%s: not a valid value; using the default %s", name, v, info.defaultValue);
  }
  parse(info.defaultValue, &out);
  return out;
}

int64_t envInt(const char* name) {
  return parseOrDefault<int64_t>(name, [](const char* s, int64_t* out) {
    char* end = nullptr;
    long long x = std::strtoll(s, &end, 0);
    if (!*s || *end) return false;
    *out = x;
    return true;
  });
}

double envDouble(const char* name) {
  return parseOrDefault<double>(name, [](const char* s, double* out) {
    char* end = nullptr;
    double x = std::strtod(s, &end);
    if (!*s || *end) return false;
    *out = x;
    return true;
  });
}

bool envBool(const char* name) {
  return parseOrDefault<bool>(name, [](const char* s, bool* out) {
    for (const char* t : {"1", "true", "yes", "on"}) {
      if (strcasecmp(s, t) == 0) return *out = true, true;
    }
    for (const char* f : {"0", "false", "no", "off"}) {
      if (strcasecmp(s, f) == 0) return *out = false, true;
    }
    return false;
  });
}

}  // namespace trib
