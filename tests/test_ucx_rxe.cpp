// When the UCX transport turns UCX's UD destination-GID check off (transports/ucx/ucx_rxe.hpp):
// RDMA devices classified on fake sysfs trees in a temporary folder (soft-RoCE rxe, a PCI NIC, siw,
// an InfiniBand port without a parent), then the decision. No device and no UCX needed.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "temp_tree.hpp"
#include "transports/ucx/ucx_rxe.hpp"

namespace fs = std::filesystem;
using namespace trib::ucx;

namespace {

class FakeSys : public TempTreeTest {
 protected:
  // A device without a parent (devices/virtual/infiniband/<name>), as rdma_rxe and siw register.
  void virtualDevice(const std::string& name, const std::string& nodeType, const std::string& linkLayer) {
    const std::string dev = "devices/virtual/infiniband/" + name;
    write(dev + "/node_type", nodeType + "\n");
    write(dev + "/parent", "veth0\n");
    write(dev + "/ports/1/link_layer", linkLayer + "\n");
    linkInfinibandClass(name, dev);
  }
  void rxe(const std::string& name) { virtualDevice(name, "1: CA", "Ethernet"); }
  // A RoCE NIC on a PCI function bound to `driver` (its port's link layer is Ethernet too).
  void pciNic(const std::string& name, const std::string& driver) {
    const std::string fn = "devices/pci0000:17/0000:17:01.0/0000:18:00.0";
    const std::string dev = fn + "/infiniband/" + name;
    write(dev + "/node_type", "1: CA\n");
    write(dev + "/ports/1/link_layer", "Ethernet\n");
    fs::create_directories(root + "/bus/pci/drivers/" + driver);
    fs::create_directory_symlink("../../../../bus/pci/drivers/" + driver, root + "/" + fn + "/driver");
    fs::create_directory_symlink("../..", root + "/" + dev + "/device");
    linkInfinibandClass(name, dev);
  }
};

TEST_F(FakeSys, ClassifiesDevices) {
  rxe("rxe0");
  rxe("roce_soft");  // rxe under a name of the user's (rdma link add NAME type rxe)
  pciNic("mlx5_0", "mlx5_core");
  virtualDevice("siw0", "4: RNIC", "Ethernet");
  virtualDevice("ib_virt", "1: CA", "InfiniBand");
  const std::vector<RdmaDeviceKind> d = rdmaDeviceKinds(root);
  ASSERT_EQ(d.size(), 5u);
  EXPECT_EQ(d[0].name, "ib_virt");
  EXPECT_FALSE(d[0].rxe);
  EXPECT_EQ(d[0].what, "no parent device, port 1 link layer 'InfiniBand'");
  EXPECT_EQ(d[1].name, "mlx5_0");
  EXPECT_FALSE(d[1].rxe);
  EXPECT_EQ(d[1].what, "driver mlx5_core");
  EXPECT_EQ(d[2].name, "roce_soft");
  EXPECT_TRUE(d[2].rxe);
  EXPECT_EQ(d[3].name, "rxe0");
  EXPECT_TRUE(d[3].rxe);
  EXPECT_EQ(d[3].what, "soft-RoCE (rxe)");
  EXPECT_EQ(d[4].name, "siw0");
  EXPECT_FALSE(d[4].rxe);
  EXPECT_EQ(d[4].what, "no parent device, node type '4: RNIC'");
}

TEST_F(FakeSys, NoInfinibandClassMeansNoDevice) {
  EXPECT_TRUE(rdmaDeviceKinds(root).empty());
  const DgidCheckDecision d = decideDgidCheck(rdmaDeviceKinds(root), nullptr, "all");
  EXPECT_FALSE(d.turnOff);
  EXPECT_EQ(d.reason, "no RDMA device");
}

TEST_F(FakeSys, OffWhenEveryDeviceIsRxe) {
  rxe("rxe0");
  rxe("rxe1");
  for (const char* tls :
       {"all", "rc,self", "rc_v,self", "ud_verbs", "\\rc_verbs,ud_verbs:aux", "ib", "dc,sm", "^tcp"}) {
    const DgidCheckDecision d = decideDgidCheck(rdmaDeviceKinds(root), nullptr, tls);
    EXPECT_TRUE(d.turnOff) << tls;
    EXPECT_NE(d.reason.find("every RDMA device (rxe0, rxe1) is soft-RoCE (rxe)"), std::string::npos)
        << d.reason;
    EXPECT_NE(d.reason.find("UCX_UD_VERBS_ETH_DGID_CHECK"), std::string::npos) << d.reason;
  }
}

TEST_F(FakeSys, KeptWhenAnyDeviceIsNotRxe) {
  rxe("rxe0");
  pciNic("mlx5_0", "mlx5_core");
  DgidCheckDecision d = decideDgidCheck(rdmaDeviceKinds(root), nullptr, "all");
  EXPECT_FALSE(d.turnOff);
  EXPECT_EQ(d.reason, "RDMA device mlx5_0 is not soft-RoCE (driver mlx5_core): the check guards it");

  fs::remove_all(root);
  fs::create_directories(root);
  rxe("rxe0");
  virtualDevice("siw0", "4: RNIC", "Ethernet");
  d = decideDgidCheck(rdmaDeviceKinds(root), nullptr, "rc,self");
  EXPECT_FALSE(d.turnOff);
  EXPECT_NE(d.reason.find("siw0 is not soft-RoCE"), std::string::npos) << d.reason;
}

TEST_F(FakeSys, KeptWhenTheUserSetIt) {
  rxe("rxe0");
  const DgidCheckDecision d = decideDgidCheck(rdmaDeviceKinds(root), "UCX_UD_VERBS_ETH_DGID_CHECK=y", "all");
  EXPECT_FALSE(d.turnOff);
  EXPECT_EQ(d.reason, "the user set it (UCX_UD_VERBS_ETH_DGID_CHECK=y)");
}

TEST_F(FakeSys, KeptWhenNoTransportUsesUd) {
  rxe("rxe0");
  for (const char* tls : {"tcp", "tcp,self", "sm,self", "posix,cma"}) {
    const DgidCheckDecision d = decideDgidCheck(rdmaDeviceKinds(root), nullptr, tls);
    EXPECT_FALSE(d.turnOff) << tls;
    EXPECT_EQ(d.reason, std::string("transports '") + tls + "' use no UD");
  }
}

// The environment: any of the check's names (the one users set and those it inherits) counts.
TEST_F(FakeSys, EnvironmentWins) {
  rxe("rxe0");
  for (const char* name : kDgidCheckEnvNames) unsetenv(name);
  EXPECT_TRUE(decideDgidCheckHere("all", root).turnOff);
  for (const char* name : kDgidCheckEnvNames) {
    setenv(name, "y", 1);
    const DgidCheckDecision d = decideDgidCheckHere("all", root);
    EXPECT_FALSE(d.turnOff) << name;
    EXPECT_EQ(d.reason, std::string("the user set it (") + name + "=y)");
    unsetenv(name);
  }
}

}  // namespace
