/* The binary interface of NCCL 2.28's nccl.h, as far as the compatibility library needs it: the
 * numbering of its enums and the layout of its structs. Restated here so the library builds where
 * NCCL's header is absent; tests/nccl compiles programs against the real header, which proves these
 * values match it. Only the library's sources include this file. */
#ifndef TRIB_NCCL_ABI_H_
#define TRIB_NCCL_ABI_H_

#include <stddef.h>
#include <stdint.h>

/* The NCCL release whose API this library provides (NCCL_VERSION(2, 28, 9)). */
#define TRIB_NCCL_API_VERSION 22809

typedef struct ncclComm* ncclComm_t;
typedef struct ncclWindow_vidmem* ncclWindow_t;
typedef struct CUstream_st* cudaStream_t;

typedef struct {
  char internal[128];
} ncclUniqueId;

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8,
  ncclResult_MAX_ENUM = 0x7fffffff /* any int is a value the library can check */
} ncclResult_t;

typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5, /* the first value of an operator made by ncclRedOpCreatePreMulSum */
  ncclMaxRedOp = 0x7fffffff
} ncclRedOp_t;

typedef enum {
  ncclInt8 = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclFloat32 = 7,
  ncclFloat64 = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12,
  ncclDataType_MAX_ENUM = 0x7fffffff
} ncclDataType_t;

typedef enum {
  ncclScalarDevice = 0,
  ncclScalarHostImmediate = 1,
  ncclScalarResidence_MAX_ENUM = 0x7fffffff
} ncclScalarResidence_t;

#define TRIB_NCCL_CONFIG_MAGIC 0xcafebeefu
#define TRIB_NCCL_SIM_INFO_MAGIC 0x74685283u
#define TRIB_NCCL_UNDEF_INT INT32_MIN

/* ncclConfig_v22800: NCCL appends fields in new releases, so a caller's `size` says which it has. */
typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  int trafficClass;
  const char* commName;
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
} ncclConfig_t;

/* ncclSimInfo_v22200 */
typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime;
} ncclSimInfo_t;

/* nccl_device/core.h: a team of ranks (world rank = rank's + (r - rank) * stride), and the
 * device-side API's handles, opaque here. */
typedef struct ncclTeam {
  int nRanks, rank, stride;
} ncclTeam_t;
typedef struct ncclDevComm ncclDevComm_t;
typedef struct ncclDevCommRequirements ncclDevCommRequirements_t;
typedef struct ncclDevResourceRequirements ncclDevResourceRequirements_t;
typedef struct ncclLsaBarrierHandle ncclLsaBarrierHandle_t;
typedef struct ncclGinBarrierHandle ncclGinBarrierHandle_t;
typedef struct ncclLLA2AHandle ncclLLA2AHandle_t;

#endif /* TRIB_NCCL_ABI_H_ */
