#include "transports/ucx/ucx_transport.hpp"

#include <ucp/api/ucp.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <vector>

#include "common/log.hpp"
#include "common/process.hpp"
#include "common/random.hpp"
#include "reduce/reduce.hpp"
#include "transports/registry.hpp"
#include "transports/ucx/ucx_address.hpp"
#include "transports/ucx/ucx_rxe.hpp"

namespace trib {
namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point deadlineAfter(double sec) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(sec));
}

// UCX statuses that mean "this build/host cannot do what was asked", not "something broke".
bool isUnsupported(ucs_status_t s) {
  return s == UCS_ERR_NO_DEVICE || s == UCS_ERR_UNREACHABLE || s == UCS_ERR_UNSUPPORTED ||
         s == UCS_ERR_NO_ELEM;
}

// ---- UCP contexts and workers shared by this process's communicators -----------------------
// ucp_init (reading the configuration, opening every device and transport) is the costly part
// of connecting, and a worker (its interfaces: listening sockets, shared-memory FIFOs) the next;
// a split, or a second communicator, asks for the same configuration and gets the same context
// and, while the worker has a free communicator slot, the same worker. Keyed by everything
// ucp_init reads (the options' transports and keepalive, and every UCX_* variable) and by the
// pid, so a forked child never reuses its parent's. The last transport that holds one cleans it up.
struct SharedContext {
  ucp_context_h ctx = nullptr;
  ~SharedContext() {
    if (ctx) ucp_cleanup(ctx);
  }
};
struct Pending;
struct Peer;
// A worker and the communicators on it. Each has a slot, which its peers put in the tag's
// communicator field of every message they send it (ucx_transport.hpp): a receive matches only
// its own communicator's messages. One mutex serialises every UCP call on the worker and the
// state of every transport on it, since progress run by one communicator completes the others'
// requests (their callbacks run inside it).
struct SharedWorker {
  std::shared_ptr<SharedContext> context;
  ucp_worker_h worker = nullptr;
  std::mutex mu;
  std::vector<bool> slotTaken;  // 2^commBits slots
  uint32_t nextSlot = 0;        // slots are handed out round robin: a freed one is reused last
  uint32_t slotsInUse = 0;
  // What closed transports left with UCX: requests it had not finished and the peers their
  // endpoints' error callbacks point at. Their callbacks find no transport and just release them.
  std::unordered_set<Pending*> orphans;
  std::vector<std::unique_ptr<std::vector<Peer>>> retiredPeers;
  ~SharedWorker();
};
struct ContextCache {
  std::mutex mu;
  std::map<std::string, std::weak_ptr<SharedContext>> byKey;
  std::map<std::string, std::vector<std::weak_ptr<SharedWorker>>> workersByKey;
  uint64_t created = 0;
  uint64_t workersCreated = 0;
};
ContextCache& contexts() {
  static ContextCache* c = new ContextCache;  // never destroyed: transports may outlive statics
  return *c;
}

std::string contextKey(const std::string& tls, double keepaliveSec) {
  std::string key = strprintf("pid=%d;tls=%s;keepalive=%.6f", static_cast<int>(getpid()), tls.c_str(),
                              keepaliveSec > 0 ? keepaliveSec : 0.0);
  std::vector<std::string> vars;
  for (char** e = environ; e && *e; ++e) {
    if (std::strncmp(*e, "UCX_", 4) == 0) vars.emplace_back(*e);
  }
  std::sort(vars.begin(), vars.end());
  for (const std::string& v : vars) key += ";" + v;
  return key;
}

using ucx::AddressHeader;  // the blob each rank publishes (ucx_address.hpp)

// The tag bits a secret covers: all but the comm field, which stays clear so communicators sharing
// a worker never match each other's messages, whatever their secrets.
uint64_t secretMask(const UcxOptions& o) { return ~0ull >> o.commBits; }

class UcxTransport;

// One posted send or receive. Lives from the post until UCX completes (or cancels) it; `op`
// is cleared once the caller has been told (abort), after which the caller may free it.
struct Pending {
  UcxTransport* self = nullptr;  // nullptr: its transport closed first (an orphan of `worker`)
  SharedWorker* worker = nullptr;
  TransferOp* op = nullptr;
  void* req = nullptr;
  int peer = -1;
  bool isRecv = false;
  uint64_t tag = 0;  // the executor's tag, for messages
  size_t bytes = 0;
  void* buf = nullptr;
  bool reduce = false;
  ReduceSpec spec;
  std::unique_ptr<uint8_t[]> bounce;
  size_t bounceCap = 0;
  Status override;  // reported instead of UCX's status (peer lost, transport closed)
  // UCX may run the callback inside ucp_tag_*_nbx (with NO_IMM_CMPL) before the request
  // pointer is known; the completion is then recorded here and finished after the call returns.
  bool posting = false;
  bool doneInPost = false;
  ucs_status_t postStatus = UCS_OK;
  size_t postLength = 0;
};

struct Peer {
  UcxTransport* self = nullptr;  // nullptr: retired (its transport closed)
  int rank = -1;
  ucp_ep_h ep = nullptr;
  bool failed = false;
  bool handled = false;   // its pending receives were cancelled and its endpoint closed
  bool sameHost = false;  // watched through /proc
  ProcessIdentity proc;
  Status lost;
};

class UcxTransport final : public Transport {
 public:
  UcxTransport(int rank, int nranks, const UcxOptions& o) : rank_(rank), nranks_(nranks), opts_(o) {}
  ~UcxTransport() override { shutdown(); }

  Status init(const OobAllGather& oob);

  const char* name() const override { return "ucx"; }
  Status postSend(int peer, uint64_t tag, const void* buf, size_t bytes, TransferOp* op) override;
  Status postRecv(int peer, uint64_t tag, void* buf, size_t bytes, const ReduceSpec* reduce,
                  TransferOp* op) override;
  Status progress() override;
  void abort(const Status& why) override;

  // UCX callbacks (run inside ucp_worker_progress / cancel / close, with the worker's mutex held).
  void finish(Pending* p, ucs_status_t st, size_t length);
  void onPeerError(Peer* peer, ucs_status_t st);
  void markLost(Peer* peer, const std::string& why);

 private:
  Status checkPost(int peer, uint64_t tag, const void* buf, size_t bytes, TransferOp* op, bool isSend,
                   uint64_t* ucpTag) const;
  Status failNow(TransferOp* op, Status s) {
    op->fail(s);
    return s;
  }
  void handleFailedPeers();
  void drainWorker();
  bool closeEndpoints(bool force, double timeoutSec);
  void discardUnexpected();
  void leaveWorker();
  void drainPending(double timeoutSec);
  void shutdown();
  void takeBounce(Pending* p);
  void giveBounce(Pending* p);

  const int rank_, nranks_;
  const UcxOptions opts_;
  std::shared_ptr<SharedWorker> shared_;  // the worker this transport is on (and its context)
  ucp_worker_h worker_ = nullptr;         // shared_->worker
  uint32_t slot_ = 0;                     // this communicator's slot on it
  bool holdsSlot_ = false;
  std::vector<uint32_t> peerSlot_;  // each rank's slot on its own worker: the tags sent to it
  // Tag secrets (ucx_transport.hpp): this transport's, XOR-ed into every receive and probe, and
  // each rank's, XOR-ed into every tag sent to it. The comm field is left clear.
  uint64_t tagSecret_ = 0;
  std::vector<uint64_t> peerSecret_;
  std::vector<Peer> peers_;  // sized once in init(); error callbacks hold pointers into it
  // Serialises every UCX call and this transport's state (abort() may come from another thread):
  // the mutex of the worker, shared with the other communicators on it.
  std::mutex& mu() { return shared_->mu; }
  std::unordered_set<Pending*> pending_;
  bool aborted_ = false;
  Status abortStatus_;
  bool anyPeerFailed_ = false;
  bool watchLocal_ = false;
  Clock::time_point nextLivenessCheck_{};
  std::vector<std::pair<size_t, std::unique_ptr<uint8_t[]>>> bouncePool_;
};

// A request whose transport closed before UCX finished it: nobody waits for it any more.
void releaseOrphan(Pending* p) {
  if (p->req) ucp_request_free(p->req);
  p->worker->orphans.erase(p);
  delete p;
}

void sendCallback(void* /*request*/, ucs_status_t st, void* user) {
  auto* p = static_cast<Pending*>(user);
  if (!p->self) return releaseOrphan(p);
  p->self->finish(p, st, p->bytes);
}

void recvCallback(void* /*request*/, ucs_status_t st, const ucp_tag_recv_info_t* info, void* user) {
  auto* p = static_cast<Pending*>(user);
  if (!p->self) return releaseOrphan(p);
  p->self->finish(p, st, info ? info->length : 0);
}

void errorCallback(void* arg, ucp_ep_h /*ep*/, ucs_status_t st) {
  auto* peer = static_cast<Peer*>(arg);
  if (peer->self) peer->self->onPeerError(peer, st);
}

SharedWorker::~SharedWorker() {
  // Destroying the worker releases what it still held; the orphans' callbacks may run in it.
  if (worker) ucp_worker_destroy(worker);
  for (Pending* p : orphans) delete p;
}

Status UcxTransport::init(const OobAllGather& oob) {
  // Local set-up errors are remembered, not returned at once: every rank must still take part
  // in the exchange (with an empty blob) so the others fail fast instead of waiting on us.
  Status local;
  // UCX's shared-memory transports report a dead peer only with their error handling on;
  // without it UCX leaves them out of endpoints that ask for peer-failure handling. These are
  // transport-level settings that ucp_config_modify cannot reach in UCX 1.13, hence the
  // environment; a value the user set wins.
  // Only when shared memory may be used, or UCX warns about unused variables.
  const char* envTls = std::getenv("UCX_TLS");
  std::string tls = !opts_.tls.empty() ? opts_.tls : envTls ? envTls : "all";
  ucs_status_t st = UCS_OK;
  {
    ContextCache& cache = contexts();
    // setenv under the cache's lock: another rank's thread may be reading the environment for its
    // context key (contextKey walks environ).
    std::lock_guard<std::mutex> lock(cache.mu);
    if (tls[0] == '^' || tls.find("all") != std::string::npos || tls.find("sm") != std::string::npos ||
        tls.find("posix") != std::string::npos || tls.find("sysv") != std::string::npos) {
      setenv("UCX_POSIX_ERROR_HANDLING", "y", 0);
      setenv("UCX_SYSV_ERROR_HANDLING", "y", 0);
    }
    const std::string key = contextKey(opts_.tls, opts_.keepaliveSec);
    std::shared_ptr<SharedContext> context = cache.byKey[key].lock();
    if (!context) {
      ucp_context_h ctx = nullptr;
      ucp_config_t* cfg = nullptr;
      st = ucp_config_read(nullptr, nullptr, &cfg);
      if (st != UCS_OK)
        local = errorf(tribSystemError, "UCX: reading the configuration failed: %s", ucs_status_string(st));
      if (local.ok() && !opts_.tls.empty()) {
        st = ucp_config_modify(cfg, "TLS", opts_.tls.c_str());
        if (st != UCS_OK)
          local = errorf(tribInvalidArgument, "UCX: transport list '%s' was refused: %s", opts_.tls.c_str(),
                         ucs_status_string(st));
      }
      if (local.ok() && opts_.keepaliveSec > 0) {
        std::string v = strprintf("%.6fs", opts_.keepaliveSec);
        (void)ucp_config_modify(cfg, "KEEPALIVE_INTERVAL", v.c_str());
      }
      if (local.ok()) {
        // On soft-RoCE only, and only when the user left it alone: UCX's UD destination-GID check
        // drops every packet there (ucx_rxe.hpp, docs/VERBS.md).
        const ucx::DgidCheckDecision dgid = ucx::decideDgidCheckHere(tls);
        if (dgid.turnOff) {
          st = ucp_config_modify(cfg, ucx::kDgidCheckConfig, "n");
          if (st == UCS_OK)
            TRIB_INFO("transport", "UCX: UD destination-GID check off (%s=n): %s", ucx::kDgidCheckConfig,
                      dgid.reason.c_str());
          else
            TRIB_WARN("transport", "UCX: could not turn the UD destination-GID check off (%s): %s; set %s=n",
                      ucs_status_string(st), dgid.reason.c_str(), ucx::kDgidCheckEnv);
          st = UCS_OK;
        } else {
          TRIB_TRACE("transport", "UCX: UD destination-GID check left as it is: %s", dgid.reason.c_str());
        }
      }
      if (local.ok()) {
        ucp_params_t params{};
        // Communicators on different threads share the context, on workers of their own or shared.
        params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
        params.features = UCP_FEATURE_TAG;
        params.mt_workers_shared = 1;
        st = ucp_init(&params, cfg, &ctx);
        if (st != UCS_OK) {
          local = errorf(isUnsupported(st) ? tribNotSupported : tribSystemError,
                         "UCX: ucp_init failed (%s) with transports '%s'; check UCX_TLS and `ucx_info -d`",
                         ucs_status_string(st), opts_.tls.empty() ? "default" : opts_.tls.c_str());
          ctx = nullptr;
        }
      }
      if (cfg) ucp_config_release(cfg);
      if (local.ok()) {
        context = std::make_shared<SharedContext>();
        context->ctx = ctx;
        cache.byKey[key] = context;
        ++cache.created;
      }
    }
    // A shared worker with a free slot, or a new one (shared from now on unless told otherwise).
    const uint32_t slots = 1u << opts_.commBits;
    std::vector<std::weak_ptr<SharedWorker>>& workers = cache.workersByKey[key];
    if (local.ok() && opts_.shareWorker) {
      for (const std::weak_ptr<SharedWorker>& w : workers) {
        std::shared_ptr<SharedWorker> sw = w.lock();
        if (!sw || sw->slotTaken.size() != slots) continue;
        std::lock_guard<std::mutex> wl(sw->mu);
        if (sw->slotsInUse < slots) {
          shared_ = std::move(sw);
          break;
        }
      }
    }
    if (local.ok() && !shared_) {
      auto sw = std::make_shared<SharedWorker>();
      sw->context = context;
      sw->slotTaken.assign(slots, false);
      ucp_worker_params_t wp{};
      wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
      // Serialised, not single: communicators on other threads, and abort(), call it too (always
      // under the worker's mutex).
      wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
      st = ucp_worker_create(context->ctx, &wp, &sw->worker);
      if (st != UCS_OK) {
        local = errorf(tribSystemError, "UCX: ucp_worker_create failed: %s", ucs_status_string(st));
        sw->worker = nullptr;
      } else {
        ++cache.workersCreated;
        if (opts_.shareWorker) workers.push_back(sw);
        shared_ = std::move(sw);
      }
    }
    if (shared_) {
      std::lock_guard<std::mutex> wl(shared_->mu);
      uint32_t s = shared_->nextSlot;
      while (shared_->slotTaken[s]) s = (s + 1) % slots;
      shared_->slotTaken[s] = true;
      ++shared_->slotsInUse;
      shared_->nextSlot = (s + 1) % slots;
      slot_ = s;
      holdsSlot_ = true;
      worker_ = shared_->worker;
    }
    // Forget contexts and workers whose communicators are all gone.
    for (auto it = cache.byKey.begin(); it != cache.byKey.end();) {
      it = it->second.expired() ? cache.byKey.erase(it) : std::next(it);
    }
    for (auto it = cache.workersByKey.begin(); it != cache.workersByKey.end();) {
      std::erase_if(it->second, [](const std::weak_ptr<SharedWorker>& w) { return w.expired(); });
      it = it->second.empty() ? cache.workersByKey.erase(it) : std::next(it);
    }
  }
  std::vector<uint8_t> mine;
  if (local.ok()) {
    if (Status r = randomBytes(&tagSecret_, sizeof tagSecret_); !r.ok()) local = r.prefix("UCX tag secret: ");
    tagSecret_ &= secretMask(opts_);
  }
  if (local.ok()) {
    std::lock_guard<std::mutex> lock(mu());
    ucp_address_t* addr = nullptr;
    size_t len = 0;
    st = ucp_worker_get_address(worker_, &addr, &len);
    if (st != UCS_OK) {
      local = errorf(tribSystemError, "UCX: ucp_worker_get_address failed: %s", ucs_status_string(st));
    } else {
      AddressHeader head;
      head.slot = slot_;
      head.tagSecret = tagSecret_;
      head.proc = selfIdentity();
      mine = ucx::encodeAddress(head, addr, len);
      ucp_worker_release_address(worker_, addr);
    }
  }
  std::vector<std::vector<uint8_t>> all;
  Status ex = oob(mine, all);
  if (!local.ok()) return local.prefix(strprintf("rank %d: ", rank_));
  if (!ex.ok()) return ex.prefix("UCX worker address exchange: ");
  if (static_cast<int>(all.size()) != nranks_)
    return errorf(tribInternalError, "UCX worker address exchange returned %zu blobs for %d ranks",
                  all.size(), nranks_);
  std::vector<AddressHeader> heads(nranks_);
  std::vector<const uint8_t*> addresses(nranks_);
  for (int r = 0; r < nranks_; ++r) {
    size_t bytes = 0;
    TRIB_RETURN_IF_ERROR(ucx::decodeAddress(all[r], r, opts_.commBits, &heads[r], &addresses[r], &bytes));
  }

  peers_.resize(nranks_);
  peerSlot_.resize(nranks_);
  peerSecret_.resize(nranks_);
  const ProcessIdentity me = selfIdentity();
  std::lock_guard<std::mutex> lock(mu());
  for (int r = 0; r < nranks_; ++r) {
    Peer& p = peers_[r];
    p.self = this;
    p.rank = r;
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                    UCP_EP_PARAM_FIELD_ERR_HANDLER;
    const AddressHeader& head = heads[r];
    peerSlot_[r] = head.slot;
    peerSecret_[r] = head.tagSecret & secretMask(opts_);
    p.proc = head.proc;
    p.proc.space[sizeof p.proc.space - 1] = '\0';  // a peer's bytes: terminated before any use
    p.sameHost = r != rank_ &&
                 samePidSpace(me, p.proc)
                 // watch only what /proc shows us now (hidepid, other users)
                 && processAlive(p.proc);
    watchLocal_ = watchLocal_ || p.sameHost;
    ep.address = reinterpret_cast<const ucp_address_t*>(addresses[r]);
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep.err_handler.cb = errorCallback;
    ep.err_handler.arg = &p;
    st = ucp_ep_create(worker_, &ep, &p.ep);
    if (st != UCS_OK) {
      p.ep = nullptr;
      return errorf(isUnsupported(st) ? tribNotSupported : tribSystemError,
                    "rank %d: UCX cannot reach rank %d (%s) with transports '%s'", rank_, r,
                    ucs_status_string(st), opts_.tls.empty() ? "default" : opts_.tls.c_str());
    }
  }
  return Status::Ok();
}

Status UcxTransport::checkPost(int peer, uint64_t tag, const void* buf, size_t bytes, TransferOp* op,
                               bool isSend, uint64_t* ucpTag) const {
  if (!op) return errorf(tribInvalidArgument, "UCX: null TransferOp");
  if (peer < 0 || peer >= nranks_)
    return errorf(tribInvalidArgument, "UCX: peer %d out of range (communicator has %d ranks)", peer,
                  nranks_);
  // A message carries its receiver's slot and its sender's rank.
  TRIB_RETURN_IF_ERROR(isSend ? ucxTagFor(opts_, peerSlot_[peer], rank_, tag, ucpTag)
                              : ucxTagFor(opts_, slot_, peer, tag, ucpTag));
  // The receiver's secret: a sender applies it, a receive (full mask) expects it.
  *ucpTag ^= isSend ? peerSecret_[peer] : tagSecret_;
  if (!buf && bytes > 0)
    return errorf(tribInvalidArgument, "UCX: null buffer for %zu bytes to/from rank %d", bytes, peer);
  return Status::Ok();
}

Status UcxTransport::postSend(int peer, uint64_t tag, const void* buf, size_t bytes, TransferOp* op) {
  uint64_t ucpTag = 0;
  TRIB_RETURN_IF_ERROR(checkPost(peer, tag, buf, bytes, op, true, &ucpTag));
  op->error = Status();
  op->state.store(TransferOp::kPending, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mu());
  if (aborted_) return failNow(op, abortStatus_);
  if (peers_[peer].failed) return failNow(op, peers_[peer].lost);
  auto* p = new Pending;
  p->self = this;
  p->worker = shared_.get();
  p->op = op;
  p->peer = peer;
  p->tag = tag;
  p->bytes = bytes;
  ucp_request_param_t prm{};
  prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  prm.cb.send = sendCallback;
  prm.user_data = p;
  // Contiguous, from the caller's buffer (which stays unchanged until completion: transport.hpp):
  // UCX picks eager copy for small messages and rendezvous zero-copy (RDMA, CMA) past its
  // thresholds (UCX_RNDV_THRESH, UCX_ZCOPY_THRESH), with nothing here forcing a copy.
  ucs_status_ptr_t r = ucp_tag_send_nbx(peers_[peer].ep, buf, bytes, ucpTag, &prm);
  if (UCS_PTR_IS_PTR(r)) {
    p->req = r;
    pending_.insert(p);
    return Status::Ok();
  }
  ucs_status_t st = UCS_PTR_STATUS(r);
  finish(p, st, bytes);  // deletes p
  return st == UCS_OK ? Status::Ok() : op->error;
}

Status UcxTransport::postRecv(int peer, uint64_t tag, void* buf, size_t bytes, const ReduceSpec* reduce,
                              TransferOp* op) {
  uint64_t ucpTag = 0;
  TRIB_RETURN_IF_ERROR(checkPost(peer, tag, buf, bytes, op, false, &ucpTag));
  if (reduce) TRIB_RETURN_IF_ERROR(checkReduceSpec("UCX", *reduce, bytes));
  op->error = Status();
  op->state.store(TransferOp::kPending, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mu());
  if (aborted_) return failNow(op, abortStatus_);
  if (peers_[peer].failed) {
    // Its messages that arrived before it went may still be in UCX's unexpected queue; only
    // what is not there can no longer come. Drain first if the loss is not handled yet.
    if (!peers_[peer].handled) handleFailedPeers();
    ucp_tag_recv_info_t info{};
    if (!ucp_tag_probe_nb(worker_, ucpTag, ~0ull, 0, &info)) return failNow(op, peers_[peer].lost);
  }
  auto* p = new Pending;
  p->self = this;
  p->worker = shared_.get();
  p->op = op;
  p->peer = peer;
  p->isRecv = true;
  p->tag = tag;
  p->bytes = bytes;
  p->buf = buf;
  void* target = buf;
  if (reduce && bytes > 0) {
    p->reduce = true;
    p->spec = *reduce;
    takeBounce(p);
    target = p->bounce.get();
  }
  ucp_request_param_t prm{};
  // No immediate completion: with UCX 1.13 a receive completing inside ucp_tag_recv_nbx did not
  // report its received length to us, and the exact-length check needs it.
  prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  prm.cb.recv = recvCallback;
  prm.user_data = p;
  p->posting = true;
  ucs_status_ptr_t r = ucp_tag_recv_nbx(worker_, target, bytes, ucpTag, ~0ull, &prm);
  p->posting = false;
  if (UCS_PTR_IS_PTR(r)) {
    p->req = r;
    if (p->doneInPost) {
      finish(p, p->postStatus, p->postLength);
      return Status::Ok();
    }
    pending_.insert(p);
    if (peers_[peer].failed) {
      // Matched a message of a lost peer: an eager one completes while draining; a rendezvous
      // one whose data stayed with the dead sender never does, and fails here.
      drainWorker();
      if (pending_.count(p)) {
        p->override = peers_[peer].lost;
        ucp_request_cancel(worker_, p->req);
      }
    }
    return Status::Ok();
  }
  Status s = errorf(tribSystemError, "UCX: posting a receive from rank %d failed: %s", peer,
                    ucs_status_string(UCS_PTR_STATUS(r)));
  finish(p, UCS_PTR_STATUS(r), 0);
  return s;
}

void UcxTransport::finish(Pending* p, ucs_status_t st, size_t length) {
  if (p->posting) {
    p->doneInPost = true;
    p->postStatus = st;
    p->postLength = length;
    return;
  }
  const char* what = p->isRecv ? "receive from" : "send to";
  unsigned long long tag = static_cast<unsigned long long>(p->tag);
  Status s;
  if (!p->override.ok()) {
    s = p->override;
  } else if (st != UCS_OK && peers_[p->peer].failed) {
    s = peers_[p->peer].lost;
  } else if (st == UCS_ERR_MESSAGE_TRUNCATED) {
    s = length > p->bytes
            ? errorf(tribInvalidUsage,
                     "UCX %s rank %d (tag %#llx): rank %d sent %zu bytes but %zu were expected (mismatched "
                     "count or datatype across ranks)",
                     what, p->peer, tag, p->peer, length, p->bytes)
            : errorf(tribInvalidUsage,
                     "UCX %s rank %d (tag %#llx): rank %d sent more than the %zu bytes expected (mismatched "
                     "count or datatype across ranks)",
                     what, p->peer, tag, p->peer, p->bytes);
  } else if (st == UCS_ERR_CANCELED) {
    s = errorf(tribAborted, "UCX %s rank %d (tag %#llx) was cancelled", what, p->peer, tag);
  } else if (st != UCS_OK) {
    s = errorf(tribRemoteError, "UCX %s rank %d (tag %#llx) failed: %s", what, p->peer, tag,
               ucs_status_string(st));
  } else if (p->isRecv && length != p->bytes) {
    s = errorf(
        tribInvalidUsage,
        "UCX %s rank %d (tag %#llx): rank %d sent %zu bytes but %zu were expected (mismatched count or "
        "datatype across ranks)",
        what, p->peer, tag, p->peer, length, p->bytes);
  } else if (p->reduce) {
    size_t count = p->bytes / dataTypeSize(p->spec.dtype);
    trib::reduce(p->buf, p->spec.local, p->bounce.get(), count, p->spec.dtype, p->spec.op);
  }
  if (p->op) {
    if (s.ok())
      p->op->complete();
    else
      p->op->fail(s);
  }
  if (p->req) ucp_request_free(p->req);
  giveBounce(p);
  pending_.erase(p);
  delete p;
}

void UcxTransport::onPeerError(Peer* peer, ucs_status_t st) {
  markLost(peer, strprintf("UCX: %s; the peer process died, exited or its connection broke",
                           ucs_status_string(st)));
}

void UcxTransport::markLost(Peer* peer, const std::string& why) {
  if (peer->failed) return;
  peer->failed = true;
  peer->lost = errorf(tribRemoteError, "rank %d: lost rank %d (%s)", rank_, peer->rank, why.c_str());
  anyPeerFailed_ = true;  // the rest happens in progress(), outside UCX's callback
}

void UcxTransport::drainWorker() {
  // Until the worker has nothing left to do (a few idle rounds in a row: socket events may take
  // one round to show), bounded in time.
  auto deadline = deadlineAfter(std::clamp(opts_.closeTimeoutSec, 0.05, 2.0));
  for (int idle = 0; idle < 3 && Clock::now() < deadline;) {
    if (ucp_worker_progress(worker_) != 0) {
      idle = 0;
    } else {
      ++idle;
      std::this_thread::yield();
    }
  }
}

void UcxTransport::handleFailedPeers() {
  anyPeerFailed_ = false;
  // A peer that exited normally flushed its messages first; those still on the wire, in the
  // socket or in shared memory must reach their receives (or UCX's unexpected queue) before
  // the receives still unmatched are failed. For a killed peer this finds nothing.
  drainWorker();
  for (Peer& peer : peers_) {
    if (!peer.failed || peer.handled) continue;
    peer.handled = true;
    // Receives are matched by the worker, not the endpoint, so UCX leaves them posted: cancel.
    std::vector<Pending*> recvs;
    for (Pending* p : pending_)
      if (p->peer == peer.rank && p->isRecv) recvs.push_back(p);
    for (Pending* p : recvs) {
      p->override = peer.lost;
      ucp_request_cancel(worker_, p->req);
    }
    // Sends on a failed endpoint complete with an error once it is closed (UCX requires force).
    if (peer.ep) {
      ucp_request_param_t prm{};
      prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      prm.flags = UCP_EP_CLOSE_FLAG_FORCE;
      ucs_status_ptr_t r = ucp_ep_close_nbx(peer.ep, &prm);
      if (UCS_PTR_IS_PTR(r)) ucp_request_free(r);
      peer.ep = nullptr;
    }
  }
}

Status UcxTransport::progress() {
  std::lock_guard<std::mutex> lock(mu());
  if (aborted_) return abortStatus_;
  for (int i = 0; i < 64 && ucp_worker_progress(worker_) != 0; ++i) {
  }
  if (watchLocal_ && opts_.keepaliveSec > 0 && Clock::now() >= nextLivenessCheck_) {
    nextLivenessCheck_ = deadlineAfter(opts_.keepaliveSec);
    for (Peer& peer : peers_)
      if (peer.sameHost && !peer.failed && !processAlive(peer.proc))
        markLost(&peer, strprintf("its process %d on this host has exited", peer.proc.pid));
  }
  if (anyPeerFailed_) handleFailedPeers();
  return Status::Ok();
}

void UcxTransport::drainPending(double timeoutSec) {
  auto deadline = deadlineAfter(timeoutSec);
  while (!pending_.empty() && Clock::now() < deadline) {
    if (ucp_worker_progress(worker_) == 0) std::this_thread::yield();
  }
}

bool UcxTransport::closeEndpoints(bool force, double timeoutSec) {
  auto deadline = deadlineAfter(timeoutSec);
  auto wait = [&](std::vector<void*>& reqs) {
    bool all = true;
    for (void* r : reqs) {
      while (ucp_request_check_status(r) == UCS_INPROGRESS && Clock::now() < deadline)
        if (ucp_worker_progress(worker_) == 0) std::this_thread::yield();
      all = all && ucp_request_check_status(r) != UCS_INPROGRESS;
      ucp_request_free(r);  // released by UCX on completion if still in flight
    }
    reqs.clear();
    return all;
  };
  // A clean close first flushes what was sent (delivered to the peer's worker), then closes
  // without the close handshake: on a shared worker the peer may not progress again for a while
  // (its other communicators idle), and waiting for its answer would stall this destroy.
  std::vector<void*> reqs;
  if (!force) {
    for (Peer& peer : peers_) {
      if (!peer.ep || peer.failed) continue;
      ucp_request_param_t prm{};
      ucs_status_ptr_t r = ucp_ep_flush_nbx(peer.ep, &prm);
      if (UCS_PTR_IS_PTR(r)) reqs.push_back(r);
    }
    wait(reqs);
  }
  for (Peer& peer : peers_) {
    if (!peer.ep) continue;
    ucp_request_param_t prm{};
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    prm.flags = UCP_EP_CLOSE_FLAG_FORCE;
    ucs_status_ptr_t r = ucp_ep_close_nbx(peer.ep, &prm);
    if (UCS_PTR_IS_PTR(r)) reqs.push_back(r);
    peer.ep = nullptr;
  }
  return wait(reqs);
}

void UcxTransport::abort(const Status& why) {
  if (!shared_) return;  // init never got a worker
  std::lock_guard<std::mutex> lock(mu());
  if (aborted_ || !worker_) return;
  aborted_ = true;
  abortStatus_ = why.ok() ? errorf(tribAborted, "rank %d: UCX transport aborted", rank_) : why;
  // Tell every caller now; from here on their ops and buffers are theirs again.
  std::vector<Pending*> all(pending_.begin(), pending_.end());
  for (Pending* p : all) {
    if (p->op) p->op->fail(abortStatus_);
    p->op = nullptr;
  }
  for (Pending* p : all)
    if (p->isRecv && pending_.count(p)) ucp_request_cancel(worker_, p->req);
  // Forced close completes the outstanding sends; the short drain lets in-flight transfers that
  // already matched stop touching caller memory.
  closeEndpoints(true, 0.0);
  drainPending(1.0);
}

void UcxTransport::discardUnexpected() {
  // Messages peers sent this communicator that nobody received (an abandoned collective): taken
  // off the worker now, so a later communicator given this slot never matches them.
  // Incoming tags carry this transport's secret: (tag ^ S) & mask == (field ^ S) & mask.
  const uint64_t field =
      (opts_.commBits == 0 ? 0 : static_cast<uint64_t>(slot_) << (64 - opts_.commBits)) ^ tagSecret_;
  const uint64_t mask = opts_.commBits == 0 ? 0 : ~0ull << (64 - opts_.commBits);
  std::vector<uint8_t> sink;
  for (int i = 0; i < 100000; ++i) {
    ucp_tag_recv_info_t info{};
    ucp_tag_message_h msg = ucp_tag_probe_nb(worker_, field, mask, 1, &info);
    if (!msg) break;
    sink.resize(std::max(sink.size(), info.length));
    ucp_request_param_t prm{};
    ucs_status_ptr_t r = ucp_tag_msg_recv_nbx(worker_, sink.data(), info.length, msg, &prm);
    if (!UCS_PTR_IS_PTR(r)) continue;
    auto deadline = deadlineAfter(std::clamp(opts_.closeTimeoutSec, 0.05, 2.0));
    while (ucp_request_check_status(r) == UCS_INPROGRESS && Clock::now() < deadline)
      if (ucp_worker_progress(worker_) == 0) std::this_thread::yield();
    if (ucp_request_check_status(r) == UCS_INPROGRESS) {
      ucp_request_cancel(worker_, r);  // its data stayed with a sender that never delivers it
      sink.clear();                    // UCX may still write there: a fresh buffer for the next
      sink.shrink_to_fit();
    }
    ucp_request_free(r);
  }
}

void UcxTransport::leaveWorker() {
  // Under the worker's mutex, with every endpoint closed (or closing) and this transport's
  // requests drained as far as they would go.
  discardUnexpected();
  for (Pending* p : pending_) {  // UCX still holds these: its callbacks release them later
    p->self = nullptr;
    p->op = nullptr;
    shared_->orphans.insert(p);
  }
  pending_.clear();
  if (holdsSlot_) {
    shared_->slotTaken[slot_] = false;
    --shared_->slotsInUse;
    holdsSlot_ = false;
  }
}

void UcxTransport::shutdown() {
  if (!shared_) return;
  {
    std::lock_guard<std::mutex> lock(mu());
    if (worker_) {
      std::vector<Pending*> all(pending_.begin(), pending_.end());
      Status closed = errorf(tribAborted, "rank %d: UCX transport closed with the operation pending", rank_);
      for (Pending* p : all) {
        if (p->op) p->op->fail(closed);
        p->op = nullptr;
      }
      for (Pending* p : all)
        if (p->isRecv && pending_.count(p)) ucp_request_cancel(worker_, p->req);
      // A clean close flushes what was sent; pending sends nobody will receive end with the timeout.
      const bool allClosed = closeEndpoints(aborted_, opts_.closeTimeoutSec);
      drainPending(aborted_ ? 0.0 : 1.0);
      if (!allClosed) {  // an endpoint still closing may still call back into its peer
        for (Peer& peer : peers_) peer.self = nullptr;
        shared_->retiredPeers.push_back(std::make_unique<std::vector<Peer>>(std::move(peers_)));
      }
      leaveWorker();
      worker_ = nullptr;
    }
  }
  shared_.reset();  // the last communicator on the worker destroys it, and its context
}

void UcxTransport::takeBounce(Pending* p) {
  for (size_t i = 0; i < bouncePool_.size(); ++i) {
    if (bouncePool_[i].first >= p->bytes) {
      p->bounceCap = bouncePool_[i].first;
      p->bounce = std::move(bouncePool_[i].second);
      bouncePool_.erase(bouncePool_.begin() + static_cast<std::ptrdiff_t>(i));
      return;
    }
  }
  p->bounce.reset(new uint8_t[p->bytes]);  // not zeroed: fully overwritten by the message
  p->bounceCap = p->bytes;
}

void UcxTransport::giveBounce(Pending* p) {
  // Keep a few buffers for the next reduce-receives; a request UCX may still write into (a
  // cancelled one it had already matched) is never in here, since finish() runs on completion.
  if (!p->bounce) return;
  if (bouncePool_.size() < 4) bouncePool_.emplace_back(p->bounceCap, std::move(p->bounce));
  p->bounce.reset();
}

}  // namespace

Status ucxTagFor(const UcxOptions& o, uint32_t comm, int src, uint64_t tag, uint64_t* out) {
  if (o.commBits < 0 || o.rankBits < 1 || o.seqBits < 2 || o.indexBits < 1 || o.commBits > 32 ||
      o.rankBits > 32 || o.seqBits > 32 || o.indexBits > 32 ||
      o.commBits + o.rankBits + o.seqBits + o.indexBits != 64)
    return errorf(
        tribInvalidArgument,
        "UCX tag layout: commBits %d + rankBits %d + seqBits %d + indexBits %d must be 64 (comm 0..32, "
        "rank 1..32, seq 2..32, index 1..32)",
        o.commBits, o.rankBits, o.seqBits, o.indexBits);
  auto mask = [](int b) { return (1ull << b) - 1; };  // b <= 32 here
  uint64_t seq = tag >> 32, index = tag & 0xffffffffull;
  if (src < 0 || static_cast<uint64_t>(src) > mask(o.rankBits))
    return errorf(tribInvalidArgument,
                  "UCX tag layout: rank %d does not fit rankBits=%d; raise UcxOptions::rankBits", src,
                  o.rankBits);
  if (index > mask(o.indexBits))
    return errorf(tribInvalidArgument,
                  "UCX tag layout: message index %llu does not fit indexBits=%d (tag %#llx); raise "
                  "UcxOptions::indexBits or split the operation",
                  static_cast<unsigned long long>(index), o.indexBits, static_cast<unsigned long long>(tag));
  // Keep the point-to-point bit (top of the sequence); wrap the rest of the sequence.
  uint64_t seqField = ((seq >> 31) << (o.seqBits - 1)) | (seq & mask(o.seqBits - 1));
  if (comm > mask(o.commBits))
    return errorf(tribInvalidArgument, "UCX tag layout: communicator slot %u does not fit commBits=%d", comm,
                  o.commBits);
  const uint64_t commField = o.commBits == 0 ? 0 : static_cast<uint64_t>(comm) << (64 - o.commBits);
  *out = commField | (static_cast<uint64_t>(src) << (o.seqBits + o.indexBits)) | (seqField << o.indexBits) |
         index;
  return Status::Ok();
}

uint64_t ucxContextsCreated() {
  std::lock_guard<std::mutex> lock(contexts().mu);
  return contexts().created;
}

uint64_t ucxWorkersCreated() {
  std::lock_guard<std::mutex> lock(contexts().mu);
  return contexts().workersCreated;
}

Status createUcxTransport(int rank, int nranks, const OobAllGather& oob, const UcxOptions& opts,
                          std::unique_ptr<Transport>* out) {
  if (!out) return errorf(tribInvalidArgument, "createUcxTransport: null output pointer");
  if (!oob) return errorf(tribInvalidArgument, "createUcxTransport: no out-of-band exchange given");
  uint64_t probe = 0;
  TRIB_RETURN_IF_ERROR(ucxTagFor(opts, 0, 0, 0, &probe));
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return errorf(tribInvalidArgument, "createUcxTransport: rank %d of %d is out of range", rank, nranks);
  if (static_cast<uint64_t>(nranks) > (1ull << opts.rankBits))
    return errorf(tribInvalidArgument, "UCX tag layout: %d ranks need more than rankBits=%d; raise rankBits",
                  nranks, opts.rankBits);
  auto t = std::make_unique<UcxTransport>(rank, nranks, opts);
  TRIB_RETURN_IF_ERROR(t->init(oob));
  *out = std::move(t);
  return Status::Ok();
}

namespace {

bool ucxCanConnect(const RankLocation&, const RankLocation&) { return true; }  // any host, any process

Status ucxConnect(const TransportConnectArgs& args, std::unique_ptr<Transport>* out) {
  UcxOptions opts;
  opts.shareWorker = args.shareContexts;
  // Liveness probes must not call a merely slow peer dead on a loaded machine: probe a few
  // times per timeout, never faster than every 2 s. A peer that dies is still reported well
  // within TRIB_TIMEOUT (TCP notices a closed socket at once).
  opts.keepaliveSec = std::max(2.0, args.timeout.count() / 1000.0 / 4);
  return createUcxTransport(args.rank, args.nranks, args.oob, opts, out).prefix("UCX transport: ");
}

}  // namespace

TransportDescriptor ucxTransportDescriptor() {
  TransportDescriptor d{};
  d.name = "ucx";
  d.reaches = "ranks on other hosts";
  d.caps.reads = d.caps.writes = d.caps.reduces = kHostMemoryKinds;
  d.caps.twoSided = true;
  d.caps.zeroCopy = true;  // sends go from the caller's buffer (rendezvous zero-copy past UCX's thresholds)
  d.priority = 100;
  d.needsExchange = true;
  d.canConnect = ucxCanConnect;
  d.connect = ucxConnect;
  return d;
}

}  // namespace trib
