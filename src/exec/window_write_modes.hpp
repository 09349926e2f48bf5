// Whether a window run writes its windows with plain or with streaming (non-temporal) stores.
//
// Plain stores leave the lines dirty in this core's cache: ideal when the peers' cores share that
// cache, but when they share none a peer's load of a dirty line costs a cross-core transfer, about
// three times one read from memory. Streaming stores send the lines to memory. Which is faster
// depends on where the ranks run, which moves (the scheduler, other load), so it is measured: per
// power-of-two call size, runs alternate between the modes at first and then take whichever was
// faster per byte lately, re-trying each now and then. The shm board's numbers (16 MiB busbw,
// plain vs streaming): 2 ranks 7.6 vs 5.2 GB/s sharing a cache, 2.5 vs 7.5 apart; 4 ranks on 2
// cores 4.4 vs 3.3 and 1.8 vs 4.2.
//
// Every rank of a communicator makes the same sequence of calls, so exploring runs coincide on
// every rank. A near tie may still split the ranks; that is harmless, the modes write the same
// bytes and the signals order them either way.
#pragma once
#include <cstdint>
#include <mutex>
#include <vector>

namespace trib {

class WindowWriteModes {
 public:
  // `forced` (TRIB_WINDOW_STREAMING): -1 measured (auto), 0 plain, 1 streaming.
  explicit WindowWriteModes(int forced) : forced_(forced) {}

  // For a run of a call of `bytes`: stream its window writes?
  bool choose(uint64_t bytes);
  // Whether runs of `bytes` are timed for record() (small calls are not: a clock read would be a
  // noticeable part of an 8-byte all-reduce).
  bool measures(uint64_t bytes) const { return forced_ < 0 && bytes >= kMeasuredFromBytes; }
  // That run took `ns`.
  void record(uint64_t bytes, bool streaming, double ns);

  // Calls below this size write plainly: too short to time, and their windows stay in cache.
  static constexpr uint64_t kMeasuredFromBytes = 256 << 10;

 private:
  struct SizeClass {
    double nsPerByte[2] = {0, 0};  // moving average per mode ([1]: streaming); 0: not measured yet
    uint64_t runs = 0;
  };
  const int forced_;  // -1 auto, 0 plain, 1 streaming
  std::mutex mu_;     // window runs never overlap on a communicator, but may run on any thread
  std::vector<SizeClass> classes_ = std::vector<SizeClass>(64);
};

}  // namespace trib
