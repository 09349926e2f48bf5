/* Tributary: collective communication for training frameworks.
 *
 * C ABI, shaped like NCCL so framework authors feel at home. Every call returns a
 * tribResult_t; no C++ exception ever crosses this boundary. On failure,
 * tribGetLastError() returns a message (per thread) that names what was wrong.
 */
#ifndef TRIBUTARY_H_
#define TRIBUTARY_H_

#include <stddef.h>
#include <stdint.h>

#include "tributary/export.h"
#include "tributary/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Thread safety ----------------------------------------------------------------------- *
 * - One communicator: one call at a time. Its calls (collectives, tribTest/tribWait/tribRequestFree
 *   of its requests, register, split, shrink, finalize, destroy...) may come from any thread, but
 *   not concurrently; a thread that drives several ranks puts their calls in a group.
 * - Except: tribCommAbort and tribCommGetAsyncError may be called from any thread at any time,
 *   also while another thread is blocked in a call on the same communicator (abort makes that call
 *   return tribAborted). tribCommDestroy must not overlap any other call on the communicator.
 * - Different communicators: calls on each may run concurrently from different threads.
 * - Group state and tribGetLastError's message are per thread. tribGetUniqueId, tribMemAlloc,
 *   tribMemFree, tribGetVersion and the name/string functions may be called from any thread. */

/* ---- Result codes ------------------------------------------------------------------------ */
typedef enum {
  tribSuccess = 0,
  tribUnhandledCudaError = 1,
  tribSystemError = 2,     /* the OS or a library refused: out of memory, socket error */
  tribInternalError = 3,   /* a bug in Tributary: please report it with the message */
  tribInvalidArgument = 4, /* a bad pointer, count, dtype, op or root */
  tribInvalidUsage = 5,    /* a call in the wrong state: after abort, mismatched ranks */
  tribRemoteError = 6,     /* a peer failed or disconnected */
  tribInProgress = 7,      /* non-blocking operation not complete yet */
  tribTimeout = 8,         /* a wait exceeded its timeout (TRIB_TIMEOUT) */
  tribAborted = 9,         /* the communicator was aborted */
  tribNotSupported = 10,   /* a valid request this build or transport cannot serve */
  tribNumResults = 11,
  tribResult_MAX_ENUM = 0x7fffffff /* not a value: gives the type every int's range (see below) */
} tribResult_t;

/* The *_MAX_ENUM entries make any int a valid object of these types, so a caller's bad value
 * (an unknown dtype, say) is detected and reported rather than being undefined behaviour. */

/* ---- Data types and reduction operators -------------------------------------------------- */
typedef enum {
  tribInt8 = 0,
  tribUint8 = 1,
  tribInt32 = 2,
  tribUint32 = 3,
  tribInt64 = 4,
  tribUint64 = 5,
  tribFloat16 = 6,  /* IEEE 754 binary16 */
  tribBfloat16 = 7, /* bfloat16: the top 16 bits of a binary32 */
  tribFloat32 = 8,
  tribFloat64 = 9,
  tribFp8E4M3 = 10, /* OCP FP8 E4M3 (finite-only, NaN = 0x7f/0xff) */
  tribFp8E5M2 = 11, /* OCP FP8 E5M2 (IEEE-like, has inf) */
  tribNumTypes = 12,
  /* NCCL-style aliases */
  tribChar = tribInt8,
  tribInt = tribInt32,
  tribHalf = tribFloat16,
  tribFloat = tribFloat32,
  tribDouble = tribFloat64,
  tribDataType_MAX_ENUM = 0x7fffffff
} tribDataType_t;

/* Reductions. tribAvg is the sum divided by the rank count: for floating-point types in the type
 * itself; for integer types the sum wraps like the type's own addition (two's complement) and is
 * then divided by the rank count, truncating toward zero (a sum of -7 over 2 ranks gives -3). */
typedef enum {
  tribSum = 0,
  tribProd = 1,
  tribMin = 2,
  tribMax = 3,
  tribAvg = 4,
  tribNumOps = 5,
  tribRedOp_MAX_ENUM = 0x7fffffff
} tribRedOp_t;

/* ---- Opaque handles ---------------------------------------------------------------------- */
typedef struct tribComm* tribComm_t;
typedef struct tribRequest* tribRequest_t;
/* A CUDA stream (cudaStream_t). A blocking call given one, or on device memory (NULL then being the
 * legacy default stream), is stream-ordered; host memory with NULL runs on the calling thread. */
typedef void* tribStream_t;

#define TRIB_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[TRIB_UNIQUE_ID_BYTES];
} tribUniqueId;

/* Wildcards and special values */
#define TRIB_SPLIT_NOCOLOR (-1)
#define TRIB_WAIT_FOREVER (-1)
#define TRIB_TIMEOUT_DEFAULT (-2)

/* ---- Communicator configuration ---------------------------------------------------------- */
/* Always initialise with TRIB_CONFIG_INITIALIZER: size and version let the library accept
 * structs from older headers. Fields left at TRIB_CONFIG_UNDEF_* take the environment's value.
 * Versioning rule: the fields from size to chunkBytes are frozen (TRIB_CONFIG_MIN_SIZE bytes: a
 * smaller size, or a wrong magic, is tribInvalidArgument); new fields are only appended, and each
 * is read only when the caller's size covers it and its version is at least the release that added
 * it; otherwise it takes its default. A version older than TRIB_CONFIG_FIRST_VERSION is refused.
 * blocking = 0 makes tribCommInitRankConfig return at once (see there). */
#define TRIB_CONFIG_UNDEF_INT INT32_MIN
#define TRIB_CONFIG_UNDEF_PTR NULL
typedef struct {
  size_t size;           /* sizeof(tribConfig_t) */
  unsigned int magic;    /* TRIB_CONFIG_MAGIC */
  unsigned int version;  /* TRIB_VERSION_CODE of the header compiled against */
  int blocking;          /* 1: init returns when ready (default); 0: non-blocking init */
  int timeoutMs;         /* every wait's timeout; overrides TRIB_TIMEOUT (ms) */
  const char* algo;      /* like TRIB_ALGO, e.g. "ring" or "allreduce:rhd;broadcast:chain" */
  const char* transport; /* like TRIB_TRANSPORT */
  const char* commName;  /* shown in logs */
  int chunkBytes;        /* pipeline chunk size; like TRIB_CHUNK_BYTES */
  int shareTransports;   /* 1: share the process's transport contexts (a UCX worker) with its other
                            communicators, 0: its own; like TRIB_SHARE_TRANSPORTS (NCCL's splitShare) */
} tribConfig_t;

#define TRIB_CONFIG_MAGIC 0x54524942u /* "TRIB" */
#define TRIB_CONFIG_MIN_SIZE (offsetof(tribConfig_t, chunkBytes) + sizeof(int))
#define TRIB_CONFIG_FIRST_VERSION 100u /* 0.1.0 */
#define TRIB_CONFIG_INITIALIZER                                                                     \
  {                                                                                                 \
    sizeof(tribConfig_t), TRIB_CONFIG_MAGIC, TRIB_VERSION_CODE, TRIB_CONFIG_UNDEF_INT,              \
        TRIB_CONFIG_UNDEF_INT, TRIB_CONFIG_UNDEF_PTR, TRIB_CONFIG_UNDEF_PTR, TRIB_CONFIG_UNDEF_PTR, \
        TRIB_CONFIG_UNDEF_INT, TRIB_CONFIG_UNDEF_INT                                                \
  }

/* ---- Library and errors ------------------------------------------------------------------ */
TRIB_API tribResult_t tribGetVersion(int* version);
TRIB_API const char* tribGetErrorString(tribResult_t result);
/* The message of the last failed call on this thread ("" if none). Valid until the next call. */
TRIB_API const char* tribGetLastError(tribComm_t comm);
TRIB_API const char* tribDataTypeName(tribDataType_t dtype);
TRIB_API const char* tribRedOpName(tribRedOp_t op);
TRIB_API tribResult_t tribDataTypeSize(tribDataType_t dtype, size_t* bytes);

/* ---- Shareable memory -------------------------------------------------------------------- *
 * Host memory that the other processes of a communicator on this host can map (as ncclMemAlloc).
 * Any call accepts it like any other memory; an all-reduce whose input and output buffers on every
 * rank of a one-host communicator come from here runs without staging copies: each rank reduces
 * its slice straight from the others' inputs and writes it into their outputs. tribMemFree takes
 * only what tribMemAlloc returned (NULL is a no-op); memory a peer has mapped is released when that
 * peer's communicator is destroyed. The pages are MAP_SHARED: a child made by fork() shares them
 * with its parent instead of getting a copy. */
TRIB_API tribResult_t tribMemAlloc(void** ptr, size_t size);
TRIB_API tribResult_t tribMemFree(void* ptr);
/* The device form (ncclMemAlloc's): CUDA device memory of the calling thread's current device, a
 * VMM allocation rounded up to its granularity and exportable to the other processes of the host
 * (POSIX file-descriptor handle); freed by tribMemFree, which first waits for the device's work.
 * Without CUDA, a driver or a device: tribUnhandledCudaError "no CUDA driver/device: ...". */
TRIB_API tribResult_t tribMemAllocDevice(void** ptr, size_t size);

/* ---- Buffer registration ----------------------------------------------------------------- *
 * As ncclCommRegister: register a buffer the communicator's calls will use again and again, so that
 * transports that must prepare memory (an RDMA memory region, a CUDA IPC handle) do it once; every
 * call on a registered buffer is planned and run with that knowledge. Unregistered buffers work as
 * well, and tribMemAlloc memory counts as registered without a call. Host memory that is a shared
 * file mapping (a memfd, a /dev/shm file, MAP_SHARED|MAP_ANONYMOUS memory) is then mapped by the
 * communicator's peers on this host once and read in place, as tribMemAlloc memory is (no staging
 * copy into the peer windows); private memory (malloc, the stack) cannot be mapped by another
 * process, and registering it only records the range. Device memory: docs/CUDA.md. The memory
 * must stay mapped until tribCommDeregister or tribCommDestroy. Errors
 * (tribInvalidArgument, nothing registered): a NULL buffer or handle, 0 bytes, memory not mapped in
 * this process (freed with munmap; free() that keeps pages cannot be seen), a range that overlaps
 * one of this communicator's registrations; deregistering NULL, a handle twice, or another
 * communicator's handle. */
TRIB_API tribResult_t tribCommRegister(const tribComm_t comm, void* buff, size_t size, void** handle);
TRIB_API tribResult_t tribCommDeregister(const tribComm_t comm, void* handle);

/* ---- Communicators ------------------------------------------------------------------------ */
/* The calling process serves the id's rendezvous (a TCP store). It may fork() workers
 * after this call (the children join with the id, over any transport); a communicator, though,
 * belongs to the process that created it: in a fork()ed child every call on it, tribCommDestroy
 * included, fails with tribInvalidUsage. */
TRIB_API tribResult_t tribGetUniqueId(tribUniqueId* uniqueId);
/* Join communicator `uniqueId` as `rank` of `nranks`. Blocks until all ranks joined or timeout. */
TRIB_API tribResult_t tribCommInitRank(tribComm_t* comm, int nranks, tribUniqueId commId, int rank);
/* With config->blocking = 0 it returns at once: *comm is set, tribInProgress is returned (after the
 * arguments and config were checked), and the ranks join in the background (bounded by the
 * timeout). Until joined, tribCommGetAsyncError reports tribInProgress and every other call on comm
 * returns tribInProgress without doing anything; then it reports tribSuccess, or the init's
 * error (every call then returns that error; tribCommDestroy frees it). tribCommAbort during the
 * join returns at once and ends the join: its attempts to reach the store and its waits on the
 * other ranks there stop within a quarter of a second and the init's error becomes tribAborted
 * (a join that had already made the communicator is aborted instead). tribCommDestroy waits for
 * the join to end. */
TRIB_API tribResult_t tribCommInitRankConfig(tribComm_t* comm, int nranks, tribUniqueId commId, int rank,
                                             const tribConfig_t* config);
/* As tribCommInitRankConfig, with the rendezvous spread over nIds stores (as ncclCommInitRankScalable):
 * ids are nIds unique ids from tribGetUniqueId (any processes), the same on every rank, in the same
 * order. Rank r meets the others through store r*nIds/nranks; the first rank of each store also
 * writes to every other, so each store carries about nranks/nIds + nIds connections and 1/nIds of
 * the traffic one store would (docs/BOOTSTRAP.md). nIds = 1 is tribCommInitRankConfig with ids[0].
 * Errors: tribInvalidArgument for nIds outside 1..nranks, NULL ids, an id that is not valid (naming
 * its index) or the same id twice; tribInvalidUsage when ranks were given other nranks or ids;
 * tribTimeout (within config's timeout) naming the ranks or stores that did not arrive. */
TRIB_API tribResult_t tribCommInitRankScalable(tribComm_t* comm, int nranks, int rank, int nIds,
                                               const tribUniqueId* ids, const tribConfig_t* config);
/* Create `ndev` ranks in this process (threads; the loopback transport). devlist may be NULL (host
 * programs; a rank's stream-ordered calls then run on their buffers' device); else rank r's
 * stream-ordered calls run on CUDA device devlist[r] (entries may repeat: ranks sharing a GPU), and
 * a device buffer of another device is refused. tribInvalidArgument for a negative entry or one the
 * driver does not have; without a CUDA driver or in a build without CUDA, a devlist is refused
 * with that reason. */
TRIB_API tribResult_t tribCommInitAll(tribComm_t* comms, int ndev, const int* devlist);
/* Create a communicator from the launcher's environment: TRIB_RANK/TRIB_NRANKS, torchrun (RANK,
 * WORLD_SIZE, MASTER_ADDR/PORT), Open MPI (OMPI_COMM_WORLD_*), Slurm (SLURM_*), MPICH/PMI (PMI_*),
 * in that order; the store from TRIB_STORE, MASTER_ADDR:MASTER_PORT or TRIB_STORE_DIR. */
TRIB_API tribResult_t tribCommInitFromEnv(tribComm_t* comm, const tribConfig_t* config);
/* Ranks with the same color form a new communicator, ordered by (key, old rank).
 * color TRIB_SPLIT_NOCOLOR returns *newcomm = NULL. Collective over comm. */
TRIB_API tribResult_t tribCommSplit(tribComm_t comm, int color, int key, tribComm_t* newcomm,
                                    const tribConfig_t* config);
/* Fault tolerance (as ncclCommShrink): a new communicator of comm's ranks except the
 * excludeCount ranks in excludeRanks (the same list on every caller), in their old order, made by
 * those ranks alone: the excluded ones (dead, say) do not call it, and nothing runs on comm, so a
 * comm broken by a peer's failure or aborted can be shrunk. TRIB_SHRINK_ABORT aborts comm first
 * (its blocked calls return). Ranks in other processes meet through comm's store, so the process
 * that served the unique id must survive. Errors (tribInvalidArgument): a NULL list with a count,
 * ranks out of range or repeated, the caller excluded, or all ranks excluded; flags not listed. */
#define TRIB_SHRINK_DEFAULT 0x00
#define TRIB_SHRINK_ABORT 0x01
TRIB_API tribResult_t tribCommShrink(tribComm_t comm, const int* excludeRanks, int excludeCount,
                                     tribComm_t* newcomm, const tribConfig_t* config, int flags);
/* Finish outstanding work (waits with the timeout), then stop accepting new work. */
TRIB_API tribResult_t tribCommFinalize(tribComm_t comm);
TRIB_API tribResult_t tribCommDestroy(tribComm_t comm);
/* Abort: safe from any thread; every blocked or later call on comm returns tribAborted. */
TRIB_API tribResult_t tribCommAbort(tribComm_t comm);
/* tribSuccess, tribInProgress, or the error that broke the communicator. */
TRIB_API tribResult_t tribCommGetAsyncError(tribComm_t comm, tribResult_t* asyncError);
TRIB_API tribResult_t tribCommCount(const tribComm_t comm, int* count);
TRIB_API tribResult_t tribCommUserRank(const tribComm_t comm, int* rank);

/* ---- Collectives: blocking form ---------------------------------------------------------- *
 * Host memory with stream NULL: returns once complete. Stream-ordered (a stream given, or device
 * memory; as NCCL): enqueued on the stream and returns at once; the stream's earlier work is done
 * before it starts, its later work waits for it; a failure, timeout (TRIB_TIMEOUT) or
 * tribCommAbort lets the stream go on and is reported by tribCommGetAsyncError. Both buffers must
 * be device memory (of the communicator's device) or both host memory. Ranks driven by one thread
 * that share a stream must make their calls in a group. See docs/CUDA.md. *
 * Counts are per rank as in NCCL: AllGather sendcount elements in, nranks*sendcount out;
 * ReduceScatter recvcount out, nranks*recvcount in; AlltoAll count per peer. In-place:
 * sendbuff == recvbuff (AllReduce, Broadcast, Reduce at root), or sendbuff ==
 * recvbuff + rank*count (AllGather), or recvbuff == sendbuff + rank*recvcount (ReduceScatter).
 * NULL: a buffer this rank does not use may be NULL, as in NCCL: recvbuff of Reduce and Gather
 * off the root, sendbuff of Broadcast and Scatter off the root, both buffers when count is 0.
 * A NULL buffer the rank does use is refused with tribInvalidArgument, and so is one not aligned
 * to its datatype's size. */
TRIB_API tribResult_t tribAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                    tribDataType_t datatype, tribRedOp_t op, tribComm_t comm,
                                    tribStream_t stream);
TRIB_API tribResult_t tribReduce(const void* sendbuff, void* recvbuff, size_t count, tribDataType_t datatype,
                                 tribRedOp_t op, int root, tribComm_t comm, tribStream_t stream);
TRIB_API tribResult_t tribBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                    tribDataType_t datatype, int root, tribComm_t comm, tribStream_t stream);
TRIB_API tribResult_t tribAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                    tribDataType_t datatype, tribComm_t comm, tribStream_t stream);
TRIB_API tribResult_t tribReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                        tribDataType_t datatype, tribRedOp_t op, tribComm_t comm,
                                        tribStream_t stream);
TRIB_API tribResult_t tribAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                                   tribDataType_t datatype, tribComm_t comm, tribStream_t stream);
/* Gather: root receives nranks*count; Scatter: root sends nranks*count. */
TRIB_API tribResult_t tribGather(const void* sendbuff, void* recvbuff, size_t count, tribDataType_t datatype,
                                 int root, tribComm_t comm, tribStream_t stream);
TRIB_API tribResult_t tribScatter(const void* sendbuff, void* recvbuff, size_t count, tribDataType_t datatype,
                                  int root, tribComm_t comm, tribStream_t stream);
TRIB_API tribResult_t tribSend(const void* sendbuff, size_t count, tribDataType_t datatype, int peer,
                               tribComm_t comm, tribStream_t stream);
TRIB_API tribResult_t tribRecv(void* recvbuff, size_t count, tribDataType_t datatype, int peer,
                               tribComm_t comm, tribStream_t stream);
TRIB_API tribResult_t tribBarrier(tribComm_t comm, tribStream_t stream);

/* ---- Collectives: non-blocking form ------------------------------------------------------ *
 * Same arguments; returns at once with *request. Buffers must stay valid until complete. Host
 * memory only: device memory is refused (tribInvalidUsage), use the stream form.
 * Progress happens inside tribTest/tribWait (and any blocking call on the communicator). */
TRIB_API tribResult_t tribIallReduce(const void* sendbuff, void* recvbuff, size_t count,
                                     tribDataType_t datatype, tribRedOp_t op, tribComm_t comm,
                                     tribRequest_t* request);
TRIB_API tribResult_t tribIreduce(const void* sendbuff, void* recvbuff, size_t count, tribDataType_t datatype,
                                  tribRedOp_t op, int root, tribComm_t comm, tribRequest_t* request);
TRIB_API tribResult_t tribIbroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                     tribDataType_t datatype, int root, tribComm_t comm,
                                     tribRequest_t* request);
TRIB_API tribResult_t tribIallGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                     tribDataType_t datatype, tribComm_t comm, tribRequest_t* request);
TRIB_API tribResult_t tribIreduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                         tribDataType_t datatype, tribRedOp_t op, tribComm_t comm,
                                         tribRequest_t* request);
TRIB_API tribResult_t tribIalltoAll(const void* sendbuff, void* recvbuff, size_t count,
                                    tribDataType_t datatype, tribComm_t comm, tribRequest_t* request);
TRIB_API tribResult_t tribIgather(const void* sendbuff, void* recvbuff, size_t count, tribDataType_t datatype,
                                  int root, tribComm_t comm, tribRequest_t* request);
TRIB_API tribResult_t tribIscatter(const void* sendbuff, void* recvbuff, size_t count,
                                   tribDataType_t datatype, int root, tribComm_t comm,
                                   tribRequest_t* request);
TRIB_API tribResult_t tribIsend(const void* sendbuff, size_t count, tribDataType_t datatype, int peer,
                                tribComm_t comm, tribRequest_t* request);
TRIB_API tribResult_t tribIrecv(void* recvbuff, size_t count, tribDataType_t datatype, int peer,
                                tribComm_t comm, tribRequest_t* request);
TRIB_API tribResult_t tribIbarrier(tribComm_t comm, tribRequest_t* request);

/* *done = 1 when complete (the request is then freed and set to NULL); returns its error if it failed. */
TRIB_API tribResult_t tribTest(tribRequest_t* request, int* done);
/* Wait up to timeoutMs (0 polls; TRIB_WAIT_FOREVER; TRIB_TIMEOUT_DEFAULT for the communicator's
 * timeout). Once complete (or failed) the request is freed and set to NULL. When a timeout the
 * caller chose passes (0 included), tribTimeout is returned quietly and the request stays valid.
 * When the communicator's own timeout passes, that is logged as a warning, the communicator is
 * broken and the request is freed: the result is tribTimeout and *request is NULL. */
TRIB_API tribResult_t tribWait(tribRequest_t* request, int timeoutMs);
/* Free a request without waiting: only legal once complete or after abort. */
TRIB_API tribResult_t tribRequestFree(tribRequest_t* request);

/* ---- Pre-multiplied sums ----------------------------------------------------------------- *
 * As NCCL's ncclRedOpCreatePreMulSum (gradient pre-scaling): an operator that multiplies each
 * rank's input by `scalar` (one element of `datatype`, multiplied in that type) and then sums.
 * Usable with comm's reduction collectives (AllReduce, Reduce, ReduceScatter; blocking, grouped
 * and non-blocking) on `datatype` only; its value is tribNumOps or above, unique on comm.
 * tribScalarHostImmediate copies the scalar now; tribScalarDevice keeps the pointer and reads it
 * at each call (it must be host memory: a CUDA device scalar is tribNotSupported). A call reads
 * the scalar when it is made (a grouped host call also scales its input then; a stream-ordered
 * call scales its input on the stream, when the stream reaches it, on device memory by the
 * device's kernels), so the operator may be destroyed as soon as the last call given it has
 * returned. */
typedef enum {
  tribScalarDevice = 0,
  tribScalarHostImmediate = 1,
  tribScalarResidence_MAX_ENUM = 0x7fffffff
} tribScalarResidence_t;
TRIB_API tribResult_t tribRedOpCreatePreMulSum(tribRedOp_t* op, void* scalar, tribDataType_t datatype,
                                               tribScalarResidence_t residence, tribComm_t comm);
TRIB_API tribResult_t tribRedOpDestroy(tribRedOp_t op, tribComm_t comm);

/* ---- Group calls ------------------------------------------------------------------------- *
 * Between tribGroupStart and tribGroupEnd, blocking collectives, sends, receives and splits are
 * validated (bad input fails the call) and queued; the outermost tribGroupEnd launches them
 * together, in call order, and waits for all. Required when one thread drives several ranks.
 * Nestable. */
TRIB_API tribResult_t tribGroupStart(void);
TRIB_API tribResult_t tribGroupEnd(void);

/* ---- Group simulation -------------------------------------------------------------------- *
 * As NCCL's ncclGroupSimulateEnd: ends the outermost group without running it. Its calls (host
 * and stream-ordered) are dropped: no data moves and no buffer is read or written (a
 * pre-multiplied sum's input was scaled when its call was made). info->estimatedTime is set to
 * the predicted time of running them, in microseconds: each collective planned as at launch and its
 * schedule run by the simulator on the communicator's topology (what `trib-plan --simulate`
 * prints for that call); calls of one communicator add up, different communicators' (ranks one
 * thread drives) overlap, so it is the largest sum over communicators. Sends and receives are
 * dropped and not timed. Refused, changing nothing (the group stays open): outside a group or in
 * a nested one (tribInvalidUsage), a group holding a split (tribInvalidUsage), an info that is
 * NULL, smaller than TRIB_SIM_INFO_MIN_SIZE, of another magic or older than
 * TRIB_SIM_INFO_FIRST_VERSION (tribInvalidArgument). A collective the planner or simulator
 * cannot estimate fails it (the group is ended and dropped all the same). */
typedef struct {
  size_t size;          /* sizeof(tribSimInfo_t) */
  unsigned int magic;   /* TRIB_SIM_INFO_MAGIC */
  unsigned int version; /* TRIB_VERSION_CODE of the header compiled against */
  float estimatedTime;  /* out: microseconds */
} tribSimInfo_t;
#define TRIB_SIM_INFO_MAGIC 0x5452534du /* "TRSM" */
#define TRIB_SIM_INFO_MIN_SIZE (offsetof(tribSimInfo_t, estimatedTime) + sizeof(float))
#define TRIB_SIM_INFO_FIRST_VERSION 100u /* 0.1.0 */
#define TRIB_SIM_INFO_INITIALIZER \
  { sizeof(tribSimInfo_t), TRIB_SIM_INFO_MAGIC, TRIB_VERSION_CODE, -1.0f }
TRIB_API tribResult_t tribGroupSimulateEnd(tribSimInfo_t* info);

#ifdef __cplusplus
}
#endif

#endif /* TRIBUTARY_H_ */
