// RankSet: a set of ranks as sorted, disjoint, non-adjacent half-open intervals [lo, hi).
// Up to two intervals live inline (a contiguous or wrapped-around range of ranks, which is what
// rings and trees produce), so a cell costs 24 bytes whatever the rank count.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace trib::verify {

class RankSet {
 public:
  RankSet() = default;
  static RankSet range(uint32_t lo, uint32_t hi) {
    RankSet s;
    if (lo < hi) {
      s.n_ = 1;
      s.inl_[0] = lo;
      s.inl_[1] = hi;
    }
    return s;
  }
  static RankSet single(uint32_t r) { return range(r, r + 1); }
  // From a flat list lo0,hi0,lo1,hi1,... already sorted, disjoint and non-adjacent.
  static RankSet fromFlat(const uint32_t* v, uint32_t intervals) {
    RankSet s;
    if (intervals == 0) return s;  // v may be null then (an empty vector's data())
    s.n_ = intervals;
    uint32_t* dst = s.n_ > kInline ? (s.heap_ = new uint32_t[2 * s.n_]) : s.inl_;
    std::memcpy(dst, v, sizeof(uint32_t) * 2 * intervals);
    return s;
  }

  RankSet(const RankSet& o) { *this = o; }
  RankSet(RankSet&& o) noexcept {
    n_ = o.n_;
    std::memcpy(inl_, o.inl_, sizeof(inl_));  // copies the heap pointer too
    o.n_ = 0;
  }
  RankSet& operator=(const RankSet& o) {
    if (this == &o) return *this;
    release();
    n_ = o.n_;
    if (n_ > kInline) {
      heap_ = new uint32_t[2 * n_];
      std::memcpy(heap_, o.heap_, sizeof(uint32_t) * 2 * n_);
    } else {
      std::memcpy(inl_, o.inl_, sizeof(inl_));
    }
    return *this;
  }
  RankSet& operator=(RankSet&& o) noexcept {
    if (this == &o) return *this;
    release();
    n_ = o.n_;
    std::memcpy(inl_, o.inl_, sizeof(inl_));
    o.n_ = 0;
    return *this;
  }
  ~RankSet() { release(); }

  bool empty() const { return n_ == 0; }
  uint32_t intervals() const { return n_; }
  const uint32_t* flat() const { return n_ > kInline ? heap_ : inl_; }
  bool operator==(const RankSet& o) const {
    if (n_ != o.n_) return false;
    if (n_ == 0) return true;
    if (n_ <= kInline) {
      return inl_[0] == o.inl_[0] && inl_[1] == o.inl_[1] &&
             (n_ == 1 || (inl_[2] == o.inl_[2] && inl_[3] == o.inl_[3]));
    }
    return std::memcmp(heap_, o.heap_, sizeof(uint32_t) * 2 * n_) == 0;
  }
  bool operator!=(const RankSet& o) const { return !(*this == o); }
  uint64_t size() const {
    uint64_t s = 0;
    for (uint32_t i = 0; i < n_; ++i) s += flat()[2 * i + 1] - flat()[2 * i];
    return s;
  }
  bool isRange(uint32_t lo, uint32_t hi) const { return n_ == 1 && inl_[0] == lo && inl_[1] == hi; }

  // a ∪ b into *out when they are disjoint; otherwise false and *overlap = a ∩ b.
  static bool disjointUnion(const RankSet& a, const RankSet& b, RankSet* out, RankSet* overlap);
  static RankSet unite(const RankSet& a, const RankSet& b);
  static RankSet intersect(const RankSet& a, const RankSet& b);
  static RankSet minus(const RankSet& a, const RankSet& b);
  // "{0-3, 7}"; long sets are cut after `maxIntervals` with the total count.
  std::string toString(uint32_t maxIntervals = 6) const;

 private:
  static constexpr uint32_t kInline = 2;
  void release() {
    if (n_ > kInline) delete[] heap_;
    n_ = 0;
  }
  uint32_t n_ = 0;
  union {
    uint32_t inl_[2 * kInline] = {};
    uint32_t* heap_;
  };
};

}  // namespace trib::verify
