// The rank side of in-network reduction: one connection to this rank's leaf switch, one group.
//
// connect() says hello with the job key and registers the rank as child `path[0].index` of the
// group; the switch grants a quota of slots and its slot size, or refuses with a reason (the
// caller then plans without the switch). An all-reduce is cut into chunks of at most the slot
// size; at most `quota` chunks are in flight (a chunk is sent only when the chunk `quota` places
// before it has its result), which keeps the group within the slots it reserved at every switch
// of the tree. Results are received straight into the destination buffer.
//
// The other collectives use the same chunks (docs/SWITCH.md): reduce and reduce-scatter send
// everything and receive data only for the chunks this rank owns (the root's; its own block),
// a payload-free completion for the others; broadcast sends data only from the root (the others
// send "ready" markers) and receives it everywhere else; all-gather sends pieces of this rank's
// slice and receives every rank's piece of the same chunk, in rank order; barrier is one empty
// chunk.
#pragma once
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "transports/switch/switch_link.hpp"
#include "transports/switch/switch_protocol.hpp"
#include "transports/transport.hpp"

namespace trib::sw {

struct SwitchClientConfig {
  std::string address;            // host:port of the leaf switch
  std::string key;                // the job key (the switch's --key)
  uint64_t group = 0;             // the same on every member; distinct per communicator
  std::vector<PathLevel> path;    // level 0: (members at the leaf, my child index); then upwards
  std::vector<int> leafRanks;     // the rank of each child of the leaf (empty: name child indices)
  uint32_t slots = 16;            // quota to ask for (the window of chunks in flight)
  uint64_t maxChunkBytes = 0;     // 0: the slot size
  int timeoutMs = 5000;           // connect + register
  LinkKind link = LinkKind::Tcp;  // must match the switch's --link (TRIB_SWITCH_LINK)
};

struct SwitchClientStats {
  uint64_t payloadSent = 0;  // contribution bytes sent to the switch
  uint64_t payloadRecv = 0;  // result bytes received from it
  uint64_t headerBytes = 0;  // protocol overhead, both directions
  uint64_t chunks = 0;
  uint64_t ops = 0;
};

class SwitchClient : public CollectiveOffload {
 public:
  // Connects and registers. Refusal: tribNotSupported with the switch's reason; missing or
  // unreachable switch: tribTimeout/tribSystemError; wrong key: tribRemoteError.
  static Status connect(const SwitchClientConfig& cfg, std::unique_ptr<SwitchClient>* out);
  ~SwitchClient() override;

  const char* name() const override { return "switch"; }
  Status postAllReduce(const void* src, void* dst, uint64_t count, DataType dtype, RedOp op,
                       TransferOp* done) override;
  Status postCollective(const OffloadCall& call, TransferOp* done) override;
  Status progress() override;
  void abort(const Status& why) override;
  std::string explainStall(std::chrono::milliseconds budget) override;
  bool payloadTraffic(uint64_t* sent, uint64_t* received) const override {
    *sent = stats_.payloadSent;
    *received = stats_.payloadRecv;
    return true;
  }

  uint32_t quota() const { return quota_; }
  uint64_t slotBytes() const { return slotBytes_; }
  const SwitchClientStats& stats() const { return stats_; }
  const std::string& address() const { return cfg_.address; }
  // The error that broke the connection (OK while healthy).
  const Status& broken() const { return broken_; }

 private:
  struct Op {
    OffloadCall call;
    TransferOp* done;
    uint64_t id;
    uint64_t chunkElems;  // per chunk (all-gather: per rank's piece)
    uint64_t perBlock;    // reduce-scatter: chunks per rank's block
    uint32_t chunks, sent = 0, received = 0;
  };
  // Where chunk k of `op` lies: `count` elements at element `offset` of the rank's slice/block
  // `block` (reduce-scatter: the owner's block; otherwise 0), owned by rank `owner`.
  struct ChunkPos {
    uint64_t offset, count;
    uint32_t owner;
    uint64_t block;
  };
  static ChunkPos chunkPos(const Op& op, uint32_t k);
  // Whether this rank sends data for / receives data of chunk k (else a marker / a completion).
  static bool sendsData(const Op& op, const ChunkPos& p);
  static bool receivesData(const Op& op, const ChunkPos& p);
  struct OutSeg {
    std::vector<uint8_t> own;      // header bytes
    const uint8_t* ext = nullptr;  // or payload in the caller's buffer
    size_t n = 0, off = 0;
  };

  explicit SwitchClient(const SwitchClientConfig& cfg) : cfg_(cfg) {}
  Status handshake();
  void fail(const Status& why);
  Status flush();
  Status readAvailable();
  Status onResult();
  Status placeResult();
  void sendChunks();
  // Sends Stalled and waits up to `budget` for the answer (in waiting_); false without one.
  bool askWhatIsLacking(std::chrono::milliseconds budget);
  // "rank 5" / "ranks 5, 6" for children of the leaf ("children 1, 2" where no ranks were given).
  std::string nameChildren(const std::vector<uint32_t>& children) const;

  SwitchClientConfig cfg_;
  std::unique_ptr<LinkHub> hub_;  // before link_: a link goes before its hub
  std::unique_ptr<Link> link_;
  uint32_t quota_ = 0;
  uint64_t slotBytes_ = 0;
  uint64_t nextOpId_ = 0;
  uint64_t nextSeq_ = 0;                                     // chunk sequence across operations
  std::set<uint64_t> inFlight_;                              // sequence numbers sent, result pending
  std::map<std::pair<uint64_t, uint32_t>, uint64_t> seqOf_;  // (op, chunk) -> sequence
  std::deque<Op> ops_;
  std::deque<OutSeg> out_;
  uint8_t hdr_[kHeaderBytes];
  size_t hdrGot_ = 0;
  bool inPayload_ = false;
  Header cur_;
  // Where the current payload goes: pieces of pieceBytes_, piece j at payDst_ + j * pieceStride_
  // (all-gather: rank j's part of the chunk; otherwise one piece).
  uint8_t* payDst_ = nullptr;
  size_t pieceBytes_ = 0, pieceStride_ = 0;
  std::vector<uint8_t> text_;  // payload of an Error or a Waiting (or a result nobody waits for)
  // The switch's answer to Stalled (explainStall): its oldest pending chunk and whom it lacks.
  struct Waiting {
    uint64_t opId;
    uint32_t chunk;
    bool parent;  // every child is in: it waits for the parent switch
    std::vector<uint32_t> children;
  };
  std::optional<Waiting> waiting_;
  size_t payGot_ = 0;
  Status broken_;
  SwitchClientStats stats_;
  bool moved_ = false;  // bytes moved in this progress() call
  uint32_t idle_ = 0;   // consecutive progress() calls that moved nothing
  static constexpr uint32_t kSpinsBeforeSleep = 64;
};

}  // namespace trib::sw

namespace trib {
struct OffloadDescriptor;  // transports/registry.hpp
// The aggregation switch as a collective offload (registered in transports/registry.cpp).
OffloadDescriptor switchOffloadDescriptor();
}  // namespace trib
