/* Every NCCL collective over threads' ranks: ncclCommInitAll, one thread driving all ranks with
 * ncclGroupStart/End, as single-process multi-GPU NCCL programs do. Also ncclCommSplit. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "checks.h"

static int run(int nranks) {
  ncclComm_t comms[8];
  ncclResult_t r = ncclCommInitAll(comms, nranks, NULL);
  if (r != ncclSuccess) {
    fprintf(stderr, "FAIL ncclCommInitAll(%d): %s: %s\n", nranks, ncclGetErrorString(r),
            ncclGetLastError(NULL));
    return 1;
  }
  int failures = ncclCheckAll(comms, nranks, 1);
  /* nccl-tests' way: one id, every rank's ncclCommInitRank in one group. */
  ncclComm_t joined[8];
  ncclUniqueId id;
  r = ncclGetUniqueId(&id);
  if (r == ncclSuccess) {
    ncclGroupStart();
    for (int i = 0; i < nranks; ++i) ncclCommInitRank(&joined[i], nranks, id, i);
    r = ncclGroupEnd();
  }
  if (r != ncclSuccess) {
    fprintf(stderr, "FAIL grouped ncclCommInitRank: %s: %s\n", ncclGetErrorString(r), ncclGetLastError(NULL));
    ++failures;
  } else {
    if (!failures) failures += ncclCheckAll(joined, nranks, 1);
    for (int i = 0; i < nranks; ++i) ncclCommDestroy(joined[i]);
  }
  /* ncclCommInitRankScalable with two ids: the rendezvous spread over two stores. */
  if (!failures && nranks >= 2) {
    ncclUniqueId ids[2];
    r = ncclGetUniqueId(&ids[0]);
    if (r == ncclSuccess) r = ncclGetUniqueId(&ids[1]);
    if (r == ncclSuccess) {
      ncclGroupStart();
      for (int i = 0; i < nranks; ++i) ncclCommInitRankScalable(&joined[i], nranks, i, 2, ids, NULL);
      r = ncclGroupEnd();
    }
    if (r != ncclSuccess) {
      fprintf(stderr, "FAIL grouped ncclCommInitRankScalable: %s: %s\n", ncclGetErrorString(r),
              ncclGetLastError(NULL));
      ++failures;
    } else {
      failures += ncclCheckAll(joined, nranks, 1);
      for (int i = 0; i < nranks; ++i) ncclCommDestroy(joined[i]);
    }
  }
  if (!failures) failures += ncclCheckBadInput(comms[0]);
  if (!failures) failures += ncclCheckSimulate(comms, nranks);
  if (!failures && nranks >= 3) {
    /* Split into even and odd ranks; rank 1 opts out with NCCL_SPLIT_NOCOLOR. */
    ncclComm_t sub[8];
    ncclGroupStart();
    for (int i = 0; i < nranks; ++i)
      ncclCommSplit(comms[i], i == 1 ? NCCL_SPLIT_NOCOLOR : i % 2, -i, &sub[i], NULL);
    r = ncclGroupEnd();
    if (r != ncclSuccess) {
      fprintf(stderr, "FAIL ncclCommSplit: %s: %s\n", ncclGetErrorString(r), ncclGetLastError(NULL));
      ++failures;
    } else {
      ncclComm_t evens[8];
      int nEven = 0;
      for (int i = 0; i < nranks; ++i) {
        if (i == 1 && sub[i] != NULL) {
          fprintf(stderr, "FAIL NCCL_SPLIT_NOCOLOR gave a communicator\n");
          ++failures;
        }
        if (i % 2 == 0) evens[nEven++] = sub[i];
      }
      int rank0 = -1;
      ncclCommUserRank(evens[0], &rank0); /* key -i: the highest old rank comes first */
      if (rank0 != nEven - 1) {
        fprintf(stderr, "FAIL split rank of old rank 0 is %d, want %d\n", rank0, nEven - 1);
        ++failures;
      }
      if (!failures && nEven >= 2) failures += ncclCheckAll(evens, nEven, 1);
      for (int i = 0; i < nranks; ++i)
        if (sub[i]) ncclCommDestroy(sub[i]);
    }
  }
  for (int i = 0; i < nranks; ++i) {
    r = ncclCommDestroy(comms[i]);
    if (r != ncclSuccess) {
      fprintf(stderr, "FAIL ncclCommDestroy: %s\n", ncclGetLastError(NULL));
      ++failures;
    }
  }
  printf("%d ranks over threads: %s\n", nranks, failures ? "FAILED" : "all collectives correct");
  return failures;
}

/* ncclCommAbort from the main thread while another thread is blocked in a call on the
 * communicator (its peer never calls): the call returns, then the communicator is freed. */
typedef struct {
  ncclComm_t comm;
  ncclResult_t result;
} Blocked;

static void* blockedAllReduce(void* arg) {
  Blocked* b = (Blocked*)arg;
  float x = 1.0f;
  b->result = ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, b->comm, NULL);
  return NULL;
}

static int checkAbortFromAnotherThread(void) {
  ncclComm_t comms[2];
  if (ncclCommInitAll(comms, 2, NULL) != ncclSuccess) {
    fprintf(stderr, "FAIL ncclCommInitAll(2): %s\n", ncclGetLastError(NULL));
    return 1;
  }
  Blocked b = {comms[0], ncclSuccess};
  pthread_t t;
  pthread_create(&t, NULL, blockedAllReduce, &b);
  struct timespec pause = {0, 100 * 1000 * 1000};
  nanosleep(&pause, NULL);
  int failures = 0;
  ncclResult_t r = ncclCommAbort(comms[0]);
  if (r != ncclSuccess) {
    fprintf(stderr, "FAIL ncclCommAbort: %s: %s\n", ncclGetErrorString(r), ncclGetLastError(NULL));
    ++failures;
  }
  pthread_join(t, NULL);
  if (b.result != ncclInvalidUsage) {
    fprintf(stderr, "FAIL the blocked call returned %d, want ncclInvalidUsage (aborted)\n", (int)b.result);
    ++failures;
  }
  ncclCommDestroy(comms[1]);
  printf("abort from another thread: %s\n", failures ? "FAILED" : "the blocked call returned");
  return failures;
}

int main(int argc, char** argv) {
  /* Which libnccl.so.2 the loader picked (the drop-in test checks it is Tributary's). */
  Dl_info info;
  if (dladdr((void*)&ncclAllReduce, &info) && info.dli_fname)
    printf("ncclAllReduce from %s\n", info.dli_fname);
  int failures = 0;
  for (int i = 1; i < argc; ++i) failures += run(atoi(argv[i]));
  if (argc < 2) failures += run(2) + run(3);
  failures += checkAbortFromAnotherThread();
  return failures ? 1 : 0;
}
