#include "common/log.hpp"

#include <strings.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace trib {
namespace {

struct LogConfig {
  LogLevel level = LogLevel::kWarn;
  std::string subsys;  // comma-separated filter, empty = all
  LogConfig() {
    if (const char* e = std::getenv("TRIB_DEBUG")) {
      if (!strcasecmp(e, "NONE"))
        level = LogLevel::kNone;
      else if (!strcasecmp(e, "INFO"))
        level = LogLevel::kInfo;
      else if (!strcasecmp(e, "TRACE"))
        level = LogLevel::kTrace;
      else
        level = LogLevel::kWarn;
    }
    if (const char* s = std::getenv("TRIB_DEBUG_SUBSYS")) subsys = s;
  }
};

const LogConfig& config() {
  static const LogConfig c;
  return c;
}

std::mutex& sinkMutex() {
  static std::mutex m;
  return m;
}
LogSink& sinkSlot() {
  static LogSink s;
  return s;
}

const char* levelName(LogLevel l) {
  switch (l) {
    case LogLevel::kWarn:
      return "WARN";
    case LogLevel::kInfo:
      return "INFO";
    case LogLevel::kTrace:
      return "TRACE";
    default:
      return "NONE";
  }
}

}  // namespace

bool logEnabled(LogLevel level, const char* subsys) {
  const LogConfig& c = config();
  if (level == LogLevel::kNone || static_cast<int>(level) > static_cast<int>(c.level)) return false;
  if (c.subsys.empty() || !subsys) return true;
  // Match whole comma-separated names.
  size_t n = std::strlen(subsys);
  for (size_t pos = 0; pos <= c.subsys.size();) {
    size_t end = c.subsys.find(',', pos);
    if (end == std::string::npos) end = c.subsys.size();
    if (end - pos == n && c.subsys.compare(pos, n, subsys) == 0) return true;
    pos = end + 1;
  }
  return false;
}

void logf(LogLevel level, const char* subsys, const char* fmt, ...) {
  if (!logEnabled(level, subsys)) return;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lock(sinkMutex());
  if (sinkSlot()) {
    sinkSlot()(level, subsys, buf);
    return;
  }
  std::fprintf(stderr, "trib %d [%s %s] %s\n", static_cast<int>(getpid()), levelName(level),
               subsys ? subsys : "", buf);
}

void setLogSink(LogSink sink) {
  std::lock_guard<std::mutex> lock(sinkMutex());
  sinkSlot() = std::move(sink);
}

}  // namespace trib
