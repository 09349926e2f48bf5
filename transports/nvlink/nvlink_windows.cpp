#include "transports/nvlink/nvlink_windows.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "common/log.hpp"
#include "common/random.hpp"
#include "transports/nvlink/nvlink_blob.hpp"

namespace trib::nvlink {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kLivenessInterval = std::chrono::milliseconds(50);

bool fdHandle(WindowHandle h) { return h == WindowHandle::VmmFd || h == WindowHandle::HostMemfd; }

std::string socketNameFor(uint64_t commId, int rank) {
  return strprintf("trib-nvl-%016llx-%d-%d-%08x", static_cast<unsigned long long>(commId), rank,
                   static_cast<int>(getpid()), static_cast<unsigned>(randomId64()));
}

Status exchange(const OobAllGather& oob, const std::vector<uint8_t>& mine, int nranks,
                std::vector<std::vector<uint8_t>>* all) {
  if (!oob)
    return errorf(tribInternalError,
                  "the nvlink windows connect through an exchange; this communicator has none");
  TRIB_RETURN_IF_ERROR(oob(mine, *all));
  if (static_cast<int>(all->size()) != nranks)
    return errorf(tribInternalError, "the exchange returned %zu blobs for %d ranks", all->size(), nranks);
  return Status::Ok();
}

}  // namespace

WindowHandle chooseHandle(MemoryKind memory, const std::vector<DeviceFacts>& all) {
  if (memory != MemoryKind::Device) return WindowHandle::HostMemfd;
  bool vmm = true, ipc = true;
  for (const DeviceFacts& f : all) {
    vmm = vmm && f.vmmFd;
    ipc = ipc && f.legacyIpc;
  }
  return vmm ? WindowHandle::VmmFd : ipc ? WindowHandle::LegacyIpc : WindowHandle::None;
}

Status NvlinkWindows::create(const WindowsArgs& args, std::unique_ptr<WindowMemory> memory,
                             std::unique_ptr<NvlinkWindows>* out, std::string* why) {
  out->reset();
  if (args.nranks < 1 || args.rank < 0 || args.rank >= args.nranks ||
      static_cast<int>(args.locations.size()) != args.nranks)
    return errorf(tribInternalError, "nvlink windows: rank %d of %d with %zu locations", args.rank,
                  args.nranks, args.locations.size());
  std::unique_ptr<NvlinkWindows> w(new NvlinkWindows());
  w->memory_ = std::move(memory);
  TRIB_RETURN_IF_ERROR(w->connect(args, why));
  if (!why->empty()) return Status::Ok();  // every rank alike: no windows
  *out = std::move(w);
  return Status::Ok();
}

Status NvlinkWindows::connect(const WindowsArgs& args, std::string* why) {
  why->clear();
  rank_ = args.rank;
  nranks_ = args.nranks;
  windowBytes_ = (args.windowBytes + 63) / 64 * 64;
  const int n = nranks_;
  windows_.assign(n, nullptr);
  peerPages_.assign(n, nullptr);
  pageMapped_.assign(n, false);
  sent_.assign(n, 0);
  waitsPosted_.assign(n, 0);
  peerProcess_.assign(n, ProcessIdentity{});
  nextLivenessCheck_.assign(n, Clock::now());

  // This rank's signal page: a memfd, so that peers of other processes map it too.
  signalBytes_ = static_cast<size_t>(n) * kLineBytes;
  signalFd_.reset(memfd_create("trib-nvlink-signals", MFD_CLOEXEC));
  if (signalFd_.get() < 0 || ftruncate(signalFd_.get(), static_cast<off_t>(signalBytes_)) != 0)
    return errorf(tribSystemError, "nvlink windows: a signal page of %zu bytes: %s", signalBytes_,
                  std::strerror(errno));
  void* page = mmap(nullptr, signalBytes_, PROT_READ | PROT_WRITE, MAP_SHARED, signalFd_.get(), 0);
  if (page == MAP_FAILED)
    return errorf(tribSystemError, "nvlink windows: mmap of the signal page: %s", std::strerror(errno));
  signalPage_ = static_cast<uint8_t*>(page);
  peerPages_[rank_] = signalPage_;

  // Round one: devices and sockets.
  DeviceBlob mine;
  mine.device = memory_->device();
  mine.process = selfIdentity();
  mine.windowBytes = windowBytes_;
  mine.facts = memory_->facts();
  const std::string name = socketNameFor(args.commId, rank_);
  TRIB_RETURN_IF_ERROR(listenAbstract(name, &listener_).prefix("nvlink windows: "));
  std::snprintf(mine.socketName, sizeof mine.socketName, "%s", name.c_str());
  std::vector<std::vector<uint8_t>> all;
  TRIB_RETURN_IF_ERROR(exchange(args.oob, encodeDeviceBlob(rank_, n, args.commId, mine), n, &all));
  std::vector<DeviceBlob> devices(n);
  std::vector<DeviceFacts> facts(n);
  for (int r = 0; r < n; ++r) {
    TRIB_RETURN_IF_ERROR(decodeDeviceBlob(all[r], r, n, args.commId, &devices[r]).prefix("nvlink windows: "));
    if (devices[r].windowBytes != windowBytes_)
      return errorf(tribInvalidUsage,
                    "nvlink windows: rank %d has windows of %llu bytes, rank %d of %llu (set "
                    "TRIB_WINDOW_BYTES alike on every rank)",
                    r, static_cast<unsigned long long>(devices[r].windowBytes), rank_,
                    static_cast<unsigned long long>(windowBytes_));
    facts[r] = devices[r].facts;
    peerProcess_[r] = devices[r].process;
  }

  // This rank's path to each peer, then its window in the communicator's handle type.
  handle_ = chooseHandle(memory_->kind(), facts);
  paths_.assign(n, PairPath::HostStaging);
  for (int p = 0; p < n; ++p) {
    PairFacts f;
    f.self = p == rank_;
    f.sameProcess = sameProcess(args.locations[p], args.locations[rank_]);
    f.sameDevice = std::memcmp(facts[p].uuid, facts[rank_].uuid, sizeof facts[p].uuid) == 0;
    f.peerAccess = !f.self && !f.sameDevice && memory_->canAccess(facts[p]);
    f.vmmFd = fdHandle(handle_);
    f.legacyIpc = handle_ == WindowHandle::LegacyIpc;
    paths_[p] = choosePairPath(f);
  }
  TRIB_RETURN_IF_ERROR(memory_->allocate(windowBytes_, handle_, &local_).prefix("nvlink windows: "));
  windows_[rank_] = local_.ptr;
  WindowBlob wb;
  wb.handle = static_cast<uint32_t>(handle_);
  wb.mappedBytes = local_.mappedBytes;
  wb.windowAddress = reinterpret_cast<uintptr_t>(local_.ptr);
  wb.signalAddress = reinterpret_cast<uintptr_t>(signalPage_);
  std::memcpy(wb.ipcHandle, local_.ipc, sizeof wb.ipcHandle);
  TRIB_RETURN_IF_ERROR(exchange(args.oob, encodeWindowBlob(rank_, n, args.commId, wb, paths_), n, &all));
  std::vector<WindowBlob> blobs(n);
  std::vector<std::vector<PairPath>> rows(n);
  for (int r = 0; r < n; ++r)
    TRIB_RETURN_IF_ERROR(
        decodeWindowBlob(all[r], r, n, args.commId, &blobs[r], &rows[r]).prefix("nvlink windows: "));
  if (!windowsUsable(rows, why)) {
    TRIB_INFO("nvlink", "rank %d: no device windows: %s; device calls stage through host memory", rank_,
              why->c_str());
    return Status::Ok();
  }

  // Same-process peers: their pointers (peer access enabled where they are on another device).
  for (int p = 0; p < n; ++p) {
    if (paths_[p] != PairPath::Direct) continue;
    if (std::memcmp(facts[p].uuid, facts[rank_].uuid, sizeof facts[p].uuid) != 0)
      TRIB_RETURN_IF_ERROR(memory_->enablePeer(facts[p]).prefix(strprintf("nvlink windows: rank %d: ", p)));
    windows_[p] = reinterpret_cast<void*>(static_cast<uintptr_t>(blobs[p].windowAddress));
  }
  for (int p = 0; p < n; ++p) {
    if (paths_[p] != PairPath::LegacyIpc) continue;
    MappedWindow m;
    TRIB_RETURN_IF_ERROR(memory_->openIpc(blobs[p].ipcHandle, blobs[p].mappedBytes, &m)
                             .prefix(strprintf("nvlink windows: rank %d's IPC handle: ", p)));
    windows_[p] = m.ptr;
    mapped_.push_back(m);
  }
  // Every peer's signal page, and the windows that come as fds, over the sockets.
  TRIB_RETURN_IF_ERROR(exchangeFds(args, devices, blobs));
  listener_.reset();
  return Status::Ok();
}

Status NvlinkWindows::exchangeFds(const WindowsArgs& args, const std::vector<DeviceBlob>& devices,
                                  const std::vector<WindowBlob>& blobs) {
  const int n = nranks_;
  if (n == 1) return Status::Ok();
  // Every rank sends to every other rank first (a connect completes in the listener's backlog, so
  // nobody waits for an accept), then accepts its n-1 messages, in whatever order they come.
  const int nfds = fdHandle(handle_) ? 2 : 1;
  const auto deadline = Clock::now() + args.timeout;
  auto left = [&] {
    return std::max(std::chrono::milliseconds(0),
                    std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
  };
  std::vector<UniqueFd> sent;  // kept open until every message is received: a closed socket's
                               // queued message is still delivered, but keep it simple to reason about
  const FdMessage msg = makeFdMessage(rank_, n, args.commId, nfds);
  const int fds[2] = {signalFd_.get(), local_.fd.get()};
  for (int p = 0; p < n; ++p) {
    if (p == rank_) continue;
    UniqueFd s;
    const std::string to = strprintf("nvlink windows: passing descriptors to rank %d: ", p);
    TRIB_RETURN_IF_ERROR(connectAbstract(devices[p].socketName, left(), &s).prefix(to));
    // Whoever bound the name is sent nothing unless it is rank p's process.
    TRIB_RETURN_IF_ERROR(
        checkPeer(s.get(), &devices[p].process, strprintf("the listener at '%s'", devices[p].socketName))
            .prefix(to));
    TRIB_RETURN_IF_ERROR(
        sendFds(s.get(), &msg, sizeof msg, fds, nfds).prefix(strprintf("nvlink windows: to rank %d: ", p)));
    sent.push_back(std::move(s));
  }
  std::vector<bool> came(n, false);
  for (int k = 0; k < n - 1;) {
    UniqueFd s;
    TRIB_RETURN_IF_ERROR(
        acceptWithin(listener_.get(), left(), &s)
            .prefix(strprintf("nvlink windows: rank %d waiting for its peers' descriptors (%d of %d "
                              "came): ",
                              rank_, k, n - 1)));
    // A process of another user is refused before it can hand this rank a descriptor; one of this
    // user that is not the rank it claims, before a descriptor it handed is used (they close).
    // Either is dropped, and the wait goes on for the real peers.
    const std::string from = strprintf("a peer of rank %d", rank_);
    if (Status who = checkPeer(s.get(), nullptr, "a connection to rank " + std::to_string(rank_));
        !who.ok()) {
      TRIB_WARN("nvlink", "nvlink windows: %s", who.message().c_str());
      continue;
    }
    FdMessage got;
    UniqueFd in[2];
    TRIB_RETURN_IF_ERROR(
        recvFds(s.get(), &got, sizeof got, in, nfds, left(), from).prefix("nvlink windows: "));
    int q = -1;
    TRIB_RETURN_IF_ERROR(checkFdMessage(got, n, args.commId, from, &q).prefix("nvlink windows: "));
    if (Status who =
            checkPeer(s.get(), &devices[q].process, strprintf("a connection claiming to be rank %d", q));
        !who.ok()) {
      TRIB_WARN("nvlink", "nvlink windows: rank %d: %s", rank_, who.message().c_str());
      continue;
    }
    if (q == rank_ || came[q])
      return errorf(tribRemoteError,
                    "nvlink windows: rank %d sent its descriptors twice (or claims to be rank %d)", q, rank_);
    ++k;
    came[q] = true;
    if (paths_[q] == PairPath::Direct) {
      // The same process: its own mapping (one address for the signal word, which is also what
      // ThreadSanitizer needs to see the release and the acquire pair up).
      peerPages_[q] = reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(blobs[q].signalAddress));
      continue;
    }
    void* page = mmap(nullptr, signalBytes_, PROT_READ | PROT_WRITE, MAP_SHARED, in[0].get(), 0);
    if (page == MAP_FAILED)
      return errorf(tribSystemError, "nvlink windows: mapping rank %d's signal page: %s", q,
                    std::strerror(errno));
    peerPages_[q] = static_cast<uint8_t*>(page);
    pageMapped_[q] = true;
    if (paths_[q] == PairPath::VmmFd) {
      MappedWindow m;
      TRIB_RETURN_IF_ERROR(
          memory_->importFd(in[1].get(), blobs[q].mappedBytes, &m)
              .prefix(strprintf("nvlink windows: rank %d's window (%s): ", q, windowHandleName(handle_))));
      windows_[q] = m.ptr;
      mapped_.push_back(m);
    }
  }
  return Status::Ok();
}

NvlinkWindows::~NvlinkWindows() {
  for (MappedWindow& m : mapped_) memory_->unmap(m);
  if (local_.ptr) memory_->free(local_);
  for (int p = 0; p < nranks_; ++p) {
    if (pageMapped_[p]) munmap(peerPages_[p], signalBytes_);
  }
  if (signalPage_) munmap(signalPage_, signalBytes_);
}

void NvlinkWindows::signal(int peer, uint32_t fingerprint) {
  // Only this rank writes its line of the peer's page: one release store of count and fingerprint.
  const uint64_t word = (++sent_[peer] << 16) | (fingerprint & kFingerprintMask);
  line(peerPages_[peer], rank_)->store(word, std::memory_order_release);
}

Status NvlinkWindows::pollSignals(int peer, uint64_t target, uint64_t* count, uint32_t* fingerprint) {
  auto load = [&] {
    const uint64_t word = line(signalPage_, peer)->load(std::memory_order_acquire);
    *count = word >> 16;
    *fingerprint = static_cast<uint32_t>(word & kFingerprintMask);
    return *count >= target;
  };
  if (load()) return Status::Ok();
  if (aborted_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(abortMu_);
    return abortWhy_;
  }
  // A peer process that is gone never signals: say so (checked at most every kLivenessInterval).
  static const ProcessIdentity self = selfIdentity();
  const ProcessIdentity& id = peerProcess_[peer];
  const auto now = Clock::now();
  if (now >= nextLivenessCheck_[peer] && id.pid != self.pid && samePidSpace(self, id)) {
    nextLivenessCheck_[peer] = now + kLivenessInterval;
    // Loaded again once it is known gone: it may have signalled just before it exited.
    if (!processAlive(id) && !load())
      return errorf(tribRemoteError, "rank %d (pid %d) is gone: its process exited", peer,
                    static_cast<int>(id.pid));
  }
  return Status::Ok();
}

void NvlinkWindows::abort(const Status& why) {
  std::lock_guard<std::mutex> lock(abortMu_);
  if (aborted_.load(std::memory_order_relaxed)) return;
  abortWhy_ = why.ok() ? errorf(tribInvalidUsage, "the nvlink windows were aborted") : why;
  aborted_.store(true, std::memory_order_release);
}

const char* windowHandleName(WindowHandle h) {
  switch (h) {
    case WindowHandle::None:
      return "none";
    case WindowHandle::VmmFd:
      return "CUDA VMM POSIX file descriptor";
    case WindowHandle::LegacyIpc:
      return "legacy CUDA IPC handle";
    case WindowHandle::HostMemfd:
      return "host memfd";
  }
  return "unknown";
}

}  // namespace trib::nvlink
