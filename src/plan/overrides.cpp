// TRIB_ALGO / TRIB_TUNE / TRIB_PROTO strings and their sizes (planner.hpp): what the user wrote, parsed apart
// from the planner that applies it (tests/fuzz reads these alone).
#include <cctype>
#include <cmath>
#include <cstdlib>

#include "common/text.hpp"
#include "plan/planner.hpp"

namespace trib {
namespace {

// Override specs ignore blanks: "ring, tree" is "ring,tree".
std::vector<std::string> split(const std::string& s, char sep) { return splitOn(s, sep, true); }

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Parses "ring,tree" into a bit set of PlanAlgo.
Status parseAlgoList(const std::string& list, uint32_t* bits, const std::string& whole) {
  *bits = 0;
  for (const auto& name : split(list, ',')) {
    PlanAlgo a;
    if (name.empty()) continue;
    if (!parsePlanAlgo(lower(name), &a))
      return errorf(tribInvalidArgument, "TRIB_ALGO '%s': unknown algorithm '%s' (%s)", whole.c_str(),
                    name.c_str(), planAlgoNames().c_str());
    *bits |= 1u << static_cast<int>(a);
  }
  if (!*bits) return errorf(tribInvalidArgument, "TRIB_ALGO '%s': empty algorithm list", whole.c_str());
  return Status::Ok();
}

}  // namespace

Status parseAlgoOverride(const std::string& spec, AlgoFilter* out) {
  AlgoFilter f;
  for (const auto& part : split(spec, ';')) {
    if (part.empty()) continue;
    std::string colls = "", list = part;
    auto colon = part.find(':');
    if (colon != std::string::npos) colls = part.substr(0, colon), list = part.substr(colon + 1);
    bool exclude = !list.empty() && list[0] == '^';
    uint32_t bits;
    TRIB_RETURN_IF_ERROR(parseAlgoList(exclude ? list.substr(1) : list, &bits, spec));
    uint32_t allowed = exclude ? ~bits : bits;
    std::vector<int> targets;
    if (colls.empty()) {
      for (int c = 0; c < kNumColls; ++c) targets.push_back(c);
    } else {
      for (const auto& cn : split(colls, ',')) {
        Coll c;
        if (!parseColl(lower(cn), &c))
          return errorf(tribInvalidArgument,
                        "TRIB_ALGO '%s': unknown collective '%s' (allreduce, broadcast, ...)", spec.c_str(),
                        cn.c_str());
        targets.push_back(static_cast<int>(c));
      }
    }
    for (int c : targets) f.allowed[c] = allowed, f.set[c] = true;
  }
  *out = f;
  return Status::Ok();
}

Status parseProtocolOverride(const std::string& spec, uint32_t* allowed) {
  const uint32_t all = (1u << kNumProtocols) - 1;
  const std::vector<std::string> blank = split(spec, ',');
  if (blank.size() == 1 && blank[0].empty()) {
    *allowed = all;
    return Status::Ok();
  }
  const bool negate = !blank[0].empty() && blank[0][0] == '^';
  uint32_t named = 0;
  for (const auto& item : split(negate ? spec.substr(spec.find('^') + 1) : spec, ',')) {
    Protocol p;
    if (!parseProtocol(item, &p))
      return errorf(tribInvalidArgument, "TRIB_PROTO '%s': unknown protocol '%s' (LL, LL128, Simple)",
                    spec.c_str(), item.c_str());
    named |= 1u << static_cast<int>(p);
  }
  *allowed = negate ? all & ~named : named;
  if (!*allowed) return errorf(tribInvalidArgument, "TRIB_PROTO '%s' allows no protocol", spec.c_str());
  return Status::Ok();
}

Status parseSize(const std::string& s, uint64_t* out) {
  std::string v = lower(s);
  if (v == "inf" || v == "max") {
    *out = UINT64_MAX;
    return Status::Ok();
  }
  char* end = nullptr;
  double d = std::strtod(v.c_str(), &end);
  if (v.empty() || end == v.c_str() || !(d >= 0))
    return errorf(tribInvalidArgument, "size '%s' is not a byte count (e.g. 8, 64k, 1M, 1G, inf)", s.c_str());
  std::string suf = end;
  if (!suf.empty() && suf.back() == 'b') suf.pop_back();  // "1gb", "64kb"
  if (!suf.empty() && suf.back() == 'i') suf.pop_back();  // "1gi" from "1GiB"
  double mult = 1;
  if (suf == "k")
    mult = 1024.0;
  else if (suf == "m")
    mult = 1024.0 * 1024;
  else if (suf == "g")
    mult = 1024.0 * 1024 * 1024;
  else if (suf == "t")
    mult = 1024.0 * 1024 * 1024 * 1024;
  else if (!suf.empty())
    return errorf(tribInvalidArgument, "size '%s': unknown suffix '%s' (k, M, G, T)", s.c_str(), end);
  double b = d * mult;
  if (b > 1.8e19) return errorf(tribInvalidArgument, "size '%s' is too large", s.c_str());
  *out = static_cast<uint64_t>(std::round(b));  // not llround: a long long ends at 9.2e18
  return Status::Ok();
}

Status parseTuneString(const std::string& spec, std::vector<TuneRule>* out) {
  std::vector<TuneRule> rules;
  for (const auto& entry : split(spec, '#')) {
    if (entry.empty()) continue;
    TuneRule r;
    bool haveAlgo = false, haveColl = false;
    for (const auto& field : split(entry, ':')) {
      if (field.empty()) continue;
      if (field[0] == '@') {
        if (!parsePlanAlgo(lower(field.substr(1)), &r.algo))
          return errorf(tribInvalidArgument, "TRIB_TUNE entry '%s': unknown algorithm '%s'", entry.c_str(),
                        field.c_str() + 1);
        haveAlgo = true;
      } else if (field.rfind("ranks=", 0) == 0) {
        auto rng = split(field.substr(6), '-');
        char* e1 = nullptr;
        char* e2 = nullptr;
        long lo = std::strtol(rng[0].c_str(), &e1, 10);
        long hi = rng.size() > 1 ? (rng[1] == "inf" ? INT32_MAX : std::strtol(rng[1].c_str(), &e2, 10)) : lo;
        // A count past INT32_MAX would wrap in the int it is stored in (found by fuzz_algo_tune).
        if (rng.size() > 2 || *e1 || (e2 && *e2) || lo < 1 || hi < lo || hi > INT32_MAX)
          return errorf(tribInvalidArgument, "TRIB_TUNE entry '%s': bad rank range '%s' (e.g. ranks=2-64)",
                        entry.c_str(), field.c_str());
        r.minRanks = static_cast<int>(lo);
        r.maxRanks = static_cast<int>(hi);
      } else if (std::isdigit(static_cast<unsigned char>(field[0]))) {
        auto rng = split(field, '-');
        if (rng.size() != 2)
          return errorf(tribInvalidArgument,
                        "TRIB_TUNE entry '%s': size range '%s' must be LO-HI (e.g. 0-64k)", entry.c_str(),
                        field.c_str());
        TRIB_RETURN_IF_ERROR(parseSize(rng[0], &r.lo).prefix("TRIB_TUNE: "));
        TRIB_RETURN_IF_ERROR(parseSize(rng[1], &r.hi).prefix("TRIB_TUNE: "));
        if (r.hi <= r.lo)
          return errorf(tribInvalidArgument, "TRIB_TUNE entry '%s': empty size range '%s'", entry.c_str(),
                        field.c_str());
      } else {
        for (const auto& cn : split(field, ',')) {
          Coll c;
          if (cn == "all") {
            r.collMask = ~0u;
          } else if (parseColl(lower(cn), &c)) {
            r.collMask |= 1u << static_cast<int>(c);
          } else {
            return errorf(tribInvalidArgument,
                          "TRIB_TUNE entry '%s': '%s' is not a collective, size range, ranks=, or @algorithm",
                          entry.c_str(), cn.c_str());
          }
        }
        haveColl = true;
      }
    }
    if (!haveAlgo)
      return errorf(tribInvalidArgument, "TRIB_TUNE entry '%s' names no algorithm (add @ring, @tree, ...)",
                    entry.c_str());
    if (!haveColl) r.collMask = ~0u;
    rules.push_back(r);
  }
  *out = std::move(rules);
  return Status::Ok();
}

}  // namespace trib
