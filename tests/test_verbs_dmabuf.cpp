// Device memory registered with the NIC through dma-buf (transports/verbs/verbs_dmabuf.hpp): the
// page arithmetic and the choice between dma-buf, ibv_reg_mr (nvidia-peermem) and refusing run
// everywhere; the registration itself needs a GPU and an RDMA device and skips without them.
#include <gtest/gtest.h>

#include <unistd.h>

#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "common/status.hpp"
#include "cuda/cuda_api.hpp"
#include "cuda/cuda_vmm.hpp"
#include "transports/verbs/verbs_dmabuf.hpp"
#ifdef TRIB_HAVE_VERBS
#include <infiniband/verbs.h>

#include "transports/verbs/verbs_device.hpp"
#endif

namespace trib::verbs {
namespace {

constexpr uint64_t kPage = 4096;

DmabufSpan spanOf(uint64_t addr, uint64_t bytes, uint64_t page = kPage) {
  DmabufSpan s;
  const Status st = dmabufSpan(addr, bytes, page, &s);
  EXPECT_TRUE(st.ok()) << st.message();
  return s;
}

TEST(VerbsDmabufSpan, WithinOnePage) {
  const DmabufSpan s = spanOf(0x7f0000001010, 100);
  EXPECT_EQ(s.base, 0x7f0000001000u);
  EXPECT_EQ(s.size, kPage);
  EXPECT_EQ(s.offset, 0x10u);
}

TEST(VerbsDmabufSpan, AlignedBufferIsItsOwnSpan) {
  const DmabufSpan s = spanOf(0x7f0000002000, 3 * kPage);
  EXPECT_EQ(s.base, 0x7f0000002000u);
  EXPECT_EQ(s.size, 3 * kPage);
  EXPECT_EQ(s.offset, 0u);
  // One byte more reaches into a fourth page.
  EXPECT_EQ(spanOf(0x7f0000002000, 3 * kPage + 1).size, 4 * kPage);
}

TEST(VerbsDmabufSpan, StraddlingPagesCoversBoth) {
  // The last 16 bytes of one page and the first 16 of the next.
  const DmabufSpan s = spanOf(0x7f0000003ff0, 32);
  EXPECT_EQ(s.base, 0x7f0000003000u);
  EXPECT_EQ(s.size, 2 * kPage);
  EXPECT_EQ(s.offset, 0xff0u);
  // The buffer lies inside the span: offset + bytes <= size.
  EXPECT_LE(s.offset + 32, s.size);
  // Ending exactly on a page boundary adds no page.
  const DmabufSpan e = spanOf(0x7f0000003ff0, 16);
  EXPECT_EQ(e.size, kPage);
}

TEST(VerbsDmabufSpan, LargerPages) {
  // 64 KiB pages (aarch64 kernels): the same rule.
  const DmabufSpan s = spanOf(0x7f0000012345, 0x10000, 0x10000);
  EXPECT_EQ(s.base, 0x7f0000010000u);
  EXPECT_EQ(s.size, 0x20000u);
  EXPECT_EQ(s.offset, 0x2345u);
}

TEST(VerbsDmabufSpan, BadInputIsRefusedWithAReason) {
  DmabufSpan s;
  Status st = dmabufSpan(0x1000, 0, kPage, &s);
  EXPECT_EQ(st.code(), tribInvalidArgument);
  EXPECT_NE(st.message().find("zero bytes"), std::string::npos) << st.message();
  st = dmabufSpan(0x1000, 10, 0, &s);
  EXPECT_EQ(st.code(), tribInvalidArgument);
  EXPECT_NE(st.message().find("power of two"), std::string::npos) << st.message();
  st = dmabufSpan(0x1000, 10, 3000, &s);
  EXPECT_EQ(st.code(), tribInvalidArgument);
}

TEST(VerbsDmabufSpan, NearTheEndOfTheAddressSpace) {
  DmabufSpan s;
  // Wraps past UINTPTR_MAX.
  Status st = dmabufSpan(UINTPTR_MAX - 10, 20, kPage, &s);
  EXPECT_EQ(st.code(), tribInvalidArgument);
  EXPECT_NE(st.message().find("end of the address space"), std::string::npos) << st.message();
  EXPECT_EQ(dmabufSpan(1, UINT64_MAX, kPage, &s).code(), tribInvalidArgument);
  // Inside the last page: its end (2^64) cannot be represented.
  EXPECT_EQ(dmabufSpan(UINTPTR_MAX - 100, 1, kPage, &s).code(), tribInvalidArgument);
  EXPECT_EQ(dmabufSpan(UINTPTR_MAX - kPage + 1, 1, kPage, &s).code(), tribInvalidArgument);
  // The page before it is fine, to its last byte.
  const uint64_t lastPage = UINT64_MAX - kPage + 1;  // 2^64 - 4096
  const DmabufSpan ok = spanOf(lastPage - kPage + 8, kPage - 8);
  EXPECT_EQ(ok.base, lastPage - kPage);
  EXPECT_EQ(ok.size, kPage);
  EXPECT_EQ(ok.offset, 8u);
  EXPECT_EQ(dmabufSpan(lastPage - kPage + 8, kPage - 7, kPage, &s).code(), tribInvalidArgument)
      << "one byte more reaches the last page";
}

DeviceRegFacts facts(bool cuda, bool verbsDmabuf, bool driverDmabuf, int err = 0) {
  DeviceRegFacts f;
  f.cudaBuilt = cuda;
  f.verbsDmabuf = verbsDmabuf;
  f.driverDmabuf = driverDmabuf;
  f.dmabufErrno = err;
  return f;
}

TEST(VerbsDeviceReg, DmabufWhereEverythingSupportsIt) {
  const DeviceRegChoice c = chooseDeviceReg(facts(true, true, true));
  EXPECT_EQ(c.path, DeviceRegPath::Dmabuf);
  EXPECT_EQ(c.why, "");
}

TEST(VerbsDeviceReg, PeerMemOnlyWhereDmabufIsUnsupported) {
  DeviceRegChoice c = chooseDeviceReg(facts(true, false, true));
  EXPECT_EQ(c.path, DeviceRegPath::PeerMem);
  EXPECT_NE(c.why.find("ibv_reg_dmabuf_mr"), std::string::npos) << c.why;
  c = chooseDeviceReg(facts(true, true, false));
  EXPECT_EQ(c.path, DeviceRegPath::PeerMem);
  EXPECT_NE(c.why.find("CUDA driver"), std::string::npos) << c.why;
  // The NIC's driver refused dma-buf as unsupported: the answers that mean so.
  for (int e : {EOPNOTSUPP, EPROTONOSUPPORT, ENOSYS}) {
    c = chooseDeviceReg(facts(true, true, true, e));
    EXPECT_EQ(c.path, DeviceRegPath::PeerMem) << e;
    EXPECT_NE(c.why.find("no dma-buf support"), std::string::npos) << c.why;
  }
}

TEST(VerbsDeviceReg, RefusesOtherFailuresAndBuildsWithoutCuda) {
  // Any other dma-buf failure is a real one (bad range, no memory, permissions): no silent
  // fallback to a path that would fail less clearly.
  for (int e : {EFAULT, EINVAL, ENOMEM, EPERM}) {
    const DeviceRegChoice c = chooseDeviceReg(facts(true, true, true, e));
    EXPECT_EQ(c.path, DeviceRegPath::Refuse) << e;
    EXPECT_NE(c.why.find("ibv_reg_dmabuf_mr failed"), std::string::npos) << c.why;
  }
  for (bool v : {false, true})
    for (bool d : {false, true}) {
      const DeviceRegChoice c = chooseDeviceReg(facts(false, v, d));
      EXPECT_EQ(c.path, DeviceRegPath::Refuse);
      EXPECT_NE(c.why.find("no CUDA"), std::string::npos) << c.why;
    }
}

// The CUDA half, without a driver or device (here; and every build without CUDA): no dma-buf, and
// an export fails with the reason instead of handing back an fd.
TEST(VerbsDmabufExport, RefusedWithoutADevice) {
  if (cuda::deviceStatus().ok())
    GTEST_SKIP() << "a CUDA device is present (RegistersDeviceMemoryOnHardware covers it)";
  EXPECT_FALSE(cuda::dmabufSupported(0));
  int fd = 7;
  const Status s = cuda::dmabufExport(0x7f0000000000, kPage, &fd);
  EXPECT_EQ(s.code(), tribUnhandledCudaError);
  EXPECT_NE(s.message().find("no CUDA driver/device"), std::string::npos) << s.message();
  EXPECT_EQ(fd, -1);
}

// The CUDA half on a GPU (no RDMA device needed): the span of a buffer that is not page aligned
// exports as a dma-buf.
TEST(VerbsDmabufExport, ExportsDeviceMemoryOnGpu) {
  if (Status s = cuda::deviceStatus(); !s.ok()) GTEST_SKIP() << "needs a CUDA device: " << s.message();
  if (!cuda::dmabufSupported(0)) GTEST_SKIP() << "CUDA device 0's driver offers no dma-buf";
  void* mem = nullptr;
  Status s = cuda::deviceAlloc(0, 1 << 20, &mem);
  ASSERT_TRUE(s.ok()) << s.message();
  DmabufSpan span;
  s = dmabufSpan(reinterpret_cast<uintptr_t>(mem) + 100, 3 * kPage,
                 static_cast<uint64_t>(sysconf(_SC_PAGESIZE)), &span);
  ASSERT_TRUE(s.ok()) << s.message();
  int fd = -1;
  s = cuda::dmabufExport(static_cast<uintptr_t>(span.base), span.size, &fd);
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_GE(fd, 0);
  if (fd >= 0) ::close(fd);
  cuda::deviceFree(mem);
}

// Whether verbs is given device memory (its caps' probe), from the facts it gathers at connect.
TEST(VerbsDeviceReach, NeedsCudaAContextAndAWayToRegister) {
  DeviceReachFacts f;
  f.cudaBuilt = f.cudaContext = f.verbsDmabuf = f.driverDmabuf = true;
  std::string why;
  EXPECT_TRUE(deviceMemoryReachable(f, &why));
  EXPECT_EQ(why, "dma-buf");
  f.driverDmabuf = false;  // no dma-buf from the driver: only nvidia-peermem serves
  EXPECT_FALSE(deviceMemoryReachable(f, &why));
  EXPECT_NE(why.find("nvidia-peermem is not loaded"), std::string::npos) << why;
  f.peerMem = true;
  EXPECT_TRUE(deviceMemoryReachable(f, &why));
  EXPECT_EQ(why, "nvidia-peermem");
  f.verbsDmabuf = false;  // an rdma-core without ibv_reg_dmabuf_mr, nvidia-peermem loaded
  EXPECT_TRUE(deviceMemoryReachable(f, &why));
  f.peerMem = false;
  EXPECT_FALSE(deviceMemoryReachable(f, &why));
  EXPECT_NE(why.find("ibv_reg_dmabuf_mr"), std::string::npos) << why;
  // Whatever the NIC side offers: no CUDA, or no context at init, is no device memory.
  f = DeviceReachFacts{};
  f.verbsDmabuf = f.driverDmabuf = f.peerMem = true;
  f.cudaContext = true;
  EXPECT_FALSE(deviceMemoryReachable(f, &why));
  EXPECT_EQ(why, "this build has no CUDA");
  f.cudaBuilt = true;
  f.cudaContext = false;
  EXPECT_FALSE(deviceMemoryReachable(f, nullptr));
}

// The trial registration on the NIC (nicDmabufErrno): a NIC driver without dma-buf support
// leaves only nvidia-peermem; any other refusal means the registrations would fail, so no device
// memory, whatever else is loaded.
TEST(VerbsDeviceReach, ANicThatRefusesTheTrialDmabufLeavesOnlyPeerMem) {
  DeviceReachFacts f;
  f.cudaBuilt = f.cudaContext = f.verbsDmabuf = f.driverDmabuf = true;
  std::string why;
  for (int e : {EOPNOTSUPP, EPROTONOSUPPORT, ENOSYS}) {
    f.nicDmabufErrno = e;
    f.peerMem = false;
    EXPECT_FALSE(deviceMemoryReachable(f, &why)) << e;
    EXPECT_NE(why.find("no dma-buf support"), std::string::npos) << why;
    EXPECT_NE(why.find("nvidia-peermem is not loaded"), std::string::npos) << why;
    f.peerMem = true;
    EXPECT_TRUE(deviceMemoryReachable(f, &why)) << e;
    EXPECT_EQ(why, "nvidia-peermem");
  }
  f.nicDmabufErrno = EFAULT;  // refused for another reason: nvidia-peermem would not be tried either
  EXPECT_FALSE(deviceMemoryReachable(f, &why));
  EXPECT_NE(why.find("a trial registration on the NIC failed"), std::string::npos) << why;
  EXPECT_NE(why.find(std::strerror(EFAULT)), std::string::npos) << why;
  f.nicDmabufErrno = 0;
  EXPECT_TRUE(deviceMemoryReachable(f, &why));
  EXPECT_EQ(why, "dma-buf");
}

TEST(VerbsDeviceReach, PeerMemIsALoadedModule) {
  char dir[] = "/tmp/trib-sysmodule-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string root = dir;
  EXPECT_FALSE(peerMemLoaded(root));
  ASSERT_EQ(::mkdir((root + "/nvidia").c_str(), 0700), 0);  // the GPU driver alone is not enough
  EXPECT_FALSE(peerMemLoaded(root));
  ASSERT_EQ(::mkdir((root + "/nv_peer_mem").c_str(), 0700), 0);  // the older module
  EXPECT_TRUE(peerMemLoaded(root));
  ASSERT_EQ(::rmdir((root + "/nv_peer_mem").c_str()), 0);
  ASSERT_EQ(::mkdir((root + "/nvidia_peermem").c_str(), 0700), 0);
  EXPECT_TRUE(peerMemLoaded(root));
  EXPECT_FALSE(peerMemLoaded(root + "/missing"));
  ::rmdir((root + "/nvidia_peermem").c_str());
  ::rmdir((root + "/nvidia").c_str());
  ::rmdir(dir);
}

// On a machine with a GPU and an RDMA device: device memory at an offset that is not page aligned,
// registered as the transport registers it, describes exactly the buffer.
TEST(VerbsDeviceReg, RegistersDeviceMemoryOnHardware) {
#ifndef TRIB_HAVE_VERBS
  GTEST_SKIP() << "this build has no verbs transport (libibverbs not found)";
#else
  if (!haveRdmaPort()) GTEST_SKIP() << "needs an RDMA device: " << rdmaPortStatus().message();
  if (Status s = cuda::deviceStatus(); !s.ok()) GTEST_SKIP() << "needs a CUDA device: " << s.message();
  PortChoice choice;
  ASSERT_TRUE(choosePort(&choice).ok());
  std::shared_ptr<DeviceContext> ctx;
  Status s = DeviceContext::open(choice, &ctx);
  ASSERT_TRUE(s.ok()) << s.message();
  void* mem = nullptr;
  s = cuda::deviceAlloc(0, 1 << 20, &mem);
  ASSERT_TRUE(s.ok()) << s.message();
  const uint64_t addr = reinterpret_cast<uintptr_t>(mem) + 100;
  const uint64_t bytes = 3 * kPage;
  ibv_mr* mr = nullptr;
  s = registerDeviceMemory(ctx->pd(), choice.device, 0, addr, bytes,
                           IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, &mr);
  EXPECT_TRUE(s.ok()) << s.message();
  if (mr) {
    // (mr->addr is not compared: for a dma-buf registration it need not be the iova.)
    EXPECT_EQ(mr->length, bytes);
    EXPECT_EQ(mr->pd, ctx->pd());
    EXPECT_EQ(ibv_dereg_mr(mr), 0);
  }
  cuda::deviceFree(mem);
  // The connect-time probe, with its trial registration, says yes exactly when this worked.
  DeviceReachFacts f;
  f.cudaBuilt = f.cudaContext = true;
  f.verbsDmabuf = dmabufRegistrationBuilt();
  f.driverDmabuf = cuda::dmabufSupported(0);
  f.peerMem = peerMemLoaded();
  f.nicDmabufErrno = dmabufTrial(ctx->pd(), 0);
  std::string why;
  EXPECT_EQ(deviceMemoryReachable(f, &why), s.ok()) << why;
#endif
}

}  // namespace
}  // namespace trib::verbs
