// Connecting a communicator across processes and hosts: rendezvous through a store, learn where
// every rank lives, and give each peer the transport the registry (transports/registry.hpp)
// chooses for that pair of ranks (TRIB_TRANSPORT / config overrides).
#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/launcher.hpp"
#include "bootstrap/unique_id.hpp"
#include "common/log.hpp"
#include "core/comm.hpp"
#include "core/switch_coll.hpp"
#include "transports/registry.hpp"

namespace trib {

namespace {

// ---- store servers started by tribGetUniqueId in this process ---------------------------------
// The comms of this process that join the id share the server; it stops with the last of them.
struct ServerRegistry {
  struct Entry {
    StoreServerHandle server;
    int taken = 0;  // ranks of this process that have joined with it
  };
  std::mutex mu;
  std::map<uint64_t, Entry> servers;
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
  if (!it->second.server->ownedHere()) {
    servers().servers.erase(it);
    return nullptr;
  }
  return it->second.server;
}

// Once every rank of this process (`localCount` of them) holds the store server, the id's
// registration can go: the server then lives exactly as long as the communicators that use it.
void noteServerTaken(uint64_t commId, int localCount) {
  std::lock_guard<std::mutex> lock(servers().mu);
  auto it = servers().servers.find(commId);
  if (it != servers().servers.end() && ++it->second.taken >= localCount) servers().servers.erase(it);
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
  std::vector<int> ranks;
  for (int r = 0; r < nranks; ++r) keys.push_back(key(r)), ranks.push_back(r);
  Status st = multiGetIndexed(store, prefix + "/join/", ranks, all, static_cast<int>(config.timeout.count()));
  if (st.code() != tribTimeout) return st.prefix("communicator init: ");
  MissingKeys m = missingKeys(store, keys, [](size_t r) { return std::to_string(r); });
  return errorf(
      tribTimeout,
      "communicator init: %d of %d ranks did not join within %.1f s (missing: rank %s). Every rank must "
      "call tribCommInitRank with the same unique id and nranks",
      m.count, nranks, config.timeout.count() / 1000.0, m.list.c_str());
}

std::string hex64(uint64_t v) { return strprintf("%016llx", static_cast<unsigned long long>(v)); }

}  // namespace

Status connectTransports(Communicator* comm, const std::vector<RankLocation>& locations,
                         const OobAllGather& oob) {
  TransportChoice choice;
  TRIB_RETURN_IF_ERROR(
      chooseTransports(locations, comm->rank, comm->config.transport, static_cast<bool>(oob), &choice));
  comm->peers.assign(comm->nranks, nullptr);
  std::string summary;
  // Every rank connects the same transports in the same order: connecting may be collective. The
  // window providers (device windows) come after the pair transports, reaching no pair.
  std::vector<const TransportDescriptor*> all = choice.used;
  const size_t pairTransports = all.size();
  for (const TransportDescriptor* d : chooseWindowProviders(locations, static_cast<bool>(oob)))
    all.push_back(d);
  for (size_t i = 0; i < all.size(); ++i) {
    const TransportDescriptor* d = all[i];
    TransportConnectArgs args;
    args.rank = comm->rank;
    args.nranks = comm->nranks;
    args.commId = comm->commId;
    args.locations = &locations;
    for (int p = 0; p < comm->nranks && i < pairTransports; ++p) {
      if (choice.peer[p] == d) args.peers.push_back(p);
    }
    args.oob = oob;
    args.timeout = comm->config.timeout;
    args.shareContexts = comm->config.shareTransports;
    std::unique_ptr<Transport> t;
    TRIB_RETURN_IF_ERROR(d->connect(args, &t).prefix("communicator init: "));
    const MemoryReach reach = transportMemoryReach(d->caps, args);
    t->setMemoryReach(reach.reads, reach.writes, reach.reduces);
    for (int p : args.peers) comm->peers[p] = t.get();
    // Peer-memory schedules need every rank's window: a transport that maps them all has them
    // (device memory's apart from host memory's).
    PeerWindows* w = t->windows();
    if (w && w->device() >= 0) {
      if (!comm->deviceWindows) comm->deviceWindows = w;
    } else if (w && !comm->windows) {
      comm->windows = w;
    }
    comm->ownedTransports.push_back(std::move(t));
    if (i < pairTransports || w) summary += (summary.empty() ? "" : "+") + std::string(d->name);
  }
  for (int p = 0; p < comm->nranks; ++p) {
    if (!comm->peers[p])
      return errorf(tribInternalError, "communicator init: no transport reaches rank %d", p);
  }
  comm->transportSummary = summary;
  return Status::Ok();
}

Status makeUniqueId(tribUniqueId* id) {
  StoreServerHandle server;
  TRIB_RETURN_IF_ERROR(makeUniqueId(id, &server));
  UniqueIdInfo info;
  TRIB_RETURN_IF_ERROR(parseUniqueId(*id, &info));
  std::lock_guard<std::mutex> lock(servers().mu);
  servers().servers[info.commId].server = std::move(server);
  return Status::Ok();
}

namespace {

// Every rank's location, through the store (this exchange is also the join: its failure names
// who is missing).
Status exchangeLocations(Store& store, const CommSpec& spec, std::vector<RankLocation>* out) {
  const int nranks = spec.nranks;
  TRIB_RETURN_IF_ERROR(
      checkSameSize(store, spec.prefix, spec.rank, nranks, static_cast<int>(spec.config.timeout.count())));
  RankLocation me = thisRankLocation();
  Blob mine(sizeof me);
  std::memcpy(mine.data(), &me, sizeof me);
  std::vector<Blob> all;
  TRIB_RETURN_IF_ERROR(joinExchange(store, spec.prefix, spec.rank, nranks, mine, spec.config, &all));
  out->assign(nranks, RankLocation{});
  for (int r = 0; r < nranks; ++r) {
    if (all[r].size() != sizeof(RankLocation)) {
      return errorf(tribRemoteError, "communicator init: rank %d sent a malformed location (%zu bytes)", r,
                    all[r].size());
    }
    std::memcpy(&(*out)[r], all[r].data(), sizeof(RankLocation));
  }
  return Status::Ok();
}

// The same over several stores (tribCommInitRankScalable): one allGather of what each rank was
// given and where it lives. Every rank checks every other's, so ranks given other ids or nranks
// fail with an error naming one of them (if their own store is shared; else their waits time out
// naming the stores that did not answer).
Status exchangeLocationsOverStores(Bootstrap& boot, const CommSpec& spec, std::vector<RankLocation>* out) {
  struct Joined {
    int32_t nranks, nIds;
    uint64_t idsFingerprint;
    RankLocation location;
  };
  const Joined me{spec.nranks, spec.stores->size(), spec.stores->fingerprint(), thisRankLocation()};
  Blob mine(sizeof me);
  std::memcpy(mine.data(), &me, sizeof me);
  std::vector<Blob> all;
  TRIB_RETURN_IF_ERROR(boot.allGather(mine, &all).prefix("communicator init: "));
  out->assign(spec.nranks, RankLocation{});
  for (int r = 0; r < spec.nranks; ++r) {
    Joined theirs;
    if (all[r].size() != sizeof theirs)
      return errorf(tribRemoteError, "communicator init: rank %d sent a malformed join (%zu bytes)", r,
                    all[r].size());
    std::memcpy(&theirs, all[r].data(), sizeof theirs);
    if (theirs.nranks != me.nranks || theirs.nIds != me.nIds || theirs.idsFingerprint != me.idsFingerprint) {
      return errorf(
          tribInvalidUsage,
          "communicator init: rank %d was given nranks=%d and %d ids (fingerprint %016llx) but rank "
          "%d nranks=%d and %d ids (fingerprint %016llx): every rank must pass the same nranks and "
          "the same ids in the same order",
          spec.rank, me.nranks, me.nIds, static_cast<unsigned long long>(me.idsFingerprint), r, theirs.nranks,
          theirs.nIds, static_cast<unsigned long long>(theirs.idsFingerprint));
    }
    (*out)[r] = theirs.location;
  }
  return Status::Ok();
}

// Where each rank lives, for the planner: its host (in order of the hosts' first ranks) and its
// rank among that host's ranks.
RankPlacement placementOf(const std::vector<RankLocation>& ids, int* hosts) {
  RankPlacement placement;
  std::vector<const RankLocation*> first;  // each host's first rank
  std::vector<int> ranksOn;                // so far, per host
  for (const RankLocation& loc : ids) {
    int host = 0;
    while (host < static_cast<int>(first.size()) && !sameHost(*first[host], loc)) ++host;
    if (host == static_cast<int>(first.size())) first.push_back(&loc), ranksOn.push_back(0);
    placement.hostOfRank.push_back(host);
    placement.localRankOf.push_back(ranksOn[host]++);
  }
  *hosts = static_cast<int>(first.size());
  return placement;
}

}  // namespace

Status createComm(const CommSpec& spec, tribComm** out) {
  *out = nullptr;
  const int rank = spec.rank, nranks = spec.nranks;
  const CommConfig& config = spec.config;
  std::shared_ptr<Bootstrap> boot;
  OobAllGather oob;
  // The exchange's waits end at once when a non-blocking init is aborted; the communicator keeps
  // the plain store (spec.store) for its splits.
  const std::shared_ptr<Store> store = cancellable(spec.store, spec.cancelled);
  if (spec.stores) {
    boot = std::make_shared<Bootstrap>(spec.stores, spec.storeOf, rank, spec.prefix,
                                       static_cast<int>(config.timeout.count()));
  } else if (store) {
    boot = std::make_shared<Bootstrap>(store, rank, nranks, spec.prefix,
                                       static_cast<int>(config.timeout.count()));
  }
  if (boot) oob = boot->oobAllGather();
  // 1. Where does every rank live, and with several hosts, what is every host's topology?
  std::vector<RankLocation> ids = spec.locations;
  std::vector<std::string> hostDumps = spec.hostDumps;
  int hosts = 0;
  RankPlacement placement;
  if (ids.empty()) {
    if (!boot)
      return errorf(tribInternalError, "communicator init: neither the ranks' locations nor a store");
    TRIB_RETURN_IF_ERROR(spec.stores ? exchangeLocationsOverStores(*boot, spec, &ids)
                                     : exchangeLocations(*store, spec, &ids));
    placement = placementOf(ids, &hosts);
    if (hosts > 1) {
      std::string dump;
      TRIB_RETURN_IF_ERROR(localTopologyDump(&dump));
      std::vector<Blob> dumps;
      TRIB_RETURN_IF_ERROR(
          boot->allGather(Blob(dump.begin(), dump.end()), &dumps).prefix("exchanging topologies: "));
      hostDumps.resize(hosts);
      for (int r = nranks - 1; r >= 0; --r)
        hostDumps[placement.hostOfRank[r]].assign(dumps[r].begin(), dumps[r].end());
    }
  } else {
    placement = placementOf(ids, &hosts);
    if (hosts > 1 && hostDumps.size() != static_cast<size_t>(hosts))
      return errorf(tribInternalError, "communicator init: %d hosts but %zu topologies", hosts,
                    hostDumps.size());
  }
  if (static_cast<int>(ids.size()) != nranks)
    return errorf(tribInternalError, "communicator init: %zu locations for %d ranks", ids.size(), nranks);

  Backoff::noteRanksOnThisHost(static_cast<int>(
      std::count(placement.hostOfRank.begin(), placement.hostOfRank.end(), placement.hostOfRank[rank])));
  auto comm = std::make_unique<Communicator>(rank, nranks, spec.commId, config);
  comm->planner = spec.planner;
  if (!comm->planner) TRIB_RETURN_IF_ERROR(makePlanner(placement, hostDumps, config, &comm->planner));
  if (spec.server) {  // over several stores, the server of this rank's own store
    auto sameStore = [&](int r) { return !spec.stores || spec.storeOf[r] == spec.storeOf[rank]; };
    int here = 0;
    for (int r = 0; r < nranks; ++r) here += sameProcess(ids[r], ids[rank]) && sameStore(r);
    noteServerTaken(spec.stores ? spec.stores->root(spec.storeOf[rank]).commId : spec.commId, here);
  }
  // 2. Which transports? The registry decides every pair of ranks from the shared locations, so
  // every rank creates the same (collective) transports.
  TRIB_RETURN_IF_ERROR(connectTransports(comm.get(), ids, oob));
  attachSwitch(comm.get(), oob);  // before finalize: it agrees over the bootstrap
  // 3. The store's host keeps serving until every rank is done with it.
  if (boot) TRIB_RETURN_IF_ERROR(boot->finalize(spec.server != nullptr).prefix("communicator init: "));
  comm->origin.store = spec.store;
  comm->origin.stores = spec.stores;
  comm->origin.storeOf = spec.storeOf;
  comm->origin.storeServer = spec.server;
  comm->origin.prefix = spec.prefix;
  comm->origin.locations = std::move(ids);
  comm->origin.hostOfRank = std::move(placement.hostOfRank);
  if (hosts > 1) comm->origin.hostDumps = std::move(hostDumps);
  TRIB_INFO("init", "comm %016llx rank %d/%d ready (transports %s)",
            static_cast<unsigned long long>(spec.commId), rank, nranks, comm->transportSummary.c_str());
  *out = new tribComm(std::move(comm));
  return Status::Ok();
}

Status commInitRank(int nranks, const tribUniqueId& uid, int rank, const tribConfig_t* cfg, tribComm** out,
                    const CancelFlag& cancelled) {
  UniqueIdInfo info;
  TRIB_RETURN_IF_ERROR(parseUniqueId(uid, &info));
  CommConfig config;
  TRIB_RETURN_IF_ERROR(resolveConfig(cfg, &config));
  StoreServerHandle server = localServer(info.commId);
  std::unique_ptr<TcpStore> tcp;
  TRIB_RETURN_IF_ERROR(TcpStore::connect(info.storeAddr, info.jobKey,
                                         static_cast<int>(config.timeout.count()), &tcp,
                                         storeproto::kDefaultMaxMessage, cancelled.get())
                           .prefix("communicator init: cannot reach the unique id's store: "));
  CommSpec spec;
  spec.rank = rank;
  spec.nranks = nranks;
  spec.commId = info.commId;
  spec.config = std::move(config);
  spec.store = std::shared_ptr<Store>(std::move(tcp));
  spec.prefix = hex64(info.commId);
  spec.server = std::move(server);
  spec.cancelled = cancelled;
  return createComm(spec, out);
}

Status commInitRankScalable(int nranks, int nIds, const tribUniqueId* ids, int rank, const tribConfig_t* cfg,
                            tribComm** out, const CancelFlag& cancelled) {
  if (nIds == 1) return commInitRank(nranks, ids[0], rank, cfg, out, cancelled);  // one store: the plain path
  std::vector<StoreGroups::Root> roots(nIds);
  for (int i = 0; i < nIds; ++i) {
    UniqueIdInfo info;
    TRIB_RETURN_IF_ERROR(parseUniqueId(ids[i], &info).prefix(strprintf("communicator init: ids[%d]: ", i)));
    for (int j = 0; j < i; ++j) {
      if (roots[j].commId == info.commId)
        return errorf(tribInvalidArgument,
                      "communicator init: ids[%d] and ids[%d] are the same unique id: each store must be "
                      "another tribGetUniqueId's",
                      j, i);
    }
    roots[i] = {info.storeAddr, info.jobKey, info.commId};
  }
  CommConfig config;
  TRIB_RETURN_IF_ERROR(resolveConfig(cfg, &config));
  CommSpec spec;
  spec.rank = rank;
  spec.nranks = nranks;
  spec.commId = roots[0].commId;
  spec.prefix = hex64(roots[0].commId);
  for (int r = 0; r < nranks; ++r) spec.storeOf.push_back(storeOfRank(r, nranks, nIds));
  spec.server = localServer(roots[spec.storeOf[rank]].commId);
  spec.stores =
      std::make_shared<StoreGroups>(std::move(roots), static_cast<int>(config.timeout.count()), cancelled);
  spec.cancelled = cancelled;
  spec.config = std::move(config);
  std::shared_ptr<Store> own;  // this rank's own store first, so an unreachable one is named at once
  TRIB_RETURN_IF_ERROR(spec.stores->store(spec.storeOf[rank], &own).prefix("communicator init: "));
  return createComm(spec, out);
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
  CommSpec spec;
  spec.rank = launch.rank;
  spec.nranks = launch.nranks;
  spec.commId = id;
  spec.config = std::move(config);
  spec.store = std::move(store);
  spec.prefix = "env/" + launch.jobId;
  spec.server = std::move(server);
  return createComm(spec, out);
}

}  // namespace trib
