#include "common/process.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace trib {
namespace {

// State and start time of `pid` from /proc/<pid>/stat; false if there is no such process.
bool readProcStat(int pid, char* state, uint64_t* startTime) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE* f = std::fopen(path, "r");
  if (!f) return false;
  char buf[1024];
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = 0;
  const char* p = std::strrchr(buf, ')');  // the command name may contain spaces and parentheses
  if (!p) return false;
  unsigned long long start = 0;
  // Fields after the name: state(3) ... starttime(22).
  if (std::sscanf(p + 1, " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
                  state, &start) != 2)
    return false;
  *startTime = start;
  return true;
}

}  // namespace

ProcessIdentity selfIdentity() {
  ProcessIdentity id;
  id.pid = static_cast<int32_t>(getpid());
  char state = 0;
  if (!readProcStat(id.pid, &state, &id.startTime)) return id;
  std::string space;
  if (FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
    char b[64] = {};
    if (std::fgets(b, sizeof b, f)) space = b;
    std::fclose(f);
    while (!space.empty() && (space.back() == '\n' || space.back() == ' ')) space.pop_back();
  }
  char ns[64] = {};
  const ssize_t n = readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
  if (space.empty() || n <= 0 || id.startTime == 0) return id;
  space += "/" + std::string(ns, static_cast<size_t>(n));
  std::snprintf(id.space, sizeof id.space, "%s", space.c_str());
  return id;
}

bool samePidSpace(const ProcessIdentity& self, const ProcessIdentity& peer) {
  return self.space[0] && strncmp(self.space, peer.space, sizeof self.space) == 0;
}

bool processAlive(const ProcessIdentity& id) {
  char state = 0;
  uint64_t start = 0;
  if (id.pid <= 0 || !readProcStat(id.pid, &state, &start)) return false;
  return state != 'Z' && state != 'X' && start == id.startTime;
}

}  // namespace trib
