/* Checks of every NCCL collective, compiled as C against NCCL's own nccl.h and run on Tributary's
 * libnccl.so.2. The caller drives `ncomms` ranks of one communicator from this thread: all of them
 * (ncclCommInitAll) or one (a process of its own). */
#ifndef TRIB_TESTS_NCCL_CHECKS_H_
#define TRIB_TESTS_NCCL_CHECKS_H_

#include <nccl.h>

/* Runs every collective and send/recv, with NCCL's dtype and op numbering, and compares each
 * result with the expected one. useGroup: wrap each call in ncclGroupStart/End (required when
 * ncomms > 1). Returns the number of failed checks (each printed). */
int ncclCheckAll(ncclComm_t* comms, int ncomms, int useGroup);

/* Bad input on a working communicator: clear NCCL codes and a message from ncclGetLastError. */
int ncclCheckBadInput(ncclComm_t comm);

/* ncclGroupSimulateEnd over the `ncomms` ranks this thread drives: estimates that grow with size,
 * outputs left untouched, and NCCL's rules for NULL, a bad struct and no group. */
int ncclCheckSimulate(ncclComm_t* comms, int ncomms);

#endif
