// What a rank's steps are known to follow, under the executor's ordering rule: a step waits only
// for the earlier steps of its rank whose memory it conflicts with (it reads what they write, or
// writes what they read or write). Program order alone orders nothing, so a message that carries
// no data, or data no later step depends on, makes nobody wait.
//
// Knowledge is a RankSet: the ranks whose entry into the collective a step causally follows
// (through its own rank's earlier steps and the messages they received). CausalMemory keeps, for
// every cell of one rank's memory, the knowledge of the step that last wrote it and the union of
// the knowledge of the steps that read it since; a new step inherits from the cells it touches,
// which is the transitive closure of the conflicts the executor honours.
#pragma once
#include <cstdint>
#include <map>

#include "verify/rankset.hpp"

namespace trib::verify {

class CausalMemory {
 public:
  // Cells [0, total), none written or read yet.
  void init(uint64_t total);
  // Adds to *known what a step that reads (write = false) or writes cells [u, u+len) must wait
  // for: their last writer, and for a write also their readers since.
  void inherit(uint64_t u, uint64_t len, bool write, RankSet* known) const;
  // Records that a step with knowledge `known` read or wrote cells [u, u+len).
  void record(uint64_t u, uint64_t len, bool write, const RankSet& known);

 private:
  struct Run {
    uint64_t end;
    RankSet written, read;
  };
  // Splits the run holding `at` so that a run starts there; returns it (or end()).
  std::map<uint64_t, Run>::iterator splitAt(uint64_t at);
  std::map<uint64_t, Run> runs_;  // keyed by first cell; runs tile [0, total)
};

}  // namespace trib::verify
