// Whether Tributary turns off UCX's UD destination-GID check for a UCP context (docs/VERBS.md,
// "UCX over rxe"). UCX 1.13's UD reads a RoCE packet's type from the completion's sl, which mlx5
// fills and soft-RoCE (rxe) leaves 0, so on rxe it compares the wrong bytes, drops every UD packet
// and UCP's wireup (UD, also for rc) times out. The check guards real RoCE NICs, so it is turned
// off only when every RDMA device is an rxe one and the user has not set it. Plain C++ over sysfs,
// built in every build, so the decision is tested on fake sysfs trees (tests/test_ucx_rxe.cpp).
#pragma once
#include <string>
#include <vector>

namespace trib::ucx {

// One RDMA device under SYS/class/infiniband and what it is.
struct RdmaDeviceKind {
  std::string name;  // "rxe0", "mlx5_0"
  bool rxe = false;  // soft-RoCE
  std::string what;  // for messages: "soft-RoCE (rxe)", "driver mlx5_core", ...
};
// Every RDMA device under sysRoot ("/sys", or a fake tree), sorted by name. A device is rxe when it
// has no parent device (no `device` link: rdma_rxe registers it under /sys/devices/virtual), is a
// channel adapter (node_type 1; siw, the other software device, is an RNIC, 4) and every port's
// link layer is Ethernet. Anything with a parent device (PCI, platform) is hardware.
std::vector<RdmaDeviceKind> rdmaDeviceKinds(const std::string& sysRoot);

// UCX's names for the check: the environment variable a user sets (and the ones it inherits), and
// the name ucp_config_modify applies to UCX 1.13's UD interfaces (their "UD_" sub-table; 1.13's
// uct_config_modify matches sub-table names, not the transport's UD_VERBS_ prefix).
inline constexpr const char* kDgidCheckEnv = "UCX_UD_VERBS_ETH_DGID_CHECK";
inline constexpr const char* kDgidCheckEnvNames[] = {"UCX_UD_VERBS_ETH_DGID_CHECK", "UCX_UD_ETH_DGID_CHECK",
                                                     "UCX_UD_MLX5_ETH_DGID_CHECK"};
inline constexpr const char* kDgidCheckConfig = "UD_ETH_DGID_CHECK";

struct DgidCheckDecision {
  bool turnOff = false;
  std::string reason;  // why or why not, for the log
};
// userSet: the user's value of one of kDgidCheckEnvNames (nullptr: none set); tls: the transport
// list the context gets ("all" when unset; "^..." excludes). Off only when the user set nothing,
// the list may use UD (UCX's ud/rc/dc/ib transports, "all" or an exclusion list) and there is at
// least one RDMA device and every one is rxe.
DgidCheckDecision decideDgidCheck(const std::vector<RdmaDeviceKind>& devices, const char* userSet,
                                  const std::string& tls);
// The decision for this process: the environment and sysRoot's devices.
DgidCheckDecision decideDgidCheckHere(const std::string& tls, const std::string& sysRoot = "/sys");

}  // namespace trib::ucx
