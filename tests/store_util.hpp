// Multi-process tests with a TCP store served by the test process. The children are forked
// BEFORE the server thread starts: forking a process that has other threads can leave a lock
// (allocator, sanitizer runtime) held forever in the child. Children wait on a pipe until the
// server is up, so they never race its start.
#pragma once
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <string>

#include "bootstrap/store.hpp"
#include "fork_util.hpp"

namespace trib::testing {

// A loopback address with a port that was free a moment ago.
inline std::string freeLocalAddress() {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  close(s);
  return "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
}

struct StoreRun {
  std::vector<ChildResult> results;  // empty if the server could not start
  std::vector<pid_t> pids;
  StoreServerStats stats;
  double ms = 0;  // from releasing the children to the last one's exit
  std::string error;
};

// Fork n children running body(rank, storeAddress); serve the store (options.listen is
// replaced) until they all finish or timeoutSec passes.
inline StoreRun runWithStore(int n, int timeoutSec, StoreServerOptions options,
                             const std::function<int(int, const std::string&)>& body) {
  StoreRun run;
  std::string addr = freeLocalAddress();
  int go[2];
  if (pipe(go) != 0) {
    run.error = "pipe failed";
    return run;
  }
  run.pids = forkChildren(n, timeoutSec, [&](int rank) {
    close(go[1]);
    char c;
    if (read(go[0], &c, 1) != 1) return 95;  // the server did not start
    return body(rank, addr);
  });
  close(go[0]);
  options.listen = addr;
  std::unique_ptr<TcpStoreServer> server;
  Status st = TcpStoreServer::start(options, &server);
  if (!st.ok()) {
    close(go[1]);  // children read EOF and exit
    waitChildren(run.pids, timeoutSec);
    run.error = st.message();
    return run;
  }
  auto t0 = std::chrono::steady_clock::now();
  std::string bytes(n, 'g');
  if (write(go[1], bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size()))
    run.error = "pipe write";
  close(go[1]);
  run.results = waitChildren(run.pids, timeoutSec);
  run.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  run.stats = server->stats();
  return run;
}

inline StoreServerOptions storeOptions(const std::string& key,
                                       size_t maxMessage = storeproto::kDefaultMaxMessage) {
  StoreServerOptions o;
  o.authKey = key;
  o.maxMessageBytes = maxMessage;
  return o;
}

}  // namespace trib::testing
