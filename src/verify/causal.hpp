// What a rank's steps are known to follow, under the executor's ordering rule: a step waits only
// for the earlier steps of its rank whose memory it conflicts with (it reads what they write, or
// writes what they read or write). Program order alone orders nothing, so a message that carries
// no data, or data no later step depends on, makes nobody wait.
//
// Knowledge (Know) is what a step causally follows: the ranks whose entry into the collective it
// follows (through its own rank's earlier steps and the messages and signals they received), and
// the last of its own rank's signal/wait steps it follows, which stands for everything that step
// knew of other ranks' signal/wait steps (the rank's sync chain, verify.cpp). CausalMemory keeps,
// for every cell of one rank's address space, the knowledge of the step that last wrote it and the
// union of the knowledge of the steps that read it since; a new step inherits from the cells it
// touches, which is the transitive closure of the conflicts the executor honours. Signal and wait
// are modelled as the executor runs them: as writes of the rank's own window and the peer's.
#pragma once
#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>

#include "verify/rankset.hpp"

namespace trib::verify {

struct Know {
  RankSet entries;    // ranks whose entry the step follows
  uint32_t sync = 0;  // it follows its rank's sync steps 1..sync (0: none)
  void add(const Know& o) {
    if (!o.entries.empty()) entries = RankSet::unite(entries, o.entries);
    sync = std::max(sync, o.sync);
  }
};

// Splits the run of `runs` (keyed by first cell, each with an `end`) holding cell `at` so that a run
// starts there; returns it (or end()). Shared by the run maps over cells.
template <typename Run>
typename std::map<uint64_t, Run>::iterator splitRunAt(std::map<uint64_t, Run>& runs, uint64_t at) {
  auto it = runs.upper_bound(at);
  if (it == runs.begin()) return it;
  --it;
  if (it->first == at) return it;
  if (it->second.end <= at) return std::next(it);
  Run tail = it->second;
  it->second.end = at;
  return runs.emplace_hint(std::next(it), at, std::move(tail));
}

class CausalMemory {
 public:
  // Cells [0, total), none written or read yet.
  void init(uint64_t total);
  // Adds to *known what a step that reads (write = false) or writes cells [u, u+len) must wait
  // for: their last writer, and for a write also their readers since.
  void inherit(uint64_t u, uint64_t len, bool write, Know* known) const;
  // Records that a step with knowledge `known` read or wrote cells [u, u+len).
  void record(uint64_t u, uint64_t len, bool write, const Know& known);

 private:
  struct Run {
    uint64_t end;
    Know written, read;
  };
  std::map<uint64_t, Run>::iterator splitAt(uint64_t at) { return splitRunAt(runs_, at); }
  std::map<uint64_t, Run> runs_;  // keyed by first cell; runs tile [0, total)
};

}  // namespace trib::verify
