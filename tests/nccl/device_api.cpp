// nccl_device/core.h's host functions, compiled against NCCL's real header and run on Tributary's
// libnccl.so.2: teams of a communicator's ranks, and the device communicator refused clearly.
#include <nccl.h>
#include <nccl_device/core.h>

#include <cstdio>
#include <cstring>

static int failures = 0;
#define CHECK(cond, ...)                                                   \
  do {                                                                     \
    if (!(cond)) {                                                         \
      std::fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                   \
      std::fprintf(stderr, "\n");                                          \
      ++failures;                                                          \
    }                                                                      \
  } while (0)

static bool same(ncclTeam_t a, int n, int rank, int stride) {
  return a.nRanks == n && a.rank == rank && a.stride == stride;
}

int main() {
  constexpr int kRanks = 3;
  ncclComm_t comms[kRanks];
  if (ncclCommInitAll(comms, kRanks, nullptr) != ncclSuccess) {
    std::fprintf(stderr, "FAIL ncclCommInitAll: %s\n", ncclGetLastError(nullptr));
    return 1;
  }
  for (int r = 0; r < kRanks; ++r) {
    const ncclTeam_t world = ncclTeamWorld(comms[r]), lsa = ncclTeamLsa(comms[r]),
                     rail = ncclTeamRail(comms[r]);
    CHECK(same(world, kRanks, r, 1), "world team of rank %d: {%d, %d, %d}", r, world.nRanks, world.rank,
          world.stride);
    CHECK(same(lsa, 1, 0, 1), "LSA team of rank %d: {%d, %d, %d}", r, lsa.nRanks, lsa.rank, lsa.stride);
    CHECK(same(rail, kRanks, r, 1), "rail team of rank %d: {%d, %d, %d}", r, rail.nRanks, rail.rank,
          rail.stride);
    for (int k = 0; k < kRanks; ++k) {
      CHECK(ncclTeamRankToWorld(comms[r], world, k) == k, "rank %d: world rank %d -> %d", r, k,
            ncclTeamRankToWorld(comms[r], world, k));
      CHECK(ncclTeamRankToWorld(comms[r], rail, k) == k, "rank %d: rail rank %d", r, k);
    }
    CHECK(ncclTeamRankToWorld(comms[r], lsa, 0) == r, "rank %d: its LSA rank 0 is itself", r);
    CHECK(ncclTeamRankToLsa(comms[r], lsa, 0) == 0, "rank %d: LSA rank of itself", r);
  }
  CHECK(ncclTeamRankToWorld(comms[0], ncclTeamWorld(comms[0]), kRanks) == -1, "a rank outside the team");
  CHECK(std::strstr(ncclGetLastError(nullptr), "outside the team") != nullptr, "message: %s",
        ncclGetLastError(nullptr));
  const ncclTeam_t none = ncclTeamWorld(nullptr);
  CHECK(none.nRanks == 0, "a NULL communicator's team has %d ranks", none.nRanks);
  CHECK(std::strstr(ncclGetLastError(nullptr), "comm is NULL") != nullptr, "message: %s",
        ncclGetLastError(nullptr));
  // The device communicator needs NCCL's device runtime: refused, never a silent success.
  ncclDevCommRequirements_t reqs;
  std::memset(&reqs, 0, sizeof reqs);
  ncclDevComm_t* dev = nullptr;
  const ncclResult_t res = ncclDevCommCreate(comms[0], &reqs, dev);
  CHECK(res == ncclInvalidUsage, "ncclDevCommCreate returned %d", static_cast<int>(res));
  CHECK(std::strstr(ncclGetLastError(nullptr), "device-side API") != nullptr, "message: %s",
        ncclGetLastError(nullptr));
  for (int r = 0; r < kRanks; ++r) ncclCommDestroy(comms[r]);
  std::printf("device API host functions: %s\n",
              failures ? "FAILED" : "teams correct, device communicator refused");
  return failures ? 1 : 0;
}
