// Topology: the graph the planner and the simulator reason over.
//
// Nodes are devices (gpu, cpu, numa, nic, host) and switches (nvswitch, pcie switch, network switch);
// links are bidirectional with a bandwidth per direction (GB/s, 10^9 bytes/s) and a one-way latency
// (µs). A switch may carry a reduce capability (in-network reduction, SHARP / NVLS style). Aggregation
// trees (named trees over reduce-capable switches) say how a switch reduction is routed.
// Domains (GPUs that reach each other through NVLink) and hosts (nodes joined by non-network links)
// are derived from the links, never declared, so they cannot disagree with the graph.
// File format: docs/TOPOLOGY.md.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/dtype.hpp"
#include "common/status.hpp"

namespace trib {

enum class NodeType : uint8_t { Gpu, Cpu, Numa, Nic, Host, NvSwitch, PcieSwitch, Switch };
constexpr int kNumNodeTypes = 8;
enum class LinkType : uint8_t { NvLink, Pcie, C2C, Net, Shm, Loop };
constexpr int kNumLinkTypes = 6;
const char* nodeTypeName(
    NodeType t);  // "gpu", "cpu", "numa", "nic", "host", "nvswitch", "pcieswitch", "switch"
const char* linkTypeName(LinkType t);  // "nvlink", "pcie", "c2c", "net", "shm", "loop"
bool parseNodeType(const std::string& s, NodeType* out);
bool parseLinkType(const std::string& s, LinkType* out);
// A GPU's generation (NCCL's compute-capability classes) and a CPU's maker: what bounds the LL
// protocol's throughput (cost model, docs/PLANNER.md "Protocols"). Unknown: not declared.
enum class GpuArch : uint8_t { Unknown, Volta, Ampere, Hopper, Blackwell };
constexpr int kNumGpuArchs = 5;
enum class CpuVendor : uint8_t { Unknown, Intel, Amd, Arm };
constexpr int kNumCpuVendors = 4;
const char* gpuArchName(GpuArch a);      // "unknown", "volta", "ampere", "hopper", "blackwell"
const char* cpuVendorName(CpuVendor v);  // "unknown", "intel", "amd", "arm"
bool parseGpuArch(const std::string& s, GpuArch* out);
bool parseCpuVendor(const std::string& s, CpuVendor* out);
inline bool isSwitchType(NodeType t) {
  return t == NodeType::NvSwitch || t == NodeType::PcieSwitch || t == NodeType::Switch;
}

// In-network reduction capability of a switch (absent: reduceGBps == 0).
struct ReduceCapability {
  double reduceGBps = 0;     // reduction throughput per port (GB/s); 0 = cannot reduce
  uint32_t dtypeMask = 0;    // bit (1 << tribDataType_t) per supported dtype
  uint32_t opMask = 0;       // bit (1 << tribRedOp_t) per supported op
  int maxConcurrentOps = 0;  // outstanding operations (SHARP OSTs); 0 = unlimited
  uint64_t bufferBytes = 0;  // reduction buffer per operation; 0 = unlimited
  bool can() const { return reduceGBps > 0; }
  bool supports(DataType t, RedOp op) const {
    return can() && (dtypeMask >> static_cast<int>(t) & 1) && (opMask >> static_cast<int>(op) & 1);
  }
};

struct Node {
  std::string name;
  NodeType type = NodeType::Gpu;
  double reduceGBps = 0;            // gpu/cpu: local reduction throughput (0 = use the cost model's default)
  ReduceCapability reduce;          // switches only
  int cores = 0;                    // cpu/numa: physical cores (ranks beyond them time-share); 0 = unknown
  std::string addr;                 // switch: host:port of its aggregation service (trib-switchd), if any
  GpuArch arch = GpuArch::Unknown;  // gpu: its generation
  CpuVendor vendor = CpuVendor::Unknown;  // cpu/numa: its maker
  int sourceLine = 0;                     // line in the topology file (0 when generated)
};

struct Link {
  int a = -1, b = -1;
  LinkType type = LinkType::Net;
  double bwAB = 0, bwBA = 0;  // GB/s per direction
  double latencyUs = 0;       // one way
  int sourceLine = 0;
};

// A named aggregation tree over switches: parent[i] of each member edge; root has no parent.
struct AggTree {
  std::string name;
  int root = -1;
  std::vector<std::pair<int, int>> edges;  // (child, parent), both switch node ids
  std::vector<int> edgeLines;              // file line per edge (empty when generated)
};

class Topology {
 public:
  std::string name = "unnamed";
  // Whether a GPU may relay another GPU's data to its own rail's NIC (NCCL's PXN) where the fabric
  // is rail-optimized (route.hpp). false: NCCL_PXN_DISABLE=1's routes, each GPU through its own
  // NIC (a communicator's plans, whose executor has no relay; `pxn=0`; a file's `pxn off`).
  bool pxn = true;

  int addNode(const std::string& name, NodeType type);  // returns the id; names must be unique
  int addLink(int a, int b, LinkType type, double bwGBps, double latencyUs, double bwBAGBps = -1);
  Status addAggTree(AggTree tree);  // validated against the links (see validate)
  Node& node(int id) { return nodes_[id]; }
  const Node& node(int id) const { return nodes_[id]; }
  const Link& link(int id) const { return links_[id]; }
  Link& link(int id) { return links_[id]; }
  int numNodes() const { return static_cast<int>(nodes_.size()); }
  int numLinks() const { return static_cast<int>(links_.size()); }
  int find(const std::string& name) const;  // -1 if absent
  const std::vector<AggTree>& aggTrees() const { return trees_; }
  // Links at a node: (link id, neighbour).
  const std::vector<std::pair<int, int>>& adjacent(int node) const { return adj_[node]; }
  int countType(NodeType t) const;

  // Structural checks: every gpu/cpu/nic has at least one link, bandwidths positive, agg trees are trees
  // over existing links. Returns the first problem, naming the file line when known.
  Status validate() const;

  // Derived (call finalize() after building; loaders and generators do).
  void finalize();
  // Ranks: the GPUs in id order, or, with no GPU, the CPUs (a CPU-only machine): where ranks on
  // device memory sit.
  const std::vector<int>& rankNodes() const { return rankNodes_; }
  // The CPUs in id order: where ranks on host memory sit, GPUs or not.
  const std::vector<int>& hostRankNodes() const { return hostRankNodes_; }
  // The CPU fewest host links (PCIe, C2C, shm; not NVLink or network) from `node`: the memory a
  // process driving that GPU allocates from. The node itself for a CPU, -1 when none is reachable.
  int nearestCpu(int node) const;
  // Domain per node: the NVLink domain of a GPU (or NVSwitch); on a machine with GPUs, the CPUs
  // joined by host links (sockets of one host: shared memory), numbered after the NVLink domains;
  // -1 for other nodes. numDomains()
  // counts the domains of rankNodes(). Host per node: components over non-net links.
  int domainOf(int node) const { return domain_[node]; }
  int hostOf(int node) const { return host_[node]; }
  int numDomains() const { return numDomains_; }
  int numHosts() const { return numHosts_; }
  // Bisection bandwidth (GB/s, one direction) between the two halves of the rank list: the sum over
  // ranks in the first half of the min of their network egress, bounded by the switch tiers above.
  double bisectionGBps() const;
  // Network capacity (GB/s, one direction): links from endpoints into switches (edge) and between
  // switches (core). core < edge means an oversubscribed fabric.
  void networkCapacity(double* edge, double* core) const;

 private:
  std::vector<Node> nodes_;
  std::vector<Link> links_;
  std::vector<AggTree> trees_;
  std::vector<std::vector<std::pair<int, int>>> adj_;
  std::unordered_map<std::string, int> byName_;
  std::vector<int> rankNodes_, hostRankNodes_, domain_, host_;
  int numDomains_ = 0, numHosts_ = 0;
};

// ---- Files (docs/TOPOLOGY.md) ----------------------------------------------------------------
Status parseTopology(const std::string& text, Topology* out, const std::string& sourceName = "<string>");
Status loadTopologyFile(const std::string& path, Topology* out);
std::string dumpTopology(const Topology& t);
Status dumpTopologyFile(const Topology& t, const std::string& path);

// ---- Generators (defaults from shared/REFERENCE.md; see docs/TOPOLOGY.md for the counts) -------
// NVLS (NVLink SHARP) reduction rate per NVSwitch port. Hopper's is fitted to DGX H100's ~480 GB/s
// busbw (docs/PLANNER.md). Blackwell's scales it by the NVLink rate (900 / 450 GB/s) and by the
// ratio of NCCL's own NVLS efficiencies for the two generations (its tuning model: Hopper 0.85,
// Blackwell 0.74), about 478.8 GB/s: Blackwell's switches did not gain NVLink's 2x for reductions.
inline constexpr double kNvlsHopperGBps = 275;
inline constexpr double kNvlsBlackwellGBps = kNvlsHopperGBps * (900.0 / 450.0) * (0.74 / 0.85);
struct Nvl72Params {
  bool gb300 = true;         // GB300 (Blackwell Ultra) or GB200; same fabric figures here
  double nvlinkGBps = 900;   // per GPU per direction (1.8 TB/s both directions)
  double nvlinkLatUs = 0.5;  // per hop (gpu -> nvswitch)
  // NVLink-switch reduction throughput per port
  double nvlsReduceGBps = kNvlsBlackwellGBps;
  double nicGBps = 100;          // 800 Gb/s per GPU
  double c2cGBps = 450;          // Grace <-> GPU per direction (900 GB/s both)
  double pcieGBps = 128;         // GPU <-> NIC (PCIe Gen6 x16)
  double netLatUs = 0.6;         // per network hop (cable + switch)
  double pcieLatUs = 0.5;        // GPU <-> NIC
  double sharpReduceGBps = 100;  // switch reduction throughput per port (line rate)
  int leafDown = 72;             // NICs per leaf switch (one leaf per rack by default)
  int spines = 36;               // spine switches (non-blocking: leaf uplink = leaf downlink)
  bool sharp = true;             // network switches reduce
  int tiers = 0;                 // fat-tree tiers, 2 or 3; 0: two while leaves <= radix, else three
  int radix = 144;               // switch ports (Quantum-X800: 144 x 800 Gb/s)
};
// Eight-GPU HGX/DGX nodes, and N of them on a fat tree (hgxPreset: dgx-a100, dgx-h100, dgx-h200,
// dgx-b200, or hgx-*; the figures are in generators.cpp).
struct HgxParams {
  std::string name;
  double nvlinkGBps;      // per GPU per direction
  double nvlsReduceGBps;  // NVSwitch reduction per port; 0: the NVSwitch does not reduce
  double nicGBps;         // one NIC per GPU
  double pcieGBps;        // per x16 link
  double nvlinkLatUs, netLatUs;
  double sharpReduceGBps;  // network switches' reduction per port
  int leafDown, spines, tiers, radix;
  bool sharp;
  GpuArch arch;
  CpuVendor cpu;  // the host's sockets
  // 0: the NICs fill leaves in node order; 1: rail-optimized, NIC g of every node on rail g's own
  // leaves under common spines; 2: rail-only, no spines (rails meet only through PXN relays).
  int rails = 0;
  bool pxn = true;  // Topology::pxn
};
const HgxParams* hgxPreset(const std::string& name);  // nullptr: not an HGX system
Topology makeHgx(const HgxParams& p, int nodes = 1);
Topology makeDgxH100(int nodes = 1);  // nodes > 1: on a non-blocking fat tree of 400G NICs
Topology makeNvl72(const Nvl72Params& p = {});
Topology makeNvl72Cluster(int racks, const Nvl72Params& p = {});
// n ranks, each on its own link (bw GB/s, latency µs per hop) to one switch: the closed-form case.
Topology makeUniform(int n, double bwGBps, double latencyUs, bool switchReduces = false);
// Build a generator's topology by name: "dgx-a100|h100|h200|b200[:nodes]", "nvl72", "gb200-nvl72",
// "nvl72-cluster:<racks>", "uniform:<n>[:bw[:lat]]". Extra "key=value" params override the
// system's figures (kGeneratorParams).
inline constexpr const char* kGeneratorSystems =
    "dgx-a100|dgx-h100|dgx-h200|dgx-b200[:nodes], gb300-nvl72, gb200-nvl72, nvl72-cluster:RACKS, "
    "uniform:N[:GBPS[:US]]";
inline constexpr const char* kGeneratorParams =
    "nvlink_gbps, nic_gbps, nvls_gbps, sharp_gbps, net_lat_us, nvlink_lat_us, leaf_down, spines, sharp=0|1, "
    "tiers=2|3, radix, rails=0|1|2, pxn=0|1";
const char* generatorHelp();  // one line per system, for trib-topo gen --help
Status generateTopology(const std::string& spec, const std::vector<std::string>& params, Topology* out);

// ---- Discovery -------------------------------------------------------------------------------
// The local machine: hwloc (NUMA nodes, cores, PCI devices and their link speeds) when the build has
// it (TRIB_HAVE_HWLOC), else /sys; GPUs and NVLinks from NVML and RDMA NICs (as libibverbs sees them)
// when their libraries and devices exist. Absent hardware is simply absent.
Topology detectLocal(std::string* log = nullptr);
// What discovery saw, beyond the graph (the graph has no field for cores or non-RDMA devices).
enum class DetectSource { Auto, Hwloc, Sys };  // Auto: hwloc when built with it, else /sys
struct DetectReport {
  std::string source;               // "hwloc" or "sys"
  std::vector<int> coresPerNuma;    // physical cores per NUMA node, in node order (cpu0, cpu1, ...)
  std::vector<double> numaMemGBps;  // memory bandwidth per NUMA node from hwloc (ACPI HMAT); 0 = unknown
  int pciDevices = 0;               // PCI functions hwloc lists (0 from /sys)
  int netDevices = 0;               // PCI class 0x02 (network) functions, RDMA-capable or not
  int gpus = 0, nics = 0;           // gpu / nic nodes added to the graph
  std::string log;                  // one line per finding, as detectLocal(&log)
  int cores() const;
};
// Discovery from one source. Hwloc in a build without hwloc: tribNotSupported, saying how to get it.
Status detectLocalWith(DetectSource source, Topology* out, DetectReport* report = nullptr);
// One graph from the views of several hosts (each a dumpTopology() string, e.g. every host's
// detectLocal() all-gathered through the bootstrap, one per host): host i's nodes become
// "h<i>.<name>", and every NIC -- or, on a host without NICs, its first CPU -- joins one network
// switch "fabric" at netGBps per port (latency netLatUs). A single host is returned unchanged.
Status mergeHostTopologies(const std::vector<std::string>& hostDumps, double netGBps, double netLatUs,
                           Topology* out);
// TRIB_TOPO_FILE if set, else detectLocal(); dumps to TRIB_TOPO_DUMP_FILE if set.
Status topologyFromEnv(Topology* out);

}  // namespace trib
