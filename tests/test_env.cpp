// The environment-variable table is the single declaration of every TRIB_* variable.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <string>

#include "common/env.hpp"

namespace {

TEST(Env, EveryVariableDeclaredOnceWithDocs) {
  std::set<std::string> seen;
  for (const trib::EnvVarInfo& v : trib::envVars()) {
    EXPECT_TRUE(seen.insert(v.name).second) << v.name << " is declared twice";
    EXPECT_EQ(std::string(v.name).rfind("TRIB_", 0), 0u) << v.name;
    EXPECT_GT(std::string(v.doc).size(), 10u) << v.name << " needs a doc string";
  }
}

TEST(Env, ParsedValuesAndFallbacks) {
  setenv("TRIB_TIMEOUT", "2.5", 1);
  EXPECT_DOUBLE_EQ(trib::envDouble("TRIB_TIMEOUT"), 2.5);
  setenv("TRIB_TIMEOUT", "soon", 1);  // unparsable: the declared default (300), with a warning
  EXPECT_DOUBLE_EQ(trib::envDouble("TRIB_TIMEOUT"), 300.0);
  unsetenv("TRIB_TIMEOUT");
  setenv("TRIB_SHM_CMA", "off", 1);
  EXPECT_FALSE(trib::envBool("TRIB_SHM_CMA"));
  setenv("TRIB_SHM_CMA", "yes", 1);
  EXPECT_TRUE(trib::envBool("TRIB_SHM_CMA"));
  unsetenv("TRIB_SHM_CMA");
  setenv("TRIB_CHUNK_BYTES", "0x1000", 1);
  EXPECT_EQ(trib::envInt("TRIB_CHUNK_BYTES"), 4096);
  unsetenv("TRIB_CHUNK_BYTES");
}

TEST(EnvDeathTest, UndeclaredVariableIsAProgrammingError) {
  EXPECT_DEATH(trib::envString("TRIB_NOT_DECLARED"), "not declared");
}

}  // namespace
