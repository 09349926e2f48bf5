// trib-fault-rank: one rank of a fault-injection run (tests/faults/faults.sh, docs/FAULTS.md).
// Joins through the launcher environment (TRIB_RANK, TRIB_NRANKS, TRIB_STORE, TRIB_AUTH_KEY),
// then runs a sequence of random collectives drawn from --seed (the same on every rank), each
// on data whose exact result every rank can compute, and checks every result.
//
//   trib-fault-rank --seed S --ops N [--max-count C] [--abort-after-ms T] [--until-file F]
//
// --until-file: before each op rank 0 broadcasts whether F exists; all stop (ok) once it does,
// so the driver decides how long the ranks run under a fault (at most N ops).
// --abort-after-ms: another thread calls tribCommAbort T ms after the communicator is ready;
// from then on every call must return tribAborted (a call that completes first must be right).
// Prints "ready rank=R" once joined, then one line
//   RESULT at_ms=WALLCLOCK rank=R status=ok|error|aborted|wrong op=K coll=NAME code=CODE call_s=T msg=...
// (call_s: the reported call's own time, or the slowest call's when all were right.)
// Exit status: 0 every op right; 10 an op failed with an error; 11 aborted as asked; 12 a wrong
// result or a wrong code (what the fault tests must never see); 13 init failed; 2 usage.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tributary/tributary.h"

namespace {

using Clock = std::chrono::steady_clock;

enum Coll {
  kAllReduce,
  kBroadcast,
  kReduce,
  kAllGather,
  kReduceScatter,
  kAlltoAll,
  kBarrier,
  kGather,
  kCount
};
const char* const kCollNames[kCount] = {"allreduce",     "broadcast", "reduce",  "allgather",
                                        "reducescatter", "alltoall",  "barrier", "gather"};

// One op of the sequence: the same on every rank (drawn from the shared seed).
struct Op {
  Coll coll;
  size_t count;  // elements per rank (the collective's own convention)
  tribDataType_t dtype;
  tribRedOp_t redop;
  int root;
  bool inPlace;
};

Op drawOp(std::mt19937_64& rng, int nranks, size_t maxCount) {
  Op op{};
  op.coll = static_cast<Coll>(rng() % kCount);
  // Sizes: a fifth tiny (0..16, empty included), half up to 4 Ki elements, the rest up to maxCount.
  unsigned kind = rng() % 10;
  size_t cap = kind < 2 ? 17 : kind < 7 ? 4097 : maxCount + 1;
  op.count = rng() % cap;
  op.dtype = rng() % 2 ? tribInt32 : tribFloat32;
  const tribRedOp_t ops[] = {tribSum, tribMax, tribMin};
  op.redop = ops[rng() % 3];
  op.root = static_cast<int>(rng() % nranks);
  // In place where the API defines it (not all-to-all, not gather here).
  op.inPlace = op.coll != kAlltoAll && op.coll != kGather && rng() % 2;
  return op;
}

// Small integers, so float32 sums over any rank count are exact.
int32_t value(int rank, uint64_t opIndex, size_t i) {
  return static_cast<int32_t>((static_cast<uint64_t>(rank + 1) * 131 + opIndex * 7 + i * 13) % 1000) - 500;
}

int32_t combine(tribRedOp_t redop, int32_t a, int32_t b) {
  if (redop == tribSum) return a + b;
  if (redop == tribMax) return a > b ? a : b;
  return a < b ? a : b;
}

int32_t reduced(tribRedOp_t redop, int nranks, uint64_t opIndex, size_t i) {
  int32_t acc = value(0, opIndex, i);
  for (int r = 1; r < nranks; ++r) acc = combine(redop, acc, value(r, opIndex, i));
  return acc;
}

// Buffers as int32 or float32 holding the same integers.
struct Buffer {
  tribDataType_t dtype;
  std::vector<int32_t> ints;
  std::vector<float> floats;
  Buffer(tribDataType_t t, size_t n) : dtype(t) {
    if (t == tribInt32)
      ints.assign(n, 0x7eadbeef);
    else
      floats.assign(n, -1e30f);
  }
  void* data() { return dtype == tribInt32 ? static_cast<void*>(ints.data()) : floats.data(); }
  size_t size() const { return dtype == tribInt32 ? ints.size() : floats.size(); }
  void set(size_t i, int32_t v) {
    if (dtype == tribInt32)
      ints[i] = v;
    else
      floats[i] = static_cast<float>(v);
  }
  bool is(size_t i, int32_t v) const {
    return dtype == tribInt32 ? ints[i] == v : floats[i] == static_cast<float>(v);
  }
};

struct Outcome {
  tribResult_t code = tribSuccess;
  std::string wrong;  // non-empty: the first wrong element
};

// Runs op k on this rank and checks the result it must hold.
Outcome runOp(tribComm_t comm, int rank, int n, uint64_t k, const Op& op) {
  const size_t c = op.count;
  const bool gathers = op.coll == kAllGather || op.coll == kAlltoAll || op.coll == kGather;
  const size_t inCount = (op.coll == kReduceScatter || op.coll == kAlltoAll) ? c * n : c;
  const size_t outCount =
      (gathers || op.coll == kReduceScatter) ? (op.coll == kReduceScatter ? c : c * n) : c;
  Buffer in(op.dtype, inCount), out(op.dtype, op.inPlace ? 0 : outCount);
  // In place: one buffer of the larger shape, the input where the API says it lies.
  Buffer whole(op.dtype, op.inPlace ? std::max(inCount, outCount) : 0);
  size_t inOffset = (op.inPlace && op.coll == kAllGather) ? rank * c : 0;
  Buffer& src = op.inPlace ? whole : in;
  for (size_t i = 0; i < inCount; ++i) {
    // AlltoAll: block j goes to rank j; its elements are numbered as the receiver sees them.
    size_t idx = op.coll == kAlltoAll ? (i / (c ? c : 1)) * 1000003 + i % (c ? c : 1) : i;
    src.set(inOffset + i, value(rank, k, idx));
  }
  void* sendp = static_cast<char*>(src.data()) + inOffset * 4;
  void* recvp = op.inPlace ? whole.data() : out.data();
  Buffer& res = op.inPlace ? whole : out;
  size_t resOffset = (op.inPlace && op.coll == kReduceScatter) ? rank * c : 0;
  if (op.inPlace && op.coll == kReduceScatter) recvp = static_cast<char*>(whole.data()) + rank * c * 4;
  if (c == 0) sendp = recvp = nullptr;
  Outcome o;
  switch (op.coll) {
    case kAllReduce:
      o.code = tribAllReduce(sendp, recvp, c, op.dtype, op.redop, comm, nullptr);
      break;
    case kBroadcast:
      o.code = tribBroadcast(sendp, recvp, c, op.dtype, op.root, comm, nullptr);
      break;
    case kReduce:
      o.code = tribReduce(sendp, recvp, c, op.dtype, op.redop, op.root, comm, nullptr);
      break;
    case kAllGather:
      o.code = tribAllGather(sendp, recvp, c, op.dtype, comm, nullptr);
      break;
    case kReduceScatter:
      o.code = tribReduceScatter(sendp, recvp, c, op.dtype, op.redop, comm, nullptr);
      break;
    case kAlltoAll:
      o.code = tribAlltoAll(sendp, recvp, c, op.dtype, comm, nullptr);
      break;
    case kBarrier:
      o.code = tribBarrier(comm, nullptr);
      return o;
    case kGather:
      o.code = tribGather(sendp, recvp, c, op.dtype, op.root, comm, nullptr);
      break;
    case kCount:
      break;
  }
  if (o.code != tribSuccess) return o;
  auto expect = [&](size_t i, int32_t v) {
    if (o.wrong.empty() && !res.is(resOffset + i, v)) {
      char msg[160];
      std::snprintf(msg, sizeof msg, "element %zu of %zu is not %" PRId32, i, res.size(), v);
      o.wrong = msg;
    }
  };
  switch (op.coll) {
    case kAllReduce:
      for (size_t i = 0; i < c; ++i) expect(i, reduced(op.redop, n, k, i));
      break;
    case kBroadcast:
      for (size_t i = 0; i < c; ++i) expect(i, value(op.root, k, i));
      break;
    case kReduce:
      if (rank == op.root)
        for (size_t i = 0; i < c; ++i) expect(i, reduced(op.redop, n, k, i));
      break;
    case kAllGather:
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < c; ++i) expect(r * c + i, value(r, k, i));
      break;
    case kReduceScatter:
      for (size_t i = 0; i < c; ++i) expect(i, reduced(op.redop, n, k, rank * c + i));
      break;
    case kAlltoAll:
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < c; ++i) expect(r * c + i, value(r, k, rank * 1000003 + i));
      break;
    case kGather:
      if (rank == op.root)
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < c; ++i) expect(r * c + i, value(r, k, i));
      break;
    default:
      break;
  }
  return o;
}

// Wall-clock milliseconds, comparable with the driver's `date +%s%3N`.
long long nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string oneLine(const char* s) {
  std::string m = s ? s : "";
  for (char& ch : m)
    if (ch == '\n') ch = ' ';
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t seed = 1;
  long ops = 100;
  size_t maxCount = 1 << 18;
  long abortAfterMs = -1;
  std::string untilFile;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) return std::fprintf(stderr, "trib-fault-rank: %s needs a value\n", argv[i]), 2;
    if (a == "--seed")
      seed = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--ops")
      ops = std::strtol(argv[++i], nullptr, 10);
    else if (a == "--max-count")
      maxCount = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--until-file")
      untilFile = argv[++i];
    else if (a == "--abort-after-ms")
      abortAfterMs = std::strtol(argv[++i], nullptr, 10);
    else
      return std::fprintf(stderr,
                          "usage: trib-fault-rank --seed S --ops N [--max-count C] [--abort-after-ms T] "
                          "[--until-file F]\n"),
             2;
  }
  setvbuf(stdout, nullptr, _IOLBF, 0);
  tribComm_t comm = nullptr;
  if (tribCommInitFromEnv(&comm, nullptr) != tribSuccess) {
    std::printf("RESULT rank=? status=init msg=%s\n", oneLine(tribGetLastError(nullptr)).c_str());
    return 13;
  }
  int rank = 0, n = 0;
  tribCommUserRank(comm, &rank);
  tribCommCount(comm, &n);
  std::printf("ready rank=%d nranks=%d\n", rank, n);

  std::atomic<bool> abortStarted{false};
  std::thread aborter;
  if (abortAfterMs >= 0) {
    aborter = std::thread([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(abortAfterMs));
      abortStarted = true;
      tribCommAbort(comm);
    });
  }
  std::mt19937_64 rng(seed);
  int status = 0;
  double slowest = 0;
  long k = 0;
  for (; k < ops; ++k) {
    Op op = drawOp(rng, n, maxCount);
    // `secs` times one library call: the stop flag's broadcast, then the op (the bound the driver
    // checks, TRIB_TIMEOUT, is per call; timing the two together read as a call 1.3 s late when
    // the broadcast before a timed-out op had been slow under load).
    auto t0 = Clock::now();
    Outcome o;
    bool stop = false;
    if (!untilFile.empty()) {
      // Rank 0 tells everyone whether the file exists: a checked broadcast of its own.
      int32_t flag = rank == 0 && access(untilFile.c_str(), F_OK) == 0 ? 1 : 0;
      int32_t copy = rank == 0 ? flag : -1;
      o.code = tribBroadcast(&copy, &copy, 1, tribInt32, 0, comm, nullptr);
      if (o.code == tribSuccess && copy != 0 && copy != 1)
        o.wrong = "the stop flag broadcast gave " + std::to_string(copy);
      stop = o.code == tribSuccess && copy == 1;
    }
    bool ranOp = false;
    if (o.code == tribSuccess && o.wrong.empty() && !stop) {
      slowest = std::max(slowest, std::chrono::duration<double>(Clock::now() - t0).count());
      t0 = Clock::now();
      o = runOp(comm, rank, n, static_cast<uint64_t>(k), op);
      ranOp = true;
    }
    double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    slowest = std::max(slowest, secs);
    if (stop) break;
    // A failure of the stop flag's broadcast is reported as that, not as the op it preceded.
    const char* name = ranOp ? kCollNames[op.coll] : "stopflag-broadcast";
    if (!o.wrong.empty()) {
      std::printf("RESULT at_ms=%lld rank=%d status=wrong op=%ld coll=%s count=%zu call_s=%.3f msg=%s\n",
                  nowMs(), rank, k, name, op.count, secs, o.wrong.c_str());
      status = 12;
      break;
    }
    if (o.code == tribSuccess) continue;
    std::string msg = oneLine(tribGetLastError(comm));
    if (abortStarted) {
      // Aborted: this call and every later one must say so.
      bool right = o.code == tribAborted;
      int more = 0;
      for (; right && more < 3; ++more) right = tribBarrier(comm, nullptr) == tribAborted;
      std::printf("RESULT at_ms=%lld rank=%d status=%s op=%ld coll=%s code=%s call_s=%.3f msg=%s\n", nowMs(),
                  rank, right ? "aborted" : "wrong", k, name, tribGetErrorString(o.code), secs,
                  right ? msg.c_str() : ("a call after abort did not return tribAborted: " + msg).c_str());
      status = right ? 11 : 12;
    } else {
      // An aborted code nobody asked for is as wrong as a wrong sum.
      bool right = o.code != tribAborted;
      std::printf("RESULT at_ms=%lld rank=%d status=%s op=%ld coll=%s code=%s call_s=%.3f msg=%s\n", nowMs(),
                  rank, right ? "error" : "wrong", k, name, tribGetErrorString(o.code), secs, msg.c_str());
      status = right ? 10 : 12;
    }
    break;
  }
  if (status == 0)
    std::printf("RESULT at_ms=%lld rank=%d status=ok op=%ld coll=- code=%s call_s=%.3f msg=slowest call\n",
                nowMs(), rank, k, tribGetErrorString(tribSuccess), slowest);
  if (aborter.joinable()) aborter.join();
  if (status != 0) tribCommAbort(comm);
  tribCommDestroy(comm);
  std::printf("destroyed rank=%d\n", rank);
  return status;
}
