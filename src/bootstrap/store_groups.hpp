// Several root stores for one communicator (tribCommInitRankScalable): ranks are split evenly
// over the stores, so that no single store carries every rank's connection and every all-gather's
// n^2 bytes. The Bootstrap runs its exchanges over them (bootstrap.hpp, docs/BOOTSTRAP.md).
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bootstrap/cancellable_store.hpp"
#include "bootstrap/store.hpp"

namespace trib {

// The store of `rank` when `nranks` ranks are split evenly over `nstores` (consecutive ranks
// share a store; group sizes differ by at most one).
inline int storeOfRank(int rank, int nranks, int nstores) {
  return static_cast<int>(static_cast<int64_t>(rank) * nstores / nranks);
}

class StoreGroups {
 public:
  struct Root {
    std::string address;  // "ip:port" of the store server
    std::string jobKey;   // what that store expects
    uint64_t commId = 0;  // its unique id's
  };
  // `cancelled` (may be null): the stores handed out end their waits once it is set (a
  // non-blocking init's abort; bootstrap/cancellable_store.hpp).
  StoreGroups(std::vector<Root> roots, int timeoutMs, CancelFlag cancelled = nullptr);
  int size() const { return static_cast<int>(roots_.size()); }
  const Root& root(int s) const { return roots_[s]; }
  // "ids[s] (store at ip:port)", for error messages.
  std::string name(int s) const;
  // FNV-1a over the roots' comm ids in order: equal on ranks that were given the same ids.
  uint64_t fingerprint() const;
  // Store s, connected (and authenticated) on first use within the timeout, then shared by every
  // caller: a communicator and its splits use the same connections.
  Status store(int s, std::shared_ptr<Store>* out);

 private:
  std::vector<Root> roots_;
  int timeoutMs_;
  CancelFlag cancelled_;
  std::mutex mu_;
  std::vector<std::shared_ptr<Store>> stores_;
};

}  // namespace trib
