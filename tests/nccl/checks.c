#include "checks.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(...)                                        \
  do {                                                   \
    fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__);                        \
    fprintf(stderr, "\n");                               \
    ++failures;                                          \
  } while (0)

#define NCCL_OK(call)                                                                                  \
  do {                                                                                                 \
    ncclResult_t r_ = (call);                                                                          \
    if (r_ != ncclSuccess) {                                                                           \
      FAIL("%s returned %d (%s): %s", #call, (int)r_, ncclGetErrorString(r_), ncclGetLastError(NULL)); \
      return failures;                                                                                 \
    }                                                                                                  \
  } while (0)

enum { kMaxLocal = 8, kCount = 37 /* odd: no size happens to divide evenly */ };

/* ---- Element encoding: exact for the small integers these checks use ---------------------- */
typedef struct {
  int expBits, mantBits;
} Mini;

static int miniOf(ncclDataType_t t, Mini* m) {
  switch (t) {
    case ncclFloat16:
      m->expBits = 5, m->mantBits = 10;
      return 1;
    case ncclBfloat16:
      m->expBits = 8, m->mantBits = 7;
      return 1;
    case ncclFloat8e4m3:
      m->expBits = 4, m->mantBits = 3;
      return 1;
    case ncclFloat8e5m2:
      m->expBits = 5, m->mantBits = 2;
      return 1;
    default:
      return 0;
  }
}

/* A normal (or zero) number of a small float format, from v = 2^e * (1 + f). */
static unsigned encodeMini(Mini m, double v) {
  unsigned sign = v < 0 ? 1u : 0u;
  if (v < 0) v = -v;
  if (v == 0) return 0;
  int e;
  double f = frexp(v, &e); /* v = f * 2^e, f in [0.5, 1) */
  e -= 1;
  f = f * 2 - 1;
  unsigned bias = (1u << (m.expBits - 1)) - 1;
  unsigned mant = (unsigned)lround(f * (double)(1u << m.mantBits));
  return (sign << (m.expBits + m.mantBits)) | ((unsigned)(e + (int)bias) << m.mantBits) | mant;
}

static double decodeMini(Mini m, unsigned bits) {
  unsigned sign = (bits >> (m.expBits + m.mantBits)) & 1u;
  unsigned exp = (bits >> m.mantBits) & ((1u << m.expBits) - 1);
  unsigned mant = bits & ((1u << m.mantBits) - 1);
  if (exp == 0 && mant == 0) return 0;
  int bias = (1 << (m.expBits - 1)) - 1;
  double v = ldexp(1.0 + (double)mant / (double)(1u << m.mantBits), (int)exp - bias);
  return sign ? -v : v;
}

static size_t typeSize(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    default:
      return 8;
  }
}

static void setElem(ncclDataType_t t, void* buf, size_t i, double v) {
  Mini m;
  if (miniOf(t, &m)) {
    unsigned bits = encodeMini(m, v);
    if (typeSize(t) == 1)
      ((uint8_t*)buf)[i] = (uint8_t)bits;
    else
      ((uint16_t*)buf)[i] = (uint16_t)bits;
    return;
  }
  switch (t) {
    case ncclInt8:
      ((int8_t*)buf)[i] = (int8_t)v;
      break;
    case ncclUint8:
      ((uint8_t*)buf)[i] = (uint8_t)v;
      break;
    case ncclInt32:
      ((int32_t*)buf)[i] = (int32_t)v;
      break;
    case ncclUint32:
      ((uint32_t*)buf)[i] = (uint32_t)v;
      break;
    case ncclInt64:
      ((int64_t*)buf)[i] = (int64_t)v;
      break;
    case ncclUint64:
      ((uint64_t*)buf)[i] = (uint64_t)v;
      break;
    case ncclFloat32:
      ((float*)buf)[i] = (float)v;
      break;
    default:
      ((double*)buf)[i] = v;
      break;
  }
}

static double getElem(ncclDataType_t t, const void* buf, size_t i) {
  Mini m;
  if (miniOf(t, &m))
    return decodeMini(m, typeSize(t) == 1 ? ((const uint8_t*)buf)[i] : ((const uint16_t*)buf)[i]);
  switch (t) {
    case ncclInt8:
      return ((const int8_t*)buf)[i];
    case ncclUint8:
      return ((const uint8_t*)buf)[i];
    case ncclInt32:
      return ((const int32_t*)buf)[i];
    case ncclUint32:
      return ((const uint32_t*)buf)[i];
    case ncclInt64:
      return (double)((const int64_t*)buf)[i];
    case ncclUint64:
      return (double)((const uint64_t*)buf)[i];
    case ncclFloat32:
      return ((const float*)buf)[i];
    default:
      return ((const double*)buf)[i];
  }
}

/* ---- The ranks this thread drives ---------------------------------------------------------- */
typedef struct {
  ncclComm_t comm[kMaxLocal];
  int rank[kMaxLocal];
  int n, nranks, group;
  void* send[kMaxLocal];
  void* recv[kMaxLocal];
} Ranks;

static int setup(Ranks* rs, ncclComm_t* comms, int ncomms, int useGroup) {
  int failures = 0;
  if (ncomms < 1 || ncomms > kMaxLocal) {
    FAIL("ncomms %d out of range", ncomms);
    return failures;
  }
  memset(rs, 0, sizeof *rs);
  rs->n = ncomms;
  rs->group = useGroup;
  for (int l = 0; l < ncomms; ++l) {
    rs->comm[l] = comms[l];
    NCCL_OK(ncclCommUserRank(comms[l], &rs->rank[l]));
    NCCL_OK(ncclCommCount(comms[l], &rs->nranks));
  }
  return failures;
}

static void allocBuffers(Ranks* rs, size_t sendBytes, size_t recvBytes) {
  for (int l = 0; l < rs->n; ++l) {
    rs->send[l] = calloc(1, sendBytes ? sendBytes : 1);
    rs->recv[l] = calloc(1, recvBytes ? recvBytes : 1);
  }
}

static void freeBuffers(Ranks* rs) {
  for (int l = 0; l < rs->n; ++l) {
    free(rs->send[l]);
    free(rs->recv[l]);
    rs->send[l] = rs->recv[l] = NULL;
  }
}

/* Small values every format holds exactly, and whose sums and products over 4 ranks stay exact. */
static double smallValue(int rank, size_t i) { return 1.0 + (double)((rank + (int)i) % 2); }
/* Distinct per rank and element: for the data-movement collectives (float32 holds them exactly). */
static double tag(int rank, size_t i) { return rank * 1000.0 + (double)i; }

typedef ncclResult_t (*CallFn)(Ranks* rs, int l, void* ctx);

/* Issues `fn` for every local rank, in a group when asked. */
static int issue(Ranks* rs, CallFn fn, void* ctx, const char* what) {
  int failures = 0;
  if (rs->group) NCCL_OK(ncclGroupStart());
  for (int l = 0; l < rs->n; ++l) {
    ncclResult_t r = fn(rs, l, ctx);
    if (r != ncclSuccess)
      FAIL("%s on rank %d: %s: %s", what, rs->rank[l], ncclGetErrorString(r), ncclGetLastError(NULL));
  }
  if (rs->group) NCCL_OK(ncclGroupEnd());
  return failures;
}

/* ---- All-reduce: every dtype, every operator ------------------------------------------------ */
typedef struct {
  ncclDataType_t dt;
  ncclRedOp_t op;
} DtOp;

static ncclResult_t callAllReduce(Ranks* rs, int l, void* ctx) {
  DtOp* c = (DtOp*)ctx;
  return ncclAllReduce(rs->send[l], rs->recv[l], kCount, c->dt, c->op, rs->comm[l], NULL);
}

static double reduceExpect(ncclRedOp_t op, int nranks, size_t i, int avgTruncates) {
  double acc = smallValue(0, i);
  for (int r = 1; r < nranks; ++r) {
    double v = smallValue(r, i);
    if (op == ncclSum || op == ncclAvg)
      acc += v;
    else if (op == ncclProd)
      acc *= v;
    else if (op == ncclMax)
      acc = v > acc ? v : acc;
    else
      acc = v < acc ? v : acc;
  }
  if (op == ncclAvg) acc = avgTruncates ? trunc(acc / nranks) : acc / nranks;
  return acc;
}

static int isFloat(ncclDataType_t t) {
  return t == ncclFloat16 || t == ncclBfloat16 || t == ncclFloat32 || t == ncclFloat64 ||
         t == ncclFloat8e4m3 || t == ncclFloat8e5m2;
}

static int checkAllReduce(Ranks* rs) {
  int failures = 0;
  static const ncclDataType_t types[] = {ncclInt8,    ncclUint8,    ncclInt32,      ncclUint32,
                                         ncclInt64,   ncclUint64,   ncclFloat16,    ncclFloat32,
                                         ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
  static const ncclRedOp_t ops[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
  for (size_t t = 0; t < sizeof types / sizeof *types; ++t) {
    for (size_t o = 0; o < sizeof ops / sizeof *ops; ++o) {
      DtOp c = {types[t], ops[o]};
      /* An average of 1s and 2s is not exact in the 8-bit formats; the other formats hold it. */
      if (c.op == ncclAvg && (c.dt == ncclFloat8e4m3 || c.dt == ncclFloat8e5m2)) continue;
      size_t es = typeSize(c.dt);
      allocBuffers(rs, kCount * es, kCount * es);
      for (int l = 0; l < rs->n; ++l)
        for (size_t i = 0; i < kCount; ++i) setElem(c.dt, rs->send[l], i, smallValue(rs->rank[l], i));
      failures += issue(rs, callAllReduce, &c, "ncclAllReduce");
      for (int l = 0; l < rs->n && !failures; ++l) {
        for (size_t i = 0; i < kCount; ++i) {
          double want = reduceExpect(c.op, rs->nranks, i, !isFloat(c.dt));
          double got = getElem(c.dt, rs->recv[l], i);
          double tol = c.dt == ncclFloat16 || c.dt == ncclBfloat16 ? 1e-2 : 1e-6;
          if (fabs(got - want) > tol * fabs(want)) {
            FAIL("ncclAllReduce dtype %d op %d rank %d [%zu]: got %g, want %g", (int)c.dt, (int)c.op,
                 rs->rank[l], i, got, want);
            break;
          }
        }
      }
      freeBuffers(rs);
      if (failures) return failures;
    }
  }
  return failures;
}

/* ---- The other collectives, on float32 and float64 -------------------------------------------- */
typedef struct {
  ncclDataType_t dt;
  int root;
} Rooted;

static ncclResult_t callReduce(Ranks* rs, int l, void* ctx) {
  Rooted* c = (Rooted*)ctx;
  return ncclReduce(rs->send[l], rs->recv[l], kCount, c->dt, ncclMax, c->root, rs->comm[l], NULL);
}
static ncclResult_t callBroadcast(Ranks* rs, int l, void* ctx) {
  Rooted* c = (Rooted*)ctx;
  return ncclBroadcast(rs->send[l], rs->recv[l], kCount, c->dt, c->root, rs->comm[l], NULL);
}
static ncclResult_t callBcast(Ranks* rs, int l, void* ctx) {
  Rooted* c = (Rooted*)ctx;
  return ncclBcast(rs->recv[l], kCount, c->dt, c->root, rs->comm[l], NULL);
}
static ncclResult_t callGather(Ranks* rs, int l, void* ctx) {
  Rooted* c = (Rooted*)ctx;
  return ncclGather(rs->send[l], rs->recv[l], kCount, c->dt, c->root, rs->comm[l], NULL);
}
static ncclResult_t callScatter(Ranks* rs, int l, void* ctx) {
  Rooted* c = (Rooted*)ctx;
  return ncclScatter(rs->send[l], rs->recv[l], kCount, c->dt, c->root, rs->comm[l], NULL);
}
static ncclResult_t callAllGather(Ranks* rs, int l, void* ctx) {
  Rooted* c = (Rooted*)ctx;
  return ncclAllGather(rs->send[l], rs->recv[l], kCount, c->dt, rs->comm[l], NULL);
}
static ncclResult_t callReduceScatter(Ranks* rs, int l, void* ctx) {
  Rooted* c = (Rooted*)ctx;
  return ncclReduceScatter(rs->send[l], rs->recv[l], kCount, c->dt, ncclMin, rs->comm[l], NULL);
}
static ncclResult_t callAlltoAll(Ranks* rs, int l, void* ctx) {
  Rooted* c = (Rooted*)ctx;
  return ncclAlltoAll(rs->send[l], rs->recv[l], kCount, c->dt, rs->comm[l], NULL);
}
static ncclResult_t callSendRecv(Ranks* rs, int l, void* ctx) {
  Rooted* c = (Rooted*)ctx;
  int n = rs->nranks, r = rs->rank[l];
  ncclResult_t res = ncclSend(rs->send[l], kCount, c->dt, (r + 1) % n, rs->comm[l], NULL);
  if (res != ncclSuccess) return res;
  return ncclRecv(rs->recv[l], kCount, c->dt, (r + n - 1) % n, rs->comm[l], NULL);
}

/* Fills send with n*kCount tags (the first kCount for the collectives that send kCount). */
static void fillTags(Ranks* rs, ncclDataType_t dt, size_t nelem) {
  for (int l = 0; l < rs->n; ++l)
    for (size_t i = 0; i < nelem; ++i) setElem(dt, rs->send[l], i, tag(rs->rank[l], i));
}

/* Counts a mismatch in *bad (the callers stop at the first). */
static void expectAt(Ranks* rs, int l, ncclDataType_t dt, size_t i, double want, const char* what, int* bad) {
  int failures = 0;
  double got = getElem(dt, rs->recv[l], i);
  if (got != want)
    FAIL("%s dtype %d rank %d of %d [%zu]: got %g, want %g", what, (int)dt, rs->rank[l], rs->nranks, i, got,
         want);
  *bad += failures;
}

static int checkMovement(Ranks* rs, ncclDataType_t dt) {
  int failures = 0, bad = 0;
  const int n = rs->nranks;
  const size_t es = typeSize(dt), big = (size_t)n * kCount;
  Rooted c = {dt, n - 1};

  allocBuffers(rs, big * es, big * es);
  fillTags(rs, dt, big);
  failures += issue(rs, callReduce, &c, "ncclReduce");
  for (int l = 0; l < rs->n && !failures; ++l)
    if (rs->rank[l] == c.root)
      for (size_t i = 0; i < kCount && !bad; ++i)
        expectAt(rs, l, dt, i, tag(n - 1, i), "ncclReduce(max)", &bad);
  failures += issue(rs, callBroadcast, &c, "ncclBroadcast");
  for (int l = 0; l < rs->n && !failures; ++l)
    for (size_t i = 0; i < kCount && !bad; ++i) expectAt(rs, l, dt, i, tag(c.root, i), "ncclBroadcast", &bad);
  for (int l = 0; l < rs->n; ++l) /* in place: the root's recv holds its data */
    for (size_t i = 0; i < kCount; ++i) setElem(dt, rs->recv[l], i, rs->rank[l] == 0 ? tag(7, i) : -1.0);
  c.root = 0;
  failures += issue(rs, callBcast, &c, "ncclBcast");
  for (int l = 0; l < rs->n && !failures; ++l)
    for (size_t i = 0; i < kCount && !bad; ++i) expectAt(rs, l, dt, i, tag(7, i), "ncclBcast", &bad);
  failures += issue(rs, callAllGather, &c, "ncclAllGather");
  for (int l = 0; l < rs->n && !failures; ++l)
    for (size_t i = 0; i < big && !bad; ++i)
      expectAt(rs, l, dt, i, tag((int)(i / kCount), i % kCount), "ncclAllGather", &bad);
  failures += issue(rs, callReduceScatter, &c, "ncclReduceScatter");
  for (int l = 0; l < rs->n && !failures; ++l) /* min over ranks of rank*1000 + j is rank 0's */
    for (size_t i = 0; i < kCount && !bad; ++i)
      expectAt(rs, l, dt, i, tag(0, (size_t)rs->rank[l] * kCount + i), "ncclReduceScatter(min)", &bad);
  failures += issue(rs, callAlltoAll, &c, "ncclAlltoAll");
  for (int l = 0; l < rs->n && !failures; ++l) /* block p of rank r comes from rank p's block r */
    for (size_t i = 0; i < big && !bad; ++i)
      expectAt(rs, l, dt, i, tag((int)(i / kCount), (size_t)rs->rank[l] * kCount + i % kCount),
               "ncclAlltoAll", &bad);
  c.root = n / 2;
  failures += issue(rs, callGather, &c, "ncclGather");
  for (int l = 0; l < rs->n && !failures; ++l)
    if (rs->rank[l] == c.root)
      for (size_t i = 0; i < big && !bad; ++i)
        expectAt(rs, l, dt, i, tag((int)(i / kCount), i % kCount), "ncclGather", &bad);
  failures += issue(rs, callScatter, &c, "ncclScatter");
  for (int l = 0; l < rs->n && !failures; ++l)
    for (size_t i = 0; i < kCount && !bad; ++i)
      expectAt(rs, l, dt, i, tag(c.root, (size_t)rs->rank[l] * kCount + i), "ncclScatter", &bad);
  /* Send/recv pairs must be grouped even on one rank per thread (NCCL's rule). */
  int saved = rs->group;
  rs->group = 1;
  failures += issue(rs, callSendRecv, &c, "ncclSend/ncclRecv");
  rs->group = saved;
  for (int l = 0; l < rs->n && !failures; ++l)
    for (size_t i = 0; i < kCount && !bad; ++i)
      expectAt(rs, l, dt, i, tag((rs->rank[l] + n - 1) % n, i), "ncclSend/ncclRecv", &bad);
  freeBuffers(rs);
  return failures + bad;
}

/* ---- Pre-multiplied sums: each rank scales its input by rank + 1, then all are summed -------- */
typedef struct {
  ncclRedOp_t op[kMaxLocal];
  float scalar[kMaxLocal];
} PreMul;

static ncclResult_t callPreMulAllReduce(Ranks* rs, int l, void* ctx) {
  PreMul* c = (PreMul*)ctx;
  return ncclAllReduce(rs->send[l], rs->recv[l], kCount, ncclFloat32, c->op[l], rs->comm[l], NULL);
}

static int checkPreMulSum(Ranks* rs) {
  int failures = 0;
  PreMul c;
  for (int l = 0; l < rs->n; ++l) {
    c.scalar[l] = (float)(rs->rank[l] + 1);
    NCCL_OK(
        ncclRedOpCreatePreMulSum(&c.op[l], &c.scalar[l], ncclFloat32, ncclScalarHostImmediate, rs->comm[l]));
    if ((int)c.op[l] < (int)ncclNumOps)
      FAIL("ncclRedOpCreatePreMulSum gave a built-in value %d", (int)c.op[l]);
  }
  allocBuffers(rs, kCount * 4, kCount * 4);
  for (int l = 0; l < rs->n; ++l)
    for (size_t i = 0; i < kCount; ++i) setElem(ncclFloat32, rs->send[l], i, smallValue(rs->rank[l], i));
  failures += issue(rs, callPreMulAllReduce, &c, "ncclAllReduce(premulsum)");
  for (int l = 0; l < rs->n && !failures; ++l) {
    for (size_t i = 0; i < kCount; ++i) {
      double want = 0;
      for (int r = 0; r < rs->nranks; ++r) want += (r + 1) * smallValue(r, i);
      double got = getElem(ncclFloat32, rs->recv[l], i);
      if (got != want) {
        FAIL("ncclAllReduce(premulsum) rank %d [%zu]: got %g, want %g", rs->rank[l], i, got, want);
        break;
      }
    }
  }
  freeBuffers(rs);
  for (int l = 0; l < rs->n; ++l) NCCL_OK(ncclRedOpDestroy(c.op[l], rs->comm[l]));
  return failures;
}

int ncclCheckAll(ncclComm_t* comms, int ncomms, int useGroup) {
  Ranks rs;
  int failures = setup(&rs, comms, ncomms, useGroup);
  if (failures) return failures;
  failures += checkAllReduce(&rs);
  if (!failures) failures += checkPreMulSum(&rs);
  if (!failures) failures += checkMovement(&rs, ncclFloat32);
  if (!failures) failures += checkMovement(&rs, ncclFloat64);
  return failures;
}

/* ---- Bad input ---------------------------------------------------------------------------- */
#define EXPECT_CODE(call, code, needle)                                       \
  do {                                                                        \
    ncclResult_t r_ = (call);                                                 \
    const char* m_ = ncclGetLastError(NULL);                                  \
    if (r_ != (code))                                                         \
      FAIL("%s returned %d, want %d (%s)", #call, (int)r_, (int)(code), m_);  \
    else if (!m_ || !strstr(m_, needle))                                      \
      FAIL("%s: message '%s' lacks '%s'", #call, m_ ? m_ : "(null)", needle); \
  } while (0)

int ncclCheckBadInput(ncclComm_t comm) {
  int failures = 0;
  float buf[4] = {0};
  int version = 0;
  NCCL_OK(ncclGetVersion(&version));
  if (version != NCCL_VERSION_CODE)
    FAIL("ncclGetVersion %d, header NCCL_VERSION_CODE %d", version, NCCL_VERSION_CODE);
  EXPECT_CODE(ncclAllReduce(buf, buf, 4, (ncclDataType_t)ncclNumTypes, ncclSum, comm, NULL),
              ncclInvalidArgument, "ncclDataType_t 12");
  EXPECT_CODE(ncclAllReduce(buf, buf, 4, ncclFloat32, (ncclRedOp_t)(ncclNumOps + 3), comm, NULL),
              ncclInvalidArgument, "ncclRedOp_t 8");
  EXPECT_CODE(ncclAllReduce(buf, buf, 4, ncclFloat32, ncclSum, NULL, NULL), ncclInvalidArgument,
              "comm is NULL");
  EXPECT_CODE(ncclAllReduce(NULL, buf, 4, ncclFloat32, ncclSum, comm, NULL), ncclInvalidArgument, "NULL");
  EXPECT_CODE(ncclBroadcast(buf, buf, 4, ncclFloat32, 99, comm, NULL), ncclInvalidArgument, "root");
  EXPECT_CODE(ncclCommCount(comm, NULL), ncclInvalidArgument, "NULL");
  EXPECT_CODE(ncclGetVersion(NULL), ncclInvalidArgument, "version is NULL");
  EXPECT_CODE(ncclCommWindowRegister(comm, buf, sizeof buf, NULL, NCCL_WIN_DEFAULT), ncclInvalidUsage,
              "not supported");
  ncclRedOp_t premul;
  float two = 2.0f;
  NCCL_OK(ncclRedOpCreatePreMulSum(&premul, &two, ncclFloat32, ncclScalarHostImmediate, comm));
  EXPECT_CODE(ncclAllReduce(buf, buf, 4, ncclFloat64, premul, comm, NULL), ncclInvalidArgument,
              "made for float32");
  NCCL_OK(ncclRedOpDestroy(premul, comm));
  EXPECT_CODE(ncclRedOpDestroy(premul, comm), ncclInvalidArgument, "already destroyed");
  EXPECT_CODE(ncclAllReduce(buf, buf, 4, ncclFloat32, premul, comm, NULL), ncclInvalidArgument,
              "ncclRedOp_t");
  EXPECT_CODE(ncclRedOpCreatePreMulSum(&premul, &two, ncclFloat32, (ncclScalarResidence_t)9, comm),
              ncclInvalidArgument, "ncclScalarResidence_t 9");
  /* A config not made with NCCL_CONFIG_INITIALIZER, and one whose size is no config's. */
  ncclConfig_t cfg;
  memset(&cfg, 0, sizeof cfg);
  ncclComm_t out = NULL;
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  EXPECT_CODE(ncclCommInitRankConfig(&out, 1, id, 0, &cfg), ncclInvalidArgument, "NCCL_CONFIG_INITIALIZER");
  ncclConfig_t small = NCCL_CONFIG_INITIALIZER;
  small.size = 8;
  EXPECT_CODE(ncclCommInitRankConfig(&out, 1, id, 0, &small), ncclInvalidArgument, "size 8");
  ncclConfig_t badBlocking = NCCL_CONFIG_INITIALIZER;
  badBlocking.blocking = 5;
  EXPECT_CODE(ncclCommSplit(comm, 0, 0, &out, &badBlocking), ncclInvalidArgument, "blocking 5");
  if (out) FAIL("a failed init left *comm set");
  /* Every result has its own string. */
  for (int a = 0; a < ncclNumResults; ++a)
    for (int b = a + 1; b < ncclNumResults; ++b)
      if (!strcmp(ncclGetErrorString((ncclResult_t)a), ncclGetErrorString((ncclResult_t)b)))
        FAIL("results %d and %d share the string '%s'", a, b, ncclGetErrorString((ncclResult_t)a));
  return failures;
}

/* ---- ncclGroupSimulateEnd: the group is dropped unrun, with Tributary's estimate ------------ */
static ncclResult_t queueAllReduces(ncclComm_t* comms, int ncomms, float** bufs, size_t count) {
  for (int i = 0; i < ncomms; ++i) {
    ncclResult_t r = ncclAllReduce(bufs[i], bufs[i] + count, count, ncclFloat32, ncclSum, comms[i], NULL);
    if (r != ncclSuccess) return r;
  }
  return ncclSuccess;
}

/* The estimate of one all-reduce of `count` floats per rank (its outputs left as they were), or -1. */
static double simulated(ncclComm_t* comms, int ncomms, float** bufs, size_t count, int* failuresOut) {
  int failures = 0;
  for (int i = 0; i < ncomms; ++i)
    for (size_t k = 0; k < 2 * count; ++k) bufs[i][k] = k < count ? 1.0f : -7.0f;
  ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
  double got = -1;
  if (ncclGroupStart() != ncclSuccess || queueAllReduces(comms, ncomms, bufs, count) != ncclSuccess) {
    FAIL("queueing all-reduces: %s", ncclGetLastError(NULL));
    ncclGroupEnd();
  } else if (ncclGroupSimulateEnd(&info) != ncclSuccess) {
    FAIL("ncclGroupSimulateEnd: %s", ncclGetLastError(NULL));
  } else {
    got = info.estimatedTime;
    for (int i = 0; i < ncomms; ++i)
      if (bufs[i][2 * count - 1] != -7.0f) FAIL("a simulated group wrote rank %d's output", i);
  }
  *failuresOut += failures;
  return got;
}

int ncclCheckSimulate(ncclComm_t* comms, int ncomms) {
  int failures = 0;
  const size_t big = 1 << 20;
  float* bufs[kMaxLocal];
  for (int i = 0; i < ncomms; ++i) bufs[i] = (float*)malloc(2 * big * sizeof(float));
  const double small = simulated(comms, ncomms, bufs, 1024, &failures);
  const double large = simulated(comms, ncomms, bufs, big, &failures);
  if (!(small > 0) || !(large > small))
    FAIL("ncclGroupSimulateEnd estimates %g us (4 KiB) and %g us (4 MiB): want 0 < small < large", small,
         large);
  /* Outside a group; NULL ends the group as ncclGroupEnd (it runs); a struct without the magic is
   * refused once the group's calls are dropped. */
  ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
  EXPECT_CODE(ncclGroupSimulateEnd(&info), ncclInvalidUsage, "without a matching ncclGroupStart");
  for (int i = 0; i < ncomms; ++i)
    for (size_t k = 0; k < 2 * 64; ++k) bufs[i][k] = k < 64 ? 1.0f : -7.0f;
  NCCL_OK(ncclGroupStart());
  NCCL_OK(queueAllReduces(comms, ncomms, bufs, 64));
  NCCL_OK(ncclGroupSimulateEnd(NULL));
  for (int i = 0; i < ncomms; ++i)
    if (bufs[i][127] != (float)ncomms) FAIL("ncclGroupSimulateEnd(NULL) did not run the group (rank %d)", i);
  ncclSimInfo_t bad;
  memset(&bad, 0, sizeof bad);
  bad.size = sizeof bad;
  NCCL_OK(ncclGroupStart());
  NCCL_OK(queueAllReduces(comms, ncomms, bufs, 64));
  EXPECT_CODE(ncclGroupSimulateEnd(&bad), ncclInvalidArgument, "NCCL_SIM_INFO_INITIALIZER");
  EXPECT_CODE(ncclGroupEnd(), ncclInvalidUsage, "without a matching ncclGroupStart");
  for (int i = 0; i < ncomms; ++i) free(bufs[i]);
  return failures;
}
