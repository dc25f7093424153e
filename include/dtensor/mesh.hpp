#pragma once
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

namespace dtensor {

// An n-d grid of ranks. Rank ids are row-major over the coordinates unless an explicit rank
// list (a permutation of 0..N-1, listed in row-major coordinate order) is given.
class Mesh {
 public:
  explicit Mesh(std::vector<std::int64_t> shape, std::vector<std::string> names = {},
                std::vector<std::int64_t> ranks = {});

  // "2x4", "2,4" or "dp=2,tp=4".
  [[nodiscard]] static Mesh parse(std::string_view text);

  [[nodiscard]] int ndim() const noexcept { return static_cast<int>(shape_.size()); }
  [[nodiscard]] std::int64_t size(int dim) const { return shape_.at(static_cast<std::size_t>(dim)); }
  [[nodiscard]] const std::vector<std::int64_t>& shape() const noexcept { return shape_; }
  [[nodiscard]] const std::vector<std::string>& names() const noexcept { return names_; }
  [[nodiscard]] const std::vector<std::int64_t>& ranks() const noexcept { return ranks_; }
  [[nodiscard]] bool has_explicit_ranks() const noexcept { return !ranks_.empty(); }
  [[nodiscard]] std::int64_t num_ranks() const noexcept { return num_ranks_; }
  // Name of mesh dim `dim` for messages: "1 (tp, size 4)" or "1 (size 4)".
  [[nodiscard]] std::string describe_dim(int dim) const;
  // The same text appended to `out` (no temporary string).
  void append_dim_to(fmt::memory_buffer& out, int dim) const;

  // Row-major position of a coordinate, and back.
  [[nodiscard]] std::int64_t position(std::span<const std::int64_t> coord) const;
  [[nodiscard]] std::vector<std::int64_t> coord_at(std::int64_t position) const;
  // Global rank id <-> coordinate (through the explicit rank list when there is one).
  [[nodiscard]] std::int64_t rank_at(std::span<const std::int64_t> coord) const;
  [[nodiscard]] std::vector<std::int64_t> coord_of_rank(std::int64_t rank) const;

  [[nodiscard]] std::string str() const;
  friend bool operator==(const Mesh& a, const Mesh& b) = default;

 private:
  std::vector<std::int64_t> shape_;
  std::vector<std::string> names_;
  std::vector<std::int64_t> ranks_;
  std::vector<std::int64_t> inverse_;  // rank -> position, when explicit
  std::int64_t num_ranks_ = 1;
};

std::ostream& operator<<(std::ostream& os, const Mesh& m);
[[nodiscard]] std::size_t hash_value(const Mesh& m) noexcept;

}  // namespace dtensor

template <>
struct std::hash<dtensor::Mesh> {
  std::size_t operator()(const dtensor::Mesh& m) const noexcept { return dtensor::hash_value(m); }
};
template <>
struct fmt::formatter<dtensor::Mesh> : fmt::formatter<std::string_view> {
  template <typename Ctx>
  auto format(const dtensor::Mesh& m, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(m.str(), ctx);
  }
};
