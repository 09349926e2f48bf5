// Logging: one line per event on stderr, filtered by TRIB_DEBUG (WARN default, INFO, TRACE, NONE)
// and TRIB_DEBUG_SUBSYS (comma list, e.g. "bootstrap,shm"; empty = all). Tests may install a sink
// to assert that an event (a refused connection, a malformed message) was reported.
#pragma once
#include <functional>
#include <string>

namespace trib {

enum class LogLevel : int { kNone = 0, kWarn = 1, kInfo = 2, kTrace = 3 };

bool logEnabled(LogLevel level, const char* subsys);
void logf(LogLevel level, const char* subsys, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

// Replace (or, with nullptr, restore) the destination of log lines. The sink sees every line
// whose level passes TRIB_DEBUG, already formatted without the prefix.
using LogSink = std::function<void(LogLevel, const char* subsys, const std::string& line)>;
void setLogSink(LogSink sink);

}  // namespace trib

#define TRIB_WARN(subsys, ...) ::trib::logf(::trib::LogLevel::kWarn, subsys, __VA_ARGS__)
#define TRIB_INFO(subsys, ...) ::trib::logf(::trib::LogLevel::kInfo, subsys, __VA_ARGS__)
#define TRIB_TRACE(subsys, ...) ::trib::logf(::trib::LogLevel::kTrace, subsys, __VA_ARGS__)
