#include "dtensor/index_set.hpp"

#include <algorithm>

#include "dtensor/error.hpp"
#include <fmt/format.h>

namespace dtensor {

ChunkBounds chunk_bounds_wide(std::int64_t length, std::int64_t n, std::int64_t i) noexcept {
  // Overflow-safe for every length >= 0, n >= 1, i >= 0 (split factors up to INT64_MAX included):
  // no `length + n` and no `i * c` in 64 bits.
  __extension__ typedef __int128 wide;
  const std::int64_t c = length / n + (length % n != 0 ? 1 : 0);
  const auto clamp = [&](wide x) { return static_cast<std::int64_t>(std::min<wide>(x, length)); };
  return {clamp(static_cast<wide>(i) * c), clamp((static_cast<wide>(i) + 1) * c)};
}

void IndexSet::push(const Interval& r) {
  if (count_ < kInline) {
    inline_[count_] = r;
  } else {
    if (count_ == kInline) {  // spill: the heap takes over the inline runs
      heap_.reserve(2 * kInline);
      heap_.assign(inline_.begin(), inline_.end());
    }
    heap_.push_back(r);
  }
  ++count_;
}

IndexSet IndexSet::range(std::int64_t start, std::int64_t stop) {
  IndexSet s;
  if (stop > start) {
    s.push({start, stop});
    s.size_ = stop - start;
  }
  return s;
}

IndexSet IndexSet::from_runs(std::span<const Interval> runs) {
  IndexSet s;
  for (const auto& r : runs) {
    if (r.stop <= r.start) continue;
    if (s.count_ != 0 && s.back().stop == r.start)
      s.back().stop = r.stop;
    else
      s.push(r);
    s.size_ += r.size();
  }
  return s;
}

bool IndexSet::contains(std::int64_t index) const noexcept {
  const auto rs = runs();
  auto it = std::upper_bound(rs.begin(), rs.end(), index, [](std::int64_t v, const Interval& r) { return v < r.stop; });
  return it != rs.end() && it->start <= index;
}

std::int64_t IndexSet::position_of(std::int64_t index) const noexcept {
  std::int64_t pos = 0;
  for (const auto& r : runs()) {
    if (index < r.stop) return pos + (index - r.start);
    pos += r.size();
  }
  return pos;
}

std::int64_t IndexSet::nth(std::int64_t p) const noexcept {
  if (p < 0) return 0;
  for (const auto& r : runs()) {
    if (p < r.size()) return r.start + p;
    p -= r.size();
  }
  return 0;
}

IndexSet IndexSet::slice(std::int64_t p0, std::int64_t p1) const {
  IndexSet out;
  std::int64_t pos = 0;
  for (const auto& r : runs()) {
    if (pos >= p1) break;
    const std::int64_t lo = std::max(p0, pos), hi = std::min(p1, pos + r.size());
    if (lo < hi) {
      out.push({r.start + (lo - pos), r.start + (hi - pos)});
      out.size_ += hi - lo;
    }
    pos += r.size();
  }
  return out;
}

IndexSet IndexSet::intersect(const IndexSet& other) const {
  IndexSet out;
  const auto a = runs(), b = other.runs();
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const auto lo = std::max(a[i].start, b[j].start);
    const auto hi = std::min(a[i].stop, b[j].stop);
    if (lo < hi) {
      out.push({lo, hi});
      out.size_ += hi - lo;
    }
    if (a[i].stop < b[j].stop) ++i; else ++j;
  }
  return out;
}

std::int64_t IndexSet::overlap(const IndexSet& other) const noexcept {
  std::int64_t n = 0;
  const auto a = runs(), b = other.runs();
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const auto lo = std::max(a[i].start, b[j].start);
    const auto hi = std::min(a[i].stop, b[j].stop);
    if (lo < hi) n += hi - lo;
    if (a[i].stop < b[j].stop) ++i; else ++j;
  }
  return n;
}

IndexSet IndexSet::union_of(std::vector<Interval> runs) {
  std::sort(runs.begin(), runs.end(), [](const Interval& a, const Interval& b) { return a.start < b.start; });
  IndexSet out;
  for (const auto& r : runs) {
    if (r.stop <= r.start) continue;
    if (out.count_ != 0 && r.start <= out.back().stop) {
      out.back().stop = std::max(out.back().stop, r.stop);
    } else {
      out.push(r);
    }
  }
  for (const auto& r : out.runs()) out.size_ += r.stop - r.start;
  return out;
}

std::vector<std::int64_t> IndexSet::materialize() const {
  std::vector<std::int64_t> v;
  v.reserve(static_cast<std::size_t>(size_));
  for (const auto& r : runs())
    for (auto x = r.start; x < r.stop; ++x) v.push_back(x);
  return v;
}

std::string IndexSet::str() const {
  std::string s;
  const auto rs = runs();
  for (std::size_t i = 0; i < rs.size(); ++i) s += fmt::format("{}{}:{}", i ? "," : "", rs[i].start, rs[i].stop);
  return s;
}

}  // namespace dtensor
