// Topology graph: construction, validation and derived structure (domains, hosts, bisection).
#include "topo/topology.hpp"

#include <algorithm>
#include <functional>

namespace trib {

const char* nodeTypeName(NodeType t) {
  static const char* const names[kNumNodeTypes] = {"gpu",  "cpu",      "numa",       "nic",
                                                   "host", "nvswitch", "pcieswitch", "switch"};
  auto i = static_cast<int>(t);
  return i >= 0 && i < kNumNodeTypes ? names[i] : "invalid";
}

const char* linkTypeName(LinkType t) {
  static const char* const names[kNumLinkTypes] = {"nvlink", "pcie", "c2c", "net", "shm", "loop"};
  auto i = static_cast<int>(t);
  return i >= 0 && i < kNumLinkTypes ? names[i] : "invalid";
}

namespace {
// The enum value of E whose name(value) is s, among the first count.
template <typename E>
bool parseByName(const std::string& s, int count, const char* (*name)(E), E* out) {
  for (int i = 0; i < count; ++i)
    if (s == name(static_cast<E>(i))) {
      *out = static_cast<E>(i);
      return true;
    }
  return false;
}
}  // namespace

const char* gpuArchName(GpuArch a) {
  static const char* const names[kNumGpuArchs] = {"unknown", "volta", "ampere", "hopper", "blackwell"};
  auto i = static_cast<int>(a);
  return i >= 0 && i < kNumGpuArchs ? names[i] : "invalid";
}

const char* cpuVendorName(CpuVendor v) {
  static const char* const names[kNumCpuVendors] = {"unknown", "intel", "amd", "arm"};
  auto i = static_cast<int>(v);
  return i >= 0 && i < kNumCpuVendors ? names[i] : "invalid";
}

bool parseNodeType(const std::string& s, NodeType* out) {
  return parseByName(s, kNumNodeTypes, nodeTypeName, out);
}
bool parseLinkType(const std::string& s, LinkType* out) {
  return parseByName(s, kNumLinkTypes, linkTypeName, out);
}
bool parseGpuArch(const std::string& s, GpuArch* out) {
  return parseByName(s, kNumGpuArchs, gpuArchName, out);
}
bool parseCpuVendor(const std::string& s, CpuVendor* out) {
  return parseByName(s, kNumCpuVendors, cpuVendorName, out);
}

int Topology::addNode(const std::string& nodeName, NodeType type) {
  int id = numNodes();
  Node n;
  n.name = nodeName;
  n.type = type;
  nodes_.push_back(std::move(n));
  adj_.emplace_back();
  byName_[nodeName] = id;
  return id;
}

int Topology::addLink(int a, int b, LinkType type, double bwGBps, double latencyUs, double bwBAGBps) {
  Link l;
  l.a = a;
  l.b = b;
  l.type = type;
  l.bwAB = bwGBps;
  l.bwBA = bwBAGBps < 0 ? bwGBps : bwBAGBps;
  l.latencyUs = latencyUs;
  int id = numLinks();
  links_.push_back(l);
  adj_[a].push_back({id, b});
  adj_[b].push_back({id, a});
  return id;
}

int Topology::find(const std::string& nodeName) const {
  auto it = byName_.find(nodeName);
  return it == byName_.end() ? -1 : it->second;
}

int Topology::countType(NodeType t) const {
  int c = 0;
  for (const auto& n : nodes_) c += n.type == t;
  return c;
}

static std::string at(int line) { return line > 0 ? strprintf("line %d: ", line) : std::string(); }

Status Topology::addAggTree(AggTree tree) {
  // A tree: every child has exactly one parent, every edge is a link, following parents from any
  // member ends at the one root (no cycle).
  std::unordered_map<int, int> parent;
  auto lineOf = [&](size_t i) { return i < tree.edgeLines.size() ? at(tree.edgeLines[i]) : std::string(); };
  for (size_t i = 0; i < tree.edges.size(); ++i) {
    auto [c, p] = tree.edges[i];
    if (c < 0 || p < 0 || c >= numNodes() || p >= numNodes())
      return errorf(tribInvalidArgument, "%saggregation tree '%s': edge names an unknown node",
                    lineOf(i).c_str(), tree.name.c_str());
    if (!parent.emplace(c, p).second)
      return errorf(tribInvalidArgument,
                    "%saggregation tree '%s': node '%s' has two parents; a tree gives each switch one parent",
                    lineOf(i).c_str(), tree.name.c_str(), nodes_[c].name.c_str());
    bool linked = false;
    for (auto [lid, nb] : adj_[c]) linked |= nb == p;
    if (!linked)
      return errorf(tribInvalidArgument,
                    "%saggregation tree '%s': missing link between '%s' and '%s'; add a 'link' line for it",
                    lineOf(i).c_str(), tree.name.c_str(), nodes_[c].name.c_str(), nodes_[p].name.c_str());
  }
  int root = -1;
  for (size_t i = 0; i < tree.edges.size(); ++i) {
    int c = tree.edges[i].first, x = c, hops = 0;
    while (parent.count(x)) {
      x = parent[x];
      if (++hops > static_cast<int>(parent.size()))
        return errorf(tribInvalidArgument,
                      "%saggregation tree '%s' has a cycle through '%s'; it must be a tree",
                      lineOf(i).c_str(), tree.name.c_str(), nodes_[c].name.c_str());
    }
    if (root >= 0 && x != root)
      return errorf(tribInvalidArgument,
                    "%saggregation tree '%s' has two roots ('%s' and '%s'); it must be one tree",
                    lineOf(i).c_str(), tree.name.c_str(), nodes_[root].name.c_str(), nodes_[x].name.c_str());
    root = x;
  }
  if (root < 0) root = tree.root;  // a one-switch tree: just its root
  if (root < 0 || root >= numNodes())
    return errorf(tribInvalidArgument, "aggregation tree '%s' has no edges and no root", tree.name.c_str());
  tree.root = root;
  trees_.push_back(std::move(tree));
  return Status::Ok();
}

Status Topology::validate() const {
  if (nodes_.empty()) return errorf(tribInvalidArgument, "topology '%s' has no nodes", name.c_str());
  for (const auto& l : links_) {
    if (!(l.bwAB > 0) || !(l.bwBA > 0))
      return errorf(tribInvalidArgument, "%slink %s-%s: bandwidth must be > 0 GB/s (got %g/%g)",
                    at(l.sourceLine).c_str(), nodes_[l.a].name.c_str(), nodes_[l.b].name.c_str(), l.bwAB,
                    l.bwBA);
    if (!(l.latencyUs >= 0))
      return errorf(tribInvalidArgument, "%slink %s-%s: latency must be >= 0 us (got %g)",
                    at(l.sourceLine).c_str(), nodes_[l.a].name.c_str(), nodes_[l.b].name.c_str(),
                    l.latencyUs);
    if (l.a == l.b)
      return errorf(tribInvalidArgument, "%slink connects '%s' to itself", at(l.sourceLine).c_str(),
                    nodes_[l.a].name.c_str());
  }
  bool multi = nodes_.size() > 1;
  for (int i = 0; i < numNodes(); ++i) {
    const Node& n = nodes_[i];
    if (multi && adj_[i].empty() && n.type != NodeType::Host)
      return errorf(tribInvalidArgument,
                    "%snode '%s' (%s) has no links: missing links; connect it with a 'link' line",
                    at(n.sourceLine).c_str(), n.name.c_str(), nodeTypeName(n.type));
    if (n.reduce.can() && !isSwitchType(n.type))
      return errorf(tribInvalidArgument, "%snode '%s': only switches can carry a reduce capability",
                    at(n.sourceLine).c_str(), n.name.c_str());
    if (n.reduceGBps < 0 || n.reduce.reduceGBps < 0)
      return errorf(tribInvalidArgument, "%snode '%s': reduce bandwidth must be >= 0",
                    at(n.sourceLine).c_str(), n.name.c_str());
  }
  // Every rank must reach every other rank (else no collective can run).
  if (!rankNodes_.empty()) {
    std::vector<char> seen(nodes_.size(), 0);
    std::vector<int> stack{rankNodes_[0]};
    seen[rankNodes_[0]] = 1;
    while (!stack.empty()) {
      int x = stack.back();
      stack.pop_back();
      for (auto [lid, nb] : adj_[x])
        if (!seen[nb]) seen[nb] = 1, stack.push_back(nb);
    }
    for (int r : rankNodes_)
      if (!seen[r])
        return errorf(tribInvalidArgument, "%snode '%s' cannot reach '%s': missing links between them",
                      at(nodes_[r].sourceLine).c_str(), nodes_[r].name.c_str(),
                      nodes_[rankNodes_[0]].name.c_str());
  }
  for (const auto& t : trees_)
    for (auto [c, p] : t.edges)
      if (!nodes_[c].reduce.can() || !nodes_[p].reduce.can())
        return errorf(tribInvalidArgument,
                      "aggregation tree '%s': '%s' cannot reduce; give it a reduce= capability",
                      t.name.c_str(), nodes_[nodes_[c].reduce.can() ? p : c].name.c_str());
  return Status::Ok();
}

// Links inside one host's memory system: what a host-memory rank's data can cross without a NIC.
static bool isHostLink(const Link& l) { return l.type != LinkType::Net && l.type != LinkType::NvLink; }

// Connected components over the links accepted by `use`, restricted to nodes accepted by `member`.
static int components(const Topology& t, const std::function<bool(const Link&)>& use,
                      const std::function<bool(int)>& member, std::vector<int>* comp) {
  comp->assign(t.numNodes(), -1);
  int n = 0;
  for (int s = 0; s < t.numNodes(); ++s) {
    if ((*comp)[s] >= 0 || !member(s)) continue;
    std::vector<int> stack{s};
    (*comp)[s] = n;
    while (!stack.empty()) {
      int x = stack.back();
      stack.pop_back();
      for (auto [lid, nb] : t.adjacent(x)) {
        if ((*comp)[nb] >= 0 || !member(nb) || !use(t.link(lid))) continue;
        (*comp)[nb] = n;
        stack.push_back(nb);
      }
    }
    ++n;
  }
  return n;
}

void Topology::finalize() {
  rankNodes_.clear();
  hostRankNodes_.clear();
  for (int i = 0; i < numNodes(); ++i)
    if (nodes_[i].type == NodeType::Gpu) rankNodes_.push_back(i);
  for (int i = 0; i < numNodes(); ++i)
    if (nodes_[i].type == NodeType::Cpu) hostRankNodes_.push_back(i);
  if (rankNodes_.empty()) rankNodes_ = hostRankNodes_;
  // Domains: ranks joined through NVLink (directly or via NVSwitches). On a CPU-only machine the
  // shared-memory host plays that role.
  bool gpus = !rankNodes_.empty() && nodes_[rankNodes_[0]].type == NodeType::Gpu;
  std::vector<int> comp;
  if (gpus) {
    components(
        *this, [](const Link& l) { return l.type == LinkType::NvLink; },
        [&](int x) { return nodes_[x].type == NodeType::Gpu || nodes_[x].type == NodeType::NvSwitch; },
        &comp);
  } else {
    components(
        *this, [](const Link& l) { return l.type != LinkType::Net; }, [](int) { return true; }, &comp);
  }
  // Renumber so only components holding ranks count, in rank order.
  domain_.assign(numNodes(), -1);
  std::unordered_map<int, int> renum;
  for (int r : rankNodes_) renum.emplace(comp[r], static_cast<int>(renum.size()));
  for (int i = 0; i < numNodes(); ++i)
    if (comp[i] >= 0 && renum.count(comp[i])) domain_[i] = renum[comp[i]];
  numDomains_ = static_cast<int>(renum.size());
  numHosts_ = components(
      *this, [](const Link& l) { return l.type != LinkType::Net; },
      [&](int x) { return nodes_[x].type != NodeType::Switch; }, &host_);
  // Host-memory ranks on a GPU machine share memory with the CPUs their host links join (not
  // NVLink: a rack's trays share no memory).
  if (gpus) {
    std::vector<int> cpuComp;
    components(
        *this, isHostLink, [](int) { return true; }, &cpuComp);
    std::unordered_map<int, int> cpuDomain;
    for (int c : hostRankNodes_)
      domain_[c] =
          cpuDomain.emplace(cpuComp[c], numDomains_ + static_cast<int>(cpuDomain.size())).first->second;
  }
}

int Topology::nearestCpu(int node) const {
  // Breadth-first over host links: a GPU's CPU is one or two hops away (C2C, or PCIe through a switch).
  std::unordered_map<int, bool> seen{{node, true}};
  std::vector<int> frontier{node};
  while (!frontier.empty()) {
    std::vector<int> next;
    for (int x : frontier) {
      if (nodes_[x].type == NodeType::Cpu) return x;
      for (auto [lid, nb] : adj_[x])
        if (isHostLink(links_[lid]) && seen.emplace(nb, true).second) next.push_back(nb);
    }
    frontier = std::move(next);
  }
  return -1;
}

void Topology::networkCapacity(double* edge, double* core) const {
  *edge = *core = 0;
  for (const auto& l : links_) {
    if (l.type != LinkType::Net) continue;
    double bw = std::min(l.bwAB, l.bwBA);
    bool swa = nodes_[l.a].type == NodeType::Switch, swb = nodes_[l.b].type == NodeType::Switch;
    (swa && swb ? *core : *edge) += bw;
  }
}

double Topology::bisectionGBps() const {
  // Tiered estimate for tree-like fabrics (fat trees, single switches): half the capacity of the
  // narrowest tier. Without a network: half the ranks' capacity into their domain/host.
  // NVLink when there is any, else every local link from a rank.
  double edge = 0, core = 0, nvl = 0, local = 0;
  networkCapacity(&edge, &core);
  for (const auto& l : links_) {
    NodeType ta = nodes_[l.a].type, tb = nodes_[l.b].type;
    bool ea = ta == NodeType::Gpu || ta == NodeType::Cpu, eb = tb == NodeType::Gpu || tb == NodeType::Cpu;
    if (l.type == LinkType::Net || ea == eb) continue;
    (l.type == LinkType::NvLink ? nvl : local) += std::min(l.bwAB, l.bwBA);
  }
  if (edge > 0) return core > 0 ? std::min(edge, core) / 2 : edge / 2;
  return (nvl > 0 ? nvl : local) / 2;
}

}  // namespace trib
