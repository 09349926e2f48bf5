// Typed reduction kernels for the CPU: dst[i] = a[i] op b[i] for every datatype and operator,
// vectorised with runtime dispatch (AVX-512 / AVX2 / scalar). The executor and every
// transport that reduces on arrival call this one entry point.
#pragma once
#include <cstddef>
#include <cstdint>

#include "common/dtype.hpp"
#include "common/status.hpp"

namespace trib {

// dst[i] = a[i] op b[i] for i < count. dst may alias a or b (exactly, not partially).
// op = tribAvg is computed as a sum here; the executor divides once at the end (avgFinalize).
// 16- and 8-bit floats are widened to float32, combined, and rounded back to nearest-even
// after every operation, so the result equals the scalar reference bit for bit.
// Integers: sum/prod wrap (two's complement). Float min/max follow IEEE 754-2019 minimum/maximum:
// a NaN operand gives NaN (a's when both are NaN), and -0 < +0. E4M3 saturates to ±448.
void reduce(void* dst, const void* a, const void* b, size_t count, DataType dtype, RedOp op);

// buf[i] = buf[i] / divisor (the end of an average). Integers truncate toward zero.
void avgFinalize(void* buf, size_t count, DataType dtype, uint64_t divisor);

// The same with the arguments checked first: an unknown dtype or op, a null buffer with count > 0,
// a count that overflows, or dst partially overlapping a or b return tribInvalidArgument with a
// message, and nothing is written. reduce()/avgFinalize() themselves only print and do nothing.
Status reduceChecked(void* dst, const void* a, const void* b, size_t count, DataType dtype, RedOp op);
Status avgFinalizeChecked(void* buf, size_t count, DataType dtype, uint64_t divisor);  // divisor 0: error

// memcpy for a destination nobody reads again soon (an all-reduce's output at sizes beyond the
// cache): non-temporal stores write it around the cache, saving the read-for-ownership of every
// line and the eviction of data that is still to be used. Plain memcpy where the CPU has none.
void copyStreaming(void* dst, const void* src, size_t bytes);

// The instruction set the dispatcher chose: "avx512", "avx2" or "scalar". TRIB_REDUCE_ISA
// (scalar|avx2|avx512) forces a lower one, for tests and comparisons.
const char* reduceIsa();

}  // namespace trib
