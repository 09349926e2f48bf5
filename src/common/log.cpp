#include "common/log.hpp"

#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <mutex>
#include <vector>

#include "common/env.hpp"

namespace trib {

namespace {

struct LogConfig {
  std::mutex mu;
  std::atomic<bool> loaded{false};  // set under mu once load() ran; read without it
  std::atomic<int> level{static_cast<int>(LogLevel::kWarn)};
  bool exclude = false;                 // TRIB_DEBUG_SUBSYS started with ^
  bool all = true;                      // ALL (or empty)
  std::vector<std::string> subsystems;  // lower-case names
  FILE* out = stderr;
  LogSink sink;
};

LogConfig& config() {
  static LogConfig c;
  return c;
}

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(tolower(static_cast<unsigned char>(ch)));
  return s;
}

// Caller holds c.mu.
void load(LogConfig& c) {
  std::string level = envString("TRIB_DEBUG");
  int l = static_cast<int>(LogLevel::kWarn);
  if (strcasecmp(level.c_str(), "NONE") == 0) l = 0;
  if (strcasecmp(level.c_str(), "INFO") == 0) l = 2;
  if (strcasecmp(level.c_str(), "TRACE") == 0) l = 3;
  c.level.store(l);
  std::string spec = lower(envString("TRIB_DEBUG_SUBSYS"));
  c.exclude = !spec.empty() && spec[0] == '^';
  if (c.exclude) spec.erase(0, 1);
  c.subsystems.clear();
  c.all = spec.empty();
  size_t pos = 0;
  while (pos <= spec.size() && !spec.empty()) {
    size_t comma = spec.find(',', pos);
    std::string item = spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (item == "all")
      c.all = true;
    else if (!item.empty())
      c.subsystems.push_back(item);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  std::string file = envString("TRIB_DEBUG_FILE");
  if (c.out != stderr) std::fclose(c.out);
  c.out = stderr;
  if (!file.empty()) {
    std::string path;
    char host[64] = "host";
    gethostname(host, sizeof host - 1);
    for (size_t i = 0; i < file.size(); ++i) {
      if (file[i] == '%' && i + 1 < file.size() && file[i + 1] == 'h') {
        path += host;
        ++i;
      } else if (file[i] == '%' && i + 1 < file.size() && file[i + 1] == 'p') {
        path += std::to_string(getpid());
        ++i;
      } else {
        path += file[i];
      }
    }
    if (FILE* f = std::fopen(path.c_str(), "a")) c.out = f;
  }
  c.loaded.store(true, std::memory_order_release);
}

bool subsysSelected(const LogConfig& c, const char* subsys) {
  bool named = false;
  std::string s = lower(subsys ? subsys : "");
  for (const std::string& n : c.subsystems) named = named || n == s;
  if (c.exclude) return !named && !c.all;
  return c.all || named;
}

}  // namespace

void logReconfigure() {
  LogConfig& c = config();
  std::lock_guard<std::mutex> lock(c.mu);
  load(c);
}

void setLogSink(LogSink sink) {
  LogConfig& c = config();
  std::lock_guard<std::mutex> lock(c.mu);
  c.sink = std::move(sink);
}

bool logEnabled(LogLevel level, const char* subsys) {
  LogConfig& c = config();
  // Every collective asks (TRIB_TRACE): a level below the configured one answers without the lock.
  if (c.loaded.load(std::memory_order_acquire) &&
      static_cast<int>(level) > c.level.load(std::memory_order_relaxed))
    return false;
  std::lock_guard<std::mutex> lock(c.mu);
  if (!c.loaded) load(c);
  return static_cast<int>(level) <= c.level.load() && level != LogLevel::kNone && subsysSelected(c, subsys);
}

void logf(LogLevel level, const char* subsys, const char* fmt, ...) {
  static const char* const levels[] = {"NONE", "WARN", "INFO", "TRACE"};
  char body[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(body, sizeof body, fmt, ap);
  va_end(ap);
  LogConfig& c = config();
  std::lock_guard<std::mutex> lock(c.mu);
  if (!c.loaded) load(c);
  if (static_cast<int>(level) > c.level.load() || level == LogLevel::kNone || !subsysSelected(c, subsys))
    return;
  if (c.sink) {
    c.sink(level, subsys, body);
    return;
  }
  char host[64] = "host";
  gethostname(host, sizeof host - 1);
  std::fprintf(c.out, "%s:%d:%ld TRIB %s [%s] %s\n", host, static_cast<int>(getpid()),
               static_cast<long>(syscall(SYS_gettid)), levels[static_cast<int>(level)], subsys, body);
  std::fflush(c.out);
}

}  // namespace trib
