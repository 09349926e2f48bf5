// Discovery of the local machine. Sources, each optional (absent hardware is simply absent):
//  - NUMA nodes and cores: /sys/devices/system/node (Linux), else one node with all online CPUs;
//  - GPUs and NVLinks: NVML, loaded at run time (libnvidia-ml.so.1), so no build dependency;
//  - NICs: /sys/class/infiniband/<dev>/ports/<p>/rate (what libibverbs reports), and PCI NUMA
//    affinity from /sys/bus/pci/devices/<bdf>/numa_node.
// hwloc is not linked into tributary_core (the top-level build does not add it), so /sys is read
// directly; the graph it yields is the same for the planner's purpose (who shares which link).
#include <dirent.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/env.hpp"
#include "topo/topology.hpp"

namespace trib {
namespace {

std::string readFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::vector<std::string> listDir(const std::string& path) {
  std::vector<std::string> out;
  if (DIR* d = opendir(path.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') out.push_back(e->d_name);
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// "0-3,8-11" -> 8
int countCpuList(const std::string& s) {
  int n = 0;
  std::stringstream ss(s);
  std::string part;
  while (std::getline(ss, part, ',')) {
    auto dash = part.find('-');
    if (part.empty()) continue;
    if (dash == std::string::npos)
      ++n;
    else
      n += std::atoi(part.c_str() + dash + 1) - std::atoi(part.c_str()) + 1;
  }
  return n;
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
  bool load() {
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return false;
    init = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlInit_v2"));
    shutdown = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlShutdown"));
    count = reinterpret_cast<int (*)(unsigned*)>(dlsym(lib, "nvmlDeviceGetCount_v2"));
    handle = reinterpret_cast<int (*)(unsigned, void**)>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
    name = reinterpret_cast<int (*)(void*, char*, unsigned)>(dlsym(lib, "nvmlDeviceGetName"));
    nvlinkState = reinterpret_cast<int (*)(void*, unsigned, int*)>(dlsym(lib, "nvmlDeviceGetNvLinkState"));
    return init && count && handle && init() == 0;
  }
  ~Nvml() {
    if (lib && shutdown) shutdown();
    if (lib) dlclose(lib);
  }
};

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

}  // namespace

Topology detectLocal(std::string* log) {
  Topology t;
  char host[256] = "localhost";
  gethostname(host, sizeof(host) - 1);
  t.name = host;
  std::string note;
  // NUMA nodes and their cores.
  std::vector<int> numa;
  for (const auto& e : listDir("/sys/devices/system/node")) {
    if (e.rfind("node", 0) != 0 || e.size() < 5 || !std::isdigit(static_cast<unsigned char>(e[4]))) continue;
    int cores = countCpuList(readFile("/sys/devices/system/node/" + e + "/cpulist"));
    if (cores <= 0) continue;
    int id = t.addNode("cpu" + e.substr(4), NodeType::Cpu);
    numa.push_back(id);
    note += strprintf("numa %s: %d cores; ", e.c_str(), cores);
  }
  if (numa.empty()) {
    numa.push_back(t.addNode("cpu0", NodeType::Cpu));
    note +=
        strprintf("one CPU node, %ld cores (no /sys/devices/system/node); ", sysconf(_SC_NPROCESSORS_ONLN));
  }
  for (size_t i = 1; i < numa.size(); ++i)
    t.addLink(numa[0], numa[i], LinkType::C2C, 40, 0.3);  // socket link
  // GPUs via NVML.
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
      int g = t.addNode(strprintf("gpu%u", i), NodeType::Gpu);
      t.addLink(g, numa[0], LinkType::Pcie, 32, 0.5);
      int active = 0;
      for (unsigned l = 0; nvml.nvlinkState && l < 18; ++l) {
        int st = 0;
        if (nvml.nvlinkState(h, l, &st) == 0 && st == 1) ++active;
      }
      if (active > 0) {
        if (nvsw < 0) nvsw = t.addNode("nvsw", NodeType::NvSwitch);
        t.addLink(g, nvsw, LinkType::NvLink, active * nvlinkPerLinkGBps(nm), 0.5);
      }
      note += strprintf("gpu%u %s, %d NVLinks; ", i, nm, active);
    }
  } else {
    note += "no NVML (no GPUs); ";
  }
  // NICs (InfiniBand/RoCE devices as libibverbs sees them).
  for (const auto& dev : listDir("/sys/class/infiniband")) {
    std::string rate = readFile("/sys/class/infiniband/" + dev + "/ports/1/rate");  // "400 Gb/sec (4X NDR)"
    double gbits = std::atof(rate.c_str());
    if (gbits <= 0) continue;
    int numaNode = std::atoi(readFile("/sys/class/infiniband/" + dev + "/device/numa_node").c_str());
    int nic = t.addNode(dev, NodeType::Nic);
    int cpu = numa[numaNode >= 0 && numaNode < static_cast<int>(numa.size()) ? numaNode : 0];
    t.addLink(nic, cpu, LinkType::Pcie, 32, 0.5);
    note += strprintf("nic %s %.0f Gb/s; ", dev.c_str(), gbits);
  }
  t.finalize();
  if (log) *log = note;
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
