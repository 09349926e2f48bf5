// tribConfig_t and the environment resolved into a CommConfig (comm.hpp): the caller's struct may
// come from an older, smaller header (tributary.h's versioning rule), so nothing past its size is read.
#include <algorithm>

#include "common/env.hpp"
#include "core/comm.hpp"

namespace trib {

namespace {
constexpr unsigned kShareTransportsSince = 100;  // the version that added tribConfig_t.shareTransports
}  // namespace

Status resolveConfig(const tribConfig_t* config, CommConfig* out) {
  CommConfig c;
  c.timeout = std::chrono::milliseconds(static_cast<int64_t>(envDouble("TRIB_TIMEOUT") * 1000.0));
  c.algo = envString("TRIB_ALGO");
  c.algoStrict = envBool("TRIB_ALGO_STRICT");
  c.transport = envString("TRIB_TRANSPORT");
  c.chunkBytes = static_cast<uint64_t>(std::max<int64_t>(0, envInt("TRIB_CHUNK_BYTES")));
  const std::string streaming = envString("TRIB_WINDOW_STREAMING");
  if (streaming != "auto" && streaming != "0" && streaming != "1")
    return errorf(tribInvalidArgument, "TRIB_WINDOW_STREAMING='%s' must be auto, 0 or 1", streaming.c_str());
  c.windowStreaming = streaming == "auto" ? -1 : streaming == "1" ? 1 : 0;
  c.shareTransports = envBool("TRIB_SHARE_TRANSPORTS");
  if (config) {
    // The versioning rule (tributary.h): a frozen first part, then fields read only when the
    // caller's size covers them and its version is at least the one that added them.
    if (config->magic != TRIB_CONFIG_MAGIC || config->size < TRIB_CONFIG_MIN_SIZE) {
      return errorf(
          tribInvalidArgument,
          "config struct not initialised: declare it as 'tribConfig_t cfg = TRIB_CONFIG_INITIALIZER;'");
    }
    if (config->version < TRIB_CONFIG_FIRST_VERSION) {
      return errorf(tribInvalidArgument,
                    "config.version %u is older than the first tribConfig_t (%u): initialise it with "
                    "TRIB_CONFIG_INITIALIZER",
                    config->version, TRIB_CONFIG_FIRST_VERSION);
    }
    if (config->blocking != TRIB_CONFIG_UNDEF_INT && config->blocking != 0 && config->blocking != 1)
      return errorf(tribInvalidArgument, "config.blocking %d must be 0 or 1", config->blocking);
    if (config->timeoutMs != TRIB_CONFIG_UNDEF_INT) {
      if (config->timeoutMs <= 0) return errorf(tribInvalidArgument, "config.timeoutMs must be > 0");
      c.timeout = std::chrono::milliseconds(config->timeoutMs);
    }
    if (config->algo) c.algo = config->algo;
    if (config->transport) c.transport = config->transport;
    if (config->commName) c.name = config->commName;
    if (config->chunkBytes != TRIB_CONFIG_UNDEF_INT) {
      if (config->chunkBytes <= 0) return errorf(tribInvalidArgument, "config.chunkBytes must be > 0");
      c.chunkBytes = static_cast<uint64_t>(config->chunkBytes);
    }
    // A struct from a header older than this field ends before it.
    if (config->size >= offsetof(tribConfig_t, shareTransports) + sizeof(int) &&
        config->version >= kShareTransportsSince && config->shareTransports != TRIB_CONFIG_UNDEF_INT) {
      if (config->shareTransports != 0 && config->shareTransports != 1)
        return errorf(tribInvalidArgument, "config.shareTransports must be 0 or 1");
      c.shareTransports = config->shareTransports == 1;
    }
  }
  if (c.timeout.count() <= 0) c.timeout = std::chrono::milliseconds(1);
  *out = std::move(c);
  return Status::Ok();
}

}  // namespace trib
