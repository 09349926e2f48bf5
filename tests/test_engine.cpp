// Engines and the scratch pool: local steps are posted and complete asynchronously, the executor
// orders them like communication steps, and scratch is reused, not reallocated, call after call.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <set>
#include <vector>

#include "exec/engine.hpp"
#include "exec/executor.hpp"
#include "exec/scratch_pool.hpp"
#include "exec/staging_pool.hpp"
#include "exec/window_write_modes.hpp"

namespace trib {
namespace {

// Per size class: two untimed plain runs, eight alternating, then the faster mode, re-trying
// each once every 16 runs; other size classes learn separately.
TEST(WindowWriteModes, ExploresThenTakesTheFaster) {
  WindowWriteModes modes(-1);
  const uint64_t big = 4 << 20;
  std::vector<bool> seen;
  for (int run = 0; run < 10; ++run) {
    const bool streaming = modes.choose(big);
    seen.push_back(streaming);
    modes.record(big, streaming, streaming ? 1e6 : 3e6);  // streaming 3x faster
  }
  EXPECT_EQ(seen, (std::vector<bool>{false, false, true, false, true, false, true, false, true, false}));
  int streamed = 0;
  for (int run = 10; run < 42; ++run) {
    const bool streaming = modes.choose(big);
    if (run % 16 == 1) {
      EXPECT_FALSE(streaming) << run;  // the plain re-try
    }
    streamed += streaming;
    modes.record(big, streaming, streaming ? 1e6 : 3e6);
  }
  EXPECT_EQ(streamed, 30);  // every run but the two plain re-tries
  // Now plain gets faster (the ranks moved onto cores that share a cache): it takes over.
  for (int run = 42; run < 80; ++run) {
    const bool streaming = modes.choose(big);
    modes.record(big, streaming, streaming ? 3e6 : 1e6);
  }
  int plain = 0;
  for (int run = 80; run < 96; ++run) {
    const bool streaming = modes.choose(big);
    plain += !streaming;
    modes.record(big, streaming, streaming ? 3e6 : 1e6);
  }
  EXPECT_EQ(plain, 15);  // all but the streaming re-try
  // Another size class has measured nothing: it starts over.
  EXPECT_FALSE(modes.choose(big * 2));
}

TEST(WindowWriteModes, SmallCallsWritePlainlyAndForcedModesHold) {
  WindowWriteModes automatic(-1), never(0), always(1);
  for (int run = 0; run < 40; ++run) {
    EXPECT_FALSE(automatic.choose(WindowWriteModes::kMeasuredFromBytes - 1));
    EXPECT_FALSE(never.choose(64 << 20));
    EXPECT_TRUE(always.choose(64));
    never.record(64 << 20, false, 1e9);
    always.record(64, true, 1e9);
  }
}

TEST(HostEngine, RunsInlineAndExactly) {
  Engine& e = hostEngine();
  float a[8] = {1, 2, 3, 4, 5, 6, 7, 8}, b[8] = {8, 7, 6, 5, 4, 3, 2, 1}, c[8] = {};
  TransferOp op1, op2, op3, op4;
  ASSERT_TRUE(e.postReduce(c, a, b, 8, tribFloat32, tribSum, &op1).ok());
  EXPECT_EQ(op1.state.load(), TransferOp::kDone);
  for (float x : c) EXPECT_EQ(x, 9.0f);
  ASSERT_TRUE(e.postDivide(c, 8, tribFloat32, 3, &op2).ok());
  EXPECT_TRUE(op2.done());
  EXPECT_EQ(c[0], 3.0f);
  ASSERT_TRUE(e.postCopy(a + 1, a, 7 * sizeof(float), &op3, true).ok());  // overlapping: memmove
  EXPECT_TRUE(op3.done());
  EXPECT_EQ(a[1], 1.0f);
  EXPECT_EQ(a[7], 7.0f);
  int32_t n[2] = {-7, 7};
  ASSERT_TRUE(e.postDivide(n, 2, tribInt32, 2, &op4).ok());
  EXPECT_EQ(n[0], -3);
  EXPECT_EQ(n[1], 3);
}

// An engine that finishes nothing until progress() is called, one operation per call: the
// executor must wait for a posted local step it depends on, as for a receive.
class DeferredEngine final : public Engine {
 public:
  const char* name() const override { return "deferred"; }
  MemoryKind memory() const override { return MemoryKind::Host; }
  Status postCopy(void* dst, const void* src, size_t bytes, TransferOp* op, bool) override {
    queue_.push_back([=] {
      std::memmove(dst, src, bytes);
      op->complete();
    });
    ++posted;
    return Status::Ok();
  }
  Status postReduce(void* dst, const void* a, const void* b, uint64_t count, DataType dtype, RedOp rop,
                    TransferOp* op) override {
    queue_.push_back([=] {
      TransferOp inner;
      (void)hostEngine().postReduce(dst, a, b, count, dtype, rop, &inner);
      op->complete();
    });
    ++posted;
    return Status::Ok();
  }
  Status postDivide(void* buf, uint64_t count, DataType dtype, uint64_t divisor, TransferOp* op) override {
    queue_.push_back([=] {
      TransferOp inner;
      (void)hostEngine().postDivide(buf, count, dtype, divisor, &inner);
      op->complete();
    });
    ++posted;
    return Status::Ok();
  }
  Status progress() override {
    if (!queue_.empty()) {
      queue_.front()();
      queue_.pop_front();
    }
    return Status::Ok();
  }
  void* allocScratch(size_t bytes) override { return hostEngine().allocScratch(bytes); }
  void freeScratch(void* p, size_t bytes) override { hostEngine().freeScratch(p, bytes); }
  size_t inFlight() const { return queue_.size(); }
  int posted = 0;

 private:
  std::deque<std::function<void()>> queue_;
};

TEST(Executor, WaitsForPostedLocalStepsAndDividesLast) {
  // One rank: scratch <- in; scratch += in; out <- scratch; out /= 4 (avg).
  const float in[4] = {1, 2, 3, 4};
  float out[4] = {}, scratch[4] = {};
  auto steps = std::make_shared<const std::vector<Step>>(std::vector<Step>{
      Step::copy({Buf::Input, 0, 4}, {Buf::Scratch, 0, 4}),
      Step::reduce({Buf::Input, 0, 4}, {Buf::Scratch, 0, 4}),
      Step::copy({Buf::Scratch, 0, 4}, {Buf::Output, 0, 4}),
  });
  DeferredEngine engine;
  ExecOptions o;
  o.engine = &engine;
  o.avgDivisor = 4;
  o.avgRegion = {Buf::Output, 0, 4};
  std::vector<Transport*> peers(1, nullptr);
  Execution ex(steps, ExecBuffers{in, out, scratch, 4, 4, 4}, peers, o);
  ASSERT_TRUE(ex.start().ok());
  EXPECT_EQ(engine.posted, 1);  // the reduce and copy conflict with the copy before them
  bool done = false;
  for (int i = 0; i < 100 && !done; ++i) {
    EXPECT_LE(engine.inFlight(), 1u) << "a dependent step was posted before its predecessor finished";
    ASSERT_TRUE(ex.progress(&done).ok());
  }
  ASSERT_TRUE(done);
  // The copy and the reduce into the same scratch run as one reduce of both sources (the
  // executor fuses them: same bits, one pass), then the copy out and the division.
  EXPECT_EQ(engine.posted, 3);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], (2.0f * in[i]) / 4) << i;
}

TEST(ScratchPool, ReusesBuffersAndBoundsWhatItKeeps) {
  ScratchPool pool(hostEngine());
  Scratch a;
  ASSERT_TRUE(pool.acquire(1000, &a).ok());
  ASSERT_NE(a.data(), nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % 64, 0u);
  void* first = a.data();
  a.release();
  Scratch b;
  ASSERT_TRUE(pool.acquire(900, &b).ok());
  EXPECT_EQ(b.data(), first) << "a released buffer of the same rounded size is reused";
  // Leases held at once are distinct; released, at most a few per class stay cached.
  std::vector<Scratch> many(10);
  std::set<void*> seen{b.data()};
  for (auto& s : many) {
    ASSERT_TRUE(pool.acquire(1000, &s).ok());
    EXPECT_TRUE(seen.insert(s.data()).second);
  }
  many.clear();
  b.release();
  EXPECT_LE(pool.cachedBuffers(), 2u);
  // Large leases: at most a quarter more than asked is allocated, and idle memory is bounded.
  Scratch big;
  ASSERT_TRUE(pool.acquire((size_t{1} << 30) + 1, &big).ok());
  EXPECT_EQ(big.capacity(), (size_t{5} << 28)) << "1 GiB + 1 byte takes 1.25 GiB, not 2 GiB";
  big.release();
  EXPECT_LE(pool.cachedBuffers(), 2u) << "a released 1.25 GiB buffer is not kept past the idle budget";
  Scratch none;
  ASSERT_TRUE(pool.acquire(0, &none).ok());
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(pool.acquire(SIZE_MAX, &none).code(), tribInvalidArgument);
}

// Reserved staging is taken without allocating; reserve() counts what the pool holds (idle or
// taken), so reserving the same needs again allocates nothing; a failed allocation is an error.
TEST(StagingPool, ReservedBuffersAreTakenWithoutAllocating) {
  std::vector<size_t> allocated;
  bool outOfMemory = false;
  {
    StagingPool pool(
        [&](size_t bytes) -> void* {
          if (outOfMemory) return nullptr;
          allocated.push_back(bytes);
          return hostEngine().allocScratch(bytes);
        },
        [](void* p) { hostEngine().freeScratch(p, 0); });
    EXPECT_EQ(StagingPool::sizeClass(1), 4096u);
    EXPECT_EQ(StagingPool::sizeClass(5000), 8192u);
    ASSERT_TRUE(pool.reserve({100, 5000, 5000, 3000}).ok());
    EXPECT_EQ(allocated, (std::vector<size_t>{4096, 4096, 8192, 8192}));
    void* a = pool.take(5000);
    void* b = pool.take(6000);
    void* c = pool.take(4096);
    EXPECT_NE(a, b);
    EXPECT_EQ(pool.allocationsOnTake(), 0u);
    ASSERT_TRUE(pool.reserve({5000, 5000}).ok()) << "both 8 KiB buffers exist, though taken";
    EXPECT_EQ(allocated.size(), 4u);
    void* d = pool.take(8000);  // the third 8 KiB buffer: allocated now, and counted
    EXPECT_EQ(pool.allocationsOnTake(), 1u);
    EXPECT_EQ(allocated.size(), 5u);
    pool.give(a, 5000);
    pool.give(b, 6000);
    void* e = pool.take(7000);
    EXPECT_TRUE(e == a || e == b) << "given back, taken again";
    EXPECT_EQ(pool.allocationsOnTake(), 1u);
    pool.give(c, 4096);
    pool.give(d, 8000);
    outOfMemory = true;
    const Status st = pool.reserve({1 << 20});
    EXPECT_EQ(st.code(), tribSystemError);
    EXPECT_NE(st.message().find("1048576 bytes"), std::string::npos) << st.message();
    EXPECT_EQ(pool.take(1 << 20), nullptr);
  }
}

// An engine that says it works on device memory and runs on the host (float sums only):
// what the executor stages and where it reduces, without a GPU. Counts what it was asked for.
class PretendDeviceEngine final : public Engine {
 public:
  const char* name() const override { return "pretend-device"; }
  MemoryKind memory() const override { return MemoryKind::Device; }
  Status postCopy(void* dst, const void* src, size_t bytes, TransferOp* op, bool) override {
    std::memcpy(dst, src, bytes);
    op->complete();
    return Status::Ok();
  }
  Status postReduce(void* dst, const void* a, const void* b, uint64_t count, DataType, RedOp,
                    TransferOp* op) override {
    ++reduces;
    for (uint64_t k = 0; k < count; ++k)
      static_cast<float*>(dst)[k] = static_cast<const float*>(a)[k] + static_cast<const float*>(b)[k];
    op->complete();
    return Status::Ok();
  }
  Status postDivide(void*, uint64_t, DataType, uint64_t, TransferOp*) override {
    return errorf(tribInternalError, "not used by this test");
  }
  Status progress() override { return Status::Ok(); }
  void* allocScratch(size_t bytes) override {
    ++scratches;
    return ::operator new(bytes);
  }
  void freeScratch(void* p, size_t) override { ::operator delete(p); }
  void* allocHostStaging(size_t bytes) override {
    ++stagings;
    return ::operator new(bytes);
  }
  void freeHostStaging(void* p, size_t) override { ::operator delete(p); }
  int scratches = 0, stagings = 0, reduces = 0;
};

// The memory kind travels into the executor: a step the engine or the transport cannot reach is
// refused when the execution starts, with the kinds named, before anything is touched.
TEST(Executor, RefusesMemoryItsEngineOrTransportCannotReach) {
  float in[4] = {1, 2, 3, 4}, out[4] = {};
  auto copy = std::make_shared<const std::vector<Step>>(
      std::vector<Step>{Step::copy({Buf::Input, 0, 4}, {Buf::Output, 0, 4})});
  std::vector<Transport*> none(1, nullptr);
  ExecOptions o;
  o.outputKind = MemoryKind::Device;
  Execution onHost(copy, ExecBuffers{in, out, nullptr, 4, 4, 0}, none, o);
  Status st = onHost.start();
  EXPECT_EQ(st.code(), tribInvalidUsage);
  EXPECT_NE(st.message().find("device"), std::string::npos) << st.message();
  EXPECT_EQ(out[0], 0.0f);  // nothing ran
  // A send from device memory over a transport that reaches host memory only.
  class HostOnly final : public Transport {
   public:
    const char* name() const override { return "host-only"; }
    Status postSend(int, uint64_t, const void*, size_t, TransferOp* op) override {
      op->complete();
      return Status::Ok();
    }
    Status postRecv(int, uint64_t, void*, size_t, const ReduceSpec*, TransferOp* op) override {
      op->complete();
      return Status::Ok();
    }
    Status progress() override { return Status::Ok(); }
    void abort(const Status&) override {}
  } hostOnly;
  std::vector<Transport*> peers = {nullptr, &hostOnly};
  auto send = std::make_shared<const std::vector<Step>>(std::vector<Step>{Step::send(1, {Buf::Input, 0, 4})});
  ExecOptions d;
  d.rank = 0;
  d.nranks = 2;
  d.inputKind = MemoryKind::Registered;
  Execution fine(send, ExecBuffers{in, out, nullptr, 4, 4, 0}, peers, d);
  EXPECT_TRUE(fine.start().ok());  // registered host memory: reachable
  // A transport that does not reach a host kind refuses it (no engine can stage host memory).
  hostOnly.setMemoryReach(memoryKindBit(MemoryKind::Host), kHostMemoryKinds);
  {
    Execution e(send, ExecBuffers{in, out, nullptr, 4, 4, 0}, peers, d);
    const Status result = e.start();
    EXPECT_EQ(result.code(), tribInvalidUsage);
    EXPECT_NE(result.message().find("host-only transport cannot send from registered memory"),
              std::string::npos)
        << result.message();
  }
  hostOnly.setMemoryReach(kHostMemoryKinds, kHostMemoryKinds);
  // An engine of device memory passes the engine's check; device memory the transport cannot
  // reach goes through the engine's host staging: sent from a copy, received there and copied in.
  PretendDeviceEngine device;
  d.engine = &device;
  d.inputKind = MemoryKind::Device;
  {
    Execution e(send, ExecBuffers{in, out, nullptr, 4, 4, 0}, peers, d);
    EXPECT_TRUE(e.start().ok());
    EXPECT_EQ(device.stagings, 1) << "the send went from host staging";
    EXPECT_EQ(e.stagedBytes(), sizeof in);
  }
  // A transport that reaches device memory sends from it directly.
  hostOnly.setMemoryReach(kHostMemoryKinds | memoryKindBit(MemoryKind::Device), kHostMemoryKinds);
  {
    Execution e(send, ExecBuffers{in, out, nullptr, 4, 4, 0}, peers, d);
    EXPECT_TRUE(e.start().ok());
    EXPECT_EQ(device.stagings, 1) << "no staging";
  }
  auto recv =
      std::make_shared<const std::vector<Step>>(std::vector<Step>{Step::recv(1, {Buf::Output, 0, 4})});
  d.inputKind = MemoryKind::Host;
  d.outputKind = MemoryKind::Device;
  {
    Execution e(recv, ExecBuffers{in, out, nullptr, 4, 4, 0}, peers, d);
    EXPECT_TRUE(e.start().ok());
    bool done = false;
    for (int i = 0; i < 10 && !done; ++i) ASSERT_TRUE(e.progress(&done).ok());
    EXPECT_TRUE(done);
    EXPECT_EQ(device.stagings, 2) << "the receive landed in host staging";
  }
}

// A transport that receives into device memory but reduces only into host memory (verbs with
// GPUDirect RDMA: it combines on the CPU): a receive-reduce into device memory lands plain bytes
// in the engine's (device) scratch and the engine reduces them into place; where it does not
// receive into device memory either, in host staging. The kind of what it is posted travels with
// the op (TransferOp::memory), so the transport asks no driver.
TEST(Executor, ReduceReceiveIntoDeviceMemoryGoesThroughTheEngine) {
  struct Posted {
    bool send = false;
    const void* buf = nullptr;
    bool reduce = false;
    MemoryKind memory = MemoryKind::Host;
  };
  class Nic final : public Transport {
   public:
    const char* name() const override { return "nic"; }
    Status postSend(int, uint64_t, const void* buf, size_t, TransferOp* op) override {
      posted.push_back({true, buf, false, op->memory});
      op->complete();
      return Status::Ok();
    }
    Status postRecv(int, uint64_t, void* buf, size_t bytes, const ReduceSpec* reduce,
                    TransferOp* op) override {
      posted.push_back({false, buf, reduce != nullptr, op->memory});
      const float incoming[4] = {10, 20, 30, 40};
      if (reduce) {  // as verbs does: the CPU combines
        for (size_t k = 0; k < bytes / sizeof(float); ++k)
          static_cast<float*>(buf)[k] = static_cast<const float*>(reduce->local)[k] + incoming[k];
      } else {
        std::memcpy(buf, incoming, bytes);
      }
      op->complete();
      return Status::Ok();
    }
    Status progress() override { return Status::Ok(); }
    void abort(const Status&) override {}
    std::vector<Posted> posted;
  } nic;
  PretendDeviceEngine device;
  const MemoryKindSet hostAndDevice = kHostMemoryKinds | memoryKindBit(MemoryKind::Device);
  std::vector<Transport*> peers = {nullptr, &nic};
  // Output += what rank 1 sends, then the output back to rank 1.
  auto steps = std::make_shared<const std::vector<Step>>(std::vector<Step>{
      Step::recvReduce(1, {Buf::Input, 0, 4}, {Buf::Output, 0, 4}), Step::send(1, {Buf::Output, 0, 4})});
  ExecOptions o;
  o.rank = 0;
  o.nranks = 2;
  o.engine = &device;
  o.inputKind = o.outputKind = MemoryKind::Device;
  const auto run = [&](float* out, std::vector<size_t>* needs) {
    float in[4] = {1, 2, 3, 4};
    std::memset(out, 0, 4 * sizeof(float));
    nic.posted.clear();
    needs->clear();
    addHostStagingNeeds(*steps, peers, o, needs);
    Execution e(steps, ExecBuffers{in, out, nullptr, 4, 4, 0}, peers, o);
    ASSERT_TRUE(e.start().ok());
    bool done = false;
    for (int i = 0; i < 10 && !done; ++i) ASSERT_TRUE(e.progress(&done).ok());
    ASSERT_TRUE(done);
    EXPECT_EQ(out[0], 11.0f);
    EXPECT_EQ(out[3], 44.0f);
  };
  float out[4];
  std::vector<size_t> needs;

  // Receives into and sends from device memory, reduces into host memory only.
  nic.setMemoryReach(hostAndDevice, hostAndDevice, kHostMemoryKinds);
  run(out, &needs);
  ASSERT_EQ(nic.posted.size(), 2u);
  EXPECT_FALSE(nic.posted[0].reduce) << "the transport was asked to reduce into device memory";
  EXPECT_EQ(nic.posted[0].memory, MemoryKind::Device) << "it receives into the engine's scratch";
  EXPECT_NE(nic.posted[0].buf, out);
  EXPECT_EQ(device.scratches, 1);
  EXPECT_EQ(device.stagings, 0);
  EXPECT_EQ(device.reduces, 1) << "the engine reduced";
  EXPECT_TRUE(needs.empty()) << "no host staging to reserve";
  EXPECT_TRUE(nic.posted[1].send);
  EXPECT_EQ(nic.posted[1].buf, out) << "sent from device memory itself";
  EXPECT_EQ(nic.posted[1].memory, MemoryKind::Device);

  // Host memory only: the receive lands in host staging, the send goes from a host copy.
  nic.setMemoryReach(kHostMemoryKinds, kHostMemoryKinds, kHostMemoryKinds);
  run(out, &needs);
  ASSERT_EQ(nic.posted.size(), 2u);
  EXPECT_FALSE(nic.posted[0].reduce);
  EXPECT_EQ(nic.posted[0].memory, MemoryKind::Host);
  EXPECT_EQ(device.scratches, 1);
  EXPECT_GE(device.stagings, 1) << "host staging (the send may reuse the receive's)";
  EXPECT_EQ(device.reduces, 2);
  EXPECT_EQ(needs.size(), 2u);
  EXPECT_NE(nic.posted[1].buf, out);
  EXPECT_EQ(nic.posted[1].memory, MemoryKind::Host);

  // A transport that reduces into device memory itself is given the reduction.
  nic.setMemoryReach(hostAndDevice, hostAndDevice, hostAndDevice);
  const int staged = device.scratches + device.stagings;
  run(out, &needs);
  EXPECT_TRUE(nic.posted[0].reduce);
  EXPECT_EQ(nic.posted[0].buf, out);
  EXPECT_EQ(nic.posted[0].memory, MemoryKind::Device);
  EXPECT_EQ(device.reduces, 2) << "no engine reduction";
  EXPECT_EQ(device.scratches + device.stagings, staged) << "no staging";

  // Host memory on the host engine: the transport reduces in place, as before.
  o.engine = nullptr;
  o.inputKind = o.outputKind = MemoryKind::Host;
  nic.setMemoryReach(hostAndDevice, hostAndDevice, kHostMemoryKinds);
  run(out, &needs);
  EXPECT_TRUE(nic.posted[0].reduce);
  EXPECT_EQ(nic.posted[0].buf, out);
  EXPECT_EQ(nic.posted[0].memory, MemoryKind::Host);
}

}  // namespace
}  // namespace trib
