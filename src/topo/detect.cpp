// Discovery of the local machine. Sources, each optional (absent hardware is simply absent):
//  - NUMA nodes, cores and PCI devices: hwloc when the build has it (TRIB_HAVE_HWLOC, linked by
//    cmake/TribOptional.cmake), which also gives each PCI device's link speed and NUMA locality;
//    else /sys/devices/system/node, else one node with all online CPUs;
//  - GPUs and NVLinks: NVML, loaded at run time (libnvidia-ml.so.1), so no build dependency;
//  - RDMA NICs and their port rate: /sys/class/infiniband/<dev>/ports/1/rate (what libibverbs
//    reports); with hwloc the devices are its OpenFabrics OS devices, with their PCI link.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <set>

#include "common/env.hpp"
#include "topo/locality.hpp"
#include "topo/topology.hpp"

#ifdef TRIB_HAVE_HWLOC
#include <hwloc.h>
#endif

namespace trib {
namespace {

using sysfs::listDir;
using sysfs::readText;

// Physical cores among logical CPUs: distinct (package, core id) pairs.
int physicalCores(const std::vector<int>& cpus) {
  std::set<std::pair<std::string, std::string>> cores;
  for (int c : cpus) {
    std::string dir = strprintf("/sys/devices/system/cpu/cpu%d/topology/", c);
    cores.insert({readText(dir + "physical_package_id"), readText(dir + "core_id")});
  }
  return static_cast<int>(cores.size());
}

// NVML through dlopen: the few entry points we need, with NVML's C types reduced to opaque ones.
struct Nvml {
  void* lib = nullptr;
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  int (*count)(unsigned*) = nullptr;
  int (*handle)(unsigned, void**) = nullptr;
  int (*name)(void*, char*, unsigned) = nullptr;
  int (*nvlinkState)(void*, unsigned, int*) = nullptr;
  int (*computeCapability)(void*, int*, int*) = nullptr;
  bool load() {
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return false;
    init = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlInit_v2"));
    shutdown = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlShutdown"));
    count = reinterpret_cast<int (*)(unsigned*)>(dlsym(lib, "nvmlDeviceGetCount_v2"));
    handle = reinterpret_cast<int (*)(unsigned, void**)>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
    name = reinterpret_cast<int (*)(void*, char*, unsigned)>(dlsym(lib, "nvmlDeviceGetName"));
    nvlinkState = reinterpret_cast<int (*)(void*, unsigned, int*)>(dlsym(lib, "nvmlDeviceGetNvLinkState"));
    computeCapability =
        reinterpret_cast<int (*)(void*, int*, int*)>(dlsym(lib, "nvmlDeviceGetCudaComputeCapability"));
    return init && count && handle && init() == 0;
  }
  ~Nvml() {
    if (lib && shutdown) shutdown();
    if (lib) dlclose(lib);
  }
};

// NCCL's classes of compute capability: 7.x Volta, 8.x Ampere (Ada too), 9.x Hopper, 10+ Blackwell.
GpuArch archOfComputeCapability(int major) {
  return major >= 10  ? GpuArch::Blackwell
         : major == 9 ? GpuArch::Hopper
         : major == 8 ? GpuArch::Ampere
         : major == 7 ? GpuArch::Volta
                      : GpuArch::Unknown;
}

// The maker of this machine's CPUs: /proc/cpuinfo's vendor_id on x86, the architecture on Arm.
CpuVendor localCpuVendor() {
#if defined(__aarch64__)
  return CpuVendor::Arm;
#else
  const std::string info = readText("/proc/cpuinfo");
  if (info.find("GenuineIntel") != std::string::npos) return CpuVendor::Intel;
  if (info.find("AuthenticAMD") != std::string::npos) return CpuVendor::Amd;
  return CpuVendor::Unknown;
#endif
}

// Per-link NVLink bandwidth (GB/s per direction) by GPU generation, from the device name.
double nvlinkPerLinkGBps(const std::string& name) {
  if (name.find("B200") != std::string::npos || name.find("B300") != std::string::npos ||
      name.find("GB2") != std::string::npos)
    return 50;  // NVLink5
  if (name.find("H100") != std::string::npos || name.find("H200") != std::string::npos ||
      name.find("H800") != std::string::npos)
    return 25;                                            // NVLink4
  if (name.find("A100") != std::string::npos) return 25;  // NVLink3
  return 20;
}

// What the CPU/PCI source found, before the common part (GPUs via NVML, RDMA NICs) is added.
struct PciFinding {
  std::string name;     // OS device name (e.g. mlx5_0) for NICs
  int numa = -1;        // NUMA node os index, -1 unknown
  double linkGBps = 0;  // PCIe link, GB/s per direction; 0 unknown
};
struct LocalFindings {
  std::vector<int> numaOs;  // NUMA node os indices, in order
  std::vector<PciFinding> rdmaNics, nvidiaGpus;
};

constexpr double kDefaultPcieGBps = 32;  // PCIe Gen4 x16, when the source does not say
constexpr double kPcieLatUs = 0.5;
constexpr double kSocketGBps = 40, kSocketLatUs = 0.3;  // inter-socket link (UPI/xGMI class)

void findFromSys(LocalFindings* f, DetectReport* rep) {
  for (const auto& [node, cpus] : sysfs::numaNodes("/sys")) {  // memory-only nodes left out
    f->numaOs.push_back(node);
    rep->coresPerNuma.push_back(physicalCores(cpus));
    rep->numaMemGBps.push_back(0);
  }
  for (const auto& dev : listDir("/sys/class/infiniband")) {
    PciFinding nic;
    nic.name = dev;
    const PciPlace place = sysfsRdmaPlace("/sys", dev);
    nic.numa = place.numa.empty() ? -1 : place.numa[0];
    f->rdmaNics.push_back(nic);
  }
}

#ifdef TRIB_HAVE_HWLOC
// Owns an hwloc topology: destroyed on every path out of findFromHwloc.
struct HwlocTopology {
  hwloc_topology_t topo = nullptr;
  HwlocTopology() = default;
  HwlocTopology(const HwlocTopology&) = delete;
  HwlocTopology& operator=(const HwlocTopology&) = delete;
  ~HwlocTopology() {
    if (topo) hwloc_topology_destroy(topo);
  }
};

Status findFromHwloc(LocalFindings* f, DetectReport* rep) {
  HwlocTopology owned;
  if (hwloc_topology_init(&owned.topo) != 0) {
    owned.topo = nullptr;
    return errorf(tribSystemError, "hwloc_topology_init failed");
  }
  hwloc_topology_t topo = owned.topo;
  hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
#if HWLOC_API_VERSION >= 0x00020100
  // PCI devices from sysfs (hwloc's linux backend) instead of its libpciaccess plugin: the same
  // devices and links, without the plugin's allocations (name tables and the like), which hwloc
  // orphans when it unloads the plugin at the last hwloc_topology_destroy: LeakSanitizer counted
  // them as leaked on every detection.
  hwloc_topology_set_components(topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "pci");
#endif
  if (hwloc_topology_load(topo) != 0)
    return errorf(tribSystemError, "hwloc_topology_load failed (is /sys mounted?)");
  const int nNuma = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < nNuma; ++i) {
    hwloc_obj_t numa = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, i);
    int cores = hwloc_get_nbobjs_inside_cpuset_by_type(topo, numa->cpuset, HWLOC_OBJ_CORE);
    if (cores <= 0) continue;  // memory-only node (CXL, HBM without CPUs): not a rank's home
    f->numaOs.push_back(static_cast<int>(numa->os_index));
    rep->coresPerNuma.push_back(cores);
    // Memory bandwidth as seen from the node's own cores; only firmware with ACPI HMAT gives it.
    hwloc_uint64_t mibps = 0;
    struct hwloc_location loc;
    loc.type = HWLOC_LOCATION_TYPE_CPUSET;
    loc.location.cpuset = numa->cpuset;
    if (hwloc_memattr_get_value(topo, HWLOC_MEMATTR_ID_BANDWIDTH, numa, &loc, 0, &mibps) != 0) mibps = 0;
    rep->numaMemGBps.push_back(mibps * 1048576.0 / 1e9);
  }
  for (hwloc_obj_t pci = hwloc_get_next_pcidev(topo, nullptr); pci; pci = hwloc_get_next_pcidev(topo, pci)) {
    ++rep->pciDevices;
    const auto& a = pci->attr->pcidev;
    PciFinding d;
    hwloc_obj_t home = hwloc_get_non_io_ancestor_obj(topo, pci);
    if (home && home->nodeset && !hwloc_bitmap_iszero(home->nodeset) &&
        hwloc_bitmap_weight(home->nodeset) == 1)
      d.numa = hwloc_bitmap_first(home->nodeset);
    d.linkGBps = a.linkspeed;  // hwloc: GB/s from the negotiated PCIe generation and width
    const unsigned cls = a.class_id >> 8;
    if (cls == 0x02) {  // network controller; RDMA-capable when it has an OpenFabrics OS device
      ++rep->netDevices;
      for (hwloc_obj_t os = pci->io_first_child; os; os = os->next_sibling)
        if (os->type == HWLOC_OBJ_OS_DEVICE && os->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS) {
          d.name = os->name;
          f->rdmaNics.push_back(d);
        }
    } else if (cls == 0x03 && a.vendor_id == 0x10de) {  // NVIDIA display/3D controller
      f->nvidiaGpus.push_back(d);
    }
  }
  return Status::Ok();
}
#endif

}  // namespace

int DetectReport::cores() const {
  int n = 0;
  for (int c : coresPerNuma) n += c;
  return n;
}

Status detectLocalWith(DetectSource source, Topology* out, DetectReport* report) {
  DetectReport localRep;
  DetectReport& rep = report ? *report : localRep;
  rep = DetectReport{};
  LocalFindings f;
#ifdef TRIB_HAVE_HWLOC
  if (source != DetectSource::Sys) {
    TRIB_RETURN_IF_ERROR(findFromHwloc(&f, &rep).prefix("topology detection with hwloc: "));
    rep.source = "hwloc";
  }
#else
  if (source == DetectSource::Hwloc)
    return errorf(tribNotSupported,
                  "topology detection with hwloc: this build has no hwloc (install libhwloc-dev, "
                  "reconfigure with -DTRIB_WITH_HWLOC=ON), or use the /sys reader");
#endif
  if (rep.source.empty()) {
    findFromSys(&f, &rep);
    rep.source = "sys";
  }
  Topology t;
  char host[256] = "localhost";
  gethostname(host, sizeof(host) - 1);
  t.name = host;
  std::string& note = rep.log;
  note = "source " + rep.source + "; ";
  // NUMA nodes (CPU + memory); named by their OS index so every source names them alike.
  std::vector<int> numa;
  const CpuVendor vendor = localCpuVendor();
  note += strprintf("CPU vendor %s; ", cpuVendorName(vendor));
  for (size_t i = 0; i < f.numaOs.size(); ++i) {
    numa.push_back(t.addNode(strprintf("cpu%d", f.numaOs[i]), NodeType::Cpu));
    t.node(numa.back()).vendor = vendor;
    t.node(numa.back()).cores = rep.coresPerNuma[i];
    note += strprintf("numa %d: %d cores", f.numaOs[i], rep.coresPerNuma[i]);
    if (rep.numaMemGBps[i] > 0) note += strprintf(", memory %.1f GB/s", rep.numaMemGBps[i]);
    note += "; ";
  }
  if (numa.empty()) {
    numa.push_back(t.addNode("cpu0", NodeType::Cpu));
    f.numaOs.push_back(0);
    rep.coresPerNuma.push_back(static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
    t.node(numa[0]).cores = rep.coresPerNuma[0];
    t.node(numa[0]).vendor = vendor;
    rep.numaMemGBps.push_back(0);
    note += strprintf("one CPU node, %d CPUs (no NUMA information); ", rep.coresPerNuma[0]);
  }
  auto numaNode = [&](int os) {
    for (size_t i = 0; i < f.numaOs.size(); ++i)
      if (f.numaOs[i] == os) return numa[i];
    return numa[0];
  };
  auto pcieGBps = [](const PciFinding& d) { return d.linkGBps > 0 ? d.linkGBps : kDefaultPcieGBps; };
  for (size_t i = 1; i < numa.size(); ++i)
    t.addLink(numa[0], numa[i], LinkType::C2C, kSocketGBps, kSocketLatUs);
  if (rep.pciDevices > 0)
    note += strprintf("%d PCI devices (%d network, %zu NVIDIA GPUs); ", rep.pciDevices, rep.netDevices,
                      f.nvidiaGpus.size());
  // GPUs via NVML (a GPU without a driver cannot run collectives, so hwloc's PCI view alone adds
  // none). NVML enumerates in PCI bus order, as hwloc does: GPU i takes hwloc's i-th link and node.
  Nvml nvml;
  if (nvml.load()) {
    unsigned n = 0;
    nvml.count(&n);
    int nvsw = -1;
    for (unsigned i = 0; i < n; ++i) {
      void* h = nullptr;
      if (nvml.handle(i, &h) != 0) continue;
      char nm[96] = "gpu";
      if (nvml.name) nvml.name(h, nm, sizeof(nm));
      PciFinding pci = i < f.nvidiaGpus.size() ? f.nvidiaGpus[i] : PciFinding{};
      int g = t.addNode(strprintf("gpu%u", i), NodeType::Gpu);
      int major = 0, minor = 0;
      if (nvml.computeCapability && nvml.computeCapability(h, &major, &minor) == 0)
        t.node(g).arch = archOfComputeCapability(major);
      t.addLink(g, numaNode(pci.numa), LinkType::Pcie, pcieGBps(pci), kPcieLatUs);
      int active = 0;
      for (unsigned l = 0; nvml.nvlinkState && l < 18; ++l) {
        int st = 0;
        if (nvml.nvlinkState(h, l, &st) == 0 && st == 1) ++active;
      }
      if (active > 0) {
        if (nvsw < 0) nvsw = t.addNode("nvsw", NodeType::NvSwitch);
        t.addLink(g, nvsw, LinkType::NvLink, active * nvlinkPerLinkGBps(nm), 0.5);
      }
      ++rep.gpus;
      note += strprintf("gpu%u %s (%s), PCIe %.1f GB/s, %d NVLinks; ", i, nm, gpuArchName(t.node(g).arch),
                        pcieGBps(pci), active);
    }
  } else {
    note += "no NVML (no GPUs); ";
  }
  // RDMA NICs with an active port rate.
  for (const PciFinding& d : f.rdmaNics) {
    std::string rate =
        readText("/sys/class/infiniband/" + d.name + "/ports/1/rate");  // "400 Gb/sec (4X NDR)"
    double gbits = std::atof(rate.c_str());
    if (gbits <= 0) continue;
    int nic = t.addNode(d.name, NodeType::Nic);
    t.addLink(nic, numaNode(d.numa), LinkType::Pcie, pcieGBps(d), kPcieLatUs);
    ++rep.nics;
    note += strprintf("nic %s %.0f Gb/s, PCIe %.1f GB/s; ", d.name.c_str(), gbits, pcieGBps(d));
  }
  t.finalize();
  *out = std::move(t);
  return Status::Ok();
}

Topology detectLocal(std::string* log) {
  Topology t;
  DetectReport rep;
  Status s = detectLocalWith(DetectSource::Auto, &t, &rep);
  if (!s.ok()) {  // hwloc failed to load the machine: the /sys reader still gives a usable graph
    (void)detectLocalWith(DetectSource::Sys, &t, &rep);  // the /sys reader cannot fail
    rep.log = s.message() + "; " + rep.log;
  }
  if (log) *log = rep.log;
  return t;
}

Status topologyFromEnv(Topology* out) {
  const std::string file = envString("TRIB_TOPO_FILE");
  if (!file.empty()) {
    TRIB_RETURN_IF_ERROR(loadTopologyFile(file, out));
  } else {
    *out = detectLocal();
  }
  const std::string dump = envString("TRIB_TOPO_DUMP_FILE");
  if (!dump.empty()) TRIB_RETURN_IF_ERROR(dumpTopologyFile(*out, dump));
  return Status::Ok();
}

}  // namespace trib
