/* Shared by the peer benchmarks (mpi_allreduce_bench.c, gloo_allreduce_bench.cpp): the options,
 * inputs, checks and output of trib-perf / nccl-tests, so every library is measured and reported the
 * same way (float32 sum all-reduce; time = max over ranks of the mean per-call time; algbw = S/t;
 * busbw = algbw * 2(n-1)/n; JSON in trib-perf's -J schema). Plain C99 so both C and C++ include it. */
#ifndef TRIB_BENCH_PEER_COMMON_H
#define TRIB_BENCH_PEER_COMMON_H

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PEER_MAX_SIZES 64

typedef struct PeerOpts {
  uint64_t minBytes, maxBytes;
  double factor;
  int iters, warmup, check;
  int ranks;        /* processes to fork (Gloo only; 0 = take RANK/WORLD_SIZE from the environment) */
  double timeoutS;  /* bound on the whole run (Gloo's forked ranks, and its per-operation timeout) */
  const char* json; /* NULL: no JSON */
} PeerOpts;

/* One row per size; times and wrong counts are already combined over ranks (max / sum). */
typedef struct PeerRow {
  uint64_t bytes;
  double timeUs[2]; /* [0] out-of-place, [1] in-place */
  long wrong[2];
} PeerRow;

static inline uint64_t peer_parse_size(const char* s, int* ok) {
  char* end = NULL;
  double v = strtod(s, &end);
  *ok = end != s && v >= 0;
  if (*ok && *end) {
    switch (*end) {
      case 'K':
      case 'k':
        v *= 1024.0;
        break;
      case 'M':
      case 'm':
        v *= 1024.0 * 1024.0;
        break;
      case 'G':
      case 'g':
        v *= 1024.0 * 1024.0 * 1024.0;
        break;
      default:
        *ok = 0;
    }
  }
  return (uint64_t)v;
}

static inline void peer_usage(const char* prog, int withRanks, FILE* f) {
  fprintf(f,
          "usage: %s [options]   (float32 sum all-reduce, trib-perf/nccl-tests conventions)\n"
          "  -b, --minbytes N     smallest size (bytes; K/M/G suffixes)   [8]\n"
          "  -e, --maxbytes N     largest size                           [256M]\n"
          "  -f, --stepfactor F   multiply the size by F each step (> 1)  [2]\n"
          "  -n, --iters N        timed iterations per size               [20]\n"
          "  -w, --warmup_iters N untimed iterations first                [5]\n"
          "  -c, --check 0|1      check results (#wrong column)           [1]\n"
          "  -J, --json FILE      also write results as JSON (trib-perf's schema)\n",
          prog);
  if (withRanks)
    fprintf(f,
            "  -r, --ranks N        fork N local ranks (else RANK/WORLD_SIZE from the environment)\n"
            "  -T, --timeout S      bound on the whole run and on each operation, seconds [600]\n");
  fprintf(f, "  -h, --help\n");
}

/* Returns 0 on success, 1 after --help, -1 (message printed) on bad input. */
static inline int peer_parse_args(int argc, char** argv, int withRanks, PeerOpts* o) {
  static const struct option longOpts[] = {{"minbytes", 1, NULL, 'b'},
                                           {"maxbytes", 1, NULL, 'e'},
                                           {"stepfactor", 1, NULL, 'f'},
                                           {"iters", 1, NULL, 'n'},
                                           {"warmup_iters", 1, NULL, 'w'},
                                           {"check", 1, NULL, 'c'},
                                           {"json", 1, NULL, 'J'},
                                           {"ranks", 1, NULL, 'r'},
                                           {"timeout", 1, NULL, 'T'},
                                           {"help", 0, NULL, 'h'},
                                           {NULL, 0, NULL, 0}};
  const char* prog = argv[0];
  int ch, ok = 1;
  o->minBytes = 8;
  o->maxBytes = 256ull << 20;
  o->factor = 2;
  o->iters = 20;
  o->warmup = 5;
  o->check = 1;
  o->ranks = 0;
  o->timeoutS = 600;
  o->json = NULL;
  while ((ch = getopt_long(argc, argv, withRanks ? "b:e:f:n:w:c:J:r:T:h" : "b:e:f:n:w:c:J:h", longOpts,
                           NULL)) != -1) {
    if ((ch == 'r' || ch == 'T') && !withRanks) {
      fprintf(stderr, "%s: --ranks/--timeout are not options of this benchmark (see --help)\n", prog);
      return -1;
    }
    switch (ch) {
      case 'b':
        o->minBytes = peer_parse_size(optarg, &ok);
        break;
      case 'e':
        o->maxBytes = peer_parse_size(optarg, &ok);
        break;
      case 'f':
        o->factor = atof(optarg);
        break;
      case 'n':
        o->iters = atoi(optarg);
        break;
      case 'w':
        o->warmup = atoi(optarg);
        break;
      case 'c':
        o->check = atoi(optarg);
        break;
      case 'J':
        o->json = optarg;
        break;
      case 'r':
        o->ranks = atoi(optarg);
        break;
      case 'T':
        o->timeoutS = atof(optarg);
        break;
      case 'h':
        peer_usage(prog, withRanks, stdout);
        return 1;
      default:
        peer_usage(prog, withRanks, stderr);
        return -1;
    }
    if (!ok) {
      fprintf(stderr, "%s: bad size '%s' (a number with an optional K/M/G suffix)\n", prog, optarg);
      return -1;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "%s: unexpected argument '%s' (see --help)\n", prog, argv[optind]);
    return -1;
  }
  if (o->minBytes < 4 || o->maxBytes < o->minBytes || o->factor <= 1.0 || o->iters < 1 || o->warmup < 0 ||
      (o->check != 0 && o->check != 1) || o->ranks < 0 || o->ranks > 64 || o->timeoutS <= 0) {
    fprintf(stderr,
            "%s: bad options: need 4 <= minbytes <= maxbytes, stepfactor > 1, iters >= 1, warmup >= 0, "
            "check 0|1, 0 <= ranks <= 64, timeout > 0 (see --help)\n",
            prog);
    return -1;
  }
  return 0;
}

/* Each rank holds a send and a receive buffer of the largest size; refuse a run that cannot fit in
 * this host's memory (it would end in the OOM killer, not an error). Returns 0, or -1 with a message. */
static inline int peer_check_memory(const char* prog, uint64_t maxBytes, int ranksOnHost) {
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
  double need = 2.0 * (double)maxBytes * ranksOnHost, have = (double)pages * (double)pageSize;
  if (pages > 0 && pageSize > 0 && need > 0.8 * have) {
    fprintf(stderr,
            "%s: %d ranks x 2 buffers x %llu bytes = %.1f GiB is more than 80%% of this host's %.1f GiB; "
            "lower --maxbytes\n",
            prog, ranksOnHost, (unsigned long long)maxBytes, need / (1 << 30), have / (1 << 30));
    return -1;
  }
  return 0;
}

/* Sizes to run, rounded down to whole float32 elements; returns how many. */
static inline int peer_sizes(const PeerOpts* o, uint64_t* sizes) {
  int n = 0;
  for (double s = (double)o->minBytes; s <= (double)o->maxBytes && n < PEER_MAX_SIZES; s *= o->factor) {
    uint64_t b = ((uint64_t)s / 4) * 4;
    if (n == 0 || b != sizes[n - 1]) sizes[n++] = b;
  }
  return n;
}

/* trib-perf's inputs for sum: small integers, so float32 sums are exact and any error is a real one. */
static inline float peer_input(int rank, uint64_t i) { return (float)((rank * 3 + i) % 5); }

static inline void peer_fill(float* buf, uint64_t count, int rank) {
  for (uint64_t i = 0; i < count; ++i) buf[i] = peer_input(rank, i);
}

static inline long peer_count_wrong(const float* out, uint64_t count, int nranks) {
  long wrong = 0;
  for (uint64_t i = 0; i < count; ++i) {
    float want = 0;
    for (int r = 0; r < nranks; ++r) want += peer_input(r, i);
    if (out[i] != want) ++wrong;
  }
  return wrong;
}

static inline double peer_busbw(uint64_t bytes, double timeUs, int nranks) {
  double algbw = (double)bytes / (timeUs * 1e-6) / 1e9;
  return algbw * 2.0 * (nranks - 1) / nranks;
}

/* Prints the nccl-tests style table and writes the JSON; returns the total of wrong elements, or -1
 * when the JSON file cannot be written (so the run fails instead of silently losing its results). */
static inline long peer_report(const PeerOpts* o, const char* library, int nranks, const PeerRow* rows,
                               int nrows) {
  long wrongTotal = 0;
  double busSum = 0;
  int busCount = 0, s, ip;
  FILE* json = NULL;
  if (o->json && !(json = fopen(o->json, "w")))
    fprintf(stderr, "peer bench: cannot write JSON to '%s': %s\n", o->json, strerror(errno));
  printf("# %s: allreduce, %d ranks as processes, float32 sum, warmup %d iters %d, check %d\n", library,
         nranks, o->warmup, o->iters, o->check);
  printf("#%61s%36s\n", "out-of-place", "in-place");
  printf("#%12s %12s %8s %6s %6s %9s %8s %8s %6s %9s %8s %8s %6s\n", "size", "count", "type", "redop", "root",
         "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
  printf("#%12s %12s %8s %6s %6s %9s %8s %8s %6s %9s %8s %8s %6s\n", "(B)", "(elements)", "", "", "", "(us)",
         "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  if (json)
    fprintf(json, "{\"coll\":\"allreduce\",\"ranks\":%d,\"library\":\"%s\",\"results\":[", nranks, library);
  for (s = 0; s < nrows; ++s) {
    const PeerRow* r = &rows[s];
    printf(" %12llu %12llu %8s %6s %6d", (unsigned long long)r->bytes, (unsigned long long)(r->bytes / 4),
           "float", "sum", -1);
    if (json)
      fprintf(json, "%s{\"size\":%llu,\"count\":%llu", s ? "," : "", (unsigned long long)r->bytes,
              (unsigned long long)(r->bytes / 4));
    for (ip = 0; ip < 2; ++ip) {
      double algbw = (double)r->bytes / (r->timeUs[ip] * 1e-6) / 1e9;
      double busbw = peer_busbw(r->bytes, r->timeUs[ip], nranks);
      busSum += busbw;
      ++busCount;
      wrongTotal += r->wrong[ip];
      printf(" %9.2f %8.3f %8.3f %6ld", r->timeUs[ip], algbw, busbw, o->check ? r->wrong[ip] : -1L);
      if (json)
        fprintf(json, ",\"%s\":{\"time_us\":%.3f,\"algbw\":%.4f,\"busbw\":%.4f,\"wrong\":%ld}",
                ip ? "in_place" : "out_of_place", r->timeUs[ip], algbw, busbw, r->wrong[ip]);
    }
    printf("\n");
    if (json) fprintf(json, "}");
  }
  printf("# Out of bounds values : %ld %s\n", wrongTotal, wrongTotal ? "FAILED" : "OK");
  printf("# Avg bus bandwidth    : %.4f \n#\n", busCount ? busSum / busCount : 0.0);
  if (json) {
    fprintf(json, "],\"avg_busbw\":%.4f,\"wrong\":%ld}\n", busCount ? busSum / busCount : 0.0, wrongTotal);
    if (fclose(json) != 0) {
      fprintf(stderr, "peer bench: writing JSON '%s' failed: %s\n", o->json, strerror(errno));
      return -1;
    }
  }
  fflush(stdout);
  return o->json && !json ? -1 : wrongTotal;
}

#endif /* TRIB_BENCH_PEER_COMMON_H */
