// trib-perf: the all-reduce (and sibling collectives) bandwidth benchmark, with nccl-tests'
// flags, table and bandwidth conventions. Ranks are threads over the loopback transport
// (--threads N). The header also reports this machine's memcpy bandwidth, measured here, so
// results can be read against what memory allows.
#include <getopt.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "algo/schedule.hpp"
#include "common/dtype.hpp"
#include "reduce/reduce.hpp"
#include "tributary/tributary.h"

namespace {

using Clock = std::chrono::steady_clock;
using trib::Coll;

struct Options {
  uint64_t minBytes = 8, maxBytes = 64 << 20;
  double factor = 2;
  uint64_t step = 0;
  int iters = 20, warmup = 5;
  bool check = true;
  std::string opName = "sum";
  std::string dtypeName = "float";
  int root = 0;
  int threads = 2;
  std::string algo;
  std::string json;
  Coll coll = Coll::AllReduce;
};

[[noreturn]] void usage(int code) {
  std::printf(
      "usage: trib-perf [options]\n"
      "  -b, --minbytes N     smallest size (bytes; K/M/G suffixes)   [8]\n"
      "  -e, --maxbytes N     largest size                           [64M]\n"
      "  -f, --stepfactor F   multiply the size by F each step        [2]\n"
      "  -i, --stepbytes N    add N bytes each step (instead of -f)\n"
      "  -n, --iters N        timed iterations per size               [20]\n"
      "  -w, --warmup_iters N untimed iterations first                [5]\n"
      "  -c, --check 0|1      check results (#wrong column)           [1]\n"
      "  -o, --op OP          sum|prod|min|max|avg                    [sum]\n"
      "  -d, --datatype T     float|half|bf16|double|int32|...        [float]\n"
      "  -r, --root R         root of rooted collectives              [0]\n"
      "  -t, --threads N      ranks, as threads of this process       [2]\n"
      "  -C, --coll C         allreduce|reducescatter|allgather|broadcast|reduce|alltoall [allreduce]\n"
      "  -A, --algo A         force the algorithm (as TRIB_ALGO)\n"
      "  -J, --json FILE      also write results as JSON\n"
      "  -h, --help\n");
  std::exit(code);
}

uint64_t parseSize(const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  switch (end && *end ? *end : ' ') {
    case 'K':
    case 'k':
      v *= 1024;
      break;
    case 'M':
    case 'm':
      v *= 1024 * 1024;
      break;
    case 'G':
    case 'g':
      v *= 1024.0 * 1024 * 1024;
      break;
    default:
      break;
  }
  return static_cast<uint64_t>(v);
}

double busFactor(Coll c, int n) {
  switch (c) {
    case Coll::AllReduce:
      return 2.0 * (n - 1) / n;
    case Coll::ReduceScatter:
    case Coll::AllGather:
    case Coll::AlltoAll:
      return static_cast<double>(n - 1) / n;
    default:
      return 1.0;
  }
}

// nccl-tests' S: the bytes of the full array (the per-rank count for allreduce, the total for
// allgather/reducescatter).
struct Shape {
  uint64_t count;  // the count argument of the call
  uint64_t inElems, outElems;
};
Shape shapeFor(Coll c, uint64_t elems, int n) {
  switch (c) {
    case Coll::AllGather:
      return {elems / n, elems / n, (elems / n) * n};
    case Coll::ReduceScatter:
      return {elems / n, (elems / n) * n, elems / n};
    case Coll::AlltoAll:
      return {elems / n, (elems / n) * n, (elems / n) * n};
    default:
      return {elems, elems, elems};
  }
}

double memcpyBandwidth() {
  const size_t bytes = 64 << 20;
  std::vector<char> a(bytes, 1), b(bytes, 2);
  double best = 1e30;
  for (int i = 0; i < 5; ++i) {
    auto t0 = Clock::now();
    std::memcpy(b.data(), a.data(), bytes);
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  // Bytes moved as nccl-tests counts copies: read + write would be 2x; report the copy rate.
  return bytes / best / 1e9;
}

tribResult_t call(Coll c, const void* s, void* r, uint64_t count, tribDataType_t dt, tribRedOp_t op, int root,
                  tribComm_t comm) {
  switch (c) {
    case Coll::AllReduce:
      return tribAllReduce(s, r, count, dt, op, comm, nullptr);
    case Coll::ReduceScatter:
      return tribReduceScatter(s, r, count, dt, op, comm, nullptr);
    case Coll::AllGather:
      return tribAllGather(s, r, count, dt, comm, nullptr);
    case Coll::Broadcast:
      return tribBroadcast(s, r, count, dt, root, comm, nullptr);
    case Coll::Reduce:
      return tribReduce(s, r, count, dt, op, root, comm, nullptr);
    case Coll::AlltoAll:
      return tribAlltoAll(s, r, count, dt, comm, nullptr);
    default:
      return tribNotSupported;
  }
}

// Input value of element i on rank r: small integers, so every result is exact.
double inputValue(int r, uint64_t i, tribRedOp_t op) {
  if (op == tribProd) return ((r + i) % 7 == 0) ? 2.0 : 1.0;
  return static_cast<double>((r * 3 + i) % 5);
}

void store(void* base, uint64_t i, tribDataType_t t, double v) {
  char* p = static_cast<char*>(base) + i * trib::dataTypeSize(t);
  switch (t) {
    case tribInt8:
    case tribUint8:
      *reinterpret_cast<int8_t*>(p) = static_cast<int8_t>(v);
      break;
    case tribInt32:
    case tribUint32:
      *reinterpret_cast<int32_t*>(p) = static_cast<int32_t>(v);
      break;
    case tribInt64:
    case tribUint64:
      *reinterpret_cast<int64_t*>(p) = static_cast<int64_t>(v);
      break;
    case tribFloat16:
      *reinterpret_cast<uint16_t*>(p) = trib::floatToHalf(static_cast<float>(v));
      break;
    case tribBfloat16:
      *reinterpret_cast<uint16_t*>(p) = trib::floatToBf16(static_cast<float>(v));
      break;
    case tribFloat32:
      *reinterpret_cast<float*>(p) = static_cast<float>(v);
      break;
    case tribFloat64:
      *reinterpret_cast<double*>(p) = v;
      break;
    case tribFp8E4M3:
      *reinterpret_cast<uint8_t*>(p) = trib::floatToFp8e4m3(static_cast<float>(v));
      break;
    case tribFp8E5M2:
      *reinterpret_cast<uint8_t*>(p) = trib::floatToFp8e5m2(static_cast<float>(v));
      break;
    default:
      break;
  }
}

double load(const void* base, uint64_t i, tribDataType_t t) {
  const char* p = static_cast<const char*>(base) + i * trib::dataTypeSize(t);
  switch (t) {
    case tribInt8:
      return *reinterpret_cast<const int8_t*>(p);
    case tribUint8:
      return *reinterpret_cast<const uint8_t*>(p);
    case tribInt32:
      return *reinterpret_cast<const int32_t*>(p);
    case tribUint32:
      return *reinterpret_cast<const uint32_t*>(p);
    case tribInt64:
      return static_cast<double>(*reinterpret_cast<const int64_t*>(p));
    case tribUint64:
      return static_cast<double>(*reinterpret_cast<const uint64_t*>(p));
    case tribFloat16:
      return trib::halfToFloat(*reinterpret_cast<const uint16_t*>(p));
    case tribBfloat16:
      return trib::bf16ToFloat(*reinterpret_cast<const uint16_t*>(p));
    case tribFloat32:
      return *reinterpret_cast<const float*>(p);
    case tribFloat64:
      return *reinterpret_cast<const double*>(p);
    case tribFp8E4M3:
      return trib::fp8e4m3ToFloat(*reinterpret_cast<const uint8_t*>(p));
    case tribFp8E5M2:
      return trib::fp8e5m2ToFloat(*reinterpret_cast<const uint8_t*>(p));
    default:
      return NAN;
  }
}

double reducedValue(int n, uint64_t i, tribRedOp_t op, tribDataType_t t) {
  double acc = inputValue(0, i, op);
  for (int r = 1; r < n; ++r) {
    double v = inputValue(r, i, op);
    acc = op == tribProd  ? acc * v
          : op == tribMin ? std::min(acc, v)
          : op == tribMax ? std::max(acc, v)
                          : acc + v;
  }
  if (op == tribAvg) acc = trib::isFloatType(t) ? acc / n : std::trunc(acc / n);
  return acc;
}

// Expected output element i on rank `rank` (NaN = not defined there).
double expected(Coll c, int n, int rank, int root, uint64_t count, uint64_t i, tribRedOp_t op,
                tribDataType_t t) {
  switch (c) {
    case Coll::AllReduce:
      return reducedValue(n, i, op, t);
    case Coll::Reduce:
      return rank == root ? reducedValue(n, i, op, t) : NAN;
    case Coll::ReduceScatter:
      return reducedValue(n, rank * count + i, op, t);
    case Coll::AllGather:
      return inputValue(static_cast<int>(i / count), i % count, op);
    case Coll::Broadcast:
      return inputValue(root, i, op);
    case Coll::AlltoAll:
      return inputValue(static_cast<int>(i / count), rank * count + i % count, op);
    default:
      return NAN;
  }
}

struct Row {
  double timeUs = 0;
  long wrong = 0;
};

struct RankResult {
  std::vector<Row> outOfPlace, inPlace;
  std::string error;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  static const option longOpts[] = {
      {"minbytes", 1, nullptr, 'b'},  {"maxbytes", 1, nullptr, 'e'}, {"stepfactor", 1, nullptr, 'f'},
      {"stepbytes", 1, nullptr, 'i'}, {"iters", 1, nullptr, 'n'},    {"warmup_iters", 1, nullptr, 'w'},
      {"check", 1, nullptr, 'c'},     {"op", 1, nullptr, 'o'},       {"datatype", 1, nullptr, 'd'},
      {"root", 1, nullptr, 'r'},      {"threads", 1, nullptr, 't'},  {"coll", 1, nullptr, 'C'},
      {"algo", 1, nullptr, 'A'},      {"json", 1, nullptr, 'J'},     {"help", 0, nullptr, 'h'},
      {nullptr, 0, nullptr, 0}};
  int ch;
  while ((ch = getopt_long(argc, argv, "b:e:f:i:n:w:c:o:d:r:t:C:A:J:h", longOpts, nullptr)) != -1) {
    switch (ch) {
      case 'b':
        o.minBytes = parseSize(optarg);
        break;
      case 'e':
        o.maxBytes = parseSize(optarg);
        break;
      case 'f':
        o.factor = std::atof(optarg);
        break;
      case 'i':
        o.step = parseSize(optarg);
        break;
      case 'n':
        o.iters = std::atoi(optarg);
        break;
      case 'w':
        o.warmup = std::atoi(optarg);
        break;
      case 'c':
        o.check = std::atoi(optarg) != 0;
        break;
      case 'o':
        o.opName = optarg;
        break;
      case 'd':
        o.dtypeName = optarg;
        break;
      case 'r':
        o.root = std::atoi(optarg);
        break;
      case 't':
        o.threads = std::atoi(optarg);
        break;
      case 'C':
        if (!trib::parseColl(optarg, &o.coll)) {
          std::fprintf(stderr, "trib-perf: unknown collective '%s'\n", optarg);
          return 2;
        }
        break;
      case 'A':
        o.algo = optarg;
        break;
      case 'J':
        o.json = optarg;
        break;
      case 'h':
        usage(0);
      default:
        usage(2);
    }
  }
  tribDataType_t dtype;
  tribRedOp_t op;
  if (!trib::parseDataType(o.dtypeName.c_str(), &dtype)) {
    std::fprintf(stderr, "trib-perf: unknown datatype '%s'\n", o.dtypeName.c_str());
    return 2;
  }
  if (!trib::parseRedOp(o.opName.c_str(), &op)) {
    std::fprintf(stderr, "trib-perf: unknown op '%s' (sum, prod, min, max, avg)\n", o.opName.c_str());
    return 2;
  }
  const int n = o.threads;
  if (n < 1 || o.iters < 1 || o.warmup < 0 || o.minBytes > o.maxBytes || (o.step == 0 && o.factor <= 1) ||
      o.root < 0 || o.root >= n) {
    std::fprintf(stderr,
                 "trib-perf: invalid options (need threads >= 1, iters >= 1, minbytes <= maxbytes, "
                 "stepfactor > 1 or stepbytes > 0, 0 <= root < threads)\n");
    return 2;
  }
  if (!o.algo.empty()) setenv("TRIB_ALGO", o.algo.c_str(), 1);

  const size_t es = trib::dataTypeSize(dtype);
  std::vector<uint64_t> sizes;
  for (uint64_t s = o.minBytes; s <= o.maxBytes;
       s = o.step ? s + o.step : static_cast<uint64_t>(s * o.factor)) {
    uint64_t elems = std::max<uint64_t>(s / es, 1);
    Shape sh = shapeFor(o.coll, elems, n);
    if (sh.count == 0) continue;
    sizes.push_back(s);
    if (s == 0) break;
  }

  double memcpyGBs = memcpyBandwidth();
  std::printf("# trib-perf (Tributary %s): %s, %d ranks as threads, transport loopback, algo %s\n",
              TRIB_VERSION_STRING, trib::collName(o.coll), n, o.algo.empty() ? "auto" : o.algo.c_str());
  std::printf(
      "# minBytes %llu maxBytes %llu step: %s warmup iters: %d iters: %d validation: %d reduce ISA: %s\n",
      static_cast<unsigned long long>(o.minBytes), static_cast<unsigned long long>(o.maxBytes),
      o.step ? (std::to_string(o.step) + " bytes").c_str() : (std::to_string(o.factor) + "(factor)").c_str(),
      o.warmup, o.iters, o.check ? 1 : 0, trib::reduceIsa());
  std::printf("# memcpy bandwidth (this machine, 64 MiB, same run): %.2f GB/s\n#\n", memcpyGBs);

  std::vector<tribComm_t> comms(n);
  if (tribCommInitAll(comms.data(), n, nullptr) != tribSuccess) {
    std::fprintf(stderr, "trib-perf: init failed: %s\n", tribGetLastError(nullptr));
    return 1;
  }
  std::vector<RankResult> results(n);
  std::barrier sync(n);
  auto rankBody = [&](int rank) {
    RankResult& res = results[rank];
    tribComm_t comm = comms[rank];
    for (uint64_t bytes : sizes) {
      Shape sh = shapeFor(o.coll, std::max<uint64_t>(bytes / es, 1), n);
      std::vector<char> send(sh.inElems * es), recv(std::max(sh.outElems, sh.inElems) * es);
      for (int inPlace = 0; inPlace < 2; ++inPlace) {
        void* out = recv.data();
        const void* in = send.data();
        char* inBuf = send.data();
        if (inPlace) {
          // NCCL's in-place layouts.
          inBuf = o.coll == Coll::AllGather ? recv.data() + rank * sh.count * es : recv.data();
          in = inBuf;
          if (o.coll == Coll::ReduceScatter) out = recv.data() + rank * sh.count * es;
        }
        for (uint64_t i = 0; i < sh.inElems; ++i) store(inBuf, i, dtype, inputValue(rank, i, op));
        Row row;
        for (int it = 0; it < o.warmup && res.error.empty(); ++it) {
          if (call(o.coll, in, out, sh.count, dtype, op, o.root, comm) != tribSuccess)
            res.error = tribGetLastError(nullptr);
        }
        sync.arrive_and_wait();
        auto t0 = Clock::now();
        for (int it = 0; it < o.iters && res.error.empty(); ++it) {
          if (call(o.coll, in, out, sh.count, dtype, op, o.root, comm) != tribSuccess)
            res.error = tribGetLastError(nullptr);
        }
        row.timeUs = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / o.iters;
        sync.arrive_and_wait();
        if (o.check && res.error.empty()) {
          // One more call on fresh inputs, then compare every element.
          for (uint64_t i = 0; i < sh.inElems; ++i) store(inBuf, i, dtype, inputValue(rank, i, op));
          sync.arrive_and_wait();
          if (call(o.coll, in, out, sh.count, dtype, op, o.root, comm) != tribSuccess)
            res.error = tribGetLastError(nullptr);
          uint64_t outElems = (o.coll == Coll::Reduce && rank != o.root) ? 0 : sh.outElems;
          for (uint64_t i = 0; i < outElems; ++i) {
            double want = expected(o.coll, n, rank, o.root, sh.count, i, op, dtype);
            if (std::isnan(want)) continue;
            double got = load(out, i, dtype);
            double tol =
                op == tribAvg && trib::isFloatType(dtype) ? 1e-2 * std::max(1.0, std::fabs(want)) : 0;
            if (!(std::fabs(got - want) <= tol)) ++row.wrong;
          }
        }
        (inPlace ? res.inPlace : res.outOfPlace).push_back(row);
        sync.arrive_and_wait();
      }
    }
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back(rankBody, r);
  for (auto& t : threads) t.join();

  for (int r = 0; r < n; ++r) {
    if (!results[r].error.empty()) {
      std::fprintf(stderr, "trib-perf: rank %d failed: %s\n", r, results[r].error.c_str());
      return 1;
    }
  }
  std::printf("#%61s%36s\n", "out-of-place", "in-place");
  std::printf("#%12s %12s %8s %6s %6s %9s %8s %8s %6s %9s %8s %8s %6s\n", "size", "count", "type", "redop",
              "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
  std::printf("#%12s %12s %8s %6s %6s %9s %8s %8s %6s %9s %8s %8s %6s\n", "(B)", "(elements)", "", "", "",
              "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  double busSum = 0;
  int busCount = 0;
  long wrongTotal = 0;
  FILE* json = o.json.empty() ? nullptr : std::fopen(o.json.c_str(), "w");
  if (json)
    std::fprintf(json, "{\"coll\":\"%s\",\"ranks\":%d,\"memcpy_GBps\":%.3f,\"results\":[",
                 trib::collName(o.coll), n, memcpyGBs);
  for (size_t s = 0; s < sizes.size(); ++s) {
    Shape sh = shapeFor(o.coll, std::max<uint64_t>(sizes[s] / es, 1), n);
    uint64_t bytesS = std::max(sh.inElems, sh.outElems) * es;
    if (o.coll == Coll::AllReduce || o.coll == Coll::Broadcast || o.coll == Coll::Reduce)
      bytesS = sh.count * es;
    bool rooted = o.coll == Coll::Broadcast || o.coll == Coll::Reduce;
    bool reducing = o.coll == Coll::AllReduce || o.coll == Coll::Reduce || o.coll == Coll::ReduceScatter;
    std::printf(" %12llu %12llu %8s %6s %6d", static_cast<unsigned long long>(bytesS),
                static_cast<unsigned long long>(bytesS / es), trib::dataTypeName(dtype),
                reducing ? trib::redOpName(op) : "none", rooted ? o.root : -1);
    if (json)
      std::fprintf(json, "%s{\"size\":%llu,\"count\":%llu", s ? "," : "",
                   static_cast<unsigned long long>(bytesS), static_cast<unsigned long long>(bytesS / es));
    for (int inPlace = 0; inPlace < 2; ++inPlace) {
      double t = 0;
      long wrong = 0;
      for (int r = 0; r < n; ++r) {
        const Row& row = (inPlace ? results[r].inPlace : results[r].outOfPlace)[s];
        t = std::max(t, row.timeUs);
        wrong += row.wrong;
      }
      double algbw = bytesS / (t * 1e-6) / 1e9;
      double busbw = algbw * busFactor(o.coll, n);
      busSum += busbw;
      ++busCount;
      wrongTotal += wrong;
      std::printf(" %9.2f %8.3f %8.3f %6ld", t, algbw, busbw, o.check ? wrong : -1L);
      if (json)
        std::fprintf(json, ",\"%s\":{\"time_us\":%.3f,\"algbw\":%.4f,\"busbw\":%.4f,\"wrong\":%ld}",
                     inPlace ? "in_place" : "out_of_place", t, algbw, busbw, wrong);
    }
    std::printf("\n");
    if (json) std::fprintf(json, "}");
  }
  std::printf("# Out of bounds values : %ld %s\n", wrongTotal, wrongTotal ? "FAILED" : "OK");
  std::printf("# Avg bus bandwidth    : %.4f \n#\n", busCount ? busSum / busCount : 0.0);
  if (json) {
    std::fprintf(json, "],\"avg_busbw\":%.4f,\"wrong\":%ld}\n", busCount ? busSum / busCount : 0.0,
                 wrongTotal);
    std::fclose(json);
  }
  for (tribComm_t c : comms) tribCommDestroy(c);
  return wrongTotal ? 1 : 0;
}
