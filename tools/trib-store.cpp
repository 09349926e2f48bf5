// trib-store: a standalone rendezvous store for jobs that set TRIB_STORE=host:port.
// Usage: TRIB_AUTH_KEY=<secret> trib-store [--listen host:port] [--max-message BYTES]
// Serves until SIGINT/SIGTERM. The job key comes from the environment, never the command line
// (which other users can read in ps).
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "bootstrap/store.hpp"
#include "common/env.hpp"

int main(int argc, char** argv) {
  trib::StoreServerOptions opt;
  opt.listen = "127.0.0.1:29400";
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--listen") && i + 1 < argc) {
      opt.listen = argv[++i];
    } else if (!std::strcmp(argv[i], "--max-message") && i + 1 < argc) {
      opt.maxMessageBytes = std::strtoull(argv[++i], nullptr, 10);
    } else {
      std::fprintf(stderr,
                   "usage: TRIB_AUTH_KEY=<secret> %s [--listen host:port] [--max-message BYTES]\n"
                   "Serves the Tributary rendezvous store; ranks find it with TRIB_STORE=host:port and the\n"
                   "same TRIB_AUTH_KEY.\n",
                   argv[0]);
      return 2;
    }
  }
  const std::string keyValue = trib::envString("TRIB_AUTH_KEY");
  const char* key = keyValue.c_str();
  if (!*key) {
    std::fprintf(stderr, "trib-store: set TRIB_AUTH_KEY to the job's secret key\n");
    return 2;
  }
  opt.authKey = key;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // the server thread inherits the mask
  std::unique_ptr<trib::TcpStoreServer> server;
  trib::Status st = trib::TcpStoreServer::start(opt, &server);
  if (!st.ok()) {
    std::fprintf(stderr, "trib-store: %s\n", st.message().c_str());
    return 1;
  }
  std::printf("trib-store listening on %s\n", server->address().c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&set, &sig);
  server->stop();
  return 0;
}
