#include "bootstrap/bootstrap.hpp"

#include <unistd.h>

#include <cstdio>

#include "bootstrap/net.hpp"
#include "common/process.hpp"

namespace trib {

Bootstrap::Bootstrap(std::shared_ptr<Store> store, int rank, int nranks, std::string prefix, int timeoutMs)
    : store_(std::move(store)),
      rank_(rank),
      nranks_(nranks),
      prefix_(std::move(prefix)),
      timeoutMs_(timeoutMs) {}

Bootstrap::Bootstrap(std::shared_ptr<StoreGroups> stores, std::vector<int> storeOf, int rank,
                     std::string prefix, int timeoutMs)
    : rank_(rank),
      nranks_(static_cast<int>(storeOf.size())),
      prefix_(std::move(prefix)),
      timeoutMs_(timeoutMs),
      stores_(std::move(stores)),
      storeOf_(std::move(storeOf)),
      members_(stores_->size()) {
  for (int r = 0; r < nranks_; ++r) members_[storeOf_[r]].push_back(r);
  for (int s = 0; s < stores_->size(); ++s)
    if (!members_[s].empty()) usedStores_.push_back(s);
}

MissingKeys missingKeys(Store& store, const std::vector<std::string>& keys,
                        const std::function<std::string(size_t)>& name) {
  MissingKeys m;
  for (size_t i = 0; i < keys.size(); ++i) {
    Blob ignored;
    if (store.get(keys[i], &ignored, 0).ok()) continue;
    if (++m.count <= 8) m.list += (m.list.empty() ? "" : ", ") + name(i);
  }
  if (m.count > 8) m.list += strprintf(" and %d more", m.count - 8);
  return m;
}

Status multiGetIndexed(Store& store, const std::string& prefix, const std::vector<int>& indices,
                       std::vector<Blob>* values, int timeoutMs) {
  bool consecutive = !indices.empty() && indices.front() >= 0;
  for (size_t i = 1; i < indices.size() && consecutive; ++i) consecutive = indices[i] == indices[i - 1] + 1;
  if (consecutive && storeproto::rangePrefixOk(prefix))
    return store.multiGetRange(prefix, static_cast<uint32_t>(indices.front()),
                               static_cast<uint32_t>(indices.size()), values, timeoutMs);
  std::vector<std::string> keys;
  for (int i : indices) keys.push_back(storeproto::rangeKey(prefix, static_cast<uint64_t>(i)));
  return store.multiGet(keys, values, timeoutMs);
}

std::string Bootstrap::key(const char* what, uint64_t seq) const {
  return strprintf("%s/%s/%llu", prefix_.c_str(), what, static_cast<unsigned long long>(seq));
}

Status Bootstrap::allGather(const Blob& mine, std::vector<Blob>* all) {
  uint64_t seq = seq_++;
  std::string base = key("ag", seq);
  if (stores_) {
    return groupAllGather(mine, all, base)
        .prefix(strprintf("bootstrap allGather #%llu (rank %d of %d, over %zu stores): ",
                          static_cast<unsigned long long>(seq), rank_, nranks_, usedStores_.size()));
  }
  std::vector<std::string> keys(nranks_);
  for (int i = 0; i < nranks_; ++i) keys[i] = strprintf("%s/%d", base.c_str(), i);
  TRIB_RETURN_IF_ERROR(
      store_->set(keys[rank_], mine).prefix(strprintf("bootstrap allGather (rank %d): ", rank_)));
  std::vector<int> everyRank(nranks_);
  for (int i = 0; i < nranks_; ++i) everyRank[i] = i;
  Status st = multiGetIndexed(*store_, base + "/", everyRank, all, timeoutMs_);
  if (!st.ok())
    return st.prefix(strprintf(
        "bootstrap allGather #%llu (rank %d of %d): ", static_cast<unsigned long long>(seq), rank_, nranks_));
  // Every rank has now finished the previous allGather (it set this round's key after reading
  // the last one), so my key from that round can go: the store holds at most two rounds.
  if (!lastAllGatherKey_.empty()) (void)store_->remove(lastAllGatherKey_);
  lastAllGatherKey_ = keys[rank_];
  return Status::Ok();
}

Status Bootstrap::groupAllGather(const Blob& mine, std::vector<Blob>* all, const std::string& base) {
  const auto deadline = net::deadlineAfter(timeoutMs_);  // bounds both waits together
  const int own = storeOf_[rank_];
  const std::vector<int>& group = members_[own];
  std::shared_ptr<Store> store;
  TRIB_RETURN_IF_ERROR(stores_->store(own, &store));
  auto memberKey = [&](int r) { return strprintf("%s/%d", base.c_str(), r); };
  auto groupKey = [&](int s) { return strprintf("%s/g%d", base.c_str(), s); };
  TRIB_RETURN_IF_ERROR(store->set(memberKey(rank_), mine));
  if (group.front() == rank_) {
    std::vector<std::string> keys;
    for (int r : group) keys.push_back(memberKey(r));
    std::vector<Blob> got;
    Status st = multiGetIndexed(*store, base + "/", group, &got, net::msLeft(deadline));
    if (st.code() == tribTimeout) {
      MissingKeys m = missingKeys(*store, keys, [&](size_t i) { return std::to_string(group[i]); });
      return errorf(tribTimeout,
                    "%d of the %zu ranks of %s did not arrive within %.1f s (missing: rank %s). Every rank "
                    "must pass the same nranks and ids",
                    m.count, group.size(), stores_->name(own).c_str(), timeoutMs_ / 1000.0, m.list.c_str());
    }
    TRIB_RETURN_IF_ERROR(st);
    net::Writer packed;  // the layout of a multi-get's reply, so decodeValues reads it
    packed.u32(static_cast<uint32_t>(got.size()));
    for (const Blob& b : got) packed.bytes(b.data(), b.size());
    for (int s : usedStores_) {
      std::shared_ptr<Store> to;
      TRIB_RETURN_IF_ERROR(stores_->store(s, &to));
      TRIB_RETURN_IF_ERROR(to->set(groupKey(own), packed.data()));
    }
  }
  std::vector<std::string> keys;
  for (int s : usedStores_) keys.push_back(groupKey(s));
  std::vector<Blob> groups;
  Status st = multiGetIndexed(*store, base + "/g", usedStores_, &groups, net::msLeft(deadline));
  if (st.code() == tribTimeout) {
    MissingKeys m = missingKeys(*store, keys, [&](size_t i) {
      const int s = usedStores_[i];
      return strprintf("%s, leader rank %d", stores_->name(s).c_str(), members_[s].front());
    });
    return errorf(tribTimeout,
                  "%d of %zu stores' groups did not arrive in %s within %.1f s (missing: %s). Every rank "
                  "must pass the same nranks and ids",
                  m.count, usedStores_.size(), stores_->name(own).c_str(), timeoutMs_ / 1000.0,
                  m.list.c_str());
  }
  TRIB_RETURN_IF_ERROR(st);
  all->assign(nranks_, Blob{});
  for (size_t i = 0; i < usedStores_.size(); ++i) {
    const std::vector<int>& ranks = members_[usedStores_[i]];
    std::vector<Blob> blobs;
    TRIB_RETURN_IF_ERROR(storeproto::decodeValues(
        groups[i], ranks.size(),
        strprintf("%s (leader rank %d)", stores_->name(usedStores_[i]).c_str(), ranks.front()), &blobs));
    for (size_t j = 0; j < ranks.size(); ++j) (*all)[ranks[j]] = std::move(blobs[j]);
  }
  // Every rank has now set its key of this round, so it has read every blob of the previous
  // round: the store keeps at most two rounds, as over one store.
  if (!lastAllGatherKey_.empty()) (void)store->remove(lastAllGatherKey_);
  lastAllGatherKey_ = memberKey(rank_);
  if (group.front() == rank_) {
    for (int s : usedStores_) {
      std::shared_ptr<Store> to;
      if (!lastGroupKey_.empty() && stores_->store(s, &to).ok()) (void)to->remove(lastGroupKey_);
    }
    lastGroupKey_ = groupKey(own);
  }
  return Status::Ok();
}

Status Bootstrap::barrier() {
  if (stores_) {  // rare at init (nothing there calls it): an allGather of nothing does
    std::vector<Blob> ignored;
    return allGather(Blob{}, &ignored).prefix("bootstrap barrier: ");
  }
  uint64_t seq = seq_++;
  std::string counter = key("bar", seq), done = counter + "/done";
  int64_t arrived = 0;
  TRIB_RETURN_IF_ERROR(store_->add(counter, 1, &arrived).prefix("bootstrap barrier: "));
  if (arrived == nranks_) {
    // The last arriver releases the others and needs no reply of its own: the store's host may
    // leave as soon as it is released.
    (void)store_->remove(counter);
    return store_->set(done, Blob{1}).prefix("bootstrap barrier: ");
  }
  Status st = store_->wait({done}, timeoutMs_);
  if (!st.ok())
    return st.prefix(strprintf("bootstrap barrier (rank %d of %d; %lld had arrived when this rank did): ",
                               rank_, nranks_, static_cast<long long>(arrived)));
  return Status::Ok();
}

Status Bootstrap::broadcast(int root, Blob* blob) {
  if (root < 0 || root >= nranks_)
    return errorf(tribInvalidArgument, "bootstrap broadcast: root %d not in [0, %d)", root, nranks_);
  if (stores_) {  // over several stores, through an allGather (unused at init)
    std::vector<Blob> all;
    TRIB_RETURN_IF_ERROR(allGather(rank_ == root ? *blob : Blob{}, &all).prefix("bootstrap broadcast: "));
    *blob = std::move(all[root]);
    return Status::Ok();
  }
  uint64_t seq = seq_++;
  std::string k = key("bc", seq);
  if (rank_ == root) return store_->set(k, *blob).prefix("bootstrap broadcast: ");
  Status st = store_->get(k, blob, timeoutMs_);
  if (!st.ok()) return st.prefix(strprintf("bootstrap broadcast from root %d (rank %d): ", root, rank_));
  return Status::Ok();
}

std::string hostIdentity() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return std::string(host) + "/" + bootId();
}

Status Bootstrap::sameHostRanks(std::vector<int>* ranks) {
  std::string me = hostIdentity();
  std::vector<Blob> all;
  TRIB_RETURN_IF_ERROR(allGather(Blob(me.begin(), me.end()), &all).prefix("finding ranks on this host: "));
  ranks->clear();
  for (int i = 0; i < nranks_; ++i)
    if (std::string(all[i].begin(), all[i].end()) == me) ranks->push_back(i);
  return Status::Ok();
}

Status Bootstrap::finalize(bool hostsStore) {
  std::string base = key("fin", seq_++);  // a fresh round each call, like every other operation
  if (stores_) return groupFinalize(hostsStore, base).prefix("bootstrap finalize: ");
  TRIB_RETURN_IF_ERROR(
      store_->set(strprintf("%s/%d", base.c_str(), rank_), Blob{}).prefix("bootstrap finalize: "));
  if (!hostsStore) return Status::Ok();
  std::vector<std::string> keys(nranks_);
  for (int i = 0; i < nranks_; ++i) keys[i] = strprintf("%s/%d", base.c_str(), i);
  return store_->wait(keys, timeoutMs_).prefix("bootstrap finalize (ranks that never left): ");
}

// Every rank leaves its own store, and a leader also every store it wrote to, each as its last
// request there; a store's host waits for all of them, so the store outlives its last use.
Status Bootstrap::groupFinalize(bool hostsStore, const std::string& base) {
  const std::string mine = strprintf("%s/%d", base.c_str(), rank_);
  const int own = storeOf_[rank_];
  const bool leader = members_[own].front() == rank_;
  for (int s : usedStores_) {
    if (s != own && !leader) continue;
    std::shared_ptr<Store> store;
    TRIB_RETURN_IF_ERROR(stores_->store(s, &store));
    TRIB_RETURN_IF_ERROR(store->set(mine, Blob{}));
  }
  if (!hostsStore) return Status::Ok();
  std::vector<int> users = members_[own];
  for (int s : usedStores_)
    if (s != own) users.push_back(members_[s].front());
  std::vector<std::string> keys;
  for (int r : users) keys.push_back(strprintf("%s/%d", base.c_str(), r));
  std::shared_ptr<Store> store;
  TRIB_RETURN_IF_ERROR(stores_->store(own, &store));
  Status st = store->wait(keys, timeoutMs_);
  if (st.code() != tribTimeout) return st;
  MissingKeys m = missingKeys(*store, keys, [&](size_t i) { return std::to_string(users[i]); });
  return errorf(tribTimeout, "%d ranks never left %s within %.1f s (missing: rank %s)", m.count,
                stores_->name(own).c_str(), timeoutMs_ / 1000.0, m.list.c_str());
}

OobAllGather Bootstrap::oobAllGather() {
  return [this](const std::vector<uint8_t>& mine, std::vector<std::vector<uint8_t>>& all) {
    return allGather(mine, &all);
  };
}

}  // namespace trib
