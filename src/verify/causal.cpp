#include "verify/causal.hpp"

#include <iterator>

namespace trib::verify {

void CausalMemory::init(uint64_t total) {
  runs_.clear();
  if (total > 0) runs_.emplace(0, Run{total, {}, {}});
}

void CausalMemory::inherit(uint64_t u, uint64_t len, bool write, RankSet* known) const {
  if (len == 0 || runs_.empty()) return;
  auto it = runs_.upper_bound(u);
  if (it != runs_.begin()) --it;
  for (; it != runs_.end() && it->first < u + len; ++it) {
    if (it->second.end <= u) continue;
    if (!it->second.written.empty()) *known = RankSet::unite(*known, it->second.written);
    if (write && !it->second.read.empty()) *known = RankSet::unite(*known, it->second.read);
  }
}

std::map<uint64_t, CausalMemory::Run>::iterator CausalMemory::splitAt(uint64_t at) {
  auto it = runs_.upper_bound(at);
  if (it == runs_.begin()) return it;
  --it;
  if (it->first == at) return it;
  if (it->second.end <= at) return std::next(it);
  Run tail{it->second.end, it->second.written, it->second.read};
  it->second.end = at;
  return runs_.emplace_hint(std::next(it), at, std::move(tail));
}

void CausalMemory::record(uint64_t u, uint64_t len, bool write, const RankSet& known) {
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
  for (auto it = first; it != runs_.end() && it->first < u + len; ++it)
    it->second.read = RankSet::unite(it->second.read, known);
}

}  // namespace trib::verify
