// TRIB_ALGO and TRIB_TUNE strings (src/plan/planner.hpp), as users set them: the first input byte
// picks which parser reads the rest (TRIB_ALGO, TRIB_TUNE, or one of TRIB_TUNE's sizes). Each must
// refuse with a message naming the variable, or accept rules the planner can use (non-empty
// filters, ordered ranges, a collective per rule), and a plain decimal size must be that number.
#include <cerrno>
#include <cstdlib>
#include <string>

#include "fuzz_check.hpp"
#include "plan/planner.hpp"

using namespace trib;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > 4096) return 0;
  const std::string spec(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] % 3 == 2) {
    uint64_t v = 0;
    Status st = parseSize(spec, &v);
    if (!st.ok()) {
      FUZZ_CHECK(st.code() == tribInvalidArgument && !st.message().empty());
      return 0;
    }
    if (!spec.empty() && spec.size() <= 20 && spec.find_first_not_of("0123456789") == std::string::npos) {
      errno = 0;
      const unsigned long long want = std::strtoull(spec.c_str(), nullptr, 10);
      // Sizes are doubles inside (1.5k): exact up to 2^53, then within a double's rounding.
      if (errno == 0 && want < (1ull << 53)) FUZZ_CHECK(v == want);
      if (errno == 0) FUZZ_CHECK(v >= want - want / (1ull << 50) && v <= want + want / (1ull << 50));
    }
    return 0;
  }
  if (data[0] % 3 == 1) {
    AlgoFilter f;
    Status st = parseAlgoOverride(spec, &f);
    if (!st.ok()) {
      FUZZ_CHECK(st.code() == tribInvalidArgument);
      FUZZ_CHECK(st.message().find("TRIB_ALGO") != std::string::npos);
      return 0;
    }
    for (int c = 0; c < kNumColls; ++c)
      if (f.set[c]) FUZZ_CHECK(f.allowed[c] != 0);
    return 0;
  }
  std::vector<TuneRule> rules;
  Status st = parseTuneString(spec, &rules);
  if (!st.ok()) {
    FUZZ_CHECK(st.code() == tribInvalidArgument);
    FUZZ_CHECK(st.message().find("TRIB_TUNE") != std::string::npos);
    return 0;
  }
  for (const TuneRule& r : rules) {
    FUZZ_CHECK(r.collMask != 0);
    FUZZ_CHECK(r.lo < r.hi);
    FUZZ_CHECK(r.minRanks <= r.maxRanks);
  }
  return 0;
}
