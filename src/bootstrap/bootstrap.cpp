#include "bootstrap/bootstrap.hpp"

#include <unistd.h>

#include <cstdio>

#include "common/process.hpp"

namespace trib {

Bootstrap::Bootstrap(std::shared_ptr<Store> store, int rank, int nranks, std::string prefix, int timeoutMs)
    : store_(std::move(store)),
      rank_(rank),
      nranks_(nranks),
      prefix_(std::move(prefix)),
      timeoutMs_(timeoutMs) {}

std::string Bootstrap::key(const char* what, uint64_t seq) const {
  return strprintf("%s/%s/%llu", prefix_.c_str(), what, static_cast<unsigned long long>(seq));
}

Status Bootstrap::allGather(const Blob& mine, std::vector<Blob>* all) {
  uint64_t seq = seq_++;
  std::string base = key("ag", seq);
  std::vector<std::string> keys(nranks_);
  for (int i = 0; i < nranks_; ++i) keys[i] = strprintf("%s/%d", base.c_str(), i);
  TRIB_RETURN_IF_ERROR(
      store_->set(keys[rank_], mine).prefix(strprintf("bootstrap allGather (rank %d): ", rank_)));
  Status st = store_->multiGet(keys, all, timeoutMs_);
  if (!st.ok())
    return st.prefix(strprintf(
        "bootstrap allGather #%llu (rank %d of %d): ", static_cast<unsigned long long>(seq), rank_, nranks_));
  // Every rank has now finished the previous allGather (it set this round's key after reading
  // the last one), so my key from that round can go: the store holds at most two rounds.
  if (!lastAllGatherKey_.empty()) (void)store_->remove(lastAllGatherKey_);
  lastAllGatherKey_ = keys[rank_];
  return Status::Ok();
}

Status Bootstrap::barrier() {
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
  TRIB_RETURN_IF_ERROR(
      store_->set(strprintf("%s/%d", base.c_str(), rank_), Blob{}).prefix("bootstrap finalize: "));
  if (!hostsStore) return Status::Ok();
  std::vector<std::string> keys(nranks_);
  for (int i = 0; i < nranks_; ++i) keys[i] = strprintf("%s/%d", base.c_str(), i);
  return store_->wait(keys, timeoutMs_).prefix("bootstrap finalize (ranks that never left): ");
}

OobAllGather Bootstrap::oobAllGather() {
  return [this](const std::vector<uint8_t>& mine, std::vector<std::vector<uint8_t>>& all) {
    return allGather(mine, &all);
  };
}

}  // namespace trib
