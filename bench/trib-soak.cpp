// trib-soak: random collectives for a while, every result checked, while the process's resident
// memory, file descriptors, mappings and threads are watched; then communicators created and
// destroyed many times (tribCommInitRank with a fresh unique id, and tribCommSplit), watching the
// same counts. It exits 1 on any wrong element, failed call, or growth (docs/RELIABILITY.md).
//
// Every rank draws the same sequence of calls from one seed: collective, dtype, op, size (0 bytes to
// --max-bytes, log-uniform), root, in place or not. Inputs are common/perf_pattern.hpp's small
// integers, so every result is exact (fp8 gets only the ops whose results it holds exactly).
#include <dirent.h>
#include <getopt.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "common/dtype.hpp"
#include "core/comm.hpp"
#include "exec/scratch_pool.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using trib::Coll;

struct Options {
  int ranks = 4;
  double seconds = 1800;
  uint64_t maxBytes = 64 << 20;
  int churn = 1000;
  uint64_t seed = 1;
  std::string json;
};

[[noreturn]] void usage(int code) {
  std::fprintf(code ? stderr : stdout,
               "usage: trib-soak [options]   (random checked collectives, then communicator churn)\n"
               "  -N, --ranks N        ranks, as processes spawned here (or under a launcher)  [4]\n"
               "  -s, --seconds S      how long the random collectives run                       [1800]\n"
               "  -e, --max-bytes B    largest call, bytes per rank (K/M/G suffixes)             [64M]\n"
               "  -c, --churn K        communicators created and destroyed after that            [1000]\n"
               "  -S, --seed X         the calls' random sequence                                 [1]\n"
               "  -J, --json FILE      also write the summary as JSON (rank 0)\n"
               "  -h, --help\n");
  std::exit(code);
}

// What the process holds now: resident KiB, open descriptors, mappings, threads.
struct Resources {
  double rssKiB = 0, fds = 0, maps = 0, threads = 0;
};
double countEntries(const char* dir) {
  DIR* d = opendir(dir);
  if (!d) return -1;
  double n = 0;
  while (const dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n - (std::strcmp(dir, "/proc/self/fd") == 0);  // the descriptor opendir holds
}
Resources resourcesNow() {
  Resources r;
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  r.rssKiB = static_cast<double>(resident) * sysconf(_SC_PAGESIZE) / 1024;
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) ++r.maps;
  r.fds = countEntries("/proc/self/fd");
  r.threads = countEntries("/proc/self/task");
  return r;
}

// Least-squares slope of y over x.
double slope(const std::vector<double>& x, const std::vector<double>& y) {
  const size_t n = x.size();
  if (n < 2) return 0;
  double mx = 0, my = 0;
  for (size_t i = 0; i < n; ++i) mx += x[i] / n, my += y[i] / n;
  double sxy = 0, sxx = 0;
  for (size_t i = 0; i < n; ++i) sxy += (x[i] - mx) * (y[i] - my), sxx += (x[i] - mx) * (x[i] - mx);
  return sxx > 0 ? sxy / sxx : 0;
}

// One random call, the same on every rank.
struct Call {
  Coll coll;
  tribDataType_t dtype;
  tribRedOp_t op;
  uint64_t elems;  // nccl-tests' S in elements (shapeFor)
  int root;
  bool inPlace;
};

// Whether `op` on `dt` gives exact results for the pattern's inputs (0..4, prod of 1s and 2s) on n
// ranks: fp8 holds few integers exactly (E4M3 up to 16, E5M2 up to 8).
bool exact(tribDataType_t dt, tribRedOp_t op, int n) {
  if (op == tribMin || op == tribMax) return true;
  const double largest = op == tribProd ? std::ldexp(1.0, n) : 4.0 * n;
  if (dt == tribFp8E4M3) return largest <= 16;
  if (dt == tribFp8E5M2) return largest <= 8;
  return true;
}

Call drawCall(std::mt19937_64& rng, int n, uint64_t maxBytes) {
  static const Coll kColls[] = {Coll::AllReduce, Coll::Reduce,        Coll::Broadcast,
                                Coll::AllGather, Coll::ReduceScatter, Coll::AlltoAll};
  Call c{};
  c.coll = kColls[rng() % std::size(kColls)];
  do {
    c.dtype = static_cast<tribDataType_t>(rng() % tribNumTypes);
    c.op = static_cast<tribRedOp_t>(rng() % tribNumOps);
  } while (!exact(c.dtype, c.op, n));
  const size_t es = trib::dataTypeSize(c.dtype);
  // Log-uniform from one element to maxBytes, and now and then an empty call.
  const double maxLog = std::log2(std::max<double>(static_cast<double>(maxBytes), es));
  const uint64_t bytes =
      rng() % 32 == 0 ? 0 : static_cast<uint64_t>(std::exp2(maxLog * (rng() % 4096) / 4095.0));
  c.elems = bytes / es;
  c.root = static_cast<int>(rng() % n);
  c.inPlace = rng() % 2 && c.coll != Coll::AlltoAll;  // in-place alltoall is refused (tributary.h)
  return c;
}

struct Totals {
  double calls = 0, bytes = 0, wrong = 0, failed = 0;
};

// Runs `c` once on this rank and counts the output elements that differ from the pattern's.
bool runCall(tribComm_t comm, int n, int rank, const Call& c, Totals* t) {
  const size_t es = trib::dataTypeSize(c.dtype);
  const trib::bench::Shape sh = trib::bench::shapeFor(c.coll, c.elems, n);
  std::vector<char> send(sh.inElems * es), recv(std::max(sh.inElems, sh.outElems) * es);
  char* in = send.data();
  char* out = recv.data();
  if (c.inPlace) {  // NCCL's in-place layouts (as trib-perf)
    in = c.coll == Coll::AllGather ? out + rank * sh.count * es : out;
    if (c.coll == Coll::ReduceScatter) out = recv.data() + rank * sh.count * es;
  }
  const trib::perf::Check check{trib::bench::perfKind(c.coll), n, rank, c.root, sh.count, c.op,
                                trib::isFloatType(c.dtype)};
  for (uint64_t i = 0; i < sh.inElems; ++i)
    trib::storeElement(in, i, c.dtype, trib::perf::inputValue(rank, i, c.op));
  const tribResult_t r = trib::bench::call(c.coll, in, out, sh.count, c.dtype, c.op, c.root, comm, nullptr);
  t->calls += 1;
  t->bytes += static_cast<double>(sh.inElems * es);
  if (r != tribSuccess) {
    std::fprintf(stderr, "trib-soak: rank %d: %s of %llu x %s (%s, root %d, %s) failed: %s\n", rank,
                 trib::collName(c.coll), static_cast<unsigned long long>(sh.count),
                 trib::dataTypeName(c.dtype), trib::redOpName(c.op), c.root,
                 c.inPlace ? "in place" : "out of place", tribGetLastError(comm));
    t->failed += 1;
    return false;
  }
  const uint64_t outElems = c.coll == Coll::Reduce && rank != c.root ? 0 : sh.outElems;
  uint64_t wrong = 0;
  for (uint64_t i = 0; i < outElems; ++i)
    wrong += trib::perf::wrong(check, i, trib::loadElement(out, i, c.dtype));
  if (wrong) {
    std::fprintf(stderr, "trib-soak: rank %d: %s of %llu x %s (%s, root %d, %s): %llu wrong elements\n", rank,
                 trib::collName(c.coll), static_cast<unsigned long long>(sh.count),
                 trib::dataTypeName(c.dtype), trib::redOpName(c.op), c.root,
                 c.inPlace ? "in place" : "out of place", static_cast<unsigned long long>(wrong));
  }
  t->wrong += static_cast<double>(wrong);
  return true;
}

// Sums (or maxes) doubles over the ranks, in place.
bool reduceAll(tribComm_t comm, double* v, size_t count, tribRedOp_t op) {
  return tribAllReduce(v, v, count, tribFloat64, op, comm, nullptr) == tribSuccess;
}

// The churn: communicators made and destroyed, each used once; the counts are sampled after every one.
struct Churn {
  std::vector<Resources> samples;
  double failed = 0;
};
Churn churn(tribComm_t comm, int n, int rank, int count) {
  Churn ch;
  for (int k = 0; k < count; ++k) {
    tribComm_t c = nullptr;
    tribResult_t r;
    if (k % 2 == 0) {  // a whole new communicator: store, transports, windows
      tribUniqueId id;
      std::memset(&id, 0, sizeof id);
      if (rank == 0 && tribGetUniqueId(&id) != tribSuccess) std::memset(&id, 0, sizeof id);
      r = tribBroadcast(&id, &id, sizeof id, tribUint8, 0, comm, nullptr);
      if (r == tribSuccess) r = tribCommInitRank(&c, n, id, rank);
    } else {  // a split, as frameworks make subgroups
      r = tribCommSplit(comm, rank % 2, rank, &c, nullptr);
    }
    if (r == tribSuccess) {
      int one = 1, sum = 0, size = 0;
      tribCommCount(c, &size);
      r = tribAllReduce(&one, &sum, 1, tribInt32, tribSum, c, nullptr);
      if (r == tribSuccess && sum != size) r = tribInternalError;
    }
    if (r != tribSuccess) {
      std::fprintf(stderr, "trib-soak: rank %d: churn %d (%s) failed: %s\n", rank, k,
                   k % 2 == 0 ? "init" : "split", tribGetErrorString(r));
      ch.failed += 1;
    }
    if (c) tribCommDestroy(c);
    ch.samples.push_back(resourcesNow());
  }
  return ch;
}

int runRank(const Options& o) {
  tribComm_t comm = nullptr;
  if (tribCommInitFromEnv(&comm, nullptr) != tribSuccess) {
    std::fprintf(stderr, "trib-soak: init from the launcher's environment failed: %s\n",
                 tribGetLastError(nullptr));
    return 1;
  }
  int n = 1, rank = 0;
  tribCommCount(comm, &n);
  tribCommUserRank(comm, &rank);
  std::mt19937_64 rng(o.seed);
  Totals t;
  // The communicator keeps memory for reuse: the scratch pool's idle buffers (up to a cap) and the
  // staging that each cached plan's idle execution keeps for its next run. Both grow as random
  // sizes arrive. Sampled with RSS, so the slope of what is left (RSS less those) shows whether
  // anything else grows.
  const trib::Communicator& impl = *comm->impl();
  auto poolKiB = [&] { return static_cast<double>(impl.scratchPool.idleBytes()) / 1024; };
  auto execKiB = [&] {
    size_t bytes = 0;
    for (const auto& [key, plan] : impl.planCache)
      if (plan.idle) bytes += plan.idle->spareStagingBytes();
    return static_cast<double>(bytes) / 1024;
  };
  std::vector<double> at, rss, rssLessPool;
  const auto t0 = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  Resources warm;  // after the warm-up (a fifth of the run): what no later sample may exceed by much
  bool warmTaken = false;
  for (bool more = true; more;) {
    for (int i = 0; i < 8; ++i) {
      const Call c = drawCall(rng, n, o.maxBytes);
      if (!runCall(comm, n, rank, c, &t)) break;
    }
    const Resources now = resourcesNow();
    at.push_back(elapsed());
    rss.push_back(now.rssKiB);
    rssLessPool.push_back(now.rssKiB - poolKiB() - execKiB());
    if (!warmTaken && elapsed() >= o.seconds / 5) warm = now, warmTaken = true;
    // Every rank stops at the same call: when any rank's time is up, or one failed.
    double stop = elapsed() >= o.seconds || t.failed > 0 ? 1 : 0;
    if (!reduceAll(comm, &stop, 1, tribMax)) return 1;
    more = stop == 0;
  }
  const Resources afterSoak = resourcesNow();
  if (!warmTaken) warm = afterSoak;
  // The RSS slope after the warm-up, KiB per minute.
  std::vector<double> x, y, yLessPool;
  for (size_t i = 0; i < at.size(); ++i)
    if (at[i] >= o.seconds / 5)
      x.push_back(at[i] / 60), y.push_back(rss[i]), yLessPool.push_back(rssLessPool[i]);
  const double rssSlope = slope(x, y), lessPoolSlope = slope(x, yLessPool);
  const double poolIdleKiB = poolKiB(), execSpareKiB = execKiB();
  const Churn ch = churn(comm, n, rank, o.churn);
  // Growth in the churn: the second half's largest count over the first half's (transient
  // threads and mappings come and go; a leak raises every later sample).
  auto growth = [&](double Resources::*field) {
    const size_t half = ch.samples.size() / 2;
    double first = 0, second = 0;
    for (size_t i = 0; i < ch.samples.size(); ++i)
      (i < half ? first : second) = std::max(i < half ? first : second, ch.samples[i].*field);
    return half == 0 ? 0.0 : second - first;
  };
  double local[] = {t.calls,
                    t.bytes,
                    t.wrong,
                    t.failed + ch.failed,
                    rssSlope,
                    growth(&Resources::fds),
                    growth(&Resources::maps),
                    growth(&Resources::threads),
                    afterSoak.rssKiB - warm.rssKiB,
                    lessPoolSlope,
                    poolIdleKiB,
                    execSpareKiB};
  constexpr size_t kFields = std::size(local);
  std::vector<double> all(kFields * n, 0);
  tribAllGather(local, all.data(), kFields, tribFloat64, comm, nullptr);
  tribCommDestroy(comm);
  if (rank != 0) return 0;
  double calls = 0, bytes = 0, wrong = 0, failed = 0, worstSlope = 0, worstLessPool = 0, fdGrowth = 0,
         mapGrowth = 0, threadGrowth = 0;
  for (int r = 0; r < n; ++r) {
    const double* v = &all[kFields * r];
    calls += v[0], bytes += v[1], wrong += v[2], failed += v[3];
    worstSlope = std::max(worstSlope, v[4]);
    worstLessPool = std::max(worstLessPool, v[9]);
    fdGrowth = std::max(fdGrowth, v[5]), mapGrowth = std::max(mapGrowth, v[6]),
    threadGrowth = std::max(threadGrowth, v[7]);
  }
  const bool grew = fdGrowth > 0 || mapGrowth > 0 || threadGrowth > 0;
  std::printf("# trib-soak: %d ranks, %.0f s, calls up to %llu bytes, seed %llu\n", n, elapsed(),
              static_cast<unsigned long long>(o.maxBytes), static_cast<unsigned long long>(o.seed));
  std::printf("calls %.0f  bytes %.3g  wrong elements %.0f  failed calls %.0f\n", calls, bytes, wrong,
              failed);
  std::printf(
      "resident memory after warm-up: worst rank's slope %.1f KiB/min; less what the communicator keeps for "
      "reuse (idle scratch, capped at %zu MiB; cached executions' staging): %.1f KiB/min\n",
      worstSlope, trib::ScratchPool::kMaxIdleBytes >> 20, worstLessPool);
  for (int r = 0; r < n; ++r)
    std::printf(
        "  rank %d: slope %.1f KiB/min, %+.0f KiB from warm-up to the end; kept at the end: idle scratch "
        "%.0f KiB, "
        "executions' staging %.0f KiB; slope without them %.1f KiB/min\n",
        r, all[kFields * r + 4], all[kFields * r + 8], all[kFields * r + 10], all[kFields * r + 11],
        all[kFields * r + 9]);
  std::printf(
      "churn: %d communicators; growth (2nd half max - 1st half max, worst rank): fds %+.0f, mappings "
      "%+.0f, threads %+.0f\n",
      o.churn, fdGrowth, mapGrowth, threadGrowth);
  const bool ok = wrong == 0 && failed == 0 && !grew;
  std::printf("%s\n", ok ? "OK" : "FAILED");
  if (!o.json.empty()) {
    if (FILE* f = std::fopen(o.json.c_str(), "w")) {
      std::fprintf(
          f,
          "{\"ranks\":%d,\"seconds\":%.1f,\"max_bytes\":%llu,\"seed\":%llu,\"calls\":%.0f,\"bytes\":%.0f,"
          "\"wrong\":%.0f,\"failed\":%.0f,\"rss_slope_kib_per_min\":%.2f,"
          "\"rss_less_pool_slope_kib_per_min\":%.2f,\"churn\":%d,"
          "\"fd_growth\":%.0f,\"map_growth\":%.0f,\"thread_growth\":%.0f,\"ok\":%s}\n",
          n, elapsed(), static_cast<unsigned long long>(o.maxBytes), static_cast<unsigned long long>(o.seed),
          calls, bytes, wrong, failed, worstSlope, worstLessPool, o.churn, fdGrowth, mapGrowth, threadGrowth,
          ok ? "true" : "false");
      std::fclose(f);
    }
  }
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  static const option longOpts[] = {{"ranks", required_argument, nullptr, 'N'},
                                    {"seconds", required_argument, nullptr, 's'},
                                    {"max-bytes", required_argument, nullptr, 'e'},
                                    {"churn", required_argument, nullptr, 'c'},
                                    {"seed", required_argument, nullptr, 'S'},
                                    {"json", required_argument, nullptr, 'J'},
                                    {"help", no_argument, nullptr, 'h'},
                                    {nullptr, 0, nullptr, 0}};
  for (int ch; (ch = getopt_long(argc, argv, "N:s:e:c:S:J:h", longOpts, nullptr)) != -1;) {
    switch (ch) {
      case 'N':
        o.ranks = static_cast<int>(trib::bench::intArg("trib-soak", "-N", optarg, 1, 1024));
        break;
      case 's':
        o.seconds = trib::bench::numberArg("trib-soak", "-s", optarg, 0);
        break;
      case 'e':
        o.maxBytes = trib::bench::sizeArg("trib-soak", "-e", optarg);
        break;
      case 'c':
        o.churn = static_cast<int>(trib::bench::intArg("trib-soak", "-c", optarg, 0, 1 << 30));
        break;
      case 'S':
        o.seed = static_cast<uint64_t>(trib::bench::intArg("trib-soak", "-S", optarg, 0, INT64_MAX));
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
  if (optind < argc || o.ranks < 1 || o.ranks > 1024 || !(o.seconds >= 0) || o.churn < 0 ||
      o.maxBytes > (uint64_t{1} << 34)) {
    std::fprintf(stderr,
                 "trib-soak: invalid options (ranks 1..1024, seconds >= 0, churn >= 0, max-bytes <= 16G)\n");
    return 2;
  }
  if (trib::bench::underLauncher()) return runRank(o);
  return trib::bench::spawnRanks("trib-soak", o.ranks, argv);
}
