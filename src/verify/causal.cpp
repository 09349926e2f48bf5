#include "verify/causal.hpp"

namespace trib::verify {

void CausalMemory::init(uint64_t total) {
  runs_.clear();
  if (total > 0) runs_.emplace(0, Run{total, {}, {}});
}

void CausalMemory::inherit(uint64_t u, uint64_t len, bool write, Know* known) const {
  if (len == 0 || runs_.empty()) return;
  auto it = runs_.upper_bound(u);
  if (it != runs_.begin()) --it;
  for (; it != runs_.end() && it->first < u + len; ++it) {
    if (it->second.end <= u) continue;
    known->add(it->second.written);
    if (write) known->add(it->second.read);
  }
}

void CausalMemory::record(uint64_t u, uint64_t len, bool write, const Know& known) {
  if (len == 0) return;
  splitAt(u + len);
  auto first = splitAt(u);
  if (write) {
    // The write supersedes what was there: later readers wait for it, later writers for it and
    // for the readers that follow it.
    auto last = first;
    while (last != runs_.end() && last->first < u + len) ++last;
    runs_.erase(first, last);
    runs_.emplace(u, Run{u + len, known, {}});
    return;
  }
  for (auto it = first; it != runs_.end() && it->first < u + len; ++it) it->second.read.add(known);
}

}  // namespace trib::verify
