#include "transports/ucx/ucx_rxe.hpp"

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "common/status.hpp"
#include "topo/locality.hpp"

namespace trib::ucx {

namespace fs = std::filesystem;

std::vector<RdmaDeviceKind> rdmaDeviceKinds(const std::string& sysRoot) {
  std::vector<RdmaDeviceKind> out;
  const std::string cls = sysRoot + "/class/infiniband/";
  for (const std::string& name : sysfs::listDir(cls)) {
    RdmaDeviceKind d;
    d.name = name;
    const std::string dir = cls + name;
    std::error_code ec;
    if (fs::exists(fs::symlink_status(dir + "/device", ec))) {
      // A parent device: hardware, whatever it is. Its driver names it in messages.
      const fs::path driver = fs::canonical(dir + "/device/driver", ec);
      d.what = ec ? "a device with a parent device" : "driver " + driver.filename().string();
      out.push_back(d);
      continue;
    }
    const std::string nodeType = sysfs::readText(dir + "/node_type");  // "1: CA", "4: RNIC"
    if (std::atoi(nodeType.c_str()) != 1) {
      d.what = "no parent device, node type '" + nodeType + "'";
      out.push_back(d);
      continue;
    }
    const std::vector<std::string> ports = sysfs::listDir(dir + "/ports");
    std::string notEthernet;
    for (const std::string& p : ports) {
      const std::string ll = sysfs::readText(dir + "/ports/" + p + "/link_layer");
      if (ll != "Ethernet") notEthernet = "port " + p + " link layer '" + ll + "'";
    }
    if (ports.empty()) notEthernet = "no ports";
    if (!notEthernet.empty()) {
      d.what = "no parent device, " + notEthernet;
    } else {
      d.rxe = true;
      d.what = "soft-RoCE (rxe)";
    }
    out.push_back(d);
  }
  return out;
}

namespace {

// Whether UCX may open a UD interface with this transport list: its ud, rc (UD for wireup), dc
// and ib transports and aliases, "all", or any exclusion list.
bool tlsMayUseUd(const std::string& tls) {
  if (tls.empty() || tls[0] == '^') return true;
  std::stringstream ss(tls);
  std::string t;
  while (std::getline(ss, t, ',')) {
    if (!t.empty() && t[0] == '\\') t.erase(0, 1);  // strict name
    t = t.substr(0, t.find(':'));                   // ":aux"
    if (t == "all" || t == "ib" || t.rfind("ud", 0) == 0 || t.rfind("rc", 0) == 0 || t.rfind("dc", 0) == 0)
      return true;
  }
  return false;
}

}  // namespace

DgidCheckDecision decideDgidCheck(const std::vector<RdmaDeviceKind>& devices, const char* userSet,
                                  const std::string& tls) {
  DgidCheckDecision d;
  if (userSet) {
    d.reason = strprintf("the user set it (%s)", userSet);
    return d;
  }
  if (!tlsMayUseUd(tls)) {
    d.reason = "transports '" + tls + "' use no UD";
    return d;
  }
  if (devices.empty()) {
    d.reason = "no RDMA device";
    return d;
  }
  std::string names;
  for (const RdmaDeviceKind& dev : devices) {
    if (!dev.rxe) {
      d.reason = strprintf("RDMA device %s is not soft-RoCE (%s): the check guards it", dev.name.c_str(),
                           dev.what.c_str());
      return d;
    }
    names += (names.empty() ? "" : ", ") + dev.name;
  }
  d.turnOff = true;
  d.reason = strprintf(
      "every RDMA device (%s) is soft-RoCE (rxe), whose completions leave sl 0, so UCX's UD would "
      "drop every RoCE v2 packet and UCP's wireup time out (docs/VERBS.md); set %s to override",
      names.c_str(), kDgidCheckEnv);
  return d;
}

DgidCheckDecision decideDgidCheckHere(const std::string& tls, const std::string& sysRoot) {
  std::string userSet;
  for (const char* name : kDgidCheckEnvNames)
    if (const char* v = std::getenv(name)) {
      userSet = std::string(name) + "=" + v;
      break;
    }
  const bool set = !userSet.empty();
  // The devices are read only when they matter.
  if (set) return decideDgidCheck({}, userSet.c_str(), tls);
  return decideDgidCheck(rdmaDeviceKinds(sysRoot), nullptr, tls);
}

}  // namespace trib::ucx
