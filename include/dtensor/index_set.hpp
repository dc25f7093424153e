#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace dtensor {

// A half-open run [start, stop) of global indices.
struct Interval {
  std::int64_t start = 0;
  std::int64_t stop = 0;
  [[nodiscard]] std::int64_t size() const noexcept { return stop - start; }
  friend bool operator==(const Interval&, const Interval&) = default;
};

// The global indices a rank holds on one tensor dim. By the ownership rules (docs/notation.md) these are always ascending, so
// the set is a sorted list of disjoint, non-adjacent runs, and local order = ascending order.
class IndexSet {
 public:
  IndexSet() = default;
  IndexSet(const IndexSet&) = default;
  IndexSet& operator=(const IndexSet&) = default;
  IndexSet(IndexSet&& o) noexcept : inline_(o.inline_), heap_(std::move(o.heap_)), count_(o.count_), size_(o.size_) {
    o.clear();
  }
  IndexSet& operator=(IndexSet&& o) noexcept {
    if (this != &o) {
      inline_ = o.inline_;
      heap_ = std::move(o.heap_);
      count_ = o.count_;
      size_ = o.size_;
      o.clear();
    }
    return *this;
  }
  [[nodiscard]] static IndexSet range(std::int64_t start, std::int64_t stop);
  // Every index of any of `runs` (in any order, overlapping or not), ascending.
  [[nodiscard]] static IndexSet union_of(std::vector<Interval> runs);
  // Takes runs in ascending order; merges adjacent runs and drops empty ones.
  [[nodiscard]] static IndexSet from_runs(std::span<const Interval> runs);

  [[nodiscard]] std::span<const Interval> runs() const noexcept { return {data(), count_}; }
  [[nodiscard]] std::int64_t size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  // First index, or `empty_value` when empty (PyTorch reports the global size then).
  [[nodiscard]] std::int64_t first_or(std::int64_t empty_value) const noexcept {
    return count_ == 0 ? empty_value : data()[0].start;
  }
  [[nodiscard]] bool contains(std::int64_t index) const noexcept;
  // Local position of a global index held by this set (precondition: contains(index)).
  [[nodiscard]] std::int64_t position_of(std::int64_t index) const noexcept;

  // The index at local position p (slice(p, p + 1).first_or(0) without building it: 0 when p is
  // not a position of the set).
  [[nodiscard]] std::int64_t nth(std::int64_t p) const noexcept;
  // The sub-list at local positions [p0, p1).
  [[nodiscard]] IndexSet slice(std::int64_t p0, std::int64_t p1) const;
  [[nodiscard]] IndexSet intersect(const IndexSet& other) const;
  // How many indices both sets hold (intersect(other).size() without building it).
  [[nodiscard]] std::int64_t overlap(const IndexSet& other) const noexcept;
  [[nodiscard]] std::vector<std::int64_t> materialize() const;
  // "0:3,5:7" (python-slice style runs), "" when empty.
  [[nodiscard]] std::string str() const;

  friend bool operator==(const IndexSet& a, const IndexSet& b) noexcept {
    const auto x = a.runs(), y = b.runs();
    return a.size_ == b.size_ && std::equal(x.begin(), x.end(), y.begin(), y.end());
  }

 private:
  // Most sets a planner query builds hold one to four runs: they live inline (no allocation);
  // longer lists move to the heap.
  static constexpr std::size_t kInline = 4;
  [[nodiscard]] const Interval* data() const noexcept { return count_ <= kInline ? inline_.data() : heap_.data(); }
  [[nodiscard]] Interval& back() noexcept { return count_ <= kInline ? inline_[count_ - 1] : heap_.back(); }
  void clear() noexcept {
    heap_.clear();
    count_ = 0;
    size_ = 0;
  }
  void push(const Interval& r);  // appends a run (ascending, non-empty, not adjacent to back())

  std::array<Interval, kInline> inline_{};
  std::vector<Interval> heap_;
  std::size_t count_ = 0;
  std::int64_t size_ = 0;
};

// torch.chunk: piece `i` of `n` over a list of `length` items, as local positions [first, second).
struct ChunkBounds {
  std::int64_t begin;
  std::int64_t end;
};
// chunk_bounds for any length >= 0, n >= 1, i >= 0 (split factors up to INT64_MAX included).
[[nodiscard]] ChunkBounds chunk_bounds_wide(std::int64_t length, std::int64_t n, std::int64_t i) noexcept;
[[nodiscard]] inline ChunkBounds chunk_bounds(std::int64_t length, std::int64_t n, std::int64_t i) noexcept {
  // In 64 bits when i < n and length, n < 2^62: (i + 1) * ceil(length / n) <= n * ceil(length / n) < length + n
  constexpr std::int64_t kNarrow = std::int64_t{1} << 62;
  if (i >= n || length >= kNarrow || n >= kNarrow) return chunk_bounds_wide(length, n, i);
  const std::int64_t c = length / n + (length % n != 0 ? 1 : 0);
  return {std::min(i * c, length), std::min((i + 1) * c, length)};
}

}  // namespace dtensor
