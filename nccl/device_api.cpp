// nccl_device/core.h's host functions. Teams are arithmetic on a communicator's ranks, provided.
// The LSA team (the ranks whose memory this rank's kernels load and store through NCCL's
// device-side API) is the rank alone: Tributary has no device-side API, so no peer's memory is
// mapped for kernels, which is what NCCL reports on a system without such peers (lsaSize 1);
// the rail team (ranks at the same LSA index) is then the world. Making a device communicator
// and its resources needs NCCL's device runtime: refused, with a message, never a silent success.
#include "nccl/compat_comm.hpp"
#include "nccl/translate.hpp"

using tribnccl::fail;

#define NCCL_EXPORT extern "C" __attribute__((visibility("default")))
#define NCCL_ALIAS(name) \
  extern "C" __attribute__((visibility("default"), weak, alias("p" #name))) decltype(p##name) name;

namespace {

// comm's size and rank; false (the last error set) for a NULL or unusable communicator.
bool worldOf(const char* fn, ncclComm_t comm, int* n, int* rank) {
  if (!comm || !comm->trib) {
    fail(ncclInvalidArgument, "%s: comm is NULL", fn);
    return false;
  }
  if (tribCommCount(comm->trib, n) != tribSuccess || tribCommUserRank(comm->trib, rank) != tribSuccess) {
    fail(ncclInvalidUsage, "%s: %s", fn, tribGetLastError(comm->trib));
    return false;
  }
  return true;
}

ncclResult_t noDeviceApi(const char* fn) {
  return fail(ncclInvalidUsage,
              "%s is not supported by Tributary's NCCL library: NCCL's device-side API (nccl_device.h) needs "
              "NCCL's device runtime, which Tributary lacks (docs/NCCL.md)",
              fn);
}

}  // namespace

// A NULL or unusable communicator gives an empty team (0 ranks) and sets the last error.
NCCL_EXPORT ncclTeam_t pncclTeamWorld(ncclComm_t comm) {
  int n = 0, rank = 0;
  if (!worldOf("ncclTeamWorld", comm, &n, &rank)) return ncclTeam_t{0, 0, 1};
  return ncclTeam_t{n, rank, 1};
}
NCCL_ALIAS(ncclTeamWorld)

NCCL_EXPORT ncclTeam_t pncclTeamLsa(ncclComm_t comm) {
  int n = 0, rank = 0;
  if (!worldOf("ncclTeamLsa", comm, &n, &rank)) return ncclTeam_t{0, 0, 1};
  return ncclTeam_t{1, 0, 1};
}
NCCL_ALIAS(ncclTeamLsa)

// The outer factor of the LSA team: world ranks / LSA size, strided by the LSA size (1).
NCCL_EXPORT ncclTeam_t pncclTeamRail(ncclComm_t comm) {
  int n = 0, rank = 0;
  if (!worldOf("ncclTeamRail", comm, &n, &rank)) return ncclTeam_t{0, 0, 1};
  return ncclTeam_t{n, rank, 1};
}
NCCL_ALIAS(ncclTeamRail)

// Team rank `r` of `team` (which holds this rank) as a world rank, or as an LSA rank (this
// rank's is 0); -1 (the last error set) when comm is unusable or `r` is outside the team.
static int teamRank(const char* fn, ncclComm_t comm, ncclTeam_t team, int r, bool world) {
  int n = 0, rank = 0;
  if (!worldOf(fn, comm, &n, &rank)) return -1;
  if (r < 0 || r >= team.nRanks) {
    fail(ncclInvalidArgument, "%s: rank %d is outside the team of %d ranks", fn, r, team.nRanks);
    return -1;
  }
  return (world ? rank : 0) + (r - team.rank) * team.stride;
}

NCCL_EXPORT int pncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int r) {
  return teamRank("ncclTeamRankToWorld", comm, team, r, true);
}
NCCL_ALIAS(ncclTeamRankToWorld)

NCCL_EXPORT int pncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int r) {
  return teamRank("ncclTeamRankToLsa", comm, team, r, false);  // this rank's LSA rank is 0
}
NCCL_ALIAS(ncclTeamRankToLsa)

NCCL_EXPORT ncclResult_t pncclDevCommCreate(ncclComm_t, const ncclDevCommRequirements_t*, ncclDevComm_t*) {
  return noDeviceApi("ncclDevCommCreate");
}
NCCL_ALIAS(ncclDevCommCreate)

NCCL_EXPORT ncclResult_t pncclDevCommDestroy(ncclComm_t, const ncclDevComm_t*) {
  return noDeviceApi("ncclDevCommDestroy");
}
NCCL_ALIAS(ncclDevCommDestroy)

NCCL_EXPORT ncclResult_t pncclLsaBarrierCreateRequirement(ncclTeam_t, int, ncclLsaBarrierHandle_t*,
                                                          ncclDevResourceRequirements_t*) {
  return noDeviceApi("ncclLsaBarrierCreateRequirement");
}
NCCL_ALIAS(ncclLsaBarrierCreateRequirement)

NCCL_EXPORT ncclResult_t pncclGinBarrierCreateRequirement(ncclComm_t, ncclTeam_t, int,
                                                          ncclGinBarrierHandle_t*,
                                                          ncclDevResourceRequirements_t*) {
  return noDeviceApi("ncclGinBarrierCreateRequirement");
}
NCCL_ALIAS(ncclGinBarrierCreateRequirement)

NCCL_EXPORT ncclResult_t pncclLLA2ACreateRequirement(int, int, ncclLLA2AHandle_t*,
                                                     ncclDevResourceRequirements_t*) {
  return noDeviceApi("ncclLLA2ACreateRequirement");
}
NCCL_ALIAS(ncclLLA2ACreateRequirement)
