// Dispatch for the CPU reduction kernels: the shared element arithmetic (element_ops.hpp) as the
// scalar path, kernels.inc compiled for AVX2 and AVX-512, the best one the CPU runs chosen once
// (TRIB_REDUCE_ISA may force a lower one).
#include "reduce/reduce.hpp"
#include "common/env.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <type_traits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "reduce/element_ops.hpp"
#include "reduce/reduce_internal.hpp"

// GCC vector extensions wider than the file's baseline ISA warn about ABI changes; every such
// function here is internal and compiled for the wider ISA, so the warning does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace trib {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TRIB_REDUCE_X86 1
#pragma GCC push_options
#pragma GCC target("avx2,f16c")
namespace k_avx2 {
#define TRIB_VB 32
#include "reduce/kernels.inc"
#undef TRIB_VB
}  // namespace k_avx2
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,f16c,avx512f,avx512bw,avx512dq,avx512vl")
namespace k_avx512 {
#define TRIB_VB 64
#include "reduce/kernels.inc"
#undef TRIB_VB
}  // namespace k_avx512
#pragma GCC pop_options
#endif

namespace {

enum Isa { kScalar = 0, kAvx2 = 1, kAvx512 = 2, kNumIsas = 3 };
const char* const kIsaNames[kNumIsas] = {"scalar", "avx2", "avx512"};

Isa bestIsa() {
#ifdef TRIB_REDUCE_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    return kAvx512;
  if (__builtin_cpu_supports("avx2")) return kAvx2;  // every AVX2 CPU has F16C too
#endif
  return kScalar;
}

int parseIsa(const char* s) {
  for (int i = 0; i < kNumIsas; ++i)
    if (s && std::strcmp(s, kIsaNames[i]) == 0) return i;
  return -1;
}

// The ISA in use: the best one, lowered by TRIB_REDUCE_ISA; decided on first use.
std::atomic<int> g_isa{-1};

Isa currentIsa() {
  int isa = g_isa.load(std::memory_order_relaxed);
  if (isa >= 0) return static_cast<Isa>(isa);
  static std::once_flag once;
  std::call_once(once, [] {
    int chosen = bestIsa();
    const std::string isaEnv = envString("TRIB_REDUCE_ISA");
    if (const char* env = isaEnv.c_str(); *env) {
      const int want = parseIsa(env);
      if (want < 0)
        std::fprintf(stderr, "tributary: TRIB_REDUCE_ISA=%s is not one of scalar|avx2|avx512; using %s\n",
                     env, kIsaNames[chosen]);
      else if (want > chosen)
        std::fprintf(stderr, "tributary: TRIB_REDUCE_ISA=%s is not supported by this CPU/build; using %s\n",
                     env, kIsaNames[chosen]);
      else
        chosen = want;
    }
    int expected = -1;  // a reduceForceIsa() that ran first wins
    g_isa.compare_exchange_strong(expected, chosen);
  });
  return static_cast<Isa>(g_isa.load());
}

void reduceScalar(void* dst, const void* a, const void* b, size_t n, DataType dtype, elem::Op op) {
  elem::withElement(dtype, [&](auto e) {
    elem::withOp(op, [&](auto tag) { elem::reduceLoop<decltype(e), decltype(tag)::value>(dst, a, b, n); });
  });
}

bool rangesOverlap(const void* x, const void* y, size_t bytes) {
  const auto a = reinterpret_cast<uintptr_t>(x), b = reinterpret_cast<uintptr_t>(y);
  return a < b + bytes && b < a + bytes;
}

}  // namespace

void reduce(void* dst, const void* a, const void* b, size_t count, DataType dtype, RedOp op) {
  if (count == 0) return;
  if (!validDataType(dtype) || !validRedOp(op)) {
    // Callers validate (or use reduceChecked); never guess at the meaning of bad arguments.
    std::fprintf(stderr, "tributary: reduce() called with invalid dtype %d or op %d; nothing reduced\n",
                 static_cast<int>(dtype), static_cast<int>(op));
    return;
  }
  // Every ISA namespace has the same Op enum (ops_lanes.inc); convert by value.
  const elem::Op eop = elem::opOf(op);
  [[maybe_unused]] const int o = static_cast<int>(eop);
  switch (currentIsa()) {
#ifdef TRIB_REDUCE_X86
    case kAvx512:
      k_avx512::kernelFor(dtype, static_cast<k_avx512::Op>(o))(dst, a, b, count);
      return;
    case kAvx2:
      k_avx2::kernelFor(dtype, static_cast<k_avx2::Op>(o))(dst, a, b, count);
      return;
#endif
    default:
      reduceScalar(dst, a, b, count, dtype, eop);
      return;
  }
}

void avgFinalize(void* buf, size_t count, DataType dtype, uint64_t divisor) {
  if (count == 0 || divisor == 1) return;
  if (!validDataType(dtype) || divisor == 0) {
    std::fprintf(stderr,
                 "tributary: avgFinalize() called with invalid dtype %d or divisor 0; nothing divided\n",
                 static_cast<int>(dtype));
    return;
  }
  if (!isFloatType(dtype)) {  // no vector division of integers
    elem::withElement(dtype, [&](auto e) { elem::divideLoop<decltype(e)>(buf, count, divisor); });
    return;
  }
  switch (currentIsa()) {
#ifdef TRIB_REDUCE_X86
    case kAvx512:
      k_avx512::divideFloat(buf, count, dtype, divisor);
      return;
    case kAvx2:
      k_avx2::divideFloat(buf, count, dtype, divisor);
      return;
#endif
    default:
      elem::withElement(dtype, [&](auto e) { elem::divideLoop<decltype(e)>(buf, count, divisor); });
      return;
  }
}

Status reduceChecked(void* dst, const void* a, const void* b, size_t count, DataType dtype, RedOp op) {
  if (!validDataType(dtype))
    return errorf(tribInvalidArgument, "reduce: unknown datatype %d (valid: 0..%d)", static_cast<int>(dtype),
                  tribNumTypes - 1);
  if (!validRedOp(op))
    return errorf(tribInvalidArgument, "reduce: unknown reduction op %d (valid: 0..%d)", static_cast<int>(op),
                  tribNumOps - 1);
  if (count == 0) return Status::Ok();
  if (!dst || !a || !b)
    return errorf(tribInvalidArgument, "reduce: null buffer (dst=%p a=%p b=%p) with count %zu", dst, a, b,
                  count);
  const size_t size = dataTypeSize(dtype);
  if (count > SIZE_MAX / size)
    return errorf(tribInvalidArgument, "reduce: count %zu of %s overflows the address space", count,
                  dataTypeName(dtype));
  const size_t bytes = count * size;
  if ((dst != a && rangesOverlap(dst, a, bytes)) || (dst != b && rangesOverlap(dst, b, bytes)))
    return errorf(tribInvalidArgument,
                  "reduce: dst %p partially overlaps an input (a=%p b=%p, %zu bytes); use the same pointer "
                  "for in-place or separate buffers",
                  dst, a, b, bytes);
  reduce(dst, a, b, count, dtype, op);
  return Status::Ok();
}

Status avgFinalizeChecked(void* buf, size_t count, DataType dtype, uint64_t divisor) {
  if (!validDataType(dtype))
    return errorf(tribInvalidArgument, "avgFinalize: unknown datatype %d (valid: 0..%d)",
                  static_cast<int>(dtype), tribNumTypes - 1);
  if (divisor == 0) return errorf(tribInvalidArgument, "avgFinalize: divisor is 0; pass the number of ranks");
  if (count > 0 && !buf) return errorf(tribInvalidArgument, "avgFinalize: null buffer with count %zu", count);
  avgFinalize(buf, count, dtype, divisor);
  return Status::Ok();
}

const char* reduceIsa() { return kIsaNames[currentIsa()]; }

std::vector<std::string> reduceAvailableIsas() {
  std::vector<std::string> out;
  for (int i = 0; i <= bestIsa(); ++i) out.push_back(kIsaNames[i]);
  return out;
}

bool reduceForceIsa(const char* isa) {
  const int want = parseIsa(isa);
  if (want < 0 || want > bestIsa()) return false;
  currentIsa();  // settle the env-based choice first so it cannot overwrite this one
  g_isa.store(want);
  return true;
}

void copyStreaming(void* dst, const void* src, size_t bytes) {
#if defined(__x86_64__)
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
  size_t head = (16 - (reinterpret_cast<uintptr_t>(d) & 15)) & 15;
  if (bytes < head + 256) {  // too short to be worth it
    std::memcpy(dst, src, bytes);
    return;
  }
  std::memcpy(d, s, head);
  d += head, s += head, bytes -= head;
  size_t body = bytes & ~size_t{63};
  for (size_t i = 0; i < body; i += 64) {  // SSE2 (every x86-64 CPU): 4 x 16 bytes per line
    __m128i x0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    __m128i x1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
    __m128i x2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
    __m128i x3 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), x0);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), x1);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), x2);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), x3);
  }
  _mm_sfence();  // order the streamed lines before whatever publishes them
  std::memcpy(d + body, s + body, bytes - body);
#else
  std::memcpy(dst, src, bytes);
#endif
}

}  // namespace trib
