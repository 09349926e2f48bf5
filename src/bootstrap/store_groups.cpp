#include "bootstrap/store_groups.hpp"

namespace trib {

StoreGroups::StoreGroups(std::vector<Root> roots, int timeoutMs, CancelFlag cancelled)
    : roots_(std::move(roots)),
      timeoutMs_(timeoutMs),
      cancelled_(std::move(cancelled)),
      stores_(roots_.size()) {}

std::string StoreGroups::name(int s) const {
  return strprintf("ids[%d] (store at %s)", s, roots_[s].address.c_str());
}

uint64_t StoreGroups::fingerprint() const {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const Root& r : roots_)
    for (int b = 0; b < 64; b += 8) h = (h ^ ((r.commId >> b) & 0xff)) * 0x100000001b3ull;
  return h;
}

Status StoreGroups::store(int s, std::shared_ptr<Store>* out) {
  // One lock for all: connecting happens once per store and rank, a few times per communicator.
  std::lock_guard<std::mutex> lock(mu_);
  if (!stores_[s]) {
    std::unique_ptr<TcpStore> tcp;
    TRIB_RETURN_IF_ERROR(TcpStore::connect(roots_[s].address, roots_[s].jobKey, timeoutMs_, &tcp,
                                           storeproto::kDefaultMaxMessage, cancelled_.get())
                             .prefix("cannot reach " + name(s) + ": "));
    stores_[s] = std::move(tcp);
  }
  *out = cancellable(stores_[s], cancelled_);
  return Status::Ok();
}

}  // namespace trib
