// Loopback addresses for tests that need a port before (or without) a server on it.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>

#include "bootstrap/net.hpp"

namespace trib::testing {

// "127.0.0.1:PORT" for a port free now and below the kernel's ephemeral range, for a test that
// must know a server's address before it listens there (or that nothing listens there). A port found by
// binding port 0 comes from that range, and once freed it can be taken before the server binds it: as the
// local port of any connection or listener opened meanwhile (a UCX worker binds its own TCP ports; so do the
// tests ctest runs beside this one). Below the range only an explicit bind takes it.
inline std::string freeListenAddress() {
  int ephemeralLow = 32768;  // Linux's default first ephemeral port
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    if (std::fscanf(f, "%d", &ephemeralLow) != 1) ephemeralLow = 32768;
    std::fclose(f);
  }
  const int first = 10000, span = std::max(1, ephemeralLow - first);
  std::random_device seed;
  for (int tries = 0; tries < 200; ++tries) {
    const std::string addr = "127.0.0.1:" + std::to_string(first + static_cast<int>(seed() % span));
    net::SockAddr sa, bound;
    int fd = -1;
    if (net::parseHostPort(addr, &sa).ok() && net::listenOn(sa, &fd, &bound).ok()) {
      close(fd);
      return addr;
    }
  }
  ADD_FAILURE() << "no free port below " << ephemeralLow;
  return "127.0.0.1:0";
}

}  // namespace trib::testing
