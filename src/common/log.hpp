// Logging: one line per event, filtered by TRIB_DEBUG (NONE, WARN = default, INFO, TRACE) and
// TRIB_DEBUG_SUBSYS (comma list of subsystems such as "init,coll,tuning,bootstrap,shm,ucx,switch";
// "ALL" = every one; a leading ^ excludes). Lines look like "host:pid:tid TRIB WARN [subsys] msg"
// so a hang can be traced to a process. Tests may install a sink to assert that an event (a
// refused connection, a malformed message) was reported.
#pragma once
#include <functional>
#include <string>

namespace trib {

enum class LogLevel : int { kNone = 0, kWarn = 1, kInfo = 2, kTrace = 3 };

bool logEnabled(LogLevel level, const char* subsys);
void logf(LogLevel level, const char* subsys, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
// Re-read TRIB_DEBUG / TRIB_DEBUG_SUBSYS / TRIB_DEBUG_FILE (tests change them).
void logReconfigure();

// Replace (or, with nullptr, restore) the destination of log lines. The sink sees every line
// that passes the filters, formatted without the prefix.
using LogSink = std::function<void(LogLevel, const char* subsys, const std::string& line)>;
void setLogSink(LogSink sink);

}  // namespace trib

#define TRIB_LOG_AT(level, subsys, ...)                                              \
  do {                                                                               \
    if (::trib::logEnabled(level, subsys)) ::trib::logf(level, subsys, __VA_ARGS__); \
  } while (0)
#define TRIB_WARN(subsys, ...) TRIB_LOG_AT(::trib::LogLevel::kWarn, subsys, __VA_ARGS__)
#define TRIB_INFO(subsys, ...) TRIB_LOG_AT(::trib::LogLevel::kInfo, subsys, __VA_ARGS__)
#define TRIB_TRACE(subsys, ...) TRIB_LOG_AT(::trib::LogLevel::kTrace, subsys, __VA_ARGS__)
