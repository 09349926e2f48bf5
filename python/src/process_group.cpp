#include "process_group.hpp"

#include <c10/util/Exception.h>

#include <algorithm>
#include <climits>
#include <numeric>

#include "tensors.hpp"
#include "tributary/tributary.hpp"

namespace torch_tributary {

using tributary::check;
using Ptr = c10::intrusive_ptr<c10d::Work>;

namespace {

const char* const kUniqueIdKey = "tributary_unique_id";

// One contiguous tensor of `parts` laid end to end (the flat buffer of a list of tensors).
at::Tensor flatten(const std::vector<at::Tensor>& parts) {
  std::vector<at::Tensor> flat;
  flat.reserve(parts.size());
  for (const at::Tensor& p : parts) flat.push_back(p.reshape({-1}));
  return at::cat(flat);
}

// Copies the i-th `numel`-element slice of `flat` into outs[i].
void unflatten(const at::Tensor& flat, const std::vector<at::Tensor>& outs, int64_t numel) {
  for (size_t i = 0; i < outs.size(); ++i) {
    outs[i].copy_(flat.narrow(0, static_cast<int64_t>(i) * numel, numel).view(outs[i].sizes()));
  }
}

// Sends send[p] to and receives recv[p] from every peer p at once (a group of sends and
// receives, as bytes); a rank's own part is copied.
void exchange(const std::vector<at::Tensor>& send, const std::vector<at::Tensor>& recv, int rank,
              tribComm_t comm) {
  {
    tributary::Group group;
    for (size_t p = 0; p < send.size(); ++p) {
      if (static_cast<int>(p) == rank) continue;
      size_t sendBytes = static_cast<size_t>(send[p].numel()) * send[p].element_size();
      size_t recvBytes = static_cast<size_t>(recv[p].numel()) * recv[p].element_size();
      if (sendBytes)
        check(tribSend(send[p].data_ptr(), sendBytes, tribUint8, static_cast<int>(p), comm, nullptr));
      if (recvBytes)
        check(tribRecv(recv[p].data_ptr(), recvBytes, tribUint8, static_cast<int>(p), comm, nullptr));
    }
    group.end();
  }
  recv[rank].copy_(send[rank].view(recv[rank].sizes()));
}

// Splits of dim 0 (torch's alltoall splits): given, or `n` equal parts.
std::vector<int64_t> rowSplits(const std::vector<int64_t>& given, const at::Tensor& t, int n,
                               const char* what) {
  int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  if (given.empty()) {
    TORCH_CHECK_VALUE(rows % n == 0, "tributary alltoall_base: ", what, " has ", rows,
                      " rows, not divisible by the group size ", n, " (give split sizes)");
    return std::vector<int64_t>(static_cast<size_t>(n), rows / n);
  }
  TORCH_CHECK_VALUE(given.size() == static_cast<size_t>(n), "tributary alltoall_base: ", given.size(), " ",
                    what, " split sizes for a group of ", n);
  for (int64_t s : given)
    TORCH_CHECK_VALUE(s >= 0, "tributary alltoall_base: negative ", what, " split size ", s);
  int64_t sum = std::accumulate(given.begin(), given.end(), int64_t{0});
  TORCH_CHECK_VALUE(sum == rows, "tributary alltoall_base: ", what, " split sizes add up to ", sum,
                    ", the tensor has ", rows, " rows");
  return given;
}

// The row slices of a contiguous tensor.
std::vector<at::Tensor> rowParts(const at::Tensor& t, const std::vector<int64_t>& splits) {
  at::Tensor rows = t.dim() == 0 ? t.reshape({1}) : t;
  std::vector<at::Tensor> parts;
  int64_t off = 0;
  for (int64_t s : splits) {
    parts.push_back(rows.narrow(0, off, s));
    off += s;
  }
  return parts;
}

}  // namespace

ProcessGroupTributary::ProcessGroupTributary(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                             std::chrono::milliseconds timeout)
    : BackendBase(rank, size) {
  TORCH_CHECK_VALUE(size >= 1 && rank >= 0 && rank < size, "tributary: rank ", rank, " of ", size,
                    " is invalid");
  TORCH_CHECK_VALUE(timeout.count() > 0, "tributary: the timeout must be positive, got ", timeout.count(),
                    " ms");
  tribUniqueId id;
  if (rank == 0) {
    check(tribGetUniqueId(&id));
    store->set(kUniqueIdKey, std::vector<uint8_t>(id.internal, id.internal + sizeof(id.internal)));
  } else {
    store->wait({kUniqueIdKey}, timeout);
    std::vector<uint8_t> bytes = store->get(kUniqueIdKey);
    TORCH_CHECK(bytes.size() == sizeof(id.internal), "tributary: the store's unique id has ", bytes.size(),
                " bytes, expected ", sizeof(id.internal));
    std::copy(bytes.begin(), bytes.end(), id.internal);
  }
  tribConfig_t config = TRIB_CONFIG_INITIALIZER;
  config.timeoutMs = static_cast<int>(std::min<int64_t>(timeout.count(), INT_MAX));
  config.commName = "torch";
  tribResult_t r = tribCommInitRankConfig(&comm_, size, id, rank, &config);
  TORCH_CHECK(r == tribSuccess, "tributary: joining the process group as rank ", rank, " of ", size,
              " failed: ", tribGetErrorString(r), ": ", tribGetLastError(nullptr));
  worker_ = std::make_unique<Worker>(comm_, "rank " + std::to_string(rank) + " of " + std::to_string(size),
                                     timeout);
}

ProcessGroupTributary::~ProcessGroupTributary() {
  worker_.reset();  // every posted operation ends (each is bounded by the timeout)
  if (comm_) tribCommDestroy(comm_);
}

Ptr ProcessGroupTributary::post(c10d::OpType type, const char* op, std::vector<at::Tensor> outputs,
                                Worker::Task task, Worker::After after) {
  auto work = c10::make_intrusive<TribWork>(rank_, type, std::move(outputs));
  worker_->post(work, op, std::move(task), std::move(after));
  return work;
}

void ProcessGroupTributary::checkRoot(int64_t root, const char* op) const {
  TORCH_CHECK_VALUE(root >= 0 && root < size_, "tributary ", op, ": root rank ", root,
                    " is not in a group of ", size_);
}

std::vector<at::Tensor> ProcessGroupTributary::rootList(const std::vector<std::vector<at::Tensor>>& lists,
                                                        const at::Tensor& like, int root, const char* op,
                                                        const char* what) const {
  if (rank_ != root) {
    TORCH_CHECK_VALUE(lists.empty() || (lists.size() == 1 && lists[0].empty()), "tributary ", op,
                      ": only the root (rank ", root, ") takes ", what, " tensors");
    return {};
  }
  TORCH_CHECK_VALUE(lists.size() == 1 && lists[0].size() == static_cast<size_t>(size_), "tributary ", op,
                    ": the root expects one list of ", size_, " ", what, " tensors");
  checkSameShape(lists[0], like, like.numel(), op, what);
  return lists[0];
}

void ProcessGroupTributary::checkPeer(int peer, const char* op) const {
  TORCH_CHECK_VALUE(peer >= 0 && peer < size_, "tributary ", op, ": peer rank ", peer,
                    " is not in a group of ", size_);
  TORCH_CHECK_VALUE(peer != rank_, "tributary ", op, ": rank ", rank_, " cannot ", op, " to or from itself");
}

Ptr ProcessGroupTributary::broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  const at::Tensor& t = single(tensors, "broadcast");
  checkRoot(opts.rootRank, "broadcast");
  TORCH_CHECK_VALUE(opts.rootTensor == 0,
                    "tributary broadcast: rootTensor must be 0 (one tensor per process)");
  int root = static_cast<int>(opts.rootRank);
  return post(c10d::OpType::BROADCAST, "broadcast", tensors, [this, t, root] {
    Output out(t, /*inPlace=*/true);
    Wire w = wireOf(out.buf);
    check(tribBroadcast(out.buf.data_ptr(), out.buf.data_ptr(), w.count, w.dtype, root, comm_, nullptr));
    out.finish();
    return tribRequest_t{nullptr};
  });
}

Ptr ProcessGroupTributary::allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  const at::Tensor& t = single(tensors, "allreduce");
  Reduction red = reductionOf(opts.reduceOp, t, "allreduce");
  return post(c10d::OpType::ALLREDUCE, "allreduce", tensors, [this, t, red] {
    Output out(t, /*inPlace=*/true);
    red.prescale(out.buf);
    at::Tensor v = red.view(out.buf);
    check(tribAllReduce(v.data_ptr(), v.data_ptr(), v.numel(), red.dtype, red.op, comm_, nullptr));
    out.finish();
    return tribRequest_t{nullptr};
  });
}

Ptr ProcessGroupTributary::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                               const c10d::AllreduceCoalescedOptions& opts) {
  std::vector<Reduction> reds;
  for (const at::Tensor& t : tensors) {
    checkTensor(t, "allreduce_coalesced");
    reds.push_back(reductionOf(opts.reduceOp, t, "allreduce_coalesced"));
  }
  return post(c10d::OpType::ALLREDUCE_COALESCED, "allreduce_coalesced", tensors, [this, tensors, reds] {
    std::vector<Output> outs;
    outs.reserve(tensors.size());
    {
      tributary::Group group;  // one launch for all: they progress together
      for (size_t i = 0; i < tensors.size(); ++i) {
        outs.emplace_back(tensors[i], /*inPlace=*/true);
        reds[i].prescale(outs[i].buf);
        at::Tensor v = reds[i].view(outs[i].buf);
        check(
            tribAllReduce(v.data_ptr(), v.data_ptr(), v.numel(), reds[i].dtype, reds[i].op, comm_, nullptr));
      }
      group.end();
    }
    for (Output& o : outs) o.finish();
    return tribRequest_t{nullptr};
  });
}

Ptr ProcessGroupTributary::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  const at::Tensor& t = single(tensors, "reduce");
  checkRoot(opts.rootRank, "reduce");
  TORCH_CHECK_VALUE(opts.rootTensor == 0, "tributary reduce: rootTensor must be 0 (one tensor per process)");
  Reduction red = reductionOf(opts.reduceOp, t, "reduce");
  int root = static_cast<int>(opts.rootRank);
  return post(c10d::OpType::REDUCE, "reduce", tensors, [this, t, red, root] {
    Output out(t, /*inPlace=*/true);
    if (red.premul && out.buf.is_same(t)) out.buf = t.clone();  // off the root the input stays as it was
    red.prescale(out.buf);
    at::Tensor v = red.view(out.buf);
    bool atRoot = rank_ == root;
    check(tribReduce(v.data_ptr(), atRoot ? v.data_ptr() : nullptr, v.numel(), red.dtype, red.op, root, comm_,
                     nullptr));
    if (atRoot) out.finish();
    return tribRequest_t{nullptr};
  });
}

Ptr ProcessGroupTributary::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                     std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions&) {
  const at::Tensor& in = single(inputs, "allgather");
  TORCH_CHECK_VALUE(outputs.size() == 1 && outputs[0].size() == static_cast<size_t>(size_),
                    "tributary allgather: expects one list of ", size_, " output tensors");
  checkSameShape(outputs[0], in, in.numel(), "allgather", "output");
  std::vector<at::Tensor> outs = outputs[0];
  return post(c10d::OpType::ALLGATHER, "allgather", outs, [this, in, outs] {
    at::Tensor src = in.contiguous();
    at::Tensor flat = at::empty({size_ * in.numel()}, in.options());
    Wire w = wireOf(src);
    check(tribAllGather(src.data_ptr(), flat.data_ptr(), w.count, w.dtype, comm_, nullptr));
    unflatten(flat, outs, in.numel());
    return tribRequest_t{nullptr};
  });
}

Ptr ProcessGroupTributary::_allgather_base(at::Tensor& output, at::Tensor& input,
                                           const c10d::AllgatherOptions&) {
  checkTensor(input, "_allgather_base");
  checkSameShape({output}, input, size_ * input.numel(), "_allgather_base", "output");
  return post(c10d::OpType::_ALLGATHER_BASE, "_allgather_base", {output}, [this, input, output] {
    at::Tensor src = input.contiguous();
    Output out(output);
    Wire w = wireOf(src);
    check(tribAllGather(src.data_ptr(), out.buf.data_ptr(), w.count, w.dtype, comm_, nullptr));
    out.finish();
    return tribRequest_t{nullptr};
  });
}

Ptr ProcessGroupTributary::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputLists,
                                               std::vector<at::Tensor>& inputs,
                                               const c10d::AllgatherOptions&) {
  TORCH_CHECK_VALUE(outputLists.size() == inputs.size(),
                    "tributary allgather_coalesced: ", outputLists.size(), " output lists for ",
                    inputs.size(), " inputs");
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkTensor(inputs[i], "allgather_coalesced");
    TORCH_CHECK_VALUE(outputLists[i].size() == static_cast<size_t>(size_),
                      "tributary allgather_coalesced: output list ", i, " has ", outputLists[i].size(),
                      " tensors, expected ", size_);
    checkSameShape(outputLists[i], inputs[i], inputs[i].numel(), "allgather_coalesced", "output");
  }
  std::vector<at::Tensor> all;
  for (const auto& l : outputLists) all.insert(all.end(), l.begin(), l.end());
  return post(c10d::OpType::ALLGATHER_COALESCED, "allgather_coalesced", all, [this, inputs, outputLists] {
    std::vector<at::Tensor> srcs, flats;
    {
      tributary::Group group;
      for (const at::Tensor& in : inputs) {
        srcs.push_back(in.contiguous());
        flats.push_back(at::empty({size_ * in.numel()}, in.options()));
        Wire w = wireOf(srcs.back());
        check(
            tribAllGather(srcs.back().data_ptr(), flats.back().data_ptr(), w.count, w.dtype, comm_, nullptr));
      }
      group.end();
    }
    for (size_t i = 0; i < inputs.size(); ++i) unflatten(flats[i], outputLists[i], inputs[i].numel());
    return tribRequest_t{nullptr};
  });
}

Ptr ProcessGroupTributary::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                  std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) {
  const at::Tensor& in = single(inputs, "gather");
  checkRoot(opts.rootRank, "gather");
  int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> outs = rootList(outputs, in, root, "gather", "output");
  return post(c10d::OpType::GATHER, "gather", outs, [this, in, outs, root] {
    at::Tensor src = in.contiguous();
    at::Tensor flat = rank_ == root ? at::empty({size_ * in.numel()}, in.options()) : at::Tensor();
    Wire w = wireOf(src);
    check(tribGather(src.data_ptr(), flat.defined() ? flat.data_ptr() : nullptr, w.count, w.dtype, root,
                     comm_, nullptr));
    if (flat.defined()) unflatten(flat, outs, in.numel());
    return tribRequest_t{nullptr};
  });
}

Ptr ProcessGroupTributary::scatter(std::vector<at::Tensor>& outputs,
                                   std::vector<std::vector<at::Tensor>>& inputs,
                                   const c10d::ScatterOptions& opts) {
  const at::Tensor& out = single(outputs, "scatter");
  checkRoot(opts.rootRank, "scatter");
  int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> ins = rootList(inputs, out, root, "scatter", "input");
  return post(c10d::OpType::SCATTER, "scatter", outputs, [this, out, ins, root] {
    at::Tensor flat = ins.empty() ? at::Tensor() : flatten(ins);
    Output o(out);
    Wire w = wireOf(o.buf);
    check(tribScatter(flat.defined() ? flat.data_ptr() : nullptr, o.buf.data_ptr(), w.count, w.dtype, root,
                      comm_, nullptr));
    o.finish();
    return tribRequest_t{nullptr};
  });
}

Ptr ProcessGroupTributary::reduce_scatter(std::vector<at::Tensor>& outputs,
                                          std::vector<std::vector<at::Tensor>>& inputs,
                                          const c10d::ReduceScatterOptions& opts) {
  const at::Tensor& out = single(outputs, "reduce_scatter");
  TORCH_CHECK_VALUE(inputs.size() == 1 && inputs[0].size() == static_cast<size_t>(size_),
                    "tributary reduce_scatter: expects one list of ", size_, " input tensors");
  checkSameShape(inputs[0], out, out.numel(), "reduce_scatter", "input");
  Reduction red = reductionOf(opts.reduceOp, out, "reduce_scatter");
  std::vector<at::Tensor> ins = inputs[0];
  return post(c10d::OpType::REDUCE_SCATTER, "reduce_scatter", outputs, [this, out, ins, red] {
    at::Tensor flat = flatten(ins);  // a copy: prescaling leaves the inputs alone
    red.prescale(flat);
    Output o(out);
    at::Tensor src = red.view(flat), dst = red.view(o.buf);
    check(tribReduceScatter(src.data_ptr(), dst.data_ptr(), dst.numel(), red.dtype, red.op, comm_, nullptr));
    o.finish();
    return tribRequest_t{nullptr};
  });
}

Ptr ProcessGroupTributary::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                const c10d::ReduceScatterOptions& opts) {
  checkTensor(output, "_reduce_scatter_base");
  checkSameShape({input}, output, size_ * output.numel(), "_reduce_scatter_base", "input");
  Reduction red = reductionOf(opts.reduceOp, output, "_reduce_scatter_base");
  return post(c10d::OpType::_REDUCE_SCATTER_BASE, "_reduce_scatter_base", {output},
              [this, output, input, red] {
                at::Tensor in = input.contiguous();
                if (red.premul && in.is_same(input)) in = input.clone();
                red.prescale(in);
                Output o(output);
                at::Tensor src = red.view(in), dst = red.view(o.buf);
                check(tribReduceScatter(src.data_ptr(), dst.data_ptr(), dst.numel(), red.dtype, red.op, comm_,
                                        nullptr));
                o.finish();
                return tribRequest_t{nullptr};
              });
}

Ptr ProcessGroupTributary::alltoall_base(at::Tensor& output, at::Tensor& input,
                                         std::vector<int64_t>& outputSplits,
                                         std::vector<int64_t>& inputSplits, const c10d::AllToAllOptions&) {
  checkTensor(input, "alltoall_base");
  checkTensor(output, "alltoall_base");
  TORCH_CHECK_TYPE(input.scalar_type() == output.scalar_type(), "tributary alltoall_base: input dtype ",
                   input.scalar_type(), " differs from the output's ", output.scalar_type());
  if (outputSplits.empty() && inputSplits.empty()) {
    TORCH_CHECK_VALUE(input.numel() == output.numel(), "tributary alltoall_base: input has ", input.numel(),
                      " elements, the output ", output.numel());
    TORCH_CHECK_VALUE(input.numel() % size_ == 0, "tributary alltoall_base: ", input.numel(),
                      " elements are not divisible by the group size ", size_);
    return post(c10d::OpType::ALLTOALL_BASE, "alltoall_base", {output}, [this, input, output] {
      at::Tensor src = input.contiguous();
      Output o(output);
      Wire w = wireOf(src);
      check(tribAlltoAll(src.data_ptr(), o.buf.data_ptr(), w.count / static_cast<size_t>(size_), w.dtype,
                         comm_, nullptr));
      o.finish();
      return tribRequest_t{nullptr};
    });
  }
  std::vector<int64_t> inRows = rowSplits(inputSplits, input, size_, "input");
  std::vector<int64_t> outRows = rowSplits(outputSplits, output, size_, "output");
  TORCH_CHECK_VALUE(inRows[rank_] == outRows[rank_], "tributary alltoall_base: rank ", rank_,
                    " sends itself ", inRows[rank_], " rows but expects ", outRows[rank_]);
  return post(c10d::OpType::ALLTOALL_BASE, "alltoall_base", {output}, [this, input, output, inRows, outRows] {
    at::Tensor src = input.contiguous();
    Output o(output);
    exchange(rowParts(src, inRows), rowParts(o.buf, outRows), rank_, comm_);
    o.finish();
    return tribRequest_t{nullptr};
  });
}

Ptr ProcessGroupTributary::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                    const c10d::AllToAllOptions&) {
  TORCH_CHECK_VALUE(
      outputs.size() == static_cast<size_t>(size_) && inputs.size() == static_cast<size_t>(size_),
      "tributary alltoall: expects ", size_, " input and ", size_, " output tensors, got ", inputs.size(),
      " and ", outputs.size());
  for (size_t p = 0; p < inputs.size(); ++p) {
    checkTensor(inputs[p], "alltoall");
    checkTensor(outputs[p], "alltoall");
    TORCH_CHECK_TYPE(inputs[p].scalar_type() == outputs[p].scalar_type(), "tributary alltoall: input ", p,
                     " has dtype ", inputs[p].scalar_type(), ", output ", p, " ", outputs[p].scalar_type());
  }
  TORCH_CHECK_VALUE(inputs[rank_].numel() == outputs[rank_].numel(), "tributary alltoall: rank ", rank_,
                    " sends itself ", inputs[rank_].numel(), " elements but expects ",
                    outputs[rank_].numel());
  return post(c10d::OpType::ALLTOALL, "alltoall", outputs, [this, inputs, outputs] {
    std::vector<at::Tensor> srcs;
    std::vector<Output> outs;
    std::vector<at::Tensor> dsts;
    for (size_t p = 0; p < inputs.size(); ++p) {
      srcs.push_back(inputs[p].contiguous());
      outs.emplace_back(outputs[p]);
      dsts.push_back(outs.back().buf);
    }
    exchange(srcs, dsts, rank_, comm_);
    for (Output& o : outs) o.finish();
    return tribRequest_t{nullptr};
  });
}

Ptr ProcessGroupTributary::send(std::vector<at::Tensor>& tensors, int dstRank,
                                int /*tag: matched in order, as NCCL*/) {
  const at::Tensor& t = single(tensors, "send");
  checkPeer(dstRank, "send");
  at::Tensor src = t.contiguous();  // on the caller's thread: the data as it is now
  return post(c10d::OpType::SEND, "send", tensors, [this, src, dstRank] {
    Wire w = wireOf(src);
    tribRequest_t req = nullptr;
    check(tribIsend(src.data_ptr(), w.count, w.dtype, dstRank, comm_, &req));
    return req;
  });
}

Ptr ProcessGroupTributary::recv(std::vector<at::Tensor>& tensors, int srcRank, int /*tag*/) {
  const at::Tensor& t = single(tensors, "recv");
  checkPeer(srcRank, "recv");
  auto out = std::make_shared<Output>(t);
  return post(
      c10d::OpType::RECV, "recv", tensors,
      [this, out, srcRank] {
        Wire w = wireOf(out->buf);
        tribRequest_t req = nullptr;
        check(tribIrecv(out->buf.data_ptr(), w.count, w.dtype, srcRank, comm_, &req));
        return req;
      },
      [out] { out->finish(); });
}

Ptr ProcessGroupTributary::recvAnysource(std::vector<at::Tensor>&, int) {
  TORCH_CHECK(false, "tributary recv: receiving from any source is not supported; name the source rank");
}

Ptr ProcessGroupTributary::barrier(const c10d::BarrierOptions&) {
  return post(c10d::OpType::BARRIER, "barrier", {}, [this] {
    check(tribBarrier(comm_, nullptr));
    return tribRequest_t{nullptr};
  });
}

}  // namespace torch_tributary
