// Configuration by environment. Every variable is declared once, with its default and its
// documentation, in env.cpp's table; `trib-info` prints the table. Reading an undeclared
// variable is a programming error (caught in tests), so the docs cannot drift from the code.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace trib {

struct EnvVarInfo {
  const char* name;
  const char* defaultValue;  // "" = unset
  const char* doc;
};
const std::vector<EnvVarInfo>& envVars();

// The variable's value, or its declared default. Aborts on an undeclared name.
std::string envString(const char* name);
// Parsed values; an unparsable value falls back to the default with a WARN naming the variable.
int64_t envInt(const char* name);
double envDouble(const char* name);
bool envBool(const char* name);  // 1/0, true/false, yes/no, on/off

}  // namespace trib
