// trib-switchd: a software aggregation switch (one node of an in-network reduction tree).
//   trib-switchd --listen host:port [--parent host:port] --slots N --slot-bytes B --key KEY
//                [--link tcp|ucx]
// Prints "trib-switchd listening on HOST:PORT" once ready (port 0 picks one), then serves until
// SIGINT/SIGTERM. See docs/SWITCH.md.
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/env.hpp"
#include "transports/switch/switch_node.hpp"

namespace {

std::atomic<bool> gStop{false};
void onSignal(int) { gStop = true; }

int usage(const char* why) {
  std::fprintf(stderr,
               "trib-switchd: %s\n"
               "usage: trib-switchd --listen host:port [--parent host:port] [--slots N] [--slot-bytes B] "
               "[--key KEY] [--link tcp|ucx]\n"
               "  --slots       aggregation slots shared by all groups (default 64)\n"
               "  --slot-bytes  bytes per slot = the largest chunk (default 262144)\n"
               "  --key         key ranks must present (default: $TRIB_SWITCH_KEY, else $TRIB_AUTH_KEY)\n"
               "  --link        tcp (default) or ucx: links to ranks and to the parent (ranks set\n"
               "                TRIB_SWITCH_LINK to the same)\n",
               why);
  return 2;
}

bool parseU64(const char* s, uint64_t* out) {
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(s, &end, 10);
  if (errno || !end || *end || s[0] == '-' || s[0] == '\0') return false;
  *out = v;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  trib::sw::SwitchConfig cfg;
  cfg.key = trib::envString("TRIB_SWITCH_KEY");
  if (cfg.key.empty()) cfg.key = trib::envString("TRIB_AUTH_KEY");
  bool haveListen = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      usage("help");
      return 0;
    }
    if (i + 1 >= argc) return usage(("missing value after " + a).c_str());
    const char* v = argv[++i];
    uint64_t n = 0;
    if (a == "--listen") {
      cfg.listen = v;
      haveListen = true;
    } else if (a == "--parent") {
      cfg.parent = v;
    } else if (a == "--link") {
      trib::Status ls = trib::sw::parseLinkKind(v, &cfg.link);
      if (!ls.ok()) return usage(ls.message().c_str());
      if (!trib::sw::linkKindAvailable(cfg.link))
        return usage("--link ucx needs a build with UCX: install libucx-dev and rebuild (or use --link tcp)");
    } else if (a == "--key") {
      cfg.key = v;
    } else if (a == "--slots") {
      if (!parseU64(v, &n) || n == 0 || n > 1u << 20) return usage("--slots wants an integer in 1..1048576");
      cfg.slots = static_cast<uint32_t>(n);
    } else if (a == "--slot-bytes") {
      if (!parseU64(v, &n) || n < 64 || n > 1u << 30)
        return usage("--slot-bytes wants an integer in 64..2^30");
      cfg.slotBytes = n;
    } else {
      return usage(("unknown option " + a).c_str());
    }
  }
  if (!haveListen) return usage("--listen host:port is required");
  std::unique_ptr<trib::sw::SwitchNode> node;
  trib::Status s = trib::sw::SwitchNode::create(cfg, &node);
  if (!s.ok()) {
    std::fprintf(stderr, "trib-switchd: %s\n", s.message().c_str());
    return 1;
  }
  std::signal(SIGINT, onSignal);
  std::signal(SIGTERM, onSignal);
  std::signal(SIGPIPE, SIG_IGN);
  std::printf("trib-switchd listening on %s (%s links, %u slots of %llu bytes%s%s)\n",
              node->address().c_str(), trib::sw::linkKindName(cfg.link), cfg.slots,
              static_cast<unsigned long long>(cfg.slotBytes), cfg.parent.empty() ? "" : ", parent ",
              cfg.parent.c_str());
  std::fflush(stdout);
  s = node->run(gStop);
  auto st = node->stats();
  std::fprintf(stderr, "trib-switchd: stopping: %llu chunks reduced, %llu disconnects, %llu groups ended\n",
               static_cast<unsigned long long>(st.chunksReduced),
               static_cast<unsigned long long>(st.disconnects),
               static_cast<unsigned long long>(st.groupsEnded));
  return s.ok() ? 0 : 1;
}
