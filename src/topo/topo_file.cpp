// Topology files: a line-based, human-readable format (docs/TOPOLOGY.md). Every error names the line.
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "common/text.hpp"
#include "topo/topology.hpp"

namespace trib {
namespace {

std::vector<std::string> splitWords(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

struct LineParser {
  int line;
  const std::string& source;
  Status err(const char* what, const std::string& detail) const {
    return errorf(tribInvalidArgument, "%s:%d: %s%s", source.c_str(), line, what, detail.c_str());
  }
  Status number(const std::string& key, const std::string& v, double* out) const {
    char* end = nullptr;
    errno = 0;
    double d = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != 0 || errno != 0 || !std::isfinite(d))
      return err("", strprintf("%s='%s' is not a number", key.c_str(), v.c_str()));
    *out = d;
    return Status::Ok();
  }
  Status nonNegative(const std::string& key, const std::string& v, double* out) const {
    TRIB_RETURN_IF_ERROR(number(key, v, out));
    if (*out < 0) return err("", strprintf("%s=%s must not be negative", key.c_str(), v.c_str()));
    return Status::Ok();
  }
  // A count or byte size: a number the integer it is stored in holds (a wider double would be
  // undefined behaviour to convert).
  Status atMost(const std::string& key, const std::string& v, double limit, double* out) const {
    TRIB_RETURN_IF_ERROR(nonNegative(key, v, out));
    if (*out > limit)
      return err("", strprintf("%s=%s is too large (at most %.0f)", key.c_str(), v.c_str(), limit));
    return Status::Ok();
  }
  Status positive(const std::string& key, const std::string& v, double* out) const {
    TRIB_RETURN_IF_ERROR(number(key, v, out));
    if (!(*out > 0)) return err("", strprintf("%s=%s must be > 0 (GB/s)", key.c_str(), v.c_str()));
    return Status::Ok();
  }
};

Status splitKeyValue(const LineParser& lp, const std::string& word, std::string* k, std::string* v) {
  auto eq = word.find('=');
  if (eq == std::string::npos || eq == 0)
    return lp.err("", strprintf("expected key=value, got '%s'", word.c_str()));
  *k = word.substr(0, eq);
  *v = word.substr(eq + 1);
  return Status::Ok();
}

Status parseNodeLine(const LineParser& lp, const std::vector<std::string>& w, Topology* t) {
  if (w.size() < 3) return lp.err("", "expected 'node NAME TYPE [key=value ...]'");
  if (t->find(w[1]) >= 0) return lp.err("", strprintf("node '%s' is defined twice", w[1].c_str()));
  NodeType type;
  if (!parseNodeType(w[2], &type))
    return lp.err(
        "", strprintf("unknown node type '%s' (gpu, cpu, numa, nic, host, nvswitch, pcieswitch, switch)",
                      w[2].c_str()));
  int id = t->addNode(w[1], type);
  Node& n = t->node(id);
  n.sourceLine = lp.line;
  bool sw = isSwitchType(type);
  for (size_t i = 3; i < w.size(); ++i) {
    std::string k, v;
    TRIB_RETURN_IF_ERROR(splitKeyValue(lp, w[i], &k, &v));
    double d = 0;
    if (k == "reduce_gbps") {
      TRIB_RETURN_IF_ERROR(lp.nonNegative(k, v, &d));
      (sw ? n.reduce.reduceGBps : n.reduceGBps) = d;
    } else if (k == "cores" && (type == NodeType::Cpu || type == NodeType::Numa)) {
      TRIB_RETURN_IF_ERROR(lp.atMost(k, v, INT32_MAX, &d));
      n.cores = static_cast<int>(d);
    } else if (k == "arch" && type == NodeType::Gpu) {
      if (!parseGpuArch(v, &n.arch) || n.arch == GpuArch::Unknown)
        return lp.err("", strprintf("unknown GPU arch '%s' (volta, ampere, hopper, blackwell)", v.c_str()));
    } else if (k == "vendor" && (type == NodeType::Cpu || type == NodeType::Numa)) {
      if (!parseCpuVendor(v, &n.vendor) || n.vendor == CpuVendor::Unknown)
        return lp.err("", strprintf("unknown CPU vendor '%s' (intel, amd, arm)", v.c_str()));
    } else if (sw && k == "reduce_dtypes") {
      for (const auto& name : splitOn(v, ',')) {
        DataType dt;
        if (!parseDataType(name.c_str(), &dt))
          return lp.err("", strprintf("unknown datatype '%s' in reduce_dtypes", name.c_str()));
        n.reduce.dtypeMask |= 1u << static_cast<int>(dt);
      }
    } else if (sw && k == "reduce_ops") {
      for (const auto& name : splitOn(v, ',')) {
        RedOp op;
        if (!parseRedOp(name.c_str(), &op))
          return lp.err("", strprintf("unknown reduction op '%s' in reduce_ops", name.c_str()));
        n.reduce.opMask |= 1u << static_cast<int>(op);
      }
    } else if (sw && k == "reduce_max_ops") {
      TRIB_RETURN_IF_ERROR(lp.atMost(k, v, INT32_MAX, &d));
      n.reduce.maxConcurrentOps = static_cast<int>(d);
    } else if (sw && k == "reduce_buffer") {
      TRIB_RETURN_IF_ERROR(lp.atMost(k, v, 1.8e19, &d));
      n.reduce.bufferBytes = static_cast<uint64_t>(d);
    } else if (type == NodeType::Switch && k == "addr") {
      // Where an aggregation switch (trib-switchd) listens: ranks below it attach there.
      const size_t colon = v.rfind(':');
      if (colon == std::string::npos || colon == 0 || colon + 1 == v.size() ||
          v.find_first_not_of("0123456789", colon + 1) != std::string::npos)
        return lp.err("", strprintf("addr '%s' is not host:port (e.g. addr=10.0.0.5:7000)", v.c_str()));
      n.addr = v;
    } else {
      return lp.err("", strprintf("unknown field '%s' for a %s node (known: reduce_gbps%s)", k.c_str(),
                                  nodeTypeName(type),
                                  type == NodeType::Switch
                                      ? ", reduce_dtypes, reduce_ops, reduce_max_ops, reduce_buffer, addr"
                                  : sw ? ", reduce_dtypes, reduce_ops, reduce_max_ops, reduce_buffer"
                                  : (type == NodeType::Cpu || type == NodeType::Numa) ? ", cores, vendor"
                                  : type == NodeType::Gpu                             ? ", arch"
                                                                                      : ""));
    }
  }
  if (sw && n.reduce.can() && (n.reduce.dtypeMask == 0 || n.reduce.opMask == 0))
    return lp.err("", strprintf("switch '%s' has reduce_gbps but no reduce_dtypes/reduce_ops", w[1].c_str()));
  return Status::Ok();
}

Status parseLinkLine(const LineParser& lp, const std::vector<std::string>& w, Topology* t) {
  if (w.size() < 4) return lp.err("", "expected 'link A B TYPE bw=GBPS [bw_back=GBPS] [lat=US]'");
  int a = t->find(w[1]), b = t->find(w[2]);
  if (a < 0) return lp.err("", strprintf("link names node '%s', which is not defined above", w[1].c_str()));
  if (b < 0) return lp.err("", strprintf("link names node '%s', which is not defined above", w[2].c_str()));
  if (a == b) return lp.err("", strprintf("link connects '%s' to itself", w[1].c_str()));
  LinkType type;
  if (!parseLinkType(w[3], &type))
    return lp.err("", strprintf("unknown link type '%s' (nvlink, pcie, c2c, net, shm, loop)", w[3].c_str()));
  double bw = -1, back = -1, lat = 0;
  for (size_t i = 4; i < w.size(); ++i) {
    std::string k, v;
    TRIB_RETURN_IF_ERROR(splitKeyValue(lp, w[i], &k, &v));
    if (k == "bw") {
      TRIB_RETURN_IF_ERROR(lp.positive(k, v, &bw));
    } else if (k == "bw_back") {
      TRIB_RETURN_IF_ERROR(lp.positive(k, v, &back));
    } else if (k == "lat") {
      TRIB_RETURN_IF_ERROR(lp.nonNegative(k, v, &lat));
    } else {
      return lp.err("", strprintf("unknown field '%s' for a link (known: bw, bw_back, lat)", k.c_str()));
    }
  }
  if (bw < 0) return lp.err("", "link needs bw=GBPS (bandwidth per direction)");
  int id = t->addLink(a, b, type, bw, lat, back);
  t->link(id).sourceLine = lp.line;
  return Status::Ok();
}

}  // namespace

Status parseTopology(const std::string& text, Topology* out, const std::string& sourceName) {
  Topology t;
  std::map<std::string, AggTree> trees;  // ordered: deterministic tree order
  std::vector<std::string> treeOrder;
  std::istringstream in(text);
  std::string raw;
  int lineNo = 0;
  while (std::getline(in, raw)) {
    ++lineNo;
    auto hash = raw.find('#');
    auto w = splitWords(hash == std::string::npos ? raw : raw.substr(0, hash));
    if (w.empty()) continue;
    LineParser lp{lineNo, sourceName};
    // Names are written back by dumpTopology and printed in messages: no NUL or control bytes.
    for (const auto& word : w)
      for (unsigned char c : word)
        if (c < 0x20 || c == 0x7f)
          return lp.err("", strprintf("control character 0x%02x in '%s'", c, word.c_str()));
    if (w[0] == "topology") {
      if (w.size() != 2) return lp.err("", "expected 'topology NAME'");
      t.name = w[1];
    } else if (w[0] == "pxn") {
      if (w.size() != 2 || (w[1] != "on" && w[1] != "off"))
        return lp.err("", "expected 'pxn on' or 'pxn off' (whether GPUs relay to their rails' NICs)");
      t.pxn = w[1] == "on";
    } else if (w[0] == "node") {
      TRIB_RETURN_IF_ERROR(parseNodeLine(lp, w, &t));
    } else if (w[0] == "link") {
      TRIB_RETURN_IF_ERROR(parseLinkLine(lp, w, &t));
    } else if (w[0] == "aggtree" && w.size() == 3) {  // a tree of one switch: its root
      int r = t.find(w[2]);
      if (r < 0)
        return lp.err("", strprintf("aggtree names node '%s', which is not defined above", w[2].c_str()));
      if (!trees.count(w[1])) treeOrder.push_back(w[1]);
      trees[w[1]].name = w[1];
      trees[w[1]].root = r;
    } else if (w[0] == "aggtree") {
      if (w.size() != 4) return lp.err("", "expected 'aggtree TREE CHILD PARENT' or 'aggtree TREE ROOT'");
      int c = t.find(w[2]), p = t.find(w[3]);
      if (c < 0 || p < 0)
        return lp.err("", strprintf("aggtree names node '%s', which is not defined above",
                                    (c < 0 ? w[2] : w[3]).c_str()));
      if (!trees.count(w[1])) treeOrder.push_back(w[1]);
      AggTree& tr = trees[w[1]];
      tr.name = w[1];
      tr.edges.push_back({c, p});
      tr.edgeLines.push_back(lineNo);
    } else {
      return lp.err("",
                    strprintf("unknown statement '%s' (topology, pxn, node, link, aggtree)", w[0].c_str()));
    }
  }
  for (const auto& name : treeOrder)
    TRIB_RETURN_IF_ERROR(t.addAggTree(trees[name]).prefix(sourceName + ": "));
  t.finalize();
  TRIB_RETURN_IF_ERROR(t.validate().prefix(sourceName + ": "));
  *out = std::move(t);
  return Status::Ok();
}

Status loadTopologyFile(const std::string& path, Topology* out) {
  std::ifstream f(path);
  if (!f)
    return errorf(tribInvalidArgument, "cannot open topology file '%s' (TRIB_TOPO_FILE); check the path",
                  path.c_str());
  std::stringstream ss;
  ss << f.rdbuf();
  return parseTopology(ss.str(), out, path);
}

static std::string num(double d) { return strprintf("%.10g", d); }

static std::string maskNames(uint32_t mask, int n, const char* (*name)(int)) {
  std::string s;
  for (int i = 0; i < n; ++i)
    if (mask >> i & 1) s += (s.empty() ? "" : ",") + std::string(name(i));
  return s;
}

std::string dumpTopology(const Topology& t) {
  std::string s = "# Tributary topology (docs/TOPOLOGY.md)\n";
  s += strprintf("topology %s\n", t.name.c_str());
  if (!t.pxn) s += "pxn off\n";
  for (int i = 0; i < t.numNodes(); ++i) {
    const Node& n = t.node(i);
    s += strprintf("node %s %s", n.name.c_str(), nodeTypeName(n.type));
    if (isSwitchType(n.type) && n.reduce.can()) {
      s += " reduce_gbps=" + num(n.reduce.reduceGBps);
      s += " reduce_dtypes=" + maskNames(n.reduce.dtypeMask, tribNumTypes,
                                         [](int i) { return dataTypeName(static_cast<DataType>(i)); });
      s += " reduce_ops=" +
           maskNames(n.reduce.opMask, tribNumOps, [](int i) { return redOpName(static_cast<RedOp>(i)); });
      if (n.reduce.maxConcurrentOps) s += strprintf(" reduce_max_ops=%d", n.reduce.maxConcurrentOps);
      if (n.reduce.bufferBytes)
        s += strprintf(" reduce_buffer=%llu", (unsigned long long)n.reduce.bufferBytes);
    } else if (!isSwitchType(n.type) && n.reduceGBps > 0) {
      s += " reduce_gbps=" + num(n.reduceGBps);
    }
    if (n.cores > 0) s += strprintf(" cores=%d", n.cores);
    if (n.arch != GpuArch::Unknown) s += std::string(" arch=") + gpuArchName(n.arch);
    if (n.vendor != CpuVendor::Unknown) s += std::string(" vendor=") + cpuVendorName(n.vendor);
    if (!n.addr.empty()) s += " addr=" + n.addr;
    s += "\n";
  }
  for (int i = 0; i < t.numLinks(); ++i) {
    const Link& l = t.link(i);
    s += strprintf("link %s %s %s bw=%s", t.node(l.a).name.c_str(), t.node(l.b).name.c_str(),
                   linkTypeName(l.type), num(l.bwAB).c_str());
    if (l.bwBA != l.bwAB) s += " bw_back=" + num(l.bwBA);
    s += " lat=" + num(l.latencyUs) + "\n";
  }
  for (const auto& tr : t.aggTrees()) {
    if (tr.edges.empty()) s += strprintf("aggtree %s %s\n", tr.name.c_str(), t.node(tr.root).name.c_str());
    for (auto [c, p] : tr.edges)
      s += strprintf("aggtree %s %s %s\n", tr.name.c_str(), t.node(c).name.c_str(), t.node(p).name.c_str());
  }
  return s;
}

Status dumpTopologyFile(const Topology& t, const std::string& path) {
  std::ofstream f(path);
  if (!f)
    return errorf(tribSystemError, "cannot write topology file '%s' (TRIB_TOPO_DUMP_FILE)", path.c_str());
  f << dumpTopology(t);
  if (!f) return errorf(tribSystemError, "writing topology file '%s' failed (disk full?)", path.c_str());
  return Status::Ok();
}

Status mergeHostTopologies(const std::vector<std::string>& hostDumps, double netGBps, double netLatUs,
                           Topology* out) {
  if (hostDumps.empty()) return errorf(tribInvalidArgument, "mergeHostTopologies: no host views");
  if (!(netGBps > 0))
    return errorf(tribInvalidArgument, "mergeHostTopologies: network bandwidth must be > 0");
  if (hostDumps.size() == 1) return parseTopology(hostDumps[0], out, "host 0");
  Topology t;
  t.name = strprintf("%zu-hosts", hostDumps.size());
  int fabric = t.addNode("fabric", NodeType::Switch);
  for (size_t h = 0; h < hostDumps.size(); ++h) {
    Topology v;
    TRIB_RETURN_IF_ERROR(parseTopology(hostDumps[h], &v, strprintf("host %zu", h)));
    std::string pre = strprintf("h%zu.", h);
    int base = t.numNodes();
    for (int i = 0; i < v.numNodes(); ++i) {
      int id = t.addNode(pre + v.node(i).name, v.node(i).type);
      Node& n = t.node(id);
      n.reduceGBps = v.node(i).reduceGBps;
      n.reduce = v.node(i).reduce;
      n.cores = v.node(i).cores;
      n.addr = v.node(i).addr;
      n.arch = v.node(i).arch;
      n.vendor = v.node(i).vendor;
    }
    for (int i = 0; i < v.numLinks(); ++i) {
      const Link& l = v.link(i);
      t.addLink(base + l.a, base + l.b, l.type, l.bwAB, l.latencyUs, l.bwBA);
    }
    for (const auto& tr : v.aggTrees()) {
      AggTree copy = tr;
      copy.name = pre + tr.name;
      copy.root = base + tr.root;
      for (auto& e : copy.edges) e = {base + e.first, base + e.second};
      copy.edgeLines.clear();
      TRIB_RETURN_IF_ERROR(t.addAggTree(copy));
    }
    int joined = 0;
    for (int i = 0; i < v.numNodes(); ++i)
      if (v.node(i).type == NodeType::Nic)
        t.addLink(base + i, fabric, LinkType::Net, netGBps, netLatUs), ++joined;
    for (int i = 0; i < v.numNodes() && !joined; ++i)
      if (v.node(i).type == NodeType::Cpu)
        t.addLink(base + i, fabric, LinkType::Net, netGBps, netLatUs), ++joined;
    if (!joined)
      return errorf(tribInvalidArgument, "host %zu has neither a NIC nor a CPU to join the network through",
                    h);
  }
  t.finalize();
  TRIB_RETURN_IF_ERROR(t.validate());
  *out = std::move(t);
  return Status::Ok();
}

}  // namespace trib
