// common/process.hpp: a process is recognised by pid and start time, so a reused pid, an exited
// process and a zombie all read as gone, and pids compare only within one pid namespace.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "common/process.hpp"

namespace trib {
namespace {

TEST(Process, SelfIsAliveAndKnown) {
  const ProcessIdentity me = selfIdentity();
  EXPECT_EQ(me.pid, getpid());
  EXPECT_GT(me.startTime, 0u);
  EXPECT_NE(me.space[0], '\0');
  EXPECT_TRUE(processAlive(me));
  EXPECT_TRUE(samePidSpace(me, me));
}

TEST(Process, AReusedPidIsNotTheSameProcess) {
  ProcessIdentity other = selfIdentity();
  other.startTime += 1;  // what a new process given this pid would look like
  EXPECT_FALSE(processAlive(other));
  ProcessIdentity none;
  EXPECT_FALSE(processAlive(none));
}

TEST(Process, PidSpacesCompareByKernelAndNamespace) {
  const ProcessIdentity me = selfIdentity();
  ProcessIdentity elsewhere = me;
  elsewhere.space[0] ^= 1;
  EXPECT_FALSE(samePidSpace(me, elsewhere));
  ProcessIdentity unknown;
  EXPECT_FALSE(samePidSpace(unknown, unknown));
}

// Out of file descriptors, /proc cannot be opened: that is no death (a peer must not be failed).
TEST(Process, UnreadableProcIsNotDeath) {
  const ProcessIdentity me = selfIdentity();
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(60);
    struct rlimit lim {};
    getrlimit(RLIMIT_NOFILE, &lim);
    // Use up every descriptor below a tiny limit, so opening /proc/<pid>/stat fails with EMFILE.
    lim.rlim_cur = 16;
    if (setrlimit(RLIMIT_NOFILE, &lim) != 0) _exit(2);
    while (dup(0) >= 0) {
    }
    if (errno != EMFILE) _exit(3);
    _exit(processAlive(me) ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: a live process read as dead when /proc could not be opened";
}

TEST(Process, ChildIsAliveThenZombieThenGone) {
  int up[2], down[2];  // child -> parent: its identity; parent -> child: exit now
  ASSERT_EQ(pipe(up), 0);
  ASSERT_EQ(pipe(down), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(60);  // never outlives a stuck test
    const ProcessIdentity id = selfIdentity();
    (void)!write(up[1], &id, sizeof id);
    char c;
    (void)!read(down[0], &c, 1);
    _exit(0);
  }
  ProcessIdentity child;
  ASSERT_EQ(read(up[0], &child, sizeof child), static_cast<ssize_t>(sizeof child));
  EXPECT_EQ(child.pid, pid);
  EXPECT_TRUE(samePidSpace(selfIdentity(), child));
  EXPECT_TRUE(processAlive(child));
  ASSERT_EQ(write(down[1], "x", 1), 1);
  // Exited, not yet reaped: a zombie, which is gone for a peer (bounded wait for the exit).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (processAlive(child) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_FALSE(processAlive(child));
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_FALSE(processAlive(child));
  for (int fd : {up[0], up[1], down[0], down[1]}) close(fd);
}

}  // namespace
}  // namespace trib
