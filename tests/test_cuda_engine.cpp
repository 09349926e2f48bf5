// The CUDA engine (src/cuda) against the CPU reducer, bit for bit, for every dtype x op and the avg
// division, at aligned, misaligned and odd sizes, in and out of place; device memory recognised by
// the API. On a machine without a CUDA device (or a build without CUDA) the device tests report
// SKIPPED ("needs a CUDA device"), and what must hold there is checked instead: clear errors, host
// memory still host.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/registration.hpp"
#include "cuda/cuda_api.hpp"
#include "reduce/reduce.hpp"
#include "reduce_util.hpp"
#include "tributary/tributary.h"

namespace trib {
namespace {

// A CUDA engine on device 0, or a skip that says why there is none.
#define TRIB_NEED_DEVICE(engine)                            \
  std::unique_ptr<Engine> engine;                           \
  if (Status st = cuda::createEngine(0, &engine); !st.ok()) \
  GTEST_SKIP() << "needs a CUDA device: " << st.message()

// Device memory from the engine, freed with it.
struct DeviceBuffer {
  Engine* engine;
  size_t bytes;
  char* p;
  DeviceBuffer(Engine* e, size_t n) : engine(e), bytes(n), p(static_cast<char*>(e->allocScratch(n))) {}
  ~DeviceBuffer() { engine->freeScratch(p, bytes); }
};

Status run(Engine& e, const std::function<Status(TransferOp*)>& post) {
  TransferOp op;
  TRIB_RETURN_IF_ERROR(post(&op));
  TRIB_RETURN_IF_ERROR(cuda::synchronize(e));
  if (!op.done()) return errorf(tribInternalError, "op not complete after the stream synchronised");
  return op.state.load() == TransferOp::kDone ? Status::Ok() : op.error;
}
Status upload(Engine& e, void* dst, const void* src, size_t bytes) {
  return run(e, [&](TransferOp* op) { return e.postCopy(dst, src, bytes, op, false); });
}
Status download(Engine& e, void* dst, const void* src, size_t bytes) {
  return run(e, [&](TransferOp* op) { return e.postCopy(dst, src, bytes, op, false); });
}

// n elements of dt: the edge values in turn, mixed with random bit patterns.
std::vector<uint8_t> inputs(DataType dt, size_t n, uint32_t seed) {
  const std::vector<uint8_t> edges = edgeValues(dt);
  const size_t sz = dataTypeSize(dt), ne = edges.size() / sz;
  std::vector<uint8_t> out(n * sz);
  std::mt19937 rng(seed);
  for (size_t i = 0; i < n; ++i) {
    if (rng() % 2)
      std::memcpy(&out[i * sz], &edges[(rng() % ne) * sz], sz);
    else
      for (size_t k = 0; k < sz; ++k) out[i * sz + k] = static_cast<uint8_t>(rng());
  }
  return out;
}

TEST(CudaEngine, WithoutADeviceSaysSoClearly) {
  if (cuda::deviceStatus().ok()) GTEST_SKIP() << "needs a machine without a CUDA device";
  std::unique_ptr<Engine> engine;
  const Status st = cuda::createEngine(0, &engine);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), tribUnhandledCudaError);
  EXPECT_NE(st.message().find("no CUDA driver/device"), std::string::npos) << st.message();
  EXPECT_EQ(engine, nullptr);
  EXPECT_EQ(cuda::deviceStatus().message(), st.message()) << "the same answer every time";
}

// Host memory stays host in every build, with or without a driver: nothing faults or prints.
TEST(CudaMemory, HostBuffersClassifyAsHost) {
  std::vector<float> heap(1024);
  float stack[16] = {};
  void* big = std::malloc(64 << 20);
  ASSERT_NE(big, nullptr);
  for (int round = 0; round < 2; ++round) {  // the first call may probe the driver; the second reuses it
    EXPECT_FALSE(cuda::isDevicePointer(heap.data()));
    EXPECT_FALSE(cuda::isDevicePointer(stack));
    EXPECT_FALSE(cuda::isDevicePointer(big));
    EXPECT_FALSE(cuda::isDevicePointer(nullptr));
    EXPECT_EQ(classifyMemory(heap.data(), heap.size() * 4, nullptr), MemoryKind::Host);
    EXPECT_EQ(classifyMemory(stack, sizeof stack, nullptr), MemoryKind::Host);
    EXPECT_EQ(classifyMemory(big, 64 << 20, nullptr), MemoryKind::Host);
  }
  std::free(big);
}

TEST(CudaEngine, EveryDtypeOpMatchesTheCpuReducerBitForBit) {
  TRIB_NEED_DEVICE(engine);
  EXPECT_EQ(engine->memory(), MemoryKind::Device);
  const size_t counts[] = {1, 3, 17, 4093, (size_t{1} << 20) + 7};
  // Byte offsets of dst, a, b: aligned, all misaligned alike (scalar head), misaligned apart
  // (all scalar), and an offset of one element.
  struct Offsets {
    size_t d, a, b;
  };
  for (int t = 0; t < tribNumTypes; ++t) {
    const DataType dt = static_cast<DataType>(t);
    const size_t sz = dataTypeSize(dt);
    const Offsets offsets[] = {
        {0, 0, 0}, {sz, sz, sz}, {0, sz, 2 * sz}, {8 % 16 / sz * sz, 0, 8 % 16 / sz * sz}};
    for (int o = 0; o < tribNumOps; ++o) {
      const RedOp op = static_cast<RedOp>(o);
      for (size_t n : counts) {
        const std::vector<uint8_t> a = inputs(dt, n, 11 * t + o), b = inputs(dt, n, 7 * t + o + 1000);
        std::vector<uint8_t> want(n * sz);
        reduce(want.data(), a.data(), b.data(), n, dt, op);
        for (const Offsets& off : offsets) {
          const std::string what = std::string(dataTypeName(dt)) + " " + redOpName(op) +
                                   " n=" + std::to_string(n) + " offsets " + std::to_string(off.d) + "/" +
                                   std::to_string(off.a) + "/" + std::to_string(off.b);
          DeviceBuffer da(engine.get(), n * sz + 64), db(engine.get(), n * sz + 64),
              dd(engine.get(), n * sz + 64);
          ASSERT_TRUE(da.p && db.p && dd.p) << what;
          ASSERT_TRUE(upload(*engine, da.p + off.a, a.data(), a.size()).ok()) << what;
          ASSERT_TRUE(upload(*engine, db.p + off.b, b.data(), b.size()).ok()) << what;
          const Status st = run(*engine, [&](TransferOp* x) {
            return engine->postReduce(dd.p + off.d, da.p + off.a, db.p + off.b, n, dt, op, x);
          });
          ASSERT_TRUE(st.ok()) << what << ": " << st.message();
          std::vector<uint8_t> got(n * sz);
          ASSERT_TRUE(download(*engine, got.data(), dd.p + off.d, got.size()).ok()) << what;
          for (size_t i = 0; i < n; ++i)
            ASSERT_EQ(0, std::memcmp(&got[i * sz], &want[i * sz], sz)) << what << " element " << i;
          // In place (dst == a).
          ASSERT_TRUE(run(*engine, [&](TransferOp* x) {
                        return engine->postReduce(da.p + off.a, da.p + off.a, db.p + off.b, n, dt, op, x);
                      }).ok());
          ASSERT_TRUE(download(*engine, got.data(), da.p + off.a, got.size()).ok()) << what;
          ASSERT_EQ(got, want) << what << " in place";
        }
      }
    }
  }
}

TEST(CudaEngine, AvgDivisionMatchesTheCpuReducerBitForBit) {
  TRIB_NEED_DEVICE(engine);
  const uint64_t divisors[] = {2, 3, 7, (uint64_t{1} << 32) + 1, ~uint64_t{0}};
  for (int t = 0; t < tribNumTypes; ++t) {
    const DataType dt = static_cast<DataType>(t);
    const size_t sz = dataTypeSize(dt), n = 4099;
    for (uint64_t d : divisors) {
      std::vector<uint8_t> want = inputs(dt, n, t + 5);
      const std::vector<uint8_t> in = want;
      avgFinalize(want.data(), n, dt, d);
      DeviceBuffer buf(engine.get(), n * sz + sz);
      ASSERT_TRUE(buf.p);
      for (size_t off : {size_t{0}, sz}) {
        ASSERT_TRUE(upload(*engine, buf.p + off, in.data(), in.size()).ok());
        ASSERT_TRUE(
            run(*engine, [&](TransferOp* x) { return engine->postDivide(buf.p + off, n, dt, d, x); }).ok());
        std::vector<uint8_t> got(n * sz);
        ASSERT_TRUE(download(*engine, got.data(), buf.p + off, got.size()).ok());
        ASSERT_EQ(got, want) << dataTypeName(dt) << " / " << d << " offset " << off;
      }
    }
  }
}

TEST(CudaEngine, OverlappingCopyIsAMemmove) {
  TRIB_NEED_DEVICE(engine);
  std::vector<uint8_t> host(1 << 20);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<uint8_t>(i * 7 + 3);
  DeviceBuffer buf(engine.get(), host.size() + 4096);
  ASSERT_TRUE(buf.p);
  ASSERT_TRUE(upload(*engine, buf.p, host.data(), host.size()).ok());
  ASSERT_TRUE(run(*engine, [&](TransferOp* x) {
                return engine->postCopy(buf.p + 4096, buf.p, host.size(), x, true);
              }).ok());
  std::vector<uint8_t> got(host.size());
  ASSERT_TRUE(download(*engine, got.data(), buf.p + 4096, got.size()).ok());
  EXPECT_EQ(got, host);
}

// Device memory is recognised; the request form refuses it, naming the stream-ordered form
// (test_cuda_stream runs that).
TEST(CudaMemory, DevicePointersClassifyAsDeviceAndRequestsSayWhatToUse) {
  TRIB_NEED_DEVICE(engine);
  DeviceBuffer buf(engine.get(), 4096);
  ASSERT_TRUE(buf.p);
  EXPECT_TRUE(cuda::isDevicePointer(buf.p));
  EXPECT_EQ(cuda::deviceOf(buf.p), 0);
  EXPECT_EQ(classifyMemory(buf.p, 4096, nullptr), MemoryKind::Device);
  std::vector<float> host(1024);
  EXPECT_EQ(classifyMemory(host.data(), 4096, nullptr), MemoryKind::Host);
  EXPECT_EQ(cuda::deviceOf(host.data()), -1);
  tribComm_t comm;
  ASSERT_EQ(tribCommInitAll(&comm, 1, nullptr), tribSuccess);
  tribRequest_t req = nullptr;
  EXPECT_EQ(tribIallReduce(buf.p, buf.p, 1024, tribFloat32, tribSum, comm, &req), tribInvalidUsage);
  const std::string msg = tribGetLastError(comm);
  EXPECT_NE(msg.find("device memory"), std::string::npos) << msg;
  EXPECT_NE(msg.find("stream-ordered"), std::string::npos) << msg;
  EXPECT_EQ(tribIsend(buf.p, 16, tribFloat32, 0, comm, &req), tribInvalidUsage);
  EXPECT_NE(std::string(tribGetLastError(comm)).find("device memory"), std::string::npos);
  EXPECT_EQ(tribCommDestroy(comm), tribSuccess);
}

}  // namespace
}  // namespace trib
