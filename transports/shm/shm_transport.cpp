#include "transports/shm/shm_transport.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <list>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/net.hpp"
#include "common/env.hpp"
#include "common/log.hpp"
#include "common/process.hpp"
#include "common/random.hpp"
#include "common/shared_alloc.hpp"
#include "reduce/reduce.hpp"
#include "transports/expose_table.hpp"
#include "transports/match_queue.hpp"
#include "transports/registry.hpp"
#include "transports/shm/shm_layout.hpp"

namespace trib {

namespace {

using namespace shm;                    // the segment's layout (shm_layout.hpp)
constexpr size_t kCmaBounce = 1 << 20;  // reduce-on-receive staging for CMA reads
using Clock = std::chrono::steady_clock;

constexpr size_t kMaxPeerMappings = 16;  // per peer; the least recently used is unmapped beyond it

int pidfdOpen(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }
int pidfdGetfd(int pidfd, int fd) { return static_cast<int>(syscall(SYS_pidfd_getfd, pidfd, fd, 0)); }

// What this process holds of one peer process, shared by every shm transport (communicator)
// connected to it: a pidfd to take its shared allocations' fds, and those allocations mapped here
// (the least recently used unmapped beyond kMaxPeerMappings). So a buffer that a parent and its
// split both read is taken and mapped once.
struct PeerProcess {
  struct Mapping {
    uint8_t* base;
    size_t bytes;
    uint64_t lastUse;
  };
  int pidfd = -1;
  std::mutex mu;                     // communicators on different threads map through it
  std::map<uint64_t, Mapping> maps;  // by allocation id
  uint64_t clock = 0;
  static inline std::atomic<uint64_t> made{0};  // mappings made by this process (tests)
  ~PeerProcess() {
    for (auto& [id, m] : maps) munmap(m.base, m.bytes);
    if (pidfd >= 0) close(pidfd);
  }
  // Maps (or finds mapped) its allocation `r` and checks that `bytes` from its offset lie inside
  // it: a descriptor naming anything else fails the call, never this process.
  Status map(int rank, const SharedRegion& r, uint64_t bytes, uint8_t** at);
};

// This process's records, by the peer's identity (pid, start time, pid namespace) and our own pid,
// so a forked child never uses its parent's pidfds.
std::shared_ptr<PeerProcess> peerProcess(const ProcessIdentity& proc) {
  static std::mutex mu;
  static auto* byKey = new std::map<std::string, std::weak_ptr<PeerProcess>>;  // outlives statics
  const std::string key = strprintf("%d/%d/%llu/%s", static_cast<int>(getpid()), proc.pid,
                                    static_cast<unsigned long long>(proc.startTime), proc.space);
  std::lock_guard<std::mutex> lock(mu);
  std::erase_if(*byKey, [](const auto& kv) { return kv.second.expired(); });
  std::shared_ptr<PeerProcess> p = (*byKey)[key].lock();
  if (!p) {
    p = std::make_shared<PeerProcess>();
    p->pidfd = pidfdOpen(proc.pid);
    (*byKey)[key] = p;
  }
  return p;
}

Status PeerProcess::map(int rank, const SharedRegion& r, uint64_t bytes, uint8_t** at) {
  if (r.offset > r.mapBytes || bytes > r.mapBytes - r.offset)
    return errorf(tribRemoteError, "shm: rank %d exposed %llu bytes at offset %llu of a %llu-byte allocation",
                  rank, static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(r.offset),
                  static_cast<unsigned long long>(r.mapBytes));
  std::lock_guard<std::mutex> lock(mu);
  auto it = maps.find(r.id);
  if (it == maps.end() || it->second.bytes != r.mapBytes) {
    if (it != maps.end()) {
      munmap(it->second.base, it->second.bytes);
      maps.erase(it);
    }
    int fd = pidfd < 0 ? -1 : pidfdGetfd(pidfd, r.fd);
    if (fd < 0)
      return errorf(tribSystemError, "shm: cannot take rank %d's buffer (fd %d) with pidfd_getfd: %s", rank,
                    r.fd, strerror(errno));
    struct stat sb {};
    void* m = MAP_FAILED;
    const bool big = fstat(fd, &sb) == 0 && static_cast<uint64_t>(sb.st_size) >= r.mapBytes;
    if (big) m = mmap(nullptr, r.mapBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    const int e = errno;
    close(fd);
    if (!big)
      return errorf(tribRemoteError, "shm: rank %d's buffer (fd %d) is not a %llu-byte shared allocation",
                    rank, r.fd, static_cast<unsigned long long>(r.mapBytes));
    if (m == MAP_FAILED)
      return errorf(tribSystemError, "shm: mapping rank %d's %llu-byte buffer: %s", rank,
                    static_cast<unsigned long long>(r.mapBytes), strerror(e));
    if (maps.size() >= kMaxPeerMappings) {
      auto lru = std::min_element(maps.begin(), maps.end(), [](const auto& a, const auto& b) {
        return a.second.lastUse < b.second.lastUse;
      });
      munmap(lru->second.base, lru->second.bytes);
      maps.erase(lru);
    }
    it = maps.emplace(r.id, Mapping{static_cast<uint8_t*>(m), r.mapBytes, 0}).first;
    made.fetch_add(1, std::memory_order_relaxed);
  }
  it->second.lastUse = ++clock;
  *at = it->second.base + r.offset;
  return Status::Ok();
}

uint8_t* slotAt(RingCtl* r, uint32_t k, size_t slotBytes) {
  return reinterpret_cast<uint8_t*>(r) + sizeof(RingCtl) +
         static_cast<size_t>(k) * (sizeof(SlotHeader) + slotBytes);
}

}  // namespace

struct ShmTransport::Impl {
  struct SendReq {
    int peer;
    uint64_t tag;
    const uint8_t* buf;
    size_t bytes;
    size_t sent = 0;
    TransferOp* op;
    std::vector<uint8_t> owned;  // after detachSend
    bool cma = false;
    int cmaIndex = -1;
  };
  struct RecvReq {
    uint64_t tag;
    uint8_t* buf;
    size_t bytes;
    bool reduce = false;
    ReduceSpec red;
    TransferOp* op;
  };
  // A message that arrived before its receive: its bytes (slot path, maybe still arriving: then
  // it is the peer's InMsg), or its single-copy descriptor.
  struct Unexpected {
    uint64_t tag, total;
    std::vector<uint8_t> data;
    bool complete = false;
    bool cma = false;
    uint32_t cmaIndex = 0;
    uint64_t cmaGen = 0;
  };
  struct InMsg {  // the message currently arriving from a peer (slots of one message are contiguous)
    bool active = false;
    uint64_t tag = 0, total = 0;
    uint64_t arrived = 0;  // bytes of it so far
    std::unique_ptr<RecvReq> recv;
    Unexpected* unexp = nullptr;  // owned by `match` until a receive takes it
    bool discard = false;
  };
  struct CmaRead {
    std::unique_ptr<RecvReq> recv;
    uint32_t index;
    uint64_t gen, total;
  };
  struct Peer {
    int rank = -1;
    ProcessIdentity proc;        // its pid (for single-copy reads) and what proves it alive
    RingCtl* outRing = nullptr;  // in the peer's segment: my ring into it
    RingCtl* inRing = nullptr;   // in my segment: the peer's ring into me
    CmaDesc* peerCma = nullptr;  // the peer's single-copy table
    uint8_t* seg = nullptr;      // the peer's mapping (nullptr for myself: mine_ is used)
    size_t segBytes = 0;
    bool useCma = false;
    bool watchPid = true;                   // false when its pid means nothing here (another pid namespace)
    SignalLine* signalsToPeer = nullptr;    // in its segment: my line
    SignalLine* signalsFromPeer = nullptr;  // in mine: its line
    uint64_t signalsSent = 0;
    uint64_t waitsPosted = 0;
    uint64_t lastWaited = 0;         // the highest signal count from it a poll found (readCarried's floor)
    ExposeTable* exposes = nullptr;  // in its segment: what its window exposes
    std::shared_ptr<PeerProcess> process;  // its pidfd and mapped allocations (when it exposes)
    uint64_t cachedTail = 0;
    std::deque<std::unique_ptr<SendReq>> sendQ;
    std::list<std::unique_ptr<SendReq>> cmaWait;
    std::list<CmaRead> cmaReads;
    InMsg cur;
    Status dead;
  };

  int rank = 0, nranks = 0, myIdx = -1;
  ShmOptions opt;
  std::vector<int> localRanks;
  std::vector<int> idxOfRank;  // comm rank -> local index, -1 when not local
  std::vector<Peer> peers;     // by local index
  std::string myName;
  bool unlinked = false;
  uint8_t* mine = nullptr;
  size_t mineBytes = 0;
  SegHeader* hdr = nullptr;
  CmaDesc* myCma = nullptr;
  uint64_t cmaGenNext = 1;
  std::vector<uint8_t> bounce;
  // Posted receives and unexpected messages, by (source rank, tag).
  MatchQueue<std::unique_ptr<RecvReq>, std::unique_ptr<Unexpected>> match;

  uint64_t windowBytes = 0;  // every rank's window; 0: none (not every rank is local, or turned off)
  uint8_t* windowOf(int idx) const { return (idx == myIdx ? mine : peers[idx].seg) + hdr->windowOffset; }
  // Expose (transport.hpp): this rank publishes its tribMemAlloc buffers only when every peer
  // showed at connect that it can take this process's fds (pidfd_getfd needs ptrace access).
  bool exposeOk = false;
  ExposeTable* myExposes = nullptr;
  std::atomic<uint64_t> exposedReads{0};

  std::mutex mu;
  Status aborted;
  std::unordered_map<TransferOp*, SendReq*> liveSends;
  Clock::time_point nextLiveness = Clock::now();

  ~Impl();
  Status connect(int nranksArg, const OobAllGather& oob);
  RingCtl* ringIn(uint8_t* seg, int senderIdx) const {
    auto* h = reinterpret_cast<SegHeader*>(seg);
    return reinterpret_cast<RingCtl*>(seg + h->ringsOffset + static_cast<size_t>(senderIdx) * h->ringBytes);
  }
  Status peerIndex(int peer, const char* what, int* idx) const {
    if (peer < 0 || peer >= nranks || idxOfRank[peer] < 0)
      return errorf(tribInvalidArgument, "shm %s: rank %d is not a local rank of this transport (%d ranks)",
                    what, peer, nranks);
    *idx = idxOfRank[peer];
    return Status::Ok();
  }
  void pushSends(Peer& p);
  void drainIncoming(Peer& p);
  void handleSlot(Peer& p, const SlotHeader& sh, const uint8_t* data);
  void runCmaReads(Peer& p);
  bool cmaRead(Peer& p, RecvReq& r, uint32_t index, uint64_t gen, uint64_t total, Status* err);
  void checkCmaSends(Peer& p);
  void deliver(RecvReq& r, size_t off, const uint8_t* src, size_t len);
  bool matchSize(Peer& p, RecvReq& r, uint64_t tag, uint64_t total);
  // Fail every pending op with `p`; peerGone: its process is dead (vs. an abort).
  void failPeer(Peer& p, const Status& why, bool peerGone);
  void completeSend(Peer& p, SendReq* s);
  void checkLiveness();
  bool peerBroken(const Peer& p) const {
    return p.seg && std::atomic_ref<uint32_t>(reinterpret_cast<SegHeader*>(p.seg)->broken)
                            .load(std::memory_order_acquire) != 0;
  }
  Status brokenPeerError(const Peer& p) const {
    return errorf(tribRemoteError,
                  "shm: rank %d's communicator failed or was aborted (see rank %d's error); its operations "
                  "with this rank are failed",
                  p.rank, p.rank);
  }
};

// The windows as the executor sees them (transport.hpp: PeerWindows). Signals and polls take no
// lock: a signal is one store into the peer's segment; a poll one load, and only when the signal
// has not arrived does it look at the peer's liveness (rate-limited, under the lock).
class ShmWindows final : public PeerWindows {
 public:
  explicit ShmWindows(ShmTransport::Impl* im) : im_(im) {}
  uint64_t windowBytes() const override { return im_->windowBytes; }
  uint8_t* windowOf(int rank) const override { return im_->windowOf(im_->idxOfRank[rank]); }
  void signal(int peer, uint32_t fingerprint) override {
    ShmTransport::Impl::Peer& p = im_->peers[im_->idxOfRank[peer]];
    const uint64_t count = ++p.signalsSent;
    carryInto(p.signalsToPeer->carry[count % 2], count);
    const uint64_t word = (count << kFingerprintBits) | (fingerprint & ((1u << kFingerprintBits) - 1));
    p.signalsToPeer->word.store(word, std::memory_order_release);
  }
  Status pollSignals(int peer, uint64_t target, uint64_t* count, uint32_t* fingerprint) override {
    ShmTransport::Impl::Peer& p = im_->peers[im_->idxOfRank[peer]];
    uint64_t word = p.signalsFromPeer->word.load(std::memory_order_acquire);
    // Lock-free while all is well: this rank's broken flag (abort sets it) and the peer's are
    // atomics; the locked look at the peer's liveness runs every 64th poll that finds no signal.
    const bool arrived = (word >> kFingerprintBits) >= target;
    if (arrived && target > p.lastWaited) p.lastWaited = target;
    const bool selfBroken = std::atomic_ref<uint32_t>(im_->hdr->broken).load(std::memory_order_acquire) != 0;
    if (!selfBroken && (arrived || (!im_->peerBroken(p) && ++polls_ % 64 != 0))) {
      *count = word >> kFingerprintBits;
      *fingerprint = static_cast<uint32_t>(word & ((1u << kFingerprintBits) - 1));
      return Status::Ok();
    }
    {
      // Not there yet (or failed). A peer that died or broke before signalling never will; one
      // that signalled and then broke (it found mismatched arguments) is read first.
      std::lock_guard<std::mutex> lock(im_->mu);
      if (!im_->aborted.ok()) return im_->aborted;
      im_->checkLiveness();  // itself rate-limited to the liveness interval
      if (!p.dead.ok() || im_->peerBroken(p)) {
        word = p.signalsFromPeer->word.load(std::memory_order_acquire);
        if ((word >> kFingerprintBits) < target) return p.dead.ok() ? im_->brokenPeerError(p) : p.dead;
      }
    }
    *count = word >> kFingerprintBits;
    *fingerprint = static_cast<uint32_t>(word & ((1u << kFingerprintBits) - 1));
    return Status::Ok();
  }
  uint64_t& waitsPosted(int peer) override { return im_->peers[im_->idxOfRank[peer]].waitsPosted; }
  uint32_t fingerprintMask() const override { return (1u << kFingerprintBits) - 1; }
  // Peers map what tribMemAlloc returned (its memfd); other memory is copied into the window.
  bool expose(uint64_t offset, const void* src, uint64_t bytes, MemoryKind kind) override {
    SharedRegion r;
    if (!im_->exposeOk || kind != MemoryKind::HostShared || !findSharedRegion(src, bytes, &r)) return false;
    ExposeHandle h;
    std::memcpy(h.w, &r, sizeof r);
    return im_->myExposes->publish(offset, bytes, h);
  }
  void unexpose(uint64_t offset, uint64_t bytes) override {
    if (im_->exposeOk) im_->myExposes->drop(offset, bytes);
  }
  Status peerAddress(int rank, uint64_t offset, uint64_t bytes, uint8_t** at) override {
    const int idx = im_->idxOfRank[rank];
    ExposeHandle h;
    uint64_t into = 0;
    const int found = idx == im_->myIdx ? 0 : im_->peers[idx].exposes->find(offset, bytes, &h, &into);
    if (found < 0)
      return errorf(tribInternalError, "shm: rank %d's window [%llu, +%llu) is exposed only in part", rank,
                    static_cast<unsigned long long>(offset), static_cast<unsigned long long>(bytes));
    if (found == 0) return PeerWindows::peerAddress(rank, offset, bytes, at);
    // A broken peer's caller may have freed the buffer (and its fd number may name another file).
    if (im_->peerBroken(im_->peers[idx])) return im_->brokenPeerError(im_->peers[idx]);
    SharedRegion r;
    std::memcpy(&r, h.w, sizeof r);
    if (r.offset > UINT64_MAX - into)
      return errorf(tribRemoteError, "shm: rank %d exposed a buffer at a bad offset", rank);
    r.offset += into;
    uint8_t* p = nullptr;
    if (!im_->peers[idx].process)  // it exposes although this rank never probed taking its fds
      return errorf(tribRemoteError, "shm: rank %d exposed a buffer this rank did not agree to map", rank);
    TRIB_RETURN_IF_ERROR(im_->peers[idx].process->map(rank, r, bytes, &p));
    im_->exposedReads.fetch_add(1, std::memory_order_relaxed);
    *at = p;
    return Status::Ok();
  }
  uint64_t exposedReads() const override { return im_->exposedReads.load(std::memory_order_relaxed); }

  void carryNext(uint64_t offset, uint64_t bytes) override {
    const bool fits =
        bytes > 0 && bytes <= kCarryBytes && offset <= kCarryOffsetMask && offset + bytes <= im_->windowBytes;
    carryOffset_ = fits ? offset : 0;
    carryBytes_ = fits ? bytes : 0;
  }
  bool readCarried(int rank, uint64_t offset, uint64_t bytes, void* into) override {
    const int idx = im_->idxOfRank[rank];
    if (idx == im_->myIdx || bytes == 0 || bytes > kCarryBytes) return false;
    const ShmTransport::Impl::Peer& p = im_->peers[idx];
    for (const CarrySlot& slot : p.signalsFromPeer->carry) {
      const uint64_t tag = slot.tag.load(std::memory_order_acquire);
      const uint64_t from = tag & kCarryOffsetMask, carried = (tag >> kCarryOffsetBits) & 31;
      // The tag counts signals in 16 bits: every signal rewrites its slot, so a slot is at most
      // one signal older than the latest, and one from before lastWaited is never taken.
      const uint64_t newer = ((tag >> kCarryCountShift) - p.lastWaited) & kCarryCountMask;
      // (A peer writes the tag: a byte count above a slot's 16 is refused, never copied past it.)
      if (tag == 0 || carried > kCarryBytes || newer > kCarryCountMask / 2 || offset < from ||
          offset + bytes > from + carried)
        continue;
      // Acquire loads keep the tag's second load after them (no fences: TSan lacks them): data
      // stored after the writer zeroed the tag makes that load see the rewrite.
      uint64_t data[2] = {slot.data[0].load(std::memory_order_acquire),
                          slot.data[1].load(std::memory_order_acquire)};
      if (slot.tag.load(std::memory_order_relaxed) != tag) continue;  // rewritten while copied
      std::memcpy(into, reinterpret_cast<const uint8_t*>(data) + (offset - from), bytes);
      ++carriedReads_;
      return true;
    }
    return false;
  }
  uint64_t carriedReads() const override { return carriedReads_; }

 private:
  // CarrySlot::tag (shm_layout.hpp): the window offset in its low 43 bits, the byte count in the
  // next 5, the signal count's low 16 above them.
  static constexpr int kCarryOffsetBits = 43;
  static constexpr uint64_t kCarryOffsetMask = (uint64_t{1} << kCarryOffsetBits) - 1;
  static constexpr int kCarryCountShift = kCarryOffsetBits + 5;
  static constexpr uint64_t kCarryCountMask = 0xffff;

  // Signal `count` rewrites its slot: with a copy of the carried window range, or as carrying
  // nothing (so no slot is ever older than the signal before the latest).
  void carryInto(CarrySlot& slot, uint64_t count) {
    const uint64_t countBits = (count & kCarryCountMask) << kCarryCountShift;
    if (carryBytes_ == 0) {
      slot.tag.store(countBits | kCarryOffsetMask, std::memory_order_release);  // covers no range
      return;
    }
    uint64_t data[2] = {0, 0};
    std::memcpy(data, im_->windowOf(im_->myIdx) + carryOffset_, carryBytes_);
    slot.tag.store(0, std::memory_order_relaxed);
    slot.data[0].store(data[0], std::memory_order_release);  // after the zeroed tag
    slot.data[1].store(data[1], std::memory_order_release);
    slot.tag.store(countBits | (carryBytes_ << kCarryOffsetBits) | carryOffset_, std::memory_order_release);
  }

  ShmTransport::Impl* im_;
  unsigned polls_ = 0;
  uint64_t carryOffset_ = 0, carryBytes_ = 0;
  uint64_t carriedReads_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Connection setup

uint64_t shmPeerMappingsMade() { return PeerProcess::made.load(std::memory_order_relaxed); }

ShmTransport::ShmTransport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ShmTransport::~ShmTransport() {
  // Ops still pending would otherwise wait forever on a transport that is gone.
  abort(errorf(tribAborted, "shm transport destroyed with this operation pending"));
}

ShmTransport::Impl::~Impl() {
  if (!myName.empty() && !unlinked) shm_unlink(myName.c_str());
  for (auto& p : peers) {
    if (p.seg) munmap(p.seg, p.segBytes);
  }
  if (mine) munmap(mine, mineBytes);
}

Status ShmTransport::create(int rank, int nranks, const std::vector<int>& localRanks, const OobAllGather& oob,
                            const ShmOptions& options, std::unique_ptr<ShmTransport>* out) {
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return errorf(tribInvalidArgument, "shm: rank %d of %d is out of range", rank, nranks);
  if (options.slotBytes < 64 || options.slotBytes % 64 != 0 || options.slotBytes > (1u << 30))
    return errorf(tribInvalidArgument, "shm: slotBytes %zu must be a multiple of 64 in [64, 1 GiB]",
                  options.slotBytes);
  if (options.nslots < 2 || options.nslots > 65536)
    return errorf(tribInvalidArgument, "shm: nslots %u must be in [2, 65536]", options.nslots);
  auto im = std::make_unique<Impl>();
  im->rank = rank;
  im->nranks = nranks;
  im->opt = options;
  im->localRanks = localRanks;
  std::sort(im->localRanks.begin(), im->localRanks.end());
  im->idxOfRank.assign(nranks, -1);
  for (size_t i = 0; i < im->localRanks.size(); ++i) {
    int r = im->localRanks[i];
    if (r < 0 || r >= nranks || (i > 0 && r == im->localRanks[i - 1]))
      return errorf(tribInvalidArgument, "shm: local rank list has an invalid or repeated rank %d", r);
    im->idxOfRank[r] = static_cast<int>(i);
  }
  if (im->idxOfRank[rank] < 0)
    return errorf(tribInvalidArgument, "shm: the local rank list does not contain this rank (%d)", rank);
  im->myIdx = im->idxOfRank[rank];
  if (im->opt.cma < 0) {
    im->opt.cma = envBool("TRIB_SHM_CMA") ? 1 : 0;
  }
  if (im->opt.mapped < 0) im->opt.mapped = envBool("TRIB_SHM_MAPPED") ? 1 : 0;
  int64_t window = im->opt.windowBytes < 0 ? envInt("TRIB_WINDOW_BYTES") : im->opt.windowBytes;
  if (window < 0 || window > (int64_t{2} << 30))
    return errorf(tribInvalidArgument, "shm: TRIB_WINDOW_BYTES %lld must be in [0, 2 GiB]",
                  static_cast<long long>(window));
  // Only when every rank is here: peer-memory schedules need every rank's window.
  if (im->localRanks.size() == static_cast<size_t>(nranks))
    im->windowBytes = (static_cast<uint64_t>(window) + 127) / 128 * 128;  // two cells of 64-byte lines
  Status st = im->connect(nranks, oob);
  if (!st.ok()) return st.prefix(strprintf("shm transport (rank %d): ", rank));
  out->reset(new ShmTransport(std::move(im)));
  if ((*out)->impl_->windowBytes) (*out)->windows_ = std::make_unique<ShmWindows>((*out)->impl_.get());
  return Status::Ok();
}

Status checkPeerSegment(int fd, uint64_t bytes, int peerRank, const std::string& name) {
  struct stat sb {};
  if (fstat(fd, &sb) != 0)
    return errorf(tribSystemError, "fstat rank %d's segment '%s': %s", peerRank, name.c_str(),
                  strerror(errno));
  if (sb.st_uid != geteuid() || (sb.st_mode & 077) != 0)
    return errorf(tribInvalidUsage,
                  "rank %d's segment '%s' is owned by uid %u with mode %03o: refused (Tributary segments "
                  "are the job user's, mode 0600)",
                  peerRank, name.c_str(), static_cast<unsigned>(sb.st_uid),
                  static_cast<unsigned>(sb.st_mode & 0777));
  // Mapped as long as the file is (a longer mapping faults past its end), header included.
  if (static_cast<uint64_t>(sb.st_size) != bytes || bytes < sizeof(SegHeader))
    return errorf(tribInvalidUsage, "rank %d's segment '%s' has %lld bytes, its blob says %llu", peerRank,
                  name.c_str(), static_cast<long long>(sb.st_size), static_cast<unsigned long long>(bytes));
  return Status::Ok();
}

Status ShmTransport::Impl::connect(int n, const OobAllGather& oob) {
  const uint32_t nlocal = static_cast<uint32_t>(localRanks.size());
  const SegLayout layout = segLayout(nlocal, opt.nslots, opt.slotBytes, windowBytes);
  mineBytes = layout.totalBytes;

  uint64_t rnd = 0;
  TRIB_RETURN_IF_ERROR(randomBytes(&rnd, sizeof rnd));
  myName = strprintf("/%s%d-%016llx-r%d", ShmTransport::kSegmentPrefix, static_cast<int>(getpid()),
                     static_cast<unsigned long long>(rnd), rank);
  int fd = shm_open(myName.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    std::string n2 = myName;
    myName.clear();
    return errorf(tribSystemError, "shm_open('%s'): %s (is /dev/shm mounted and writable?)", n2.c_str(),
                  strerror(errno));
  }
  if (ftruncate(fd, static_cast<off_t>(mineBytes)) != 0) {
    int e = errno;
    close(fd);
    return errorf(tribSystemError, "ftruncate shm segment to %zu bytes: %s (is /dev/shm full?)", mineBytes,
                  strerror(e));
  }
  void* m = mmap(nullptr, mineBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (m == MAP_FAILED) return errorf(tribSystemError, "mmap shm segment: %s", strerror(errno));
  mine = static_cast<uint8_t*>(m);
  hdr = reinterpret_cast<SegHeader*>(mine);
  *hdr = segHeader(rank, static_cast<int32_t>(getpid()), nlocal, opt.nslots, opt.slotBytes, windowBytes);
  TRIB_RETURN_IF_ERROR(randomBytes(&hdr->probe, sizeof hdr->probe));
  for (uint32_t j = 0; j < nlocal; ++j) {
    RingCtl* r = ringIn(mine, static_cast<int>(j));
    new (r) RingCtl();
    r->head.store(0);
    r->tail.store(0);
  }
  myCma = reinterpret_cast<CmaDesc*>(mine + layout.cmaOffset);
  for (uint32_t i = 0; i < kNumCma; ++i) new (&myCma[i]) CmaDesc{};
  for (uint32_t j = 0; j < nlocal; ++j)
    new (mine + layout.signalsOffset + j * sizeof(SignalLine)) SignalLine{};
  myExposes = new (mine + layout.exposeOffset) ExposeTable{};

  // Let peers read this process's memory for single-copy and take its shared buffers' fds (both
  // need ptrace access; Yama ptrace_scope=1 needs this).
  const bool tryMapped = windowBytes && opt.mapped;
  if (opt.cma || tryMapped) prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  // The probe value again, in a memfd peers try to take with pidfd_getfd (expose).
  int probeFd = tryMapped ? memfd_create("trib-probe", MFD_CLOEXEC) : -1;
  if (probeFd >= 0 && pwrite(probeFd, &hdr->probe, sizeof hdr->probe, 0) != sizeof hdr->probe) {
    close(probeFd);
    probeFd = -1;
  }
  struct FdCloser {
    int fd;
    ~FdCloser() {
      if (fd >= 0) close(fd);
    }
  } probeCloser{probeFd};

  uint64_t localHash = 1469598103934665603ull;
  for (int r : localRanks) localHash = (localHash ^ static_cast<uint64_t>(r)) * 1099511628211ull;
  std::string boot = hostIdentity();
  const ProcessIdentity me = selfIdentity();
  ConnBlob blob;
  blob.rank = static_cast<uint32_t>(rank);
  blob.proc = me;
  blob.probeAddr = reinterpret_cast<uint64_t>(&hdr->probe);
  blob.probeValue = hdr->probe;
  blob.localHash = localHash;
  blob.segBytes = mineBytes;
  blob.probeFd = probeFd;
  blob.boot = boot;
  blob.segName = myName;
  std::vector<std::vector<uint8_t>> all;
  TRIB_RETURN_IF_ERROR(oob(encodeConnBlob(blob), all).prefix("exchanging segment names: "));
  if (static_cast<int>(all.size()) != n)
    return errorf(tribInternalError, "out-of-band allgather returned %zu blobs for %d ranks", all.size(), n);

  peers.resize(nlocal);
  std::vector<std::string> names(nlocal);
  std::vector<uint8_t> canRead(nlocal, 0), canMap(nlocal, 0);
  Status st;
  for (uint32_t j = 0; j < nlocal && st.ok(); ++j) {
    Peer& p = peers[j];
    p.rank = localRanks[j];
    ConnBlob pb;
    st = decodeConnBlob(all[p.rank], p.rank, ShmTransport::kSegmentPrefix, &pb);
    if (!st.ok()) break;
    names[j] = pb.segName;
    const uint64_t probeAddr = pb.probeAddr, probeVal = pb.probeValue, bytes = pb.segBytes;
    const uint32_t pprobeFd = static_cast<uint32_t>(pb.probeFd);
    if (pb.localHash != localHash) {
      st = errorf(tribInvalidUsage, "rank %d and this rank disagree on the set of local ranks", p.rank);
      break;
    }
    if (pb.boot != boot) {
      st = errorf(tribInvalidUsage,
                  "rank %d is listed as local but runs on another host or kernel ('%s' vs '%s')", p.rank,
                  pb.boot.c_str(), boot.c_str());
      break;
    }
    p.proc = pb.proc;
    if (static_cast<int>(j) != myIdx && !(samePidSpace(me, p.proc) && processAlive(p.proc))) {
      // It is alive (it just sent its blob), so its pid is not ours to see: another pid namespace.
      p.watchPid = false;
      TRIB_INFO("transport", "rank %d: rank %d's pid %d is not visible here; its death is left to timeouts",
                rank, p.rank, static_cast<int>(p.proc.pid));
    }
    uint8_t* seg = mine;
    if (static_cast<int>(j) != myIdx) {
      // Every local rank computes the same layout: a size that differs is refused before mapping.
      if (bytes != mineBytes || names[j].rfind(std::string("/") + ShmTransport::kSegmentPrefix, 0) != 0) {
        st = errorf(tribInvalidUsage,
                    "rank %d's shm blob names a segment '%.64s' of %llu bytes, not a Tributary segment of "
                    "%zu bytes (slot size or count, or TRIB_WINDOW_BYTES, differ?)",
                    p.rank, names[j].c_str(), static_cast<unsigned long long>(bytes), mineBytes);
        break;
      }
      int pfd = shm_open(names[j].c_str(), O_RDWR | O_CLOEXEC, 0);
      if (pfd < 0) {
        st = errorf(tribRemoteError, "cannot open rank %d's segment '%s': %s", p.rank, names[j].c_str(),
                    strerror(errno));
        break;
      }
      st = checkPeerSegment(pfd, bytes, p.rank, names[j]);
      if (!st.ok()) {
        close(pfd);
        break;
      }
      void* pm = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, pfd, 0);
      close(pfd);
      if (pm == MAP_FAILED) {
        st = errorf(tribSystemError, "mmap rank %d's segment: %s", p.rank, strerror(errno));
        break;
      }
      p.seg = static_cast<uint8_t*>(pm);
      p.segBytes = bytes;
      seg = p.seg;
      st = checkPeerSegment(*reinterpret_cast<SegHeader*>(seg), p.rank, nlocal, opt.nslots, opt.slotBytes,
                            windowBytes, bytes);
      if (!st.ok()) break;
      // Probe single-copy: read the peer's random probe value from its address space.
      if (opt.cma) {
        uint64_t got = 0;
        iovec l{&got, sizeof got}, rm{reinterpret_cast<void*>(probeAddr), sizeof got};
        ssize_t rr = process_vm_readv(p.proc.pid, &l, 1, &rm, 1, 0);
        int readErr = errno;
        canRead[j] = rr == static_cast<ssize_t>(sizeof got) && got == probeVal;
        if (!canRead[j]) {
          char scope[8] = "absent";  // Yama: 0 any same-uid, 1 needs PR_SET_PTRACER (done), 2+ refuses
          if (FILE* f = std::fopen("/proc/sys/kernel/yama/ptrace_scope", "r")) {
            size_t n = std::fread(scope, 1, sizeof scope - 1, f);
            scope[n > 0 && scope[n - 1] == '\n' ? n - 1 : n] = '\0';
            std::fclose(f);
          }
          TRIB_INFO("transport",
                    "rank %d cannot read rank %d's memory with process_vm_readv (%s; yama ptrace_scope %s); "
                    "slot path only",
                    rank, p.rank, rr < 0 ? strerror(readErr) : "wrong value", scope);
        }
      }
      // Probe taking its fds: take its probe memfd and read the value back.
      if (tryMapped && static_cast<int32_t>(pprobeFd) >= 0 && p.watchPid) {
        p.process = peerProcess(p.proc);
        int pfd = p.process->pidfd < 0 ? -1 : pidfdGetfd(p.process->pidfd, static_cast<int>(pprobeFd));
        uint64_t got = 0;
        canMap[j] = pfd >= 0 && pread(pfd, &got, sizeof got, 0) == sizeof got && got == probeVal;
        if (!canMap[j])
          TRIB_INFO("transport",
                    "rank %d cannot take rank %d's file descriptors (pidfd_getfd: %s); rank %d's "
                    "tribMemAlloc buffers are copied into its window",
                    rank, p.rank, pfd < 0 ? strerror(errno) : "wrong value", p.rank);
        if (pfd >= 0) close(pfd);
      }
    } else {
      canRead[j] = opt.cma ? 1 : 0;
      canMap[j] = tryMapped && probeFd >= 0;
    }
    p.exposes = reinterpret_cast<ExposeTable*>(seg + reinterpret_cast<SegHeader*>(seg)->exposeOffset);
    p.signalsFromPeer = reinterpret_cast<SignalLine*>(mine + hdr->signalsOffset + j * sizeof(SignalLine));
    p.signalsToPeer = reinterpret_cast<SignalLine*>(seg + reinterpret_cast<SegHeader*>(seg)->signalsOffset +
                                                    static_cast<size_t>(myIdx) * sizeof(SignalLine));
    p.inRing = ringIn(mine, static_cast<int>(j));
    p.outRing = ringIn(seg, myIdx);
    p.peerCma = reinterpret_cast<CmaDesc*>(seg + reinterpret_cast<SegHeader*>(seg)->cmaOffset);
  }
  // Second exchange: who can read whom; it is also the point after which every peer has mapped
  // my segment, so the name can go (nothing leaks if any process dies from here on).
  std::vector<uint8_t> mineRead(2 * nlocal + 1);
  mineRead[0] = st.ok() ? 1 : 0;
  std::copy(canRead.begin(), canRead.end(), mineRead.begin() + 1);
  std::copy(canMap.begin(), canMap.end(), mineRead.begin() + 1 + nlocal);
  std::vector<std::vector<uint8_t>> reads;
  Status st2 = oob(mineRead, reads);
  shm_unlink(myName.c_str());
  unlinked = true;
  if (!st.ok() || !st2.ok()) {
    // A peer may have died before unlinking its own segment: remove every name we know.
    for (auto& nm : names)
      if (!nm.empty()) shm_unlink(nm.c_str());
    return st.ok() ? st2.prefix("confirming segment mappings: ") : st;
  }
  exposeOk = tryMapped;
  for (uint32_t j = 0; j < nlocal; ++j) {
    const auto& b = reads[localRanks[j]];
    if (b.size() != 2 * nlocal + 1 || b[0] != 1)
      return errorf(tribRemoteError, "rank %d failed to map the shm segments", localRanks[j]);
    // I send single-copy to j when I may and j can read me; I expose when every peer can map me.
    peers[j].useCma = opt.cma && b[1 + myIdx] != 0;
    exposeOk = exposeOk && b[1 + nlocal + myIdx] != 0;
  }
  bounce.resize(kCmaBounce);
  TRIB_INFO("transport",
            "rank %d: shm connected to %u local ranks (slots %u x %zu B, cma %s, window %llu B, expose %s)",
            rank, nlocal, opt.nslots, opt.slotBytes, opt.cma ? "on" : "off",
            static_cast<unsigned long long>(windowBytes), exposeOk ? "on" : "off");
  return Status::Ok();
}

PeerWindows* ShmTransport::windows() { return windows_.get(); }
bool ShmTransport::exposes() const { return impl_->exposeOk; }

bool ShmTransport::usesCma(int peer) const {
  int idx = peer >= 0 && peer < impl_->nranks ? impl_->idxOfRank[peer] : -1;
  return idx >= 0 && impl_->peers[idx].useCma;
}

// ---------------------------------------------------------------------------------------------
// Posting

Status ShmTransport::postSend(int peer, uint64_t tag, const void* buf, size_t bytes, TransferOp* op) {
  Impl& im = *impl_;
  std::lock_guard<std::mutex> lock(im.mu);
  int idx = -1;
  Status st = im.peerIndex(peer, "postSend", &idx);
  if (st.ok() && !buf && bytes > 0)
    st = errorf(tribInvalidArgument, "shm postSend: null buffer for %zu bytes", bytes);
  if (st.ok() && !im.aborted.ok()) st = im.aborted;
  if (st.ok() && !im.peers[idx].dead.ok()) st = im.peers[idx].dead;
  if (!st.ok()) {
    op->fail(st);
    return st;
  }
  Impl::Peer& p = im.peers[idx];
  auto s = std::make_unique<Impl::SendReq>();
  s->peer = idx;
  s->tag = tag;
  s->buf = static_cast<const uint8_t*>(buf);
  s->bytes = bytes;
  s->op = op;
  s->cma = p.useCma && bytes >= im.opt.cmaThreshold;
  im.liveSends[op] = s.get();
  p.sendQ.push_back(std::move(s));
  im.pushSends(p);  // small messages leave at once
  return Status::Ok();
}

Status ShmTransport::postRecv(int peer, uint64_t tag, void* buf, size_t bytes, const ReduceSpec* reduce,
                              TransferOp* op) {
  Impl& im = *impl_;
  std::lock_guard<std::mutex> lock(im.mu);
  int idx = -1;
  Status st = im.peerIndex(peer, "postRecv", &idx);
  if (st.ok() && !buf && bytes > 0)
    st = errorf(tribInvalidArgument, "shm postRecv: null buffer for %zu bytes", bytes);
  if (st.ok() && reduce) {
    if (!validDataType(reduce->dtype) || !validRedOp(reduce->op))
      st = errorf(tribInvalidArgument, "shm postRecv: invalid reduce dtype %d or op %d", reduce->dtype,
                  reduce->op);
    else if (bytes % dataTypeSize(reduce->dtype) != 0)
      st = errorf(tribInvalidArgument, "shm postRecv: %zu bytes is not a whole number of %s elements", bytes,
                  dataTypeName(reduce->dtype));
    else if (!reduce->local && bytes > 0)
      st = errorf(tribInvalidArgument, "shm postRecv: reduce without a local operand");
  }
  if (st.ok() && !im.aborted.ok()) st = im.aborted;
  if (!st.ok()) {
    op->fail(st);
    return st;
  }
  Impl::Peer& p = im.peers[idx];
  auto r = std::make_unique<Impl::RecvReq>();
  r->tag = tag;
  r->buf = static_cast<uint8_t*>(buf);
  r->bytes = bytes;
  r->op = op;
  if (reduce) {
    r->reduce = true;
    r->red = *reduce;
  }
  // An unexpected message with this tag (the oldest first) takes it.
  std::unique_ptr<Impl::Unexpected> u;
  if (im.match.takeMessage(peer, tag, &u)) {
    // Slot-path messages arrive one at a time: one still arriving is the peer's current message.
    const bool arriving = !u->cma && !u->complete;
    if (arriving) p.cur.unexp = nullptr;
    if (!im.matchSize(p, *r, tag, u->total)) {
      if (u->cma) p.peerCma[u->cmaIndex].state.store(kCmaDone, std::memory_order_release);
      if (arriving) p.cur.discard = true;  // the rest of it is dropped as it comes
    } else if (u->cma) {
      p.cmaReads.push_back({std::move(r), u->cmaIndex, u->cmaGen, u->total});
      im.runCmaReads(p);
    } else if (u->complete) {
      im.deliver(*r, 0, u->data.data(), u->total);
      op->complete();
    } else {
      // What arrived so far now, the rest straight from the slots.
      im.deliver(*r, 0, u->data.data(), p.cur.arrived);
      p.cur.recv = std::move(r);
    }
    return Status::Ok();
  }
  // A message that fully arrived before its sender exited is still delivered (above); anything
  // else from a dead peer will never come.
  if (!p.dead.ok()) {
    op->fail(p.dead);
    return p.dead;
  }
  im.match.addRecv(peer, tag, std::move(r));
  im.drainIncoming(p);
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// Progress

bool ShmTransport::Impl::matchSize(Peer& p, RecvReq& r, uint64_t tag, uint64_t total) {
  if (total == r.bytes) return true;
  r.op->fail(errorf(tribInvalidUsage,
                    "shm: message from rank %d with tag %llu has %llu bytes but the receive expects %zu "
                    "(mismatched collective arguments across ranks?)",
                    p.rank, static_cast<unsigned long long>(tag), static_cast<unsigned long long>(total),
                    r.bytes));
  return false;
}

void ShmTransport::Impl::deliver(RecvReq& r, size_t off, const uint8_t* src, size_t len) {
  if (len == 0) return;
  if (!r.reduce) {
    std::memcpy(r.buf + off, src, len);
    return;
  }
  size_t es = dataTypeSize(r.red.dtype);
  reduce(r.buf + off, static_cast<const uint8_t*>(r.red.local) + off, src, len / es, r.red.dtype, r.red.op);
}

void ShmTransport::Impl::pushSends(Peer& p) {
  const uint32_t nslots = opt.nslots;
  while (!p.sendQ.empty()) {
    SendReq* s = p.sendQ.front().get();
    uint64_t head = p.outRing->head.load(std::memory_order_relaxed);
    if (head - p.cachedTail >= nslots) {
      p.cachedTail = p.outRing->tail.load(std::memory_order_acquire);
      if (head - p.cachedTail >= nslots) return;  // ring full: try again on the next progress()
    }
    uint8_t* slot = slotAt(p.outRing, static_cast<uint32_t>(head % nslots), opt.slotBytes);
    auto* sh = reinterpret_cast<SlotHeader*>(slot);
    if (s->cma) {
      if (s->cmaIndex < 0) {
        for (uint32_t i = 0; i < kNumCma; ++i)
          if (myCma[i].state.load(std::memory_order_acquire) == kFree) {
            s->cmaIndex = static_cast<int>(i);
            break;
          }
        if (s->cmaIndex < 0) return;  // all descriptors in use: wait for readers to finish
        CmaDesc& d = myCma[s->cmaIndex];
        d.addr = reinterpret_cast<uint64_t>(s->buf);
        d.bytes = s->bytes;
        d.gen = cmaGenNext++;
        d.state.store(kReady, std::memory_order_release);
      }
      *sh = SlotHeader{
          s->tag, s->bytes, 0, 0, kCmaRts, static_cast<uint32_t>(s->cmaIndex), 0, myCma[s->cmaIndex].gen, {}};
      p.outRing->head.store(head + 1, std::memory_order_release);
      p.cmaWait.push_back(std::move(p.sendQ.front()));
      p.sendQ.pop_front();
      continue;
    }
    size_t len = std::min(opt.slotBytes, s->bytes - s->sent);
    *sh = SlotHeader{s->tag, s->bytes, s->sent, static_cast<uint32_t>(len), kData, 0, 0, 0, {}};
    if (len) std::memcpy(slot + sizeof(SlotHeader), s->buf + s->sent, len);
    p.outRing->head.store(head + 1, std::memory_order_release);
    s->sent += len;
    if (s->sent == s->bytes) {
      std::unique_ptr<SendReq> done = std::move(p.sendQ.front());
      p.sendQ.pop_front();
      completeSend(p, done.get());
    }
  }
}

void ShmTransport::Impl::completeSend(Peer&, SendReq* s) {
  liveSends.erase(s->op);
  s->op->complete();
}

void ShmTransport::Impl::checkCmaSends(Peer& p) {
  for (auto it = p.cmaWait.begin(); it != p.cmaWait.end();) {
    SendReq* s = it->get();
    CmaDesc& d = myCma[s->cmaIndex];
    uint32_t state = d.state.load(std::memory_order_acquire);
    if (state == kCmaDone || state == kCmaFailed) {
      d.state.store(kFree, std::memory_order_release);
      liveSends.erase(s->op);
      if (state == kCmaDone)
        s->op->complete();
      else
        s->op->fail(errorf(tribRemoteError, "shm: rank %d could not read this rank's send (tag %llu) by CMA",
                           p.rank, static_cast<unsigned long long>(s->tag)));
      it = p.cmaWait.erase(it);
    } else {
      ++it;
    }
  }
}

void ShmTransport::Impl::drainIncoming(Peer& p) {
  const uint32_t nslots = opt.nslots;
  uint64_t tail = p.inRing->tail.load(std::memory_order_relaxed);
  uint64_t head = p.inRing->head.load(std::memory_order_acquire);
  while (tail != head) {
    uint8_t* slot = slotAt(p.inRing, static_cast<uint32_t>(tail % nslots), opt.slotBytes);
    SlotHeader sh;
    std::memcpy(&sh, slot, sizeof sh);
    handleSlot(p, sh, slot + sizeof(SlotHeader));
    ++tail;
    p.inRing->tail.store(tail, std::memory_order_release);
    if (!p.dead.ok()) return;  // the stream was corrupt: stop reading it
    if (tail == head) head = p.inRing->head.load(std::memory_order_acquire);
  }
  runCmaReads(p);
}

namespace {

// An unexpected message's bytes grow as they arrive, doubling but never past the total its sender
// declared, and never sized by that total alone: a peer that declares more than it sends costs
// at most twice what it sent.
void appendArrived(std::vector<uint8_t>& buf, uint64_t total, const uint8_t* data, size_t len) {
  if (buf.size() + len > buf.capacity())
    buf.reserve(std::min<uint64_t>(total, std::max<uint64_t>(2 * buf.capacity(), buf.size() + len)));
  buf.insert(buf.end(), data, data + len);
}

}  // namespace

void ShmTransport::Impl::handleSlot(Peer& p, const SlotHeader& sh, const uint8_t* data) {
  if (Status bad = checkSlot(sh, p.rank, opt.slotBytes); !bad.ok()) {
    failPeer(p, bad, false);
    return;
  }
  auto findPosted = [&](uint64_t tag) {
    std::unique_ptr<RecvReq> r;
    match.takeRecv(p.rank, tag, &r);
    return r;
  };
  if (sh.kind == kCmaRts) {
    std::unique_ptr<RecvReq> r = findPosted(sh.tag);
    if (!r) {
      auto u = std::make_unique<Unexpected>();
      u->tag = sh.tag;
      u->total = sh.total;
      u->cma = true;
      u->cmaIndex = sh.cmaIndex;
      u->cmaGen = sh.cmaGen;
      match.addMessage(p.rank, sh.tag, std::move(u));
    } else if (!matchSize(p, *r, sh.tag, sh.total)) {
      p.peerCma[sh.cmaIndex].state.store(kCmaDone, std::memory_order_release);
    } else {
      p.cmaReads.push_back({std::move(r), sh.cmaIndex, sh.cmaGen, sh.total});
    }
    return;
  }
  InMsg& m = p.cur;
  if (sh.offset == 0) {
    m = InMsg{};
    m.active = true;
    m.tag = sh.tag;
    m.total = sh.total;
    m.recv = findPosted(sh.tag);
    if (m.recv && !matchSize(p, *m.recv, sh.tag, sh.total)) {
      m.recv.reset();
      m.discard = true;
    } else if (!m.recv) {
      auto u = std::make_unique<Unexpected>();
      u->tag = sh.tag;
      u->total = sh.total;
      m.unexp = u.get();
      match.addMessage(p.rank, sh.tag, std::move(u));
    }
  }
  if (!m.active || m.tag != sh.tag || sh.total != m.total || sh.offset != m.arrived) {
    failPeer(
        p,
        errorf(tribInternalError, "shm: corrupt stream from rank %d (slot for tag %llu at offset %llu)",
               p.rank, static_cast<unsigned long long>(sh.tag), static_cast<unsigned long long>(sh.offset)),
        false);
    return;
  }
  if (m.recv)
    deliver(*m.recv, sh.offset, data, sh.len);
  else if (m.unexp)
    appendArrived(m.unexp->data, m.total, data, sh.len);
  m.arrived = sh.offset + sh.len;
  if (m.arrived == m.total) {
    if (m.recv)
      m.recv->op->complete();
    else if (m.unexp)
      m.unexp->complete = true;  // waits in `match` for its receive
    m = InMsg{};
  }
}

bool ShmTransport::Impl::cmaRead(Peer& p, RecvReq& r, uint32_t index, uint64_t gen, uint64_t total,
                                 Status* err) {
  CmaDesc& d = p.peerCma[index];
  uint32_t expected = kReady;
  if (!d.state.compare_exchange_strong(expected, kReading, std::memory_order_acq_rel)) {
    if (expected == kDetaching) return false;  // the sender is copying it aside: retry later
    // The sender released the descriptor before we read it: it aborted or failed mid-operation.
    *err = errorf(
        tribRemoteError,
        "shm: rank %d withdrew a message it had offered (descriptor %u, state %u): it aborted or failed",
        p.rank, index, expected);
    return true;
  }
  if (d.gen != gen || d.bytes != total) {
    d.state.store(kCmaFailed, std::memory_order_release);
    *err = errorf(tribRemoteError, "shm: rank %d replaced a message it had offered: it aborted or failed",
                  p.rank);
    return true;
  }
  uint64_t addr = d.addr;
  size_t off = 0;
  while (off < total) {
    // Without a reduce, read straight into the destination; with one, stage through `bounce`.
    size_t len = r.reduce ? std::min(bounce.size(), total - off) : total - off;
    iovec l{r.reduce ? bounce.data() : r.buf + off, len};
    iovec rm{reinterpret_cast<void*>(addr + off), len};
    ssize_t got = process_vm_readv(p.proc.pid, &l, 1, &rm, 1, 0);
    if (got <= 0) {
      int e = errno;
      d.state.store(kCmaFailed, std::memory_order_release);
      *err = errorf(tribRemoteError, "shm: reading rank %d's message by process_vm_readv failed: %s%s",
                    p.rank, strerror(e), e == ESRCH ? " (the process is gone)" : "");
      return true;
    }
    if (r.reduce) deliver(r, off, bounce.data(), static_cast<size_t>(got));
    off += static_cast<size_t>(got);
  }
  d.state.store(kCmaDone, std::memory_order_release);
  return true;
}

void ShmTransport::Impl::runCmaReads(Peer& p) {
  for (auto it = p.cmaReads.begin(); it != p.cmaReads.end();) {
    Status err;
    if (!cmaRead(p, *it->recv, it->index, it->gen, it->total, &err)) {
      ++it;
      continue;
    }
    if (err.ok())
      it->recv->op->complete();
    else
      it->recv->op->fail(err);
    it = p.cmaReads.erase(it);
  }
}

void ShmTransport::Impl::failPeer(Peer& p, const Status& why, bool peerGone) {
  for (auto& s : p.sendQ) {
    liveSends.erase(s->op);
    s->op->fail(why);
  }
  for (auto& s : p.cmaWait) {
    // Take the descriptor back so nobody reads the buffer after we report failure. One a live
    // reader holds (READING) is left to it: it marks it DONE, and it is recycled below.
    CmaDesc& d = myCma[s->cmaIndex];
    uint32_t st = kReady;
    if (!d.state.compare_exchange_strong(st, kFree) && (st != kReading || peerGone)) d.state.store(kFree);
    liveSends.erase(s->op);
    s->op->fail(why);
  }
  match.eraseRecvsIf([&](int src, uint64_t, std::unique_ptr<RecvReq>& r) {
    if (src != p.rank) return false;
    r->op->fail(why);
    return true;
  });
  for (auto& c : p.cmaReads) c.recv->op->fail(why);
  if (p.cur.recv) p.cur.recv->op->fail(why);
  p.sendQ.clear();
  p.cmaWait.clear();
  p.cmaReads.clear();
  // Complete slot-path messages stay deliverable: a sender may finish and exit before its peer
  // posts the matching receive. Partial ones and single-copy ones (the data lived in the sender)
  // are gone.
  match.eraseMessagesIf([&](int src, uint64_t, std::unique_ptr<Unexpected>& u) {
    return src == p.rank && (!peerGone || !u->complete || u->cma);
  });
  p.cur = InMsg{};
  if (p.dead.ok()) p.dead = why;
}

void ShmTransport::Impl::checkLiveness() {
  auto now = Clock::now();
  if (now < nextLiveness) return;
  nextLiveness = now + std::chrono::milliseconds(opt.livenessIntervalMs);
  for (auto& p : peers) {
    if (p.rank == rank || !p.dead.ok()) continue;
    if (peerBroken(p)) {
      // Alive, but it will not progress again (it broke inside its progress or abort, so no
      // single-copy read of ours is in flight). What it sent before is still delivered.
      drainIncoming(p);
      failPeer(p, brokenPeerError(p), true);
      continue;
    }
    if (!p.watchPid) continue;
    if (!processAlive(p.proc)) {
      Status why = errorf(tribRemoteError, "shm: rank %d (pid %d) died; its pending operations are failed",
                          p.rank, static_cast<int>(p.proc.pid));
      bool pending = !p.sendQ.empty() || !p.cmaWait.empty() || match.hasRecvsFrom(p.rank) ||
                     !p.cmaReads.empty() || p.cur.recv != nullptr;
      // A peer that exits after finishing its work is normal; one that leaves work behind is news.
      if (pending)
        TRIB_WARN("transport", "rank %d: %s", rank, why.message().c_str());
      else
        TRIB_INFO("transport", "rank %d: %s", rank, why.message().c_str());
      // Deliver what it sent before dying, then fail the rest.
      drainIncoming(p);
      failPeer(p, why, true);
    }
  }
}

Status ShmTransport::progress() {
  Impl& im = *impl_;
  std::lock_guard<std::mutex> lock(im.mu);
  if (!im.aborted.ok()) return Status::Ok();  // every op already failed with the abort status
  for (auto& p : im.peers) {
    if (!p.dead.ok()) continue;
    im.drainIncoming(p);
    im.pushSends(p);
    im.checkCmaSends(p);
  }
  im.checkLiveness();
  return Status::Ok();
}

void ShmTransport::detachSend(TransferOp* op) {
  Impl& im = *impl_;
  auto deadline = Clock::now() + std::chrono::milliseconds(im.opt.detachTimeoutMs);
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(im.mu);
      auto it = im.liveSends.find(op);
      if (it == im.liveSends.end()) return;  // already complete (or failed)
      Impl::SendReq* s = it->second;
      if (!s->owned.empty() || s->bytes == 0) return;
      if (!s->cma || s->cmaIndex < 0) {
        // Not yet (fully) in the ring, or not yet published: keep a private copy.
        s->owned.assign(s->buf, s->buf + s->bytes);
        s->buf = s->owned.data();
        return;
      }
      CmaDesc& d = im.myCma[s->cmaIndex];
      uint32_t st = kReady;
      if (d.state.compare_exchange_strong(st, kDetaching, std::memory_order_acq_rel)) {
        s->owned.assign(s->buf, s->buf + s->bytes);
        s->buf = s->owned.data();
        d.addr = reinterpret_cast<uint64_t>(s->buf);
        d.state.store(kReady, std::memory_order_release);
        return;
      }
      if (st != kReading) return;  // done or failed: the user buffer is no longer referenced
      int idx = s->peer;
      bool gone = im.peers[idx].watchPid && !processAlive(im.peers[idx].proc);
      if (Clock::now() > deadline || gone) {
        // The reader died mid-read (or hangs): fail the send rather than wait forever.
        im.failPeer(
            im.peers[idx],
            errorf(tribRemoteError, "shm: rank %d stopped while reading a message", im.peers[idx].rank),
            gone);
        return;
      }
    }
    sched_yield();  // the receiver is copying out of the buffer right now; it finishes soon
  }
}

void ShmTransport::abort(const Status& why) {
  Impl& im = *impl_;
  std::lock_guard<std::mutex> lock(im.mu);
  Status st = why.ok() ? errorf(tribAborted, "shm transport aborted") : why;
  if (im.aborted.ok()) {
    // Tell the peers, so one waiting for a signal from this rank fails now rather than at its
    // timeout (this process is alive: the liveness check would not fire).
    std::atomic_ref<uint32_t>(im.hdr->broken).store(1, std::memory_order_release);
    im.aborted = st;
  }
  for (auto& p : im.peers) im.failPeer(p, st, false);
}

namespace {

bool shmCanConnect(const RankLocation& self, const RankLocation& peer) { return sameHost(self, peer); }

// Every rank of the host takes part (also those of one process, which loopback serves by
// default): the rings and the windows cover the host's ranks, the same list on each of them.
Status shmConnect(const TransportConnectArgs& args, std::unique_ptr<Transport>* out) {
  const RankLocation& me = (*args.locations)[args.rank];
  std::vector<int> local;
  for (int p = 0; p < args.nranks; ++p) {
    if (sameHost(me, (*args.locations)[p])) local.push_back(p);
  }
  std::unique_ptr<ShmTransport> shm;
  TRIB_RETURN_IF_ERROR(ShmTransport::create(args.rank, args.nranks, local, args.oob, ShmOptions{}, &shm)
                           .prefix("shared-memory transport: "));
  *out = std::move(shm);
  return Status::Ok();
}

}  // namespace

TransportDescriptor shmTransportDescriptor() {
  TransportDescriptor d{};
  d.name = "shm";
  d.reaches = "processes on the same host";
  d.caps.reads = d.caps.writes = d.caps.reduces = kHostMemoryKinds;
  d.caps.twoSided = true;
  d.caps.windows = true;    // every rank's window, when all ranks are on this host
  d.caps.zeroCopy = false;  // messages below cmaThreshold are staged through the ring slots
  d.priority = 200;
  d.needsExchange = true;
  d.canConnect = shmCanConnect;
  d.connect = shmConnect;
  return d;
}

}  // namespace trib
