// What the verbs transport puts on the wire and in the bootstrap's exchange, and the protocol
// bookkeeping that needs no device (tests/test_verbs_protocol.cpp runs it everywhere):
//  - the connection blob every rank publishes: versioned, size-checked, one entry per peer;
//  - the header of the messages that go through pre-posted receive buffers (eager payloads and
//    ready-to-send notices of large ones);
//  - the clear-to-send FIFO a receiver writes into its sender's memory by RDMA;
//  - credits for the pre-posted buffers, and the chunks of a large RDMA write.
// Layouts are little-endian structs of fixed size (every rank runs this build on x86-64/aarch64).
#pragma once
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/status.hpp"
#include "topo/locality.hpp"

namespace trib::verbs {

// ---- connection blob ----------------------------------------------------------------------
constexpr uint32_t kBlobMagic = 0x42565254;  // "TRVB"
constexpr uint16_t kBlobVersion = 3;         // 2: queue pairs per connection; 3: the remote window
constexpr uint64_t kMaxWindowBytes = uint64_t{1} << 31;  // TRIB_WINDOW_BYTES' limit (as shm's)
constexpr uint32_t kMaxQpsPerConnection = 16;

// What a rank tells one peer about the (first) queue pair it made for it.
struct QpInfo {
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint64_t fifoAddr = 0;  // this rank's CTS FIFO for messages it sends to that peer
  uint32_t fifoRkey = 0;
  uint32_t creditRkey = 0;  // the word into which that peer writes how many buffers it reposted
  uint64_t creditAddr = 0;
};

struct BlobHeader {
  uint32_t magic = kBlobMagic;
  uint16_t version = kBlobVersion;
  uint16_t headerBytes = sizeof(BlobHeader);
  int32_t rank = 0;
  int32_t nranks = 0;
  uint8_t gid[16] = {};
  uint16_t lid = 0;
  uint8_t port = 0;
  uint8_t mtu = 0;           // enum ibv_mtu of the port
  uint32_t eagerBytes = 0;   // size of each pre-posted receive buffer
  uint32_t recvBuffers = 0;  // pre-posted per peer (the sender's credits)
  uint32_t fifoSlots = 0;
  uint32_t qpsPerConnection = 1;  // queue pairs to each peer (TRIB_IB_QPS_PER_CONNECTION)
  char device[32] = {};           // for messages
  // The rank's window (peer-memory schedules, RDMA READ/WRITE by its peers): windowBytes at
  // windowAddr, then one SignalRecord per rank (windowSignalAddr), all under windowRkey.
  // windowBytes 0: none (then address and key are 0 too).
  uint64_t windowAddr = 0;
  uint64_t windowBytes = 0;
  uint32_t windowRkey = 0;
  uint32_t readsInFlight = 1;  // RDMA READs its queue pairs take in flight as responder (1 to 255)
};
static_assert(sizeof(BlobHeader) == 112);
// A window signal: the sender's count of signals to this rank so far and the latest one's
// fingerprint, written whole by one RDMA WRITE (inline) over the previous. The count is at both
// ends, as in a CTS entry: the NIC writes in address order, so a record whose ends agree has landed
// whole (a torn read is retried at the next poll).
// `closing` 1: the sender is closing its communicator (the count and fingerprint are its last).
// `carried`: up to 16 bytes of the sender's window as they were when the signal was sent
// (PeerWindows::carryNext; offset and byte count in `carryTag`: carryTagOf), so a peer's small
// get reads them from its own memory instead of an RDMA READ. Between the two counts, so a record
// whose ends agree carries them whole too.
struct SignalRecord {
  uint64_t count = 0;
  uint32_t fingerprint = 0;
  uint32_t closing = 0;
  uint64_t carryTag = 0;  // 0: carries nothing
  uint64_t carried[2] = {0, 0};
  uint64_t countEnd = 0;
};
static_assert(sizeof(SignalRecord) == 48);
// carryTag: the window offset in the low 56 bits, the byte count (1 to 16) above them.
inline uint64_t carryTagOf(uint64_t offset, uint64_t bytes) { return bytes << 56 | offset; }
inline uint64_t carryTagOffset(uint64_t tag) { return tag & ((uint64_t{1} << 56) - 1); }
inline uint64_t carryTagBytes(uint64_t tag) { return tag >> 56; }
// Where rank `from`'s signals land in the window region of a rank whose header is h.
inline uint64_t windowSignalAddr(const BlobHeader& h, int from) {
  return h.windowAddr + h.windowBytes + sizeof(SignalRecord) * static_cast<uint64_t>(from);
}

// Another queue pair of a connection: the data of large messages only.
struct QpAddr {
  uint32_t qpn = 0;
  uint32_t psn = 0;
};

struct Blob {
  BlobHeader header;
  std::vector<QpInfo> qp;  // qp[r]: for peer r (zeros where it is not a peer)
  // The other queue pairs: extra[r * (qpsPerConnection - 1) + i] is peer r's (i + 1)-th.
  std::vector<QpAddr> extra;
};

std::vector<uint8_t> encodeBlob(const Blob& b);
// Checks magic, version, sizes, rank and nranks against what `from` should have sent; the error
// names the peer.
Status decodeBlob(const std::vector<uint8_t>& bytes, int from, int nranks, Blob* out);

// ---- messages through pre-posted buffers --------------------------------------------------
enum MsgType : uint32_t { kEager = 1, kReadyToSend = 2 };
struct MsgHeader {
  uint32_t type = 0;
  uint32_t sendId = 0;  // ready-to-send: the sender's id, echoed in the CTS
  uint64_t tag = 0;
  uint64_t bytes = 0;  // the message's length (eager: the payload that follows)
};
static_assert(sizeof(MsgHeader) == 24);

// ---- clear-to-send FIFO -------------------------------------------------------------------
// The receiver of a large message writes one entry into its sender's FIFO (slot = index % slots)
// once it has matched the sender's ready-to-send with a posted receive. `seq` is index + 1 at both
// ends of the entry, so the sender reads an entry only when all of it has landed.
struct CtsEntry {
  uint64_t seq = 0;
  uint64_t addr = 0;   // where to write; 0: refused (bytes then says what the receiver expected)
  uint64_t bytes = 0;  // the receiver's length
  uint32_t rkey = 0;
  uint32_t sendId = 0;  // the ready-to-send it answers
  uint32_t recvId = 0;  // echoed in the immediate of the last write
  uint32_t pad = 0;
  uint64_t seqEnd = 0;
};
static_assert(sizeof(CtsEntry) == 48);

// Sender side: which slot holds the next entry, and whether it has fully arrived.
class CtsReader {
 public:
  explicit CtsReader(uint32_t slots) : slots_(slots) {}
  uint32_t nextSlot() const { return static_cast<uint32_t>(consumed_ % slots_); }
  bool ready(const CtsEntry& e) const { return e.seq == consumed_ + 1 && e.seqEnd == consumed_ + 1; }
  void consume() { ++consumed_; }
  uint64_t consumed() const { return consumed_; }
  // Ready-to-send notices in flight may not exceed the slots (each gets one entry): whether one
  // more may go, given how many were sent.
  bool maySend(uint64_t noticesSent) const { return noticesSent < consumed_ + slots_; }

 private:
  uint32_t slots_;
  uint64_t consumed_ = 0;
};

// Receiver side: where the next entry goes and its sequence number.
class CtsWriter {
 public:
  explicit CtsWriter(uint32_t slots) : slots_(slots) {}
  uint32_t slot() const { return static_cast<uint32_t>(written_ % slots_); }
  uint64_t seq() const { return written_ + 1; }
  void advance() { ++written_; }

 private:
  uint32_t slots_;
  uint64_t written_ = 0;
};

// ---- large receives, by the immediate that completes them -------------------------------------
// The receiver names each large receive it has answered with an id (the CTS entry's recvId); the
// sender's last write carries it back as its immediate value. That value comes off the wire, so
// it is looked up in the table of the peer that sent it before it is used: a malformed or stale
// one (never issued, already completed, or another peer's) is an error naming that peer.
template <class T>
class RecvTable {
 public:
  // Files a receive; returns its id, never 0 (a refusing CTS entry carries 0).
  uint32_t add(T v) {
    uint32_t id;
    do id = next_++;
    while (id == 0 || live_.count(id));
    live_.emplace(id, std::move(v));
    return id;
  }
  // Moves the receive `imm` names into *out and forgets it; where it names none, an error naming
  // `peer` and nothing changes.
  Status take(uint32_t imm, const std::string& peer, T* out) {
    auto it = live_.find(imm);
    if (it == live_.end())
      return errorf(tribRemoteError,
                    "verbs: %s completed a write with immediate %u, which names none of the %zu large "
                    "receives this rank awaits from it (a malformed or stale immediate)",
                    peer.c_str(), imm, live_.size());
    *out = std::move(it->second);
    live_.erase(it);
    return Status::Ok();
  }
  // Every receive still awaited, then none (a peer lost).
  template <class F>
  void drain(F f) {
    for (auto& [id, v] : live_) f(v);
    live_.clear();
  }
  size_t size() const { return live_.size(); }

 private:
  std::map<uint32_t, T> live_;
  uint32_t next_ = 1;
};

// ---- credits --------------------------------------------------------------------------------
// A send or write-with-immediate consumes one of the peer's pre-posted buffers. The peer writes
// how many it has reposted so far into our credit word (RDMA, no buffer consumed), so the credits
// never deadlock: available = initial + reposted - consumed.
class Credits {
 public:
  explicit Credits(uint32_t initial) : initial_(initial) {}
  uint64_t available(uint64_t repostedByPeer) const { return initial_ + repostedByPeer - consumed_; }
  bool take(uint64_t repostedByPeer) {
    if (available(repostedByPeer) == 0) return false;
    ++consumed_;
    return true;
  }
  uint64_t consumed() const { return consumed_; }

 private:
  uint64_t initial_;
  uint64_t consumed_ = 0;
};

// The receiver's side: reposts counted, and when to tell the sender (every `batch`, and whenever
// asked to flush what is pending).
class Reposts {
 public:
  explicit Reposts(uint32_t batch) : batch_(batch ? batch : 1) {}
  void reposted() { ++total_; }
  bool shouldAdvertise() const { return total_ - advertised_ >= batch_; }
  bool pending() const { return total_ != advertised_; }
  uint64_t advertise() { return advertised_ = total_; }
  uint64_t total() const { return total_; }

 private:
  uint32_t batch_;
  uint64_t total_ = 0, advertised_ = 0;
};

// ---- the order of the send queue --------------------------------------------------------------
// Work waiting for the send queue (W has a bool needsCredit). What needs a credit (a message into
// the peer's pre-posted buffers; the last chunk of a large message, written with immediate) posts
// in order while credits last. What needs none (credit and CTS writes, probes, the chunks before
// a message's last) is never held behind it: were a credit write queued behind a send waiting
// for credits, two ranks that both ran out would each hold back the write the other waits for.
// Credit-free work posts first, and credited work only once none is queued, so a message's last
// chunk never posts before its earlier ones.
template <class W>
class WorkQueue {
 public:
  void push(W w) { (w.needsCredit ? credited_ : free_).push_back(std::move(w)); }
  // Posts what `room` send-queue slots and takeCredit() allow, with post(w); one that returns
  // false (it failed) stops it. Returns how many were posted.
  template <class TakeCredit, class Post>
  uint32_t post(uint32_t room, TakeCredit takeCredit, Post post) {
    uint32_t n = 0;
    for (; n < room && !free_.empty(); ++n) {
      if (!post(free_.front())) return n;
      free_.pop_front();
    }
    for (; n < room && free_.empty() && !credited_.empty() && takeCredit(); ++n) {
      if (!post(credited_.front())) return n;
      credited_.pop_front();
    }
    return n;
  }
  bool empty() const { return free_.empty() && credited_.empty(); }
  void clear() { free_.clear(), credited_.clear(); }

 private:
  std::deque<W> free_, credited_;
};

// ---- chunks of a large write ------------------------------------------------------------------
struct Chunk {
  uint64_t offset, bytes;
  bool last;        // carries the immediate that completes the message
  uint32_t qp = 0;  // the connection's queue pair it goes on
};
// Parts of a message on several queue pairs start at multiples of this (NCCL's alignment).
constexpr uint64_t kQpSplitAlign = 128;
// The writes of a large message: [0, bytes) in chunks of at most `chunk` (> 0). On one queue pair
// the last chunk carries the immediate (an empty message is one empty last chunk). On `qps` > 1,
// as NCCL's NCCL_IB_QPS_PER_CONNECTION: [0, bytes) in up to `qps` contiguous parts of equal size
// (rounded up to kQpSplitAlign), part i on queue pair i, each in chunks; no chunk is last, since
// writes on different queue pairs land in no order relative to each other: the sender follows
// them, once all have completed, with an empty write with immediate on queue pair 0.
std::vector<Chunk> chunksOf(uint64_t bytes, uint64_t chunk, uint32_t qps = 1);

// ---- TRIB_IB_HCA (NCCL's syntax) --------------------------------------------------------------
// "mlx5_0:1,mlx5_1" picks those devices (port optional); "^mlx5_2" excludes; a leading '=' makes
// names exact instead of prefixes.
struct HcaSpec {
  bool exclude = false, exact = false;
  struct Item {
    std::string name;
    int port = 0;  // 0: any
  };
  std::vector<Item> items;
};
Status parseHcaSpec(const std::string& text, HcaSpec* out);
// Whether device `name` port `port` is selected by spec (an empty spec selects everything).
bool hcaSelected(const HcaSpec& spec, const std::string& name, int port);

// ---- device choice (docs/VERBS.md) ------------------------------------------------------------
// An active port, and where its device sits.
struct PortCandidate {
  std::string device;
  int port = 1;
  PciPlace place;
};
struct PortPick {
  int index = -1;   // into the candidates; -1: spec selects none
  std::string why;  // for the log: "same PCI switch as GPU 0000:1b:00.0", "the only port TRIB_IB_HCA selects"
};
// Among the candidates spec selects, the one nearest `anchor` (the rank's GPU or CPUs), equally
// near ones spread by `localIndex` (the rank's index among its host's ranks): rankNics.
PortPick pickPort(const HcaSpec& spec, const std::vector<PortCandidate>& candidates, const PciPlace& anchor,
                  int localIndex);

}  // namespace trib::verbs
