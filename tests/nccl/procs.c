/* Every NCCL collective over processes: the parent makes the id with ncclGetUniqueId and fork()s
 * the other ranks, each joins with ncclCommInitRank (one of them through ncclCommInitRankConfig,
 * non-blocking), as multi-process NCCL programs do. Calls are made plain and in groups. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "checks.h"

static int rankMain(ncclUniqueId id, int nranks, int rank) {
  ncclComm_t comm = NULL;
  ncclResult_t r;
  if (rank == nranks - 1) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    config.commName = "nccl-procs";
    r = ncclCommInitRankConfig(&comm, nranks, id, rank, &config);
    /* Non-blocking: ncclInProgress until ready, polled as NCCL programs do (bounded). */
    for (int i = 0; r == ncclInProgress && i < 60000; ++i) {
      struct timespec ms = {0, 1000000};
      nanosleep(&ms, NULL);
      if (ncclCommGetAsyncError(comm, &r) != ncclSuccess) break;
    }
  } else {
    r = ncclCommInitRank(&comm, nranks, id, rank);
  }
  if (r != ncclSuccess) {
    fprintf(stderr, "FAIL rank %d init: %s: %s\n", rank, ncclGetErrorString(r), ncclGetLastError(NULL));
    return 1;
  }
  int failures = ncclCheckAll(&comm, 1, 0);
  if (!failures) failures += ncclCheckAll(&comm, 1, 1);
  if (!failures) failures += ncclCheckBadInput(comm);
  if (!failures && nranks >= 3 && rank != nranks - 1) {
    /* The others go on without the last rank (which calls nothing). */
    int exclude[1] = {nranks - 1};
    ncclComm_t shrunk = NULL;
    r = ncclCommShrink(comm, exclude, 1, &shrunk, NULL, NCCL_SHRINK_DEFAULT);
    if (r != ncclSuccess) {
      fprintf(stderr, "FAIL rank %d ncclCommShrink: %s: %s\n", rank, ncclGetErrorString(r),
              ncclGetLastError(NULL));
      ++failures;
    } else {
      int n = 0;
      ncclCommCount(shrunk, &n);
      if (n != nranks - 1) {
        fprintf(stderr, "FAIL rank %d: shrunk communicator has %d ranks\n", rank, n);
        ++failures;
      }
      failures += ncclCheckAll(&shrunk, 1, 0);
      ncclCommDestroy(shrunk);
    }
  }
  ncclResult_t async = ncclInternalError;
  if (ncclCommGetAsyncError(comm, &async) != ncclSuccess || async != ncclSuccess) {
    fprintf(stderr, "FAIL rank %d async error %d\n", rank, (int)async);
    ++failures;
  }
  if (ncclCommFinalize(comm) != ncclSuccess || ncclCommDestroy(comm) != ncclSuccess) {
    fprintf(stderr, "FAIL rank %d finalize/destroy: %s\n", rank, ncclGetLastError(NULL));
    ++failures;
  }
  return failures ? 1 : 0;
}

int main(int argc, char** argv) {
  const int nranks = argc > 1 ? atoi(argv[1]) : 3;
  ncclUniqueId id;
  ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) {
    fprintf(stderr, "FAIL ncclGetUniqueId: %s\n", ncclGetLastError(NULL));
    return 1;
  }
  pid_t pids[16];
  for (int rank = 1; rank < nranks; ++rank) {
    pids[rank] = fork();
    if (pids[rank] == 0) _exit(rankMain(id, nranks, rank));
  }
  int failures = rankMain(id, nranks, 0);
  for (int rank = 1; rank < nranks; ++rank) {
    int status = 0;
    waitpid(pids[rank], &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "FAIL rank %d exited with status 0x%x\n", rank, status);
      ++failures;
    }
  }
  printf("%d ranks over processes: %s\n", nranks, failures ? "FAILED" : "all collectives correct");
  return failures ? 1 : 0;
}
