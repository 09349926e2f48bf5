#include "verify/rankset.hpp"

#include <algorithm>

#include "common/status.hpp"

namespace trib::verify {
namespace {

// Builds a normalised interval list (merging adjacent and overlapping intervals).
struct Builder {
  std::vector<uint32_t>& v;
  explicit Builder(std::vector<uint32_t>& buf) : v(buf) { v.clear(); }
  void add(uint32_t lo, uint32_t hi) {
    if (lo >= hi) return;
    if (!v.empty() && lo <= v.back()) {
      v.back() = std::max(v.back(), hi);
      return;
    }
    v.push_back(lo);
    v.push_back(hi);
  }
  RankSet build() const { return RankSet::fromFlat(v.data(), static_cast<uint32_t>(v.size() / 2)); }
};

thread_local std::vector<uint32_t> tlsBuf, tlsBuf2;

}  // namespace

RankSet RankSet::unite(const RankSet& a, const RankSet& b) {
  Builder out(tlsBuf);
  const uint32_t *pa = a.flat(), *pb = b.flat();
  uint32_t i = 0, j = 0;
  while (i < a.n_ || j < b.n_) {
    if (j >= b.n_ || (i < a.n_ && pa[2 * i] <= pb[2 * j])) {
      out.add(pa[2 * i], pa[2 * i + 1]);
      ++i;
    } else {
      out.add(pb[2 * j], pb[2 * j + 1]);
      ++j;
    }
  }
  return out.build();
}

RankSet RankSet::intersect(const RankSet& a, const RankSet& b) {
  Builder out(tlsBuf2);
  const uint32_t *pa = a.flat(), *pb = b.flat();
  uint32_t i = 0, j = 0;
  while (i < a.n_ && j < b.n_) {
    uint32_t lo = std::max(pa[2 * i], pb[2 * j]), hi = std::min(pa[2 * i + 1], pb[2 * j + 1]);
    out.add(lo, hi);
    if (pa[2 * i + 1] < pb[2 * j + 1]) {
      ++i;
    } else {
      ++j;
    }
  }
  return out.build();
}

RankSet RankSet::minus(const RankSet& a, const RankSet& b) {
  Builder out(tlsBuf2);
  const uint32_t *pa = a.flat(), *pb = b.flat();
  uint32_t j = 0;
  for (uint32_t i = 0; i < a.n_; ++i) {
    uint32_t lo = pa[2 * i];
    const uint32_t hi = pa[2 * i + 1];
    while (j < b.n_ && pb[2 * j + 1] <= lo) ++j;
    uint32_t k = j;
    while (lo < hi && k < b.n_ && pb[2 * k] < hi) {
      out.add(lo, std::min(hi, pb[2 * k]));
      lo = std::max(lo, pb[2 * k + 1]);
      ++k;
    }
    out.add(lo, hi);
  }
  return out.build();
}

bool RankSet::disjointUnion(const RankSet& a, const RankSet& b, RankSet* out, RankSet* overlap) {
  // Fast path for the common case: two single intervals that touch or are apart.
  if (a.n_ == 1 && b.n_ == 1) {
    uint32_t alo = a.inl_[0], ahi = a.inl_[1], blo = b.inl_[0], bhi = b.inl_[1];
    if (ahi <= blo || bhi <= alo) {
      if (ahi == blo) {
        *out = range(alo, bhi);
      } else if (bhi == alo) {
        *out = range(blo, ahi);
      } else {
        RankSet s;
        s.n_ = 2;
        s.inl_[0] = std::min(alo, blo);
        s.inl_[1] = alo < blo ? ahi : bhi;
        s.inl_[2] = std::max(alo, blo);
        s.inl_[3] = alo < blo ? bhi : ahi;
        *out = std::move(s);
      }
      return true;
    }
  }
  const uint32_t *pa = a.flat(), *pb = b.flat();
  uint32_t i = 0, j = 0;
  while (i < a.n_ && j < b.n_) {
    if (std::max(pa[2 * i], pb[2 * j]) < std::min(pa[2 * i + 1], pb[2 * j + 1])) {
      if (overlap) *overlap = intersect(a, b);
      return false;
    }
    if (pa[2 * i + 1] < pb[2 * j + 1]) {
      ++i;
    } else {
      ++j;
    }
  }
  *out = unite(a, b);
  return true;
}

std::string RankSet::toString(uint32_t maxIntervals) const {
  std::string s = "{";
  const uint32_t* p = flat();
  for (uint32_t i = 0; i < n_; ++i) {
    if (i == maxIntervals) {
      s += strprintf(", ... (%llu ranks in %u ranges)", static_cast<unsigned long long>(size()), n_);
      break;
    }
    if (i) s += ", ";
    s += p[2 * i + 1] - p[2 * i] == 1 ? strprintf("%u", p[2 * i])
                                      : strprintf("%u-%u", p[2 * i], p[2 * i + 1] - 1);
  }
  return s + "}";
}

}  // namespace trib::verify
