// The CUDA-IPC / NVLink window provider's CPU-testable parts, for real: the SCM_RIGHTS helper
// between forked processes, the versioned connection blobs, the pair-choice logic from device
// facts, the device-registration cache against a fake allocator, and the provider's whole
// exchange (blobs, sockets, descriptors, mapping, signals, liveness) over host-memory windows
// (the memfd stand-in of the CUDA backend), between processes and within one.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "core/comm.hpp"
#include "core/registration.hpp"
#include "core/stream_coll.hpp"
#include "cuda/cuda_api.hpp"
#include "exec/host_stream.hpp"
#include "fork_util.hpp"
#include "transports/nvlink/fd_passing.hpp"
#include "transports/nvlink/nvlink_blob.hpp"
#include "transports/nvlink/nvlink_transport.hpp"
#include "transports/nvlink/nvlink_windows.hpp"
#include "transports/nvlink/pair_choice.hpp"
#include "tributary/tributary.h"

namespace trib {
namespace {

using namespace std::chrono_literals;
using nvlink::UniqueFd;

bool contains(const Status& st, const char* what) { return st.message().find(what) != std::string::npos; }

// ---- fd passing -----------------------------------------------------------------------------

struct SocketPair {
  UniqueFd a, b;
  SocketPair() {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) == 0) {
      a.reset(sv[0]);
      b.reset(sv[1]);
    }
  }
};

UniqueFd memfdWith(const std::string& bytes) {
  UniqueFd fd(memfd_create("test-nvlink", 0));
  if (fd.get() >= 0 && write(fd.get(), bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size()))
    fd.reset();
  return fd;
}

TEST(NvlinkFdPassing, PassesAMemfdBetweenForkedProcesses) {
  // The child listens, the parent connects and sends a memfd; the child reads the bytes through
  // the received descriptor, writes its answer into the same file, and the parent reads it back.
  const std::string name = "trib-test-fd-" + std::to_string(getpid());
  const std::string payload = "bytes through a passed descriptor";
  UniqueFd file = memfdWith(payload);
  ASSERT_GE(file.get(), 0);
  auto pids = testing::forkChildren(1, 20, [&](int) {
    UniqueFd listener, s;
    if (!nvlink::listenAbstract(name, &listener).ok()) return 1;
    if (!nvlink::acceptWithin(listener.get(), 10s, &s).ok()) return 2;
    uint64_t tag = 0;
    UniqueFd got[1];
    Status st = nvlink::recvFds(s.get(), &tag, sizeof tag, got, 1, 10s, "the parent");
    if (!st.ok()) {
      std::fprintf(stderr, "%s\n", st.message().c_str());
      return 3;
    }
    if (tag != 0x1234) return 4;
    std::string seen(payload.size(), '\0');
    if (pread(got[0].get(), seen.data(), seen.size(), 0) != static_cast<ssize_t>(seen.size()) ||
        seen != payload)
      return 5;
    const char answer[] = "ANSWER";
    if (pwrite(got[0].get(), answer, 6, 0) != 6) return 6;
    return 0;
  });
  UniqueFd s;
  ASSERT_TRUE(nvlink::connectAbstract(name, 10s, &s).ok());
  const uint64_t tag = 0x1234;
  const int fds[1] = {file.get()};
  ASSERT_TRUE(nvlink::sendFds(s.get(), &tag, sizeof tag, fds, 1).ok());
  auto results = testing::waitChildren(pids, 20);
  ASSERT_EQ(results[0].code, 0);
  char back[7] = {};
  ASSERT_EQ(pread(file.get(), back, 6, 0), 6);
  EXPECT_STREQ(back, "ANSWER");
}

TEST(NvlinkFdPassing, AClosedSocketIsAClearError) {
  SocketPair p;
  ASSERT_GE(p.a.get(), 0);
  p.b.reset();
  uint64_t tag;
  UniqueFd got[1];
  const Status st = nvlink::recvFds(p.a.get(), &tag, sizeof tag, got, 1, 1s, "rank 3");
  EXPECT_EQ(st.code(), tribRemoteError);
  EXPECT_TRUE(contains(st, "rank 3 closed its socket")) << st.message();
  const int fds[1] = {0};
  const Status sent = nvlink::sendFds(p.a.get(), &tag, sizeof tag, fds, 1);
  EXPECT_EQ(sent.code(), tribRemoteError) << sent.message();
}

TEST(NvlinkFdPassing, AMessageWithoutTheDescriptorsIsRefused) {
  SocketPair p;
  const uint64_t tag = 7;
  ASSERT_TRUE(nvlink::sendFds(p.b.get(), &tag, sizeof tag, nullptr, 0).ok());
  uint64_t got = 0;
  UniqueFd fds[1];
  const Status st = nvlink::recvFds(p.a.get(), &got, sizeof got, fds, 1, 1s, "rank 1");
  EXPECT_EQ(st.code(), tribRemoteError);
  EXPECT_TRUE(contains(st, "carried 0 file descriptor(s), expected 1")) << st.message();
  EXPECT_EQ(got, 0u);  // nothing copied out of a refused message
}

TEST(NvlinkFdPassing, TooManyDescriptorsAreRefusedAndClosed) {
  SocketPair p;
  UniqueFd f1 = memfdWith("a"), f2 = memfdWith("b");
  const uint64_t tag = 7;
  const int fds[2] = {f1.get(), f2.get()};
  ASSERT_TRUE(nvlink::sendFds(p.b.get(), &tag, sizeof tag, fds, 2).ok());
  uint64_t got;
  UniqueFd in[1];
  const Status st = nvlink::recvFds(p.a.get(), &got, sizeof got, in, 1, 1s, "rank 1");
  EXPECT_TRUE(contains(st, "carried 2 file descriptor(s), expected 1")) << st.message();
  EXPECT_EQ(in[0].get(), -1);
}

TEST(NvlinkFdPassing, TruncatedAndOverlongMessagesAreRefused) {
  SocketPair p;
  UniqueFd f = memfdWith("x");
  const int fds[1] = {f.get()};
  const uint32_t shortMsg = 1;
  ASSERT_TRUE(nvlink::sendFds(p.b.get(), &shortMsg, sizeof shortMsg, fds, 1).ok());
  uint64_t got;
  UniqueFd in[1];
  Status st = nvlink::recvFds(p.a.get(), &got, sizeof got, in, 1, 1s, "rank 2");
  EXPECT_EQ(st.code(), tribRemoteError);
  EXPECT_TRUE(contains(st, "truncated or malformed: 4 bytes, expected 8")) << st.message();
  const char longMsg[32] = {};
  ASSERT_TRUE(nvlink::sendFds(p.b.get(), longMsg, sizeof longMsg, fds, 1).ok());
  st = nvlink::recvFds(p.a.get(), &got, sizeof got, in, 1, 1s, "rank 2");
  EXPECT_TRUE(contains(st, "truncated or malformed: 9+ bytes, expected 8")) << st.message();
}

TEST(NvlinkFdPassing, WaitsAreBounded) {
  SocketPair p;
  uint64_t got;
  UniqueFd in[1];
  const auto t0 = std::chrono::steady_clock::now();
  const Status st = nvlink::recvFds(p.a.get(), &got, sizeof got, in, 1, 100ms, "rank 5");
  EXPECT_EQ(st.code(), tribTimeout) << st.message();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  UniqueFd s;
  const Status c = nvlink::connectAbstract("trib-test-nobody-" + std::to_string(getpid()), 100ms, &s);
  EXPECT_EQ(c.code(), tribTimeout) << c.message();
}

// SO_PEERCRED names the connecting process: it passes as itself, also once it exited (what it
// sent still counts), and is refused as another process (another pid, or its pid with another
// start time: a reused pid).
TEST(NvlinkFdPassing, APeerIsCheckedToBeTheProcessItShouldBe) {
  const std::string name = "trib-test-cred-" + std::to_string(getpid());
  UniqueFd listener;
  ASSERT_TRUE(nvlink::listenAbstract(name, &listener).ok());
  auto pids = testing::forkChildren(1, 20, [&](int) {
    UniqueFd s;
    if (!nvlink::connectAbstract(name, 10s, &s).ok()) return 1;
    const ProcessIdentity me = selfIdentity();
    if (!nvlink::sendFds(s.get(), &me, sizeof me, nullptr, 0).ok()) return 2;
    char byte;
    return read(s.get(), &byte, 1) == 1 ? 0 : 3;  // exits when the parent says so
  });
  UniqueFd s;
  ASSERT_TRUE(nvlink::acceptWithin(listener.get(), 10s, &s).ok());
  ProcessIdentity child;
  ASSERT_TRUE(nvlink::recvFds(s.get(), &child, sizeof child, nullptr, 0, 10s, "the child").ok());
  EXPECT_TRUE(nvlink::checkPeer(s.get(), nullptr, "rank 1").ok());
  const Status same = nvlink::checkPeer(s.get(), &child, "rank 1");
  EXPECT_TRUE(same.ok()) << same.message();
  const ProcessIdentity self = selfIdentity();
  Status st = nvlink::checkPeer(s.get(), &self, "rank 1");
  EXPECT_EQ(st.code(), tribRemoteError);
  EXPECT_TRUE(contains(st, ("refused rank 1: the process at the other end of the socket is pid " +
                            std::to_string(child.pid) + ", not pid " + std::to_string(self.pid))
                               .c_str()))
      << st.message();
  ProcessIdentity reused = child;
  reused.startTime += 1;
  st = nvlink::checkPeer(s.get(), &reused, "rank 1");
  EXPECT_TRUE(contains(st, "now belongs to another process")) << st.message();
  ProcessIdentity elsewhere = self;  // a pid of another pid namespace says nothing here
  std::snprintf(elsewhere.space, sizeof elsewhere.space, "another-namespace");
  EXPECT_TRUE(nvlink::checkPeer(s.get(), &elsewhere, "rank 1").ok());
  ASSERT_EQ(write(s.get(), "x", 1), 1);
  EXPECT_EQ(testing::waitChildren(pids, 20)[0].code, 0);
  const Status exited = nvlink::checkPeer(s.get(), &child, "rank 1");
  EXPECT_TRUE(exited.ok()) << exited.message();
}

TEST(NvlinkFdPassing, APeerOfAnotherUserIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run the peer as another user";
  const std::string name = "trib-test-user-" + std::to_string(getpid());
  UniqueFd listener;
  ASSERT_TRUE(nvlink::listenAbstract(name, &listener).ok());
  auto pids = testing::forkChildren(1, 20, [&](int) {
    if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0) return 1;
    UniqueFd s;
    if (!nvlink::connectAbstract(name, 10s, &s).ok()) return 2;
    char byte;
    return read(s.get(), &byte, 1) == 0 ? 0 : 3;
  });
  UniqueFd s;
  ASSERT_TRUE(nvlink::acceptWithin(listener.get(), 10s, &s).ok());
  const Status st = nvlink::checkPeer(s.get(), nullptr, "a connection to rank 0");
  EXPECT_EQ(st.code(), tribRemoteError);
  EXPECT_TRUE(contains(st, "refused a connection to rank 0")) << st.message();
  EXPECT_TRUE(contains(st, "runs as uid 65534, this process as uid 0")) << st.message();
  s.reset();
  EXPECT_EQ(testing::waitChildren(pids, 20)[0].code, 0);
}

// ---- blobs ----------------------------------------------------------------------------------

TEST(NvlinkBlob, RoundTripsAndRefusesMalformedOrForeignBlobs) {
  nvlink::DeviceBlob b;
  b.device = 3;
  b.windowBytes = 1 << 20;
  b.facts.uuid[0] = 9;
  b.facts.vmmFd = 1;
  std::snprintf(b.socketName, sizeof b.socketName, "sock");
  const std::vector<uint8_t> bytes = nvlink::encodeDeviceBlob(2, 4, 0xabc, b);
  nvlink::DeviceBlob out;
  ASSERT_TRUE(nvlink::decodeDeviceBlob(bytes, 2, 4, 0xabc, &out).ok());
  EXPECT_EQ(out.device, 3);
  EXPECT_EQ(out.windowBytes, 1u << 20);
  EXPECT_EQ(out.facts.uuid[0], 9);
  EXPECT_STREQ(out.socketName, "sock");

  auto refused = [&](std::vector<uint8_t> v, int peer, int nranks, uint64_t comm, const char* what) {
    const Status st = nvlink::decodeDeviceBlob(v, peer, nranks, comm, &out);
    EXPECT_EQ(st.code(), tribRemoteError) << what;
    EXPECT_TRUE(contains(st, what)) << st.message();
    EXPECT_TRUE(contains(st, ("rank " + std::to_string(peer)).c_str())) << st.message();  // names the peer
  };
  refused(std::vector<uint8_t>(bytes.begin(), bytes.begin() + 10), 2, 4, 0xabc, "too short");
  refused(std::vector<uint8_t>(bytes.begin(), bytes.end() - 1), 2, 4, 0xabc, "malformed");
  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  refused(longer, 2, 4, 0xabc, "malformed");
  std::vector<uint8_t> magic = bytes;
  magic[0] ^= 0xff;
  refused(magic, 2, 4, 0xabc, "another program");
  std::vector<uint8_t> version = bytes;
  version[4] = 2;
  refused(version, 2, 4, 0xabc, "mixed Tributary versions");
  refused(bytes, 2, 4, 0xdef, "another communicator");
  refused(bytes, 2, 5, 0xabc, "another communicator");
  refused(bytes, 1, 4, 0xabc, "says it is rank 2's");
  nvlink::DeviceBlob open = b;
  std::memset(open.socketName, 'x', sizeof open.socketName);
  refused(nvlink::encodeDeviceBlob(2, 4, 0xabc, open), 2, 4, 0xabc, "unterminated socket name");
}

TEST(NvlinkBlob, WindowBlobCarriesAValidPathRow) {
  nvlink::WindowBlob w;
  w.mappedBytes = 4096;
  w.windowAddress = 0x1000;
  const std::vector<nvlink::PairPath> row = {nvlink::PairPath::VmmFd, nvlink::PairPath::Self,
                                             nvlink::PairPath::Direct};
  nvlink::WindowBlob out;
  std::vector<nvlink::PairPath> got;
  ASSERT_TRUE(nvlink::decodeWindowBlob(nvlink::encodeWindowBlob(1, 3, 5, w, row), 1, 3, 5, &out, &got).ok());
  EXPECT_EQ(got, row);
  EXPECT_EQ(out.mappedBytes, 4096u);
  std::vector<uint8_t> bad = nvlink::encodeWindowBlob(1, 3, 5, w, row);
  bad.back() = 9;  // no such path
  Status st = nvlink::decodeWindowBlob(bad, 1, 3, 5, &out, &got);
  EXPECT_TRUE(contains(st, "names path 9 to rank 2")) << st.message();
  const std::vector<nvlink::PairPath> notSelf = {nvlink::PairPath::Self, nvlink::PairPath::Direct,
                                                 nvlink::PairPath::Direct};
  st = nvlink::decodeWindowBlob(nvlink::encodeWindowBlob(1, 3, 5, w, notSelf), 1, 3, 5, &out, &got);
  EXPECT_TRUE(contains(st, "does not name itself")) << st.message();
  // A row of the wrong length is a blob of the wrong size.
  st = nvlink::decodeWindowBlob(nvlink::encodeWindowBlob(1, 3, 5, w, {nvlink::PairPath::Self}), 1, 3, 5, &out,
                                &got);
  EXPECT_TRUE(contains(st, "malformed")) << st.message();
}

TEST(NvlinkBlob, FdMessagesAreChecked) {
  int rank = -1;
  EXPECT_TRUE(nvlink::checkFdMessage(nvlink::makeFdMessage(2, 4, 77, 2), 4, 77, "a peer", &rank).ok());
  EXPECT_EQ(rank, 2);
  Status st = nvlink::checkFdMessage(nvlink::makeFdMessage(2, 4, 78, 2), 4, 77, "a peer", &rank);
  EXPECT_TRUE(contains(st, "another communicator")) << st.message();
  EXPECT_EQ(rank, -1);
  st = nvlink::checkFdMessage(nvlink::makeFdMessage(9, 4, 77, 2), 4, 77, "a peer", &rank);
  EXPECT_TRUE(contains(st, "names rank 9 of 4")) << st.message();
}

// ---- pair choice ----------------------------------------------------------------------------

TEST(NvlinkPairChoice, WindowsWhereDevicesReachEachOtherElseHostStaging) {
  using nvlink::PairPath;
  auto path = [](bool sameProcess, bool sameDevice, bool peerAccess, bool vmm, bool ipc) {
    nvlink::PairFacts f;
    f.sameProcess = sameProcess;
    f.sameDevice = sameDevice;
    f.peerAccess = peerAccess;
    f.vmmFd = vmm;
    f.legacyIpc = ipc;
    return nvlink::choosePairPath(f);
  };
  nvlink::PairFacts self;
  self.self = true;
  EXPECT_EQ(nvlink::choosePairPath(self), PairPath::Self);
  // One process: pointers, on one GPU or two that reach each other; none without peer access.
  EXPECT_EQ(path(true, true, false, false, false), PairPath::Direct);
  EXPECT_EQ(path(true, false, true, false, false), PairPath::Direct);
  EXPECT_EQ(path(true, false, false, true, true), PairPath::HostStaging);
  // Processes: VMM fds first, legacy IPC where VMM is missing, staging without either or without
  // peer access (two ranks sharing one GPU need none).
  EXPECT_EQ(path(false, true, false, true, true), PairPath::VmmFd);
  EXPECT_EQ(path(false, false, true, true, true), PairPath::VmmFd);
  EXPECT_EQ(path(false, false, true, false, true), PairPath::LegacyIpc);
  EXPECT_EQ(path(false, false, true, false, false), PairPath::HostStaging);
  EXPECT_EQ(path(false, false, false, true, true), PairPath::HostStaging);

  std::vector<std::vector<PairPath>> rows = {{PairPath::Self, PairPath::VmmFd},
                                             {PairPath::VmmFd, PairPath::Self}};
  std::string why;
  EXPECT_TRUE(nvlink::windowsUsable(rows, &why)) << why;
  rows[1][0] = PairPath::HostStaging;  // one direction is enough to lose the windows
  EXPECT_FALSE(nvlink::windowsUsable(rows, &why));
  EXPECT_NE(why.find("rank 1 cannot map rank 0's"), std::string::npos) << why;
}

TEST(NvlinkPairChoice, TheHandleTypeIsOneEveryRankSupports) {
  nvlink::DeviceFacts vmm, ipcOnly, none;
  vmm.vmmFd = vmm.legacyIpc = 1;
  ipcOnly.legacyIpc = 1;
  EXPECT_EQ(nvlink::chooseHandle(MemoryKind::Device, {vmm, vmm}), nvlink::WindowHandle::VmmFd);
  EXPECT_EQ(nvlink::chooseHandle(MemoryKind::Device, {vmm, ipcOnly}), nvlink::WindowHandle::LegacyIpc);
  EXPECT_EQ(nvlink::chooseHandle(MemoryKind::Device, {vmm, none}), nvlink::WindowHandle::None);
  EXPECT_EQ(nvlink::chooseHandle(MemoryKind::HostShared, {none}), nvlink::WindowHandle::HostMemfd);
}

// ---- the device-registration cache, against a fake allocator ---------------------------------

// Device allocations by base: what cuda::deviceAllocation would answer.
std::map<uintptr_t, cuda::DeviceAllocation>& fakeDevice() {
  static std::map<uintptr_t, cuda::DeviceAllocation> m;
  return m;
}
bool fakeLookup(const void* p, cuda::DeviceAllocation* out) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  for (const auto& [base, alloc] : fakeDevice()) {
    if (a >= base && a < base + alloc.bytes) {
      *out = alloc;
      return true;
    }
  }
  return false;
}
void* fakeAlloc(uintptr_t base, size_t bytes, uint64_t id) {
  fakeDevice()[base] = cuda::DeviceAllocation{base, bytes, 0, id};
  return reinterpret_cast<void*>(base);
}

TEST(NvlinkRegistrationCache, DeviceRangesAreCheckedAgainstTheirAllocation) {
  fakeDevice().clear();
  Registrations regs(7, fakeLookup);
  // Far from anything this process maps: only the fake allocator knows these addresses.
  char* a = static_cast<char*>(fakeAlloc(0x7e0000000000, 1 << 20, 1));
  void* h1 = nullptr;
  ASSERT_TRUE(regs.add(a + 4096, 8192, &h1).ok());
  // Device registrations do not make the memory "registered host memory": it stays device memory.
  EXPECT_FALSE(regs.covers(a + 4096, 16));
  cuda::DeviceAllocation found;
  ASSERT_TRUE(regs.checkDevice(a + 4096 + 100, 64, &found).ok());
  EXPECT_EQ(found.base, reinterpret_cast<uintptr_t>(a));
  EXPECT_EQ(found.bufferId, 1u);
  ASSERT_TRUE(regs.checkDevice(a + 4096 + 100, 1 << 20, &found).ok());  // past its end: not registered
  EXPECT_EQ(found.base, 0u);
  ASSERT_TRUE(regs.checkDevice(a + 900000, 64, &found).ok());  // not inside a registration
  EXPECT_EQ(found.base, 0u);

  void* h = reinterpret_cast<void*>(1);
  Status st = regs.add(a + (1 << 20) - 100, 200, &h);  // runs past its allocation
  EXPECT_EQ(st.code(), tribInvalidArgument);
  EXPECT_TRUE(contains(st, "runs past its CUDA allocation")) << st.message();
  EXPECT_EQ(h, nullptr);
  st = regs.add(a + 8192, 8192, &h);  // overlaps the first registration
  EXPECT_TRUE(contains(st, "overlaps the registration")) << st.message();
  EXPECT_FALSE(contains(st, "freed")) << st.message();
  EXPECT_EQ(regs.size(), 1u);

  // The allocation is freed, and another takes its address: the registration is stale.
  fakeDevice().clear();
  st = regs.checkDevice(a + 4096, 64);
  EXPECT_EQ(st.code(), tribInvalidArgument);
  EXPECT_TRUE(contains(st, "was freed since it was registered")) << st.message();
  fakeAlloc(reinterpret_cast<uintptr_t>(a), 1 << 20, 2);
  st = regs.checkDevice(a + 4096, 64);
  EXPECT_TRUE(contains(st, "was freed since it was registered")) << st.message();
  st = regs.add(a + 4096, 64, &h);
  EXPECT_TRUE(contains(st, "whose device memory was freed since it was registered")) << st.message();
  // Deregistered, the new allocation registers and checks fine.
  ASSERT_TRUE(regs.remove(h1).ok());
  ASSERT_TRUE(regs.add(a + 4096, 64, &h).ok());
  EXPECT_TRUE(regs.checkDevice(a + 4096, 64, &found).ok());
  EXPECT_EQ(found.bufferId, 2u);
  EXPECT_EQ(regs.remove(h1).code(), tribInvalidArgument);  // twice
  fakeDevice().clear();
}

TEST(NvlinkRegistrationCache, HostMemoryKeepsItsPath) {
  fakeDevice().clear();
  Registrations regs(8, fakeLookup);
  std::vector<char> buf(4096);
  void* h = nullptr;
  ASSERT_TRUE(regs.add(buf.data(), buf.size(), &h).ok());
  EXPECT_TRUE(regs.covers(buf.data(), 16));
  EXPECT_TRUE(regs.checkDevice(buf.data(), 16).ok());  // host registrations are not device ones
  // Unmapped and unknown to the allocator: refused as before.
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* hole = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(hole, MAP_FAILED);
  ASSERT_EQ(munmap(hole, page), 0);
  const Status st = regs.add(hole, page, &h);
  EXPECT_TRUE(contains(st, "is not mapped")) << st.message();
}

// ---- the window provider over host windows ---------------------------------------------------

// An exchange between processes (or threads) of one test through files in a directory: every rank
// writes its blob for round k, then waits (bounded) for every rank's.
class FileExchange {
 public:
  FileExchange(std::string dir, int rank, int nranks) : dir_(std::move(dir)), rank_(rank), nranks_(nranks) {}
  Status operator()(const std::vector<uint8_t>& mine, std::vector<std::vector<uint8_t>>& all) {
    const int round = round_++;
    auto file = [&](int r) { return dir_ + "/" + std::to_string(round) + "-" + std::to_string(r); };
    {
      std::ofstream out(file(rank_) + ".tmp", std::ios::binary);
      out.write(reinterpret_cast<const char*>(mine.data()), static_cast<std::streamsize>(mine.size()));
    }
    std::filesystem::rename(file(rank_) + ".tmp", file(rank_));
    all.assign(nranks_, {});
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    for (int r = 0; r < nranks_; ++r) {
      while (!std::filesystem::exists(file(r))) {
        if (std::chrono::steady_clock::now() > deadline)
          return errorf(tribTimeout, "file exchange: rank %d's round %d never came", r, round);
        std::this_thread::sleep_for(1ms);
      }
      std::ifstream in(file(r), std::ios::binary);
      all[r].assign(std::istreambuf_iterator<char>(in), {});
    }
    return Status::Ok();
  }

 private:
  std::string dir_;
  int rank_, nranks_, round_ = 0;
};

std::string tempDir() {
  char tmpl[] = "/tmp/trib-nvlink-test-XXXXXX";
  const char* d = mkdtemp(tmpl);
  return d ? d : "";
}

nvlink::WindowsArgs argsFor(int rank, int nranks, const std::string& dir,
                            std::vector<RankLocation> locations) {
  nvlink::WindowsArgs a;
  a.rank = rank;
  a.nranks = nranks;
  a.commId = 0x5eed;
  a.locations = std::move(locations);
  auto ex = std::make_shared<FileExchange>(dir, rank, nranks);
  a.oob = [ex](const std::vector<uint8_t>& mine, std::vector<std::vector<uint8_t>>& all) {
    return (*ex)(mine, all);
  };
  a.timeout = 20s;
  a.windowBytes = 64 << 10;
  return a;
}

// Every rank writes its pattern into its window and signals every peer; each checks every peer's
// window once that peer's signal came (and its fingerprint). Returns 0 or a failure code.
int runWindowsRank(nvlink::NvlinkWindows& w, int rank, int nranks) {
  if (w.windowBytes() != 64u << 10) return 10;
  auto* mine = reinterpret_cast<uint32_t*>(w.windowOf(rank));
  const size_t words = w.windowBytes() / sizeof(uint32_t);
  for (size_t i = 0; i < words; ++i) mine[i] = static_cast<uint32_t>(rank * 1000003 + i);
  for (int p = 0; p < nranks; ++p)
    if (p != rank) w.signal(p, 0xbeef);
  for (int p = 0; p < nranks; ++p) {
    if (p == rank) continue;
    uint64_t count = 0;
    uint32_t fp = 0;
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    do {
      if (Status st = w.pollSignals(p, 1, &count, &fp); !st.ok()) {
        std::fprintf(stderr, "rank %d waiting for rank %d: %s\n", rank, p, st.message().c_str());
        return 11;
      }
      if (std::chrono::steady_clock::now() > deadline) return 12;
    } while (count < 1);
    if (count != 1 || fp != 0xbeef) return 13;
    const auto* theirs = reinterpret_cast<const uint32_t*>(w.windowOf(p));
    for (size_t i = 0; i < words; ++i)
      if (theirs[i] != static_cast<uint32_t>(p * 1000003 + i)) return 14;
  }
  return 0;
}

// Ranks that are processes: a location each, as thisRankLocation gives them.
std::vector<RankLocation> processLocations(int n) {
  std::vector<RankLocation> l(n, thisRankLocation());
  for (int r = 0; r < n; ++r) {
    l[r].process = 1000 + r;
    l[r].pid = 100000 + r;  // only sameProcess reads them: distinct is what matters
  }
  return l;
}

// The forked ranks' results, once every one is in; the exchange's directory is removed.
std::vector<testing::ChildResult> waitRanks(const std::vector<pid_t>& pids, const std::string& dir) {
  auto results = testing::waitChildren(pids, 60);
  std::filesystem::remove_all(dir);
  return results;
}

void expectRanksSucceed(const std::vector<pid_t>& pids, const std::string& dir) {
  const auto results = waitRanks(pids, dir);
  for (size_t r = 0; r < results.size(); ++r) EXPECT_EQ(results[r].code, 0) << "rank " << r;
}

// One rank's windows over host memory (why: the reason there are none, when there are none).
Status hostWindows(const nvlink::WindowsArgs& args, std::unique_ptr<nvlink::NvlinkWindows>* w,
                   std::string* why) {
  return nvlink::NvlinkWindows::create(args, nvlink::hostWindowMemory(), w, why);
}

// Rank `rank` of `n` processes: its windows, or null with the reason printed.
std::unique_ptr<nvlink::NvlinkWindows> processWindows(int rank, int n, const std::string& dir) {
  std::unique_ptr<nvlink::NvlinkWindows> w;
  std::string why;
  const Status st = hostWindows(argsFor(rank, n, dir, processLocations(n)), &w, &why);
  if (!st.ok() || !w) std::fprintf(stderr, "rank %d: %s %s\n", rank, st.message().c_str(), why.c_str());
  return w;
}

TEST(NvlinkWindows, ThreeProcessesMapEachOthersWindowsThroughPassedDescriptors) {
  const int n = 3;
  const std::string dir = tempDir();
  ASSERT_FALSE(dir.empty());
  auto pids = testing::forkChildren(n, 60, [&](int rank) {
    std::unique_ptr<nvlink::NvlinkWindows> w = processWindows(rank, n, dir);
    if (!w) return 1;
    for (int p = 0; p < n; ++p) {
      if (p != rank && w->path(p) != nvlink::PairPath::VmmFd) return 2;  // fds, as VMM handles travel
      if (p != rank && w->windowOf(p) == w->windowOf(rank)) return 3;
    }
    if (w->handle() != nvlink::WindowHandle::HostMemfd) return 4;
    return runWindowsRank(*w, rank, n);
  });
  expectRanksSucceed(pids, dir);
}

TEST(NvlinkWindows, RanksOfOneProcessUseEachOthersPointers) {
  const int n = 3;
  const std::string dir = tempDir();
  std::vector<RankLocation> locations(n, thisRankLocation());
  std::vector<std::unique_ptr<nvlink::NvlinkWindows>> w(n);
  std::vector<Status> st(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      std::string why;
      st[r] = hostWindows(argsFor(r, n, dir, locations), &w[r], &why);
    });
  }
  for (auto& t : threads) t.join();
  threads.clear();
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(st[r].ok()) << st[r].message();
    ASSERT_NE(w[r], nullptr);
  }
  for (int r = 0; r < n; ++r)
    for (int p = 0; p < n; ++p) {
      EXPECT_EQ(w[r]->windowOf(p), w[p]->windowOf(p)) << r << " " << p;  // the owner's own pointer
      EXPECT_EQ(w[r]->path(p), p == r ? nvlink::PairPath::Self : nvlink::PairPath::Direct);
    }
  std::vector<int> codes(n);
  for (int r = 0; r < n; ++r) threads.emplace_back([&, r] { codes[r] = runWindowsRank(*w[r], r, n); });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
  std::filesystem::remove_all(dir);
}

TEST(NvlinkWindows, APairWithoutPeerAccessLeavesEveryRankWithoutWindows) {
  // Rank 1's "GPU" is another one, and no device reaches another: every rank learns it alike.
  const int n = 3;
  const std::string dir = tempDir();
  auto pids = testing::forkChildren(n, 60, [&](int rank) {
    std::unique_ptr<nvlink::NvlinkWindows> w;
    std::string why;
    const Status st =
        nvlink::NvlinkWindows::create(argsFor(rank, n, dir, processLocations(n)),
                                      nvlink::hostWindowMemory(rank == 1 ? 2 : 1, false), &w, &why);
    if (!st.ok()) return 1;
    if (w) return 2;
    if (why.find("cannot map rank 1's") == std::string::npos) {
      std::fprintf(stderr, "rank %d: %s\n", rank, why.c_str());
      return 3;
    }
    return 0;
  });
  expectRanksSucceed(pids, dir);
}

TEST(NvlinkWindows, APeerThatDiesIsReportedAndAbortEndsTheWait) {
  const int n = 2;
  const std::string dir = tempDir();
  auto pids = testing::forkChildren(n, 60, [&](int rank) {
    std::unique_ptr<nvlink::NvlinkWindows> w;
    std::string why;
    auto args = argsFor(rank, n, dir, processLocations(n));
    if (!hostWindows(args, &w, &why).ok() || !w) return 1;
    if (rank == 1) return 0;  // exits without signalling
    uint64_t count = 0;
    uint32_t fp = 0;
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    for (;;) {
      const Status st = w->pollSignals(1, 1, &count, &fp);
      if (!st.ok()) {
        if (st.code() != tribRemoteError || !contains(st, "rank 1")) return 2;
        break;
      }
      if (std::chrono::steady_clock::now() > deadline) return 3;
      std::this_thread::sleep_for(1ms);
    }
    w->abort(errorf(tribRemoteError, "aborted by the test"));
    const Status st = w->pollSignals(1, 1, &count, &fp);
    return contains(st, "aborted by the test") ? 0 : 4;
  });
  expectRanksSucceed(pids, dir);
}

TEST(NvlinkWindows, MismatchedWindowSizesAreRefusedOnEveryRank) {
  const int n = 2;
  const std::string dir = tempDir();
  auto pids = testing::forkChildren(n, 60, [&](int rank) {
    auto args = argsFor(rank, n, dir, processLocations(n));
    args.windowBytes = rank == 0 ? 64 << 10 : 128 << 10;
    std::unique_ptr<nvlink::NvlinkWindows> w;
    std::string why;
    const Status st = hostWindows(args, &w, &why);
    return st.code() == tribInvalidUsage && contains(st, "TRIB_WINDOW_BYTES") ? 0 : 1;
  });
  expectRanksSucceed(pids, dir);
}

// A process of this user that reaches a rank's socket before its peer and claims to be that peer:
// its descriptors are closed unused, and the real peer's are taken (before, the stranger's memory
// was mapped as the peer's window).
TEST(NvlinkWindows, AStrangerClaimingARankIsRefusedAndTheRankStillConnects) {
  const int n = 2;
  const std::string dir = tempDir();
  ASSERT_FALSE(dir.empty());
  const std::string strangerDone = dir + "/stranger-done";
  auto pids = testing::forkChildren(n, 60, [&](int rank) {
    // Rank 1 starts once the stranger's message waits in rank 0's backlog, ahead of its own.
    while (rank == 1 && !std::filesystem::exists(strangerDone)) std::this_thread::sleep_for(1ms);
    std::unique_ptr<nvlink::NvlinkWindows> w = processWindows(rank, n, dir);
    if (!w) return 1;
    return runWindowsRank(*w, rank, n);
  });
  // The stranger (this process) reads rank 0's published socket and claims to be rank 1.
  const std::string published = dir + "/0-0";
  for (int i = 0; i < 20000 && !std::filesystem::exists(published); ++i) std::this_thread::sleep_for(1ms);
  std::ifstream in(published, std::ios::binary);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
  nvlink::DeviceBlob rank0;
  ASSERT_TRUE(nvlink::decodeDeviceBlob(bytes, 0, n, 0x5eed, &rank0).ok());
  UniqueFd s;
  ASSERT_TRUE(nvlink::connectAbstract(rank0.socketName, 10s, &s).ok());
  UniqueFd page = memfdWith(std::string(n * nvlink::NvlinkWindows::kLineBytes, '\0'));
  UniqueFd window = memfdWith(std::string(64 << 10, '\x5a'));
  const nvlink::FdMessage claim = nvlink::makeFdMessage(1, n, 0x5eed, 2);
  const int fds[2] = {page.get(), window.get()};
  ASSERT_TRUE(nvlink::sendFds(s.get(), &claim, sizeof claim, fds, 2).ok());
  std::ofstream{strangerDone};
  expectRanksSucceed(pids, dir);
}

// A listener that is not the rank that published the name (a process that bound it instead) is
// sent no descriptor: the sending rank fails with an error that says so.
TEST(NvlinkWindows, ASocketNotBoundByThePeerIsSentNothing) {
  const int n = 2;
  const std::string dir = tempDir();
  ASSERT_FALSE(dir.empty());
  const std::string squatter = "trib-test-squatter-" + std::to_string(getpid());
  UniqueFd listener;
  ASSERT_TRUE(nvlink::listenAbstract(squatter, &listener).ok());
  auto pids = testing::forkChildren(n, 60, [&](int rank) {
    auto args = argsFor(rank, n, dir, processLocations(n));
    args.timeout = rank == 0 ? 10s : 1s;
    if (rank == 0) {  // rank 0 is told that rank 1 listens at the squatter's name
      auto round = std::make_shared<int>(0);
      args.oob = [inner = args.oob, round, squatter](const std::vector<uint8_t>& mine,
                                                     std::vector<std::vector<uint8_t>>& all) {
        TRIB_RETURN_IF_ERROR(inner(mine, all));
        if ((*round)++ != 0) return Status::Ok();
        nvlink::DeviceBlob b;
        TRIB_RETURN_IF_ERROR(nvlink::decodeDeviceBlob(all[1], 1, 2, 0x5eed, &b));
        std::snprintf(b.socketName, sizeof b.socketName, "%s", squatter.c_str());
        all[1] = nvlink::encodeDeviceBlob(1, 2, 0x5eed, b);
        return Status::Ok();
      };
    }
    std::unique_ptr<nvlink::NvlinkWindows> w;
    std::string why;
    const Status st = hostWindows(args, &w, &why);
    if (rank == 1) return 0;  // it waits in vain for rank 0's descriptors: not what is tested
    if (st.code() == tribRemoteError &&
        contains(st, "passing descriptors to rank 1: refused the listener at") && contains(st, "not pid"))
      return 0;
    std::fprintf(stderr, "rank 0: %s\n", st.message().c_str());
    return 1;
  });
  UniqueFd s;
  ASSERT_TRUE(nvlink::acceptWithin(listener.get(), 20s, &s).ok());
  nvlink::FdMessage got;
  UniqueFd in[2];
  const Status st = nvlink::recvFds(s.get(), &got, sizeof got, in, 2, 20s, "rank 0");
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(in[0].get(), -1);
  const auto results = waitRanks(pids, dir);
  EXPECT_EQ(results[0].code, 0);
}

// ---- the core path: device calls run one-shot and two-shot over the provider's windows -------

// The host engine posing as a device one (completing inline), so that stream-ordered calls on host
// buffers are planned and run as device memory, over the device windows a test gives the comms.
class DevicePose final : public Engine {
 public:
  const char* name() const override { return "device pose"; }
  MemoryKind memory() const override { return MemoryKind::Device; }
  Status postCopy(void* dst, const void* src, size_t bytes, TransferOp* op, bool) override {
    return hostEngine().postCopy(dst, src, bytes, op, false);
  }
  Status postReduce(void* dst, const void* a, const void* b, uint64_t count, DataType dtype, RedOp rop,
                    TransferOp* op) override {
    return hostEngine().postReduce(dst, a, b, count, dtype, rop, op);
  }
  Status postDivide(void* buf, uint64_t count, DataType dtype, uint64_t divisor, TransferOp* op) override {
    return hostEngine().postDivide(buf, count, dtype, divisor, op);
  }
  Status progress() override { return Status::Ok(); }
  void* allocScratch(size_t bytes) override { return hostEngine().allocScratch(bytes); }
  void freeScratch(void* p, size_t bytes) override { hostEngine().freeScratch(p, bytes); }
};

TEST(NvlinkWindows, DeviceCallsRunOneShotAndTwoShotOverTheDeviceWindows) {
  const int n = 3;
  for (const char* algo : {"oneshot", "twoshot"}) {
    SCOPED_TRACE(algo);
    setenv("TRIB_ALGO", algo, 1);
    setenv("TRIB_ALGO_STRICT", "1", 1);  // a call that cannot run it fails instead of running another
    std::vector<tribComm_t> comms(n);
    ASSERT_EQ(tribCommInitAll(comms.data(), n, nullptr), tribSuccess) << tribGetLastError(nullptr);
    unsetenv("TRIB_ALGO");
    unsetenv("TRIB_ALGO_STRICT");
    std::vector<std::unique_ptr<HostStream>> streams;
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(setStreamTesting(comms[r]->impl(), std::make_unique<HostStreamOrdering>(),
                                   std::make_unique<DevicePose>())
                      .ok());
      streams.push_back(std::make_unique<HostStream>());
    }
    // The provider's windows (host stand-in, one process: pointers), given to the comms as theirs.
    const std::string dir = tempDir();
    std::vector<std::unique_ptr<nvlink::NvlinkWindows>> w(n);
    std::vector<std::thread> threads;
    std::vector<RankLocation> locations(n, thisRankLocation());
    for (int r = 0; r < n; ++r)
      threads.emplace_back([&, r] {
        std::string why;
        EXPECT_TRUE(hostWindows(argsFor(r, n, dir, locations), &w[r], &why).ok());
      });
    for (auto& t : threads) t.join();
    threads.clear();
    std::filesystem::remove_all(dir);
    for (int r = 0; r < n; ++r) {
      ASSERT_NE(w[r], nullptr);
      comms[r]->impl()->deviceWindows = w[r].get();
    }
    // Windows of 64 KiB: cells of 32 KiB. One-shot takes up to a cell, two-shot a cell at a time.
    const bool oneShot = std::string(algo) == "oneshot";
    for (size_t count : {size_t{1000}, oneShot ? size_t{8000} : size_t{20000}, size_t{4099}}) {
      std::vector<std::vector<float>> in(n), out(n);
      for (int r = 0; r < n; ++r) {
        in[r].resize(count);
        out[r].assign(count, -1.f);
        for (size_t i = 0; i < count; ++i) in[r][i] = static_cast<float>((r + 1) * (i % 97));
      }
      for (int r = 0; r < n; ++r)
        threads.emplace_back([&, r] {
          EXPECT_EQ(tribAllReduce(in[r].data(), out[r].data(), count, tribFloat32, tribSum, comms[r],
                                  streams[r].get()),
                    tribSuccess)
              << tribGetLastError(comms[r]);
        });
      for (auto& t : threads) t.join();
      threads.clear();
      for (int r = 0; r < n; ++r) ASSERT_TRUE(streams[r]->synchronize(std::chrono::milliseconds(20000)));
      for (int r = 0; r < n; ++r) {
        tribResult_t async = tribSuccess;
        EXPECT_EQ(tribCommGetAsyncError(comms[r], &async), tribSuccess);
        ASSERT_EQ(async, tribSuccess) << tribGetLastError(comms[r]);
        for (size_t i = 0; i < count; ++i)
          ASSERT_EQ(out[r][i], static_cast<float>(6 * (i % 97))) << "rank " << r << " element " << i;
      }
    }
    // The peer-memory steps waited on the device windows' signals, never on the host windows'.
    for (int r = 0; r < n; ++r) {
      for (int p = 0; p < n; ++p) {
        if (p == r) continue;
        EXPECT_GT(w[r]->waitsPosted(p), 0u) << r << " " << p;
        if (PeerWindows* host = comms[r]->impl()->windows) {
          EXPECT_EQ(host->waitsPosted(p), 0u);
        }
      }
    }
    for (tribComm_t c : comms) EXPECT_EQ(tribCommDestroy(c), tribSuccess);
    streams.clear();
  }
}

// ---- the registry entry -----------------------------------------------------------------------

TEST(NvlinkTransport, IsAWindowProviderForRanksThatSetACudaDevice) {
  const auto& providers = windowProviderRegistry();
  ASSERT_EQ(providers.size(), 1u);
  const TransportDescriptor& d = providers[0];
  EXPECT_STREQ(d.name, "nvlink");
  EXPECT_FALSE(d.caps.twoSided);
  EXPECT_TRUE(d.caps.windows);
  EXPECT_TRUE(d.caps.zeroCopy);
  EXPECT_EQ(d.caps.reads, memoryKindBit(MemoryKind::Device));
  EXPECT_EQ(findTransport("nvlink"), nullptr);  // never a pair's (two-sided) transport
  RankLocation a = thisRankLocation(), b = a;
  b.process ^= 1;
  a.flags = b.flags = kLocationCudaContext;
  EXPECT_TRUE(d.canConnect(a, b));
  b.flags = 0;  // a process that set no device (host memory only)
  EXPECT_FALSE(d.canConnect(a, b));
  RankLocation far = a;
  far.host[0] ^= 1;
  EXPECT_FALSE(d.canConnect(a, far));
  // Without a device (here) no process has a context, so no communicator connects it.
  if (!cuda::deviceStatus().ok()) {
    EXPECT_EQ(thisRankLocation().flags & kLocationCudaContext, 0u);
  }
  std::vector<RankLocation> both = {a, a};
  EXPECT_EQ(chooseWindowProviders(both, true).size(), d.notBuilt ? 0u : 1u);
  EXPECT_TRUE(chooseWindowProviders(both, false).empty());  // it connects through an exchange
  EXPECT_TRUE(chooseWindowProviders({a}, true).empty());
}

}  // namespace
}  // namespace trib
