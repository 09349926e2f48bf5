#include "common/log.hpp"

#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "common/env.hpp"

namespace trib {

namespace {
struct LogConfig {
  std::atomic<int> level{-1};  // -1 = not read yet
  std::atomic<unsigned> subsys{~0u};
  FILE* out = stderr;
  std::mutex mu;
};
LogConfig& config() {
  static LogConfig c;
  return c;
}

unsigned parseSubsys(const std::string& spec) {
  static const struct {
    const char* name;
    LogSubsys bit;
  } names[] = {{"INIT", LogSubsys::INIT},           {"COLL", LogSubsys::COLL},
               {"TUNING", LogSubsys::TUNING},       {"TRANSPORT", LogSubsys::TRANSPORT},
               {"BOOTSTRAP", LogSubsys::BOOTSTRAP}, {"SWITCH", LogSubsys::SWITCH}};
  bool exclude = !spec.empty() && spec[0] == '^';
  unsigned mask = 0;
  size_t pos = exclude ? 1 : 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    std::string item = spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (strcasecmp(item.c_str(), "ALL") == 0) mask = ~0u;
    for (const auto& n : names) {
      if (strcasecmp(item.c_str(), n.name) == 0) mask |= static_cast<unsigned>(n.bit);
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return exclude ? ~mask : mask;
}

void readConfig() {
  LogConfig& c = config();
  std::string level = envString("TRIB_DEBUG");
  int l = static_cast<int>(LogLevel::Warn);
  if (strcasecmp(level.c_str(), "NONE") == 0) l = 0;
  if (strcasecmp(level.c_str(), "INFO") == 0) l = 2;
  if (strcasecmp(level.c_str(), "TRACE") == 0) l = 3;
  c.subsys.store(parseSubsys(envString("TRIB_DEBUG_SUBSYS")));
  std::string file = envString("TRIB_DEBUG_FILE");
  if (!file.empty()) {
    std::string path;
    char host[64] = "host";
    gethostname(host, sizeof host - 1);
    for (size_t i = 0; i < file.size(); ++i) {
      if (file[i] == '%' && i + 1 < file.size() && file[i + 1] == 'h')
        path += host, ++i;
      else if (file[i] == '%' && i + 1 < file.size() && file[i + 1] == 'p')
        path += std::to_string(getpid()), ++i;
      else
        path += file[i];
    }
    if (FILE* f = std::fopen(path.c_str(), "a")) c.out = f;
  }
  c.level.store(l);
}
}  // namespace

void logReconfigure() { readConfig(); }

bool logEnabled(LogLevel level, LogSubsys subsys) {
  LogConfig& c = config();
  int l = c.level.load(std::memory_order_relaxed);
  if (l < 0) {
    std::lock_guard<std::mutex> lock(c.mu);
    if (c.level.load() < 0) readConfig();
    l = c.level.load();
  }
  return static_cast<int>(level) <= l &&
         (c.subsys.load(std::memory_order_relaxed) & static_cast<unsigned>(subsys));
}

void logMessage(LogLevel level, LogSubsys subsys, const char* fmt, ...) {
  static const char* const levels[] = {"NONE", "WARN", "INFO", "TRACE"};
  char host[64] = "host";
  gethostname(host, sizeof host - 1);
  char body[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(body, sizeof body, fmt, ap);
  va_end(ap);
  LogConfig& c = config();
  std::lock_guard<std::mutex> lock(c.mu);
  std::fprintf(c.out, "%s:%d:%ld TRIB %s %s\n", host, static_cast<int>(getpid()),
               static_cast<long>(syscall(SYS_gettid)), levels[static_cast<int>(level)], body);
  std::fflush(c.out);
}

}  // namespace trib
