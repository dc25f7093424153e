#include "dtensor/index_set.hpp"

#include <algorithm>

#include "dtensor/error.hpp"
#include <fmt/format.h>

namespace dtensor {

ChunkBounds chunk_bounds(std::int64_t length, std::int64_t n, std::int64_t i) noexcept {
  // Overflow-safe for every length >= 0, n >= 1, i >= 0 (split factors up to INT64_MAX included):
  // no `length + n` and no `i * c` in 64 bits.
  __extension__ typedef __int128 wide;
  const std::int64_t c = length / n + (length % n != 0 ? 1 : 0);
  const auto clamp = [&](wide x) { return static_cast<std::int64_t>(std::min<wide>(x, length)); };
  return {clamp(static_cast<wide>(i) * c), clamp((static_cast<wide>(i) + 1) * c)};
}

IndexSet IndexSet::range(std::int64_t start, std::int64_t stop) {
  IndexSet s;
  if (stop > start) {
    s.runs_.push_back({start, stop});
    s.size_ = stop - start;
  }
  return s;
}

IndexSet IndexSet::from_runs(const std::vector<Interval>& runs) {
  IndexSet s;
  for (const auto& r : runs) {
    if (r.stop <= r.start) continue;
    if (!s.runs_.empty() && s.runs_.back().stop == r.start)
      s.runs_.back().stop = r.stop;
    else
      s.runs_.push_back(r);
    s.size_ += r.size();
  }
  return s;
}

bool IndexSet::contains(std::int64_t index) const noexcept {
  auto it = std::upper_bound(runs_.begin(), runs_.end(), index,
                             [](std::int64_t v, const Interval& r) { return v < r.stop; });
  return it != runs_.end() && it->start <= index;
}

std::int64_t IndexSet::position_of(std::int64_t index) const noexcept {
  std::int64_t pos = 0;
  for (const auto& r : runs_) {
    if (index < r.stop) return pos + (index - r.start);
    pos += r.size();
  }
  return pos;
}

IndexSet IndexSet::slice(std::int64_t p0, std::int64_t p1) const {
  IndexSet out;
  std::int64_t pos = 0;
  for (const auto& r : runs_) {
    if (pos >= p1) break;
    const std::int64_t lo = std::max(p0, pos), hi = std::min(p1, pos + r.size());
    if (lo < hi) {
      out.runs_.push_back({r.start + (lo - pos), r.start + (hi - pos)});
      out.size_ += hi - lo;
    }
    pos += r.size();
  }
  return out;
}

IndexSet IndexSet::intersect(const IndexSet& other) const {
  IndexSet out;
  std::size_t i = 0, j = 0;
  while (i < runs_.size() && j < other.runs_.size()) {
    const auto lo = std::max(runs_[i].start, other.runs_[j].start);
    const auto hi = std::min(runs_[i].stop, other.runs_[j].stop);
    if (lo < hi) {
      out.runs_.push_back({lo, hi});
      out.size_ += hi - lo;
    }
    if (runs_[i].stop < other.runs_[j].stop) ++i; else ++j;
  }
  return out;
}

std::int64_t IndexSet::overlap(const IndexSet& other) const noexcept {
  std::int64_t n = 0;
  std::size_t i = 0, j = 0;
  while (i < runs_.size() && j < other.runs_.size()) {
    const auto lo = std::max(runs_[i].start, other.runs_[j].start);
    const auto hi = std::min(runs_[i].stop, other.runs_[j].stop);
    if (lo < hi) n += hi - lo;
    if (runs_[i].stop < other.runs_[j].stop) ++i; else ++j;
  }
  return n;
}

IndexSet IndexSet::union_of(std::vector<Interval> runs) {
  std::sort(runs.begin(), runs.end(), [](const Interval& a, const Interval& b) { return a.start < b.start; });
  IndexSet out;
  for (const auto& r : runs) {
    if (r.stop <= r.start) continue;
    if (!out.runs_.empty() && r.start <= out.runs_.back().stop) {
      out.runs_.back().stop = std::max(out.runs_.back().stop, r.stop);
    } else {
      out.runs_.push_back(r);
    }
  }
  for (const auto& r : out.runs_) out.size_ += r.stop - r.start;
  return out;
}

std::vector<std::int64_t> IndexSet::materialize() const {
  std::vector<std::int64_t> v;
  v.reserve(static_cast<std::size_t>(size_));
  for (const auto& r : runs_)
    for (auto x = r.start; x < r.stop; ++x) v.push_back(x);
  return v;
}

std::string IndexSet::str() const {
  std::string s;
  for (std::size_t i = 0; i < runs_.size(); ++i) s += fmt::format("{}{}:{}", i ? "," : "", runs_[i].start, runs_[i].stop);
  return s;
}

}  // namespace dtensor
