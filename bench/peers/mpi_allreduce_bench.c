/* MPI_Allreduce bus-bandwidth benchmark, measured and reported exactly as trib-perf does (see
 * peer_common.h), so bench/compare.sh can put Open MPI next to Tributary. Run under mpirun:
 *   mpirun -np 2 build/bench/peers/mpi_allreduce_bench -b 8 -e 256M -J out.json */
#include <limits.h>
#include <mpi.h>

#include "peer_common.h"

static int fail(const char* what, int rc) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  fprintf(stderr, "mpi_allreduce_bench: %s failed: %s\n", what, msg);
  MPI_Abort(MPI_COMM_WORLD, 1);
  return 1;
}

int main(int argc, char** argv) {
  PeerOpts o;
  PeerRow rows[PEER_MAX_SIZES];
  uint64_t sizes[PEER_MAX_SIZES];
  int rank = 0, nranks = 1, rc, s, ip, it, nsizes, parsed;
  char library[MPI_MAX_LIBRARY_VERSION_STRING + 32], version[MPI_MAX_LIBRARY_VERSION_STRING];
  float *send, *recv;

  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  /* Errors come back as codes (reported with a message below), not as an abort inside MPI. */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if (rank != 0) opterr = 0; /* one usage message, not one per rank */
  parsed = peer_parse_args(argc, argv, 0, &o);
  if (parsed != 0) {
    MPI_Finalize();
    return parsed > 0 ? 0 : 2;
  }
  nsizes = peer_sizes(&o, sizes);
  if (peer_check_memory(argv[0], sizes[nsizes - 1], nranks) != 0) {
    MPI_Finalize();
    return 2;
  }
  if (sizes[nsizes - 1] / 4 > (uint64_t)INT_MAX) {
    if (rank == 0)
      fprintf(stderr, "mpi_allreduce_bench: --maxbytes %llu is over MPI's int count (%d floats); lower it\n",
              (unsigned long long)o.maxBytes, INT_MAX);
    MPI_Finalize();
    return 2;
  }
  {
    /* "Open MPI v4.1.4, package: ..." -> keep the first comma-free part for the header. */
    int len = 0;
    MPI_Get_library_version(version, &len);
    version[strcspn(version, ",\n")] = '\0';
    snprintf(library, sizeof library, "MPI_Allreduce (%s)", version);
  }

  send = (float*)malloc(sizes[nsizes - 1]);
  recv = (float*)malloc(sizes[nsizes - 1]);
  if (!send || !recv) {
    fprintf(stderr, "mpi_allreduce_bench: rank %d cannot allocate 2 x %llu bytes; lower --maxbytes\n", rank,
            (unsigned long long)sizes[nsizes - 1]);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  memset(recv, 0, sizes[nsizes - 1]); /* touch the pages before timing */

  for (s = 0; s < nsizes; ++s) {
    int count = (int)(sizes[s] / 4);
    rows[s].bytes = sizes[s];
    for (ip = 0; ip < 2; ++ip) {
      float* in = ip ? recv : send;
      const void* sendArg = ip ? MPI_IN_PLACE : (const void*)send;
      double t0, local, timeMax;
      long wrong = 0, wrongSum = 0;
      peer_fill(in, (uint64_t)count, rank);
      for (it = 0; it < o.warmup; ++it)
        if ((rc = MPI_Allreduce(sendArg, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD)) != MPI_SUCCESS)
          return fail("MPI_Allreduce (warm-up)", rc);
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = MPI_Wtime();
      for (it = 0; it < o.iters; ++it)
        if ((rc = MPI_Allreduce(sendArg, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD)) != MPI_SUCCESS)
          return fail("MPI_Allreduce", rc);
      local = (MPI_Wtime() - t0) * 1e6 / o.iters;
      MPI_Allreduce(&local, &timeMax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      if (o.check) {
        /* One more call on fresh inputs, then compare every element. */
        peer_fill(in, (uint64_t)count, rank);
        MPI_Barrier(MPI_COMM_WORLD);
        if ((rc = MPI_Allreduce(sendArg, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD)) != MPI_SUCCESS)
          return fail("MPI_Allreduce (check)", rc);
        wrong = peer_count_wrong(recv, (uint64_t)count, nranks);
      }
      MPI_Allreduce(&wrong, &wrongSum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
      rows[s].timeUs[ip] = timeMax;
      rows[s].wrong[ip] = wrongSum;
    }
  }

  rc = 0;
  if (rank == 0) {
    long wrong = peer_report(&o, library, nranks, rows, nsizes);
    rc = wrong != 0;
  }
  MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
  free(send);
  free(recv);
  MPI_Finalize();
  return rc;
}
