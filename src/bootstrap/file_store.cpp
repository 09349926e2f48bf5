// File store: one file per key in a shared directory. Values appear atomically (write to a
// unique temporary name, then rename into place); waits poll with a bounded back-off. There is no
// job key: the directory's owner and mode are the protection, so open() checks them, and files
// are created 0600 without following links (docs/SECURITY.md).
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <thread>

#include "bootstrap/store.hpp"

namespace trib {

using net::Clock;

namespace {

bool writeAll(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

Status writeAtomically(const std::string& dir, const std::string& path, const Blob& value) {
  static std::atomic<uint64_t> counter{0};
  std::string tmp = strprintf("%s/.tmp.%d.%llu", dir.c_str(), static_cast<int>(getpid()),
                              static_cast<unsigned long long>(counter++));
  // A fresh file, never one that is there already (nor a link planted at its name). A stale one
  // (a crashed process of the same pid, in this user's directory) is removed once.
  const int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  int fd = open(tmp.c_str(), flags, 0600);
  if (fd < 0 && errno == EEXIST && unlink(tmp.c_str()) == 0) fd = open(tmp.c_str(), flags, 0600);
  if (fd < 0)
    return errorf(tribSystemError, "file store: cannot create '%s': %s", tmp.c_str(), strerror(errno));
  bool ok = writeAll(fd, value.data(), value.size());
  ok = close(fd) == 0 && ok;
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    unlink(tmp.c_str());
    return errorf(tribSystemError, "file store: cannot write '%s': %s", path.c_str(), strerror(e));
  }
  return Status::Ok();
}

}  // namespace

Status FileStore::open(const std::string& dir, std::unique_ptr<FileStore>* out, int lockTimeoutMs) {
  if (dir.empty()) return errorf(tribInvalidArgument, "file store needs a directory (set TRIB_STORE_DIR)");
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return errorf(tribSystemError, "file store: cannot create directory '%s': %s", dir.c_str(),
                  strerror(errno));
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return errorf(tribInvalidArgument, "file store: '%s' is not a directory", dir.c_str());
  // Whoever may create files here can plant or replace rendezvous values (a sticky bit does not
  // stop a key from being created first): the directory must be this user's and no one else's.
  const uid_t uid = geteuid();
  if (st.st_uid != uid)
    return errorf(tribInvalidUsage,
                  "file store: directory '%s' is owned by uid %u, not by this process's uid %u: another "
                  "user could plant rendezvous values (use a directory of your own, mode 0700)",
                  dir.c_str(), static_cast<unsigned>(st.st_uid), static_cast<unsigned>(uid));
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return errorf(tribInvalidUsage,
                  "file store: directory '%s' has mode %04o: writable by group or others, who could plant "
                  "rendezvous values (chmod go-w, or use a fresh directory: it is created 0700)",
                  dir.c_str(), static_cast<unsigned>(st.st_mode & 07777));
  if (access(dir.c_str(), W_OK | X_OK) != 0)
    return errorf(tribSystemError, "file store: directory '%s' is not writable", dir.c_str());
  std::unique_ptr<FileStore> s(new FileStore());
  s->dir_ = dir;
  s->lockTimeoutMs_ = std::max(lockTimeoutMs, 0);
  *out = std::move(s);
  return Status::Ok();
}

std::string FileStore::pathOf(const std::string& key) const {
  // Escape every byte outside [A-Za-z0-9._-] so any key maps to one flat file name.
  std::string name = "k.";
  for (unsigned char ch : key) {
    if (isalnum(ch) || ch == '.' || ch == '_' || ch == '-')
      name += static_cast<char>(ch);
    else
      name += strprintf("%%%02X", ch);
  }
  return dir_ + "/" + name;
}

bool FileStore::readKey(const std::string& key, Blob* value) const {
  int fd = ::open(pathOf(key).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  value->clear();
  uint8_t buf[65536];
  for (;;) {
    ssize_t r = read(fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    value->insert(value->end(), buf, buf + r);
  }
  close(fd);
  return true;
}

Status FileStore::set(const std::string& key, const Blob& value) {
  return writeAtomically(dir_, pathOf(key), value);
}

Status FileStore::multiGet(const std::vector<std::string>& keys, std::vector<Blob>* values, int timeoutMs) {
  if (timeoutMs < 0)
    return errorf(tribInvalidArgument, "file store wait timeout %d ms must be >= 0", timeoutMs);
  auto deadline = net::deadlineAfter(timeoutMs);
  std::vector<Blob> tmp(keys.size());
  std::vector<bool> have(keys.size(), false);
  size_t missing = keys.size();
  int sleepUs = 100;
  for (;;) {
    for (size_t i = 0; i < keys.size(); ++i)
      if (!have[i] && readKey(keys[i], values ? &tmp[i] : &tmp[0])) {
        have[i] = true;
        --missing;
      }
    if (missing == 0) break;
    if (Clock::now() >= deadline) {
      size_t first = 0;
      while (have[first]) ++first;
      return errorf(tribTimeout, "file store %s: %zu of %zu keys still missing after %d ms (first: '%s')",
                    dir_.c_str(), missing, keys.size(), timeoutMs, keys[first].c_str());
    }
    std::this_thread::sleep_for(std::chrono::microseconds(sleepUs));
    sleepUs = std::min(sleepUs * 2, 20000);
  }
  if (values) *values = std::move(tmp);
  return Status::Ok();
}

Status FileStore::get(const std::string& key, Blob* value, int timeoutMs) {
  std::vector<Blob> v;
  TRIB_RETURN_IF_ERROR(multiGet({key}, &v, timeoutMs));
  *value = std::move(v[0]);
  return Status::Ok();
}

Status FileStore::wait(const std::vector<std::string>& keys, int timeoutMs) {
  return multiGet(keys, nullptr, timeoutMs);
}

Status FileStore::add(const std::string& key, int64_t delta, int64_t* result) {
  std::string lockPath = dir_ + "/.lock";
  int fd = ::open(lockPath.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return errorf(tribSystemError, "file store: cannot open '%s': %s", lockPath.c_str(), strerror(errno));
  // Bounded: a rank stopped (or hung) while it holds the lock must not hang every other add.
  const auto deadline = net::deadlineAfter(lockTimeoutMs_);
  for (int sleepUs = 100; flock(fd, LOCK_EX | LOCK_NB) != 0; sleepUs = std::min(sleepUs * 2, 20000)) {
    const int e = errno;
    if (e == EINTR) continue;
    if (e != EWOULDBLOCK || Clock::now() >= deadline) {
      close(fd);
      if (e != EWOULDBLOCK)
        return errorf(tribSystemError, "file store: cannot lock '%s': %s", lockPath.c_str(), strerror(e));
      return errorf(tribTimeout,
                    "file store add: '%s' stayed locked by another process for %d ms (a rank stopped or hung "
                    "while adding?)",
                    lockPath.c_str(), lockTimeoutMs_);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(sleepUs));
  }
  Blob cur;
  int64_t v = 0;
  Status st;
  if (readKey(key, &cur)) {
    std::string s(cur.begin(), cur.end());
    char* end = nullptr;
    v = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0')
      st = errorf(tribInvalidUsage, "file store add: key '%s' holds a non-integer value", key.c_str());
  }
  if (st.ok()) {
    v += delta;
    std::string s = std::to_string(v);
    st = writeAtomically(dir_, pathOf(key), Blob(s.begin(), s.end()));
  }
  flock(fd, LOCK_UN);
  close(fd);
  if (st.ok() && result) *result = v;
  return st;
}

Status FileStore::remove(const std::string& key, bool* existed) {
  int rc = unlink(pathOf(key).c_str());
  if (rc != 0 && errno != ENOENT)
    return errorf(tribSystemError, "file store: cannot remove key '%s': %s", key.c_str(), strerror(errno));
  if (existed) *existed = rc == 0;
  return Status::Ok();
}

}  // namespace trib
