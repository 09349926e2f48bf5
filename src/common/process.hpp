// Who a peer process is, and whether that very process still runs: one rule for every transport
// that watches its peers. A pid alone is fooled by reuse (a dead peer's pid given to a new
// process looks alive to kill(pid, 0)); pid + start time is not. Pids compare only within one
// kernel and pid namespace, which `space` names.
#pragma once
#include <cstdint>
#include <string>

namespace trib {

struct ProcessIdentity {
  int32_t pid = 0;
  uint32_t reserved = 0;
  uint64_t startTime = 0;  // clock ticks after boot (/proc/<pid>/stat field 22)
  char space[96] = {};     // "boot-id/pid:[inode]": the kernel and pid namespace; empty: unknown
};

// The running kernel's boot id (/proc/sys/kernel/random/boot_id; "" where unreadable), read once:
// equal on two processes exactly when they run on the same kernel.
const std::string& bootId();
// This process; `space` stays empty where /proc does not say (then nobody watches it by pid).
ProcessIdentity selfIdentity();
// Whether `peer`'s pid means the same process here as there (same kernel and pid namespace).
bool samePidSpace(const ProcessIdentity& self, const ProcessIdentity& peer);
// True while the process `id` runs: false once it exited, while it is a zombie, or when its pid
// now belongs to another process; true while /proc cannot be read for another reason (out of file
// descriptors, say). Meaningful only where samePidSpace holds.
bool processAlive(const ProcessIdentity& id);
// True when `id`'s pid now belongs to another process (another start time): false while it is
// that process, once no process has that pid, and when /proc cannot tell.
bool pidTakenByAnother(const ProcessIdentity& id);

}  // namespace trib
