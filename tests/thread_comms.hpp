// `n` ranks as threads of this process (tribCommInitAll), destroyed with the object; one thread
// drives them in groups. Shared by the API tests of issue 15.
#pragma once
#include <gtest/gtest.h>

#include <vector>

#include "tributary/tributary.h"

struct ThreadComms {
  explicit ThreadComms(int n) : c(n) {
    EXPECT_EQ(tribCommInitAll(c.data(), n, nullptr), tribSuccess) << tribGetLastError(nullptr);
  }
  ~ThreadComms() {
    for (tribComm_t x : c) EXPECT_EQ(tribCommDestroy(x), tribSuccess) << tribGetLastError(nullptr);
  }
  ThreadComms(const ThreadComms&) = delete;
  ThreadComms& operator=(const ThreadComms&) = delete;
  std::vector<tribComm_t> c;
};
