// Every registered schedule generator (internal: others go through algorithmsFor/findAlgorithm).
#pragma once
#include "algo/schedule.hpp"

namespace trib::algo {

extern const AlgoInfo kRingAllReduce;  // ring.cpp: reduce-scatter + all-gather around a ring
extern const AlgoInfo kRingReduceScatter;
extern const AlgoInfo kRingAllGather;
extern const AlgoInfo kTreeAllReduce;    // tree.cpp: NCCL-style double binary tree
extern const AlgoInfo kRhdAllReduce;     // rhd.cpp: Rabenseifner halving/doubling
extern const AlgoInfo kRhdAllGather;     //   recursive doubling
extern const AlgoInfo kDirectAllReduce;  // direct.cpp: every rank talks to every rank
extern const AlgoInfo kDirectReduceScatter;
extern const AlgoInfo kDirectAllGather;
extern const AlgoInfo kAllgatherReduceAllReduce;  // allgather_reduce.cpp: every input to every rank
extern const AlgoInfo kDirectAlltoAll;
extern const AlgoInfo kDirectGather;
extern const AlgoInfo kDirectScatter;
extern const AlgoInfo kDirectBarrier;      //   dissemination barrier
extern const AlgoInfo kBinomialBroadcast;  // binomial.cpp: binomial trees rooted at args.root
extern const AlgoInfo kBinomialReduce;
extern const AlgoInfo kBinomialGather;
extern const AlgoInfo kBinomialScatter;
extern const AlgoInfo kChainBroadcast;  // chain.cpp: pipelined chains through the root
extern const AlgoInfo kChainReduce;
extern const AlgoInfo kHierarchicalAllReduce;  // hierarchical.cpp: domain RS -> cross-domain AR -> domain AG
extern const AlgoInfo kSwitchAllReduce;        // switch.cpp: in-network reduction (SwitchReduce step)
extern const AlgoInfo kSwitchReduce;
extern const AlgoInfo kSwitchBroadcast;
extern const AlgoInfo kSwitchAllGather;
extern const AlgoInfo kSwitchReduceScatter;
extern const AlgoInfo kSwitchBarrier;
extern const AlgoInfo kTwoShotAllReduce;     // oneshot.cpp: each rank reduces a slice of the windows
extern const AlgoInfo kOneShotAllReduce;     // oneshot.cpp: every rank reduces all the windows
extern const AlgoInfo kHierSwitchAllReduce;  // hier_switch.cpp: domain RS -> switch AR of slices -> domain AG

// tree.cpp: rank's neighbours in tree 0 or 1 of the double binary tree over n ranks (-1: none), for
// the cost model, which prices the busiest rank's edges.
struct TreeLinks {
  int parent = -1;
  int child[2] = {-1, -1};
};
TreeLinks doubleTreeNode(int n, int rank, int tree);

// rhd.cpp: whether a folding rank's fold brings first the half that its first halving step sends
// (else the half it keeps), for a power-of-two group of pof2 ranks and a vector of `count`
// elements cut in slices of `chunkElems`; the cost model prices the same order.
bool rhdFoldSendsFirst(int pof2, uint64_t count, uint64_t chunkElems);
// rhd.cpp: whether, with two inner ranks (pof2 == 2), the folding rank's steps before its unfold
// fit the executor's window, so the unfold's first steps are started with the rest and the kept
// half streams back as the halving finishes each slice of it (the cost model's 3-rank walk).
bool rhdUnfoldInWindow(int pof2, uint64_t count, uint64_t chunkElems);
// hierarchical.cpp: the pipeline slice in elements, d x m chunks (a chunk per block across domains),
// where the executor's window holds kHierSlicesInWindow slices' steps (hierarchicalSliceSteps: d-1
// rounds of m chunks in each domain phase and 2(m-1) of one across, a send and a receive each);
// else the whole count. The cost model prices the same slices.
inline constexpr uint64_t kHierSlicesInWindow = 5;
// The rule both schedules slice by (and the cost model prices by): the window holds
// kHierSlicesInWindow slices of `sliceSteps` steps.
inline bool hierSlicesFitTheWindow(uint64_t sliceSteps) {
  return kHierSlicesInWindow * sliceSteps <= kExecutorWindowSteps;
}
uint64_t hierarchicalSliceSteps(int d, int m);
uint64_t hierarchicalSliceElems(const CollArgs& a);
// hier_switch.cpp: its pipeline slice in elements, d blocks of q = hierSwitchSliceChunks chunks
// (a block at least kHierSwitchPieceElems, one switch operation: the software switch's cost per
// operation), where the window holds kHierSlicesInWindow slices' steps (hierSwitchSliceSteps:
// 4(d-1)q ring steps and the switch's); else the whole count (the block in pieces).
uint64_t hierSwitchSliceChunks(uint64_t chunkElems);
uint64_t hierSwitchSliceSteps(int d, uint64_t sliceChunks);
uint64_t hierSwitchSliceElems(const CollArgs& a);

}  // namespace trib::algo
