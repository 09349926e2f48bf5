// The RDMA device a process's verbs transports use, opened once and shared (docs/VERBS.md): the
// device context, protection domain and one completion queue serve every communicator of the
// process, so a split adds queue pairs, not devices. Completions are polled by whichever
// transport progresses and handed to the transport that owns the queue pair (its inbox).
#pragma once
#include <infiniband/verbs.h>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "common/status.hpp"
#include "topo/locality.hpp"

namespace trib::verbs {

// Where a rank attaches: among the active ports TRIB_IB_HCA (NCCL's syntax) selects, or all, the
// one nearest the rank's GPU or CPUs (pickPort); GID TRIB_IB_GID_INDEX or, on Ethernet (RoCE), the
// RoCE v2 GID of an IPv4 address.
struct PortChoice {
  std::string why;  // why this port, for the log
  std::string device;
  int port = 1;
  int gidIndex = 0;
  ibv_gid gid{};
  uint16_t lid = 0;
  ibv_mtu mtu = IBV_MTU_1024;
  bool ethernet = false;
};

// Completions of one queue pair, waiting for its transport.
struct Inbox {
  std::mutex mu;
  std::deque<ibv_wc> wcs;
};

class DeviceContext {
 public:
  ~DeviceContext();
  const PortChoice& port() const { return port_; }
  ibv_context* ctx() const { return ctx_; }
  ibv_pd* pd() const { return pd_; }
  ibv_cq* cq() const { return cq_; }
  int cqDepth() const { return cqDepth_; }
  // Completions of `qp` go to `inbox` until unrouted.
  void route(uint32_t qpNum, std::shared_ptr<Inbox> inbox);
  void unroute(uint32_t qpNum);
  // Polls the completion queue once, routing what it finds; an error only for the queue itself.
  Status poll();

  // The process's context for `choice` (opened on first use; shared while anyone holds it).
  static Status open(const PortChoice& choice, std::shared_ptr<DeviceContext>* out);

 private:
  DeviceContext() = default;
  PortChoice port_;
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
  int cqDepth_ = 0;
  std::mutex mu_;
  std::map<uint32_t, std::weak_ptr<Inbox>> routes_;
};

// Chooses device, port and GID from the environment (TRIB_IB_HCA, TRIB_IB_GID_INDEX), the devices
// present and their locality to `anchor` (ties spread by `localIndex`: pickPort). Errors: no
// device (tribNotSupported), an unknown name or a port not active, a GID index out of the port's
// table or empty (tribInvalidArgument), each naming what exists.
Status choosePort(PortChoice* out, const PciPlace& anchor = {}, int localIndex = 0);
// Where the calling thread's rank sits: its current CUDA device where it has a context (it set its
// device), else the CPUs it may run on.
PciPlace callerPlace();
// Whether this process could attach (choosePort succeeds, else why not), decided once.
const Status& rdmaPortStatus();
bool haveRdmaPort();

const char* mtuName(ibv_mtu m);
std::string gidText(const ibv_gid& g);  // "::ffff:10.0.0.1"

}  // namespace trib::verbs
