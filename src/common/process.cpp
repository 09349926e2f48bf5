#include "common/process.hpp"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace trib {
namespace {

enum class Stat { Ok, NoSuchProcess, Unreadable };

// State and start time of `pid` from /proc/<pid>/stat. NoSuchProcess only when the kernel says so
// (ENOENT/ESRCH); any other failure (EMFILE near the descriptor limit, say) is Unreadable, which a
// liveness check must not take for a death.
Stat readProcStat(int pid, char* state, uint64_t* startTime) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT || errno == ESRCH ? Stat::NoSuchProcess : Stat::Unreadable;
  char buf[1024];
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  const int readErr = errno;
  close(fd);
  if (n <= 0) return n < 0 && readErr == ESRCH ? Stat::NoSuchProcess : Stat::Unreadable;
  buf[n] = 0;
  const char* p = std::strrchr(buf, ')');  // the command name may contain spaces and parentheses
  if (!p) return Stat::Unreadable;
  unsigned long long start = 0;
  // Fields after the name: state(3) ... starttime(22).
  if (std::sscanf(p + 1, " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
                  state, &start) != 2)
    return Stat::Unreadable;
  *startTime = start;
  return Stat::Ok;
}

}  // namespace

const std::string& bootId() {
  static const std::string id = [] {
    std::string b;
    if (FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
      char buf[64] = {};
      if (std::fgets(buf, sizeof buf, f)) b = buf;
      std::fclose(f);
    }
    while (!b.empty() && (b.back() == '\n' || b.back() == ' ')) b.pop_back();
    return b;
  }();
  return id;
}

ProcessIdentity selfIdentity() {
  ProcessIdentity id;
  id.pid = static_cast<int32_t>(getpid());
  char state = 0;
  if (readProcStat(id.pid, &state, &id.startTime) != Stat::Ok) return id;
  std::string space = bootId();
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
  if (id.pid <= 0) return false;
  char state = 0;
  uint64_t start = 0;
  switch (readProcStat(id.pid, &state, &start)) {
    case Stat::NoSuchProcess:
      return false;
    case Stat::Unreadable:  // cannot tell now: alive until /proc says otherwise
      return kill(id.pid, 0) == 0 || errno != ESRCH;
    case Stat::Ok:
      break;
  }
  return state != 'Z' && state != 'X' && start == id.startTime;
}

bool pidTakenByAnother(const ProcessIdentity& id) {
  char state = 0;
  uint64_t start = 0;
  return id.pid > 0 && readProcStat(id.pid, &state, &start) == Stat::Ok && start != id.startTime;
}

}  // namespace trib
