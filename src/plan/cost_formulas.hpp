// Formulas the cost model's algorithm prices share (internal to src/plan): chunk sizes, ring rounds
// cut into chunks, a two-level schedule's levels and pipeline slices, the rail ring, and the double
// binary tree. Each is documented where it is defined (cost_formulas.cpp, tree_model.cpp); the
// derivations are in docs/PLANNER.md "Cost model". Units: µs and bytes, bandwidths in bytes/µs.
#pragma once
#include <cstddef>
#include <cstdint>
#include <limits>

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

// rhd's price, rank by rank through its steps (rhd_model.cpp), on rhd.cpp's power-of-two group of
// pof2 ranks: the first 2 rem ranks fold in pairs (2v, 2v + 1)
// and inner rank v is real rank 2v + 1 for v < rem, else v + rem. With ranks contiguous by
// domain (f.uniform) real rank r is in domain r / perDomain, so whether a step's partners are in
// one domain depends on the rank, not only on the distance (72 per rack: distance 64 crosses
// for 64 of every 72 ranks); with domains of different sizes the ranks' own domains say it.
class RhdWalk {
 public:
  RhdWalk(const Ctx& c, int n, uint64_t count, size_t esize);
  static constexpr double kPruned = std::numeric_limits<double>::infinity();  // a bound reached the cutoff
  int pof2 = 1, rem = 0;
  bool knownDomains = false;
  int domainOf(int r) const;                                            // real rank r's domain
  int innerReal(int v) const { return v < rem ? 2 * v + 1 : v + rem; }  // rhd.cpp's Rhd::outer
  int innerDomain(int v) const { return domainOf(innerReal(v)); }
  bool crosses(int v, int dist) const;  // inner rank v's step at distance dist leaves its domain
  double stepLat(int v, int dist) const;
  // foldIn, foldOut: the fold of the pair (2v, 2v + 1) before the halving and after the doubling;
  // only the folding ranks (inner v < rem) run it, so their chains start and end that much later,
  // and the others' steps go on meanwhile until they need a folding partner's data.
  // halve, dbl: which phases run (all-reduce both, reduce-scatter the halving, all-gather the
  // doubling). Both phases are one timing chain and one link bound, not a sum of two: the executor
  // runs a rank's steps with no barrier between the phases, so early chunks pass through the
  // domain steps at the end of the halving and the start of the doubling while the halving's
  // network step still sends its later ones, and a NIC's network steps of both phases run nearly
  // back to back (2 x DGX H100 16 MiB: each NIC busy 94.5% of the replay).
  // The walk, in chunks of `chunk` bytes; kPruned where a bound reaches cutoffUs.
  double walk(bool halve, bool dbl, double total, double foldIn, double foldOut, double foldLat,
              bool foldCross, uint64_t chunk, double cutoffUs) const;

 private:
  const Ctx& c_;
  int n_;
  uint64_t count_;
  size_t esize_;
  double aFar_ = 0;
};

}  // namespace trib::cost
