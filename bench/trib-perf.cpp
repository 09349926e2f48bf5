// trib-perf: the all-reduce (and sibling collectives) bandwidth benchmark, with nccl-tests'
// flags, table and bandwidth conventions. Ranks are threads over the loopback transport
// (--threads N, loopback), processes spawned here (--ranks N, shm/UCX), or processes started by
// a launcher (mpirun, srun, torchrun: their environment is read). The header also reports this machine's
// memcpy bandwidth, measured here, so results can be read against what memory allows.
// --mem device runs the same calls on CUDA device buffers, each rank on its own stream, as
// nccl-tests does; -g N lets each thread drive N ranks (one device each) in a group.
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
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
#include "bench_util.hpp"
#include "bootstrap/launcher.hpp"
#include "bootstrap/store.hpp"
#include "bootstrap/unique_id.hpp"
#include "common/dtype.hpp"
#include "common/perf_pattern.hpp"
#include "cuda/cuda_api.hpp"
#include "reduce/reduce.hpp"
#include "tributary/tributary.h"

namespace {

using Clock = std::chrono::steady_clock;
using trib::Coll;
using trib::bench::call;
using trib::bench::coreRoundTripNs;
using trib::bench::intArg;
using trib::bench::numberArg;
using trib::bench::sizeArg;
constexpr const char* kProg = "trib-perf";
using trib::bench::perfKind;
using trib::bench::Shape;
using trib::bench::shapeFor;

struct Options {
  uint64_t minBytes = 8, maxBytes = 64 << 20;
  double factor = 2;
  uint64_t step = 0;
  int iters = 20, warmup = 5;
  bool check = true;
  std::string opName = "sum";
  std::string dtypeName = "float";
  int root = 0;
  int threads = 0;  // ranks as threads
  int ranks = 0;    // ranks as processes spawned here
  std::string transport;
  std::string algo;
  std::string json;
  Coll coll = Coll::AllReduce;
  bool shared = false;   // buffers from tribMemAlloc (-R 1)
  double rttNs = -1;     // core-to-core round trip measured before any rank ran; < 0: measure after
  int localRanks = 1;    // ranks of this host (device runs: the header's device map)
  bool device = false;   // --mem device: CUDA device buffers, stream-ordered calls
  int gpus = 1;          // -g: ranks per thread, each on its own device, driven in a group
  int devices = 0;       // devices the driver reports (device runs)
  int localRank = 0;     // this process's rank on its host (processes), for the device map
  bool perCall = false;  // -L 1: time every call too (min and median columns, as perftest's t_min/t_typical)
};

// The probe pins two threads to two CPUs for a few ms. While ranks run, that displaces them, and
// the scheduler may then keep two ranks on one CPU for tens of ms (8-byte all-reduce 2 us instead
// of 0.2, in 4 of 14 runs against 0 of 14 without the probe). So it runs before the ranks start
// (spawned ranks get it in this variable) or, under another launcher, after the run.
constexpr const char* kRttEnv = "TRIBPERF_CORE_RTT_NS";

// A benchmark buffer, zero-filled: heap memory, or with -R 1 tribMemAlloc's shareable memory (what
// nccl-tests' -R registers): buffers other processes of the host can map.
class Buffer {
 public:
  Buffer(size_t bytes, bool shared) {
    if (shared && bytes) {
      void* p = nullptr;
      if (tribMemAlloc(&p, bytes) != tribSuccess) {
        std::fprintf(stderr, "trib-perf: tribMemAlloc(%zu): %s\n", bytes, tribGetLastError(nullptr));
        std::exit(1);
      }
      shared_ = static_cast<char*>(p);
    } else {
      heap_.resize(bytes);
    }
  }
  ~Buffer() { tribMemFree(shared_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  char* data() { return shared_ ? shared_ : heap_.data(); }

 private:
  std::vector<char> heap_;
  char* shared_ = nullptr;
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
      "  -t, --threads N      ranks, as threads of this process (loopback) [2]\n"
      "  -N, --ranks N        ranks, as processes spawned here (shm/UCX)\n"
      "  -T, --transport T    loopback|shm|ucx (as TRIB_TRANSPORT)\n"
      "  Under mpirun/srun/torchrun (their env vars set), each process is one rank.\n"
      "  -C, --coll C         allreduce|reducescatter|allgather|broadcast|reduce|alltoall [allreduce]\n"
      "                       (alltoall: out of place only; the in-place columns say N/A)\n"
      "  -A, --algo A         force the algorithm (as TRIB_ALGO)\n"
      "  -R, --registered 0|1 buffers from tribMemAlloc (shareable; as nccl-tests' -R) [0]\n"
      "  -m, --mem host|device buffers in host or CUDA device memory (device: a stream per rank,\n"
      "                       cudaStreamSynchronize after the timed loop)   [host]\n"
      "  -g, --gpus N         ranks per thread (threads only), driven in a group (-t then defaults\n"
      "                       to 1); with --mem device each on its own GPU, more ranks than GPUs\n"
      "                       sharing them   [1]\n"
      "  -J, --json FILE      also write results as JSON\n"
      "  -L, --latency 0|1    also time each call: the fastest and the median call per size\n"
      "                       (the slowest rank's; as perftest's t_min and t_typical; host memory) [0]\n"
      "  -h, --help\n");
  std::exit(code);
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

// What a device run keeps per rank: its device, stream and buffers (allocated once, for the largest
// size: cudaFree between sizes could wait for a stream held for another rank's next call).
struct DeviceRank {
  int device = -1;
  void* stream = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
  std::vector<char> host;  // the input pattern, uploaded
  ~DeviceRank() {
    trib::cuda::streamDestroy(stream);
    trib::cuda::deviceFree(send);
    trib::cuda::deviceFree(recv);
  }
};

// The device of local rank `local` (rank l of a process: l-th device, wrapping when ranks outnumber
// devices: several ranks may share one GPU, docs/CUDA.md).
int deviceFor(const Options& o, int local) { return o.devices > 0 ? local % o.devices : 0; }

// One thread's part of the benchmark: the ranks it drives (one, or -g of them in a group); the
// thread with rank 0 prints. Timings and errors are combined across ranks with the library's own
// collectives, so threads and processes share this code.
struct Bench {
  const Options& o;
  tribDataType_t dtype;
  tribRedOp_t op;

  // Runs f(j) for each rank j this thread drives: inside a group when it drives several.
  template <class F>
  static tribResult_t each(size_t ranks, F f) {
    if (ranks == 1) return f(size_t{0});
    tribResult_t first = tribGroupStart();
    for (size_t j = 0; j < ranks; ++j)
      if (tribResult_t r = f(j); r != tribSuccess && first == tribSuccess) first = r;
    tribResult_t end = tribGroupEnd();
    return first != tribSuccess ? first : end;
  }

  trib::perf::Check checkFor(int n, int rank, uint64_t count) const {
    return {perfKind(o.coll), n, rank, o.root, count, op, trib::isFloatType(dtype)};
  }
  // Output elements of `rank` at `out` (host memory) that differ from what the call must give.
  int64_t countWrong(const void* out, uint64_t outElems, int n, int rank, uint64_t count) const {
    const trib::perf::Check c = checkFor(n, rank, count);
    int64_t wrong = 0;
    for (uint64_t i = 0; i < outElems; ++i)
      wrong += trib::perf::wrong(c, i, trib::loadElement(out, i, dtype));
    return wrong;
  }

  // comms: this thread's ranks; firstLocal: the process-local index of the first (the device map).
  int run(const std::vector<tribComm_t>& comms, int firstLocal, const char* how) {
    const size_t g = comms.size();
    std::vector<int> ranks(g, 0);
    int n = 1;
    for (size_t j = 0; j < g; ++j) tribCommUserRank(comms[j], &ranks[j]);
    tribCommCount(comms[0], &n);
    const int rank = ranks[0];
    const bool print = std::find(ranks.begin(), ranks.end(), 0) != ranks.end();
    if (o.root >= n) {
      if (print) std::fprintf(stderr, "trib-perf: root %d out of range for %d ranks\n", o.root, n);
      return 2;
    }
    const size_t es = trib::dataTypeSize(dtype);
    std::vector<uint64_t> sizes;
    for (uint64_t s = o.minBytes; s <= o.maxBytes;
         s = o.step ? s + o.step : static_cast<uint64_t>(s * o.factor)) {
      if (shapeFor(o.coll, std::max<uint64_t>(s / es, 1), n).count > 0) sizes.push_back(s);
      if (s == 0) break;
    }
    FILE* json = nullptr;
    if (print) {
      double memcpyGBs = memcpyBandwidth();
      // (The core-to-core round trip: measured before the ranks started, else after the run.)
      const char* transport = std::getenv("TRIB_TRANSPORT");
      std::printf("# trib-perf (Tributary %s): %s, %d ranks as %s, transport %s, algo %s\n",
                  TRIB_VERSION_STRING, trib::collName(o.coll), n, how,
                  transport && *transport ? transport : "auto", o.algo.empty() ? "auto" : o.algo.c_str());
      std::printf(
          "# minBytes %llu maxBytes %llu step: %s warmup iters: %d iters: %d validation: %d reduce ISA: %s\n",
          static_cast<unsigned long long>(o.minBytes), static_cast<unsigned long long>(o.maxBytes),
          o.step ? (std::to_string(o.step) + " bytes").c_str()
                 : (std::to_string(o.factor) + "(factor)").c_str(),
          o.warmup, o.iters, o.check ? 1 : 0, trib::reduceIsa());
      if (o.device) {
        std::printf(
            "# buffers: CUDA device memory (cudaMalloc, --mem device), a stream per rank "
            "(cudaStreamNonBlocking); "
            "time: cudaStreamSynchronize after the timed loop\n");
        std::printf("# GPUs: %d ranks of this host on %d GPU(s) (local rank l on GPU l %% %d)%s\n",
                    o.localRanks, o.devices, o.devices,
                    o.localRanks > o.devices ? "; several ranks share a GPU (supported: docs/CUDA.md)" : "");
      } else {
        std::printf("# buffers: %s\n", o.shared ? "tribMemAlloc (shareable, -R 1)" : "heap (std::vector)");
      }
      std::printf("# memcpy bandwidth (this machine, 64 MiB, same run): %.2f GB/s\n", memcpyGBs);
      if (o.rttNs >= 0)
        std::printf("# core-to-core round trip (first two CPUs, same run): %.0f ns\n#\n", o.rttNs);
      else
        std::printf("# core-to-core round trip: measured after the run (below)\n#\n");
      // With -L each side gains the fastest and the median call (min, p50) after its #wrong.
      const int side = o.perCall ? 55 : 36;
      std::printf("#%*s%*s\n", 25 + side, "out-of-place", side, "in-place");
      std::printf("#%12s %12s %8s %6s %6s", "size", "count", "type", "redop", "root");
      for (int i = 0; i < 2; ++i) {
        std::printf(" %9s %8s %8s %6s", "time", "algbw", "busbw", "#wrong");
        if (o.perCall) std::printf(" %9s %8s", "min", "p50");
      }
      std::printf("\n#%12s %12s %8s %6s %6s", "(B)", "(elements)", "", "", "");
      for (int i = 0; i < 2; ++i) {
        std::printf(" %9s %8s %8s %6s", "(us)", "(GB/s)", "(GB/s)", "");
        if (o.perCall) std::printf(" %9s %8s", "(us)", "(us)");
      }
      std::printf("\n");
      std::fflush(stdout);
      json = o.json.empty() ? nullptr : std::fopen(o.json.c_str(), "w");
      if (json) {
        std::fprintf(json,
                     "{\"coll\":\"%s\",\"ranks\":%d,\"ranks_as\":\"%s\",\"memcpy_GBps\":%.3f,"
                     "\"shared_buffers\":%s,",
                     trib::collName(o.coll), n, how, memcpyGBs, o.shared ? "true" : "false");
        // Host runs' JSON is as it always was (no "mem": host).
        if (o.device)
          std::fprintf(json, "\"mem\":\"device\",\"ranks_per_thread\":%zu,\"gpus\":%d,", g, o.devices);
        std::fprintf(json, "\"results\":[");
      }
    }
    // Device runs: a stream and buffers per rank, sized for the largest call.
    std::vector<DeviceRank> dev(o.device ? g : 0);
    if (o.device) {
      size_t sendMax = 0, recvMax = 0;
      for (uint64_t s : sizes) {
        Shape sh = shapeFor(o.coll, std::max<uint64_t>(s / es, 1), n);
        sendMax = std::max<size_t>(sendMax, sh.inElems * es);
        recvMax = std::max<size_t>(recvMax, std::max(sh.outElems, sh.inElems) * es);
      }
      for (size_t j = 0; j < g; ++j) {
        DeviceRank& d = dev[j];
        d.device = deviceFor(o, firstLocal + static_cast<int>(j));
        trib::Status st = trib::cuda::streamCreate(d.device, &d.stream);
        if (st.ok()) st = trib::cuda::deviceAlloc(d.device, sendMax, &d.send);
        if (st.ok()) st = trib::cuda::deviceAlloc(d.device, recvMax, &d.recv);
        if (!st.ok()) {
          std::fprintf(stderr, "trib-perf: rank %d on GPU %d: %s\n", ranks[j], d.device,
                       st.message().c_str());
          return 1;
        }
        d.host.resize(sendMax);
      }
      // Every rank has its buffers before any enqueues a call: no allocation while a peer's stream is held.
      each(g, [&](size_t j) { return tribBarrier(comms[j], nullptr); });
    }
    double busSum = 0;
    int busCount = 0;
    int64_t wrongTotal = 0;
    for (size_t si = 0; si < sizes.size(); ++si) {
      Shape sh = shapeFor(o.coll, std::max<uint64_t>(sizes[si] / es, 1), n);
      std::vector<std::unique_ptr<Buffer>> send(g), recv(g);  // host runs: per rank and size, as always
      for (size_t j = 0; j < g && !o.device; ++j) {
        send[j] = std::make_unique<Buffer>(sh.inElems * es, o.shared);
        recv[j] = std::make_unique<Buffer>(std::max(sh.outElems, sh.inElems) * es, o.shared);
      }
      uint64_t bytesS = (o.coll == Coll::AllReduce || o.coll == Coll::Broadcast || o.coll == Coll::Reduce)
                            ? sh.count * es
                            : std::max(sh.inElems, sh.outElems) * es;
      bool rooted = o.coll == Coll::Broadcast || o.coll == Coll::Reduce;
      bool reducing = o.coll == Coll::AllReduce || o.coll == Coll::Reduce || o.coll == Coll::ReduceScatter;
      if (print) {
        std::printf(" %12llu %12llu %8s %6s %6d", static_cast<unsigned long long>(bytesS),
                    static_cast<unsigned long long>(bytesS / es), trib::dataTypeName(dtype),
                    reducing ? trib::redOpName(op) : "none", rooted ? o.root : -1);
        if (json) {
          std::fprintf(json, "%s{\"size\":%llu,\"count\":%llu", si ? "," : "",
                       static_cast<unsigned long long>(bytesS), static_cast<unsigned long long>(bytesS / es));
        }
      }
      for (int inPlace = 0; inPlace < 2; ++inPlace) {
        if (inPlace && o.coll == Coll::AlltoAll) {  // the library refuses it (as NCCL's send/recv)
          if (print)
            std::printf(" %9s %8s %8s %6s%s", "N/A", "N/A", "N/A", "N/A",
                        o.perCall ? "       N/A      N/A" : "");
          continue;
        }
        std::vector<char*> ins(g);
        std::vector<void*> outs(g);
        for (size_t j = 0; j < g; ++j) {
          char* sendBase = o.device ? static_cast<char*>(dev[j].send) : send[j]->data();
          char* recvBase = o.device ? static_cast<char*>(dev[j].recv) : recv[j]->data();
          outs[j] = recvBase;
          ins[j] = sendBase;
          if (inPlace) {  // NCCL's in-place layouts
            ins[j] = o.coll == Coll::AllGather ? recvBase + ranks[j] * sh.count * es : recvBase;
            if (o.coll == Coll::ReduceScatter) {
              ins[j] = recvBase;
              outs[j] = recvBase + ranks[j] * sh.count * es;
            }
          }
        }
        std::string error;
        // The input pattern, written in place (host) or uploaded (device).
        auto fill = [&] {
          for (size_t j = 0; j < g && error.empty(); ++j) {
            char* dst = o.device ? dev[j].host.data() : ins[j];
            for (uint64_t i = 0; i < sh.inElems; ++i)
              trib::storeElement(dst, i, dtype, trib::perf::inputValue(ranks[j], i, op));
            if (!o.device) continue;
            if (trib::Status st = trib::cuda::copy(ins[j], dst, sh.inElems * es, dev[j].stream); !st.ok())
              error = "uploading the input: " + st.message();
          }
        };
        auto once = [&] {
          if (!error.empty()) return;
          tribResult_t r = each(g, [&](size_t j) {
            return call(o.coll, ins[j], outs[j], sh.count, dtype, op, o.root, comms[j],
                        o.device ? dev[j].stream : nullptr);
          });
          if (r != tribSuccess) error = tribGetLastError(comms[0]);
        };
        // Device runs: waits for every stream; a call that failed in flight shows as the async error.
        auto drain = [&] {
          for (size_t j = 0; j < dev.size(); ++j) {
            trib::Status st = trib::cuda::streamSynchronize(dev[j].stream);
            if (!st.ok() && error.empty()) error = st.message();
            tribResult_t async = tribSuccess;
            if (tribCommGetAsyncError(comms[j], &async) == tribSuccess && async != tribSuccess &&
                error.empty())
              error = std::string("asynchronous error (tribCommGetAsyncError): ") + tribGetErrorString(async);
          }
        };
        auto barrier = [&] { each(g, [&](size_t j) { return tribBarrier(comms[j], nullptr); }); };
        fill();
        for (int it = 0; it < o.warmup; ++it) once();
        drain();
        barrier();
        std::vector<double> callUs(o.perCall ? o.iters : 0);
        auto t0 = Clock::now();
        if (o.perCall) {  // (a clock read per call: ~20 ns more per call than the plain loop)
          for (int it = 0; it < o.iters; ++it) {
            auto c0 = Clock::now();
            once();
            callUs[it] = std::chrono::duration<double, std::micro>(Clock::now() - c0).count();
          }
        } else {
          for (int it = 0; it < o.iters; ++it) once();
        }
        drain();
        double timeUs = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / o.iters;
        double minUs = 0, medianUs = 0;
        if (o.perCall) {
          std::sort(callUs.begin(), callUs.end());
          minUs = callUs.front();
          medianUs = callUs[callUs.size() / 2];
        }
        std::vector<int64_t> wrong(g, 0);
        if (o.check && error.empty()) {
          fill();
          barrier();
          once();
          drain();
          for (size_t j = 0; j < g && error.empty(); ++j) {
            uint64_t outElems = (o.coll == Coll::Reduce && ranks[j] != o.root) ? 0 : sh.outElems;
            if (!o.device) {
              wrong[j] = countWrong(outs[j], outElems, n, ranks[j], sh.count);
            } else if (trib::Status st =  // on the device, by a kernel: no copy back
                       trib::cuda::countMismatches(dev[j].device, dev[j].stream, outs[j], outElems, dtype,
                                                   checkFor(n, ranks[j], sh.count), &wrong[j]);
                       !st.ok()) {
              error = "checking the output on the device: " + st.message();
            }
          }
        }
        if (!error.empty()) {
          std::fprintf(stderr, "trib-perf: rank %d failed: %s\n", rank, error.c_str());
          return 1;
        }
        // The slowest rank's times (average, fastest call, median call) and everyone's errors.
        std::vector<std::array<double, 3>> stats(g, {timeUs, minUs, medianUs});
        std::vector<int64_t>& wrongs = wrong;
        if (each(g,
                 [&](size_t j) {
                   return tribAllReduce(stats[j].data(), stats[j].data(), stats[j].size(), tribFloat64,
                                        tribMax, comms[j], nullptr);
                 }) != tribSuccess ||
            each(g, [&](size_t j) {
              return tribAllReduce(&wrongs[j], &wrongs[j], 1, tribInt64, tribSum, comms[j], nullptr);
            }) != tribSuccess) {
          std::fprintf(stderr, "trib-perf: rank %d: combining results failed: %s\n", rank,
                       tribGetLastError(comms[0]));
          return 1;
        }
        const double avgUs = stats[0][0];
        double algbw = bytesS / (avgUs * 1e-6) / 1e9;
        double busbw = algbw * trib::busBandwidthFactor(o.coll, n);
        busSum += busbw;
        ++busCount;
        wrongTotal += wrongs[0];
        if (print) {
          std::printf(" %9.2f %8.3f %8.3f %6lld", avgUs, algbw, busbw,
                      o.check ? static_cast<long long>(wrongs[0]) : -1LL);
          if (o.perCall) std::printf(" %9.3f %8.3f", stats[0][1], stats[0][2]);
          if (json) {
            std::fprintf(json, ",\"%s\":{\"time_us\":%.3f,\"algbw\":%.4f,\"busbw\":%.4f,\"wrong\":%lld",
                         inPlace ? "in_place" : "out_of_place", avgUs, algbw, busbw,
                         static_cast<long long>(wrongs[0]));
            if (o.perCall) std::fprintf(json, ",\"min_us\":%.3f,\"p50_us\":%.3f", stats[0][1], stats[0][2]);
            std::fprintf(json, "}");
          }
        }
      }
      if (print) {
        std::printf("\n");
        std::fflush(stdout);
        if (json) std::fprintf(json, "}");
      }
    }
    if (print) {
      std::printf("# Out of bounds values : %lld %s\n", static_cast<long long>(wrongTotal),
                  wrongTotal ? "FAILED" : "OK");
      std::printf("# Avg bus bandwidth    : %.4f \n#\n", busCount ? busSum / busCount : 0.0);
      const double rttNs = o.rttNs >= 0 ? o.rttNs : coreRoundTripNs();
      if (o.rttNs < 0)
        std::printf("# core-to-core round trip (first two CPUs, after the run): %.0f ns\n", rttNs);
      if (json) {
        std::fprintf(json, "],\"avg_busbw\":%.4f,\"wrong\":%lld,\"core_rtt_ns\":%.0f}\n",
                     busCount ? busSum / busCount : 0.0, static_cast<long long>(wrongTotal), rttNs);
        std::fclose(json);
      }
    }
    return wrongTotal ? 1 : 0;
  }
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  bool gpusGiven = false, threadsGiven = false;
  static const option longOpts[] = {
      {"minbytes", 1, nullptr, 'b'},  {"maxbytes", 1, nullptr, 'e'},  {"stepfactor", 1, nullptr, 'f'},
      {"stepbytes", 1, nullptr, 'i'}, {"iters", 1, nullptr, 'n'},     {"warmup_iters", 1, nullptr, 'w'},
      {"check", 1, nullptr, 'c'},     {"op", 1, nullptr, 'o'},        {"datatype", 1, nullptr, 'd'},
      {"root", 1, nullptr, 'r'},      {"threads", 1, nullptr, 't'},   {"coll", 1, nullptr, 'C'},
      {"algo", 1, nullptr, 'A'},      {"json", 1, nullptr, 'J'},      {"help", 0, nullptr, 'h'},
      {"ranks", 1, nullptr, 'N'},     {"transport", 1, nullptr, 'T'}, {"registered", 1, nullptr, 'R'},
      {"mem", 1, nullptr, 'm'},       {"gpus", 1, nullptr, 'g'},      {"latency", 1, nullptr, 'L'},
      {nullptr, 0, nullptr, 0}};
  int ch;
  while ((ch = getopt_long(argc, argv, "b:e:f:i:n:w:c:o:d:r:t:N:T:C:A:J:R:m:g:L:h", longOpts, nullptr)) !=
         -1) {
    switch (ch) {
      case 'b':
        o.minBytes = sizeArg(kProg, "-b", optarg);
        break;
      case 'e':
        o.maxBytes = sizeArg(kProg, "-e", optarg);
        break;
      case 'f':
        o.factor = numberArg(kProg, "-f", optarg, 0);
        break;
      case 'i':
        o.step = sizeArg(kProg, "-i", optarg);
        break;
      case 'n':
        o.iters = static_cast<int>(intArg(kProg, "-n", optarg, 1, 1 << 30));
        break;
      case 'w':
        o.warmup = static_cast<int>(intArg(kProg, "-w", optarg, 0, 1 << 30));
        break;
      case 'c':
        o.check = intArg(kProg, "-c", optarg, 0, 1) != 0;
        break;
      case 'o':
        o.opName = optarg;
        break;
      case 'd':
        o.dtypeName = optarg;
        break;
      case 'r':
        o.root = static_cast<int>(intArg(kProg, "-r", optarg, 0, INT32_MAX));
        break;
      case 't':
        o.threads = static_cast<int>(intArg(kProg, "-t", optarg, 1, 4096));
        threadsGiven = true;
        break;
      case 'N':
        o.ranks = static_cast<int>(intArg(kProg, "-N", optarg, 1, 4096));
        break;
      case 'T':
        o.transport = optarg;
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
      case 'R':
        o.shared = intArg(kProg, "-R", optarg, 0, 1) != 0;
        break;
      case 'm':
        if (std::strcmp(optarg, "host") != 0 && std::strcmp(optarg, "device") != 0) {
          std::fprintf(stderr, "trib-perf: unknown memory kind '%s' (host, device)\n", optarg);
          return 2;
        }
        o.device = std::strcmp(optarg, "device") == 0;
        break;
      case 'L':
        o.perCall = intArg(kProg, "-L", optarg, 0, 1) != 0;
        break;
      case 'g':
        o.gpus = static_cast<int>(intArg(kProg, "-g", optarg, 1, 4096));
        gpusGiven = true;
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
  const bool underLauncher = trib::bench::underLauncher();
  if (gpusGiven && (o.gpus < 1 || o.ranks > 0 || underLauncher)) {
    std::fprintf(stderr,
                 "trib-perf: -g N (N >= 1 ranks per thread, driven in a group) needs ranks as threads (-t), "
                 "not processes\n");
    return 2;
  }
  if (o.device && o.shared) {
    std::fprintf(stderr,
                 "trib-perf: -R 1 (tribMemAlloc's host memory) and --mem device exclude each other\n");
    return 2;
  }
  // Usage errors first (exit 2), whatever the build: then what this build cannot do (exit 1).
  if (o.perCall && o.device) {
    std::fprintf(stderr,
                 "trib-perf: --latency times each call on the host, and a device call returns before it "
                 "completes: use it with --mem host\n");
    return 2;
  }
  if (o.device && !trib::cuda::built()) {
    std::fprintf(stderr,
                 "trib-perf: --mem device: this build has no CUDA (configure with nvcc present, "
                 "TRIB_WITH_CUDA=AUTO or ON)\n");
    return 1;
  }
  if (!o.transport.empty()) setenv("TRIB_TRANSPORT", o.transport.c_str(), 1);
  if (!o.algo.empty()) setenv("TRIB_ALGO", o.algo.c_str(), 1);
  // (The spawning parent leaves CUDA alone: a process that initialised it cannot fork CUDA users.)
  if (o.ranks > 0 && !underLauncher) {
    setenv(kRttEnv, std::to_string(coreRoundTripNs()).c_str(), 1);  // the ranks' header reports it
    return trib::bench::spawnRanks("trib-perf", o.ranks, argv);
  }
  if (o.threads == 0 && !underLauncher) o.threads = gpusGiven && !threadsGiven ? 1 : 2;
  if (o.device) {
    // Fails fast, before any communicator, where there is no driver or device.
    if (trib::Status st = trib::cuda::deviceCount(&o.devices); !st.ok()) {
      std::fprintf(stderr, "trib-perf: --mem device: %s\n", st.message().c_str());
      return 1;
    }
    o.localRanks = o.threads * o.gpus;
    if (underLauncher) {
      trib::LaunchInfo info;
      if (trib::detectLauncher(&info).ok()) {
        o.localRank = std::max(info.localRank, 0);
        o.localRanks = std::max(info.localSize, 1);
      }
    }
  }
  if (const char* rtt = std::getenv(kRttEnv)) o.rttNs = std::atof(rtt);  // spawned by trib-perf
  if (!underLauncher) o.rttNs = coreRoundTripNs();                       // threads: none run yet
  if (o.iters < 1 || o.warmup < 0 || o.minBytes > o.maxBytes || (o.step == 0 && o.factor <= 1) ||
      o.root < 0) {
    std::fprintf(
        stderr,
        "trib-perf: invalid options (need iters >= 1, minbytes <= maxbytes, stepfactor > 1 or stepbytes > "
        "0, root >= 0)\n");
    return 2;
  }
  Bench bench{o, dtype, op};
  if (underLauncher) {
    // One rank per process, as the launcher started them. With device buffers its GPU is current
    // before init, as in an NCCL program: the CUDA-IPC windows connect only between ranks that had
    // a CUDA context at init (docs/CUDA.md).
    if (o.device) {
      if (trib::Status st = trib::cuda::setDevice(deviceFor(o, o.localRank)); !st.ok()) {
        std::fprintf(stderr, "trib-perf: --mem device: %s\n", st.message().c_str());
        return 1;
      }
    }
    tribComm_t comm = nullptr;
    if (tribCommInitFromEnv(&comm, nullptr) != tribSuccess) {
      std::fprintf(stderr, "trib-perf: init from the launcher's environment failed: %s\n",
                   tribGetLastError(nullptr));
      return 1;
    }
    std::vector<tribComm_t> one{comm};
    int rc = bench.run(one, o.localRank, "processes");
    tribCommDestroy(comm);
    return rc;
  }
  const int g = o.gpus, n = o.threads * g;
  std::vector<tribComm_t> comms(std::max(n, 0));
  if (o.threads < 1 || tribCommInitAll(comms.data(), n, nullptr) != tribSuccess) {
    std::fprintf(stderr, "trib-perf: init of %d thread ranks failed: %s\n", n, tribGetLastError(nullptr));
    return 1;
  }
  const std::string how = g == 1 ? "threads" : "threads (" + std::to_string(g) + " per thread, in a group)";
  std::vector<int> rcs(o.threads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < o.threads; ++t)
    threads.emplace_back([&, t] {
      std::vector<tribComm_t> mine(comms.begin() + t * g, comms.begin() + (t + 1) * g);
      rcs[t] = bench.run(mine, t * g, how.c_str());
    });
  for (auto& t : threads) t.join();
  for (tribComm_t c : comms) tribCommDestroy(c);
  return *std::max_element(rcs.begin(), rcs.end());
}
