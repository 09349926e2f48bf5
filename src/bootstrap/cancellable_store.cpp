#include "bootstrap/cancellable_store.hpp"

#include <algorithm>
#include <chrono>

namespace trib {

Status CancellableStore::checkCancelled(const char* what) const {
  if (!cancelled_->load(std::memory_order_acquire)) return Status::Ok();
  return errorf(tribAborted,
                "the communicator was aborted (tribCommAbort) during its init, in the store's %s", what);
}

template <typename Wait>
Status CancellableStore::sliced(const char* what, int timeoutMs, Wait wait) const {
  using Clock = std::chrono::steady_clock;
  if (timeoutMs < 0) return wait(timeoutMs);  // the store's own error for it
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(timeoutMs);
  for (;;) {
    TRIB_RETURN_IF_ERROR(checkCancelled(what));
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    const int slice = static_cast<int>(std::clamp<int64_t>(left, 0, kSliceMs));
    Status st = wait(slice);
    if (st.code() != tribTimeout) return st;
    // A slice that timed out with time left is not the caller's timeout: wait on. The last one's
    // message names only its slice, so say how long the wait was (a FileStore gives the ms).
    if (slice >= left)
      return errorf(tribTimeout, "%s; waited %d ms in all, in slices of at most %d ms", st.message().c_str(),
                    timeoutMs, kSliceMs);
  }
}

Status CancellableStore::set(const std::string& key, const Blob& value) {
  TRIB_RETURN_IF_ERROR(checkCancelled("set"));
  return inner_->set(key, value);
}
Status CancellableStore::add(const std::string& key, int64_t delta, int64_t* result) {
  TRIB_RETURN_IF_ERROR(checkCancelled("add"));
  return inner_->add(key, delta, result);
}
Status CancellableStore::remove(const std::string& key, bool* existed) {
  TRIB_RETURN_IF_ERROR(checkCancelled("remove"));
  return inner_->remove(key, existed);
}
Status CancellableStore::get(const std::string& key, Blob* value, int timeoutMs) {
  return sliced("wait", timeoutMs, [&](int ms) { return inner_->get(key, value, ms); });
}
Status CancellableStore::wait(const std::vector<std::string>& keys, int timeoutMs) {
  return sliced("wait", timeoutMs, [&](int ms) { return inner_->wait(keys, ms); });
}
Status CancellableStore::multiGet(const std::vector<std::string>& keys, std::vector<Blob>* values,
                                  int timeoutMs) {
  return sliced("wait", timeoutMs, [&](int ms) { return inner_->multiGet(keys, values, ms); });
}
Status CancellableStore::multiGetRange(const std::string& prefix, uint32_t first, uint32_t count,
                                       std::vector<Blob>* values, int timeoutMs) {
  return sliced("wait", timeoutMs,
                [&](int ms) { return inner_->multiGetRange(prefix, first, count, values, ms); });
}

std::shared_ptr<Store> cancellable(std::shared_ptr<Store> store, const CancelFlag& cancelled) {
  if (!cancelled || !store) return store;
  return std::make_shared<CancellableStore>(std::move(store), cancelled);
}

}  // namespace trib
