// tribConfig_t as a caller compiled against this or an older, smaller header hands it over
// (tributary.h's versioning rule). Input: the struct's bytes; their size field (modulo twice this
// header's struct) is how large the caller's object is (never below the frozen TRIB_CONFIG_MIN_SIZE
// part: a smaller size must be refused), and the object is exactly that large on the heap, so
// AddressSanitizer reports any read past its end.
// Pointer fields cannot come from the input: each is null or one of the input's strings.
#include <cstring>
#include <memory>

#include "core/comm.hpp"
#include "fuzz_check.hpp"

using namespace trib;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < TRIB_CONFIG_MIN_SIZE) return 0;
  size_t claimed;
  std::memcpy(&claimed, data, sizeof claimed);
  claimed %= 2 * sizeof(tribConfig_t);  // up to a header twice as new as this one
  const size_t objectBytes = std::max<size_t>(TRIB_CONFIG_MIN_SIZE, claimed);
  std::unique_ptr<uint8_t[]> object(new uint8_t[objectBytes]());
  std::memcpy(object.get(), data, std::min(size, objectBytes));
  std::memcpy(object.get(), &claimed, sizeof claimed);  // the caller's size says its object's size
  // The strings: the input past the object, split at NULs; a pointer's low bit says whether it is set.
  std::string tail(reinterpret_cast<const char*>(data) + std::min(size, objectBytes),
                   size - std::min(size, objectBytes));
  std::string strings[3];
  for (size_t i = 0, at = 0; i < 3 && at < tail.size(); ++i) {
    size_t end = tail.find('\0', at);
    strings[i] = tail.substr(at, end == std::string::npos ? std::string::npos : end - at);
    at = end == std::string::npos ? tail.size() : end + 1;
  }
  const size_t fields[3] = {offsetof(tribConfig_t, algo), offsetof(tribConfig_t, transport),
                            offsetof(tribConfig_t, commName)};
  for (int i = 0; i < 3; ++i) {
    uintptr_t raw;
    std::memcpy(&raw, object.get() + fields[i], sizeof raw);
    const char* p = (raw & 1) ? strings[i].c_str() : nullptr;
    std::memcpy(object.get() + fields[i], &p, sizeof p);
  }
  const auto* cfg = reinterpret_cast<const tribConfig_t*>(object.get());
  CommConfig out;
  Status st = resolveConfig(cfg, &out);
  if (!st.ok()) {
    FUZZ_CHECK(st.code() == tribInvalidArgument && st.message().find("config") != std::string::npos);
    return 0;
  }
  FUZZ_CHECK(cfg->magic == TRIB_CONFIG_MAGIC && cfg->size >= TRIB_CONFIG_MIN_SIZE);
  FUZZ_CHECK(cfg->version >= TRIB_CONFIG_FIRST_VERSION);
  FUZZ_CHECK(out.timeout.count() > 0);
  if (cfg->timeoutMs != TRIB_CONFIG_UNDEF_INT) FUZZ_CHECK(out.timeout.count() == cfg->timeoutMs);
  if (cfg->algo) FUZZ_CHECK(out.algo == cfg->algo);
  return 0;
}
