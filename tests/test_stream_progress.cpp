// Stream-ordered calls on a CPU: the public API, the communicator's progress thread and the
// executor, exactly as on a GPU, with the host stand-ins for what CUDA provides (exec/host_stream.hpp:
// a thread that runs closures in order as a stream runs kernels, and the ordering over it; a host
// engine posing as a device engine, so device-memory calls stage through host memory as they do on
// a GPU). What is checked: a call returns before it runs; the stream's earlier work is done before
// it starts and its later work waits for it; abort and timeout release the stream and report the
// error; groups let ranks share a stream; host calls wait for stream work; bad combinations refused.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "core/comm.hpp"
#include "core/stream_coll.hpp"
#include "cuda/cuda_api.hpp"
#include "exec/host_stream.hpp"
#include "exec/staging_pool.hpp"
#include "tributary/tributary.h"

namespace trib {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::string lastError() { return tribGetLastError(nullptr); }

// Host memory posing as device memory: copies and reductions by the host engine, but each op
// completes only at a later progress() (as a CUDA engine's events do), and host staging is counted.
// Its staging comes from a StagingPool as the CUDA engine's does, so a test can check that a call
// never allocates staging once its stream is held (page-locking would wait for that stream).
class StandInDeviceEngine final : public Engine {
 public:
  explicit StandInDeviceEngine(std::shared_ptr<std::atomic<int>> stagings) : stagings_(std::move(stagings)) {}
  ~StandInDeviceEngine() override { unreserved_->fetch_add(staging_.allocationsOnTake()); }
  // Counts, when the engine goes, the staging it had to allocate during calls.
  void countUnreservedInto(std::shared_ptr<std::atomic<uint64_t>> counter) {
    unreserved_ = std::move(counter);
  }
  const char* name() const override { return "stand-in device"; }
  MemoryKind memory() const override { return MemoryKind::Device; }
  Status postCopy(void* dst, const void* src, size_t bytes, TransferOp* op, bool) override {
    return later(op, [&](TransferOp* now) { return hostEngine().postCopy(dst, src, bytes, now, false); });
  }
  Status postReduce(void* dst, const void* a, const void* b, uint64_t count, DataType dtype, RedOp rop,
                    TransferOp* op) override {
    return later(op,
                 [&](TransferOp* now) { return hostEngine().postReduce(dst, a, b, count, dtype, rop, now); });
  }
  Status postDivide(void* buf, uint64_t count, DataType dtype, uint64_t divisor, TransferOp* op) override {
    return later(op,
                 [&](TransferOp* now) { return hostEngine().postDivide(buf, count, dtype, divisor, now); });
  }
  Status progress() override {
    std::lock_guard<std::mutex> lock(mu_);
    for (TransferOp* op : pending_) op->complete();
    pending_.clear();
    return Status::Ok();
  }
  void* allocScratch(size_t bytes) override { return hostEngine().allocScratch(bytes); }
  void freeScratch(void* p, size_t bytes) override { hostEngine().freeScratch(p, bytes); }
  void* allocHostStaging(size_t bytes) override {
    stagings_->fetch_add(1);
    return staging_.take(bytes);
  }
  void freeHostStaging(void* p, size_t bytes) override { staging_.give(p, bytes); }
  Status reserveHostStaging(const std::vector<size_t>& bytes) override { return staging_.reserve(bytes); }

 private:
  template <class F>
  Status later(TransferOp* op, F&& run) {
    TransferOp now;
    TRIB_RETURN_IF_ERROR(run(&now));
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back(op);
    return Status::Ok();
  }
  std::shared_ptr<std::atomic<int>> stagings_;
  std::shared_ptr<std::atomic<uint64_t>> unreserved_ = std::make_shared<std::atomic<uint64_t>>(0);
  StagingPool staging_{[](size_t bytes) { return hostEngine().allocScratch(bytes); },
                       [](void* p) { hostEngine().freeScratch(p, 0); }};
  std::mutex mu_;
  std::vector<TransferOp*> pending_;
};

// `n` ranks of one process, each with a host stream; with `deviceStandIn`, their stream-ordered
// calls run as device memory on the stand-in engine. Destroys the communicators, then the streams.
struct World {
  std::vector<tribComm_t> comms;
  std::vector<std::unique_ptr<HostStream>> streams;
  std::shared_ptr<std::atomic<int>> stagings = std::make_shared<std::atomic<int>>(0);
  // Staging the stand-in engines allocated while calls ran (known once the communicators are gone).
  std::shared_ptr<std::atomic<uint64_t>> unreservedStagings = std::make_shared<std::atomic<uint64_t>>(0);
  World(int n, bool deviceStandIn, int timeoutMs = 0) : comms(n) {
    if (timeoutMs > 0) {
      tribUniqueId id;
      EXPECT_EQ(tribGetUniqueId(&id), tribSuccess);
      std::vector<std::thread> t;
      for (int r = 0; r < n; ++r)
        t.emplace_back([&, r] {
          tribConfig_t cfg = TRIB_CONFIG_INITIALIZER;
          cfg.timeoutMs = timeoutMs;
          EXPECT_EQ(tribCommInitRankConfig(&comms[r], n, id, r, &cfg), tribSuccess) << lastError();
        });
      for (auto& th : t) th.join();
    } else {
      EXPECT_EQ(tribCommInitAll(comms.data(), n, nullptr), tribSuccess) << lastError();
    }
    for (int r = 0; r < n; ++r) {
      std::unique_ptr<Engine> engine;
      if (deviceStandIn) {
        auto standIn = std::make_unique<StandInDeviceEngine>(stagings);
        standIn->countUnreservedInto(unreservedStagings);
        engine = std::move(standIn);
      }
      EXPECT_TRUE(
          setStreamTesting(comms[r]->impl(), std::make_unique<HostStreamOrdering>(), std::move(engine)).ok());
      streams.push_back(std::make_unique<HostStream>());
    }
  }
  ~World() { destroy(); }
  void destroy() {
    for (tribComm_t c : comms) EXPECT_EQ(tribCommDestroy(c), tribSuccess) << lastError();
    comms.clear();
    streams.clear();
  }
  HostStream* stream(int r) { return streams[r].get(); }
  bool syncAll(milliseconds timeout = milliseconds(20000)) {
    bool ok = true;
    for (auto& s : streams) ok &= s->synchronize(timeout);
    return ok;
  }
};

// Work the stream runs before the call: sleeps, then writes the input (a "kernel"), then counts.
void slowFill(HostStream* s, std::vector<float>* v, float value, milliseconds delay,
              std::atomic<int>* filled = nullptr) {
  s->enqueue([v, value, delay, filled] {
    std::this_thread::sleep_for(delay);
    std::fill(v->begin(), v->end(), value);
    if (filled) ++*filled;
  });
}

// Work the stream runs before the call that writes the input only once `open` is set (or after
// 30 s, so a call that wrongly waited for its stream fails the test instead of hanging it).
void gatedFill(HostStream* s, std::vector<float>* v, float value, const std::atomic<bool>* open,
               std::atomic<int>* filled) {
  s->enqueue([v, value, open, filled] {
    const auto until = Clock::now() + std::chrono::seconds(30);
    while (!open->load() && Clock::now() < until) std::this_thread::sleep_for(milliseconds(1));
    std::fill(v->begin(), v->end(), value);
    ++*filled;
  });
}

TEST(StreamOrdered, ReturnsAtOnceAndRunsInStreamOrder) {
  for (bool device : {false, true}) {
    for (bool inPlace : {false, true}) {
      SCOPED_TRACE(std::string(device ? "device stand-in" : "host") + (inPlace ? ", in place" : ""));
      constexpr int kRanks = 3;
      constexpr size_t kCount = 4099;
      World w(kRanks, device);
      std::vector<std::vector<float>> in(kRanks, std::vector<float>(kCount, -1.f)), out = in;
      std::vector<std::vector<float>> seen(kRanks);
      std::atomic<int> filled{0};
      std::atomic<bool> open{false};
      for (int r = 0; r < kRanks; ++r) {
        gatedFill(w.stream(r), &in[r], static_cast<float>(r + 1), &open, &filled);
        float* dst = inPlace ? in[r].data() : out[r].data();
        ASSERT_EQ(tribAllReduce(in[r].data(), dst, kCount, tribFloat32, tribSum, w.comms[r], w.stream(r)),
                  tribSuccess)
            << lastError();
        // The stream's later work: reads the result (a "kernel" right after the call).
        w.stream(r)->enqueue([&, r, dst] { seen[r].assign(dst, dst + kCount); });
      }
      // Every call returned before its input was even written: the stream cannot write it until
      // the gate opens (no timing: a loaded machine cannot make this pass or fail).
      EXPECT_EQ(filled.load(), 0) << "a call waited for the stream";
      open = true;
      ASSERT_TRUE(w.syncAll());
      for (int r = 0; r < kRanks; ++r) {
        ASSERT_EQ(seen[r].size(), kCount);
        for (size_t i = 0; i < kCount; ++i) ASSERT_EQ(seen[r][i], 6.f) << "rank " << r << " element " << i;
      }
      if (device) {
        EXPECT_GT(w.stagings->load(), 0) << "device messages go through host staging";
      }
    }
  }
}

// Calls and stream work interleaved on one stream: each call sees the work before it, and the
// work after it sees its result. x -> 3x (all-reduce of 3 equal ranks), then x -> x + 1, 4 times.
TEST(StreamOrdered, ChainedCallsSeeEachOthersResults) {
  constexpr int kRanks = 3;
  World w(kRanks, true);
  std::vector<std::vector<int32_t>> x(kRanks, std::vector<int32_t>(1000, 1));
  for (int round = 0; round < 4; ++round) {
    for (int r = 0; r < kRanks; ++r) {
      ASSERT_EQ(
          tribAllReduce(x[r].data(), x[r].data(), x[r].size(), tribInt32, tribSum, w.comms[r], w.stream(r)),
          tribSuccess)
          << lastError();
      w.stream(r)->enqueue([v = &x[r]] {
        for (int32_t& e : *v) e += 1;
      });
    }
  }
  ASSERT_TRUE(w.syncAll());
  int32_t want = 1;
  for (int round = 0; round < 4; ++round) want = want * 3 + 1;
  for (int r = 0; r < kRanks; ++r)
    for (int32_t e : x[r]) ASSERT_EQ(e, want);
}

// The collectives on device memory (stand-in) over 1..4 ranks, with dtypes and ops, checked
// against the host-memory call's result.
TEST(StreamOrdered, DeviceCollectivesMatchHostResults) {
  struct Case {
    const char* name;
    std::function<tribResult_t(const void*, void*, size_t, tribComm_t, void*)> call;
    bool inTimesRanks, outTimesRanks;  // the input (output) holds nranks blocks of `count`
  };
  const Case cases[] = {
      {"allreduce max",
       [](const void* s, void* r, size_t n, tribComm_t c, void* st) {
         return tribAllReduce(s, r, n, tribFloat64, tribMax, c, st);
       },
       false, false},
      {"allgather",
       [](const void* s, void* r, size_t n, tribComm_t c, void* st) {
         return tribAllGather(s, r, n, tribFloat64, c, st);
       },
       false, true},
      {"reducescatter avg",
       [](const void* s, void* r, size_t n, tribComm_t c, void* st) {
         return tribReduceScatter(s, r, n, tribFloat64, tribAvg, c, st);
       },
       true, false},
      {"broadcast root 0",
       [](const void* s, void* r, size_t n, tribComm_t c, void* st) {
         return tribBroadcast(s, r, n, tribFloat64, 0, c, st);
       },
       false, false},
      {"reduce prod root 0",
       [](const void* s, void* r, size_t n, tribComm_t c, void* st) {
         return tribReduce(s, r, n, tribFloat64, tribProd, 0, c, st);
       },
       false, false},
      {"alltoall",
       [](const void* s, void* r, size_t n, tribComm_t c, void* st) {
         return tribAlltoAll(s, r, n, tribFloat64, c, st);
       },
       true, true},
  };
  constexpr size_t kCount = 513;
  for (int n = 1; n <= 4; ++n) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(c.name) + ", " + std::to_string(n) + " ranks");
      const size_t inN = kCount * (c.inTimesRanks ? n : 1), outN = kCount * (c.outTimesRanks ? n : 1);
      auto input = [&](int r) {
        std::vector<double> v(inN);
        for (size_t i = 0; i < inN; ++i) v[i] = 1.0 + static_cast<double>((r * 7 + i) % 5);
        return v;
      };
      // Host-memory reference, no stream (the path every other test checks).
      std::vector<std::vector<double>> want(n, std::vector<double>(outN, 0.0));
      {
        std::vector<tribComm_t> comms(n);
        ASSERT_EQ(tribCommInitAll(comms.data(), n, nullptr), tribSuccess);
        std::vector<std::vector<double>> in(n);
        for (int r = 0; r < n; ++r) in[r] = input(r);
        ASSERT_EQ(tribGroupStart(), tribSuccess);
        for (int r = 0; r < n; ++r)
          ASSERT_EQ(c.call(in[r].data(), want[r].data(), kCount, comms[r], nullptr), tribSuccess);
        ASSERT_EQ(tribGroupEnd(), tribSuccess) << lastError();
        for (tribComm_t comm : comms) ASSERT_EQ(tribCommDestroy(comm), tribSuccess);
      }
      World w(n, true);
      std::vector<std::vector<double>> in(n), out(n, std::vector<double>(outN, 0.0));
      for (int r = 0; r < n; ++r) {
        in[r] = input(r);
        ASSERT_EQ(c.call(in[r].data(), out[r].data(), kCount, w.comms[r], w.stream(r)), tribSuccess)
            << lastError();
      }
      ASSERT_TRUE(w.syncAll());
      for (int r = 0; r < n; ++r) {
        tribResult_t async = tribInternalError;
        ASSERT_EQ(tribCommGetAsyncError(w.comms[r], &async), tribSuccess);
        EXPECT_EQ(async, tribSuccess) << "rank " << r;
        // Reduce's output matters only at the root.
        if (std::string(c.name).rfind("reduce prod", 0) == 0 && r != 0) continue;
        EXPECT_EQ(out[r], want[r]) << "rank " << r;
      }
      // Every host staging buffer was reserved before the call's stream was held.
      w.destroy();
      EXPECT_EQ(w.unreservedStagings->load(), 0u);
    }
  }
}

// A pre-multiplied sum on a stream (host memory and the device stand-in): the input, written by
// the stream's earlier work after the call returned, is scaled when the stream reaches the call,
// by the run's engine; the operator may be destroyed as soon as the call returns. Rank r scales
// r + 1 by 0.5 * (r + 1); all-reduce in and out of place, reduce-scatter.
TEST(StreamOrdered, PreMulSumScalesWhenTheStreamReachesTheCall) {
  constexpr int kRanks = 3;
  constexpr size_t kCount = 70001;  // past one block of scalars (scaleInput)
  double want = 0;
  for (int r = 0; r < kRanks; ++r) want += 0.5 * (r + 1) * (r + 1);
  for (bool device : {false, true}) {
    for (int shape = 0; shape < 3; ++shape) {
      const bool inPlace = shape == 1, scatter = shape == 2;
      SCOPED_TRACE(std::string(device ? "device stand-in" : "host") + (scatter   ? ", reduce-scatter"
                                                                       : inPlace ? ", all-reduce in place"
                                                                                 : ", all-reduce"));
      World w(kRanks, device);
      const size_t inN = scatter ? kCount * kRanks : kCount;
      std::vector<std::vector<double>> in(kRanks, std::vector<double>(inN, -1.0)),
          out(kRanks, std::vector<double>(kCount, 0.0));
      for (int r = 0; r < kRanks; ++r) {
        double scalar = 0.5 * (r + 1);
        tribRedOp_t op;
        ASSERT_EQ(tribRedOpCreatePreMulSum(&op, &scalar, tribFloat64, tribScalarHostImmediate, w.comms[r]),
                  tribSuccess);
        w.stream(r)->enqueue([v = &in[r], r] { std::fill(v->begin(), v->end(), r + 1.0); });
        double* dst = inPlace ? in[r].data() : out[r].data();
        const tribResult_t res =
            scatter ? tribReduceScatter(in[r].data(), dst, kCount, tribFloat64, op, w.comms[r], w.stream(r))
                    : tribAllReduce(in[r].data(), dst, kCount, tribFloat64, op, w.comms[r], w.stream(r));
        ASSERT_EQ(res, tribSuccess) << lastError();
        ASSERT_EQ(tribRedOpDestroy(op, w.comms[r]), tribSuccess);
      }
      ASSERT_TRUE(w.syncAll());
      for (int r = 0; r < kRanks; ++r) {
        tribResult_t async = tribInternalError;
        ASSERT_EQ(tribCommGetAsyncError(w.comms[r], &async), tribSuccess);
        ASSERT_EQ(async, tribSuccess) << "rank " << r;
        const std::vector<double>& got = inPlace ? in[r] : out[r];
        for (size_t i = 0; i < kCount; ++i) ASSERT_EQ(got[i], want) << "rank " << r << " element " << i;
      }
    }
  }
}

// Ranks driven by one thread may share one stream inside a group: every start is marked before
// any hold. A send/receive pair per rank (a ring shift) in the same group.
TEST(StreamOrdered, GroupOfRanksSharesOneStream) {
  constexpr int kRanks = 3;
  World w(kRanks, true);
  HostStream* shared = w.stream(0);
  std::vector<std::vector<float>> in(kRanks, std::vector<float>(300)),
      sum(kRanks, std::vector<float>(300, 0.f)), got(kRanks, std::vector<float>(300, 0.f));
  for (int r = 0; r < kRanks; ++r) std::iota(in[r].begin(), in[r].end(), static_cast<float>(100 * r));
  ASSERT_EQ(tribGroupStart(), tribSuccess);
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(tribAllReduce(in[r].data(), sum[r].data(), 300, tribFloat32, tribSum, w.comms[r], shared),
              tribSuccess)
        << lastError();
    ASSERT_EQ(tribSend(in[r].data(), 300, tribFloat32, (r + 1) % kRanks, w.comms[r], shared), tribSuccess)
        << lastError();
    ASSERT_EQ(tribRecv(got[r].data(), 300, tribFloat32, (r + kRanks - 1) % kRanks, w.comms[r], shared),
              tribSuccess)
        << lastError();
  }
  ASSERT_EQ(tribGroupEnd(), tribSuccess) << lastError();
  ASSERT_TRUE(w.syncAll());
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(got[r], in[(r + kRanks - 1) % kRanks]) << "rank " << r;
    for (size_t i = 0; i < 300; ++i) ASSERT_EQ(sum[r][i], 3.f * i + 300.f) << "rank " << r;
  }
  // The group's calls of each rank are one work: their staging was reserved together.
  EXPECT_GT(w.stagings->load(), 0);
  w.destroy();
  EXPECT_EQ(w.unreservedStagings->load(), 0u);
}

// Only rank 0 calls: its call waits for a peer that never comes until another thread aborts the
// communicator; then the stream's later work runs and the async error says aborted.
TEST(StreamOrdered, AbortReleasesTheStream) {
  World w(2, true);
  std::vector<float> buf(64, 1.f);
  std::atomic<bool> after{false};
  ASSERT_EQ(tribAllReduce(buf.data(), buf.data(), buf.size(), tribFloat32, tribSum, w.comms[0], w.stream(0)),
            tribSuccess)
      << lastError();
  w.stream(0)->enqueue([&] { after = true; });
  EXPECT_FALSE(w.stream(0)->synchronize(milliseconds(300))) << "the call cannot finish without rank 1";
  EXPECT_FALSE(after.load());
  tribResult_t async = tribInternalError;
  ASSERT_EQ(tribCommGetAsyncError(w.comms[0], &async), tribSuccess);
  EXPECT_EQ(async, tribSuccess) << "still running";
  std::thread aborter([&] { EXPECT_EQ(tribCommAbort(w.comms[0]), tribSuccess); });
  const auto t0 = Clock::now();
  EXPECT_TRUE(w.stream(0)->synchronize(milliseconds(10000)));
  aborter.join();
  EXPECT_LT(Clock::now() - t0, milliseconds(5000));
  EXPECT_TRUE(after.load()) << "the stream's later work ran";
  ASSERT_EQ(tribCommGetAsyncError(w.comms[0], &async), tribSuccess);
  EXPECT_EQ(async, tribAborted);
  EXPECT_EQ(tribAllReduce(buf.data(), buf.data(), buf.size(), tribFloat32, tribSum, w.comms[0], w.stream(0)),
            tribAborted);
}

// The communicator's timeout bounds both waits: the peer that never calls, and a stream that never
// reaches the call. Either way the stream goes on and the async error is tribTimeout.
TEST(StreamOrdered, TimeoutReleasesTheStream) {
  for (bool streamStuck : {false, true}) {
    SCOPED_TRACE(streamStuck ? "the stream does not reach the call" : "the peer does not call");
    World w(2, false, 400);
    std::vector<float> buf(64, 1.f);
    std::atomic<bool> release{false}, after{false};
    if (streamStuck)  // stuck past the timeout, then let go (so the test can end)
      w.stream(0)->enqueue([&] {
        while (!release) std::this_thread::sleep_for(milliseconds(5));
      });
    const auto t0 = Clock::now();
    ASSERT_EQ(
        tribAllReduce(buf.data(), buf.data(), buf.size(), tribFloat32, tribSum, w.comms[0], w.stream(0)),
        tribSuccess)
        << lastError();
    if (streamStuck) {  // rank 1 calls too: only the stream is missing
      ASSERT_EQ(
          tribAllReduce(buf.data(), buf.data(), buf.size(), tribFloat32, tribSum, w.comms[1], w.stream(1)),
          tribSuccess);
    }
    w.stream(0)->enqueue([&] { after = true; });
    tribResult_t async = tribSuccess;
    while (Clock::now() - t0 < milliseconds(10000)) {
      ASSERT_EQ(tribCommGetAsyncError(w.comms[0], &async), tribSuccess);
      if (async != tribSuccess) break;
      std::this_thread::sleep_for(milliseconds(10));
    }
    EXPECT_EQ(async, tribTimeout);
    EXPECT_GE(Clock::now() - t0, milliseconds(350));
    release = true;
    EXPECT_TRUE(w.syncAll());
    EXPECT_TRUE(after.load());
    if (streamStuck) {
      // Rank 1 failed too (its peer gave up), bounded by the same timeout.
      ASSERT_EQ(tribCommGetAsyncError(w.comms[1], &async), tribSuccess);
      EXPECT_NE(async, tribSuccess);
    }
  }
}

// A host call (no stream) on a communicator with stream-ordered work in flight waits for it: its
// input here is the stream-ordered call's output.
TEST(StreamOrdered, HostCallWaitsForStreamWork) {
  constexpr int kRanks = 2;
  World w(kRanks, true);
  std::vector<std::vector<float>> in(kRanks, std::vector<float>(100, 0.f)), mid = in, out = in;
  for (int r = 0; r < kRanks; ++r) {
    slowFill(w.stream(r), &in[r], 1.f, milliseconds(100));
    ASSERT_EQ(tribAllReduce(in[r].data(), mid[r].data(), 100, tribFloat32, tribSum, w.comms[r], w.stream(r)),
              tribSuccess);
  }
  ASSERT_EQ(tribGroupStart(), tribSuccess);
  for (int r = 0; r < kRanks; ++r)
    ASSERT_EQ(tribAllReduce(mid[r].data(), out[r].data(), 100, tribFloat32, tribSum, w.comms[r], nullptr),
              tribSuccess)
        << lastError();
  ASSERT_EQ(tribGroupEnd(), tribSuccess) << lastError();
  for (int r = 0; r < kRanks; ++r)
    for (float v : out[r]) ASSERT_EQ(v, 4.f);
  ASSERT_TRUE(w.syncAll());
}

// Destroy finishes (or fails, bounded) what is queued and joins the progress thread: the streams
// go on, and the results are there.
TEST(StreamOrdered, DestroyFinishesQueuedWork) {
  constexpr int kRanks = 2;
  auto w = std::make_unique<World>(kRanks, true);
  std::vector<std::vector<float>> buf(kRanks, std::vector<float>(100, 0.f));
  for (int r = 0; r < kRanks; ++r) {
    slowFill(w->stream(r), &buf[r], 2.f, milliseconds(100));
    for (int k = 0; k < 3; ++k)
      ASSERT_EQ(
          tribAllReduce(buf[r].data(), buf[r].data(), 100, tribFloat32, tribSum, w->comms[r], w->stream(r)),
          tribSuccess);
  }
  w.reset();  // destroys the communicators first, then the streams (each runs what it holds)
  for (int r = 0; r < kRanks; ++r)
    for (float v : buf[r]) ASSERT_EQ(v, 16.f);
}

// Finalize waits for the communicator's stream-ordered calls, then refuses new ones.
TEST(StreamOrdered, FinalizeWaitsForStreamWork) {
  constexpr int kRanks = 2;
  World w(kRanks, true);
  std::vector<std::vector<float>> buf(kRanks, std::vector<float>(100, 0.f));
  std::atomic<int> filled{0};
  for (int r = 0; r < kRanks; ++r) {
    slowFill(w.stream(r), &buf[r], 3.f, milliseconds(100), &filled);
    ASSERT_EQ(tribAllReduce(buf[r].data(), buf[r].data(), 100, tribFloat32, tribSum, w.comms[r], w.stream(r)),
              tribSuccess);
  }
  for (int r = 0; r < kRanks; ++r) ASSERT_EQ(tribCommFinalize(w.comms[r]), tribSuccess) << lastError();
  EXPECT_EQ(filled.load(), kRanks);
  for (int r = 0; r < kRanks; ++r)
    for (float v : buf[r]) ASSERT_EQ(v, 6.f);
  EXPECT_EQ(tribAllReduce(buf[0].data(), buf[0].data(), 100, tribFloat32, tribSum, w.comms[0], w.stream(0)),
            tribInvalidUsage);
  ASSERT_TRUE(w.syncAll());
}

TEST(StreamOrdered, BadCombinationsAreRefused) {
  World w(2, false);
  std::vector<std::vector<float>> a(2, std::vector<float>(16, 1.f)), b(2, std::vector<float>(16, 0.f));
  // Host requests in flight, then a stream-ordered call on the same communicator.
  tribRequest_t req[2] = {nullptr, nullptr};
  ASSERT_EQ(tribIallReduce(a[0].data(), b[0].data(), 16, tribFloat32, tribSum, w.comms[0], &req[0]),
            tribSuccess);
  EXPECT_EQ(tribAllReduce(a[0].data(), b[0].data(), 16, tribFloat32, tribSum, w.comms[0], w.stream(0)),
            tribInvalidUsage);
  EXPECT_NE(lastError().find("non-blocking host-memory request"), std::string::npos) << lastError();
  ASSERT_EQ(tribIallReduce(a[1].data(), b[1].data(), 16, tribFloat32, tribSum, w.comms[1], &req[1]),
            tribSuccess);
  for (auto& r : req) ASSERT_EQ(tribWait(&r, TRIB_TIMEOUT_DEFAULT), tribSuccess) << lastError();
  // Two streams for one communicator in one group.
  HostStream other;
  for (auto& v : a) std::fill(v.begin(), v.end(), 3.f);
  ASSERT_EQ(tribGroupStart(), tribSuccess);
  EXPECT_EQ(tribAllReduce(a[0].data(), b[0].data(), 16, tribFloat32, tribSum, w.comms[0], w.stream(0)),
            tribSuccess);
  EXPECT_EQ(tribAllReduce(a[0].data(), b[0].data(), 16, tribFloat32, tribSum, w.comms[0], &other),
            tribInvalidUsage);
  EXPECT_NE(lastError().find("must use one stream"), std::string::npos) << lastError();
  // A host call after a stream-ordered call of the same communicator in one group.
  EXPECT_EQ(tribAllReduce(a[0].data(), b[0].data(), 16, tribFloat32, tribSum, w.comms[0], nullptr),
            tribInvalidUsage);
  EXPECT_NE(lastError().find("separate groups"), std::string::npos) << lastError();
  EXPECT_EQ(tribAllReduce(a[1].data(), b[1].data(), 16, tribFloat32, tribSum, w.comms[1], w.stream(1)),
            tribSuccess);
  ASSERT_EQ(tribGroupEnd(), tribSuccess) << lastError();
  ASSERT_TRUE(w.syncAll());
  for (auto& v : b)
    for (float e : v) EXPECT_EQ(e, 6.f) << "the group's one call per communicator ran";
  // Mixed memory (host send buffer, device receive buffer): refused before anything runs.
  CollCall mixed;
  mixed.sendKind = MemoryKind::Host;
  mixed.recvKind = MemoryKind::Device;
  const Status st = prepareStreamCall(w.comms[0]->impl(), &mixed, nullptr, nullptr, 0);
  EXPECT_EQ(st.code(), tribInvalidArgument);
  EXPECT_NE(st.message().find("must both be CUDA device memory"), std::string::npos) << st.message();
}

// Without a CUDA device (this build or this machine), a stream gets a clear error, and host calls
// without one are untouched.
TEST(StreamOrdered, WithoutADeviceAStreamSaysSo) {
  if (cuda::deviceStatus().ok()) GTEST_SKIP() << "needs a machine without a CUDA device";
  std::vector<tribComm_t> comms(1);
  ASSERT_EQ(tribCommInitAll(comms.data(), 1, nullptr), tribSuccess);
  std::vector<float> a(8, 1.f), b(8, 0.f);
  int notAStream = 0;  // never dereferenced: the call is refused first
  EXPECT_EQ(tribAllReduce(a.data(), b.data(), 8, tribFloat32, tribSum, comms[0], &notAStream),
            tribUnhandledCudaError);
  EXPECT_NE(lastError().find("no CUDA driver/device"), std::string::npos) << lastError();
  EXPECT_EQ(tribSend(a.data(), 8, tribFloat32, 0, comms[0], &notAStream), tribUnhandledCudaError);
  EXPECT_EQ(b[0], 0.f);
  EXPECT_EQ(tribAllReduce(a.data(), b.data(), 8, tribFloat32, tribSum, comms[0], nullptr), tribSuccess);
  EXPECT_EQ(b[0], 1.f);
  EXPECT_EQ(tribCommDestroy(comms[0]), tribSuccess);
}

// tribCommInitAll's devlist: entries are checked before any rank exists, and a host program's
// NULL devlist needs no CUDA at all.
TEST(StreamOrdered, InitAllChecksItsDevlist) {
  std::vector<tribComm_t> comms(2, nullptr);
  const int negative[2] = {0, -1};
  EXPECT_EQ(tribCommInitAll(comms.data(), 2, negative), tribInvalidArgument);
  EXPECT_NE(lastError().find("devlist[1] is -1"), std::string::npos) << lastError();
  EXPECT_EQ(comms[0], nullptr);
  const int shared[2] = {0, 0};  // two ranks on one GPU
  if (!cuda::deviceStatus().ok()) {
    EXPECT_EQ(tribCommInitAll(comms.data(), 2, shared), tribUnhandledCudaError);
    EXPECT_NE(lastError().find("devlist names CUDA devices, but no CUDA driver/device"), std::string::npos)
        << lastError();
    EXPECT_EQ(comms[0], nullptr);
  } else {
    int count = 0;
    ASSERT_TRUE(cuda::deviceCount(&count).ok());
    const int past[2] = {0, count};
    EXPECT_EQ(tribCommInitAll(comms.data(), 2, past), tribInvalidArgument);
    EXPECT_NE(lastError().find("devlist[1] is device " + std::to_string(count)), std::string::npos)
        << lastError();
    ASSERT_EQ(tribCommInitAll(comms.data(), 2, shared), tribSuccess) << lastError();
    for (tribComm_t c : comms) EXPECT_EQ(tribCommDestroy(c), tribSuccess);
  }
  // NULL: host ranks, as always.
  ASSERT_EQ(tribCommInitAll(comms.data(), 2, nullptr), tribSuccess) << lastError();
  for (tribComm_t c : comms) EXPECT_EQ(tribCommDestroy(c), tribSuccess);
}

// A refused send or receive takes no sequence number: the pair's next messages still match (a
// shifted number would leave them waiting for each other until the timeout).
TEST(StreamOrdered, ARefusedStreamSendShiftsNoSequence) {
  if (cuda::deviceStatus().ok()) GTEST_SKIP() << "needs a machine without a CUDA device";
  tribUniqueId id;
  ASSERT_EQ(tribGetUniqueId(&id), tribSuccess);
  tribConfig_t cfg = TRIB_CONFIG_INITIALIZER;
  cfg.timeoutMs = 5000;
  tribComm_t comm = nullptr;
  ASSERT_EQ(tribCommInitRankConfig(&comm, 1, id, 0, &cfg), tribSuccess) << lastError();
  std::vector<float> a(8, 3.f), b(8, 0.f);
  int notAStream = 0;  // never dereferenced: the call is refused first
  EXPECT_EQ(tribSend(a.data(), 8, tribFloat32, 0, comm, &notAStream), tribUnhandledCudaError);
  ASSERT_EQ(tribGroupStart(), tribSuccess);
  EXPECT_EQ(tribSend(a.data(), 8, tribFloat32, 0, comm, nullptr), tribSuccess);
  EXPECT_EQ(tribRecv(b.data(), 8, tribFloat32, 0, comm, nullptr), tribSuccess);
  EXPECT_EQ(tribGroupEnd(), tribSuccess) << lastError();
  EXPECT_EQ(b[7], 3.f);
  EXPECT_EQ(tribCommDestroy(comm), tribSuccess);
}

}  // namespace
}  // namespace trib
