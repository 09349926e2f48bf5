// Connecting a communicator across processes and hosts: rendezvous through a store, learn where
// every rank lives, and give each peer the transport that suits it: the same process ->
// loopback, the same host -> shm, another host -> UCX (TRIB_TRANSPORT / config overrides).
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <random>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/launcher.hpp"
#include "bootstrap/unique_id.hpp"
#include "common/log.hpp"
#include "core/comm.hpp"
#include "core/switch_coll.hpp"
#include "transports/loopback/loopback.hpp"
#include "transports/shm/shm_transport.hpp"
#ifdef TRIB_HAVE_UCX
#include "transports/ucx/ucx_transport.hpp"
#endif

namespace trib {

namespace {

// ---- where a rank lives ----------------------------------------------------------------------
struct Identity {
  char host[64];     // hostname + boot id: equal means "same kernel", so shm works
  uint64_t process;  // random per process: equal means "same address space"
  int32_t pid;
};

uint64_t processToken() {
  static const uint64_t token = [] {
    std::random_device rd;
    return (uint64_t{rd()} << 32) ^ rd() ^ static_cast<uint64_t>(getpid());
  }();
  return token;
}

Identity myIdentity() {
  Identity id{};
  char name[40] = {};
  gethostname(name, sizeof name - 1);
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  std::snprintf(id.host, sizeof id.host, "%s/%.20s", name, boot.c_str());
  id.process = processToken();
  id.pid = static_cast<int32_t>(getpid());
  return id;
}

// ---- store servers started by tribGetUniqueId in this process ---------------------------------
// The comms of this process that join the id share the server; it stops with the last of them.
struct ServerRegistry {
  std::mutex mu;
  std::map<uint64_t, StoreServerHandle> servers;
};
ServerRegistry& servers() {
  static ServerRegistry r;
  return r;
}

StoreServerHandle localServer(uint64_t commId) {
  std::lock_guard<std::mutex> lock(servers().mu);
  auto it = servers().servers.find(commId);
  if (it == servers().servers.end()) return nullptr;
  // A process fork()ed after tribGetUniqueId inherits the registry but not the server's thread:
  // it joins as a client, like a rank on another host, and drops its copy.
  if (!it->second->ownedHere()) {
    servers().servers.erase(it);
    return nullptr;
  }
  return it->second;
}

void releaseServerRegistration(uint64_t commId) {
  std::lock_guard<std::mutex> lock(servers().mu);
  servers().servers.erase(commId);
}

// Rank 0 publishes nranks; every other rank checks it, so a mismatch is reported at once
// instead of as a timeout.
Status checkSameSize(Store& store, const std::string& prefix, int rank, int nranks, int timeoutMs) {
  const std::string key = prefix + "/nranks";
  if (rank == 0)
    return store.set(key, Blob(reinterpret_cast<const uint8_t*>(&nranks),
                               reinterpret_cast<const uint8_t*>(&nranks) + sizeof nranks));
  Blob value;
  TRIB_RETURN_IF_ERROR(store.get(key, &value, timeoutMs).prefix("communicator init: waiting for rank 0: "));
  int32_t theirs = 0;
  if (value.size() == sizeof theirs) std::memcpy(&theirs, value.data(), sizeof theirs);
  if (theirs != nranks) {
    return errorf(
        tribInvalidUsage,
        "communicator init: rank %d was told nranks=%d but rank 0 said nranks=%d: every rank must pass "
        "the same nranks",
        rank, nranks, theirs);
  }
  return Status::Ok();
}

// An all-gather of every rank's blob through the store; on timeout the error lists the ranks
// that never arrived.
Status joinExchange(Store& store, const std::string& prefix, int rank, int nranks, const Blob& mine,
                    const CommConfig& config, std::vector<Blob>* all) {
  auto key = [&](int r) { return prefix + "/join/" + std::to_string(r); };
  TRIB_RETURN_IF_ERROR(store.set(key(rank), mine));
  std::vector<std::string> keys;
  for (int r = 0; r < nranks; ++r) keys.push_back(key(r));
  Status st = store.multiGet(keys, all, static_cast<int>(config.timeout.count()));
  if (st.code() != tribTimeout) return st.prefix("communicator init: ");
  std::string missing;
  int count = 0;
  for (int r = 0; r < nranks; ++r) {
    Blob ignored;
    if (store.get(key(r), &ignored, 0).ok()) continue;
    if (++count <= 8) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
  }
  if (count > 8) missing += strprintf(" and %d more", count - 8);
  return errorf(
      tribTimeout,
      "communicator init: %d of %d ranks did not join within %.1f s (missing: rank %s). Every rank must "
      "call tribCommInitRank with the same unique id and nranks",
      count, nranks, config.timeout.count() / 1000.0, missing.c_str());
}

std::string hex64(uint64_t v) { return strprintf("%016llx", static_cast<unsigned long long>(v)); }

}  // namespace

const std::vector<TransportInfo>& transportTable() {
  static const std::vector<TransportInfo> table = {
      {"loopback", "ranks in the same process", nullptr},
      {"shm", "processes on the same host", nullptr},
#ifdef TRIB_HAVE_UCX
      {"ucx", "ranks on other hosts", nullptr},
#else
      {"ucx", "ranks on other hosts", "libucx-dev was not found at build time"},
#endif
  };
  return table;
}

Status makeUniqueId(tribUniqueId* id) {
  StoreServerHandle server;
  TRIB_RETURN_IF_ERROR(makeUniqueId(id, &server));
  UniqueIdInfo info;
  TRIB_RETURN_IF_ERROR(parseUniqueId(*id, &info));
  std::lock_guard<std::mutex> lock(servers().mu);
  servers().servers[info.commId] = std::move(server);
  return Status::Ok();
}

// Collective over the `nranks` ranks that share `prefix` in `store`.
Status commConnect(int rank, int nranks, uint64_t commId, std::shared_ptr<Store> store,
                   const std::string& prefix, StoreServerHandle server, const CommConfig& config,
                   tribComm** out) {
  auto boot =
      std::make_shared<Bootstrap>(store, rank, nranks, prefix, static_cast<int>(config.timeout.count()));
  // 1. Where does every rank live? (This exchange is also the join: its failure names who is missing.)
  TRIB_RETURN_IF_ERROR(checkSameSize(*store, prefix, rank, nranks, static_cast<int>(config.timeout.count())));
  Identity me = myIdentity();
  Blob mine(sizeof me);
  std::memcpy(mine.data(), &me, sizeof me);
  std::vector<Blob> all;
  TRIB_RETURN_IF_ERROR(joinExchange(*store, prefix, rank, nranks, mine, config, &all));
  std::vector<Identity> ids(nranks);
  for (int r = 0; r < nranks; ++r) {
    if (all[r].size() != sizeof(Identity)) {
      return errorf(tribRemoteError, "communicator init: rank %d sent a malformed location (%zu bytes)", r,
                    all[r].size());
    }
    std::memcpy(&ids[r], all[r].data(), sizeof(Identity));
  }
  auto sameProcess = [&](int p) { return ids[p].process == me.process && ids[p].pid == me.pid; };
  auto sameHost = [&](int p) { return std::strncmp(ids[p].host, me.host, sizeof me.host) == 0; };

  // 2. Which transports? The decision must be the same on every rank (creation is collective),
  // so it is made from the shared table, not from this rank's view alone.
  const std::string& forced = config.transport;
  if (!forced.empty()) {
    std::string names;
    bool known = false;
    for (const TransportInfo& t : transportTable()) {
      names += (names.empty() ? "" : ", ") + std::string(t.name);
      known |= forced == t.name;
    }
    if (!known)
      return errorf(tribInvalidArgument, "TRIB_TRANSPORT='%s' is not one of %s", forced.c_str(),
                    names.c_str());
  }
  bool anyCrossProcess = false, anyCrossHost = false;
  for (int a = 0; a < nranks; ++a) {
    for (int b = 0; b < nranks; ++b) {
      bool host = std::strncmp(ids[a].host, ids[b].host, sizeof me.host) == 0;
      bool proc = ids[a].process == ids[b].process && ids[a].pid == ids[b].pid;
      anyCrossHost |= !host;
      anyCrossProcess |= host && !proc;
    }
  }
  if (forced == "loopback" && (anyCrossHost || anyCrossProcess)) {
    return errorf(tribInvalidArgument,
                  "TRIB_TRANSPORT=loopback needs every rank in one process; this "
                  "communicator spans several");
  }
  if (forced == "shm" && anyCrossHost) {
    return errorf(tribInvalidArgument,
                  "TRIB_TRANSPORT=shm needs every rank on one host; this communicator spans "
                  "several hosts");
  }
  const bool useShm = forced == "shm" || (forced.empty() && anyCrossProcess);
  const bool useUcx = forced == "ucx" || (forced.empty() && anyCrossHost);

  // Where each rank lives, for the planner; and with several hosts, every host's topology.
  RankPlacement placement;
  std::vector<std::string> hostNames;
  for (int r = 0; r < nranks; ++r) {
    int host = 0;
    while (host < static_cast<int>(hostNames.size()) && hostNames[host] != ids[r].host) ++host;
    if (host == static_cast<int>(hostNames.size())) hostNames.push_back(ids[r].host);
    int local = 0;
    for (int q = 0; q < r; ++q) local += placement.hostOfRank[q] == host;
    placement.hostOfRank.push_back(host);
    placement.localRankOf.push_back(local);
  }
  std::vector<std::string> hostDumps;
  if (anyCrossHost) {
    std::string dump;
    TRIB_RETURN_IF_ERROR(localTopologyDump(&dump));
    std::vector<Blob> dumps;
    TRIB_RETURN_IF_ERROR(
        boot->allGather(Blob(dump.begin(), dump.end()), &dumps).prefix("exchanging topologies: "));
    hostDumps.resize(hostNames.size());
    for (int r = nranks - 1; r >= 0; --r) {
      hostDumps[placement.hostOfRank[r]].assign(dumps[r].begin(), dumps[r].end());
    }
  }

  auto* comm = new tribComm(rank, nranks, commId, config);
  std::unique_ptr<tribComm> guard(comm);
  TRIB_RETURN_IF_ERROR(makePlanner(placement, hostDumps, config, &comm->planner));
  comm->store = store;
  comm->storeServer = server;
  comm->bootstrapPrefix = prefix;
  comm->peers.assign(nranks, nullptr);

  // Loopback for ranks of this process (and always for self-sends).
  int localInProcess = 0;
  for (int p = 0; p < nranks; ++p) localInProcess += sameProcess(p);
  std::shared_ptr<LoopbackFabric> fabric;
  bool lastLocal = false;
  TRIB_RETURN_IF_ERROR(joinLocalWorld(commId, nranks, localInProcess, rank, &fabric, &lastLocal));
  // Once every rank of this process holds the store server, the id's registration can go: the
  // server then lives exactly as long as the communicators that use it.
  if (lastLocal && server) releaseServerRegistration(commId);
  comm->ownedTransports.push_back(makeLoopbackTransport(fabric, rank));
  Transport* loop = comm->ownedTransports.back().get();
  std::string summary = "loopback";
  for (int p = 0; p < nranks; ++p) {
    if (p == rank || (sameProcess(p) && forced.empty()) || forced == "loopback") comm->peers[p] = loop;
  }
  if (useShm) {
    std::vector<int> local;
    for (int p = 0; p < nranks; ++p) {
      if (sameHost(p)) local.push_back(p);
    }
    std::unique_ptr<ShmTransport> shm;
    TRIB_RETURN_IF_ERROR(ShmTransport::create(rank, nranks, local, boot->oobAllGather(), ShmOptions{}, &shm)
                             .prefix("communicator init: shared-memory transport: "));
    Transport* t = shm.get();
    comm->board = shm->board();
    comm->twoShotBoard = shm->twoShotBoard();
    comm->boardBytes = shm->boardBytes();
    comm->ownedTransports.push_back(std::move(shm));
    for (int p : local) {
      if (p != rank && (!comm->peers[p] || forced == "shm")) comm->peers[p] = t;
    }
    summary += "+shm";
  }
  if (useUcx) {
#ifdef TRIB_HAVE_UCX
    UcxOptions opts;
    opts.commId = commId;
    // Liveness probes must not call a merely slow peer dead on a loaded machine: probe a few
    // times per timeout, never faster than every 2 s. A peer that dies is still reported well
    // within TRIB_TIMEOUT (TCP notices a closed socket at once).
    opts.keepaliveSec = std::max(2.0, config.timeout.count() / 1000.0 / 4);
    std::unique_ptr<Transport> ucx;
    TRIB_RETURN_IF_ERROR(createUcxTransport(rank, nranks, boot->oobAllGather(), opts, &ucx)
                             .prefix("communicator init: UCX transport: "));
    Transport* t = ucx.get();
    comm->ownedTransports.push_back(std::move(ucx));
    for (int p = 0; p < nranks; ++p) {
      if (p != rank && (!comm->peers[p] || forced == "ucx")) comm->peers[p] = t;
    }
    summary += "+ucx";
#else
    return errorf(tribNotSupported,
                  "%s, but this build has no UCX transport (install libucx-dev and rebuild)",
                  forced == "ucx" ? "TRIB_TRANSPORT=ucx was requested" : "ranks are on several hosts");
#endif
  }
  for (int p = 0; p < nranks; ++p) {
    if (!comm->peers[p])
      return errorf(tribInternalError, "communicator init: no transport reaches rank %d", p);
  }
  comm->transportSummary = summary;
  attachSwitch(comm, boot->oobAllGather());  // before finalize: it agrees over the bootstrap
  // 3. The store's host keeps serving until every rank is done with it.
  TRIB_RETURN_IF_ERROR(boot->finalize(server != nullptr).prefix("communicator init: "));
  TRIB_INFO("init", "comm %016llx rank %d/%d ready (transports %s)", static_cast<unsigned long long>(commId),
            rank, nranks, summary.c_str());
  *out = guard.release();
  return Status::Ok();
}

Status commInitRank(int nranks, const tribUniqueId& uid, int rank, const tribConfig_t* cfg, tribComm** out) {
  UniqueIdInfo info;
  TRIB_RETURN_IF_ERROR(parseUniqueId(uid, &info));
  CommConfig config;
  TRIB_RETURN_IF_ERROR(resolveConfig(cfg, &config));
  StoreServerHandle server = localServer(info.commId);
  std::unique_ptr<TcpStore> tcp;
  TRIB_RETURN_IF_ERROR(
      TcpStore::connect(info.storeAddr, info.jobKey, static_cast<int>(config.timeout.count()), &tcp)
          .prefix("communicator init: cannot reach the unique id's store: "));
  Status st = commConnect(rank, nranks, info.commId, std::shared_ptr<Store>(std::move(tcp)),
                          hex64(info.commId), server, config, out);
  return st;
}

Status commInitFromEnv(const tribConfig_t* cfg, tribComm** out) {
  CommConfig config;
  TRIB_RETURN_IF_ERROR(resolveConfig(cfg, &config));
  LaunchInfo launch;
  TRIB_RETURN_IF_ERROR(detectLauncher(&launch));
  std::shared_ptr<Store> store;
  StoreServerHandle server;
  TRIB_RETURN_IF_ERROR(openLaunchStore(launch, static_cast<int>(config.timeout.count()), &store, &server));
  uint64_t id = 0xcbf29ce484222325ull;  // FNV-1a of the job id: every rank derives the same comm id
  for (char ch : launch.jobId) id = (id ^ static_cast<unsigned char>(ch)) * 0x100000001b3ull;
  TRIB_INFO("init", "launcher %s: rank %d of %d", launch.launcher.c_str(), launch.rank, launch.nranks);
  return commConnect(launch.rank, launch.nranks, id, store, "env/" + launch.jobId, server, config, out);
}

}  // namespace trib
