// Logging: TRIB_DEBUG=NONE|WARN|INFO|TRACE and TRIB_DEBUG_SUBSYS select what is printed.
// Lines look like "host:pid:tid [rank] TRIB WARN message" so a hang can be traced to a rank.
#pragma once
#include <cstdarg>

namespace trib {

enum class LogLevel { None = 0, Warn = 1, Info = 2, Trace = 3 };
enum class LogSubsys : unsigned {
  INIT = 1u << 0,
  COLL = 1u << 1,
  TUNING = 1u << 2,
  TRANSPORT = 1u << 3,
  BOOTSTRAP = 1u << 4,
  SWITCH = 1u << 5,
};

bool logEnabled(LogLevel level, LogSubsys subsys);
void logMessage(LogLevel level, LogSubsys subsys, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
// Re-read TRIB_DEBUG / TRIB_DEBUG_SUBSYS (tests change them).
void logReconfigure();

}  // namespace trib

#define TRIB_LOG(level, subsys, ...)                                                       \
  do {                                                                                     \
    if (::trib::logEnabled(::trib::LogLevel::level, ::trib::LogSubsys::subsys))            \
      ::trib::logMessage(::trib::LogLevel::level, ::trib::LogSubsys::subsys, __VA_ARGS__); \
  } while (0)
#define TRIB_WARN(subsys, ...) TRIB_LOG(Warn, subsys, __VA_ARGS__)
#define TRIB_INFO(subsys, ...) TRIB_LOG(Info, subsys, __VA_ARGS__)
#define TRIB_TRACE(subsys, ...) TRIB_LOG(Trace, subsys, __VA_ARGS__)
