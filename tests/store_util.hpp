// Multi-process tests with a TCP store served by the test process. The children are forked
// BEFORE the server thread starts: forking a process that has other threads can leave a lock
// (allocator, sanitizer runtime) held forever in the child. Children wait on a pipe until the
// server is up, so they never race its start.
#pragma once
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <limits.h>
#include <unistd.h>

#include <functional>
#include <string>

#include "bootstrap/store.hpp"
#include "fork_util.hpp"

namespace trib::testing {

struct StoreRun {
  std::vector<ChildResult> results;  // empty if the server could not start
  std::vector<pid_t> pids;
  StoreServerStats stats;
  double ms = 0;  // from releasing the children to the last one's exit
  std::string error;
};

// Fork n children running body(rank, storeAddress); serve the store (options.listen is
// replaced) until they all finish or timeoutSec passes. The children are forked before the
// server's thread starts (a child of a threaded process may inherit a held lock), and the server
// listens on a port the kernel picks, which the children then read from a pipe: a port chosen
// earlier and bound later could be taken meanwhile by another test running in parallel.
inline StoreRun runWithStore(int n, int timeoutSec, StoreServerOptions options,
                             const std::function<int(int, const std::string&)>& body) {
  StoreRun run;
  constexpr size_t kAddrRecord = 64;  // one fixed-size record per child: the address, NUL-padded
  int go[2];
  if (static_cast<size_t>(n) * kAddrRecord > PIPE_BUF) {  // one atomic write, so no record is split
    run.error = "runWithStore: too many children for one pipe write";
    return run;
  }
  if (pipe(go) != 0) {
    run.error = "pipe failed";
    return run;
  }
  run.pids = forkChildren(n, timeoutSec, [&](int rank) {
    close(go[1]);
    char rec[kAddrRecord];
    size_t got = 0;
    while (got < kAddrRecord) {
      ssize_t r = read(go[0], rec + got, kAddrRecord - got);
      if (r <= 0) return 95;  // the server did not start
      got += static_cast<size_t>(r);
    }
    rec[kAddrRecord - 1] = '\0';
    return body(rank, std::string(rec));
  });
  close(go[0]);
  options.listen = "127.0.0.1:0";
  std::unique_ptr<TcpStoreServer> server;
  Status st = TcpStoreServer::start(options, &server);
  if (!st.ok()) {
    close(go[1]);  // children read EOF and exit
    waitChildren(run.pids, timeoutSec);
    run.error = st.message();
    return run;
  }
  auto t0 = std::chrono::steady_clock::now();
  std::string records;
  for (int i = 0; i < n; ++i) {
    std::string rec = server->address();
    rec.resize(kAddrRecord, '\0');
    records += rec;
  }
  if (write(go[1], records.data(), records.size()) != static_cast<ssize_t>(records.size()))
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
