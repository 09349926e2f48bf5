/* A user's program, built against an installed Tributary (pkg-config or find_package): two thread
 * ranks all-reduce and check the sum. Exit status 0 only if every element is right. */
#include <pthread.h>
#include <stdio.h>
#include <tributary/tributary.h>

#define N 2
#define COUNT 4096
static tribComm_t comms[N];
static int failed[N];

static void* rank_main(void* arg) {
  int rank = (int)(long)arg;
  static float data[N][COUNT];
  for (int i = 0; i < COUNT; ++i) data[rank][i] = (float)(rank + 1) * (float)(i % 7);
  tribResult_t r = tribAllReduce(data[rank], data[rank], COUNT, tribFloat32, tribSum, comms[rank], NULL);
  if (r != tribSuccess) {
    fprintf(stderr, "rank %d: %s\n", rank, tribGetLastError(comms[rank]));
    failed[rank] = 1;
    return NULL;
  }
  for (int i = 0; i < COUNT; ++i) {
    if (data[rank][i] != 3.0f * (float)(i % 7)) { /* (1 + 2) x (i % 7) */
      fprintf(stderr, "rank %d: element %d is %g, expected %g\n", rank, i, data[rank][i], 3.0 * (i % 7));
      failed[rank] = 1;
      return NULL;
    }
  }
  return NULL;
}

int main(void) {
  pthread_t t[N];
  if (tribCommInitAll(comms, N, NULL) != tribSuccess) {
    fprintf(stderr, "tribCommInitAll failed\n");
    return 1;
  }
  for (long r = 0; r < N; ++r) pthread_create(&t[r], NULL, rank_main, (void*)r);
  for (int r = 0; r < N; ++r) pthread_join(t[r], NULL);
  int bad = 0;
  for (int r = 0; r < N; ++r) {
    bad |= failed[r];
    if (tribCommDestroy(comms[r]) != tribSuccess) bad = 1;
  }
  if (!bad) printf("installed tributary: all-reduce over %d ranks correct\n", N);
  return bad;
}
