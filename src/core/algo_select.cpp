// Which algorithm runs a call: the TRIB_ALGO / config override, else a size-based default.
// (The topology-aware planner in src/plan replaces the default once it lands.)
#include <sstream>

#include "core/comm.hpp"
#include "core/switch_coll.hpp"

namespace trib {

namespace {

// Parses one TRIB_ALGO-style spec into an allow-list for collective `coll`.
// Grammar: "ring,tree" | "^ring" | "allreduce:rhd;broadcast:chain" (entries without a
// "coll:" prefix apply to every collective).
Status allowedAlgos(const std::string& spec, Coll coll, std::vector<bool>* allowed) {
  allowed->assign(kNumAlgos, true);
  if (spec.empty()) return Status::Ok();
  std::stringstream entries(spec);
  std::string entry;
  while (std::getline(entries, entry, ';')) {
    if (entry.empty()) continue;
    std::string list = entry;
    size_t colon = entry.find(':');
    if (colon != std::string::npos) {
      Coll c;
      std::string name = entry.substr(0, colon);
      if (!parseColl(name, &c)) {
        return errorf(tribInvalidArgument, "TRIB_ALGO: unknown collective '%s' in '%s'", name.c_str(),
                      spec.c_str());
      }
      if (c != coll) continue;
      list = entry.substr(colon + 1);
    }
    bool exclude = !list.empty() && list[0] == '^';
    if (exclude) list.erase(0, 1);
    std::vector<bool> named(kNumAlgos, false);
    std::stringstream names(list);
    std::string name;
    while (std::getline(names, name, ',')) {
      Algo a;
      if (!parseAlgo(name, &a)) {
        return errorf(
            tribInvalidArgument,
            "TRIB_ALGO: unknown algorithm '%s' in '%s' (known: ring, tree, rhd, direct, binomial, chain, "
            "hierarchical, switch)",
            name.c_str(), spec.c_str());
      }
      named[static_cast<int>(a)] = true;
    }
    for (int i = 0; i < kNumAlgos; ++i) (*allowed)[i] = exclude ? !named[i] : named[i];
  }
  return Status::Ok();
}

// Latency-bound sizes prefer logarithmic algorithms; bandwidth-bound ones prefer pipelines.
constexpr uint64_t kSmallBytes = 64 * 1024;

Algo defaultAlgo(const CollArgs& args, size_t elemSize) {
  uint64_t bytes = args.count * elemSize;
  switch (args.coll) {
    case Coll::AllReduce:
      return bytes <= kSmallBytes ? Algo::Rhd : Algo::Ring;
    case Coll::Broadcast:
    case Coll::Reduce:
      return bytes <= kSmallBytes ? Algo::Binomial : Algo::Chain;
    case Coll::AllGather:
    case Coll::ReduceScatter:
      return Algo::Ring;
    default:
      return Algo::Direct;
  }
}

}  // namespace

Status chooseAlgorithm(const tribComm* comm, const CollArgs& args, size_t elemSize, const AlgoInfo** out) {
  std::vector<bool> allowed;
  TRIB_RETURN_IF_ERROR(allowedAlgos(comm->config.algo, args.coll, &allowed));
  std::vector<const AlgoInfo*> candidates;
  std::string known;
  // The switch algorithm needs a usable aggregation switch; TRIB_ALGO=switch without one (missing,
  // refused, failed: already logged) falls back to the host default.
  const bool haveSwitch = switchUsable(comm);
  bool onlySwitch = allowed[static_cast<int>(Algo::Switch)] && !haveSwitch;
  for (const AlgoInfo* a : algorithmsFor(args.coll)) {
    known += (known.empty() ? "" : ", ") + std::string(algoName(a->algo));
    if (a->algo == Algo::Switch && !haveSwitch) continue;
    if (allowed[static_cast<int>(a->algo)] && a->supports(args)) {
      candidates.push_back(a);
      onlySwitch = false;
    }
  }
  if (onlySwitch) {
    for (const AlgoInfo* a : algorithmsFor(args.coll)) {
      if (a->algo != Algo::Switch && a->supports(args)) candidates.push_back(a);
    }
  }
  if (candidates.empty()) {
    return errorf(
        tribInvalidArgument, "no allowed algorithm supports %s on %d ranks (TRIB_ALGO='%s'; %s has: %s)",
        collName(args.coll), args.nranks, comm->config.algo.c_str(), collName(args.coll), known.c_str());
  }
  Algo preferred = haveSwitch && args.coll == Coll::AllReduce ? Algo::Switch : defaultAlgo(args, elemSize);
  *out = candidates.front();
  for (const AlgoInfo* a : candidates) {
    if (a->algo == preferred) *out = a;
  }
  return Status::Ok();
}

}  // namespace trib
