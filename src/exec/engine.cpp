#include "exec/engine.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <string>

#include "reduce/reduce.hpp"

namespace trib {
namespace {

class HostEngine final : public Engine {
 public:
  const char* name() const override { return "host"; }
  MemoryKind memory() const override { return MemoryKind::Host; }
  Status postCopy(void* dst, const void* src, size_t bytes, TransferOp* op, bool aroundCache) override {
    const auto d = reinterpret_cast<uintptr_t>(dst), s = reinterpret_cast<uintptr_t>(src);
    if (aroundCache && (d + bytes <= s || s + bytes <= d))
      copyStreaming(dst, src, bytes);
    else if (bytes)
      std::memmove(dst, src, bytes);
    op->complete();
    return Status::Ok();
  }
  Status postReduce(void* dst, const void* a, const void* b, uint64_t count, DataType dtype, RedOp rop,
                    TransferOp* op) override {
    reduce(dst, a, b, count, dtype, rop);
    op->complete();
    return Status::Ok();
  }
  Status postDivide(void* buf, uint64_t count, DataType dtype, uint64_t divisor, TransferOp* op) override {
    avgFinalize(buf, count, dtype, divisor);
    op->complete();
    return Status::Ok();
  }
  Status progress() override { return Status::Ok(); }
  // 64-byte aligned: the reducer's vector loads, and no false sharing with neighbours.
  void* allocScratch(size_t bytes) override {
    return ::operator new (bytes ? bytes : 1, std::align_val_t{64}, std::nothrow);
  }
  void freeScratch(void* p, size_t) override { ::operator delete (p, std::align_val_t{64}); }
};

}  // namespace

Engine& hostEngine() {
  // Never destroyed: a communicator destroyed during static destruction still frees through it.
  static HostEngine* engine = new HostEngine;
  return *engine;
}

uint64_t lastLevelCacheBytes() {
  static const uint64_t bytes = [] {
    uint64_t best = 0;
    for (int i = 0; i < 8; ++i) {
      std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/size");
      uint64_t v = 0;
      char unit = 0;
      if (f >> v >> unit) best = std::max(best, v << (unit == 'K' ? 10 : unit == 'M' ? 20 : 0));
    }
    if (best) return best;
    long v = sysconf(_SC_LEVEL3_CACHE_SIZE);
    return v > 0 ? static_cast<uint64_t>(v) : uint64_t{32} << 20;
  }();
  return bytes;
}

}  // namespace trib
