// Engines run a schedule's local work: copies, reductions and the avg division are posted to an
// engine and complete through a TransferOp, like communication steps, so the executor treats every
// step alike (posted, then done). The host engine runs them inline: the op is complete when post
// returns. The CUDA engine enqueues on its own stream and completes the op from an event.
// An engine also provides scratch memory of its kind (ScratchPool).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/dtype.hpp"
#include "common/memory_kind.hpp"
#include "common/status.hpp"
#include "transports/transport.hpp"

namespace trib {

class Engine {
 public:
  virtual ~Engine() = default;
  virtual const char* name() const = 0;
  // The memory it works on, and the kind of the scratch it allocates.
  virtual MemoryKind memory() const = 0;
  // dst <- src (may overlap: memmove semantics). `aroundCache`: nothing reads dst soon, so an
  // engine that can may write it with non-temporal stores (no read-for-ownership of lines that
  // are only written, and the cache keeps what will be read).
  virtual Status postCopy(void* dst, const void* src, size_t bytes, TransferOp* op, bool aroundCache) = 0;
  // dst <- a op b, elementwise over `count` elements (dst may alias a or b).
  virtual Status postReduce(void* dst, const void* a, const void* b, uint64_t count, DataType dtype, RedOp op,
                            TransferOp* done) = 0;
  // buf <- buf / divisor (op avg's last step; integers truncate toward zero).
  virtual Status postDivide(void* buf, uint64_t count, DataType dtype, uint64_t divisor, TransferOp* op) = 0;
  // Advances posted work (the host engine has none).
  virtual Status progress() = 0;
  // Scratch of this engine's kind; freeScratch takes only what allocScratch returned.
  virtual void* allocScratch(size_t bytes) = 0;
  virtual void freeScratch(void* p, size_t bytes) = 0;
  // Host memory this engine copies to and from at full speed (pinned for a CUDA engine): where
  // the executor stages what a transport cannot send from or receive into. Default: scratch.
  virtual void* allocHostStaging(size_t bytes) { return allocScratch(bytes); }
  virtual void freeHostStaging(void* p, size_t bytes) { freeScratch(p, bytes); }
  // Makes host staging of these sizes (all at once) ready before a stream-ordered call's stream
  // is held, on the caller's thread: an engine whose staging allocation synchronises with streams
  // (page-locking, exec/staging_pool.hpp) must not allocate while the call runs. Default: nothing.
  virtual Status reserveHostStaging(const std::vector<size_t>& bytes) {
    (void)bytes;
    return Status::Ok();
  }
};

// The host engine (process memory, the CPU's vectorised reducer); one per process.
Engine& hostEngine();
// The last-level cache one core sees (sysfs: one instance, not sysconf's sum over instances).
uint64_t lastLevelCacheBytes();

}  // namespace trib
