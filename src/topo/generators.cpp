// Generators for the systems users ask about. Figures are defaults from shared/REFERENCE.md and
// vendor data sheets; every one is a parameter. Counts are documented in docs/TOPOLOGY.md.
#include <cstdlib>

#include "topo/topology.hpp"

namespace trib {
namespace {

constexpr uint32_t kSharpDtypes = (1u << tribInt32) | (1u << tribUint32) | (1u << tribInt64) |
                                  (1u << tribUint64) | (1u << tribFloat16) | (1u << tribBfloat16) |
                                  (1u << tribFloat32) | (1u << tribFloat64);
constexpr uint32_t kNvlsDtypes = (1u << tribFloat16) | (1u << tribBfloat16) | (1u << tribFloat32) |
                                 (1u << tribInt32) | (1u << tribUint32) | (1u << tribInt64) |
                                 (1u << tribUint64) | (1u << tribFloat64);
constexpr uint32_t kSumMinMax = (1u << tribSum) | (1u << tribMin) | (1u << tribMax);

void setReduce(Node& n, double gbps, uint32_t dtypes, int maxOps, uint64_t buffer) {
  n.reduce.reduceGBps = gbps;
  n.reduce.dtypeMask = dtypes;
  n.reduce.opMask = kSumMinMax;
  n.reduce.maxConcurrentOps = maxOps;
  n.reduce.bufferBytes = buffer;
}

struct FatTree {
  int leafDown;       // NICs per leaf
  int spines;         // spine switches when there is more than one leaf
  double nicGBps;     // per NIC port
  double latUs;       // per hop
  double reduceGBps;  // 0: switches do not reduce
};

// Non-blocking two-tier fat tree over `nics` (in order): leaf i takes NICs [i*leafDown, ...); each
// leaf-spine bundle carries leafDown*nic/spines so uplink capacity equals downlink capacity. With
// reduction, one aggregation tree per spine (SHARP builds several trees; groups spread over them).
void buildFatTree(Topology& t, const std::vector<int>& nics, const FatTree& f) {
  int leaves = (static_cast<int>(nics.size()) + f.leafDown - 1) / f.leafDown;
  std::vector<int> leafIds, spineIds;
  for (int l = 0; l < leaves; ++l) {
    int id = t.addNode(strprintf("leaf%d", l), NodeType::Switch);
    if (f.reduceGBps > 0) setReduce(t.node(id), f.reduceGBps, kSharpDtypes, 64, 0);
    leafIds.push_back(id);
  }
  for (size_t i = 0; i < nics.size(); ++i)
    t.addLink(nics[i], leafIds[i / f.leafDown], LinkType::Net, f.nicGBps, f.latUs);
  if (leaves == 1) {
    if (f.reduceGBps > 0) {
      AggTree tr;
      tr.name = "sharp0";
      tr.root = leafIds[0];
      (void)t.addAggTree(tr);
    }
    return;
  }
  double bundle = f.leafDown * f.nicGBps / f.spines;
  for (int s = 0; s < f.spines; ++s) {
    int id = t.addNode(strprintf("spine%d", s), NodeType::Switch);
    if (f.reduceGBps > 0) setReduce(t.node(id), f.reduceGBps, kSharpDtypes, 64, 0);
    spineIds.push_back(id);
    for (int l : leafIds) t.addLink(l, id, LinkType::Net, bundle, f.latUs);
  }
  if (f.reduceGBps > 0) {
    for (int s = 0; s < f.spines; ++s) {
      AggTree tr;
      tr.name = strprintf("sharp%d", s);
      for (int l : leafIds) tr.edges.push_back({l, spineIds[s]});
      (void)t.addAggTree(tr);  // a star over existing links: always a valid tree
    }
  }
}

}  // namespace

Topology makeDgxH100(int nodes) {
  // Per node: 8 H100 (NVLink4 450 GB/s per direction to the NVSwitch fabric: 4 NVSwitch chips, one
  // logical node here), 2 CPU sockets, 4 PCIe Gen5 switches (2 GPUs + 2 NICs each), 8 ConnectX-7
  // 400 Gb/s NICs. NVSwitch reduction (NVLS) throughput per port is fitted to NVLS ~480 GB/s busbw.
  Topology t;
  t.name = nodes == 1 ? "dgx-h100" : strprintf("dgx-h100-x%d", nodes);
  std::vector<int> nics;
  for (int h = 0; h < nodes; ++h) {
    std::string p = nodes == 1 ? "" : strprintf("n%d.", h);
    int nvsw = t.addNode(p + "nvsw", NodeType::NvSwitch);
    setReduce(t.node(nvsw), 275, kNvlsDtypes, 0, 0);
    int cpu[2];
    for (int c = 0; c < 2; ++c) cpu[c] = t.addNode(p + strprintf("cpu%d", c), NodeType::Cpu);
    t.addLink(cpu[0], cpu[1], LinkType::C2C, 64, 0.5);  // inter-socket
    int psw[4];
    for (int s = 0; s < 4; ++s) {
      psw[s] = t.addNode(p + strprintf("pcie%d", s), NodeType::PcieSwitch);
      t.addLink(psw[s], cpu[s / 2], LinkType::Pcie, 64, 0.3);
    }
    for (int g = 0; g < 8; ++g) {
      int gpu = t.addNode(p + strprintf("gpu%d", g), NodeType::Gpu);
      t.addLink(gpu, nvsw, LinkType::NvLink, 450, 0.5);
      t.addLink(gpu, psw[g / 2], LinkType::Pcie, 64, 0.3);
    }
    for (int n = 0; n < 8; ++n) {
      int nic = t.addNode(p + strprintf("nic%d", n), NodeType::Nic);
      t.addLink(nic, psw[n / 2], LinkType::Pcie, 64, 0.3);
      nics.push_back(nic);
    }
  }
  if (nodes > 1) buildFatTree(t, nics, {32, 16, 50, 0.6, 50});
  t.finalize();
  return t;
}

Topology makeNvl72Cluster(int racks, const Nvl72Params& p) {
  // Per rack: 72 GPUs, 36 Grace CPUs (each C2C to 2 GPUs), the NVLink Switch fabric (18 NVSwitch
  // chips, one logical node here, with NVLS reduction), 72 NICs (one 800 Gb/s ConnectX-8 per GPU).
  // Racks join through a non-blocking two-tier fat tree of SHARP-capable switches.
  Topology t;
  t.name = strprintf("%s-nvl72%s", p.gb300 ? "gb300" : "gb200",
                     racks == 1 ? "" : strprintf("-x%d", racks).c_str());
  std::vector<int> nics;
  for (int r = 0; r < racks; ++r) {
    std::string pre = strprintf("r%d.", r);
    int nvsw = t.addNode(pre + "nvsw", NodeType::NvSwitch);
    setReduce(t.node(nvsw), p.nvlsReduceGBps, kNvlsDtypes, 0, 0);
    int cpu = -1;
    for (int g = 0; g < 72; ++g) {
      if (g % 2 == 0) cpu = t.addNode(pre + strprintf("cpu%d", g / 2), NodeType::Cpu);
      int gpu = t.addNode(pre + strprintf("gpu%d", g), NodeType::Gpu);
      t.addLink(gpu, nvsw, LinkType::NvLink, p.nvlinkGBps, p.nvlinkLatUs);
      t.addLink(gpu, cpu, LinkType::C2C, p.c2cGBps, 0.5);
      int nic = t.addNode(pre + strprintf("nic%d", g), NodeType::Nic);
      t.addLink(gpu, nic, LinkType::Pcie, p.pcieGBps, p.pcieLatUs);
      nics.push_back(nic);
    }
  }
  buildFatTree(t, nics, {p.leafDown, p.spines, p.nicGBps, p.netLatUs, p.sharp ? p.sharpReduceGBps : 0});
  t.finalize();
  return t;
}

Topology makeNvl72(const Nvl72Params& p) { return makeNvl72Cluster(1, p); }

Topology makeUniform(int n, double bwGBps, double latencyUs, bool switchReduces) {
  Topology t;
  t.name = strprintf("uniform-%d", n);
  int sw = t.addNode("switch0", NodeType::Switch);
  if (switchReduces) setReduce(t.node(sw), bwGBps, kSharpDtypes, 0, 0);
  for (int i = 0; i < n; ++i) {
    int g = t.addNode(strprintf("gpu%d", i), NodeType::Gpu);
    t.addLink(g, sw, LinkType::Net, bwGBps, latencyUs);
  }
  if (switchReduces) {
    AggTree tr;
    tr.name = "sharp0";
    tr.root = sw;
    (void)t.addAggTree(tr);
  }
  t.finalize();
  return t;
}

static Status parseInt(const std::string& s, int lo, int hi, const char* what, int* out) {
  char* end = nullptr;
  long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end != 0 || v < lo || v > hi)
    return errorf(tribInvalidArgument, "%s '%s' must be an integer in [%d, %d]", what, s.c_str(), lo, hi);
  *out = static_cast<int>(v);
  return Status::Ok();
}

static Status parseDouble(const std::string& s, const char* what, double* out) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != 0 || !(v > 0))
    return errorf(tribInvalidArgument, "%s '%s' must be a positive number", what, s.c_str());
  *out = v;
  return Status::Ok();
}

Status generateTopology(const std::string& spec, const std::vector<std::string>& params, Topology* out) {
  std::vector<std::string> parts;
  {
    std::string cur;
    for (char c : spec + ":") {
      if (c == ':') {
        parts.push_back(cur);
        cur.clear();
      } else {
        cur += c;
      }
    }
  }
  const std::string& sys = parts[0];
  Nvl72Params p;
  for (const auto& kv : params) {
    auto eq = kv.find('=');
    std::string k = kv.substr(0, eq), v = eq == std::string::npos ? "" : kv.substr(eq + 1);
    double d = 0;
    int i = 0;
    if (k == "nvlink_gbps")
      TRIB_RETURN_IF_ERROR(parseDouble(v, k.c_str(), &p.nvlinkGBps));
    else if (k == "nic_gbps")
      TRIB_RETURN_IF_ERROR(parseDouble(v, k.c_str(), &p.nicGBps));
    else if (k == "nvls_gbps")
      TRIB_RETURN_IF_ERROR(parseDouble(v, k.c_str(), &p.nvlsReduceGBps));
    else if (k == "sharp_gbps")
      TRIB_RETURN_IF_ERROR(parseDouble(v, k.c_str(), &p.sharpReduceGBps));
    else if (k == "net_lat_us")
      TRIB_RETURN_IF_ERROR(parseDouble(v, k.c_str(), &p.netLatUs));
    else if (k == "nvlink_lat_us")
      TRIB_RETURN_IF_ERROR(parseDouble(v, k.c_str(), &p.nvlinkLatUs));
    else if (k == "leaf_down")
      TRIB_RETURN_IF_ERROR(parseInt(v, 1, 1 << 20, k.c_str(), &p.leafDown));
    else if (k == "spines")
      TRIB_RETURN_IF_ERROR(parseInt(v, 1, 1 << 20, k.c_str(), &p.spines));
    else if (k == "sharp") {
      TRIB_RETURN_IF_ERROR(parseInt(v, 0, 1, k.c_str(), &i));
      p.sharp = i != 0;
    } else {
      return errorf(
          tribInvalidArgument,
          "unknown generator parameter '%s' (nvlink_gbps, nic_gbps, nvls_gbps, sharp_gbps, net_lat_us, "
          "nvlink_lat_us, leaf_down, spines, sharp=0|1)",
          k.c_str());
    }
    (void)d;
  }
  int n = 1;
  if (sys == "dgx-h100") {
    if (parts.size() > 1) TRIB_RETURN_IF_ERROR(parseInt(parts[1], 1, 4096, "dgx-h100 node count", &n));
    *out = makeDgxH100(n);
  } else if (sys == "nvl72" || sys == "gb300-nvl72" || sys == "gb200-nvl72") {
    p.gb300 = sys != "gb200-nvl72";
    *out = makeNvl72(p);
  } else if (sys == "nvl72-cluster" || sys == "gb300-nvl72-cluster" || sys == "gb200-nvl72-cluster") {
    p.gb300 = sys != "gb200-nvl72-cluster";
    if (parts.size() < 2)
      return errorf(tribInvalidArgument, "%s needs a rack count: %s:64", sys.c_str(), sys.c_str());
    TRIB_RETURN_IF_ERROR(parseInt(parts[1], 1, 4096, "rack count", &n));
    *out = makeNvl72Cluster(n, p);
  } else if (sys == "uniform") {
    if (parts.size() < 2)
      return errorf(tribInvalidArgument, "uniform needs a rank count: uniform:16[:bw[:lat]]");
    TRIB_RETURN_IF_ERROR(parseInt(parts[1], 1, 1 << 20, "rank count", &n));
    double bw = 100, lat = 1;
    if (parts.size() > 2 && !parts[2].empty()) TRIB_RETURN_IF_ERROR(parseDouble(parts[2], "bandwidth", &bw));
    if (parts.size() > 3 && !parts[3].empty()) TRIB_RETURN_IF_ERROR(parseDouble(parts[3], "latency", &lat));
    *out = makeUniform(n, bw, lat, p.sharp);
  } else {
    return errorf(tribInvalidArgument,
                  "unknown system '%s' (dgx-h100[:nodes], gb300-nvl72, gb200-nvl72, nvl72-cluster:RACKS, "
                  "uniform:N[:GBPS[:US]])",
                  sys.c_str());
  }
  return Status::Ok();
}

}  // namespace trib
