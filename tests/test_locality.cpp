// NIC choice by locality (topo/locality.hpp), everywhere: on the DGX H100 generator's graph and
// on a fake sysfs tree in a temporary folder (PCI paths, numa_node, NUMA cpulists, a soft-RoCE
// device without a PCI parent).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "temp_tree.hpp"
#include "topo/locality.hpp"
#include "topo/topology.hpp"

using namespace trib;
namespace fs = std::filesystem;

namespace {

std::vector<PciPlace> nicPlaces(const Topology& t) {
  std::vector<PciPlace> out;
  for (int n = 0; n < t.numNodes(); ++n)
    if (t.node(n).type == NodeType::Nic) out.push_back(topologyPlace(t, n));
  return out;
}

}  // namespace

// Every GPU's rank gets its own rail's NIC (the one behind its PCIe switch), whatever its local
// index: locality decides, not the rank's position.
TEST(NicChoice, DgxH100EachGpuGetsItsRail) {
  const Topology t = makeDgxH100();
  const std::vector<PciPlace> nics = nicPlaces(t);
  ASSERT_EQ(nics.size(), 8u);
  for (int g = 0; g < 8; ++g) {
    const PciPlace gpu = topologyPlace(t, t.find(strprintf("gpu%d", g)));
    EXPECT_EQ(gpu.bridges, std::vector<std::string>{strprintf("pcie%d", g)});
    for (int local : {g, 7 - g}) {
      const NicRank r = rankNics(gpu, nics, local);
      EXPECT_EQ(nics[r.index].what, strprintf("nic%d", g)) << "gpu" << g << " local rank " << local;
      EXPECT_EQ(r.closeness, Closeness::PciSwitch);
      EXPECT_EQ(r.tied, 1);
    }
  }
  // Another socket's NIC is farther than one on the GPU's socket.
  const PciPlace gpu0 = topologyPlace(t, t.find("gpu0"));
  EXPECT_EQ(closeness(gpu0, nics[1]), Closeness::Numa);
  EXPECT_EQ(closeness(gpu0, nics[4]), Closeness::Other);
}

// CPU-only ranks on socket 1 take socket 1's NICs, spread over all four by local index.
TEST(NicChoice, DgxH100CpuRanksOnNuma1SpreadOverItsNics) {
  const Topology t = makeDgxH100();
  const std::vector<PciPlace> nics = nicPlaces(t);
  const int cpu1 = t.find("cpu1");
  const PciPlace cpu = topologyPlace(t, cpu1);
  ASSERT_EQ(cpu.numa, std::vector<int>{cpu1});
  std::vector<std::string> got;
  for (int local = 0; local < 5; ++local) {
    const NicRank r = rankNics(cpu, nics, local);
    EXPECT_EQ(r.closeness, Closeness::Numa);
    EXPECT_EQ(r.tied, 4);
    EXPECT_EQ(t.nearestCpu(t.find(nics[r.index].what)), cpu1) << nics[r.index].what;
    got.push_back(nics[r.index].what);
  }
  EXPECT_EQ(got, (std::vector<std::string>{"nic4", "nic5", "nic6", "nic7", "nic4"}));
}

namespace {

// A fake /sys: two sockets (CPUs 0-3 and 4-7); under host bridge pci0000:17 a PCIe switch (root
// port 17:01.0, upstream 18:00.0) with a GPU (1b:00.0) and two NICs (mlx5_0, mlx5_1), and a NIC on
// another root port (mlx5_3); a NIC under another host bridge of socket 0 (mlx5_2); one on socket
// 1 (mlx5_4); and soft-RoCE rxe0, a virtual device without a PCI parent.
class FakeSys : public TempTreeTest {
 protected:
  void SetUp() override {
    TempTreeTest::SetUp();
    if (HasFatalFailure()) return;
    write("devices/system/node/node0/cpulist", "0-3\n");
    write("devices/system/node/node1/cpulist", "4-7\n");
    pci("0000:1b:00.0", "pci0000:17/0000:17:01.0/0000:18:00.0/0000:19:01.0", 0);
    rdma("mlx5_0", "pci0000:17/0000:17:01.0/0000:18:00.0/0000:19:00.0/0000:1a:00.0", 0);
    rdma("mlx5_1", "pci0000:17/0000:17:01.0/0000:18:00.0/0000:19:02.0/0000:1c:00.0", 0);
    rdma("mlx5_2", "pci0000:3a/0000:3a:01.0/0000:3b:00.0", 0);
    rdma("mlx5_3", "pci0000:17/0000:17:02.0/0000:20:00.0", 0);
    rdma("mlx5_4", "pci0000:b0/0000:b0:01.0/0000:b1:00.0", 1);
    fs::create_directories(root + "/devices/virtual/infiniband/rxe0");
    linkInfinibandClass("rxe0", "devices/virtual/infiniband/rxe0");
  }
  // A PCI device at devices/<path>/<busId>, linked from bus/pci/devices.
  std::string pci(const std::string& busId, const std::string& path, int numa) {
    const std::string dev = "devices/" + path + "/" + busId;
    write(dev + "/numa_node", std::to_string(numa) + "\n");
    fs::create_directories(root + "/bus/pci/devices");
    fs::create_directory_symlink("../../../" + dev, root + "/bus/pci/devices/" + busId);
    return dev;
  }
  // An RDMA device on the PCI function at the end of `path`.
  void rdma(const std::string& name, const std::string& path, int numa) {
    const size_t slash = path.rfind('/');
    const std::string dev = pci(path.substr(slash + 1), path.substr(0, slash), numa);
    write(dev + "/infiniband/" + name + "/ibdev", name);
    fs::create_directory_symlink("../..", root + "/" + dev + "/infiniband/" + name + "/device");
    linkInfinibandClass(name, dev + "/infiniband/" + name);
  }
  std::vector<PciPlace> places(const std::vector<std::string>& names) {
    std::vector<PciPlace> out;
    for (const std::string& n : names) out.push_back(sysfsRdmaPlace(root, n));
    return out;
  }
};

}  // namespace

TEST_F(FakeSys, PlacesFromThePciPath) {
  const PciPlace nic = sysfsRdmaPlace(root, "mlx5_0");
  EXPECT_EQ(nic.root, "pci0000:17");
  EXPECT_EQ(nic.bridges, (std::vector<std::string>{"0000:17:01.0", "0000:18:00.0", "0000:19:00.0"}));
  EXPECT_EQ(nic.numa, std::vector<int>{0});
  // CUDA's spelling of a bus id (upper case, an 8-digit domain) finds the same device.
  const PciPlace gpu = sysfsPciPlace(root, "00000000:1B:00.0", "GPU 0000:1b:00.0");
  EXPECT_EQ(gpu.root, "pci0000:17");
  EXPECT_EQ(gpu.bridges.size(), 3u);
  const PciPlace rxe = sysfsRdmaPlace(root, "rxe0");
  EXPECT_TRUE(rxe.root.empty());
  EXPECT_TRUE(rxe.bridges.empty());
  EXPECT_TRUE(rxe.numa.empty());
  const PciPlace none = sysfsRdmaPlace(root, "mlx5_9");
  EXPECT_TRUE(none.root.empty() && none.numa.empty());
}

TEST_F(FakeSys, ClosenessOrder) {
  const PciPlace gpu = sysfsPciPlace(root, "0000:1b:00.0", "GPU 0000:1b:00.0");
  EXPECT_EQ(closeness(gpu, sysfsRdmaPlace(root, "mlx5_0")), Closeness::PciSwitch);
  EXPECT_EQ(closeness(gpu, sysfsRdmaPlace(root, "mlx5_1")), Closeness::PciSwitch);
  EXPECT_EQ(closeness(gpu, sysfsRdmaPlace(root, "mlx5_3")), Closeness::HostBridge);
  EXPECT_EQ(closeness(gpu, sysfsRdmaPlace(root, "mlx5_2")), Closeness::Numa);
  EXPECT_EQ(closeness(gpu, sysfsRdmaPlace(root, "mlx5_4")), Closeness::Other);
  EXPECT_EQ(closeness(gpu, sysfsRdmaPlace(root, "rxe0")), Closeness::Unknown);
  // Each level beats the next, whatever the order the devices are listed in.
  const std::vector<std::string> far = {"rxe0", "mlx5_4", "mlx5_2", "mlx5_3", "mlx5_0"};
  for (size_t n = far.size(); n >= 2; --n) {
    const std::vector<std::string> names(far.begin(), far.begin() + n);
    EXPECT_EQ(rankNics(gpu, places(names), 0).index, static_cast<int>(n - 1)) << names.back();
  }
}

// Two NICs behind the GPU's switch: local ranks alternate between them, never all on the first.
TEST_F(FakeSys, LocalRanksSpreadOverEquallyNearNics) {
  const PciPlace gpu = sysfsPciPlace(root, "0000:1b:00.0", "GPU 0000:1b:00.0");
  const std::vector<PciPlace> nics = places({"mlx5_2", "mlx5_0", "mlx5_3", "mlx5_1"});
  std::vector<std::string> got;
  for (int local = 0; local < 4; ++local) got.push_back(nics[rankNics(gpu, nics, local).index].what);
  EXPECT_EQ(got, (std::vector<std::string>{"mlx5_0", "mlx5_1", "mlx5_0", "mlx5_1"}));
  const NicRank r = rankNics(gpu, nics, 3);
  EXPECT_EQ(describeRank(r, gpu),
            "same PCI switch as GPU 0000:1b:00.0; one of 2 equally near, by local rank 3");
}

TEST_F(FakeSys, CpuRanksTakeTheirNumaNodesNic) {
  const PciPlace cpus = sysfsCpuPlace(root, {4, 5});
  EXPECT_EQ(cpus.numa, std::vector<int>{1});
  EXPECT_EQ(cpus.what, "CPUs 4-5 (NUMA 1)");
  const std::vector<PciPlace> nics = places({"mlx5_0", "mlx5_2", "mlx5_4", "rxe0"});
  for (int local = 0; local < 3; ++local) EXPECT_EQ(nics[rankNics(cpus, nics, local).index].what, "mlx5_4");
  // A rank free to run anywhere is local to both nodes: every known NIC is equally near.
  const PciPlace all = sysfsCpuPlace(root, {0, 1, 2, 3, 4, 5, 6, 7});
  EXPECT_EQ(all.what, "CPUs 0-7 (NUMA 0,1)");
  EXPECT_EQ(rankNics(all, nics, 2).index, 2);
  EXPECT_EQ(rankNics(all, nics, 2).tied, 3);
}

// A device without a PCI parent goes after every known one, a far one included; when no device's
// locality is known, the first is chosen for every local rank (no basis to spread).
TEST_F(FakeSys, UnknownLocalityRanksLast) {
  const PciPlace gpu = sysfsPciPlace(root, "0000:1b:00.0", "GPU 0000:1b:00.0");
  const NicRank far = rankNics(gpu, places({"rxe0", "mlx5_4"}), 0);
  EXPECT_EQ(far.index, 1);
  EXPECT_EQ(describeRank(far, gpu), "another NUMA node than GPU 0000:1b:00.0");
  std::vector<PciPlace> soft = places({"rxe0", "rxe0"});
  soft[1].what = "rxe1";
  for (int local = 0; local < 3; ++local) {
    const NicRank r = rankNics(gpu, soft, local);
    EXPECT_EQ(r.index, 0);
    EXPECT_EQ(r.closeness, Closeness::Unknown);
    EXPECT_EQ(describeRank(r, gpu), "locality unknown: the first active port");
  }
  // A rank whose own place is unknown (no NUMA information) knows no NIC's closeness either.
  EXPECT_EQ(rankNics(PciPlace{}, places({"mlx5_0", "mlx5_1"}), 1).index, 0);
}

// numa_node -1 where the machine has one NUMA node: that node.
TEST_F(FakeSys, NoNumaAffinityOnASingleNodeMachineIsThatNode) {
  fs::remove_all(root + "/devices/system/node/node1");
  write("devices/pci0000:3a/0000:3a:01.0/0000:3b:00.0/numa_node", "-1\n");
  EXPECT_EQ(sysfsRdmaPlace(root, "mlx5_2").numa, std::vector<int>{0});
  write("devices/system/node/node1/cpulist", "4-7\n");
  EXPECT_TRUE(sysfsRdmaPlace(root, "mlx5_2").numa.empty());
}

TEST(NicChoice, CpuListText) {
  EXPECT_EQ(sysfs::cpuListText({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(sysfs::cpuListText({}), "");
  EXPECT_EQ(sysfs::parseCpuList("0-3,8,10-11"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
}
