#include "transports/verbs/verbs_transport.hpp"

#include <infiniband/verbs.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "bootstrap/auth.hpp"
#include "common/env.hpp"
#include "common/log.hpp"
#include "cuda/cuda_api.hpp"
#include "cuda/cuda_vmm.hpp"
#include "reduce/reduce.hpp"
#include "transports/match_queue.hpp"
#include "transports/registry.hpp"
#include "transports/verbs/verbs_device.hpp"
#include "transports/verbs/verbs_dmabuf.hpp"
#include "transports/verbs/verbs_reg_cache.hpp"
#include "transports/verbs/verbs_wire.hpp"

namespace trib {
namespace {

using namespace verbs;
using Clock = std::chrono::steady_clock;

// The most of one gap between polls that a liveness probe's deadline counts (probe()).
constexpr std::chrono::milliseconds kProbeGapCounted{500};

std::atomic<bool> corruptAdvertisedRkeys{false};  // verbsTestCorruptAdvertisedRkeys
std::atomic<bool> corruptWindowRkeys{false};      // verbsTestCorruptWindowRkeys

// Work request ids: [kind:8][peer:24][index:32].
enum WrKind : uint64_t {
  kWrRecv = 1,
  kWrEager,
  kWrCts,
  kWrCredit,
  kWrData,
  kWrProbe,
  kWrWinPut,
  kWrWinGet,
  kWrSignal
};
uint64_t wrId(WrKind k, int peer, uint32_t index) {
  return uint64_t{k} << 56 | (uint64_t(peer) & 0xffffff) << 32 | index;
}
WrKind wrKind(uint64_t id) { return static_cast<WrKind>(id >> 56); }
int wrPeer(uint64_t id) { return static_cast<int>((id >> 32) & 0xffffff); }
uint32_t wrIndex(uint64_t id) { return static_cast<uint32_t>(id); }

struct Mr {
  ibv_mr* mr = nullptr;
};

// What a buffer registers as: device memory through dma-buf or nvidia-peermem (verbs_dmabuf.hpp),
// every host kind alike. The caller says which (TransferOp::memory): no driver query per operation.
MemoryKind regKind(MemoryKind k) { return k == MemoryKind::Device ? MemoryKind::Device : MemoryKind::Host; }

// One registered slab of this transport's own buffers.
struct Slab {
  std::unique_ptr<uint8_t[]> mem;
  size_t bytes = 0;
  ibv_mr* mr = nullptr;
};

struct Options {
  uint32_t eagerBytes = 8192;  // per pre-posted buffer, header included
  uint32_t recvBuffers = 64;   // per peer
  uint32_t fifoSlots = 64;
  uint64_t chunkBytes = 1 << 20;
  uint32_t sqDepth = 256;  // per peer, over all its queue pairs
  size_t regKeep = 0;
  uint32_t qps = 1;  // queue pairs per connection
  // Asked of every queue pair: an eager header and a small payload, CTS entries and credit words
  // fit, so they post without the NIC reading them back from memory (as perftest posts them).
  uint32_t inlineBytes = 128;
  uint64_t windowBytes = 0;     // this rank's window (TRIB_WINDOW_BYTES, two cells of 64-byte lines)
  uint32_t readsInFlight = 16;  // RDMA READs a queue pair may have outstanding (device limit applies)
};

// A posted receive, waiting in the match queue or for its data.
struct Recv {
  TransferOp* op = nullptr;
  void* buf = nullptr;
  size_t bytes = 0;
  bool reduce = false;
  ReduceSpec spec;
  MemoryKind memory = MemoryKind::Host;  // buf's (never Device with reduce)
};
// A message that arrived before its receive: an eager payload or a ready-to-send notice.
struct Arrived {
  bool notice = false;
  uint64_t bytes = 0;
  uint32_t sendId = 0;
  std::vector<uint8_t> payload;
};

// A send or write waiting for a slot on the send queue (and a credit, where it consumes one).
struct Work {
  WrKind kind;
  bool needsCredit;
  uint32_t index;  // eager: send buffer; data: send id; cts: slot
  // data chunk
  uint64_t localAddr = 0, remoteAddr = 0, length = 0;
  uint32_t lkey = 0, rkey = 0, imm = 0;
  bool last = false;
  uint32_t qp = 0;        // which of the connection's queue pairs
  SignalRecord signal{};  // kWrSignal: written inline
};

// A put or get on a peer's window, posted, until its completion.
struct WinOp {
  TransferOp* op = nullptr;
  uint64_t reg = 0;
  bool get = false;          // registered in recvRegs_ (written locally), else sendRegs_
  uint32_t outstanding = 0;  // its writes or reads not yet completed
};

// A message through the peer's pre-posted buffers, before it has a send buffer of its own.
struct OutMsg {
  uint32_t type;
  uint64_t tag;
  const void* buf;
  uint64_t bytes;
  uint32_t sendId;
  TransferOp* op;  // eager: completed with the send; notice: nullptr
};

struct LargeSend {
  TransferOp* op = nullptr;
  const void* buf = nullptr;
  size_t bytes = 0;
  MemoryKind memory = MemoryKind::Host;  // buf's
  uint64_t tag = 0;
  uint64_t reg = 0;          // registration id (0: none yet)
  uint32_t outstanding = 0;  // data writes posted, not completed
  bool allPosted = false;
  // Several queue pairs: the write with immediate waits until every data write has completed.
  bool immPending = false;
  uint64_t remoteAddr = 0;
  uint32_t rkey = 0, recvId = 0;
};

struct LargeRecv {
  Recv r;
  uint64_t tag = 0;
  uint64_t reg = 0;
  std::unique_ptr<uint8_t[]> bounce;  // a reduce-receive lands here
};

struct Peer {
  bool active = false;
  std::vector<ibv_qp*> qps;       // [0]: messages, CTS and credit writes, probes; all: data writes
  std::vector<QpAddr> remoteQps;  // the peer's, in the same order
  std::vector<uint32_t> localPsns;
  QpInfo remote;
  BlobHeader remoteHeader;
  Credits credits{1};
  Reposts reposts{1};
  CtsReader ctsIn{1};
  CtsWriter ctsOut{1};
  uint64_t noticesSent = 0;
  std::deque<OutMsg> outbox;  // waiting for a send buffer (or, notices, a FIFO slot)
  WorkQueue<Work> work;       // waiting for the send queue and credits
  std::vector<uint32_t> freeSendBufs;
  std::map<uint32_t, LargeSend> large;  // by send id
  RecvTable<LargeRecv> recvs;           // answered large receives, by the id their CTS carried
  uint32_t sqOutstanding = 0;
  bool lost = false;
  Status lostWhy;
  Clock::time_point lastProbe{};
  bool probeInFlight = false;
  Clock::duration probeWaited{};  // how long this process has polled for its acknowledgement
  // Its window (from its blob; winAddr 0: none) and this rank's signal record there.
  uint64_t winAddr = 0, winSignalAddr = 0;
  uint32_t winRkey = 0;
  uint64_t signalsSent = 0;
  uint32_t lastFingerprintSent = 0;
  std::map<uint32_t, WinOp> winOps;  // posted puts and gets, by id
  bool signalWaited = false;         // a Wait polls for its signal: probe it while so
  SignalRecord lastSignal;           // the latest whole record read from it
};

class VerbsTransport;
// Remote windows (PeerWindows::remote()): this rank's window is registered host memory its peers
// RDMA READ and WRITE; theirs are reached only by posting to the queue pair (transport.hpp).
class VerbsWindows final : public PeerWindows {
 public:
  explicit VerbsWindows(VerbsTransport* t, uint8_t* own, uint64_t bytes, int rank, int nranks);
  ~VerbsWindows() override { munmap(reserved_, reservedBytes_); }
  uint64_t windowBytes() const override { return bytes_; }
  uint8_t* windowOf(int rank) const override {
    return rank == rank_ ? own_ : reserved_ + static_cast<uint64_t>(rank) * bytes_;
  }
  bool remote() const override { return true; }
  void signal(int peer, uint32_t fingerprint) override;
  uint32_t fingerprintMask() const override { return (1u << 20) - 1; }
  Status pollSignals(int peer, uint64_t target, uint64_t* count, uint32_t* fingerprint) override;
  uint64_t& waitsPosted(int peer) override { return waits_[peer]; }
  Status postPut(int peer, uint64_t offset, const void* src, uint64_t bytes, TransferOp* op) override;
  Status postGet(int peer, uint64_t offset, void* dst, uint64_t bytes, TransferOp* op) override;
  Status progress() override;
  void carryNext(uint64_t offset, uint64_t bytes) override {
    const bool fits = bytes > 0 && bytes <= kCarryBytes && offset + bytes <= bytes_;
    carryTag_ = fits ? carryTagOf(offset, bytes) : 0;
  }
  bool readCarried(int rank, uint64_t offset, uint64_t bytes, void* into) override;
  uint64_t carriedReads() const override { return carriedReads_; }
  bool reserved() const { return reserved_ != nullptr; }

 private:
  friend class VerbsTransport;
  uint64_t carryTag_ = 0;  // what the next signals carry (carryNext)
  uint64_t carriedReads_ = 0;
  VerbsTransport* t_;
  uint8_t* own_;
  uint64_t bytes_;
  int rank_;
  std::vector<uint64_t> waits_;
  // The peers' windows' placeholder ranges (the executor orders steps by address): reserved,
  // never accessible.
  uint8_t* reserved_ = nullptr;
  size_t reservedBytes_ = 0;
};

class VerbsTransport final : public Transport {
 public:
  VerbsTransport(int rank, int nranks, Options o, std::chrono::milliseconds timeout)
      : rank_(rank),
        nranks_(nranks),
        opt_(o),
        timeout_(timeout),
        peers_(nranks),
        sendRegs_(
            o.regKeep, [this](uintptr_t a, uint64_t n, MemoryKind k, Mr* m) { return reg(a, n, k, 0, m); },
            dereg),
        recvRegs_(
            o.regKeep,
            [this](uintptr_t a, uint64_t n, MemoryKind k, Mr* m) {
              return reg(a, n, k, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, m);
            },
            dereg) {}
  ~VerbsTransport() override { close(); }
  const char* name() const override { return "verbs"; }

  // localIndex: this rank's index among its host's ranks (equally near ports spread by it).
  Status init(const std::vector<int>& peers, const OobAllGather& oob, int localIndex);
  Status postSend(int peer, uint64_t tag, const void* buf, size_t bytes, TransferOp* op) override;
  Status postRecv(int peer, uint64_t tag, void* buf, size_t bytes, const ReduceSpec* reduce,
                  TransferOp* op) override;
  Status progress() override;
  void abort(const Status& why) override;
  PeerWindows* windows() override { return windows_.get(); }

  // The window provider's operations (VerbsWindows forwards).
  Status postWindowOp(bool get, int peer, uint64_t offset, void* local, uint64_t bytes, TransferOp* op);
  // carryTag (carryTagOf) and carried: what the record carries of this rank's window (0: nothing).
  void postSignal(int peer, uint32_t fingerprint, uint64_t carryTag, const uint64_t carried[2]);
  Status pollSignal(int peer, uint64_t target, uint64_t* count, uint32_t* fingerprint);
  // What the latest whole record from `peer` carried of [offset, +bytes) of its window, if it did.
  bool readCarried(int peer, uint64_t offset, uint64_t bytes, void* into);

 private:
  static void dereg(Mr& m) {
    if (m.mr) ibv_dereg_mr(m.mr);
    m.mr = nullptr;
  }
  Status reg(uintptr_t addr, uint64_t bytes, MemoryKind kind, int access, Mr* out) {
    // Zero bytes cannot be registered; a one-byte registration serves (nothing is transferred).
    const uint64_t n = std::max<uint64_t>(bytes, 1);
    if (kind == MemoryKind::Device)
      return registerDeviceMemory(dev_->pd(), dev_->port().device,
                                  cuda::deviceOf(reinterpret_cast<void*>(addr)), addr, n, access, &out->mr);
    out->mr = ibv_reg_mr(dev_->pd(), reinterpret_cast<void*>(addr), n, access);
    if (!out->mr)
      return errorf(tribSystemError, "verbs: registering %llu bytes at %#llx on %s failed: %s",
                    static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(addr),
                    dev_->port().device.c_str(), std::strerror(errno));
    return Status::Ok();
  }
  Status makeSlab(Slab* s, size_t bytes, int access);
  Status copyToDevice(void* dst, const void* src, size_t bytes);
  Status createQp(int p, uint32_t recvDepth, ibv_qp** out);
  Status connectQp(int p, uint32_t i);
  void queueImm(int p, uint32_t sendId, LargeSend& l);
  std::string who(int p) const {
    return strprintf("rank %d (%s)", p,
                     peers_[p].remoteHeader.device[0] ? peers_[p].remoteHeader.device : "?");
  }
  uint8_t* recvBuf(int p, uint32_t i) {
    return recvSlab_.mem.get() + (size_t(p) * opt_.recvBuffers + i) * opt_.eagerBytes;
  }
  uint8_t* sendBuf(int p, uint32_t i) {
    return sendSlab_.mem.get() + (size_t(p) * opt_.recvBuffers + i) * opt_.eagerBytes;
  }
  CtsEntry* fifo(int p) {
    return reinterpret_cast<CtsEntry*>(fifoSlab_.mem.get()) + size_t(p) * opt_.fifoSlots;
  }
  CtsEntry* ctsSrc(int p) {
    return reinterpret_cast<CtsEntry*>(ctsSlab_.mem.get()) + size_t(p) * opt_.fifoSlots;
  }
  volatile uint64_t* creditWord(int p) {
    return reinterpret_cast<volatile uint64_t*>(creditSlab_.mem.get()) + 2 * p;
  }
  uint64_t* creditSrc(int p) { return reinterpret_cast<uint64_t*>(creditSlab_.mem.get()) + 2 * p + 1; }
  uint64_t repostedByPeer(int p) { return __atomic_load_n(creditWord(p), __ATOMIC_ACQUIRE); }

  Status postRecvBuf(int p, uint32_t i);
  void queueEager(int p, uint32_t type, uint64_t tag, const void* buf, size_t bytes, uint32_t sendId,
                  TransferOp* op);
  void flush(int p);
  void handle(const ibv_wc& wc);
  void onMessage(int p, uint32_t bufIndex, uint32_t len);
  void deliverEager(Recv& r, int p, uint64_t tag, const uint8_t* data, uint64_t n);
  void matchLarge(Recv r, int p, uint64_t tag, uint64_t bytes, uint32_t sendId);
  void writeCts(int p, const CtsEntry& e);
  void onCts(int p, const CtsEntry& e);
  void finishLargeRecv(int p, uint32_t imm);
  void markLost(int p, const Status& why, bool warn = true);
  void brokenConnection(int p, ibv_wc_status status, const char* why) {
    if (!peers_[p].lost)
      markLost(p, errorf(tribRemoteError, "verbs: the connection to %s broke: %s (%s)", who(p).c_str(),
                         ibv_wc_status_str(status), why));
  }
  void failAll(const Status& why);
  void probe(int p, Clock::time_point now, Clock::duration polled);
  void drainEagerSends();
  void quiesceWindows();
  void close();
  Status setUpWindows(const std::vector<Blob>& blobs);
  const SignalRecord* signalSlot(int from) const {
    return reinterpret_cast<const SignalRecord*>(windowSlab_.mem.get() + opt_.windowBytes) + from;
  }

  int rank_, nranks_;
  Options opt_;
  std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::vector<int> flushed_;  // peers whose flushed completions this progress() batch held
  std::shared_ptr<DeviceContext> dev_;
  std::shared_ptr<Inbox> inbox_ = std::make_shared<Inbox>();
  std::vector<Peer> peers_;
  Slab recvSlab_, sendSlab_, fifoSlab_, ctsSlab_, creditSlab_;
  Slab windowSlab_;  // the window, then a SignalRecord per rank (its peers RDMA READ and WRITE it)
  std::unique_ptr<VerbsWindows> windows_;
  uint32_t nextWinOp_ = 1;
  RegCache<Mr> sendRegs_, recvRegs_;
  std::map<int, void*> copyStreams_;  // by CUDA device: where eager payloads go into device memory
  MatchQueue<Recv, Arrived> match_;
  uint32_t nextSendId_ = 1;
  uint32_t inlineBytes_ = UINT32_MAX;  // the least any queue pair was granted
  bool aborted_ = false;
  Status abortWhy_;
  Clock::time_point lastProgress_{};
};

Status VerbsTransport::makeSlab(Slab* s, size_t bytes, int access) {
  s->bytes = std::max<size_t>(bytes, 64);
  s->mem.reset(new (std::align_val_t(64)) uint8_t[s->bytes]());
  s->mr = ibv_reg_mr(dev_->pd(), s->mem.get(), s->bytes, access);
  if (!s->mr)
    return errorf(tribSystemError,
                  "verbs: registering %zu bytes of buffers on %s failed: %s (RLIMIT_MEMLOCK?)", s->bytes,
                  dev_->port().device.c_str(), std::strerror(errno));
  return Status::Ok();
}

Status VerbsTransport::copyToDevice(void* dst, const void* src, size_t bytes) {
  const int device = cuda::deviceOf(dst);
  void*& stream = copyStreams_[device];
  if (!stream) TRIB_RETURN_IF_ERROR(cuda::streamCreate(device, &stream).prefix("verbs: "));
  return cuda::copy(dst, src, bytes, stream).prefix("verbs: an eager message into device memory: ");
}

Status VerbsTransport::init(const std::vector<int>& peerList, const OobAllGather& oob, int localIndex) {
  PortChoice choice;
  TRIB_RETURN_IF_ERROR(choosePort(&choice, callerPlace(), localIndex));
  TRIB_RETURN_IF_ERROR(DeviceContext::open(choice, &dev_));
  TRIB_INFO("transport", "verbs: rank %d uses %s:%d (%s), GID index %d (%s), MTU %s", rank_,
            choice.device.c_str(), choice.port, choice.why.c_str(), choice.gidIndex,
            gidText(choice.gid).c_str(), mtuName(choice.mtu));
  // RDMA READs in flight per queue pair (the window's gets): as many as the device takes, up to ours.
  ibv_device_attr attr{};
  if (ibv_query_device(dev_->ctx(), &attr) == 0)
    opt_.readsInFlight = static_cast<uint32_t>(std::clamp(
        std::min({static_cast<int>(opt_.readsInFlight), attr.max_qp_rd_atom, attr.max_qp_init_rd_atom}), 1,
        255));
  else
    opt_.readsInFlight = 1;
  const int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  const size_t perPeer = size_t(opt_.recvBuffers) * opt_.eagerBytes;
  TRIB_RETURN_IF_ERROR(makeSlab(&recvSlab_, perPeer * nranks_, IBV_ACCESS_LOCAL_WRITE));
  TRIB_RETURN_IF_ERROR(makeSlab(&sendSlab_, perPeer * nranks_, 0));
  TRIB_RETURN_IF_ERROR(makeSlab(&fifoSlab_, sizeof(CtsEntry) * opt_.fifoSlots * nranks_, rw));
  TRIB_RETURN_IF_ERROR(makeSlab(&ctsSlab_, sizeof(CtsEntry) * opt_.fifoSlots * nranks_, 0));
  TRIB_RETURN_IF_ERROR(makeSlab(&creditSlab_, 16 * size_t(nranks_), rw));

  Blob mine;
  mine.header.rank = rank_;
  mine.header.nranks = nranks_;
  std::memcpy(mine.header.gid, choice.gid.raw, 16);
  mine.header.lid = choice.lid;
  mine.header.port = static_cast<uint8_t>(choice.port);
  mine.header.mtu = static_cast<uint8_t>(choice.mtu);
  mine.header.eagerBytes = opt_.eagerBytes;
  mine.header.recvBuffers = opt_.recvBuffers;
  mine.header.fifoSlots = opt_.fifoSlots;
  mine.header.qpsPerConnection = opt_.qps;
  mine.header.readsInFlight = opt_.readsInFlight;
  std::snprintf(mine.header.device, sizeof mine.header.device, "%s", choice.device.c_str());
  mine.qp.resize(nranks_);
  mine.extra.resize(size_t(nranks_) * (opt_.qps - 1));
  for (int p : peerList) {
    if (p == rank_ || p < 0 || p >= nranks_) continue;
    Peer& pe = peers_[p];
    pe.qps.assign(opt_.qps, nullptr);
    pe.localPsns.assign(opt_.qps, 0);
    for (uint32_t i = 0; i < opt_.qps; ++i) {
      // Only the first receives: the others carry plain RDMA writes.
      TRIB_RETURN_IF_ERROR(createQp(p, i == 0 ? opt_.recvBuffers : 1, &pe.qps[i]));
      // The starting PSN is part of what binds the RC pair to the job's exchange
      // (docs/SECURITY.md): from the system's random source, not a generator one observed PSN
      // would reveal.
      auth::Nonce r{};
      TRIB_RETURN_IF_ERROR(auth::freshNonce(&r));
      pe.localPsns[i] = (r[0] | r[1] << 8 | r[2] << 16) & 0xffffffu;
      if (i) mine.extra[size_t(p) * (opt_.qps - 1) + i - 1] = QpAddr{pe.qps[i]->qp_num, pe.localPsns[i]};
    }
    pe.active = true;
    pe.credits = Credits(0);
    pe.reposts = Reposts(std::max(1u, opt_.recvBuffers / 4));
    pe.ctsIn = CtsReader(opt_.fifoSlots);
    pe.ctsOut = CtsWriter(opt_.fifoSlots);
    for (uint32_t i = opt_.recvBuffers; i-- > 0;) pe.freeSendBufs.push_back(i);
    for (uint32_t i = 0; i < opt_.recvBuffers; ++i) TRIB_RETURN_IF_ERROR(postRecvBuf(p, i));
    QpInfo& q = mine.qp[p];
    q.qpn = pe.qps[0]->qp_num;
    q.psn = pe.localPsns[0];
    q.fifoAddr = reinterpret_cast<uintptr_t>(fifo(p));
    q.fifoRkey = fifoSlab_.mr->rkey;
    q.creditAddr = reinterpret_cast<uintptr_t>(creditWord(p));
    q.creditRkey = creditSlab_.mr->rkey;
  }
  // A window only where this transport reaches every other rank (peer-memory schedules need every
  // rank's) and its signals can go inline (written whole at post time); whether the communicator
  // has windows is decided from every rank's blob, so alike on every rank.
  int reached = 0;
  for (const Peer& pe : peers_) reached += pe.active;
  if (opt_.windowBytes && reached == nranks_ - 1 && nranks_ > 1 && inlineBytes_ >= sizeof(SignalRecord)) {
    TRIB_RETURN_IF_ERROR(makeSlab(&windowSlab_, opt_.windowBytes + sizeof(SignalRecord) * nranks_,
                                  rw | IBV_ACCESS_REMOTE_READ));
    mine.header.windowAddr = reinterpret_cast<uintptr_t>(windowSlab_.mem.get());
    mine.header.windowBytes = opt_.windowBytes;
    mine.header.windowRkey = windowSlab_.mr->rkey;
    // (The test hook: peers' RDMA on this window is refused, as a stale key would be.)
    if (corruptWindowRkeys.load(std::memory_order_relaxed)) mine.header.windowRkey = ~mine.header.windowRkey;
  }
  std::vector<std::vector<uint8_t>> all;
  TRIB_RETURN_IF_ERROR(oob(encodeBlob(mine), all).prefix("verbs: exchanging connection blobs: "));
  if (static_cast<int>(all.size()) != nranks_)
    return errorf(tribInternalError, "verbs: the exchange returned %zu blobs for %d ranks", all.size(),
                  nranks_);
  std::vector<Blob> blobs(nranks_);
  for (int p = 0; p < nranks_; ++p)
    if (p != rank_) TRIB_RETURN_IF_ERROR(decodeBlob(all[p], p, nranks_, &blobs[p]));
  for (int p = 0; p < nranks_; ++p) {
    if (!peers_[p].active) continue;
    const Blob& b = blobs[p];
    Peer& pe = peers_[p];
    pe.remoteHeader = b.header;
    pe.remote = b.qp[rank_];
    if (b.qp[rank_].qpn == 0)
      return errorf(tribRemoteError,
                    "verbs: rank %d (%s) made no queue pair for rank %d (the ranks disagree "
                    "on which transport connects them)",
                    p, b.header.device, rank_);
    pe.credits = Credits(b.header.recvBuffers);
    if (b.header.eagerBytes != opt_.eagerBytes || b.header.fifoSlots != opt_.fifoSlots ||
        b.header.qpsPerConnection != opt_.qps)
      return errorf(tribInvalidUsage,
                    "verbs: rank %d uses %u-byte eager buffers, %u FIFO slots and %u queue pairs per "
                    "connection, this rank %u, %u and %u (TRIB_IB_* settings must agree across ranks)",
                    p, b.header.eagerBytes, b.header.fifoSlots, b.header.qpsPerConnection, opt_.eagerBytes,
                    opt_.fifoSlots, opt_.qps);
    pe.remoteQps.assign(1, QpAddr{pe.remote.qpn, pe.remote.psn});
    for (uint32_t i = 1; i < opt_.qps; ++i)
      pe.remoteQps.push_back(b.extra[size_t(rank_) * (opt_.qps - 1) + i - 1]);
    for (uint32_t i = 0; i < opt_.qps; ++i) TRIB_RETURN_IF_ERROR(connectQp(p, i));
  }
  // No rank sends before every rank's queue pairs take packets (RTR): a packet that reaches one
  // still in INIT is dropped and sent again only after the retransmission timeout, 1.07 s (a
  // connection's first probe was acknowledged after 1.1 s in the soft-RoCE guest).
  std::vector<std::vector<uint8_t>> ready;
  TRIB_RETURN_IF_ERROR(oob({}, ready).prefix("verbs: waiting for every rank's queue pairs: "));
  return setUpWindows(blobs);
}

// Windows when every rank published one (of this rank's size: TRIB_WINDOW_BYTES must agree).
Status VerbsTransport::setUpWindows(const std::vector<Blob>& blobs) {
  if (!windowSlab_.mr) return Status::Ok();
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_) continue;
    const BlobHeader& h = blobs[p].header;
    if (h.windowBytes == 0) return Status::Ok();  // no windows here (nor on any rank: all see it)
    if (h.windowBytes != opt_.windowBytes)
      return errorf(tribInvalidUsage,
                    "verbs: rank %d (%s) has a %llu-byte window, this rank %llu (TRIB_WINDOW_BYTES must "
                    "agree across ranks)",
                    p, h.device, static_cast<unsigned long long>(h.windowBytes),
                    static_cast<unsigned long long>(opt_.windowBytes));
  }
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_) continue;
    Peer& pe = peers_[p];
    pe.winAddr = blobs[p].header.windowAddr;
    pe.winRkey = blobs[p].header.windowRkey;
    pe.winSignalAddr = windowSignalAddr(blobs[p].header, rank_);
  }
  windows_ = std::make_unique<VerbsWindows>(this, windowSlab_.mem.get(), opt_.windowBytes, rank_, nranks_);
  if (!windows_->reserved()) {
    windows_.reset();
    return errorf(tribSystemError, "verbs: reserving address space for %d windows failed: %s", nranks_,
                  std::strerror(errno));
  }
  return Status::Ok();
}

Status VerbsTransport::createQp(int p, uint32_t recvDepth, ibv_qp** out) {
  const PortChoice& me = dev_->port();
  ibv_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = dev_->cq();
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = opt_.sqDepth;
  ia.cap.max_recv_wr = recvDepth;
  ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
  ia.cap.max_inline_data = opt_.inlineBytes;
  *out = ibv_create_qp(dev_->pd(), &ia);
  if (!*out && errno == EINVAL && ia.cap.max_inline_data) {  // a device without inline sends
    ia.cap.max_inline_data = 0;
    *out = ibv_create_qp(dev_->pd(), &ia);
  }
  if (!*out)
    return errorf(tribSystemError, "verbs: creating a queue pair for rank %d on %s failed: %s", p,
                  me.device.c_str(), std::strerror(errno));
  // ibv_create_qp writes back what the device granted; keep what all queue pairs allow.
  inlineBytes_ = std::min(inlineBytes_, ia.cap.max_inline_data);
  dev_->route((*out)->qp_num, inbox_);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = static_cast<uint8_t>(me.port);
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;  // READ: the window's gets
  if (ibv_modify_qp(*out, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    return errorf(tribSystemError, "verbs: queue pair for rank %d: INIT failed: %s", p, std::strerror(errno));
  return Status::Ok();
}

// Queue pair i of the connection to p, to the peer's queue pair i.
Status VerbsTransport::connectQp(int p, uint32_t i) {
  Peer& pe = peers_[p];
  const PortChoice& me = dev_->port();
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = std::min(me.mtu, static_cast<ibv_mtu>(pe.remoteHeader.mtu));
  a.dest_qp_num = pe.remoteQps[i].qpn;
  a.rq_psn = pe.remoteQps[i].psn;
  a.max_dest_rd_atomic = static_cast<uint8_t>(opt_.readsInFlight);
  a.min_rnr_timer = 12;
  a.ah_attr.port_num = static_cast<uint8_t>(me.port);
  a.ah_attr.dlid = pe.remoteHeader.lid;
  if (me.ethernet || pe.remoteHeader.lid == 0) {
    a.ah_attr.is_global = 1;
    std::memcpy(a.ah_attr.grh.dgid.raw, pe.remoteHeader.gid, 16);
    a.ah_attr.grh.sgid_index = static_cast<uint8_t>(me.gidIndex);
    a.ah_attr.grh.hop_limit = 64;
  }
  if (ibv_modify_qp(pe.qps[i], &a,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    return errorf(tribSystemError, "verbs: connecting the queue pair to %s: RTR failed: %s", who(p).c_str(),
                  std::strerror(errno));
  ibv_qp_attr s{};
  s.qp_state = IBV_QPS_RTS;
  // 4.096 us * 2^18 = 1.07 s per try, 8 tries: 8.6 s before the queue pair gives up (NCCL's
  // default, 20, is 4.3 s per try). Liveness is the probe's rule (3/4 of the timeout, at least 1 s),
  // not the NIC's. At 268 ms per try (16) a live connection went into error mid-call in the
  // soft-RoCE guest while the host ran at load 7 (flushed, its first error unrecorded then).
  s.timeout = 18;
  s.retry_cnt = 7;
  s.rnr_retry = 7;
  s.sq_psn = pe.localPsns[i];
  // No more READs in flight than the peer takes as responder.
  s.max_rd_atomic = static_cast<uint8_t>(std::min(opt_.readsInFlight, pe.remoteHeader.readsInFlight));
  if (ibv_modify_qp(pe.qps[i], &s,
                    IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                        IBV_QP_MAX_QP_RD_ATOMIC))
    return errorf(tribSystemError, "verbs: connecting the queue pair to %s: RTS failed: %s", who(p).c_str(),
                  std::strerror(errno));
  return Status::Ok();
}

Status VerbsTransport::postRecvBuf(int p, uint32_t i) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(recvBuf(p, i)), opt_.eagerBytes, recvSlab_.mr->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = wrId(kWrRecv, p, i);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (ibv_post_recv(peers_[p].qps[0], &wr, &bad))
    return errorf(tribSystemError, "verbs: posting a receive buffer for %s failed: %s", who(p).c_str(),
                  std::strerror(errno));
  return Status::Ok();
}

// Moves what waits in the outbox into send buffers, then posts what the send queue and the
// peer's credits allow, in WorkQueue's order.
void VerbsTransport::flush(int p) {
  Peer& pe = peers_[p];
  if (pe.lost) return;
  while (!pe.outbox.empty() && !pe.freeSendBufs.empty()) {
    const OutMsg m = pe.outbox.front();
    if (m.type == kReadyToSend && !pe.ctsIn.maySend(pe.noticesSent)) break;  // its CTS needs a free slot
    pe.outbox.pop_front();
    const uint32_t b = pe.freeSendBufs.back();
    pe.freeSendBufs.pop_back();
    MsgHeader h{m.type, m.sendId, m.tag, m.bytes};
    std::memcpy(sendBuf(p, b), &h, sizeof h);
    if (m.type == kEager && m.bytes) std::memcpy(sendBuf(p, b) + sizeof h, m.buf, m.bytes);
    if (m.type == kReadyToSend) ++pe.noticesSent;
    // An eager send is complete once its payload is in the send buffer (the caller's buffer is
    // free again), as UCX's eager sends are: waiting for the peer NIC's acknowledgement instead
    // hung a sender whose receiver destroyed its queue pair between its receive's completion and
    // that acknowledgement (soft-RoCE sends it after the completion). Delivery is the transport's
    // job from here: close() lets the buffers drain, and a send that fails marks the peer lost.
    if (m.op) m.op->complete();
    Work w{kWrEager, true, b};
    w.length = sizeof h + (m.type == kEager ? m.bytes : 0);
    pe.work.push(w);
  }
  const auto takeCredit = [&] { return pe.credits.take(repostedByPeer(p)); };
  const uint32_t posted = pe.work.post(opt_.sqDepth - pe.sqOutstanding, takeCredit, [&](const Work& w) {
    ibv_sge sge{};
    ibv_send_wr wr{};
    wr.wr_id = wrId(w.kind, p, w.index);
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    switch (w.kind) {
      case kWrEager:
        sge = {reinterpret_cast<uintptr_t>(sendBuf(p, w.index)), static_cast<uint32_t>(w.length),
               sendSlab_.mr->lkey};
        wr.opcode = IBV_WR_SEND;
        break;
      case kWrCts:
        sge = {reinterpret_cast<uintptr_t>(&ctsSrc(p)[w.index]), sizeof(CtsEntry), ctsSlab_.mr->lkey};
        wr.opcode = IBV_WR_RDMA_WRITE;
        wr.wr.rdma.remote_addr = pe.remote.fifoAddr + w.index * sizeof(CtsEntry);
        wr.wr.rdma.rkey = pe.remote.fifoRkey;
        break;
      case kWrCredit:
      case kWrProbe:
        *creditSrc(p) = pe.reposts.total();
        sge = {reinterpret_cast<uintptr_t>(creditSrc(p)), sizeof(uint64_t), creditSlab_.mr->lkey};
        wr.opcode = IBV_WR_RDMA_WRITE;
        wr.wr.rdma.remote_addr = pe.remote.creditAddr;
        wr.wr.rdma.rkey = pe.remote.creditRkey;
        break;
      case kWrData:
        sge = {w.localAddr, static_cast<uint32_t>(w.length), w.lkey};
        wr.num_sge = w.length ? 1 : 0;
        wr.opcode = w.last ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
        wr.imm_data = htobe32(w.imm);
        wr.wr.rdma.remote_addr = w.remoteAddr;
        wr.wr.rdma.rkey = w.rkey;
        break;
      case kWrWinPut:
      case kWrWinGet:
        sge = {w.localAddr, static_cast<uint32_t>(w.length), w.lkey};
        wr.opcode = w.kind == kWrWinGet ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
        wr.wr.rdma.remote_addr = w.remoteAddr;
        wr.wr.rdma.rkey = w.rkey;
        break;
      case kWrSignal:  // inline (setUpWindows made sure it fits): the record is read at post time
        sge = {reinterpret_cast<uintptr_t>(&w.signal), sizeof(SignalRecord), 0};
        wr.opcode = IBV_WR_RDMA_WRITE;
        wr.wr.rdma.remote_addr = w.remoteAddr;
        wr.wr.rdma.rkey = w.rkey;
        break;
      default:
        break;
    }
    // (A READ's list is where it lands: never inline.)
    if (wr.num_sge && sge.length <= inlineBytes_ && w.kind != kWrData && w.kind != kWrWinGet)
      wr.send_flags |= IBV_SEND_INLINE;
    ibv_send_wr* bad = nullptr;
    if (int e = ibv_post_send(pe.qps[w.qp], &wr, &bad)) {
      markLost(p,
               errorf(tribSystemError, "verbs: posting to %s failed: %s", who(p).c_str(), std::strerror(e)));
      return false;
    }
    return true;
  });
  pe.sqOutstanding += posted;
}

Status VerbsTransport::postSend(int peer, uint64_t tag, const void* buf, size_t bytes, TransferOp* op) {
  if (!op) return errorf(tribInvalidArgument, "verbs: postSend without a TransferOp");
  if (peer < 0 || peer >= nranks_ || !peers_[peer].active)
    return errorf(tribInvalidArgument, "verbs: rank %d is not a peer of this transport", peer);
  if (bytes && !buf) return errorf(tribInvalidArgument, "verbs: send of %zu bytes from NULL", bytes);
  op->error = Status();
  op->state.store(TransferOp::kPending, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mu_);
  Peer& pe = peers_[peer];
  if (aborted_) return op->fail(abortWhy_), Status::Ok();
  if (pe.lost) return op->fail(pe.lostWhy), Status::Ok();
  // Device memory always goes by RDMA from the buffer itself: the CPU never copies it into a
  // send buffer.
  const bool device = op->memory == MemoryKind::Device && bytes > 0;
  if (!device && bytes + sizeof(MsgHeader) <= opt_.eagerBytes) {
    pe.outbox.push_back({kEager, tag, buf, bytes, 0, op});
  } else {
    const uint32_t id = nextSendId_++;
    LargeSend& l = pe.large[id];
    l.op = op;
    l.buf = buf;
    l.bytes = bytes;
    l.memory = op->memory;
    l.tag = tag;
    pe.outbox.push_back({kReadyToSend, tag, nullptr, bytes, id, nullptr});
  }
  flush(peer);
  return Status::Ok();
}

Status VerbsTransport::postRecv(int peer, uint64_t tag, void* buf, size_t bytes, const ReduceSpec* reduce,
                                TransferOp* op) {
  if (!op) return errorf(tribInvalidArgument, "verbs: postRecv without a TransferOp");
  if (peer < 0 || peer >= nranks_ || !peers_[peer].active)
    return errorf(tribInvalidArgument, "verbs: rank %d is not a peer of this transport", peer);
  if (bytes && !buf) return errorf(tribInvalidArgument, "verbs: receive of %zu bytes into NULL", bytes);
  if (reduce) TRIB_RETURN_IF_ERROR(checkReduceSpec("verbs", *reduce, bytes));
  // Reductions run on the CPU, from a bounce buffer: never into device memory (its caps' reduces).
  if (reduce && op->memory == MemoryKind::Device)
    return errorf(tribInvalidArgument, "verbs: a reduce-receive into device memory (it reduces on the CPU)");
  op->error = Status();
  op->state.store(TransferOp::kPending, std::memory_order_relaxed);
  Recv r{op, buf, bytes, reduce && bytes > 0, reduce ? *reduce : ReduceSpec{}, op->memory};
  std::lock_guard<std::mutex> lock(mu_);
  if (aborted_) return op->fail(abortWhy_), Status::Ok();
  Arrived a;
  if (match_.takeMessage(peer, tag, &a)) {
    if (a.notice)
      matchLarge(std::move(r), peer, tag, a.bytes, a.sendId);
    else
      deliverEager(r, peer, tag, a.payload.data(), a.payload.size());
    flush(peer);
    return Status::Ok();
  }
  if (peers_[peer].lost) return op->fail(peers_[peer].lostWhy), Status::Ok();
  match_.addRecv(peer, tag, std::move(r));
  return Status::Ok();
}

void VerbsTransport::deliverEager(Recv& r, int p, uint64_t tag, const uint8_t* data, uint64_t n) {
  if (n != r.bytes) {
    r.op->fail(errorf(
        tribInvalidUsage,
        "verbs receive from %s (tag %#llx): it sent %llu bytes but %zu were expected (mismatched count "
        "or datatype across ranks)",
        who(p).c_str(), static_cast<unsigned long long>(tag), static_cast<unsigned long long>(n), r.bytes));
    return;
  }
  if (r.reduce) {
    trib::reduce(r.buf, r.spec.local, data, n / dataTypeSize(r.spec.dtype), r.spec.dtype, r.spec.op);
  } else if (n && r.memory == MemoryKind::Device) {
    // A small message from host memory into device memory: the copy engine puts it there.
    if (Status s = copyToDevice(r.buf, data, n); !s.ok()) return r.op->fail(s);
  } else if (n) {
    std::memcpy(r.buf, data, n);
  }
  r.op->complete();
}

// A large message's notice met its receive: tell the sender where to write (or that its length
// is wrong: an entry with no address, carrying the length expected).
void VerbsTransport::matchLarge(Recv r, int p, uint64_t tag, uint64_t bytes, uint32_t sendId) {
  CtsEntry e{};
  e.sendId = sendId;
  e.bytes = r.bytes;
  if (bytes != r.bytes) {
    r.op->fail(errorf(
        tribInvalidUsage,
        "verbs receive from %s (tag %#llx): it sent %llu bytes but %zu were expected (mismatched count "
        "or datatype across ranks)",
        who(p).c_str(), static_cast<unsigned long long>(tag), static_cast<unsigned long long>(bytes),
        r.bytes));
    writeCts(p, e);
    return;
  }
  LargeRecv l;
  l.tag = tag;
  uint8_t* target = static_cast<uint8_t*>(r.buf);
  if (r.reduce) {
    l.bounce.reset(new uint8_t[r.bytes]);
    target = l.bounce.get();
  }
  Mr* m = nullptr;
  if (Status s = recvRegs_.acquire(reinterpret_cast<uintptr_t>(target), r.bytes,
                                   r.reduce ? MemoryKind::Host : regKind(r.memory), &l.reg, &m);
      !s.ok()) {
    r.op->fail(s);
    writeCts(p, e);  // refused: the sender fails too instead of waiting
    return;
  }
  l.r = std::move(r);
  e.addr = reinterpret_cast<uintptr_t>(target);
  e.rkey = m->mr->rkey;
  if (corruptAdvertisedRkeys.load(std::memory_order_relaxed)) e.rkey = ~e.rkey;
  e.recvId = peers_[p].recvs.add(std::move(l));
  writeCts(p, e);
}

void VerbsTransport::writeCts(int p, const CtsEntry& entry) {
  Peer& pe = peers_[p];
  const uint32_t slot = pe.ctsOut.slot();
  CtsEntry e = entry;
  e.seq = e.seqEnd = pe.ctsOut.seq();
  pe.ctsOut.advance();
  ctsSrc(p)[slot] = e;
  pe.work.push(Work{kWrCts, false, slot});
}

// The receiver's answer to a notice: write the data from the caller's buffer, in chunks.
void VerbsTransport::onCts(int p, const CtsEntry& e) {
  Peer& pe = peers_[p];
  auto it = pe.large.find(e.sendId);
  if (it == pe.large.end()) {
    markLost(p, errorf(tribRemoteError, "verbs: %s answered send %u, which this rank never announced",
                       who(p).c_str(), e.sendId));
    return;
  }
  LargeSend& l = it->second;
  if (e.addr == 0 || e.bytes != l.bytes) {
    l.op->fail(errorf(
        tribInvalidUsage,
        "verbs send to %s (tag %#llx): it expected %llu bytes but this rank sent %zu (mismatched count or "
        "datatype across ranks)",
        who(p).c_str(), static_cast<unsigned long long>(l.tag), static_cast<unsigned long long>(e.bytes),
        l.bytes));
    pe.large.erase(it);
    return;
  }
  Mr* m = nullptr;
  if (Status s =
          sendRegs_.acquire(reinterpret_cast<uintptr_t>(l.buf), l.bytes, regKind(l.memory), &l.reg, &m);
      !s.ok()) {
    // The receiver waits for data that cannot come: the peer is unusable from here on.
    l.op->fail(s);
    pe.large.erase(it);
    markLost(p, s);
    return;
  }
  l.remoteAddr = e.addr;
  l.rkey = e.rkey;
  l.recvId = e.recvId;
  l.immPending = opt_.qps > 1;
  for (const Chunk& c : chunksOf(l.bytes, opt_.chunkBytes, opt_.qps)) {
    Work w{kWrData, c.last, e.sendId};
    w.qp = c.qp;
    w.localAddr = reinterpret_cast<uintptr_t>(l.buf) + c.offset;
    w.remoteAddr = e.addr + c.offset;
    w.length = c.bytes;
    w.lkey = m->mr->lkey;
    w.rkey = e.rkey;
    w.imm = e.recvId;
    w.last = c.last;
    pe.work.push(w);
    ++l.outstanding;
  }
  l.allPosted = true;
  if (l.outstanding == 0 && l.immPending) queueImm(p, e.sendId, l);
}

// Several queue pairs: once every data write has completed (its data placed at the receiver), an
// empty write with immediate on the first tells the receiver the message landed.
void VerbsTransport::queueImm(int p, uint32_t sendId, LargeSend& l) {
  l.immPending = false;
  Work w{kWrData, true, sendId};
  w.remoteAddr = l.remoteAddr;
  w.rkey = l.rkey;
  w.imm = l.recvId;
  w.last = true;
  peers_[p].work.push(w);
  ++l.outstanding;
}

// The peer's last write of a large message landed; its immediate names the receive, checked
// against this peer's table before anything is touched.
void VerbsTransport::finishLargeRecv(int p, uint32_t imm) {
  LargeRecv l;
  if (Status s = peers_[p].recvs.take(imm, who(p), &l); !s.ok()) return markLost(p, s);
  if (l.r.reduce)
    trib::reduce(l.r.buf, l.r.spec.local, l.bounce.get(), l.r.bytes / dataTypeSize(l.r.spec.dtype),
                 l.r.spec.dtype, l.r.spec.op);
  recvRegs_.release(l.reg);
  l.r.op->complete();
}

void VerbsTransport::onMessage(int p, uint32_t bufIndex, uint32_t len) {
  const uint8_t* b = recvBuf(p, bufIndex);
  MsgHeader h;
  if (len < sizeof h) {
    markLost(p, errorf(tribRemoteError, "verbs: %s sent a %u-byte message, shorter than a header",
                       who(p).c_str(), len));
    return;
  }
  std::memcpy(&h, b, sizeof h);
  if ((h.type == kEager && h.bytes != len - sizeof h) || (h.type != kEager && h.type != kReadyToSend)) {
    markLost(p, errorf(tribRemoteError, "verbs: %s sent a malformed message (type %u, %llu bytes in %u)",
                       who(p).c_str(), h.type, static_cast<unsigned long long>(h.bytes), len));
    return;
  }
  Recv r;
  if (match_.takeRecv(p, h.tag, &r)) {
    if (h.type == kEager)
      deliverEager(r, p, h.tag, b + sizeof h, h.bytes);
    else
      matchLarge(std::move(r), p, h.tag, h.bytes, h.sendId);
    return;
  }
  Arrived a;
  a.notice = h.type == kReadyToSend;
  a.bytes = h.bytes;
  a.sendId = h.sendId;
  if (!a.notice) a.payload.assign(b + sizeof h, b + sizeof h + h.bytes);
  match_.addMessage(p, h.tag, std::move(a));
}

void VerbsTransport::handle(const ibv_wc& wc) {
  const int p = wrPeer(wc.wr_id);
  if (p < 0 || p >= nranks_ || !peers_[p].active) return;
  Peer& pe = peers_[p];
  const WrKind kind = wrKind(wc.wr_id);
  if (kind != kWrRecv && pe.sqOutstanding) --pe.sqOutstanding;
  if (wc.status != IBV_WC_SUCCESS) {
    // A flush only says the queue pair is in error; the completion that put it there (a retry
    // limit, a refused access) may come later in the batch, on the other queue: progress() names
    // the flush only if nothing better arrived.
    if (wc.status == IBV_WC_WR_FLUSH_ERR) {
      flushed_.push_back(p);
      return;
    }
    const char* why = wc.status == IBV_WC_REM_ACCESS_ERR
                          ? "the peer refused the access: a remote key or address that does not match"
                          : "the peer process died or exited, or its link is down";
    brokenConnection(p, wc.status, why);
    return;
  }
  switch (kind) {
    case kWrRecv: {
      const uint32_t i = wrIndex(wc.wr_id);
      if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM)
        finishLargeRecv(p, be32toh(wc.imm_data));
      else
        onMessage(p, i, wc.byte_len);
      if (pe.lost) return;
      if (Status s = postRecvBuf(p, i); !s.ok()) return markLost(p, s);
      pe.reposts.reposted();
      break;
    }
    case kWrEager:
      pe.freeSendBufs.push_back(wrIndex(wc.wr_id));
      break;
    case kWrData: {
      auto it = pe.large.find(wrIndex(wc.wr_id));
      if (it == pe.large.end()) break;
      if (--it->second.outstanding == 0 && it->second.allPosted) {
        if (it->second.immPending) {
          queueImm(p, it->first, it->second);
          break;
        }
        sendRegs_.release(it->second.reg);
        it->second.op->complete();
        pe.large.erase(it);
      }
      break;
    }
    case kWrProbe: {
      pe.probeInFlight = false;
      // A live peer slow to answer is what the deadline has to allow for: the log says how slow.
      const double sec = std::chrono::duration<double>(Clock::now() - pe.lastProbe).count();
      if (sec > 1)
        TRIB_INFO("transport", "verbs: %s acknowledged a liveness probe after %.1f s (%.1f s of it polled)",
                  who(p).c_str(), sec, std::chrono::duration<double>(pe.probeWaited).count());
      break;
    }
    case kWrWinPut:
    case kWrWinGet: {
      auto it = pe.winOps.find(wrIndex(wc.wr_id));
      if (it == pe.winOps.end() || --it->second.outstanding > 0) break;
      (it->second.get ? recvRegs_ : sendRegs_).release(it->second.reg);
      it->second.op->complete();
      pe.winOps.erase(it);
      break;
    }
    default:
      break;
  }
}

// While work waits on a peer, a small RDMA write goes to it every interval: the peer's NIC (not
// its process) acknowledges it, so a live peer answers however busy it is. One that is not
// acknowledged within three quarters of the timeout (soft-RoCE may not exhaust its retries for
// long) or that fails means the peer is gone: what waits on it fails, naming it (a probe sent late
// in a wait may leave it to TRIB_TIMEOUT, whose message names the peer waited on). A quarter, then
// a half, were too short for soft-RoCE, whose acknowledgements come from the peer host's kernel:
// a live peer's took over 5 s in the guest while the host ran two busy loops and builds (load 10,
// tools/stress.sh), and over 10 s of a 20 s timeout in a CI run (2026-12-05). The deadline counts
// `polled` time only (progress()): an emulated guest whose host did not run it for seconds, or a
// process descheduled that long, gives its peers no chance to answer meanwhile.
void VerbsTransport::probe(int p, Clock::time_point now, Clock::duration polled) {
  Peer& pe = peers_[p];
  const auto deadline = std::max<std::chrono::milliseconds>(std::chrono::seconds(1), timeout_ * 3 / 4);
  if (pe.probeInFlight) {
    pe.probeWaited += polled;
    if (pe.probeWaited > deadline)
      markLost(
          p,
          errorf(tribRemoteError,
                 "verbs: %s did not acknowledge an RDMA write within %.1f s of polling (%.1f s in all): the "
                 "peer process died, or its host or link is down",
                 who(p).c_str(), std::chrono::duration<double>(deadline).count(),
                 std::chrono::duration<double>(now - pe.lastProbe).count()));
    return;
  }
  // A large receive already answered waits on the peer too: for its data.
  // So do a window operation in flight and a Wait for the peer's signal.
  const bool waiting =
      !pe.large.empty() || pe.recvs.size() || match_.hasRecvsFrom(p) || !pe.winOps.empty() || pe.signalWaited;
  if (!waiting || now - pe.lastProbe < deadline / 2) return;
  pe.lastProbe = now;
  pe.probeWaited = {};
  pe.probeInFlight = true;
  pe.work.push(Work{kWrProbe, false, 0});
}

Status VerbsTransport::progress() {
  TRIB_RETURN_IF_ERROR(dev_->poll());
  std::deque<ibv_wc> wcs;
  {
    std::lock_guard<std::mutex> l(inbox_->mu);
    wcs.swap(inbox_->wcs);
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (const ibv_wc& wc : wcs) handle(wc);
  // The probes' clock: time between two polls counts up to kProbeGapCounted, so a process (or a
  // whole emulated guest) that did not run for seconds does not blame its peers for them; this
  // poll has already taken whatever acknowledgement came meanwhile.
  const auto now = Clock::now();
  const auto polled = lastProgress_ == Clock::time_point{}
                          ? Clock::duration{}
                          : std::min<Clock::duration>(now - lastProgress_, kProbeGapCounted);
  lastProgress_ = now;
  for (int p : flushed_)
    brokenConnection(p, IBV_WC_WR_FLUSH_ERR,
                     "the queue pair went into error: the peer process died or exited, its link is down, "
                     "or an RDMA access between the two was refused");
  flushed_.clear();
  for (int p = 0; p < nranks_; ++p) {
    Peer& pe = peers_[p];
    if (!pe.active || pe.lost) continue;
    for (;;) {
      // The receiver's NIC writes the entry in address order: once its last word holds the expected
      // sequence number (loaded with acquire, which orders the loads after it), the rest has landed.
      const CtsEntry* slot = const_cast<const CtsEntry*>(&fifo(p)[pe.ctsIn.nextSlot()]);
      const uint64_t seqEnd = __atomic_load_n(&slot->seqEnd, __ATOMIC_ACQUIRE);
      CtsEntry e;
      std::memcpy(static_cast<void*>(&e), slot, sizeof e);
      e.seqEnd = seqEnd;
      if (!pe.ctsIn.ready(e)) break;
      pe.ctsIn.consume();
      onCts(p, e);
      if (pe.lost) break;
    }
    if (pe.lost) continue;
    // Credits go back in batches, one RDMA write per recvBuffers / 4 reposts rather than one per
    // message (half the work requests of a small exchange). No sender can starve: it waits only
    // once all recvBuffers of its messages are unadvertised, and those arrive and are reposted.
    if (pe.reposts.shouldAdvertise()) {
      pe.reposts.advertise();
      pe.work.push(Work{kWrCredit, false, 0});
    }
    probe(p, now, polled);
    flush(p);
  }
  return Status::Ok();
}

void VerbsTransport::markLost(int p, const Status& why, bool warn) {
  Peer& pe = peers_[p];
  if (pe.lost) return;
  pe.lost = true;
  pe.lostWhy = why;
  if (warn) TRIB_WARN("transport", "%s", why.message().c_str());
  for (auto& [id, l] : pe.large) {
    if (l.reg) sendRegs_.release(l.reg);
    l.op->fail(why);
  }
  pe.large.clear();
  for (OutMsg& m : pe.outbox)
    if (m.op) m.op->fail(why);
  pe.outbox.clear();
  pe.work.clear();
  match_.eraseRecvsIf([&](int src, uint64_t, Recv& r) {
    if (src != p) return false;
    r.op->fail(why);
    return true;
  });
  pe.recvs.drain([&](LargeRecv& l) {
    recvRegs_.release(l.reg);
    l.r.op->fail(why);
  });
  for (auto& [id, w] : pe.winOps) {
    (w.get ? recvRegs_ : sendRegs_).release(w.reg);
    w.op->fail(why);
  }
  pe.winOps.clear();
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  for (ibv_qp* qp : pe.qps) ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

void VerbsTransport::failAll(const Status& why) {
  for (int p = 0; p < nranks_; ++p)
    if (peers_[p].active && !peers_[p].lost) markLost(p, why, false);
  match_.eraseRecvsIf([&](int, uint64_t, Recv& r) {
    r.op->fail(why);
    return true;
  });
}

void VerbsTransport::abort(const Status& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (aborted_) return;
  aborted_ = true;
  abortWhy_ = why;
  failAll(why);
}

// Queue pairs go to the error state and their flushed work is drained (bounded) before they are
// destroyed, so that no completion of theirs reaches a later queue pair with the same number.
void VerbsTransport::close() {
  if (!dev_) return;
  drainEagerSends();
  quiesceWindows();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!aborted_) {
      aborted_ = true;
      abortWhy_ = errorf(tribAborted, "verbs: the transport closed");
      failAll(abortWhy_);
    }
  }
  const auto deadline = Clock::now() + std::chrono::seconds(2);
  for (;;) {
    (void)dev_->poll();
    std::deque<ibv_wc> wcs;
    {
      std::lock_guard<std::mutex> l(inbox_->mu);
      wcs.swap(inbox_->wcs);
    }
    bool busy = false;
    for (const ibv_wc& wc : wcs)
      if (wrKind(wc.wr_id) != kWrRecv && peers_[wrPeer(wc.wr_id)].sqOutstanding)
        --peers_[wrPeer(wc.wr_id)].sqOutstanding;
    for (const Peer& pe : peers_) busy |= pe.active && pe.sqOutstanding > 0;
    if (!busy || Clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (Peer& pe : peers_) {
    for (ibv_qp*& qp : pe.qps) {
      if (!qp) continue;
      dev_->unroute(qp->qp_num);
      ibv_destroy_qp(qp);
      qp = nullptr;
    }
  }
  sendRegs_.clear();
  recvRegs_.clear();
  for (auto& [device, stream] : copyStreams_) cuda::streamDestroy(stream);
  copyStreams_.clear();
  windows_.reset();
  for (Slab* s : {&recvSlab_, &sendSlab_, &fifoSlab_, &ctsSlab_, &creditSlab_, &windowSlab_})
    if (s->mr) ibv_dereg_mr(s->mr), s->mr = nullptr;
  dev_.reset();
}

// A peer may still RDMA READ this rank's window after this rank's last call returned (a one-shot
// below kOneShotExposeFromElems ends without a signal back). So before its window and queue pairs
// go, a rank tells every peer it is closing (its last signal record again, flagged) and waits until
// each peer has said so too (its calls are done, its reads with them) or is lost; bounded by the
// timeout, at most 10 s (the probe finds a dead peer sooner). Skipped after an abort.
void VerbsTransport::quiesceWindows() {
  if (!windows_) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_) return;
    for (int p = 0; p < nranks_; ++p) {
      Peer& pe = peers_[p];
      if (!pe.active || pe.lost || !pe.winAddr) continue;
      Work w{kWrSignal, false, 0};
      w.signal.count = w.signal.countEnd = pe.signalsSent;
      w.signal.fingerprint = pe.lastFingerprintSent;
      w.signal.closing = 1;
      w.remoteAddr = pe.winSignalAddr;
      w.rkey = pe.winRkey;
      pe.work.push(w);
      flush(p);
    }
  }
  const auto deadline =
      Clock::now() + std::min<std::chrono::milliseconds>(timeout_, std::chrono::seconds(10));
  for (;;) {
    bool waiting = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (int p = 0; p < nranks_; ++p) {
        Peer& pe = peers_[p];
        if (!pe.active || pe.lost || !pe.winAddr) continue;
        const bool closed = __atomic_load_n(&signalSlot(p)->closing, __ATOMIC_ACQUIRE) != 0;
        pe.signalWaited = !closed;  // probed meanwhile: a dead peer is lost, not waited for
        waiting |= !closed;
      }
      if (aborted_) return;
    }
    if (!waiting) return;
    if (Clock::now() > deadline) {
      TRIB_WARN("transport",
                "verbs: closing rank %d's window without every peer's word that it is done with it", rank_);
      return;
    }
    (void)progress();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// Eager sends completed when they were copied into send buffers: before the queue pairs go to
// the error state (which would discard them), give those still queued or unacknowledged a bounded
// time to leave, as long as their peer is not known to be gone. Skipped after an abort.
void VerbsTransport::drainEagerSends() {
  const auto deadline = Clock::now() + std::chrono::seconds(2);
  for (;;) {
    bool pending = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (aborted_) return;
      for (const Peer& pe : peers_) {
        if (!pe.active || pe.lost) continue;
        pending |= pe.freeSendBufs.size() < opt_.recvBuffers;  // sent, not yet acknowledged
        for (const OutMsg& m : pe.outbox) pending |= m.type == kEager;
      }
    }
    if (!pending || Clock::now() > deadline) return;
    (void)progress();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

Status VerbsTransport::postWindowOp(bool get, int peer, uint64_t offset, void* local, uint64_t bytes,
                                    TransferOp* op) {
  const char* what = get ? "get" : "put";
  if (!op) return errorf(tribInvalidArgument, "verbs: a window %s without a TransferOp", what);
  if (peer < 0 || peer >= nranks_ || peer == rank_ || !peers_[peer].active || !peers_[peer].winAddr)
    return errorf(tribInvalidArgument, "verbs: a window %s on rank %d, which has no window here", what, peer);
  if (offset > opt_.windowBytes || bytes > opt_.windowBytes - offset || (bytes && !local))
    return errorf(tribInvalidArgument,
                  "verbs: a window %s of [%llu, +%llu) on rank %d: its window has %llu bytes", what,
                  static_cast<unsigned long long>(offset), static_cast<unsigned long long>(bytes), peer,
                  static_cast<unsigned long long>(opt_.windowBytes));
  op->error = Status();
  op->state.store(TransferOp::kPending, std::memory_order_relaxed);
  if (bytes == 0) return op->complete(), Status::Ok();
  std::lock_guard<std::mutex> lock(mu_);
  Peer& pe = peers_[peer];
  if (aborted_) return op->fail(abortWhy_), Status::Ok();
  if (pe.lost) return op->fail(pe.lostWhy), Status::Ok();
  Mr* m = nullptr;
  uint64_t reg = 0;
  if (Status s = (get ? recvRegs_ : sendRegs_)
                     .acquire(reinterpret_cast<uintptr_t>(local), bytes, regKind(op->memory), &reg, &m);
      !s.ok())
    return op->fail(s), Status::Ok();
  const uint32_t id = nextWinOp_++;
  WinOp& wo = pe.winOps[id] = WinOp{op, reg, get};
  // In chunks, and over the connection's queue pairs when larger than an eager message, as a large
  // message's data: the parts need no order among them, since the executor signals the peer only
  // once the whole op has completed.
  for (const Chunk& c : chunksOf(bytes, opt_.chunkBytes, bytes > opt_.eagerBytes ? opt_.qps : 1)) {
    Work w{get ? kWrWinGet : kWrWinPut, false, id};
    w.localAddr = reinterpret_cast<uintptr_t>(local) + c.offset;
    w.remoteAddr = pe.winAddr + offset + c.offset;
    w.length = c.bytes;
    w.lkey = m->mr->lkey;
    w.rkey = pe.winRkey;
    w.qp = c.qp;
    pe.work.push(w);
    ++wo.outstanding;
  }
  flush(peer);
  return Status::Ok();
}

// The executor signals only once the puts and gets it releases have completed (their data placed
// at, or read from, the peer), so the write needs no fence of its own. A lost peer takes no more:
// its Wait reports the loss (pollSignal).
void VerbsTransport::postSignal(int peer, uint32_t fingerprint, uint64_t carryTag,
                                const uint64_t carried[2]) {
  std::lock_guard<std::mutex> lock(mu_);
  if (peer < 0 || peer >= nranks_ || !peers_[peer].winAddr) return;
  Peer& pe = peers_[peer];
  if (aborted_ || pe.lost) return;
  Work w{kWrSignal, false, 0};
  ++pe.signalsSent;
  w.signal.count = w.signal.countEnd = pe.signalsSent;
  w.signal.fingerprint = pe.lastFingerprintSent = fingerprint & ((1u << 20) - 1);
  w.signal.carryTag = carryTag;
  w.signal.carried[0] = carried[0];
  w.signal.carried[1] = carried[1];
  w.remoteAddr = pe.winSignalAddr;
  w.rkey = pe.winRkey;
  pe.work.push(w);
  flush(peer);
}

Status VerbsTransport::pollSignal(int peer, uint64_t target, uint64_t* count, uint32_t* fingerprint) {
  if (peer < 0 || peer >= nranks_ || peer == rank_ || !peers_[peer].winAddr)
    return errorf(tribInvalidArgument, "verbs: rank %d has no window here", peer);
  const SignalRecord* slot = signalSlot(peer);
  // The last word first: a record whose ends agree landed whole (SignalRecord).
  const uint64_t end = __atomic_load_n(&slot->countEnd, __ATOMIC_ACQUIRE);
  const uint32_t fp = __atomic_load_n(&slot->fingerprint, __ATOMIC_ACQUIRE);
  const uint64_t tag = __atomic_load_n(&slot->carryTag, __ATOMIC_ACQUIRE);
  const uint64_t carried[2] = {__atomic_load_n(&slot->carried[0], __ATOMIC_ACQUIRE),
                               __atomic_load_n(&slot->carried[1], __ATOMIC_ACQUIRE)};
  const uint64_t begin = __atomic_load_n(&slot->count, __ATOMIC_ACQUIRE);
  std::lock_guard<std::mutex> lock(mu_);
  Peer& pe = peers_[peer];
  if (begin == end && end > pe.lastSignal.count) {
    pe.lastSignal.count = end;
    pe.lastSignal.fingerprint = fp;
    pe.lastSignal.carryTag = tag;
    pe.lastSignal.carried[0] = carried[0];
    pe.lastSignal.carried[1] = carried[1];
  }
  *count = pe.lastSignal.count;
  *fingerprint = pe.lastSignal.fingerprint;
  pe.signalWaited = *count < target;
  if (!pe.signalWaited) return Status::Ok();
  if (pe.lost) return pe.lostWhy;
  if (aborted_) return abortWhy_;
  return Status::Ok();
}

bool VerbsTransport::readCarried(int peer, uint64_t offset, uint64_t bytes, void* into) {
  if (peer < 0 || peer >= nranks_) return false;
  std::lock_guard<std::mutex> lock(mu_);
  const SignalRecord& r = peers_[peer].lastSignal;
  // (The peer wrote the tag: a byte count above the record's 16 is refused, never copied past it.)
  const uint64_t from = carryTagOffset(r.carryTag), carried = carryTagBytes(r.carryTag);
  if (r.carryTag == 0 || carried > sizeof r.carried || offset < from || offset - from + bytes > carried)
    return false;
  std::memcpy(into, reinterpret_cast<const uint8_t*>(r.carried) + (offset - from), bytes);
  return true;
}

VerbsWindows::VerbsWindows(VerbsTransport* t, uint8_t* own, uint64_t bytes, int rank, int nranks)
    : t_(t), own_(own), bytes_(bytes), rank_(rank), waits_(nranks, 0) {
  reservedBytes_ = bytes * static_cast<size_t>(nranks);
  void* p = mmap(nullptr, reservedBytes_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  reserved_ = p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);
}
void VerbsWindows::signal(int peer, uint32_t fingerprint) {
  // The range carryNext named, as the window holds it now (the signal's record is built here).
  uint64_t carried[2] = {0, 0};
  if (carryTag_) std::memcpy(carried, own_ + carryTagOffset(carryTag_), carryTagBytes(carryTag_));
  t_->postSignal(peer, fingerprint, carryTag_, carried);
}
// From the latest whole record read from `rank` (no older than any signal a Wait accepted, so
// by the schedule's ordering the window still holds those bytes for this read).
bool VerbsWindows::readCarried(int rank, uint64_t offset, uint64_t bytes, void* into) {
  if (rank == rank_ || bytes == 0 || bytes > kCarryBytes) return false;
  if (!t_->readCarried(rank, offset, bytes, into)) return false;
  ++carriedReads_;
  return true;
}
Status VerbsWindows::pollSignals(int peer, uint64_t target, uint64_t* count, uint32_t* fingerprint) {
  return t_->pollSignal(peer, target, count, fingerprint);
}
Status VerbsWindows::postPut(int peer, uint64_t offset, const void* src, uint64_t bytes, TransferOp* op) {
  return t_->postWindowOp(false, peer, offset, const_cast<void*>(src), bytes, op);
}
Status VerbsWindows::postGet(int peer, uint64_t offset, void* dst, uint64_t bytes, TransferOp* op) {
  return t_->postWindowOp(true, peer, offset, dst, bytes, op);
}
Status VerbsWindows::progress() { return t_->progress(); }

Status verbsConnect(const TransportConnectArgs& args, std::unique_ptr<Transport>* out) {
  if (!args.oob) return errorf(tribInvalidArgument, "verbs: no out-of-band exchange given");
  Options o;
  o.regKeep = static_cast<size_t>(std::max<int64_t>(0, envInt("TRIB_IB_REG_CACHE")));
  const int64_t chunk = envInt("TRIB_IB_CHUNK_BYTES");
  if (chunk > 0) o.chunkBytes = static_cast<uint64_t>(chunk);
  const int64_t qps = envInt("TRIB_IB_QPS_PER_CONNECTION");
  if (qps < 1 || qps > kMaxQpsPerConnection)
    return errorf(tribInvalidArgument, "verbs: TRIB_IB_QPS_PER_CONNECTION=%lld is out of range: 1 to %u",
                  static_cast<long long>(qps), kMaxQpsPerConnection);
  o.qps = static_cast<uint32_t>(qps);
  const int64_t window = envInt("TRIB_WINDOW_BYTES");
  if (window < 0 || window > static_cast<int64_t>(kMaxWindowBytes))
    return errorf(tribInvalidArgument, "verbs: TRIB_WINDOW_BYTES %lld must be in [0, 2 GiB]",
                  static_cast<long long>(window));
  o.windowBytes = std::min<uint64_t>(kMaxWindowBytes, (static_cast<uint64_t>(window) + 127) / 128 * 128);
  auto t = std::make_unique<VerbsTransport>(args.rank, args.nranks, o, args.timeout);
  int localIndex = 0;
  if (args.locations)
    for (int r = 0; r < args.rank; ++r)
      localIndex += sameHost((*args.locations)[r], (*args.locations)[args.rank]);
  TRIB_RETURN_IF_ERROR(t->init(args.peers, args.oob, localIndex));
  *out = std::move(t);
  return Status::Ok();
}

// The dma-buf trial (dmabufTrial) on the NIC this process attaches to, once per CUDA device: a
// registration costs milliseconds, and the answer is the NIC driver's, the same every time. The
// port is chosen as for rank 0 of the host (local index 0): where several NICs are equally near,
// they are taken to run one driver.
int nicDmabufTrial(int device) {
  static std::mutex mu;
  static std::map<int, int> answers;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = answers.find(device); it != answers.end()) return it->second;
  int err = 0;
  PortChoice port;
  std::shared_ptr<DeviceContext> dc;
  if (choosePort(&port, callerPlace(), 0).ok() && DeviceContext::open(port, &dc).ok())
    err = dmabufTrial(dc->pd(), device);
  if (err)
    TRIB_INFO("transport", "verbs: %s refused a trial dma-buf registration of CUDA device %d memory: %s",
              port.device.c_str(), device, std::strerror(err));
  return answers[device] = err;
}

// Whether this rank can register device memory with the NIC (caps.probe): asked at connect, of
// the calling thread's current device, and said once in the log.
bool verbsReachesDevice(const TransportConnectArgs& args) {
  DeviceReachFacts f;
  f.cudaBuilt = cuda::built();
  f.cudaContext = args.locations && args.rank >= 0 && args.rank < static_cast<int>(args.locations->size()) &&
                  ((*args.locations)[args.rank].flags & kLocationCudaContext);
  f.verbsDmabuf = dmabufRegistrationBuilt();
  int device = -1;
  if (f.cudaBuilt && f.cudaContext && cuda::currentDevice(&device).ok())
    f.driverDmabuf = cuda::dmabufSupported(device);
  f.peerMem = peerMemLoaded();
  if (f.verbsDmabuf && f.driverDmabuf) f.nicDmabufErrno = nicDmabufTrial(device);
  std::string why;
  const bool yes = deviceMemoryReachable(f, &why);
  static std::atomic<bool> said{false};
  if (!said.exchange(true))
    TRIB_INFO("transport", "verbs: device memory %s (%s)",
              yes ? "goes straight to the NIC" : "is staged through host memory", why.c_str());
  return yes;
}

// Both ranks must have a port: decided from the locations alone, the same on every rank.
bool verbsCanConnect(const RankLocation& self, const RankLocation& peer) {
  return self.flags & peer.flags & kLocationRdma;
}

}  // namespace

bool verbsPortAvailable() { return haveRdmaPort(); }

void verbsTestCorruptAdvertisedRkeys(bool on) { corruptAdvertisedRkeys.store(on); }
void verbsTestCorruptWindowRkeys(bool on) { corruptWindowRkeys.store(on); }

TransportDescriptor verbsTransportDescriptor() {
  TransportDescriptor d{};
  d.name = "verbs";
  // Where this process has no port, say why (an unknown TRIB_IB_HCA, say): what a forced
  // TRIB_TRANSPORT=verbs that cannot connect reports.
  static const std::string reaches =
      std::string("ranks on other hosts, where every rank has an active RDMA port") +
      (haveRdmaPort() ? "" : "; this process has none: " + rdmaPortStatus().message());
  d.reaches = reaches.c_str();
  // Device memory where this process can register it with the NIC (GPUDirect RDMA): large
  // messages and device sends go by RDMA from and into it, small ones into it by the copy engine.
  // Reduce-receives combine on the CPU from a bounce buffer: host memory only.
  d.caps.reads = d.caps.writes = kHostMemoryKinds | memoryKindBit(MemoryKind::Device);
  d.caps.reduces = kHostMemoryKinds;
  d.caps.probed = memoryKindBit(MemoryKind::Device);
  d.caps.probe = verbsReachesDevice;
  d.caps.twoSided = true;
  d.caps.zeroCopy = true;  // large sends are RDMA-written from the caller's buffer
  // Every rank's window, as remote windows (RDMA READ/WRITE, PeerWindows::remote()), when it
  // connects every pair of the communicator.
  d.caps.windows = true;
  d.priority = 150;  // above UCX for hosts with RDMA; below shm, which serves one host
  d.needsExchange = true;
  d.canConnect = verbsCanConnect;
  d.connect = verbsConnect;
  return d;
}

}  // namespace trib
