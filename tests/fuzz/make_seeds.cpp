// Writes the seed corpora of tests/fuzz/corpus/ (make_seeds DIR): valid examples of each format,
// made by the library's own encoders where it has them (unique id, switch, verbs, nvlink, shm
// layout) and as TcpStore writes them for the store. Rerun it when a format changes; the files
// are committed, so CI needs nothing but the fuzz targets.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "algo/schedule.hpp"
#include "bootstrap/store.hpp"
#include "bootstrap/store_handshake.hpp"
#include "bootstrap/unique_id.hpp"
#include "transports/nvlink/nvlink_blob.hpp"
#include "transports/shm/shm_layout.hpp"
#include "transports/switch/switch_protocol.hpp"
#include "transports/ucx/ucx_address.hpp"
#include "transports/verbs/verbs_wire.hpp"
#include "tributary/tributary.h"

using namespace trib;
using Bytes = std::vector<uint8_t>;

namespace {

std::string outDir;
int written = 0;

void put(const std::string& target, const std::string& name, const Bytes& b) {
  const std::string dir = outDir + "/" + target;
  std::string cmd = "mkdir -p '" + dir + "'";
  if (std::system(cmd.c_str()) != 0) std::exit(1);
  FILE* f = std::fopen((dir + "/" + name).c_str(), "wb");
  if (!f || std::fwrite(b.data(), 1, b.size(), f) != b.size() || std::fclose(f) != 0) {
    std::perror(name.c_str());
    std::exit(1);
  }
  ++written;
}
void put(const std::string& target, const std::string& name, const std::string& s) {
  put(target, name, Bytes(s.begin(), s.end()));
}
Bytes cat(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
template <class T>
Bytes raw(const T& v) {
  Bytes b(sizeof v);
  std::memcpy(b.data(), &v, sizeof v);
  return b;
}

void store() {
  using namespace storeproto;
  net::Writer set, add, wait, get, remove, range;
  set.u8(kSet), set.str("rank/0"), set.str("127.0.0.1:4000");
  add.u8(kAdd), add.str("barrier/1"), add.u64(1);
  wait.u8(kWait), wait.u32(30000), wait.u8(0), wait.u32(2), wait.str("rank/0"), wait.str("rank/1");
  get.u8(kWait), get.u32(30000), get.u8(1), get.u32(1), get.str("rank/0");
  remove.u8(kRemove), remove.str("barrier/1");
  range.u8(kWaitRange), range.u32(30000), range.u8(1), range.str("ag/0/"), range.u32(0), range.u32(8);
  put("fuzz_store_server", "set", set.frame());
  put("fuzz_store_server", "session",
      cat(cat(cat(set.frame(), add.frame()), cat(wait.frame(), get.frame())), remove.frame()));
  put("fuzz_store_server", "range", range.frame());
  net::Writer ok, values, error, timeout, added;
  ok.u8(kOk);
  values.u8(kOk), values.u32(2), values.str("v0"), values.str("value one");
  error.u8(kError), error.str("wrong job key (check TRIB_AUTH_KEY or the unique id)");
  timeout.u8(kTimeoutReply), timeout.str("1 of 2 keys still missing: 'rank/1'");
  added.u8(kOk), added.u64(3);
  put("fuzz_store_client", "ok", cat({0}, ok.data()));
  put("fuzz_store_client", "values", cat({2}, values.data()));
  put("fuzz_store_client", "error", cat({1}, error.data()));
  put("fuzz_store_client", "timeout", cat({2}, timeout.data()));
  put("fuzz_store_client", "add", cat({0}, added.data()));
}

// Both handshakes' messages, with fixed nonces and proofs (a seed needs their shape, not a key).
void handshake() {
  using namespace storeproto;
  auth::Nonce nonce{};
  auth::Proof proof{};
  for (size_t i = 0; i < nonce.size(); ++i)
    nonce[i] = static_cast<uint8_t>(i), proof[i] = static_cast<uint8_t>(~i);
  net::Writer v1;  // a version-1 HELLO, which carried the key itself
  v1.u8(kHello), v1.u32(kMagic), v1.u32(1), v1.str("job key");
  put("fuzz_handshake", "store_hello", cat({0}, encodeHello(nonce).data()));
  put("fuzz_handshake", "store_hello_v1", cat({0}, v1.data()));
  put("fuzz_handshake", "store_auth", cat({0}, encodeAuth(proof).data()));
  put("fuzz_handshake", "store_challenge", cat({1}, Bytes(nonce.begin(), nonce.end())));
  for (sw::MsgType t :
       {sw::MsgType::Hello, sw::MsgType::Challenge, sw::MsgType::Proof, sw::MsgType::HelloAck}) {
    sw::Header h;
    h.type = t;
    h.arg32 = t == sw::MsgType::Hello ? static_cast<uint32_t>(sw::Role::Switch) : 0;
    const bool isNonce = t == sw::MsgType::Hello || t == sw::MsgType::Challenge;
    const Bytes payload = isNonce ? Bytes(nonce.begin(), nonce.end()) : Bytes(proof.begin(), proof.end());
    put("fuzz_handshake", std::string("switch_") + sw::msgTypeName(t),
        cat({2}, sw::encodeMessage(h, payload.data(), payload.size())));
  }
}

void uniqueId() {
  tribUniqueId id;
  StoreServerHandle server;
  if (!makeUniqueId(&id, &server, "127.0.0.1:0").ok()) std::exit(1);
  put("fuzz_unique_id", "id", Bytes(id.internal, id.internal + sizeof id.internal));
}

void switchProtocol() {
  using namespace sw;
  auto header = [](const Header& h) {
    Bytes b(kHeaderBytes);
    encodeHeader(h, b.data());
    return b;
  };
  Header hello;
  hello.type = MsgType::Hello;
  hello.payloadBytes = kHandshakeBytes;  // the client's nonce follows
  Bytes nonce(kHandshakeBytes);
  for (size_t i = 0; i < nonce.size(); ++i) nonce[i] = static_cast<uint8_t>(i);
  put("fuzz_switch", "hello", cat(header(hello), nonce));
  Header reg;
  reg.type = MsgType::Register;
  reg.group = 9;
  reg.arg32 = 4;
  const Bytes path = encodePath({{4, 1}, {2, 0}});
  reg.payloadBytes = static_cast<uint32_t>(path.size());
  put("fuzz_switch", "register", cat(header(reg), path));
  Header chunk;
  chunk.type = MsgType::Chunk;
  chunk.group = 9;
  chunk.opId = 7;
  chunk.chunk = 3;
  chunk.dtype = tribFloat32;
  chunk.redop = tribSum;
  chunk.coll = static_cast<uint8_t>(Coll::AllReduce);
  chunk.count = 256;
  chunk.payloadBytes = 1024;
  put("fuzz_switch", "chunk", header(chunk));
  Header gather = chunk;
  gather.type = MsgType::Result;
  gather.coll = static_cast<uint8_t>(Coll::AllGather);
  gather.arg32 = 4;
  gather.count = 64;
  put("fuzz_switch", "allgather_result", header(gather));
  const Bytes text = textMessage(MsgType::Error, 9, "rank 3 left the group");
  put("fuzz_switch", "error", text);
}

void verbsBlob() {
  verbs::Blob b;
  b.header.rank = 1;
  b.header.nranks = 3;
  b.header.lid = 7;
  b.header.port = 1;
  b.header.mtu = 5;
  b.header.eagerBytes = 8192;
  b.header.recvBuffers = 64;
  b.header.fifoSlots = 32;
  std::snprintf(b.header.device, sizeof b.header.device, "rxe0");
  b.qp.resize(3);
  for (int r = 0; r < 3; ++r)
    if (r != 1)
      b.qp[r] = {static_cast<uint32_t>(17 + r), 1000u + r, 0x7f0000001000ull, 5, 6, 0x7f0000002000ull};
  put("fuzz_verbs_blob", "rank1_of_3_nowindow", cat({2, 1}, verbs::encodeBlob(b)));
  b.header.windowAddr = 0x7f0000100000ull;  // a 2 MiB window (TRIB_WINDOW_BYTES' default)
  b.header.windowBytes = 2 << 20;
  b.header.windowRkey = 9;
  b.header.readsInFlight = 16;
  put("fuzz_verbs_blob", "rank1_of_3", cat({2, 1}, verbs::encodeBlob(b)));
}

void nvlinkBlob() {
  using namespace nvlink;
  constexpr uint64_t kCommId = 0x5452494246555a5aull;  // fuzz_nvlink_blob.cpp's
  DeviceBlob d;
  d.device = 0;
  d.windowBytes = 1 << 20;
  d.process = selfIdentity();
  std::snprintf(d.socketName, sizeof d.socketName, "trib-nvl-1234-r1");
  put("fuzz_nvlink_blob", "device", cat({1, 1, 0}, encodeDeviceBlob(1, 2, kCommId, d)));
  WindowBlob w;
  w.handle = 1;
  w.mappedBytes = 2 << 20;
  put("fuzz_nvlink_blob", "window",
      cat({1, 1, 1}, encodeWindowBlob(1, 2, kCommId, w, {PairPath::VmmFd, PairPath::Self})));
  put("fuzz_nvlink_blob", "fds", cat({1, 0, 2}, raw(makeFdMessage(1, 2, kCommId, 2))));
}

void shmLayout() {
  using namespace shm;
  // Options bytes as fuzz_shm.cpp reads them: nlocal-1, nslots-2 (u16), slotBytes/64-1 (u16),
  // window MiB (u16), rank.
  const uint32_t nlocal = 4, nslots = 16;
  const uint64_t slotBytes = 64 << 10, windowBytes = 8 << 20;
  Bytes opts = {static_cast<uint8_t>(nlocal - 1)};
  opts = cat(opts, raw(static_cast<uint16_t>(nslots - 2)));
  opts = cat(opts, raw(static_cast<uint16_t>(slotBytes / 64 - 1)));
  opts = cat(opts, raw(static_cast<uint16_t>(windowBytes >> 20)));
  opts.push_back(2);
  const SegLayout l = segLayout(nlocal, nslots, slotBytes, windowBytes);
  SegHeader h = segHeader(2, 4242, nlocal, nslots, slotBytes, windowBytes);
  h.probe = 77;
  put("fuzz_shm", "segment", cat(cat({0}, opts), cat(raw(h), raw(l.totalBytes))));
  SlotHeader data{5, 100000, 65536, 34464, kData, 0, 0, 0, {}};
  put("fuzz_shm", "data_slot", cat(cat({1}, opts), raw(data)));
  SlotHeader rts{6, 1 << 24, 0, 0, kCmaRts, 3, 0, 9, {}};
  put("fuzz_shm", "rts_slot", cat(cat({1}, opts), raw(rts)));
  ConnBlob blob;
  blob.rank = 2;
  blob.proc = selfIdentity();
  blob.probeAddr = 0x7f0000003000ull;
  blob.probeValue = 77;
  blob.localHash = 1469598103934665603ull;
  blob.segBytes = l.totalBytes;
  blob.probeFd = 9;
  blob.boot = "boot-id-of-this-kernel";
  blob.segName = "/trib-4242-00000000deadbeef-r2";  // ShmTransport::kSegmentPrefix
  put("fuzz_shm", "conn_blob", cat(cat({2}, opts), encodeConnBlob(blob)));
}

void ucxAddress() {
  ucx::AddressHeader head;
  head.slot = 3;
  head.tagSecret = 0x00f1e2d3c4b5a697ull;  // below the comm field, as transports draw it
  head.proc = selfIdentity();
  const uint8_t worker[24] = {0x11, 0x22, 0x33, 0x44, 1, 2, 3, 4, 5, 6, 7, 8};  // UCX's bytes: opaque here
  put("fuzz_ucx_address", "slot3", cat({1, 8}, ucx::encodeAddress(head, worker, sizeof worker)));
}

void config() {
  tribConfig_t c = TRIB_CONFIG_INITIALIZER;
  put("fuzz_config", "default", raw(c));
  c.timeoutMs = 5000;
  c.algo = reinterpret_cast<const char*>(1);  // fuzz_config.cpp: low bit set = the first string
  c.commName = reinterpret_cast<const char*>(1);
  put("fuzz_config", "strings", cat(raw(c), Bytes{'r', 'i', 'n', 'g', 0, 0, 'w', 'o', 'r', 'l', 'd'}));
  tribConfig_t old = TRIB_CONFIG_INITIALIZER;
  old.size = TRIB_CONFIG_MIN_SIZE;  // a header from before shareTransports
  put("fuzz_config", "old_header",
      Bytes(reinterpret_cast<uint8_t*>(&old), reinterpret_cast<uint8_t*>(&old) + TRIB_CONFIG_MIN_SIZE));
}

void text() {
  put("fuzz_algo_tune", "algo",
      "\x01"
      "allreduce:^ring,rhd;broadcast:chain");
  put("fuzz_algo_tune", "algo_all",
      "\x01"
      "tree");
  put("fuzz_algo_tune", "tune",
      std::string("\x00", 1) + "allreduce:0-64k:@tree#allreduce:64k-inf:ranks=2-64:@ring");
  put("fuzz_algo_tune", "tune_sizes",
      std::string("\x00", 1) + "all:1.5KiB-1G:@rhd#reduce,broadcast:8-16mb:@binomial");
  put("fuzz_algo_tune", "tune_ranks_past_int",  // once wrapped negative
      std::string("\x00", 1) + "allreduce:ranks=2-6488888888888:@ring");
  put("fuzz_topo_file", "switch",
      "# two GPUs under a reducing switch\n"
      "node g0 gpu\nnode g1 gpu\n"
      "node sw switch reduce_gbps=50 reduce_dtypes=float32,bfloat16 reduce_ops=sum,max reduce_max_ops=4\n"
      "link g0 sw net bw=25 lat=1.5\nlink g1 sw net bw=25 lat=1.5\n");
  put("fuzz_topo_file", "host",
      "node c0 cpu cores=8\nnode n0 nic\nnode g0 gpu\nnode g1 gpu\n"
      "link g0 g1 nvlink bw=300 lat=0.7\nlink g0 c0 pcie bw=24 bw_back=22 lat=1\nlink g1 c0 pcie bw=24\n"
      "link c0 n0 pcie bw=24\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR (writes DIR/<fuzz target>/<seed>)\n", argv[0]);
    return 2;
  }
  outDir = argv[1];
  store();
  handshake();
  uniqueId();
  switchProtocol();
  verbsBlob();
  nvlinkBlob();
  shmLayout();
  ucxAddress();
  config();
  text();
  std::printf("wrote %d seeds under %s\n", written, outDir.c_str());
  return 0;
}
