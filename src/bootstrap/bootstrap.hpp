// Bootstrap: the few collectives a communicator needs while it connects (allGather, barrier,
// broadcast), built on any Store, plus the OobAllGather adapter handed to transports.
//
// Message cost through a TCP store for n ranks and blobs of B bytes (docs/BOOTSTRAP.md):
//   allGather: each rank sends 1 SET (B) and 1 range wait for n keys, answered by 1 reply of n*B:
//              2n requests and 2n replies in all; the server sends n*n*B bytes (no O(n^2) messages).
//   barrier:   each rank 1 ADD and 1 wait on one key (the last arriver: a REMOVE and a SET instead
//              of the wait): 2n+1 requests.
//   finalize:  each rank 1 SET; the store's host 1 wait on n keys.
//   broadcast: the root 1 SET, every other rank 1 get: n requests, (n-1)*B bytes out.
// Over k stores (StoreGroups) an allGather costs each store n/k SETs and multi-gets, its leader's
// multi-get of n/k keys and k SETs of group blobs (one from each group's leader): the store sends
// (n/k) * n * B bytes.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/store.hpp"
#include "bootstrap/store_groups.hpp"
#include "transports/transport.hpp"

namespace trib {

// "hostname/boot-id": equal exactly for processes on the same running kernel (shared memory works).
std::string hostIdentity();

// After a wait on `keys` timed out: how many are still missing and the first eight of them,
// named by name(i) ("3, 7 and 12 more").
struct MissingKeys {
  int count = 0;
  std::string list;
};
MissingKeys missingKeys(Store& store, const std::vector<std::string>& keys,
                        const std::function<std::string(size_t)>& name);
// The values of the keys prefix + decimal(i), i in `indices`, in that order: one range wait when
// the indices are consecutive (the server then reads no key names and builds one reply for all
// identical waiters), else a multi-get of the keys.
Status multiGetIndexed(Store& store, const std::string& prefix, const std::vector<int>& indices,
                       std::vector<Blob>* values, int timeoutMs);

class Bootstrap {
 public:
  // `prefix` namespaces this communicator's keys in a shared store (e.g. the comm id in hex).
  // timeoutMs bounds every call.
  Bootstrap(std::shared_ptr<Store> store, int rank, int nranks, std::string prefix, int timeoutMs);
  // Over several stores: rank r uses store storeOf[r] of `stores` (its own store), and the first
  // rank of each store (its leader) also writes to every other store in use. An allGather is then
  // a gather per store by its leader, who publishes the store's blobs as one group blob to every
  // store, and one multi-get of the group blobs by every rank from its own store.
  Bootstrap(std::shared_ptr<StoreGroups> stores, std::vector<int> storeOf, int rank, std::string prefix,
            int timeoutMs);

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  Store& store() { return *store_; }  // the single store (not over several)

  // all[i] = rank i's blob, in rank order (all[rank] == mine).
  Status allGather(const Blob& mine, std::vector<Blob>* all);
  Status barrier();
  // The root's *blob is delivered to every rank's *blob.
  Status broadcast(int root, Blob* blob);
  // For transports' connect-time exchange.
  OobAllGather oobAllGather();
  // The ranks on this host (sorted, including this one), from an allGather of hostIdentity().
  Status sameHostRanks(std::vector<int>* ranks);
  // Leave: every rank calls it last. The rank whose process hosts the store server passes
  // hostsStore = true and returns once every rank has left, so the server outlives its last use.
  Status finalize(bool hostsStore);

 private:
  std::string key(const char* what, uint64_t seq) const;
  Status groupAllGather(const Blob& mine, std::vector<Blob>* all, const std::string& base);
  Status groupFinalize(bool hostsStore, const std::string& base);
  std::shared_ptr<Store> store_;
  int rank_, nranks_;
  std::string prefix_;
  int timeoutMs_;
  uint64_t seq_ = 0;  // every call advances it identically on all ranks
  std::string lastAllGatherKey_;
  // Over several stores (else empty): each rank's store, each store's ranks (its leader first),
  // the stores with ranks, and this rank's group blob key of the previous allGather (a leader's).
  std::shared_ptr<StoreGroups> stores_;
  std::vector<int> storeOf_;
  std::vector<std::vector<int>> members_;
  std::vector<int> usedStores_;
  std::string lastGroupKey_;
};

}  // namespace trib
