#include "transports/registry.hpp"

#include <unistd.h>

#include <cstring>
#include <map>
#include <tuple>

#include "common/process.hpp"
#include "common/random.hpp"
#include "transports/loopback/loopback.hpp"
#include "transports/nvlink/nvlink_transport.hpp"
#include "transports/shm/shm_transport.hpp"
#include "transports/switch/switch_client.hpp"
#ifdef TRIB_HAVE_UCX
#include "transports/ucx/ucx_transport.hpp"
#endif
#ifdef TRIB_HAVE_VERBS
#include "transports/verbs/verbs_transport.hpp"
#endif

namespace trib {

namespace {

uint64_t processToken() {
  static const uint64_t token = randomId64();
  return token;
}

// A transport this build lacks, listed so that TRIB_TRANSPORT and trib-info can say why.
[[maybe_unused]] TransportDescriptor notBuilt(const char* name, const char* reaches, const char* why,
                                              int priority,
                                              bool (*canConnect)(const RankLocation&, const RankLocation&)) {
  TransportDescriptor d{};
  d.name = name;
  d.reaches = reaches;
  d.notBuilt = why;
  d.priority = priority;
  d.needsExchange = true;
  d.canConnect = canConnect;
  return d;
}

#ifndef TRIB_HAVE_UCX
bool anyPair(const RankLocation&, const RankLocation&) { return true; }
TransportDescriptor ucxNotBuilt() {
  return notBuilt("ucx", "ranks on other hosts",
                  "libucx-dev was not found at build time; install it and rebuild", 100, anyPair);
}
#endif

#ifndef TRIB_HAVE_VERBS
bool bothRdma(const RankLocation& a, const RankLocation& b) { return a.flags & b.flags & kLocationRdma; }
TransportDescriptor verbsNotBuilt() {
  return notBuilt("verbs", "ranks on other hosts, where every rank has an active RDMA port",
                  "libibverbs-dev was not found at build time; install it and rebuild", 150, bothRdma);
}
#endif

}  // namespace

// Not cached: a forked child must see its own pid (the token alone is inherited).
RankLocation thisRankLocation() {
  RankLocation loc{};
  char name[40] = {};
  gethostname(name, sizeof name - 1);
  std::snprintf(loc.host, sizeof loc.host, "%s/%.20s", name, bootId().c_str());
  loc.process = processToken();
  loc.pid = static_cast<int32_t>(getpid());
  loc.flags = nvlink::locationFlags();
#ifdef TRIB_HAVE_VERBS
  if (verbsPortAvailable()) loc.flags |= kLocationRdma;
#endif
  return loc;
}

bool sameHost(const RankLocation& a, const RankLocation& b) {
  return std::strncmp(a.host, b.host, sizeof a.host) == 0;
}

bool sameProcess(const RankLocation& a, const RankLocation& b) {
  return a.process == b.process && a.pid == b.pid && sameHost(a, b);
}

std::string describeLocation(const RankLocation& loc) {
  std::string host(loc.host, strnlen(loc.host, sizeof loc.host));
  if (size_t slash = host.find('/'); slash != std::string::npos) host.resize(slash);  // drop the boot id
  return "host " + host + ", pid " + std::to_string(loc.pid);
}

std::string memoryKindSetNames(MemoryKindSet set) {
  std::string out;
  for (int k = 0; k < kNumMemoryKinds; ++k) {
    if (set & memoryKindBit(static_cast<MemoryKind>(k)))
      out += (out.empty() ? "" : ", ") + std::string(memoryKindName(static_cast<MemoryKind>(k)));
  }
  return out.empty() ? "none" : out;
}

MemoryReach transportMemoryReach(const TransportCaps& caps, const TransportConnectArgs& args) {
  MemoryKindSet drop = 0;
  if (caps.probed && !(caps.probe && caps.probe(args))) drop = caps.probed;
  MemoryReach r;
  r.reads = caps.reads & ~drop;
  r.writes = caps.writes & ~drop;
  r.reduces = caps.reduces & r.writes;
  return r;
}

const std::vector<TransportDescriptor>& transportRegistry() {
  static const std::vector<TransportDescriptor> table = [] {
    std::vector<TransportDescriptor> t = {
        loopbackTransportDescriptor(),
        shmTransportDescriptor(),
#ifdef TRIB_HAVE_UCX
        ucxTransportDescriptor(),
#else
        ucxNotBuilt(),
#endif
#ifdef TRIB_HAVE_VERBS
        verbsTransportDescriptor(),
#else
        verbsNotBuilt(),
#endif
    };
    std::stable_sort(t.begin(), t.end(), [](const TransportDescriptor& a, const TransportDescriptor& b) {
      return a.priority > b.priority;
    });
    return t;
  }();
  return table;
}

const TransportDescriptor* findTransport(const std::string& name) {
  for (const TransportDescriptor& d : transportRegistry()) {
    if (name == d.name) return &d;
  }
  return nullptr;
}

Status chooseTransports(const std::vector<RankLocation>& locations, int rank, const std::string& forced,
                        bool haveExchange, TransportChoice* out) {
  const auto& registry = transportRegistry();
  const int nranks = static_cast<int>(locations.size());
  if (rank < 0 || rank >= nranks)
    return errorf(tribInvalidArgument, "rank %d out of range for %d ranks", rank, nranks);
  auto usable = [&](const TransportDescriptor& d) {
    return !d.notBuilt && (haveExchange || !d.needsExchange);
  };

  const TransportDescriptor* force = nullptr;
  if (!forced.empty()) {
    force = findTransport(forced);
    if (!force) {
      std::string names;
      for (const TransportDescriptor& d : registry)
        names += (names.empty() ? "" : ", ") + std::string(d.name);
      return errorf(tribInvalidArgument, "TRIB_TRANSPORT='%s' is not one of %s", forced.c_str(),
                    names.c_str());
    }
    if (force->notBuilt) {
      return errorf(tribNotSupported,
                    "TRIB_TRANSPORT=%s was requested, but this build has no %s transport (%s)", force->name,
                    force->name, force->notBuilt);
    }
    if (!usable(*force)) {
      return errorf(tribInvalidArgument,
                    "TRIB_TRANSPORT=%s cannot connect this communicator: it connects through an exchange at "
                    "init, and this communicator's ranks were created together in one process without one "
                    "(tribCommInitAll, or a split of such a communicator); leave TRIB_TRANSPORT unset",
                    force->name);
    }
  }

  // The choice depends only on the two locations: decide it once per pair of distinct locations
  // (one per process, not per rank), in the same order on every rank.
  std::map<std::tuple<std::string, uint64_t, int32_t>, int> index;
  std::vector<int> classOf(nranks), firstRank;
  for (int r = 0; r < nranks; ++r) {
    const RankLocation& l = locations[r];
    auto key = std::make_tuple(std::string(l.host, strnlen(l.host, sizeof l.host)), l.process, l.pid);
    auto [it, added] = index.emplace(key, static_cast<int>(firstRank.size()));
    if (added) firstRank.push_back(r);
    classOf[r] = it->second;
  }
  const int k = static_cast<int>(firstRank.size());
  std::vector<bool> used(registry.size(), false);
  // The first choice for a pair: the highest-priority usable transport that can connect it.
  std::vector<int> usableIndex;
  for (size_t t = 0; t < registry.size(); ++t) {
    if (usable(registry[t])) usableIndex.push_back(static_cast<int>(t));
  }
  auto firstChoice = [&](int a, int b) -> int {
    for (int t : usableIndex) {
      if (registry[t].canConnect(locations[a], locations[b])) return t;
    }
    return -1;
  };
  auto noneConnects = [&](int a, int b) {
    std::string could;
    for (const TransportDescriptor& d : registry) {
      if (d.notBuilt && d.canConnect(locations[a], locations[b]))
        could += strprintf("; %s could, but %s", d.name, d.notBuilt);
    }
    return errorf(tribNotSupported,
                  "communicator init: no transport of this build connects rank %d (%s) with rank %d (%s)%s",
                  a, describeLocation(locations[a]).c_str(), b, describeLocation(locations[b]).c_str(),
                  could.c_str());
  };
  std::vector<int> classSize(k, 0);
  for (int r = 0; r < nranks; ++r) ++classSize[classOf[r]];
  const int forcedIndex = force ? static_cast<int>(force - registry.data()) : -1;
  auto cannotForce = [&](int a, int b) {
    return errorf(tribInvalidArgument,
                  "TRIB_TRANSPORT=%s cannot connect rank %d (%s) with rank %d (%s): it reaches %s",
                  force->name, a, describeLocation(locations[a]).c_str(), b,
                  describeLocation(locations[b]).c_str(), force->reaches);
  };
  std::vector<int> rowChoice(k, -1);  // from this rank's location to each location
  const int me = classOf[rank];
  for (int i = 0; i < k; ++i) {
    for (int j = i; j < k; ++j) {  // canConnect is symmetric: each unordered pair once
      const int a = firstRank[i], b = firstRank[j];
      if (i == j) {
        // A rank's messages to itself take the first choice even when a transport is forced: they
        // never leave the process. Other ranks of its location take the forced one.
        int self = firstChoice(a, a);
        if (self < 0) return noneConnects(a, a);
        used[self] = true;
        if (force && classSize[i] > 1) {
          if (!force->canConnect(locations[a], locations[a])) {
            int other = a + 1;
            while (classOf[other] != i) ++other;
            return cannotForce(a, other);
          }
          used[forcedIndex] = true;
        }
        if (i == me) rowChoice[j] = force ? forcedIndex : self;
        continue;
      }
      int t = forcedIndex;
      if (force) {
        if (!force->canConnect(locations[a], locations[b])) return cannotForce(a, b);
      } else {
        t = firstChoice(a, b);
        if (t < 0) return noneConnects(a, b);
      }
      used[t] = true;
      if (i == me) rowChoice[j] = t;
      if (j == me) rowChoice[i] = t;
    }
  }
  TransportChoice choice;
  choice.peer.resize(nranks);
  for (int p = 0; p < nranks; ++p)
    choice.peer[p] = &registry[p == rank ? firstChoice(rank, rank) : rowChoice[classOf[p]]];
  for (size_t t = 0; t < registry.size(); ++t) {
    if (used[t]) choice.used.push_back(&registry[t]);
  }
  *out = std::move(choice);
  return Status::Ok();
}

const std::vector<TransportDescriptor>& windowProviderRegistry() {
  static const std::vector<TransportDescriptor> table = {nvlinkTransportDescriptor()};
  return table;
}

std::vector<const TransportDescriptor*> chooseWindowProviders(const std::vector<RankLocation>& locations,
                                                              bool haveExchange) {
  std::vector<const TransportDescriptor*> out;
  if (locations.size() < 2) return out;
  for (const TransportDescriptor& d : windowProviderRegistry()) {
    if (d.notBuilt || (d.needsExchange && !haveExchange)) continue;
    bool all = true;
    for (size_t r = 1; r < locations.size() && all; ++r) all = d.canConnect(locations[0], locations[r]);
    if (all) out.push_back(&d);
  }
  return out;
}

const std::vector<OffloadDescriptor>& offloadRegistry() {
  static const std::vector<OffloadDescriptor> table = {switchOffloadDescriptor()};
  return table;
}

const OffloadDescriptor* aggregationOffload() {
  for (const OffloadDescriptor& d : offloadRegistry()) {
    if (!d.notBuilt) return &d;
  }
  return nullptr;
}

}  // namespace trib
