#include "transports/shm/shm_transport.hpp"
#include "common/env.hpp"

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
#include "bootstrap/unique_id.hpp"
#include "common/env.hpp"
#include "common/log.hpp"
#include "common/process.hpp"
#include "common/shared_alloc.hpp"
#include "reduce/reduce.hpp"
#include "transports/match_queue.hpp"
#include "transports/registry.hpp"

namespace trib {

namespace {

constexpr uint64_t kSegMagic = 0x314d485342495254ull;  // "TRIBSHM1"
constexpr uint32_t kBlobMagic = 0x53484d42;            // "BMHS"
constexpr uint32_t kNumCma = 64;                       // outstanding single-copy sends per rank
constexpr size_t kCmaBounce = 1 << 20;                 // reduce-on-receive staging for CMA reads
using Clock = std::chrono::steady_clock;

struct SegHeader {
  uint64_t magic;
  int32_t ownerRank;
  int32_t ownerPid;
  uint32_t nlocal;
  uint32_t nslots;
  uint64_t slotBytes;
  uint64_t ringsOffset, ringBytes, cmaOffset, totalBytes;
  uint64_t probe;                    // a random value peers read through CMA to test single-copy
  uint64_t boardOffset, boardBytes;  // the one-shot board's two cells (boardBytes 0: none)
  uint32_t broken;                   // 1 once the owner's transport failed or was aborted (atomic_ref)
  uint32_t pad;
};

enum SlotKind : uint32_t { kData = 1, kCmaRts = 2 };
struct SlotHeader {
  uint64_t tag, total, offset;
  uint32_t len, kind;
  uint32_t cmaIndex, pad;
  uint64_t cmaGen;
  uint8_t reserved[16];
};
static_assert(sizeof(SlotHeader) == 64);

struct RingCtl {
  alignas(64) std::atomic<uint64_t> head;  // written by the sender
  alignas(64) std::atomic<uint64_t> tail;  // written by the receiver
};
static_assert(sizeof(RingCtl) == 128);
static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free);

// A single-copy send published by its owner; the receiver claims it READY -> READING -> DONE.
enum CmaState : uint32_t {
  kFree = 0,
  kReady = 1,
  kReading = 2,
  kCmaDone = 3,
  kDetaching = 4,
  kCmaFailed = 5
};
struct alignas(64) CmaDesc {
  std::atomic<uint32_t> state;
  uint32_t pad;
  uint64_t addr, bytes, gen;
};

// One cell of the board; the data follows the header. Step k (a one-shot operation, or one chunk
// of a two-shot one) uses cell k & 1 of every segment.
enum BoardMode : uint32_t { kOneShot = 1, kTwoShot = 2 };
struct alignas(64) BoardCell {
  std::atomic<uint64_t> seq;     // k+1 once step k's header (and input, unless mapped) is here (release)
  std::atomic<uint64_t> result;  // two-shot: k+1 once the owner's reduced slice of step k is out
  std::atomic<uint64_t> staged;  // two-shot: k+1 once the slices others reduce are in this cell
  uint64_t bytes;                // this step's bytes
  uint64_t total;                // the whole operation's bytes (two-shot: several steps)
  uint32_t dtype, op, mode;
  uint32_t mapped;        // two-shot: 1 when src/dst below are shared (tribMemAlloc) buffers
  SharedRegion src, dst;  // where peers map this rank's buffers (when mapped)
  uint8_t reserved[8];
  uint8_t* data() { return reinterpret_cast<uint8_t*>(this + 1); }
};
static_assert(sizeof(BoardCell) == 128);
constexpr size_t kMaxPeerMappings = 16;  // per peer; the least recently used is unmapped beyond it
// Two-shot operations from this size choose their cell mode (chooseStreamCells); smaller ones
// write plainly (too short to time reliably, and their cells stay in cache).
constexpr uint64_t kAdaptiveCellBytes = 256 << 10;

int pidfdOpen(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }
int pidfdGetfd(int pidfd, int fd) { return static_cast<int>(syscall(SYS_pidfd_getfd, pidfd, fd, 0)); }

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
    bool watchPid = true;  // false when its pid means nothing here (another pid namespace)
    int pidfd = -1;        // for pidfd_getfd of its shared buffers (mapped two-shot)
    struct Mapping {
      uint8_t* base;
      size_t bytes;
      uint64_t lastUse;
    };
    std::map<uint64_t, Mapping> maps;  // its shared allocations mapped here, by id
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

  // The board (see the header): operations in posting order; the front one is on the board.
  struct BoardOp {
    const void* src;
    void* dst;
    uint64_t count;
    DataType dtype;
    RedOp op;
    BoardMode mode;
    TransferOp* done;
    bool streamOut = false;          // two-shot: write dst around the cache (see postBoard)
    bool mapped = false;             // two-shot: src and dst are shared buffers (srcR, dstR)
    bool streamCells = false;        // two-shot: stage and publish into the cells with streaming stores
    Clock::time_point started = {};  // two-shot: when every rank's first chunk was posted (cellModes)
    SharedRegion srcR = {}, dstR = {};
    uint64_t doneElems = 0;  // two-shot: elements of earlier chunks, finished
    int phase = 0;           // this step: a TwoShotPhase
  };
  // Two-shot steps: post the header (and stage, unless mapped); once every header is here, either
  // all ranks are mapped (reduce-and-push, then wait for everyone's push) or the mapped ones stage
  // too and all reduce their slice in their cell, then gather the others' slices.
  enum TwoShotPhase { kPost = 0, kPosted, kStaged, kReduced, kPushed };
  uint64_t boardBytes = 0;  // cell capacity; 0: no board
  bool mappedOk = false;    // every local rank can map every other's shared buffers
  // Two-shot's cells written with plain or with streaming stores, chosen per operation from how
  // fast each did lately (cellMode(); kept per power-of-two size): plain keeps them in a cache the
  // cores share; when they share none, a peer reading a line still dirty in this core's cache
  // costs ~3x one read from memory. Measured here: 16 MiB, 2 ranks 7.6 vs 5.2 GB/s sharing a
  // cache, 2.5 vs 7.5 apart; 4 ranks 4.4 vs 3.3, 1.8 vs 4.2.
  struct CellModeStats {
    double nsPerByte[2] = {0, 0};  // EWMA per mode (0: not measured yet), [streaming]
    uint64_t ops = 0;              // operations of this size class so far
  };
  std::vector<CellModeStats> cellModes = std::vector<CellModeStats>(64);
  int cellStreamingForced = -1;  // TRIB_SHM_STREAM_CELLS: -1 auto, 0 never, 1 always
  std::vector<uint8_t> foldScratch;
  std::vector<const uint8_t*> mappedIn;  // stepMapped: every rank's input and output, mapped here
  std::vector<uint8_t*> mappedOut;       // the fold's accumulator when the cells are streamed
  uint64_t mapClock = 0;                 // Peer::Mapping::lastUse
  std::atomic<uint64_t> mappedOps{0};    // all-reduces done by stepMapped
  uint64_t boardSeq = 0;                 // board steps completed
  std::atomic<uint64_t> boardMoves{0};   // phases completed (ShmBoard::progressCount)
  std::deque<BoardOp> boardOps;
  BoardCell* boardCell(int idx, uint64_t k) const {
    uint8_t* seg = idx == myIdx ? mine : peers[idx].seg;
    return reinterpret_cast<BoardCell*>(seg + hdr->boardOffset + (k & 1) * (sizeof(BoardCell) + boardBytes));
  }
  Status postBoard(BoardOp o);
  void advanceBoard();
  // Whether every local rank's cell of step k has `flag` (seq or result) at k+1; fails the board
  // when one that has not is dead.
  bool boardReady(uint64_t k, std::atomic<uint64_t> BoardCell::*flag);
  Status checkCells(const BoardOp& o, uint64_t k, uint64_t bytes);
  bool stepOneShot(BoardOp& o);
  bool stepTwoShot(BoardOp& o);
  bool chooseStreamCells(uint64_t bytes);
  void recordCellMode(const BoardOp& o);
  void stepMapped(BoardOp& o, uint64_t k);
  Status mapPeerRegion(Peer& p, const SharedRegion& r, uint64_t bytes, uint8_t** at);
  void failBoard(const Status& why);

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

// The board as the executor sees it: a CollectiveOffload over the transport's state, one per mode
// (OneShot and TwoShot schedules); both feed one queue, so the steps stay in one sequence.
class ShmBoard final : public CollectiveOffload {
 public:
  ShmBoard(ShmTransport::Impl* im, BoardMode mode) : im_(im), mode_(mode) {}
  const char* name() const override { return mode_ == kOneShot ? "shm-board" : "shm-board-twoshot"; }
  Status postAllReduce(const void* src, void* dst, uint64_t count, DataType dtype, RedOp op,
                       TransferOp* done) override {
    std::lock_guard<std::mutex> lock(im_->mu);
    ShmTransport::Impl::BoardOp o{
        .src = src, .dst = dst, .count = count, .dtype = dtype, .op = op, .mode = mode_, .done = done};
    Status st = im_->postBoard(o);
    if (!st.ok()) {
      done->fail(st);
      return st;
    }
    im_->advanceBoard();
    return Status::Ok();
  }
  Status progress() override {
    std::lock_guard<std::mutex> lock(im_->mu);
    if (im_->boardOps.empty() || !im_->aborted.ok()) return Status::Ok();
    im_->advanceBoard();
    // A peer that never posts may be dead; the check reads the clock, so not on every poll.
    if (!im_->boardOps.empty() && ++polls_ % 64 == 0) im_->checkLiveness();
    return Status::Ok();
  }
  uint64_t progressCount() const override { return im_->boardMoves.load(std::memory_order_relaxed); }
  void abort(const Status& why) override {
    std::lock_guard<std::mutex> lock(im_->mu);
    im_->failBoard(why.ok() ? errorf(tribAborted, "shm board aborted") : why);
  }

 private:
  ShmTransport::Impl* im_;
  BoardMode mode_;
  unsigned polls_ = 0;
};

// The last-level cache one core sees: sysfs gives one instance's size (sysconf may give the sum
// over all instances, 10x too large on this project's VMs).
static uint64_t lastLevelCacheBytes() {
  uint64_t best = 0;
  for (int i = 0; i < 8; ++i) {
    std::ifstream f(strprintf("/sys/devices/system/cpu/cpu0/cache/index%d/size", i));
    uint64_t v = 0;
    char unit = 0;
    if (f >> v >> unit) best = std::max(best, v << (unit == 'K' ? 10 : unit == 'M' ? 20 : 0));
  }
  if (best) return best;
  long v = sysconf(_SC_LEVEL3_CACHE_SIZE);
  return v > 0 ? static_cast<uint64_t>(v) : 32 << 20;
}

Status ShmTransport::Impl::postBoard(BoardOp o) {
  const uint64_t es = validDataType(o.dtype) ? dataTypeSize(o.dtype) : 0;
  if (!es || !validRedOp(o.op) || o.op == tribAvg)
    return errorf(tribInvalidArgument, "shm board: invalid dtype %d or op %d", o.dtype, o.op);
  if (o.count > UINT64_MAX / es)
    return errorf(tribInvalidArgument, "shm board: %llu elements of %s overflow a byte count",
                  static_cast<unsigned long long>(o.count), dataTypeName(o.dtype));
  // Two-shot runs any size in cell-sized chunks; one-shot takes one cell.
  if (o.mode == kOneShot ? o.count > boardBytes / es : boardBytes < es * peers.size())
    return errorf(tribInvalidArgument,
                  "shm board: %llu elements of %s exceed its %llu-byte cells (TRIB_SHM_BOARD_BYTES)",
                  static_cast<unsigned long long>(o.count), dataTypeName(o.dtype),
                  static_cast<unsigned long long>(boardBytes));
  if (o.count && (!o.src || !o.dst)) return errorf(tribInvalidArgument, "shm board: null buffer");
  if (!aborted.ok()) return aborted;
  // Out of place, once the destination is mostly cold, streaming stores skip reading each line
  // before writing it; before that, plain stores are faster. Where "cold" starts, measured here
  // (busbw, streaming vs plain): 2 ranks 4 MiB 8.7-8.9 vs 12.7-13.1 GB/s (plain), 8 MiB 8.2-8.6 vs
  // 6.6-10.1, 16 MiB 6.4 vs 4.9 (streaming); 4 ranks on 2 cores 1 MiB 5.2-5.8 vs 6.3-7.8 (plain),
  // 2 MiB 4.9-5.6 vs 3.7-4.6 (streaming). The rule: the local ranks' inputs and outputs, times the
  // ranks sharing a core (a switch between them evicts the other's lines), reach the last-level
  // cache. In place the lines were just read, so they stay cached.
  static const uint64_t llc = lastLevelCacheBytes();
  static const uint64_t cores = std::max<long>(1, sysconf(_SC_NPROCESSORS_ONLN));
  const uint64_t perCore = (peers.size() + cores - 1) / cores;
  o.streamOut = o.src != o.dst && 2 * peers.size() * o.count * es * perCore >= llc;
  const uint64_t bytes = o.count * es;
  o.mapped = o.mode == kTwoShot && mappedOk && bytes && findSharedRegion(o.src, bytes, &o.srcR) &&
             findSharedRegion(o.dst, bytes, &o.dstR);
  boardOps.push_back(o);
  return Status::Ok();
}

bool ShmTransport::Impl::boardReady(uint64_t k, std::atomic<uint64_t> BoardCell::*flag) {
  for (size_t j = 0; j < peers.size(); ++j) {
    const BoardCell* c = boardCell(static_cast<int>(j), k);
    if ((c->*flag).load(std::memory_order_acquire) == k + 1) continue;
    // Not there yet. A peer that died before writing it never will (one that wrote it and then
    // exited left it in the still-mapped segment, and is simply read); nor will one whose
    // transport broke (it says so in its segment header).
    const bool gone = !peers[j].dead.ok();
    if (gone || peerBroken(peers[j])) {
      // It may have written the flag just after the load above, and then died or broken (a peer
      // that finds mismatched arguments publishes, then breaks): seen broken or dead, look again,
      // or this rank would report the peer instead of the mismatch it reports itself.
      if ((c->*flag).load(std::memory_order_acquire) == k + 1) continue;
      failBoard(gone ? peers[j].dead : brokenPeerError(peers[j]));
    }
    return false;
  }
  return true;
}

Status ShmTransport::Impl::checkCells(const BoardOp& o, uint64_t k, uint64_t bytes) {
  const uint64_t total = o.count * dataTypeSize(o.dtype);
  for (size_t j = 0; j < peers.size(); ++j) {
    const BoardCell* c = boardCell(static_cast<int>(j), k);
    if (c->bytes != bytes || c->total != total || c->dtype != static_cast<uint32_t>(o.dtype) ||
        c->op != static_cast<uint32_t>(o.op) || c->mode != o.mode)
      return errorf(tribInvalidUsage,
                    "shm board: rank %d posted %llu of %llu bytes of dtype %u op %u (%s), this rank %llu of "
                    "%llu bytes of %s %s (%s) (mismatched collective arguments across ranks?)",
                    peers[j].rank, static_cast<unsigned long long>(c->bytes),
                    static_cast<unsigned long long>(c->total), c->dtype, c->op,
                    c->mode == kTwoShot ? "two-shot" : "one-shot", static_cast<unsigned long long>(bytes),
                    static_cast<unsigned long long>(total), dataTypeName(o.dtype), redOpName(o.op),
                    o.mode == kTwoShot ? "two-shot" : "one-shot");
  }
  return Status::Ok();
}

// Publishes this rank's header of step k (the data is already in its cell).
static void publishCell(BoardCell* c, uint64_t k, uint64_t bytes, uint64_t total, DataType dtype, RedOp op,
                        BoardMode mode) {
  c->bytes = bytes;
  c->total = total;
  c->dtype = static_cast<uint32_t>(dtype);
  c->op = static_cast<uint32_t>(op);
  c->mode = mode;
  c->seq.store(k + 1, std::memory_order_release);
}

namespace {

// acc = input(0) op input(1) op ... op input(n-1), in that order (every rank folding the same
// inputs gets the same bits). acc may be one of the inputs only if it is input(0).
template <typename Input>
void foldInRankOrder(void* acc, uint32_t n, Input input, uint64_t count, DataType dtype, RedOp op) {
  if (n == 1) {
    if (count) std::memmove(acc, input(0), count * dataTypeSize(dtype));
    return;
  }
  reduce(acc, input(0), input(1), count, dtype, op);
  for (uint32_t j = 2; j < n; ++j) reduce(acc, acc, input(j), count, dtype, op);
}

// Two-shot's n slices of `count` elements: slice j is [begin(j), begin(j) + len(j)), each starting
// on a 64-byte boundary where the element size allows it.
struct Slices {
  uint64_t count, per;
  Slices(uint64_t count, uint32_t n, uint64_t es) : count(count) {
    const uint64_t align = es <= 64 && 64 % es == 0 ? 64 / es : 1;
    per = ((count + n - 1) / n + align - 1) / align * align;
  }
  uint64_t begin(uint32_t j) const { return std::min(count, j * per); }
  uint64_t len(uint32_t j) const { return std::min(count, (j + 1) * per) - begin(j); }
};

using CopyFn = void (*)(void*, const void*, size_t);
CopyFn copier(bool streaming) {
  return streaming ? copyStreaming : [](void* d, const void* s, size_t b) { std::memcpy(d, s, b); };
}

}  // namespace

bool ShmTransport::Impl::stepOneShot(BoardOp& o) {
  const uint32_t nlocal = static_cast<uint32_t>(peers.size());
  const uint64_t k = boardSeq;
  const uint64_t bytes = o.count * dataTypeSize(o.dtype);
  if (o.phase == 0) {
    BoardCell* c = boardCell(myIdx, k);
    if (bytes) std::memcpy(c->data(), o.src, bytes);
    publishCell(c, k, bytes, bytes, o.dtype, o.op, kOneShot);
    o.phase = 1;
  }
  if (!boardReady(k, &BoardCell::seq)) return false;
  Status st = checkCells(o, k, bytes);
  if (!st.ok()) {
    failBoard(st);
    return false;
  }
  // Every rank reduces in the same (rank) order: identical bits everywhere.
  foldInRankOrder(
      o.dst, nlocal, [&](uint32_t j) { return boardCell(static_cast<int>(j), k)->data(); }, o.count, o.dtype,
      o.op);
  ++boardSeq;
  return true;
}

// One chunk (step k) of a two-shot all-reduce. The chunk is cut into n slices, slice j reduced by
// local rank j: post copies the slices the others reduce into this rank's cell; reduce folds slice
// `me` of every input in rank order (this rank's own from its source) into slice `me` of its cell,
// copies it to the destination and publishes `result`; gather copies the others' reduced slices.
// Cell reuse keeps the one-shot argument: step k+2 is posted only after step k+1 completed, which
// needs every rank's k+1 result, published after that rank's last read of step k.
// A rank whose buffers are shared posts only their regions; when every rank did, the whole
// operation is one mapped step (stepMapped); otherwise those ranks stage now, and the chunk runs
// as above.
bool ShmTransport::Impl::stepTwoShot(BoardOp& o) {
  const uint32_t nlocal = static_cast<uint32_t>(peers.size());
  const uint64_t k = boardSeq;
  const uint64_t es = dataTypeSize(o.dtype);
  const uint64_t cnt = std::min(o.count - o.doneElems, boardBytes / es);
  const Slices sl(cnt, nlocal, es);
  const auto* src = static_cast<const uint8_t*>(o.src) + o.doneElems * es;
  auto* dst = static_cast<uint8_t*>(o.dst) + o.doneElems * es;
  const uint32_t me = static_cast<uint32_t>(myIdx);
  BoardCell* mineCell = boardCell(myIdx, k);
  const CopyFn out = copier(o.streamOut), toCell = copier(o.streamCells);
  auto stage = [&] {
    for (uint32_t j = 0; j < nlocal; ++j)
      if (j != me && sl.len(j))
        toCell(mineCell->data() + sl.begin(j) * es, src + sl.begin(j) * es, sl.len(j) * es);
    mineCell->staged.store(k + 1, std::memory_order_release);
  };
  if (o.phase == kPost) {
    const bool mapped = o.mapped && o.doneElems == 0;
    if (o.doneElems == 0) o.streamCells = chooseStreamCells(o.count * es);
    mineCell->mapped = mapped;
    if (mapped) {
      mineCell->src = o.srcR;
      mineCell->dst = o.dstR;
    } else {
      stage();
    }
    publishCell(mineCell, k, cnt * es, o.count * es, o.dtype, o.op, kTwoShot);
    o.phase = kPosted;
  }
  if (o.phase == kPosted) {
    if (!boardReady(k, &BoardCell::seq)) return false;
    Status st = checkCells(o, k, cnt * es);
    if (!st.ok()) {
      failBoard(st);
      return false;
    }
    // Timed from here (arrival skew is not the mode's), only where the mode is chosen.
    if (o.doneElems == 0 && cellStreamingForced < 0 && o.count * es >= kAdaptiveCellBytes)
      o.started = Clock::now();
    bool allMapped = true;
    for (uint32_t j = 0; j < nlocal; ++j) allMapped = allMapped && boardCell(static_cast<int>(j), k)->mapped;
    if (allMapped) {
      stepMapped(o, k);
      if (boardOps.empty()) return false;  // failed
      o.phase = kPushed;
    } else {
      if (mineCell->mapped) stage();
      o.phase = kStaged;
    }
  }
  if (o.phase == kPushed) {
    if (!boardReady(k, &BoardCell::result)) return false;
    o.doneElems = o.count;
    o.phase = kPost;
    ++boardSeq;
    boardMoves.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  if (o.phase == kStaged) {
    if (!boardReady(k, &BoardCell::staged)) return false;
    const uint64_t off = sl.begin(me) * es, m = sl.len(me);
    auto input = [&](uint32_t j) -> const uint8_t* {
      return j == me ? src + off : boardCell(static_cast<int>(j), k)->data() + off;
    };
    // The cell's slice `me` is free (nobody reads it before `result`); streaming, the fold runs in
    // private memory and its result is streamed into the cell, so no peer reads a dirty line.
    if (o.streamCells && foldScratch.size() < boardBytes) foldScratch.resize(boardBytes);
    uint8_t* acc = (o.streamCells ? foldScratch.data() : mineCell->data()) + off;
    if (m) {
      foldInRankOrder(acc, nlocal, input, m, o.dtype, o.op);
      // In place, dst's slice `me` is src's: written only now that the fold has read it.
      out(dst + off, acc, m * es);
      if (o.streamCells) copyStreaming(mineCell->data() + off, acc, m * es);
    }
    mineCell->result.store(k + 1, std::memory_order_release);
    o.phase = kReduced;
    boardMoves.fetch_add(1, std::memory_order_relaxed);
  }
  if (!boardReady(k, &BoardCell::result)) return false;
  for (uint32_t j = 0; j < nlocal; ++j)
    if (j != me && sl.len(j))
      out(dst + sl.begin(j) * es, boardCell(static_cast<int>(j), k)->data() + sl.begin(j) * es,
          sl.len(j) * es);
  o.doneElems += cnt;
  o.phase = kPost;
  ++boardSeq;
  boardMoves.fetch_add(1, std::memory_order_relaxed);
  if (o.doneElems != o.count) return false;
  recordCellMode(o);
  return true;
}

// Every rank runs this on the same sequence of operations, so the exploring ones coincide. Per
// power-of-two size class: the first two operations (first touch of the buffers, cold caches)
// write plainly and are not timed; the next eight alternate (one slow sample must not decide);
// from then on the 1st of every 16 streams and the 2nd writes plainly, and the others take
// whichever was faster (per byte, EWMA). Ranks may still pick differently on a near tie; that is
// harmless (the flags order the data either way).
bool ShmTransport::Impl::chooseStreamCells(uint64_t bytes) {
  if (cellStreamingForced >= 0) return cellStreamingForced != 0;
  if (bytes < kAdaptiveCellBytes) return false;
  CellModeStats& st = cellModes[63 - __builtin_clzll(bytes)];
  const uint64_t n = st.ops++;
  if (n < 10) return n >= 2 && n % 2 == 0;
  if (n % 16 == 0) return true;
  if (n % 16 == 1) return false;
  return st.nsPerByte[1] < st.nsPerByte[0];
}

void ShmTransport::Impl::recordCellMode(const BoardOp& o) {
  const uint64_t bytes = o.count * dataTypeSize(o.dtype);
  if (cellStreamingForced >= 0 || bytes < kAdaptiveCellBytes || o.mapped) return;
  CellModeStats& st = cellModes[63 - __builtin_clzll(bytes)];
  if (st.ops <= 2) return;  // one of the untimed first two (operations complete in order)
  const double ns = std::chrono::duration<double, std::nano>(Clock::now() - o.started).count();
  double& avg = st.nsPerByte[o.streamCells ? 1 : 0];
  avg = avg == 0 ? ns / bytes : 0.5 * avg + 0.5 * ns / bytes;
}

// The whole operation as one step when every rank's buffers are shared: this rank folds slice `me`
// of every rank's input, in rank order, straight from their mappings into cache-sized pieces of
// its cell, and writes each piece into every rank's output; `result` then says its slice is
// everywhere. Nothing is staged and nothing gathered: each byte of output is written once, by the
// rank that reduced it. Safe without more synchronisation: a rank's input is read only after its
// header (seq) is posted and its output written only then; it returns only after every rank's
// `result`, published after that rank's last read of its input and last write to its output. In
// place, slice `me` of each output is that rank's input slice `me`, read by this rank alone,
// piece by piece before it is written.
void ShmTransport::Impl::stepMapped(BoardOp& o, uint64_t k) {
  const uint32_t nlocal = static_cast<uint32_t>(peers.size());
  const uint64_t es = dataTypeSize(o.dtype), bytes = o.count * es;
  std::vector<const uint8_t*>& in = mappedIn;  // members: no allocation per operation
  std::vector<uint8_t*>& outs = mappedOut;
  in.resize(nlocal);
  outs.resize(nlocal);
  for (uint32_t j = 0; j < nlocal; ++j) {
    if (static_cast<int>(j) == myIdx) {
      in[j] = static_cast<const uint8_t*>(o.src);
      outs[j] = static_cast<uint8_t*>(o.dst);
      continue;
    }
    const BoardCell* c = boardCell(static_cast<int>(j), k);
    uint8_t *s = nullptr, *d = nullptr;
    Status st = mapPeerRegion(peers[j], c->src, bytes, &s);
    if (st.ok()) st = mapPeerRegion(peers[j], c->dst, bytes, &d);
    if (!st.ok()) {
      failBoard(st);
      return;
    }
    in[j] = s;
    outs[j] = d;
  }
  const Slices slices(o.count, nlocal, es);
  const uint64_t first = slices.begin(myIdx), last = first + slices.len(myIdx);
  // Pieces that stay in the core's private cache between the fold and the copies out.
  // (128 KiB to 1 MiB measured alike here; streaming stores for cold outputs helped as in two-shot.)
  const uint64_t piece = std::max<uint64_t>(1, std::min<uint64_t>(boardBytes, 256 << 10) / es);
  uint8_t* acc = boardCell(myIdx, k)->data();
  const CopyFn out = copier(o.streamOut);
  for (uint64_t at = first; at < last; at += piece) {
    const uint64_t m = std::min(piece, last - at), off = at * es;
    foldInRankOrder(
        acc, nlocal, [&](uint32_t j) { return in[j] + off; }, m, o.dtype, o.op);
    // Starting with the next rank spreads the writers over the outputs.
    for (uint32_t i = 1; i <= nlocal; ++i) out(outs[(myIdx + i) % nlocal] + off, acc, m * es);
  }
  boardCell(myIdx, k)->result.store(k + 1, std::memory_order_release);
  boardMoves.fetch_add(1, std::memory_order_relaxed);
  mappedOps.fetch_add(1, std::memory_order_relaxed);
}

// Maps (or finds mapped) the shared allocation `r` of peer `p` and checks that `bytes` from its
// offset lie inside it: a header naming anything else fails the call, never this process.
Status ShmTransport::Impl::mapPeerRegion(Peer& p, const SharedRegion& r, uint64_t bytes, uint8_t** at) {
  if (r.offset > r.mapBytes || bytes > r.mapBytes - r.offset)
    return errorf(tribRemoteError,
                  "shm board: rank %d posted a %llu-byte buffer at offset %llu of a %llu-byte one", p.rank,
                  static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(r.offset),
                  static_cast<unsigned long long>(r.mapBytes));
  auto it = p.maps.find(r.id);
  if (it == p.maps.end() || it->second.bytes != r.mapBytes) {
    if (it != p.maps.end()) {
      munmap(it->second.base, it->second.bytes);
      p.maps.erase(it);
    }
    int fd = p.pidfd < 0 ? -1 : pidfdGetfd(p.pidfd, r.fd);
    if (fd < 0)
      return errorf(tribSystemError, "shm board: cannot take rank %d's buffer (fd %d) with pidfd_getfd: %s",
                    p.rank, r.fd, strerror(errno));
    struct stat sb {};
    void* m = MAP_FAILED;
    const bool big = fstat(fd, &sb) == 0 && static_cast<uint64_t>(sb.st_size) >= r.mapBytes;
    if (big) m = mmap(nullptr, r.mapBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (!big)
      return errorf(tribRemoteError,
                    "shm board: rank %d's buffer (fd %d) is not a %llu-byte shared allocation", p.rank, r.fd,
                    static_cast<unsigned long long>(r.mapBytes));
    if (m == MAP_FAILED)
      return errorf(tribSystemError, "shm board: mapping rank %d's %llu-byte buffer: %s", p.rank,
                    static_cast<unsigned long long>(r.mapBytes), strerror(e));
    if (p.maps.size() >= kMaxPeerMappings) {
      auto lru = std::min_element(p.maps.begin(), p.maps.end(), [](const auto& a, const auto& b) {
        return a.second.lastUse < b.second.lastUse;
      });
      munmap(lru->second.base, lru->second.bytes);
      p.maps.erase(lru);
    }
    it = p.maps.emplace(r.id, Peer::Mapping{static_cast<uint8_t*>(m), r.mapBytes, 0}).first;
  }
  it->second.lastUse = ++mapClock;
  *at = it->second.base + r.offset;
  return Status::Ok();
}

void ShmTransport::Impl::advanceBoard() {
  while (!boardOps.empty()) {
    BoardOp& o = boardOps.front();
    // An empty operation takes no step (the schedules post none; this is defensive).
    if (o.count && !(o.mode == kOneShot ? stepOneShot(o) : stepTwoShot(o))) {
      if (boardOps.empty() || o.doneElems == 0 || o.phase != 0) return;  // waiting (or failed)
      continue;                                                          // next chunk
    }
    TransferOp* done = o.done;
    boardOps.pop_front();
    done->complete();
  }
}

void ShmTransport::Impl::failBoard(const Status& why) {
  // The board's sequence is now out of step with the peers': the communicator is broken anyway
  // (any failure breaks it), so no later operation may use the board either.
  for (BoardOp& o : boardOps) o.done->fail(why);
  boardOps.clear();
  if (aborted.ok()) {
    // Tell the peers, so one waiting for this rank fails now rather than at its timeout (its
    // process is alive: the liveness check would not fire).
    std::atomic_ref<uint32_t>(hdr->broken).store(1, std::memory_order_release);
    aborted = why;
  }
}

// ---------------------------------------------------------------------------------------------
// Connection setup

ShmTransport::ShmTransport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ShmTransport::~ShmTransport() {
  // Ops still pending would otherwise wait forever on a transport that is gone.
  abort(errorf(tribAborted, "shm transport destroyed with this operation pending"));
}

ShmTransport::Impl::~Impl() {
  if (!myName.empty() && !unlinked) shm_unlink(myName.c_str());
  for (auto& p : peers) {
    if (p.seg) munmap(p.seg, p.segBytes);
    for (auto& [id, m] : p.maps) munmap(m.base, m.bytes);
    if (p.pidfd >= 0) close(p.pidfd);
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
  const std::string cells = envString("TRIB_SHM_STREAM_CELLS");
  if (cells != "auto" && cells != "0" && cells != "1")
    return errorf(tribInvalidArgument, "shm: TRIB_SHM_STREAM_CELLS='%s' must be auto, 0 or 1", cells.c_str());
  im->cellStreamingForced = cells == "auto" ? -1 : cells == "1" ? 1 : 0;
  int64_t board = im->opt.boardBytes < 0 ? envInt("TRIB_SHM_BOARD_BYTES") : im->opt.boardBytes;
  if (board < 0 || board > (int64_t{1} << 30))
    return errorf(tribInvalidArgument, "shm: TRIB_SHM_BOARD_BYTES %lld must be in [0, 1 GiB]",
                  static_cast<long long>(board));
  // Only when every rank is here: the OneShot schedule needs all of them on the board.
  if (im->localRanks.size() == static_cast<size_t>(nranks))
    im->boardBytes = (static_cast<uint64_t>(board) + 63) / 64 * 64;
  Status st = im->connect(nranks, oob);
  if (!st.ok()) return st.prefix(strprintf("shm transport (rank %d): ", rank));
  out->reset(new ShmTransport(std::move(im)));
  if ((*out)->impl_->boardBytes) {
    (*out)->board_ = std::make_unique<ShmBoard>((*out)->impl_.get(), kOneShot);
    (*out)->twoShotBoard_ = std::make_unique<ShmBoard>((*out)->impl_.get(), kTwoShot);
  }
  return Status::Ok();
}

Status ShmTransport::Impl::connect(int n, const OobAllGather& oob) {
  const uint32_t nlocal = static_cast<uint32_t>(localRanks.size());
  const size_t slotStride = sizeof(SlotHeader) + opt.slotBytes;
  const size_t ringBytes = sizeof(RingCtl) + opt.nslots * slotStride;
  const size_t ringsOffset = 4096;
  const size_t cmaOffset = ringsOffset + nlocal * ringBytes;
  const size_t boardOffset = cmaOffset + kNumCma * sizeof(CmaDesc);
  mineBytes = boardOffset + (boardBytes ? 2 * (sizeof(BoardCell) + boardBytes) : 0);

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
  *hdr = SegHeader{kSegMagic,   rank,       static_cast<int32_t>(getpid()),
                   nlocal,      opt.nslots, opt.slotBytes,
                   ringsOffset, ringBytes,  cmaOffset,
                   mineBytes,   0,          boardOffset,
                   boardBytes,  0,          0};
  TRIB_RETURN_IF_ERROR(randomBytes(&hdr->probe, sizeof hdr->probe));
  for (uint32_t j = 0; j < nlocal; ++j) {
    RingCtl* r = ringIn(mine, static_cast<int>(j));
    new (r) RingCtl();
    r->head.store(0);
    r->tail.store(0);
  }
  myCma = reinterpret_cast<CmaDesc*>(mine + cmaOffset);
  for (uint32_t i = 0; i < kNumCma; ++i) new (&myCma[i]) CmaDesc{};
  for (uint64_t k = 0; k < 2 && boardBytes; ++k) {
    auto* cell = new (mine + boardOffset + k * (sizeof(BoardCell) + boardBytes)) BoardCell{};
    cell->seq.store(0);
    cell->result.store(0);
    cell->staged.store(0);
  }

  // Let peers read this process's memory for single-copy and take its shared buffers' fds (both
  // need ptrace access; Yama ptrace_scope=1 needs this).
  const bool tryMapped = boardBytes && opt.mapped;
  if (opt.cma || tryMapped) prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  // The probe value again, in a memfd peers try to take with pidfd_getfd (mapped two-shot).
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
  net::Writer w;
  w.u32(kBlobMagic);
  w.u32(static_cast<uint32_t>(rank));
  const ProcessIdentity me = selfIdentity();
  w.u32(static_cast<uint32_t>(me.pid));
  w.u64(me.startTime);
  w.str(me.space);
  w.u64(reinterpret_cast<uint64_t>(&hdr->probe));
  w.u64(hdr->probe);
  w.u64(localHash);
  w.u64(mineBytes);
  w.u32(static_cast<uint32_t>(probeFd));
  w.str(boot);
  w.str(myName);
  std::vector<std::vector<uint8_t>> all;
  TRIB_RETURN_IF_ERROR(oob(w.data(), all).prefix("exchanging segment names: "));
  if (static_cast<int>(all.size()) != n)
    return errorf(tribInternalError, "out-of-band allgather returned %zu blobs for %d ranks", all.size(), n);

  peers.resize(nlocal);
  std::vector<std::string> names(nlocal);
  std::vector<uint8_t> canRead(nlocal, 0), canMap(nlocal, 0);
  Status st;
  for (uint32_t j = 0; j < nlocal && st.ok(); ++j) {
    Peer& p = peers[j];
    p.rank = localRanks[j];
    net::Reader r(all[p.rank].data(), all[p.rank].size());
    uint32_t magic = 0, prank = 0, ppid = 0, pprobeFd = 0;
    uint64_t probeAddr = 0, probeVal = 0, hash = 0, bytes = 0, pstart = 0;
    std::string pboot, pspace;
    r.u32(&magic);
    r.u32(&prank);
    r.u32(&ppid);
    r.u64(&pstart);
    r.str(&pspace);
    r.u64(&probeAddr);
    r.u64(&probeVal);
    r.u64(&hash);
    r.u64(&bytes);
    r.u32(&pprobeFd);
    r.str(&pboot);
    r.str(&names[j]);
    if (!r.ok() || magic != kBlobMagic || static_cast<int>(prank) != p.rank) {
      st = errorf(tribInternalError, "rank %d sent a malformed shm connection blob", p.rank);
      break;
    }
    if (hash != localHash) {
      st = errorf(tribInvalidUsage, "rank %d and this rank disagree on the set of local ranks", p.rank);
      break;
    }
    if (pboot != boot) {
      st = errorf(tribInvalidUsage,
                  "rank %d is listed as local but runs on another host or kernel ('%s' vs '%s')", p.rank,
                  pboot.c_str(), boot.c_str());
      break;
    }
    p.proc.pid = static_cast<int32_t>(ppid);
    p.proc.startTime = pstart;
    std::snprintf(p.proc.space, sizeof p.proc.space, "%s", pspace.c_str());
    if (static_cast<int>(j) != myIdx && !(samePidSpace(me, p.proc) && processAlive(p.proc))) {
      // It is alive (it just sent its blob), so its pid is not ours to see: another pid namespace.
      p.watchPid = false;
      TRIB_INFO("transport", "rank %d: rank %d's pid %d is not visible here; its death is left to timeouts",
                rank, p.rank, static_cast<int>(p.proc.pid));
    }
    uint8_t* seg = mine;
    if (static_cast<int>(j) != myIdx) {
      int pfd = shm_open(names[j].c_str(), O_RDWR | O_CLOEXEC, 0);
      if (pfd < 0) {
        st = errorf(tribRemoteError, "cannot open rank %d's segment '%s': %s", p.rank, names[j].c_str(),
                    strerror(errno));
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
      auto* ph = reinterpret_cast<SegHeader*>(seg);
      if (ph->magic != kSegMagic || ph->ownerRank != p.rank || ph->nlocal != nlocal ||
          ph->slotBytes != opt.slotBytes || ph->nslots != opt.nslots || ph->totalBytes != bytes ||
          ph->boardBytes != boardBytes) {
        st = errorf(tribInvalidUsage,
                    "rank %d's shm segment has a different layout (slot size or count, or "
                    "TRIB_SHM_BOARD_BYTES, differ?)",
                    p.rank);
        break;
      }
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
      // Probe mapping shared buffers: take the peer's probe memfd and read the value back.
      if (tryMapped && static_cast<int32_t>(pprobeFd) >= 0 && p.watchPid) {
        p.pidfd = pidfdOpen(p.proc.pid);
        int fd = p.pidfd < 0 ? -1 : pidfdGetfd(p.pidfd, static_cast<int>(pprobeFd));
        uint64_t got = 0;
        canMap[j] = fd >= 0 && pread(fd, &got, sizeof got, 0) == sizeof got && got == probeVal;
        if (!canMap[j])
          TRIB_INFO("transport",
                    "rank %d cannot take rank %d's file descriptors (pidfd_getfd: %s); all-reduce "
                    "of tribMemAlloc buffers is staged through the board",
                    rank, p.rank, fd < 0 ? strerror(errno) : "wrong value");
        if (fd >= 0) close(fd);
      }
    } else {
      canRead[j] = opt.cma ? 1 : 0;
      canMap[j] = tryMapped && probeFd >= 0;
    }
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
  mappedOk = tryMapped;
  for (uint32_t j = 0; j < nlocal; ++j) {
    const auto& b = reads[localRanks[j]];
    if (b.size() != 2 * nlocal + 1 || b[0] != 1)
      return errorf(tribRemoteError, "rank %d failed to map the shm segments", localRanks[j]);
    // I send single-copy to j when I may and j can read me.
    peers[j].useCma = opt.cma && b[1 + myIdx] != 0;
    // Mapped two-shot only when every rank can take every other's buffers (all decide alike).
    for (uint32_t i = 0; i < nlocal; ++i) mappedOk = mappedOk && b[1 + nlocal + i] != 0;
  }
  bounce.resize(kCmaBounce);
  TRIB_INFO("transport", "rank %d: shm connected to %u local ranks (slots %u x %zu B, cma %s, mapped %s)",
            rank, nlocal, opt.nslots, opt.slotBytes, opt.cma ? "on" : "off", mappedOk ? "on" : "off");
  return Status::Ok();
}

bool ShmTransport::mapsSharedBuffers() const { return impl_->mappedOk; }
uint64_t ShmTransport::mappedAllReduces() const { return impl_->mappedOps.load(std::memory_order_relaxed); }

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

void ShmTransport::Impl::handleSlot(Peer& p, const SlotHeader& sh, const uint8_t* data) {
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
      u->data.resize(sh.total);
      m.unexp = u.get();
      match.addMessage(p.rank, sh.tag, std::move(u));
    }
  }
  if (!m.active || m.tag != sh.tag || sh.offset + sh.len > m.total) {
    failPeer(
        p,
        errorf(tribInternalError, "shm: corrupt stream from rank %d (slot for tag %llu at offset %llu)",
               p.rank, static_cast<unsigned long long>(sh.tag), static_cast<unsigned long long>(sh.offset)),
        false);
    return;
  }
  if (m.recv)
    deliver(*m.recv, sh.offset, data, sh.len);
  else if (m.unexp && sh.len > 0)
    std::memcpy(m.unexp->data.data() + sh.offset, data, sh.len);
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
  im.failBoard(st);  // first: it tells the peers only while `aborted` is still unset
  if (im.aborted.ok()) im.aborted = st;
  for (auto& p : im.peers) im.failPeer(p, st, false);
}

uint64_t ShmTransport::boardBytes() const { return impl_->boardBytes; }

namespace {

bool shmCanConnect(const RankLocation& self, const RankLocation& peer) { return sameHost(self, peer); }

// Every rank of the host takes part (also those of one process, which loopback serves by
// default): the rings and the board cover the host's ranks, the same list on each of them.
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
  d.caps.reads = d.caps.writes = kHostMemoryKinds;
  d.caps.twoSided = true;
  d.caps.windows = true;    // the board's cells; tribMemAlloc buffers mapped across processes
  d.caps.zeroCopy = false;  // messages below cmaThreshold are staged through the ring slots
  d.priority = 200;
  d.needsExchange = true;
  d.canConnect = shmCanConnect;
  d.connect = shmConnect;
  return d;
}

}  // namespace trib
