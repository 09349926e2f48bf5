/* The README's C example, verbatim: built against the shared library and run as a test. */
#include <stdio.h>
#include <pthread.h>
#include <tributary/tributary.h>

#define N 4
static tribComm_t comms[N];

static void* rank_main(void* arg) {
  int rank = (int)(long)arg;
  float data[1024];
  for (int i = 0; i < 1024; ++i) data[i] = (float)rank;
  tribResult_t r = tribAllReduce(data, data, 1024, tribFloat32, tribSum, comms[rank], NULL);
  if (r != tribSuccess) fprintf(stderr, "rank %d: %s\n", rank, tribGetLastError(comms[rank]));
  else if (rank == 0) printf("sum = %.0f (expect %d)\n", data[0], N * (N - 1) / 2);
  return NULL;
}

int main(void) {
  pthread_t t[N];
  tribCommInitAll(comms, N, NULL);               /* N ranks in this process */
  for (long r = 0; r < N; ++r) pthread_create(&t[r], NULL, rank_main, (void*)r);
  for (int r = 0; r < N; ++r) pthread_join(t[r], NULL);
  for (int r = 0; r < N; ++r) tribCommDestroy(comms[r]);
  return 0;
}
