// Included into conformance test binaries (tests/CMakeLists.txt compiles test_*.cpp alone).
#include "conformance.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace trib::conformance {

namespace {
constexpr unsigned char kGuard = 0xA5;
constexpr size_t kGuardBytes = 64;
}  // namespace

std::string Case::name() const {
  std::string s =
      std::string(collName(coll)) + "_" + (algo.empty() ? "auto" : algo) + "_" + dataTypeName(dtype);
  if (hasOp(coll)) s += std::string("_") + redOpName(op);
  s += "_n" + std::to_string(nranks) + "_c" + std::to_string(count);
  if (hasRoot(coll)) s += "_root" + std::to_string(root);
  if (inPlace) s += "_inplace";
  if (sharedBuffers) s += "_shared";
  return s;
}

// Reduction of element `idx` of every rank's input, in exact double arithmetic.
static double reduced(const Case& c, uint64_t idx) {
  double acc = inputValue(c, 0, idx);
  for (int r = 1; r < c.nranks; ++r) {
    double v = inputValue(c, r, idx);
    switch (c.op) {
      case tribSum:
      case tribAvg:
        acc += v;
        break;
      case tribProd:
        acc *= v;
        break;
      case tribMin:
        acc = std::min(acc, v);
        break;
      case tribMax:
        acc = std::max(acc, v);
        break;
      default:
        break;
    }
  }
  if (c.op == tribAvg) {
    acc /= c.nranks;
    if (!isFloatType(c.dtype)) acc = std::trunc(acc);  // integers: truncation toward zero
  }
  return acc;
}

double expectedValue(const Case& c, int rank, uint64_t idx) {
  const uint64_t n = c.count;
  const double none = std::numeric_limits<double>::quiet_NaN();
  switch (c.coll) {
    case Coll::AllReduce:
      return reduced(c, idx);
    case Coll::Reduce:
      return rank == c.root ? reduced(c, idx) : none;
    case Coll::Broadcast:
      return inputValue(c, c.root, idx);
    case Coll::AllGather:
      return inputValue(c, static_cast<int>(idx / n), idx % n);
    case Coll::ReduceScatter:
      return reduced(c, static_cast<uint64_t>(rank) * n + idx);
    case Coll::AlltoAll:
      return inputValue(c, static_cast<int>(idx / n), static_cast<uint64_t>(rank) * n + idx % n);
    case Coll::Gather:
      return rank == c.root ? inputValue(c, static_cast<int>(idx / n), idx % n) : none;
    case Coll::Scatter:
      return inputValue(c, c.root, static_cast<uint64_t>(rank) * n + idx);
    case Coll::Barrier:
      return none;
  }
  return none;
}

void CaseBytes::assign(size_t n, unsigned char fill, bool shared) {
  release();
  if (shared) {
    void* p = nullptr;
    if (tribMemAlloc(&p, n) != tribSuccess) throw std::runtime_error(tribGetLastError(nullptr));
    shared_ = static_cast<unsigned char*>(p);
    std::memset(shared_, fill, n);
  } else {
    heap_.assign(n, fill);
  }
}

void CaseBytes::release() {
  if (shared_) tribMemFree(shared_);
  shared_ = nullptr;
  heap_.clear();
}

void prepare(const Case& c, int rank, RankBuffers* b) {
  CollArgs a;
  a.coll = c.coll;
  a.nranks = c.nranks;
  a.root = c.root;
  a.count = c.count;
  b->inCount = inputCount(a, rank);
  b->outCount = outputCount(a, rank);
  const size_t es = dataTypeSize(c.dtype);
  b->send.assign(kGuardBytes * 2 + b->inCount * es, kGuard, c.sharedBuffers);
  b->recv.assign(kGuardBytes * 2 + b->outCount * es, kGuard, c.sharedBuffers);
  unsigned char* sendData = b->send.data() + kGuardBytes;
  unsigned char* recvData = b->recv.data() + kGuardBytes;
  bool inPlaceHere = c.inPlace && b->inCount > 0 && b->outCount > 0;
  if (inPlaceHere) {
    // Inputs sit inside the output buffer (or the output inside the input) as NCCL defines.
    // The larger buffer holds the smaller: input = output + off (elements).
    int64_t off = inPlaceInputOffset(a, rank);
    if (b->inCount > b->outCount) {
      b->sendPtr = sendData;
      b->recvPtr = sendData - off * static_cast<int64_t>(es);
    } else {
      b->recvPtr = recvData;
      b->sendPtr = recvData + off * static_cast<int64_t>(es);
    }
  } else {
    b->sendPtr = b->inCount ? sendData : nullptr;
    b->recvPtr = b->outCount ? recvData : nullptr;
  }
  for (uint64_t i = 0; i < b->inCount; ++i) {
    storeElement(const_cast<void*>(b->sendPtr), i, c.dtype, inputValue(c, rank, i));
  }
}

tribResult_t runCase(const Case& c, tribComm_t comm, RankBuffers* b) {
  const void* s = b->sendPtr;
  void* r = b->recvPtr;
  switch (c.coll) {
    case Coll::AllReduce:
      return tribAllReduce(s, r, c.count, c.dtype, c.op, comm, nullptr);
    case Coll::Reduce:
      return tribReduce(s, r, c.count, c.dtype, c.op, c.root, comm, nullptr);
    case Coll::Broadcast:
      return tribBroadcast(s, r, c.count, c.dtype, c.root, comm, nullptr);
    case Coll::AllGather:
      return tribAllGather(s, r, c.count, c.dtype, comm, nullptr);
    case Coll::ReduceScatter:
      return tribReduceScatter(s, r, c.count, c.dtype, c.op, comm, nullptr);
    case Coll::AlltoAll:
      return tribAlltoAll(s, r, c.count, c.dtype, comm, nullptr);
    case Coll::Gather:
      return tribGather(s, r, c.count, c.dtype, c.root, comm, nullptr);
    case Coll::Scatter:
      return tribScatter(s, r, c.count, c.dtype, c.root, comm, nullptr);
    case Coll::Barrier:
      return tribBarrier(comm, nullptr);
  }
  return tribInternalError;
}

std::string check(const Case& c, int rank, const RankBuffers& b) {
  std::string errors;
  int wrong = 0;
  const size_t es = dataTypeSize(c.dtype);
  const auto* out = static_cast<const unsigned char*>(b.recvPtr);
  if (out && b.outCount) {
    for (uint64_t i = 0; i < b.outCount; ++i) {
      double want = expectedValue(c, rank, i);
      if (std::isnan(want)) continue;
      double got = loadElement(out, i, c.dtype);
      // Exact everywhere, except a float average: one rounding of sum/n in the type.
      double tol = 0;
      if (c.op == tribAvg && hasOp(c.coll) && isFloatType(c.dtype)) {
        double eps = c.dtype == tribFloat64    ? 0x1p-52
                     : c.dtype == tribFloat32  ? 0x1p-23
                     : c.dtype == tribFloat16  ? 0x1p-10
                     : c.dtype == tribBfloat16 ? 0x1p-7
                     : c.dtype == tribFp8E4M3  ? 0x1p-3
                                               : 0x1p-2;
        tol = 2 * eps * std::max(std::fabs(want), 1.0);
      }
      if (!(std::fabs(got - want) <= tol)) {
        if (++wrong <= 5) {
          errors += "rank " + std::to_string(rank) + " element " + std::to_string(i) + ": got " +
                    std::to_string(got) + " want " + std::to_string(want) + "\n";
        }
      }
    }
  }
  auto guardsIntact = [](const CaseBytes& v, size_t dataBytes) {
    for (size_t i = 0; i < kGuardBytes; ++i) {
      if (v[i] != kGuard || v[kGuardBytes + dataBytes + i] != kGuard) return false;
    }
    return true;
  };
  if (!guardsIntact(b.recv, b.outCount * es))
    errors += "rank " + std::to_string(rank) + ": wrote outside recvbuff\n";
  if (!guardsIntact(b.send, b.inCount * es))
    errors += "rank " + std::to_string(rank) + ": wrote outside sendbuff\n";
  if (wrong > 5) errors += "... " + std::to_string(wrong) + " wrong elements in all\n";
  return errors;
}

// Every registered algorithm but those needing a collective offload (test_switch_comm runs this
// suite's cases through an aggregation switch). Peer-memory ones run over the loopback windows here
// and over the shm transport's in test_conformance_multiprocess.
static std::vector<const AlgoInfo*> algos(Coll c) {
  std::vector<const AlgoInfo*> out;
  for (const AlgoInfo* a : algorithmsFor(c))
    if (!needsOffload(a->algo)) out.push_back(a);
  return out;
}

std::vector<Case> structuralCases(const std::vector<int>& rankCounts, const std::vector<uint64_t>& counts) {
  std::vector<Case> out;
  for (int ci = 0; ci < kNumColls; ++ci) {
    Coll coll = static_cast<Coll>(ci);
    for (const AlgoInfo* a : algos(coll)) {
      for (int n : rankCounts) {
        for (uint64_t count : coll == Coll::Barrier ? std::vector<uint64_t>{0} : counts) {
          for (bool inPlace : {false, true}) {
            if (inPlace && !supportsInPlace(coll)) continue;
            std::vector<int> roots{0};
            if (hasRoot(coll) && n > 2) roots = {0, n - 1};
            for (int root : roots) {
              Case c;
              c.coll = coll;
              c.algo = algoName(a->algo);
              c.nranks = n;
              c.count = count;
              c.inPlace = inPlace;
              c.root = root;
              CollArgs args;
              args.coll = coll;
              args.nranks = n;
              args.count = count;
              args.root = root;
              if (!a->supports(args)) continue;
              out.push_back(c);
            }
          }
        }
      }
    }
  }
  return out;
}

std::vector<Case> arithmeticCases(const std::vector<int>& rankCounts, const std::vector<uint64_t>& counts) {
  std::vector<Case> out;
  for (Coll coll : {Coll::AllReduce, Coll::ReduceScatter, Coll::Reduce}) {
    for (const AlgoInfo* a : algos(coll)) {
      for (int t = 0; t < tribNumTypes; ++t) {
        for (int op = 0; op < tribNumOps; ++op) {
          for (int n : rankCounts) {
            for (uint64_t count : counts) {
              Case c;
              c.coll = coll;
              c.algo = algoName(a->algo);
              c.dtype = static_cast<DataType>(t);
              c.op = static_cast<RedOp>(op);
              c.nranks = n;
              c.count = count;
              c.root = n - 1;
              out.push_back(c);
            }
          }
        }
      }
    }
  }
  return out;
}

}  // namespace trib::conformance
