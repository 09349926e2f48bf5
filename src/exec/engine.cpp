#include "exec/engine.hpp"

#include <cstdlib>
#include <cstring>
#include <new>

#include "reduce/reduce.hpp"

namespace trib {
namespace {

class HostEngine final : public Engine {
 public:
  const char* name() const override { return "host"; }
  MemoryKind memory() const override { return MemoryKind::Host; }
  Status postCopy(void* dst, const void* src, size_t bytes, TransferOp* op) override {
    if (bytes) std::memmove(dst, src, bytes);
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

}  // namespace trib
