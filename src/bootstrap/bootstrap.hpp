// Bootstrap: the few collectives a communicator needs while it connects (allGather, barrier,
// broadcast), built on any Store, plus the OobAllGather adapter handed to transports.
//
// Message cost through a TCP store for n ranks and blobs of B bytes (docs/BOOTSTRAP.md):
//   allGather: each rank sends 1 SET (B) and 1 multi-get of n keys, answered by 1 reply of n*B:
//              2n requests and 2n replies in all; the server sends n*n*B bytes (no O(n^2) messages).
//   barrier:   each rank 1 ADD and 1 wait on one key (the last arriver: a REMOVE and a SET instead
//              of the wait): 2n+1 requests.
//   finalize:  each rank 1 SET; the store's host 1 wait on n keys.
//   broadcast: the root 1 SET, every other rank 1 get: n requests, (n-1)*B bytes out.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/store.hpp"
#include "transports/transport.hpp"

namespace trib {

// "hostname/boot-id": equal exactly for processes on the same running kernel (shared memory works).
std::string hostIdentity();

class Bootstrap {
 public:
  // `prefix` namespaces this communicator's keys in a shared store (e.g. the comm id in hex).
  // timeoutMs bounds every call.
  Bootstrap(std::shared_ptr<Store> store, int rank, int nranks, std::string prefix, int timeoutMs);

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  Store& store() { return *store_; }

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
  std::shared_ptr<Store> store_;
  int rank_, nranks_;
  std::string prefix_;
  int timeoutMs_;
  uint64_t seq_ = 0;  // every call advances it identically on all ranks
  std::string lastAllGatherKey_;
};

}  // namespace trib
