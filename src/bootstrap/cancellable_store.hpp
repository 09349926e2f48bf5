// A store whose waits an abort can cut short: a non-blocking init's join waits on its peers in
// the store for up to the communicator's timeout (minutes by default), and tribCommAbort must end
// it promptly. Waits go to the store in slices of at most kSliceMs, the flag read between them;
// the whole wait still ends at the caller's timeout. Only a join that can be aborted uses it: a
// slice is one more request to the store per waiting rank every kSliceMs.
#pragma once
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/store.hpp"

namespace trib {

using CancelFlag = std::shared_ptr<const std::atomic<bool>>;

class CancellableStore : public Store {
 public:
  static constexpr int kSliceMs = 250;
  CancellableStore(std::shared_ptr<Store> inner, CancelFlag cancelled)
      : inner_(std::move(inner)), cancelled_(std::move(cancelled)) {}
  Status set(const std::string& key, const Blob& value) override;
  Status get(const std::string& key, Blob* value, int timeoutMs) override;
  Status add(const std::string& key, int64_t delta, int64_t* result) override;
  Status wait(const std::vector<std::string>& keys, int timeoutMs) override;
  Status multiGet(const std::vector<std::string>& keys, std::vector<Blob>* values, int timeoutMs) override;
  Status multiGetRange(const std::string& prefix, uint32_t first, uint32_t count, std::vector<Blob>* values,
                       int timeoutMs) override;
  Status remove(const std::string& key, bool* existed = nullptr) override;

 private:
  Status checkCancelled(const char* what) const;
  // Runs wait(sliceMs) until it stops timing out, the caller's timeout passes, or the flag is set.
  template <typename Wait>
  Status sliced(const char* what, int timeoutMs, Wait wait) const;

  std::shared_ptr<Store> inner_;
  CancelFlag cancelled_;
};

// `store` itself without a flag; else `store` wrapped.
std::shared_ptr<Store> cancellable(std::shared_ptr<Store> store, const CancelFlag& cancelled);

}  // namespace trib
