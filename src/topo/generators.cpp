// Generators for the systems users ask about. Figures are defaults from shared/REFERENCE.md and
// vendor data sheets; every one is a parameter. Counts are documented in docs/TOPOLOGY.md.
#include <algorithm>
#include <cstdlib>
#include <optional>

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
  int spines;         // spine switches (per pod, with three tiers) when there is more than one leaf
  double nicGBps;     // per NIC port
  double latUs;       // per hop
  double reduceGBps;  // 0: switches do not reduce
  int tiers;          // 2 or 3; 0: two while one spine can reach every leaf (leaves <= radix), else three
  int radix;          // switch ports: a two-tier spine takes `radix` leaves, a three-tier pod radix/2
  int railNics = 0;  // rail-optimized: `nics` are rail by rail, this many a rail, each rail on its own leaves
  bool railOnly = false;  // no switch above the leaves (each rail one leaf: railNics <= leafDown)
};

int addSwitch(Topology& t, const std::string& name, const FatTree& f) {
  int id = t.addNode(name, NodeType::Switch);
  if (f.reduceGBps > 0) setReduce(t.node(id), f.reduceGBps, kSharpDtypes, 64, 0);
  return id;
}

// Non-blocking fat tree over `nics` (in order): leaf i takes NICs [i*leafDown, ...); each switch's
// uplink capacity equals its downlink capacity (a bundle of parallel cables is one link). Two
// tiers: every leaf links to every spine. Three tiers: pods of radix/2 leaves, each pod with its
// own `spines` spines; spine s of every pod links to core s (a plane: one logical node for the
// core switches of that plane). With reduction, one aggregation tree per spine (two tiers) or per
// plane (three): SHARP builds several trees, and groups spread over them.
void buildFatTree(Topology& t, const std::vector<int>& nics, const FatTree& f) {
  // NIC i's leaf: in order, or (rails) its rail's leaves, each rail starting a leaf of its own.
  const int n = static_cast<int>(nics.size()), group = f.railNics > 0 ? f.railNics : n;
  const int leavesPerGroup = (group + f.leafDown - 1) / f.leafDown;
  auto leafOf = [&](int i) { return i / group * leavesPerGroup + i % group / f.leafDown; };
  const int leaves = leafOf(n - 1) + 1;
  std::vector<int> leafIds;
  for (int l = 0; l < leaves; ++l) leafIds.push_back(addSwitch(t, strprintf("leaf%d", l), f));
  for (int i = 0; i < n; ++i) t.addLink(nics[i], leafIds[leafOf(i)], LinkType::Net, f.nicGBps, f.latUs);
  if (f.railOnly) return;  // no tree spans the rails: no switch reduces across them
  if (leaves == 1) {
    if (f.reduceGBps > 0) {
      AggTree tr;
      tr.name = "sharp0";
      tr.root = leafIds[0];
      (void)t.addAggTree(tr);
    }
    return;
  }
  const double leafUp = f.leafDown * f.nicGBps / f.spines;  // one leaf-spine bundle
  const int tiers = f.tiers ? f.tiers : leaves <= f.radix ? 2 : 3;
  if (tiers == 2) {
    std::vector<int> spineIds;
    for (int s = 0; s < f.spines; ++s) {
      spineIds.push_back(addSwitch(t, strprintf("spine%d", s), f));
      for (int l : leafIds) t.addLink(l, spineIds.back(), LinkType::Net, leafUp, f.latUs);
    }
    if (f.reduceGBps > 0) {
      for (int s = 0; s < f.spines; ++s) {
        AggTree tr;
        tr.name = strprintf("sharp%d", s);
        for (int l : leafIds) tr.edges.push_back({l, spineIds[s]});
        (void)t.addAggTree(tr);  // a star over existing links: always a valid tree
      }
    }
    return;
  }
  const int podLeaves = std::max(1, f.radix / 2);
  const int pods = (leaves + podLeaves - 1) / podLeaves;
  std::vector<int> cores;
  for (int s = 0; s < f.spines; ++s) cores.push_back(addSwitch(t, strprintf("core%d", s), f));
  std::vector<AggTree> trees(f.reduceGBps > 0 ? f.spines : 0);
  for (int s = 0; s < static_cast<int>(trees.size()); ++s) trees[s].name = strprintf("sharp%d", s);
  for (int p = 0; p < pods; ++p) {
    const int first = p * podLeaves, last = std::min(leaves, first + podLeaves);
    const double spineUp = (last - first) * leafUp;  // spine s's downlinks in this pod, summed
    for (int s = 0; s < f.spines; ++s) {
      const int spine = addSwitch(t, strprintf("pod%d.spine%d", p, s), f);
      for (int l = first; l < last; ++l) t.addLink(leafIds[l], spine, LinkType::Net, leafUp, f.latUs);
      t.addLink(spine, cores[s], LinkType::Net, spineUp, f.latUs);
      if (trees.empty()) continue;
      for (int l = first; l < last; ++l) trees[s].edges.push_back({leafIds[l], spine});
      trees[s].edges.push_back({spine, cores[s]});
    }
  }
  for (AggTree& tr : trees) (void)t.addAggTree(tr);  // leaves -> pod spine -> the plane's core
}

}  // namespace

const HgxParams* hgxPreset(const std::string& name) {
  // Eight GPUs per node on one NVSwitch fabric, one NIC per GPU; figures per direction from the
  // vendors' data sheets (shared/REFERENCE.md for H100). NVLS rates (topology.hpp): H100's fitted
  // to ~480 GB/s busbw (docs/PLANNER.md); B200's NVSwitch is the NVL72's switch generation, so its
  // rate.
  static const HgxParams presets[] = {
      // A100: NVLink3 600 GB/s both ways, second-generation NVSwitch (no reduction), 8 x HDR
      // 200 Gb/s ConnectX-6, PCIe Gen4; HDR Quantum switches have 40 ports (SHARPv2). Hosts: DGX
      // A100 has AMD EPYC sockets, DGX H100 / H200 / B200 Intel Xeon.
      {"dgx-a100", 300, 0, 25, 32, 0.5, 0.6, 25, 20, 20, 0, 40, true, GpuArch::Ampere, CpuVendor::Amd},
      // H100 / H200 (the same board and fabric; more HBM on H200): NVLink4 900 GB/s both ways,
      // 8 x NDR 400 Gb/s ConnectX-7, PCIe Gen5; NDR Quantum-2 switches have 64 ports.
      {"dgx-h100", 450, kNvlsHopperGBps, 50, 64, 0.5, 0.6, 50, 32, 16, 0, 64, true, GpuArch::Hopper,
       CpuVendor::Intel},
      {"dgx-h200", 450, kNvlsHopperGBps, 50, 64, 0.5, 0.6, 50, 32, 16, 0, 64, true, GpuArch::Hopper,
       CpuVendor::Intel},
      // B200: NVLink5 1.8 TB/s both ways, 8 x 400 Gb/s ConnectX-7, PCIe Gen5.
      {"dgx-b200", 900, kNvlsBlackwellGBps, 50, 64, 0.5, 0.6, 50, 32, 16, 0, 64, true, GpuArch::Blackwell,
       CpuVendor::Intel},
  };
  std::string n = name.rfind("hgx-", 0) == 0 ? "dgx-" + name.substr(4) : name;
  for (const HgxParams& p : presets)
    if (n == p.name) return &p;
  return nullptr;
}

Topology makeHgx(const HgxParams& hp, int nodes) {
  // Per node: 8 GPUs on the NVSwitch fabric (its chips are one logical node here), 2 CPU
  // sockets, 8 PCIe switch halves (a GPU and its NIC each), 8 NICs.
  Topology t;
  static const char* const kRailSuffix[] = {"", "-rails", "-railonly"};
  t.name = nodes == 1 ? hp.name : strprintf("%s-x%d%s", hp.name.c_str(), nodes, kRailSuffix[hp.rails]);
  if (!hp.pxn && hp.rails && nodes > 1) t.name += "-nopxn";
  t.pxn = hp.pxn;
  std::vector<int> nics;
  for (int h = 0; h < nodes; ++h) {
    std::string p = nodes == 1 ? "" : strprintf("n%d.", h);
    int nvsw = t.addNode(p + "nvsw", NodeType::NvSwitch);
    if (hp.nvlsReduceGBps > 0) setReduce(t.node(nvsw), hp.nvlsReduceGBps, kNvlsDtypes, 0, 0);
    int cpu[2];
    for (int c = 0; c < 2; ++c) {
      cpu[c] = t.addNode(p + strprintf("cpu%d", c), NodeType::Cpu);
      t.node(cpu[c]).vendor = hp.cpu;
    }
    t.addLink(cpu[0], cpu[1], LinkType::C2C, 64, 0.5);  // inter-socket
    // Rails: each GPU has its own NIC (NCCL pairs every GPU with the closest NIC, one each). The
    // PCIe switch the board gives two GPUs and two NICs is drawn as two halves, one (GPU, NIC) pair
    // each, so routes from GPU g leave through NIC g instead of a hash picking one of the two.
    int psw[8];
    for (int s = 0; s < 8; ++s) {
      psw[s] = t.addNode(p + strprintf("pcie%d", s), NodeType::PcieSwitch);
      t.addLink(psw[s], cpu[s / 4], LinkType::Pcie, hp.pcieGBps, 0.3);
    }
    for (int g = 0; g < 8; ++g) {
      int gpu = t.addNode(p + strprintf("gpu%d", g), NodeType::Gpu);
      t.node(gpu).arch = hp.arch;
      t.addLink(gpu, nvsw, LinkType::NvLink, hp.nvlinkGBps, hp.nvlinkLatUs);
      t.addLink(gpu, psw[g], LinkType::Pcie, hp.pcieGBps, 0.3);
    }
    for (int n = 0; n < 8; ++n) {
      int nic = t.addNode(p + strprintf("nic%d", n), NodeType::Nic);
      t.addLink(nic, psw[n], LinkType::Pcie, hp.pcieGBps, 0.3);
      nics.push_back(nic);
    }
  }
  if (nodes > 1) {
    // Rail-optimized (the DGX SuperPOD's fabric): NIC g of every node on rail g's leaves, so two
    // GPUs of the same index meet one switch away and other pairs cross a spine (or PXN, route.hpp).
    std::vector<int> order = nics;
    if (hp.rails)
      for (int g = 0, i = 0; g < 8; ++g)
        for (int h = 0; h < nodes; ++h) order[i++] = nics[h * 8 + g];
    buildFatTree(t, order,
                 {hp.leafDown, hp.spines, hp.nicGBps, hp.netLatUs, hp.sharp ? hp.sharpReduceGBps : 0,
                  hp.tiers, hp.radix, hp.rails ? nodes : 0, hp.rails == 2});
  }
  t.finalize();
  return t;
}

Topology makeDgxH100(int nodes) { return makeHgx(*hgxPreset("dgx-h100"), nodes); }

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
      if (g % 2 == 0) {
        cpu = t.addNode(pre + strprintf("cpu%d", g / 2), NodeType::Cpu);
        t.node(cpu).vendor = CpuVendor::Arm;  // Grace
      }
      int gpu = t.addNode(pre + strprintf("gpu%d", g), NodeType::Gpu);
      t.node(gpu).arch = GpuArch::Blackwell;
      t.addLink(gpu, nvsw, LinkType::NvLink, p.nvlinkGBps, p.nvlinkLatUs);
      t.addLink(gpu, cpu, LinkType::C2C, p.c2cGBps, 0.5);
      int nic = t.addNode(pre + strprintf("nic%d", g), NodeType::Nic);
      t.addLink(gpu, nic, LinkType::Pcie, p.pcieGBps, p.pcieLatUs);
      nics.push_back(nic);
    }
  }
  buildFatTree(
      t, nics,
      {p.leafDown, p.spines, p.nicGBps, p.netLatUs, p.sharp ? p.sharpReduceGBps : 0, p.tiers, p.radix});
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

namespace {

// The key=value parameters, applied to whichever system's figures (fields a system lacks are
// ignored by it: an HGX node has no C2C-to-GPU field, say).
struct GeneratorOverrides {
  std::optional<double> nvlinkGBps, nicGBps, nvlsGBps, sharpGBps, netLatUs, nvlinkLatUs;
  std::optional<int> leafDown, spines, sharp, tiers, radix, rails, pxn;
  template <typename P>
  void apply(P& p) const {
    if (nvlinkGBps) p.nvlinkGBps = *nvlinkGBps;
    if (nicGBps) p.nicGBps = *nicGBps;
    if (nvlsGBps) p.nvlsReduceGBps = *nvlsGBps;
    if (sharpGBps) p.sharpReduceGBps = *sharpGBps;
    if (netLatUs) p.netLatUs = *netLatUs;
    if (nvlinkLatUs) p.nvlinkLatUs = *nvlinkLatUs;
    if (leafDown) p.leafDown = *leafDown;
    if (spines) p.spines = *spines;
    if (sharp) p.sharp = *sharp != 0;
    if (tiers) p.tiers = *tiers;
    if (radix) p.radix = *radix;
    if constexpr (requires { p.rails; }) {
      if (rails) p.rails = *rails;
      if (pxn) p.pxn = *pxn != 0;
    }
  }
};

Status parseOverrides(const std::vector<std::string>& params, GeneratorOverrides* o) {
  for (const auto& kv : params) {
    auto eq = kv.find('=');
    std::string k = kv.substr(0, eq), v = eq == std::string::npos ? "" : kv.substr(eq + 1);
    double d = 0;
    int i = 0;
    auto real = [&](std::optional<double>& f) -> Status {
      TRIB_RETURN_IF_ERROR(parseDouble(v, k.c_str(), &d));
      f = d;
      return Status::Ok();
    };
    auto integer = [&](std::optional<int>& f, int lo, int hi) -> Status {
      TRIB_RETURN_IF_ERROR(parseInt(v, lo, hi, k.c_str(), &i));
      f = i;
      return Status::Ok();
    };
    Status st;
    if (k == "nvlink_gbps")
      st = real(o->nvlinkGBps);
    else if (k == "nic_gbps")
      st = real(o->nicGBps);
    else if (k == "nvls_gbps")
      st = real(o->nvlsGBps);
    else if (k == "sharp_gbps")
      st = real(o->sharpGBps);
    else if (k == "net_lat_us")
      st = real(o->netLatUs);
    else if (k == "nvlink_lat_us")
      st = real(o->nvlinkLatUs);
    else if (k == "leaf_down")
      st = integer(o->leafDown, 1, 1 << 20);
    else if (k == "spines")
      st = integer(o->spines, 1, 1 << 20);
    else if (k == "sharp")
      st = integer(o->sharp, 0, 1);
    else if (k == "tiers")
      st = integer(o->tiers, 2, 3);
    else if (k == "radix")
      st = integer(o->radix, 2, 1 << 20);
    else if (k == "rails")
      st = integer(o->rails, 0, 2);
    else if (k == "pxn")
      st = integer(o->pxn, 0, 1);
    else
      return errorf(tribInvalidArgument, "unknown generator parameter '%s' (%s)", k.c_str(),
                    kGeneratorParams);
    TRIB_RETURN_IF_ERROR(st);
  }
  return Status::Ok();
}

}  // namespace

const char* generatorHelp() {
  return "  dgx-a100[:N]   N x 8 A100, NVLink3 300 GB/s, no NVLS, 8 x 200 Gb/s HDR per node\n"
         "  dgx-h100[:N]   N x 8 H100, NVLink4 450 GB/s, NVLS, 8 x 400 Gb/s NDR per node\n"
         "  dgx-h200[:N]   N x 8 H200 (the H100 board and fabric)\n"
         "  dgx-b200[:N]   N x 8 B200, NVLink5 900 GB/s, NVLS, 8 x 400 Gb/s per node\n"
         "                 (hgx-* are the same systems)\n"
         "  gb300-nvl72, gb200-nvl72            one rack: 72 GPUs, NVLink5 900 GB/s, NVLS, 800 / 400 Gb/s\n"
         "  nvl72-cluster:R (gb300-/gb200-)     R racks on a fat tree of SHARP switches\n"
         "  uniform:N[:GBPS[:US]]               N ranks on one switch (the closed-form case)\n"
         "  Nodes and racks join through a non-blocking fat tree: two tiers while one spine reaches\n"
         "  every leaf (leaves <= radix), else three (pods of radix/2 leaves; tiers= forces);\n"
         "  sharp=0 turns the switches' reduction off; rails=1 (dgx-*) makes the fabric rail-optimized:\n"
         "  NIC g of every node on rail g's own leaves (GPUs of other indices reach it by PXN, over\n"
         "  NVLink to the GPU on that rail); rails=2 makes it rail-only: no spines, each rail one leaf\n"
         "  (at most leaf_down nodes), no switch reduction across the rails; pxn=0 turns the relays\n"
         "  off (NCCL_PXN_DISABLE=1): steps across rails cross the spines (rails=2 needs them).\n";
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
  const size_t maxParts = sys == "uniform" ? 4 : 2;  // uniform:N:GBPS:US; the others SYSTEM[:N]
  if (parts.size() > maxParts)
    return errorf(tribInvalidArgument, "system '%s': too many ':' fields (%zu; at most %zu)", spec.c_str(),
                  parts.size(), maxParts);
  GeneratorOverrides o;
  TRIB_RETURN_IF_ERROR(parseOverrides(params, &o));
  if (o.rails && !hgxPreset(sys))  // it used to be ignored: a flat fabric came back for rails=1
    return errorf(tribInvalidArgument, "rails= applies to the dgx-*/hgx-* systems, not %s", sys.c_str());
  if (o.pxn && !hgxPreset(sys))  // no other system has rails for a GPU to relay to
    return errorf(tribInvalidArgument, "pxn= applies to the dgx-*/hgx-* systems (their rails), not %s",
                  sys.c_str());
  Nvl72Params p;
  o.apply(p);
  int n = 1;
  if (const HgxParams* preset = hgxPreset(sys)) {
    if (parts.size() > 1)
      TRIB_RETURN_IF_ERROR(parseInt(parts[1], 1, 1 << 15, (sys + " node count").c_str(), &n));
    HgxParams hp = *preset;
    o.apply(hp);
    if (hp.rails == 2 && !hp.pxn && n > 1)  // GPU-to-GPU steps between rails would go by the CPUs
      return errorf(
          tribInvalidArgument,
          "rails=2 (rail-only) joins the rails only through PXN relays: it needs pxn=1 (use rails=1 "
          "for rails under common spines)");
    if (hp.rails == 2 && n > hp.leafDown)
      return errorf(tribInvalidArgument,
                    "rails=2 (rail-only) puts each rail on one leaf: at most leaf_down = %d nodes, not %d",
                    hp.leafDown, n);
    *out = makeHgx(hp, n);
  } else if (sys == "nvl72" || sys == "gb300-nvl72" || sys == "gb200-nvl72") {
    if (parts.size() > 1)  // a count here used to be ignored: one rack came back for "nvl72:64"
      return errorf(tribInvalidArgument,
                    "%s is one rack and takes no count: for %s racks use nvl72-cluster:%s", sys.c_str(),
                    parts[1].c_str(), parts[1].c_str());
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
    return errorf(tribInvalidArgument, "unknown system '%s' (%s)", sys.c_str(), kGeneratorSystems);
  }
  return Status::Ok();
}

}  // namespace trib
