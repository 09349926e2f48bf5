// Random numbers from the kernel (getrandom), one source for the whole library: secrets that
// strangers must not guess (job keys, UCX tag secrets, shm probes) and names and ids that must not
// collide between processes (segment names, communicator ids, socket names).
#pragma once
#include <cstddef>
#include <cstdint>

#include "common/status.hpp"

namespace trib {

// Fills `n` bytes with cryptographically random data; an error only where the kernel refuses.
Status randomBytes(void* out, size_t n);
// 64 random bits for an id that must not collide. Where the kernel refuses (it should not), the
// clock, pid and a counter stand in, which stays unique within a host but is guessable: secrets
// use randomBytes and its error.
uint64_t randomId64();

}  // namespace trib
