// The verifier on peer-memory schedules: one-shot and two-shot are correct and race-free, alone
// and over consecutive calls that reuse the windows; hand-written schedules with a race, a
// missing signal or a leftover one fail with a message naming ranks, step and cells.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "algo/schedule.hpp"
#include "verify/verify.hpp"
#include "verify_util.hpp"

namespace trib {
namespace {

Region in(uint64_t off, uint64_t n) { return {Buf::Input, off, n}; }
Region out(uint64_t off, uint64_t n) { return {Buf::Output, off, n}; }
Region win(uint64_t off, uint64_t n) { return {Buf::Window, off, n}; }
bool always(const CollArgs&) { return true; }
uint64_t none(const CollArgs&, int) { return 0; }

using testing::windowArgs;
const AlgoInfo& windowAlgo(Algo algo) { return testing::allReduceAlgo(algo); }

// ---- One-shot and two-shot, one call ---------------------------------------------------------

// ---- Consecutive calls reusing the windows ---------------------------------------------------

TEST(VerifyWindows, ConsecutiveCallsAreRaceFree) {
  const AlgoInfo& one = windowAlgo(Algo::OneShot);
  const AlgoInfo& two = windowAlgo(Algo::TwoShot);
  const uint64_t w = 128;  // cells of 64
  struct Case {
    const char* name;
    std::vector<VerifyCall> calls;
  };
  for (int n : {2, 3, 5, 8, 16}) {
    const Case cases[] = {
        {"oneshot x3",
         {{&one, windowArgs(n, 64, w)}, {&one, windowArgs(n, 7, w)}, {&one, windowArgs(n, 33, w, 0, true)}}},
        // 3 chunks (odd: the next call starts in the other cell), then 2, then 1.
        {"twoshot x3",
         {{&two, windowArgs(n, 150, w)},
          {&two, windowArgs(n, 100, w, 0, true)},
          {&two, windowArgs(n, 17, w)}}},
        // What a planner does: one-shot for small calls, two-shot for large, on one communicator.
        {"mixed",
         {{&one, windowArgs(n, 50, w)},
          {&two, windowArgs(n, 200, w, 0, true)},
          {&one, windowArgs(n, 64, w)},
          {&two, windowArgs(n, 65, w)}}},
    };
    for (const Case& c : cases) {
      for (int cell : {0, 1}) {
        std::vector<VerifyCall> calls = c.calls;
        calls[0].args.windowCell = cell;
        VerifyStats st;
        const Status s = verifySequence(calls, &st);
        EXPECT_TRUE(s.ok()) << c.name << " n " << n << " first cell " << cell << ": " << s.message();
        EXPECT_GT(st.signals, 0u);
      }
    }
  }
}

// One-shot from kOneShotExposeFromElems exposes its input (in place it folds into scratch, and
// copies that out only after the closing exchange), proven with expose as a copy and as an alias.
TEST(VerifyWindows, ExposingOneShotsInAndOutOfPlaceAreRaceFree) {
  const AlgoInfo& one = windowAlgo(Algo::OneShot);
  const uint64_t c = kOneShotExposeFromElems, w = 2 * (c + 64);
  for (int n : {2, 3, 5}) {
    std::vector<VerifyCall> calls = {{&one, windowArgs(n, c + 5, w, 0, true)},
                                     {&one, windowArgs(n, c, w)},
                                     {&one, windowArgs(n, c + 64, w, 0, true)},
                                     {&one, windowArgs(n, 100, w, 0, true)}};
    VerifyStats st;
    const Status s = verifySequence(calls, &st);
    EXPECT_TRUE(s.ok()) << "n " << n << ": " << s.message();
    EXPECT_GT(st.signals, 0u);
  }
}

TEST(VerifyWindows, SequencesRejectMismatchedCommunicators) {
  const AlgoInfo& one = windowAlgo(Algo::OneShot);
  Status s = verifySequence({{&one, windowArgs(4, 8, 64)}, {&one, windowArgs(4, 8, 128)}});
  EXPECT_EQ(s.code(), tribInvalidArgument);
  EXPECT_NE(s.message().find("one communicator's calls share both"), std::string::npos) << s.message();
  s = verifySequence({});
  EXPECT_EQ(s.code(), tribInvalidArgument);
}

// ---- Hand-written schedules that must fail --------------------------------------------------

// One-shot over 2 ranks with the wait moved after the get: it reads before the writer signalled.
Generator<Step> getBeforeWait(CollArgs a, int rank) {
  const int p = 1 - rank;
  co_yield Step::copy(in(0, a.count), win(0, a.count));
  co_yield Step::signal(p);
  co_yield Step::get(p, win(0, a.count), out(0, a.count));
  co_yield Step::reduce(win(0, a.count), out(0, a.count));
  co_yield Step::wait(p);
}

// As above, but rank 0 first receives a message rank 1 sends after signalling, so rank 1's window
// holds its data when rank 0 reads it: still a race, since the message (from the input, which the
// window copy only reads) orders nothing about the window.
Generator<Step> getAfterUnrelatedMessage(CollArgs a, int rank) {
  const int p = 1 - rank;
  if (rank == 1) {
    co_yield Step::copy(in(0, a.count), win(0, a.count));
    co_yield Step::signal(p);
    co_yield Step::send(p, in(0, 1));
    co_yield Step::wait(p);
    co_yield Step::get(p, win(0, a.count), out(0, a.count));
    co_yield Step::reduce(win(0, a.count), out(0, a.count));
  } else {
    co_yield Step::recv(p, out(0, 1));
    co_yield Step::copy(in(0, a.count), win(0, a.count));
    co_yield Step::signal(p);
    co_yield Step::get(p, win(0, a.count), out(0, a.count));
    co_yield Step::reduce(win(0, a.count), out(0, a.count));
    co_yield Step::wait(p);
  }
}

// A correct one-shot on cell 0 whatever the call's windowCell: the next call rewrites the cell
// its peers may still be reading.
Generator<Step> oneShotSingleCell(CollArgs a, int rank) {
  const int n = a.nranks;
  co_yield Step::copy(in(0, a.count), win(0, a.count));
  for (int p = 0; p < n; ++p)
    if (p != rank) co_yield Step::signal(p);
  for (int p = 0; p < n; ++p)
    if (p != rank) co_yield Step::wait(p);
  for (int j = 0; j < n; ++j) {
    if (j == 0)
      co_yield j == rank ? Step::copy(win(0, a.count), out(0, a.count))
                         : Step::get(j, win(0, a.count), out(0, a.count));
    else
      co_yield j == rank ? Step::reduce(win(0, a.count), out(0, a.count))
                         : Step::getReduce(j, win(0, a.count), out(0, a.count));
  }
}

// One-shot where rank 1 never signals rank 0.
Generator<Step> missingSignal(CollArgs a, int rank) {
  const int p = 1 - rank;
  co_yield Step::copy(in(0, a.count), win(0, a.count));
  if (rank == 0) co_yield Step::signal(p);
  co_yield Step::wait(p);
  co_yield Step::get(p, win(0, a.count), out(0, a.count));
  co_yield Step::reduce(win(0, a.count), out(0, a.count));
}

// A correct two-rank exchange plus one signal nobody waits for.
Generator<Step> extraSignal(CollArgs a, int rank) {
  const int p = 1 - rank;
  co_yield Step::copy(in(0, a.count), win(0, a.count));
  co_yield Step::signal(p);
  co_yield Step::wait(p);
  if (rank == 0) {
    co_yield Step::copy(win(0, a.count), out(0, a.count));
    co_yield Step::getReduce(p, win(0, a.count), out(0, a.count));
  } else {
    co_yield Step::get(p, win(0, a.count), out(0, a.count));
    co_yield Step::reduce(win(0, a.count), out(0, a.count));
  }
  if (rank == 0) co_yield Step::signal(p);
}

// Rank 0 puts into rank 1's window while rank 1 still reads it (rank 1 signalled before reading).
Generator<Step> putRacingRead(CollArgs a, int rank) {
  if (rank == 1) {
    co_yield Step::copy(in(0, a.count), win(0, a.count));
    co_yield Step::signal(0);
    co_yield Step::copy(win(0, a.count), out(0, a.count));
  } else {
    co_yield Step::wait(1);
    co_yield Step::put(1, in(0, a.count), win(0, a.count));
  }
}

// Rank 1 reads what rank 0 puts into its window without waiting for rank 0's signal.
Generator<Step> readRacingPut(CollArgs a, int rank) {
  if (rank == 0) {
    co_yield Step::signal(1);  // signalled before the put: releases nothing
    co_yield Step::put(1, in(0, a.count), win(0, a.count));
    co_yield Step::wait(1);
  } else {
    co_yield Step::wait(0);
    co_yield Step::copy(win(0, a.count), out(0, a.count));
    co_yield Step::signal(0);
  }
}

// Ranks 0 and 1 both put into the same cells of rank 2's window, unordered.
Generator<Step> twoPutsRacing(CollArgs a, int rank) {
  if (rank < 2) {
    co_yield Step::wait(2);
    co_yield Step::put(2, in(0, a.count), win(0, a.count));
    co_yield Step::signal(2);
  } else {
    co_yield Step::signal(0);
    co_yield Step::signal(1);
    co_yield Step::wait(0);
    co_yield Step::wait(1);
  }
}

struct Broken {
  const char* name;
  Generator<Step> (*gen)(CollArgs, int);
  int nranks;
  int calls;
  const char* expect;  // substring of the error message
};

TEST(VerifyWindows, RejectsRacesDeadlocksAndLeftoverSignals) {
  const Broken cases[] = {
      {"get before wait", getBeforeWait, 2, 1,
       "rank 0, step 2 get(peer 1 win[0+8] -> out[0+8]): data race: reads rank 1's window[0] (cell 0), which "
       "nobody has written yet"},
      {"get after an unrelated message", getAfterUnrelatedMessage, 2, 1,
       "rank 0, step 3 get(peer 1 win[0+8] -> out[0+8]): data race: reads rank 1's window[0] (cell 0), which "
       "rank 1's step 0 (copy) wrote, and no chain of signals leads from its release"},
      {"single cell reused by the next call", oneShotSingleCell, 3, 2,
       "call 0: rank 0, step 7 get_reduce(peer 2 win[0+8] -> out[0+8]): data race: reads rank 2's window[0] "
       "(cell 0), which rank 2's step 0 (copy, call 1) wrote"},
      {"missing signal", missingSignal, 2, 1,
       "rank 0 at step 2 wait(for 1) waits for a signal from rank 1, which has finished its schedule"},
      {"extra signal", extraSignal, 2, 1,
       "rank 0 signalled rank 1 1 time(s) more than it waited, the first at its step 5 signal(to 1)"},
      {"put racing a read", putRacingRead, 2, 1,
       "rank 0, step 1 put(in[0+8] -> peer 1 win[0+8]): data race: writes rank 1's window[0] (cell 0) while "
       "rank 1's step 2 (copy) may still be reading it"},
      {"read racing a put", readRacingPut, 2, 1,
       "rank 1, step 1 copy(win[0+8] -> out[0+8]): data race: reads window[0] (cell 0), which rank 0's step "
       "1 "
       "(put) wrote, and no chain of signals"},
      {"two puts racing", twoPutsRacing, 3, 1,
       "rank 1, step 1 put(in[0+8] -> peer 2 win[0+8]): data race: writes rank 2's window[0] (cell 0), which "
       "rank 0's step 1 (put) wrote, and no chain of signals"},
  };
  for (const Broken& b : cases) {
    const AlgoInfo fake = {Algo::OneShot, Coll::AllReduce, always, none, b.gen};
    std::vector<VerifyCall> calls(b.calls, VerifyCall{&fake, windowArgs(b.nranks, 8, 16)});
    const Status st = verifySequence(calls);
    ASSERT_FALSE(st.ok()) << b.name << " was accepted";
    EXPECT_NE(st.message().find(b.expect), std::string::npos)
        << b.name << ": message was\n  " << st.message() << "\nexpected to contain\n  " << b.expect;
  }
}

// The single-cell one-shot is fine for one call: only reuse makes it racy.
TEST(VerifyWindows, SingleCellOneShotPassesAlone) {
  const AlgoInfo fake = {Algo::OneShot, Coll::AllReduce, always, none, oneShotSingleCell};
  for (int n : {2, 3, 7}) {
    const Status st = verifySchedule(fake, windowArgs(n, 8, 16));
    EXPECT_TRUE(st.ok()) << n << ": " << st.message();
  }
}

// An all-reduce by puts: each rank writes its input into slot `rank` of every peer's current cell,
// signals it, and folds its own window once every peer has signalled. Correct over consecutive
// calls because each call uses the other cell (a put is released by the signal to its target).
Generator<Step> putAllReduce(CollArgs a, int rank) {
  const int n = a.nranks;
  const uint64_t cell = windowCellBegin(a, a.windowCell), c = a.count;
  co_yield Step::copy(in(0, c), win(cell + rank * c, c));
  for (int p = 0; p < n; ++p) {
    if (p == rank) continue;
    co_yield Step::put(p, in(0, c), win(cell + rank * c, c));
    co_yield Step::signal(p);
  }
  for (int p = 0; p < n; ++p)
    if (p != rank) co_yield Step::wait(p);
  co_yield Step::copy(win(cell, c), out(0, c));
  for (int j = 1; j < n; ++j) co_yield Step::reduce(win(cell + j * c, c), out(0, c));
}

TEST(VerifyWindows, PutSchedulesVerifyOverConsecutiveCalls) {
  const AlgoInfo puts = {Algo::OneShot, Coll::AllReduce, always, none, putAllReduce};
  for (int n : {2, 3, 6}) {
    const CollArgs a = windowArgs(n, 5, 2 * 5 * static_cast<uint64_t>(n));
    VerifyStats st;
    const Status s = verifySequence({{&puts, a}, {&puts, a}, {&puts, a}}, &st);
    EXPECT_TRUE(s.ok()) << n << ": " << s.message();
    EXPECT_EQ(st.windowSteps, 3u * n * (n - 1));
  }
}

// ---- Expose: proven as a copy and as an alias of its source ----------------------------------

Region scr(uint64_t off, uint64_t n) { return {Buf::Scratch, off, n}; }
uint64_t countScratch(const CollArgs& a, int) { return a.count; }

// 2 ranks in place: expose the input, exchange signals, get the peer's into scratch and fold in
// rank order. Correct if expose copies; as an alias, each rank overwrites its input (its output)
// while the peer may still be reading it.
Generator<Step> exposeOverwrittenInPlace(CollArgs a, int rank) {
  const int p = 1 - rank;
  const uint64_t c = a.count;
  co_yield Step::expose(in(0, c), win(0, c));
  co_yield Step::signal(p);
  co_yield Step::wait(p);
  co_yield Step::get(p, win(0, c), scr(0, c));
  if (rank == 0) {
    co_yield Step::reduce(scr(0, c), out(0, c));
  } else {
    co_yield Step::reduce(out(0, c), scr(0, c));
    co_yield Step::copy(scr(0, c), out(0, c));
  }
  co_yield Step::signal(p);
  co_yield Step::wait(p);
}

// 2 ranks out of place, like one-shot but exposing the input (in `Halves` exposures), each rank's
// own term from its input or (`OwnFromWindow`) its window, with or without an exchange at the end.
// Correct both ways as <1, *, true>: a rank's read of its own exposed range is a read of the
// source (the executor resolves it). Without the final exchange, a rank's caller may rewrite its
// input while the peer still reads it; two halves make the peer's one get read across two
// exposures.
template <int Halves, bool OwnFromWindow, bool FinalExchange>
Generator<Step> exposedOneShot(CollArgs a, int rank) {
  const int p = 1 - rank;
  const uint64_t c = a.count, h = Halves == 2 ? c / 2 : c;
  co_yield Step::expose(in(0, h), win(0, h));
  if (h < c) co_yield Step::expose(in(h, c - h), win(h, c - h));
  co_yield Step::signal(p);
  co_yield Step::wait(p);
  const Region own = OwnFromWindow ? win(0, c) : in(0, c);
  if (rank == 0) {
    co_yield Step::copy(own, out(0, c));
    co_yield Step::getReduce(p, win(0, c), out(0, c));
  } else {
    co_yield Step::get(p, win(0, c), out(0, c));
    co_yield Step::reduce(own, out(0, c));
  }
  if (FinalExchange) {
    co_yield Step::signal(p);
    co_yield Step::wait(p);
  }
}

// 2 ranks, two-shot by puts: each exposes the peer's half of its input, folds its own half from
// the peer's exposure, puts the result into the peer's exposure (its buffer, under the alias) and,
// after the second exchange, copies its window's half to its output (onto itself, under the
// alias). Correct in place; out of place the put would write the peer's input. `OwnRead`: rank 1
// also reads the half it exposed while rank 0 may be putting into it.
template <bool OwnRead>
Generator<Step> twoShotByPuts(CollArgs a, int rank) {
  const int p = 1 - rank;
  const uint64_t c = a.count, h = c / 2;
  const uint64_t mine = rank == 0 ? 0 : h, mineLen = rank == 0 ? h : c - h;
  const uint64_t theirs = rank == 0 ? h : 0, theirsLen = c - mineLen;
  co_yield Step::expose(in(theirs, theirsLen), win(theirs, theirsLen));
  co_yield Step::signal(p);
  co_yield Step::wait(p);
  if (OwnRead && rank == 1) co_yield Step::copy(in(theirs, theirsLen), scr(0, theirsLen));
  if (!a.inPlace) co_yield Step::copy(in(mine, mineLen), out(mine, mineLen));
  co_yield Step::getReduce(p, win(mine, mineLen), out(mine, mineLen));
  co_yield Step::put(p, out(mine, mineLen), win(mine, mineLen));
  co_yield Step::signal(p);
  co_yield Step::wait(p);
  co_yield Step::copy(win(theirs, theirsLen), out(theirs, theirsLen));
}

TEST(VerifyWindows, ExposeIsProvenAsACopyAndAsAnAlias) {
  struct Case {
    const char* name;
    Generator<Step> (*gen)(CollArgs, int);
    bool inPlace;
    const char* expect;  // "": correct both ways
  };
  const Case cases[] = {
      {"source overwritten in place", exposeOverwrittenInPlace, true,
       "with expose as an alias of its source: rank 0, step 3 get(peer 1 win[0+8] -> scratch[0+8]): data "
       "race: "
       "reads rank 1's window[0] (cell 0), which rank 1's step 5 (copy) wrote"},
      {"correct", exposedOneShot<1, false, true>, false, ""},
      {"no exchange at the end", exposedOneShot<1, false, false>, false,
       "with expose as an alias of its source: rank 0, step 4 get_reduce(peer 1 win[0+8] -> out[0+8]): "
       "data race: reads rank 1's window[0] (cell 0), which rank 1's caller, once its call returned, wrote"},
      {"own exposed range read back", exposedOneShot<1, true, true>, false, ""},
      {"two-shot by puts", twoShotByPuts<false>, true, ""},
      {"put into an exposed input", twoShotByPuts<false>, false,
       "with expose as an alias of its source: rank 1, step 5 put(out[4+4] -> peer 0 win[4+4]): puts into "
       "rank 0's window[4] (cell 0)..8, which rank 0 exposed from its input buffer"},
      {"exposed buffer read while a peer puts into it", twoShotByPuts<true>, true,
       "with expose as an alias of its source: rank 0, step 4 put(out[0+4] -> peer 1 win[0+4]): data race: "
       "writes rank 1's window[0] (cell 0) while rank 1's step 3 (copy) may still be reading it"},
      {"read across two exposures", exposedOneShot<2, false, true>, false,
       "rank 1, step 4 get(peer 0 win[0+8] -> out[0+8]): reads rank 0's window[0] (cell 0)..4, which rank 0 "
       "exposed only in part"},
  };
  for (const Case& c : cases) {
    const AlgoInfo fake = {Algo::OneShot, Coll::AllReduce, always, countScratch, c.gen};
    CollArgs a = windowArgs(2, 8, 16, 0, c.inPlace);
    const Status st = verifySchedule(fake, a);
    if (!*c.expect) {
      EXPECT_TRUE(st.ok()) << c.name << ": " << st.message();
      continue;
    }
    ASSERT_FALSE(st.ok()) << c.name << " was accepted";
    EXPECT_NE(st.message().find(c.expect), std::string::npos)
        << c.name << ": message was\n  " << st.message() << "\nexpected to contain\n  " << c.expect;
  }
}

// Two-shot exposes (its staging and its reduced slices) and is proven both ways: in place and out
// of place, several chunks, over consecutive calls.
TEST(VerifyWindows, TwoShotExposesAndIsRaceFreeAsAnAlias) {
  const AlgoInfo& two = windowAlgo(Algo::TwoShot);
  for (int n : {2, 3, 5}) {
    for (bool inPlace : {false, true}) {
      const CollArgs a = windowArgs(n, 3 * 40 + 7, 2 * 40, 0, inPlace);  // 4 chunks, the last short
      const CollArgs b = windowArgs(n, 33, 2 * 40, 0, inPlace);
      const Status st = verifySequence({{&two, a}, {&two, b}, {&two, a}});
      EXPECT_TRUE(st.ok()) << n << (inPlace ? " in place: " : ": ") << st.message();
    }
  }
}

}  // namespace
}  // namespace trib
