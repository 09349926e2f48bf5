// Names and parsing for collectives, algorithms and steps (shared by tools, env parsing, logs).
#include <cstring>

#include "algo/schedule.hpp"
#include "common/status.hpp"

namespace trib {

const char* collName(Coll c) {
  static const char* const names[kNumColls] = {"allreduce", "reduce",        "broadcast",
                                               "allgather", "reducescatter", "alltoall",
                                               "gather",    "scatter",       "barrier"};
  auto i = static_cast<int>(c);
  return i >= 0 && i < kNumColls ? names[i] : "invalid";
}

bool parseColl(const std::string& s, Coll* out) {
  for (int i = 0; i < kNumColls; ++i) {
    if (s == collName(static_cast<Coll>(i))) {
      *out = static_cast<Coll>(i);
      return true;
    }
  }
  return false;
}

double busBandwidthFactor(Coll c, int n) {
  if (n <= 1) return 1.0;
  switch (c) {
    case Coll::AllReduce:
      return 2.0 * (n - 1) / n;
    case Coll::AllGather:
    case Coll::ReduceScatter:
    case Coll::AlltoAll:
      return static_cast<double>(n - 1) / n;
    default:
      return 1.0;
  }
}

const char* algoName(Algo a) {
  static const char* const names[kNumAlgos] = {"ring",     "tree",        "rhd",          "direct",
                                               "binomial", "chain",       "hierarchical", "switch",
                                               "oneshot",  "hier_switch", "twoshot",      "allgather_reduce"};
  auto i = static_cast<int>(a);
  return i >= 0 && i < kNumAlgos ? names[i] : "invalid";
}

const char* algoNeeds(Algo a) {
  switch (a) {
    case Algo::Hierarchical:
      return "ranks in several equal domains: hosts or NVLink domains";
    case Algo::Switch:
      return "an attached aggregation switch: TRIB_SWITCH, or a topology switch with addr=";
    case Algo::HierSwitch:
      return "an attached aggregation switch and ranks in several equal domains";
    case Algo::OneShot:
    case Algo::TwoShot:
      return "every rank's window mapped (processes on one host: the shm transport's windows)";
    default:
      return nullptr;
  }
}

bool parseAlgo(const std::string& s, Algo* out) {
  for (int i = 0; i < kNumAlgos; ++i) {
    if (s == algoName(static_cast<Algo>(i))) {
      *out = static_cast<Algo>(i);
      return true;
    }
  }
  return false;
}

const char* stepKindName(StepKind k) {
  switch (k) {
    case StepKind::Send:
      return "send";
    case StepKind::Recv:
      return "recv";
    case StepKind::RecvReduce:
      return "recv_reduce";
    case StepKind::Copy:
      return "copy";
    case StepKind::Reduce:
      return "reduce";
    case StepKind::SwitchReduce:
      return "switch_reduce";
    case StepKind::Put:
      return "put";
    case StepKind::Get:
      return "get";
    case StepKind::GetReduce:
      return "get_reduce";
    case StepKind::Signal:
      return "signal";
    case StepKind::Wait:
      return "wait";
    case StepKind::Expose:
      return "expose";
  }
  return "invalid";
}

static std::string regionText(const Region& r) {
  static const char* const bufs[kNumBufs] = {"in", "out", "scratch", "win"};
  return strprintf("%s[%llu+%llu]", bufs[static_cast<int>(r.buf)], static_cast<unsigned long long>(r.offset),
                   static_cast<unsigned long long>(r.count));
}

std::string describeStep(const Step& s) {
  switch (s.kind) {
    case StepKind::Send:
      return strprintf("send(to %d, %s)", s.peer, regionText(s.src).c_str());
    case StepKind::Recv:
      return strprintf("recv(from %d, %s)", s.peer, regionText(s.dst).c_str());
    case StepKind::RecvReduce:
      return strprintf("recv_reduce(from %d, %s -> %s)", s.peer, regionText(s.src).c_str(),
                       regionText(s.dst).c_str());
    case StepKind::Copy:
    case StepKind::Expose:
      return strprintf("%s(%s -> %s)", stepKindName(s.kind), regionText(s.src).c_str(),
                       regionText(s.dst).c_str());
    case StepKind::Reduce:
      return strprintf("reduce(%s into %s)", regionText(s.src).c_str(), regionText(s.dst).c_str());
    case StepKind::SwitchReduce:
      if (s.peer >= 2)
        return strprintf("switch_reduce(stride %d, %s -> %s)", s.peer, regionText(s.src).c_str(),
                         regionText(s.dst).c_str());
      return strprintf("switch_reduce(%s -> %s)", regionText(s.src).c_str(), regionText(s.dst).c_str());
    case StepKind::Put:
      return strprintf("put(%s -> peer %d %s)", regionText(s.src).c_str(), s.peer, regionText(s.dst).c_str());
    case StepKind::Get:
    case StepKind::GetReduce:
      return strprintf("%s(peer %d %s -> %s)", stepKindName(s.kind), s.peer, regionText(s.src).c_str(),
                       regionText(s.dst).c_str());
    case StepKind::Signal:
      return strprintf("signal(to %d)", s.peer);
    case StepKind::Wait:
      return strprintf("wait(for %d)", s.peer);
  }
  return "invalid";
}

}  // namespace trib
