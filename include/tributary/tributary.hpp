// Tributary C++ API: RAII communicators and requests, std::span buffers, typed overloads,
// and exceptions (tributary::Error) mapped from the C ABI's result codes.
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tributary/tributary.h"

namespace tributary {

class Error : public std::runtime_error {
 public:
  Error(tribResult_t code, const std::string& what) : std::runtime_error(what), code_(code) {}
  tribResult_t code() const { return code_; }

 private:
  tribResult_t code_;
};

inline void check(tribResult_t r) {
  if (r != tribSuccess) {
    throw Error(r, std::string(tribGetErrorString(r)) + ": " + tribGetLastError(nullptr));
  }
}

template <typename T>
struct DataTypeOf;
#define TRIB_CXX_DTYPE(T, V)                   \
  template <>                                  \
  struct DataTypeOf<T> {                       \
    static constexpr tribDataType_t value = V; \
  }
TRIB_CXX_DTYPE(int8_t, tribInt8);
TRIB_CXX_DTYPE(uint8_t, tribUint8);
TRIB_CXX_DTYPE(int32_t, tribInt32);
TRIB_CXX_DTYPE(uint32_t, tribUint32);
TRIB_CXX_DTYPE(int64_t, tribInt64);
TRIB_CXX_DTYPE(uint64_t, tribUint64);
TRIB_CXX_DTYPE(float, tribFloat32);
TRIB_CXX_DTYPE(double, tribFloat64);
#undef TRIB_CXX_DTYPE
template <typename T>
constexpr tribDataType_t dtypeOf = DataTypeOf<std::remove_const_t<T>>::value;

enum class Op { Sum = tribSum, Prod = tribProd, Min = tribMin, Max = tribMax, Avg = tribAvg };

// `n` elements of shareable memory (tribMemAlloc): other processes of the host can map it. Move-only.
template <typename T>
class SharedBuffer {
 public:
  SharedBuffer() = default;
  explicit SharedBuffer(size_t n) : n_(n) {
    if (n > SIZE_MAX / sizeof(T)) throw Error(tribInvalidArgument, "SharedBuffer: element count overflows");
    void* p = nullptr;
    check(tribMemAlloc(&p, n ? n * sizeof(T) : 1));
    p_ = static_cast<T*>(p);
  }
  SharedBuffer(SharedBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  SharedBuffer& operator=(SharedBuffer&& o) noexcept {
    if (this != &o) {
      tribMemFree(p_);
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  ~SharedBuffer() { tribMemFree(p_); }
  T* data() const { return p_; }
  size_t size() const { return n_; }
  T& operator[](size_t i) const { return p_[i]; }
  std::span<T> span() const { return {p_, n_}; }
  operator std::span<T>() const { return span(); }
  operator std::span<const T>() const { return {p_, n_}; }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

// A non-blocking operation. Destroying one still running waits for it (its buffers must not be
// freed under it): quietly for up to a second, then with a warning on stderr naming the operation,
// up to the communicator's timeout. wait() or test() it first to avoid that.
class Request {
 public:
  Request() = default;
  explicit Request(tribRequest_t r) : req_(r) {}
  Request(Request&& o) noexcept : req_(std::exchange(o.req_, nullptr)) {}
  Request& operator=(Request&& o) noexcept {
    if (this != &o) {
      finish();
      req_ = std::exchange(o.req_, nullptr);
    }
    return *this;
  }
  ~Request() { finish(); }

  bool test() {
    if (!req_) return true;
    int done = 0;
    check(tribTest(&req_, &done));
    return done != 0;
  }
  // Returns false if `timeout` passed first (the request stays valid).
  bool wait(std::chrono::milliseconds timeout) {
    if (!req_) return true;
    tribResult_t r = tribWait(&req_, static_cast<int>(timeout.count()));
    if (r == tribTimeout && req_) return false;
    check(r);
    return true;
  }
  void wait() {
    if (req_) check(tribWait(&req_, TRIB_TIMEOUT_DEFAULT));
  }

 private:
  static constexpr int kQuietWaitMs = 1000;
  void finish() noexcept {
    if (!req_) return;
    tribResult_t r = tribWait(&req_, kQuietWaitMs);
    if (r == tribTimeout && req_) {
      std::fprintf(
          stderr,
          "tributary::Request destroyed while its operation is still running after %d ms: waiting for "
          "it up to the communicator's timeout (wait() or test() a Request before destroying it)\n",
          kQuietWaitMs);
      r = tribWait(&req_, TRIB_TIMEOUT_DEFAULT);
    }
    if (r != tribSuccess && req_) tribRequestFree(&req_);
  }
  tribRequest_t req_ = nullptr;
};

class Communicator {
 public:
  Communicator() = default;
  explicit Communicator(tribComm_t c) : comm_(c) {}
  Communicator(Communicator&& o) noexcept : comm_(std::exchange(o.comm_, nullptr)) {}
  Communicator& operator=(Communicator&& o) noexcept {
    if (this != &o) {
      reset();
      comm_ = std::exchange(o.comm_, nullptr);
    }
    return *this;
  }
  ~Communicator() { reset(); }

  // N ranks in this process (threads; loopback). Drive them from N threads, or from one thread
  // inside a Group.
  static std::vector<Communicator> createLocal(int n) {
    std::vector<tribComm_t> raw(static_cast<size_t>(n));
    check(tribCommInitAll(raw.data(), n, nullptr));
    std::vector<Communicator> out;
    for (tribComm_t c : raw) out.emplace_back(c);
    return out;
  }
  static tribUniqueId uniqueId() {
    tribUniqueId id;
    check(tribGetUniqueId(&id));
    return id;
  }
  static Communicator initRank(int nranks, const tribUniqueId& id, int rank,
                               const tribConfig_t* config = nullptr) {
    tribComm_t c = nullptr;
    check(tribCommInitRankConfig(&c, nranks, id, rank, config));
    return Communicator(c);
  }
  // The rendezvous over several stores (tribCommInitRankScalable): the same ids on every rank.
  static Communicator initRankScalable(int nranks, int rank, const std::vector<tribUniqueId>& ids,
                                       const tribConfig_t* config = nullptr) {
    tribComm_t c = nullptr;
    check(tribCommInitRankScalable(&c, nranks, rank, static_cast<int>(ids.size()), ids.data(), config));
    return Communicator(c);
  }

  tribComm_t get() const { return comm_; }
  int rank() const {
    int r = 0;
    check(tribCommUserRank(comm_, &r));
    return r;
  }
  int size() const {
    int n = 0;
    check(tribCommCount(comm_, &n));
    return n;
  }
  void abort() { check(tribCommAbort(comm_)); }
  Communicator split(int color, int key) {
    tribComm_t c = nullptr;
    check(tribCommSplit(comm_, color, key, &c, nullptr));
    return Communicator(c);
  }

  template <typename T>
  void allReduce(std::span<const T> send, std::span<T> recv, Op op = Op::Sum) {
    sameSize(send.size(), recv.size(), "allReduce");
    check(tribAllReduce(send.data(), recv.data(), send.size(), dtypeOf<T>, raw(op), comm_, nullptr));
  }
  template <typename T>
  void allReduce(std::span<T> inout, Op op = Op::Sum) {
    check(tribAllReduce(inout.data(), inout.data(), inout.size(), dtypeOf<T>, raw(op), comm_, nullptr));
  }
  template <typename T>
  Request iallReduce(std::span<const T> send, std::span<T> recv, Op op = Op::Sum) {
    sameSize(send.size(), recv.size(), "iallReduce");
    tribRequest_t r = nullptr;
    check(tribIallReduce(send.data(), recv.data(), send.size(), dtypeOf<T>, raw(op), comm_, &r));
    return Request(r);
  }
  template <typename T>
  void reduce(std::span<const T> send, std::span<T> recv, int root, Op op = Op::Sum) {
    check(tribReduce(send.data(), recv.data(), send.size(), dtypeOf<T>, raw(op), root, comm_, nullptr));
  }
  template <typename T>
  void broadcast(std::span<T> buf, int root) {
    check(tribBroadcast(buf.data(), buf.data(), buf.size(), dtypeOf<T>, root, comm_, nullptr));
  }
  template <typename T>
  void allGather(std::span<const T> send, std::span<T> recv) {
    sameSize(send.size() * static_cast<size_t>(size()), recv.size(), "allGather (recv = size() x send)");
    check(tribAllGather(send.data(), recv.data(), send.size(), dtypeOf<T>, comm_, nullptr));
  }
  template <typename T>
  void reduceScatter(std::span<const T> send, std::span<T> recv, Op op = Op::Sum) {
    sameSize(send.size(), recv.size() * static_cast<size_t>(size()), "reduceScatter (send = size() x recv)");
    check(tribReduceScatter(send.data(), recv.data(), recv.size(), dtypeOf<T>, raw(op), comm_, nullptr));
  }
  template <typename T>
  void alltoAll(std::span<const T> send, std::span<T> recv) {
    sameSize(send.size(), recv.size(), "alltoAll");
    const size_t n = static_cast<size_t>(size());
    if (send.size() % n != 0) {  // refused rather than truncated to a multiple
      throw Error(tribInvalidArgument, "alltoAll: " + std::to_string(send.size()) +
                                           " elements do not divide into equal blocks for " +
                                           std::to_string(n) + " ranks");
    }
    check(tribAlltoAll(send.data(), recv.data(), send.size() / n, dtypeOf<T>, comm_, nullptr));
  }
  template <typename T>
  void send(std::span<const T> buf, int peer) {
    check(tribSend(buf.data(), buf.size(), dtypeOf<T>, peer, comm_, nullptr));
  }
  template <typename T>
  void recv(std::span<T> buf, int peer) {
    check(tribRecv(buf.data(), buf.size(), dtypeOf<T>, peer, comm_, nullptr));
  }
  void barrier() { check(tribBarrier(comm_, nullptr)); }

 private:
  static tribRedOp_t raw(Op op) { return static_cast<tribRedOp_t>(op); }
  static void sameSize(size_t a, size_t b, const char* what) {
    if (a != b) throw Error(tribInvalidArgument, std::string(what) + ": buffer sizes do not match");
  }
  void reset() noexcept {
    if (comm_) tribCommDestroy(comm_);
    comm_ = nullptr;
  }
  tribComm_t comm_ = nullptr;
};

// Scope of a group call: launches queued operations at end(); the destructor ends it too.
class Group {
 public:
  Group() { check(tribGroupStart()); }
  ~Group() {
    if (open_) tribGroupEnd();
  }
  void end() {
    open_ = false;
    check(tribGroupEnd());
  }

 private:
  bool open_ = true;
};

}  // namespace tributary
