// Locality of PCI devices and of a rank's CPUs, and the choice of the NIC nearest a rank (NCCL's
// rule): same PCI switch > same PCIe host bridge > same NUMA node > another NUMA node > unknown.
// Places come from sysfs (the PCI path under /sys/devices, as hwloc's Linux backend reads it, and
// numa_node) or from a Topology graph (generators, topology files), so the ranking is one pure
// function tested on both (tests/test_locality.cpp). docs/VERBS.md says how the verbs transport
// uses it.
#pragma once
#include <string>
#include <vector>

#include "topo/topology.hpp"

namespace trib {

// Where a PCI device, or a rank's CPUs, sit. Empty fields are unknown.
struct PciPlace {
  std::string what;                  // for messages: "GPU 0000:1b:00.0", "CPUs 0-15 (NUMA 1)"
  std::string root;                  // PCIe host bridge ("pci0000:17"); "" unknown or a CPU
  std::vector<std::string> bridges;  // PCI bridges below the root, top down, the device excluded
  std::vector<int> numa;             // NUMA nodes it is local to (a CPU set may span several)
};

// Nearest first.
enum class Closeness : uint8_t { PciSwitch, HostBridge, Numa, Other, Unknown };
const char* closenessText(Closeness c);  // "same PCI switch", ..., "unknown locality"
Closeness closeness(const PciPlace& anchor, const PciPlace& nic);

// The NIC for a rank at `anchor`: the nearest; among equally near ones, the (localIndex mod
// count)-th, so a host's ranks spread over them (NCCL's rails) instead of all taking the first.
// When every NIC's locality is unknown: the first (no basis to spread). nics must not be empty.
struct NicRank {
  int index = 0;  // into nics
  Closeness closeness = Closeness::Unknown;
  int tied = 1;  // how many were equally near
  int localIndex = 0;
};
NicRank rankNics(const PciPlace& anchor, const std::vector<PciPlace>& nics, int localIndex);
// "same PCI switch as GPU 0000:1b:00.0; one of 2 equally near, by local rank 3"
std::string describeRank(const NicRank& r, const PciPlace& anchor);

// ---- sysfs (sysRoot: "/sys", or a fake tree in tests) ---------------------------------------
// The device a sysfs link or directory resolves to (e.g. SYS/class/infiniband/mlx5_0/device, or
// SYS/bus/pci/devices/0000:1b:00.0): its PCI path and numa_node. A device with no PCI parent
// (soft-RoCE over a veth) has no root and no bridges. numa_node -1 on a machine with a single
// NUMA node means that node.
PciPlace sysfsDevicePlace(const std::string& sysRoot, const std::string& deviceLink, const std::string& what);
// An RDMA device by name, as libibverbs names it.
PciPlace sysfsRdmaPlace(const std::string& sysRoot, const std::string& ibdev);
// A PCI device by bus id ("0000:1B:00.0", any case), as CUDA reports a GPU's.
PciPlace sysfsPciPlace(const std::string& sysRoot, const std::string& busId, const std::string& what);
// The NUMA nodes whose CPUs intersect `cpus` (the CPU set a rank is bound to).
PciPlace sysfsCpuPlace(const std::string& sysRoot, const std::vector<int>& cpus);
// This process's CPU set (sched_getaffinity); empty when it cannot be read.
std::vector<int> boundCpus();

// ---- a Topology graph -------------------------------------------------------------------------
// A GPU's or NIC's place: the PCIe switches between it and its nearest CPU (top down) and that CPU
// as its NUMA node; a CPU's place is its NUMA node. The graph has no host bridges (no root).
PciPlace topologyPlace(const Topology& t, int node);

namespace sysfs {
// Small readers shared with detect.cpp.
std::string readText(const std::string& path);  // trailing newline and spaces removed; "" if absent
std::vector<std::string> listDir(const std::string& path);  // sorted, no dot entries
std::vector<int> parseCpuList(const std::string& s);        // "0-3,8" -> {0,1,2,3,8}
std::string cpuListText(const std::vector<int>& cpus);      // {0,1,2,3,8} -> "0-3,8"
// NUMA nodes with CPUs (memory-only ones left out), by OS index, each with its CPUs.
std::vector<std::pair<int, std::vector<int>>> numaNodes(const std::string& sysRoot);
}  // namespace sysfs

}  // namespace trib
