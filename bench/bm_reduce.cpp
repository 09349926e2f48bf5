// Throughput of the CPU reduction kernels per ISA, beside memcpy of the same size.
// bytes/s counts memory traffic: reduce moves 3 streams (read a, read b, write dst), memcpy 2
// (read, write), so the two columns compare directly against the machine's memory bandwidth.
//   ./build/bench/bm_reduce --benchmark_filter='float32/.*/64MiB'
#include <benchmark/benchmark.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/dtype.hpp"
#include "reduce/reduce.hpp"
#include "reduce/reduce_internal.hpp"

namespace {

using trib::DataType;

struct Size {
  const char* name;
  size_t bytes;
};
const Size kSizes[] = {{"64KiB", size_t{64} << 10}, {"1MiB", size_t{1} << 20}, {"64MiB", size_t{64} << 20}};
const DataType kTypes[] = {tribFloat32, tribBfloat16, tribFloat16, tribInt32};

// Inputs that stay finite and normal under repeated in-place sums would matter for timing only
// with denormals; small values (1.0 and 2^-10 patterns) keep every type in its normal range.
std::vector<uint8_t> makeBuffer(size_t bytes, DataType t) {
  std::vector<uint8_t> v(bytes);
  const size_t n = bytes / trib::dataTypeSize(t);
  for (size_t i = 0; i < n; ++i) {
    switch (t) {
      case tribFloat32: {
        const float f = 1.0f + static_cast<float>(i % 7);
        std::memcpy(v.data() + 4 * i, &f, 4);
        break;
      }
      case tribBfloat16: {
        const uint16_t h = trib::floatToBf16(1.0f + static_cast<float>(i % 7));
        std::memcpy(v.data() + 2 * i, &h, 2);
        break;
      }
      case tribFloat16: {
        const uint16_t h = trib::floatToHalf(1.0f + static_cast<float>(i % 7));
        std::memcpy(v.data() + 2 * i, &h, 2);
        break;
      }
      default: {
        const int32_t x = static_cast<int32_t>(i);
        std::memcpy(v.data() + 4 * i, &x, 4);
      }
    }
  }
  return v;
}

void BM_Reduce(benchmark::State& state, std::string isa, DataType dtype, size_t bytes) {
  if (!trib::reduceForceIsa(isa.c_str())) {
    state.SkipWithError("ISA not available on this CPU");
    return;
  }
  const std::vector<uint8_t> a = makeBuffer(bytes, dtype), b = makeBuffer(bytes, dtype);
  std::vector<uint8_t> d(bytes);
  const size_t n = bytes / trib::dataTypeSize(dtype);
  for (auto _ : state) {
    trib::reduce(d.data(), a.data(), b.data(), n, dtype, tribSum);
    benchmark::DoNotOptimize(d.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 3 * static_cast<int64_t>(bytes));
  state.SetLabel(isa);
}

void BM_Memcpy(benchmark::State& state, size_t bytes) {
  std::vector<uint8_t> src(bytes, 1), dst(bytes);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 2 * static_cast<int64_t>(bytes));
}

void registerAll() {
  for (const Size& s : kSizes) {
    benchmark::RegisterBenchmark((std::string("memcpy/") + s.name).c_str(), BM_Memcpy, s.bytes);
    for (DataType t : kTypes)
      for (const std::string& isa : trib::reduceAvailableIsas())
        benchmark::RegisterBenchmark(
            (std::string("reduce_sum/") + trib::dataTypeName(t) + "/" + isa + "/" + s.name).c_str(),
            BM_Reduce, isa, t, s.bytes);
  }
}

}  // namespace

int main(int argc, char** argv) {
  registerAll();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
