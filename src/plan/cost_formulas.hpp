// Formulas the cost model's algorithm prices share (internal to src/plan): chunk sizes, ring rounds
// cut into chunks, a two-level schedule's levels and pipeline slices, the rail ring, and the double
// binary tree. Each is documented where it is defined (cost_formulas.cpp, tree_model.cpp); the
// derivations are in docs/PLANNER.md "Cost model". Units: µs and bytes, bandwidths in bytes/µs.
#pragma once
#include <cstdint>

#include "plan/cost_model.hpp"

namespace trib::cost {

constexpr double kB = 1e3;  // GB/s -> bytes/µs

// The fabric's rates and latencies one prediction prices with (predict fills it).
struct Ctx {
  const FabricView& f;
  const CostConstants& k;
  double R;  // reduce rate, bytes/µs
  bool multi;
  double bIn, bOut, bLoaded, aIn, aOut;
};

// A chunk within the constants' bounds.
uint64_t clampChunk(double c, const CostConstants& k);
// The pipelined chunk that balances fill against per-chunk overhead, and that pipeline's cost.
uint64_t pipelineChunk(double S, double bwBpu, int depth, const CostConstants& k);
double pipelineCost(double S, double c, double bwBpu, int depth, const CostConstants& k);
int ceilLog2(int n);

// Ring rounds of a block of v in chunks of c: the link's pace or one chunk's chain of hops.
double pipelinedRing(int reduceRounds, int copyRounds, double v, double c, double a, double bReduce,
                     double bCopy);
// The flat ring (ring.cpp without rails).
double flatRing(const Ctx& c, double v, double chunk, bool reduce, bool copy);
// A two-level schedule's domain all-gather overlapped with the level across domains.
double domainAllGatherAfter(const Ctx& c, int d, double v, double cb, double c0, double across,
                            double firstFinal, double acrossSteps);
// A two-level schedule in pipeline slices: the busier of the NVLink port and the level across.
struct SliceBounds {
  double us, fedWork;
};
SliceBounds pipelineSlices(const Ctx& c, int d, double w, double cb, double c0, double slices,
                           double sliceSteps, double rs, double acrossOne, double acrossSlice,
                           double acrossLat);
// The rail ring all-reduce (ring.cpp with m >= 2 domains of d).
double railRing(const Ctx& c, int d, double v, double chunk);
// The double binary tree all-reduce on 3+ ranks, rank by rank on FabricView::treeShape.
double treeAllReduceUs(const FabricView& f, double S, double chunk, double aIn, double aOut, double bIn,
                       double bOut, double bwTime, PredictScratch* scratch);

}  // namespace trib::cost
