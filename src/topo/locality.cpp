#include "topo/locality.hpp"

#include <dirent.h>
#include <sched.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace trib {

namespace sysfs {

std::string readText(const std::string& path) {
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

std::vector<int> parseCpuList(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string part;
  while (std::getline(ss, part, ',')) {
    if (part.empty()) continue;
    auto dash = part.find('-');
    int lo = std::atoi(part.c_str());
    int hi = dash == std::string::npos ? lo : std::atoi(part.c_str() + dash + 1);
    for (int c = lo; c <= hi && hi - lo < (1 << 20); ++c) out.push_back(c);
  }
  return out;
}

std::string cpuListText(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    out +=
        (out.empty() ? "" : ",") + (j == i ? std::to_string(cpus[i]) : strprintf("%d-%d", cpus[i], cpus[j]));
    i = j + 1;
  }
  return out;
}

std::vector<std::pair<int, std::vector<int>>> numaNodes(const std::string& sysRoot) {
  std::vector<std::pair<int, std::vector<int>>> out;
  const std::string dir = sysRoot + "/devices/system/node/";
  for (const std::string& e : listDir(dir)) {
    if (e.rfind("node", 0) != 0 || e.size() < 5 || !std::isdigit(static_cast<unsigned char>(e[4]))) continue;
    std::vector<int> cpus = parseCpuList(readText(dir + e + "/cpulist"));
    if (!cpus.empty()) out.push_back({std::atoi(e.c_str() + 4), std::move(cpus)});
  }
  return out;
}

}  // namespace sysfs

namespace {

std::string numaText(const std::vector<int>& numa) {
  std::string s;
  for (int n : numa) s += (s.empty() ? "" : ",") + std::to_string(n);
  return s;
}

}  // namespace

const char* closenessText(Closeness c) {
  switch (c) {
    case Closeness::PciSwitch:
      return "same PCI switch";
    case Closeness::HostBridge:
      return "same PCIe host bridge";
    case Closeness::Numa:
      return "same NUMA node";
    case Closeness::Other:
      return "another NUMA node";
    case Closeness::Unknown:
      break;
  }
  return "unknown locality";
}

Closeness closeness(const PciPlace& a, const PciPlace& n) {
  // Sysfs places share a PCI bridge only under one root; graph places have no root at all.
  const bool sameRoot = a.root == n.root;
  if (sameRoot && !a.bridges.empty() && !n.bridges.empty() && a.bridges[0] == n.bridges[0])
    return Closeness::PciSwitch;
  if (sameRoot && !a.root.empty()) return Closeness::HostBridge;
  if (a.numa.empty() || n.numa.empty()) return Closeness::Unknown;
  for (int x : a.numa)
    if (std::find(n.numa.begin(), n.numa.end(), x) != n.numa.end()) return Closeness::Numa;
  return Closeness::Other;
}

NicRank rankNics(const PciPlace& anchor, const std::vector<PciPlace>& nics, int localIndex) {
  std::vector<Closeness> c;
  Closeness best = Closeness::Unknown;
  for (const PciPlace& n : nics) {
    c.push_back(closeness(anchor, n));
    best = std::min(best, c.back());
  }
  NicRank r;
  r.closeness = best;
  r.localIndex = localIndex;
  if (best == Closeness::Unknown) return r;  // nothing to go by: the first, as without locality
  std::vector<int> tied;
  for (size_t i = 0; i < c.size(); ++i)
    if (c[i] == best) tied.push_back(static_cast<int>(i));
  r.tied = static_cast<int>(tied.size());
  r.index = tied[static_cast<size_t>(std::max(localIndex, 0)) % tied.size()];
  return r;
}

std::string describeRank(const NicRank& r, const PciPlace& anchor) {
  if (r.closeness == Closeness::Unknown) return "locality unknown: the first active port";
  std::string s = strprintf("%s %s %s", closenessText(r.closeness),
                            r.closeness == Closeness::Other ? "than" : "as", anchor.what.c_str());
  if (r.tied > 1) s += strprintf("; one of %d equally near, by local rank %d", r.tied, r.localIndex);
  return s;
}

PciPlace sysfsDevicePlace(const std::string& sysRoot, const std::string& deviceLink,
                          const std::string& what) {
  namespace fs = std::filesystem;
  PciPlace p;
  p.what = what;
  std::error_code ec;
  const fs::path dev = fs::canonical(deviceLink, ec);
  if (ec) return p;  // no device behind it (soft-RoCE has none): unknown
  const fs::path devices = fs::canonical(fs::path(sysRoot) / "devices", ec);
  if (ec) return p;
  std::vector<std::string> parts;
  const fs::path rel = dev.lexically_relative(devices);
  for (const fs::path& part : rel) parts.push_back(part.string());
  if (parts.size() >= 2 && parts[0].rfind("pci", 0) == 0) {
    p.root = parts[0];
    p.bridges.assign(parts.begin() + 1, parts.end() - 1);
  }
  const std::string numa = sysfs::readText((dev / "numa_node").string());
  if (!numa.empty()) {
    if (std::atoi(numa.c_str()) >= 0) {
      p.numa = {std::atoi(numa.c_str())};
    } else if (auto nodes = sysfs::numaNodes(sysRoot); nodes.size() == 1) {
      p.numa = {nodes[0].first};  // no NUMA affinity reported where there is only one node
    }
  }
  return p;
}

PciPlace sysfsRdmaPlace(const std::string& sysRoot, const std::string& ibdev) {
  return sysfsDevicePlace(sysRoot, sysRoot + "/class/infiniband/" + ibdev + "/device", ibdev);
}

PciPlace sysfsPciPlace(const std::string& sysRoot, const std::string& busId, const std::string& what) {
  // sysfs names are "dddd:bb:dd.f" in lower case; CUDA may write upper case or an 8-digit domain.
  unsigned dom = 0, bus = 0, dev = 0, fn = 0;
  std::string name = busId;
  if (std::sscanf(busId.c_str(), "%x:%x:%x.%x", &dom, &bus, &dev, &fn) == 4)
    name = strprintf("%04x:%02x:%02x.%x", dom, bus, dev, fn);
  return sysfsDevicePlace(sysRoot, sysRoot + "/bus/pci/devices/" + name, what);
}

PciPlace sysfsCpuPlace(const std::string& sysRoot, const std::vector<int>& cpus) {
  PciPlace p;
  for (const auto& [node, nodeCpus] : sysfs::numaNodes(sysRoot)) {
    for (int c : cpus)
      if (std::find(nodeCpus.begin(), nodeCpus.end(), c) != nodeCpus.end()) {
        p.numa.push_back(node);
        break;
      }
  }
  p.what = strprintf("CPUs %s", sysfs::cpuListText(cpus).c_str());
  if (!p.numa.empty()) p.what += strprintf(" (NUMA %s)", numaText(p.numa).c_str());
  return p;
}

std::vector<int> boundCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}

PciPlace topologyPlace(const Topology& t, int node) {
  PciPlace p;
  p.what = t.node(node).name;
  const int cpu = t.nearestCpu(node);
  if (cpu < 0) return p;
  p.numa = {cpu};
  // Breadth first over host links to the nearest CPU; the PCIe switches on the way are the bridges.
  std::vector<int> from(t.numNodes(), -2);
  std::vector<int> queue{node};
  from[node] = -1;
  for (size_t q = 0; q < queue.size() && from[cpu] == -2; ++q) {
    for (const auto& [link, next] : t.adjacent(queue[q])) {
      const LinkType lt = t.link(link).type;
      if (from[next] != -2 || (lt != LinkType::Pcie && lt != LinkType::C2C && lt != LinkType::Shm)) continue;
      from[next] = queue[q];
      queue.push_back(next);
    }
  }
  for (int n = from[cpu]; n >= 0 && n != node; n = from[n])
    if (t.node(n).type == NodeType::PcieSwitch) p.bridges.push_back(t.node(n).name);
  return p;
}

}  // namespace trib
