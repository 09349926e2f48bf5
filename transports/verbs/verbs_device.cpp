#include "transports/verbs/verbs_device.hpp"

#include <arpa/inet.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "common/env.hpp"
#include "cuda/cuda_api.hpp"
#include "cuda/cuda_vmm.hpp"
#include "transports/verbs/verbs_wire.hpp"

namespace trib::verbs {

const char* mtuName(ibv_mtu m) {
  switch (m) {
    case IBV_MTU_256:
      return "256";
    case IBV_MTU_512:
      return "512";
    case IBV_MTU_1024:
      return "1024";
    case IBV_MTU_2048:
      return "2048";
    case IBV_MTU_4096:
      return "4096";
  }
  return "?";
}

std::string gidText(const ibv_gid& g) {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, g.raw, buf, sizeof buf);
  return buf;
}

namespace {

bool zeroGid(const ibv_gid& g) {
  for (uint8_t b : g.raw)
    if (b) return false;
  return true;
}

// Picks the GID of an opened port: forced, else RoCE v2 on an IPv4 address, else RoCE v2, else
// the first non-empty one (InfiniBand: index 0).
Status chooseGid(ibv_context* ctx, const ibv_port_attr& pa, PortChoice* c) {
  const int64_t forced = envInt("TRIB_IB_GID_INDEX");
  if (forced >= 0) {
    if (forced >= pa.gid_tbl_len)
      return errorf(
          tribInvalidArgument, "TRIB_IB_GID_INDEX=%lld is out of range: %s port %d has %d GIDs, 0..%d",
          static_cast<long long>(forced), c->device.c_str(), c->port, pa.gid_tbl_len, pa.gid_tbl_len - 1);
    ibv_gid g{};
    if (ibv_query_gid(ctx, c->port, static_cast<int>(forced), &g) != 0 || zeroGid(g))
      return errorf(tribInvalidArgument, "TRIB_IB_GID_INDEX=%lld: %s port %d has no GID at that index",
                    static_cast<long long>(forced), c->device.c_str(), c->port);
    c->gidIndex = static_cast<int>(forced);
    c->gid = g;
    return Status::Ok();
  }
  int best = -1, bestScore = -1;
  ibv_gid bestGid{};
  for (int i = 0; i < pa.gid_tbl_len; ++i) {
    ibv_gid_entry e{};
    if (ibv_query_gid_ex(ctx, c->port, i, &e, 0) != 0) continue;  // empty entries fail (ENODATA)
    if (zeroGid(e.gid)) continue;
    const bool v4 = std::memcmp(e.gid.raw, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12) == 0;
    int score = 0;
    if (!c->ethernet)
      score = i == 0 ? 3 : 0;
    else if (e.gid_type == IBV_GID_TYPE_ROCE_V2)
      score = v4 ? 3 : 2;
    else
      score = 1;
    if (score > bestScore) best = i, bestScore = score, bestGid = e.gid;
  }
  if (best < 0)
    return errorf(tribNotSupported,
                  "verbs: %s port %d has no usable GID: does its network device have an address?",
                  c->device.c_str(), c->port);
  c->gidIndex = best;
  c->gid = bestGid;
  return Status::Ok();
}

}  // namespace

Status choosePort(PortChoice* out, const PciPlace& anchor, int localIndex) {
  HcaSpec spec;
  const std::string hca = envString("TRIB_IB_HCA");
  TRIB_RETURN_IF_ERROR(parseHcaSpec(hca, &spec));
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n == 0) {
    if (list) ibv_free_device_list(list);
    return errorf(tribNotSupported, "verbs: no RDMA device: libibverbs lists none");
  }
  // Every active port, each device kept open until the chosen one's GID is read.
  std::string seen;
  std::vector<ibv_context*> opened;
  std::vector<PortCandidate> candidates;
  std::vector<std::pair<ibv_context*, ibv_port_attr>> attrs;
  for (int d = 0; d < n; ++d) {
    const std::string name = ibv_get_device_name(list[d]);
    ibv_context* ctx = ibv_open_device(list[d]);
    if (!ctx) continue;
    opened.push_back(ctx);
    ibv_device_attr da{};
    if (ibv_query_device(ctx, &da) != 0) continue;
    for (int p = 1; p <= da.phys_port_cnt; ++p) {
      ibv_port_attr pa{};
      if (ibv_query_port(ctx, p, &pa) != 0) continue;
      const bool active = pa.state == IBV_PORT_ACTIVE;
      seen += strprintf("%s%s:%d %s", seen.empty() ? "" : ", ", name.c_str(), p, active ? "active" : "down");
      if (!active) continue;
      candidates.push_back({name, p, sysfsRdmaPlace("/sys", name)});
      attrs.push_back({ctx, pa});
    }
  }
  const PortPick pick = pickPort(spec, candidates, anchor, localIndex);
  Status result;
  if (pick.index < 0) {
    result =
        hca.empty()
            ? errorf(tribNotSupported, "verbs: no RDMA port is active; the ports are: %s", seen.c_str())
            : errorf(tribInvalidArgument, "verbs: TRIB_IB_HCA='%s' selects no active port; the ports are: %s",
                     hca.c_str(), seen.c_str());
  } else {
    const auto& [ctx, pa] = attrs[pick.index];
    PortChoice c;
    c.why = pick.why;
    c.device = candidates[pick.index].device;
    c.port = candidates[pick.index].port;
    c.lid = pa.lid;
    c.mtu = pa.active_mtu;
    c.ethernet = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
    result = chooseGid(ctx, pa, &c);
    if (result.ok()) *out = c;
  }
  for (ibv_context* ctx : opened) ibv_close_device(ctx);
  ibv_free_device_list(list);
  return result;
}

PciPlace callerPlace() {
  int device = -1;
  cuda::DeviceInfo info;
  if (cuda::hasCurrentContext() && cuda::currentDevice(&device).ok() && cuda::deviceInfo(device, &info).ok())
    return sysfsPciPlace("/sys", info.pciBusId, strprintf("GPU %s", info.pciBusId));
  return sysfsCpuPlace("/sys", boundCpus());
}

const Status& rdmaPortStatus() {
  static const Status status = [] {
    PortChoice c;
    return choosePort(&c);
  }();
  return status;
}

bool haveRdmaPort() { return rdmaPortStatus().ok(); }

DeviceContext::~DeviceContext() {
  if (cq_) ibv_destroy_cq(cq_);
  if (pd_) ibv_dealloc_pd(pd_);
  if (ctx_) ibv_close_device(ctx_);
}

void DeviceContext::route(uint32_t qpNum, std::shared_ptr<Inbox> inbox) {
  std::lock_guard<std::mutex> lock(mu_);
  routes_[qpNum] = inbox;
}

void DeviceContext::unroute(uint32_t qpNum) {
  std::lock_guard<std::mutex> lock(mu_);
  routes_.erase(qpNum);
}

Status DeviceContext::poll() {
  ibv_wc wc[32];
  std::lock_guard<std::mutex> lock(mu_);
  for (int round = 0; round < 4; ++round) {
    const int got = ibv_poll_cq(cq_, 32, wc);
    if (got < 0)
      return errorf(tribSystemError, "verbs: polling the completion queue of %s failed",
                    port_.device.c_str());
    for (int i = 0; i < got; ++i) {
      auto it = routes_.find(wc[i].qp_num);
      if (it == routes_.end()) continue;  // a queue pair closed meanwhile
      if (std::shared_ptr<Inbox> in = it->second.lock()) {
        std::lock_guard<std::mutex> l(in->mu);
        in->wcs.push_back(wc[i]);
      }
    }
    if (got < 32) break;
  }
  return Status::Ok();
}

Status DeviceContext::open(const PortChoice& choice, std::shared_ptr<DeviceContext>* out) {
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<DeviceContext>> open;
  const std::string key = strprintf("%s:%d:%d", choice.device.c_str(), choice.port, choice.gidIndex);
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = open.find(key); it != open.end()) {
    if (std::shared_ptr<DeviceContext> d = it->second.lock()) {
      *out = d;
      return Status::Ok();
    }
  }
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  std::shared_ptr<DeviceContext> d(new DeviceContext);
  d->port_ = choice;
  for (int i = 0; list && i < n; ++i) {
    if (choice.device == ibv_get_device_name(list[i])) d->ctx_ = ibv_open_device(list[i]);
  }
  if (list) ibv_free_device_list(list);
  if (!d->ctx_)
    return errorf(tribSystemError, "verbs: cannot open %s: %s", choice.device.c_str(), std::strerror(errno));
  d->pd_ = ibv_alloc_pd(d->ctx_);
  if (!d->pd_) return errorf(tribSystemError, "verbs: ibv_alloc_pd on %s failed", choice.device.c_str());
  ibv_device_attr da{};
  ibv_query_device(d->ctx_, &da);
  d->cqDepth_ = std::min(da.max_cqe > 0 ? da.max_cqe : 4096, 65536);
  d->cq_ = ibv_create_cq(d->ctx_, d->cqDepth_, nullptr, nullptr, 0);
  if (!d->cq_)
    return errorf(tribSystemError, "verbs: ibv_create_cq(%d) on %s failed", d->cqDepth_,
                  choice.device.c_str());
  open[key] = d;
  *out = d;
  return Status::Ok();
}

}  // namespace trib::verbs
