// Small text helpers shared by the parsers (TRIB_ALGO / TRIB_TUNE, topology files) and messages.
#pragma once
#include <string>
#include <vector>

namespace trib {

// Splits `s` at every `sep` (empty fields kept: "a,,b" -> {"a", "", "b"}). With dropBlanks,
// spaces and tabs are removed from the fields ("ring, tree" -> {"ring", "tree"}).
inline std::vector<std::string> splitOn(const std::string& s, char sep, bool dropBlanks = false) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else if (!dropBlanks || (c != ' ' && c != '\t')) {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

// "rank 3" / "ranks 3, 5" (with one = "rank", many = "ranks"); "" for an empty list.
inline std::string nameList(const char* one, const char* many, const std::vector<int>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i)
    out += (i ? ", " : std::string(items.size() == 1 ? one : many) + " ") + std::to_string(items[i]);
  return out;
}

}  // namespace trib
