#pragma once
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

namespace dtensor {

enum class ReduceOp : std::uint8_t { sum, avg, max, min, product };
inline constexpr ReduceOp kAllReduceOps[] = {ReduceOp::sum, ReduceOp::avg, ReduceOp::max,
                                             ReduceOp::min, ReduceOp::product};
[[nodiscard]] std::string_view to_string(ReduceOp op) noexcept;
[[nodiscard]] ReduceOp parse_reduce_op(std::string_view text);
// Whether Partials with these ops can sit on two mesh dims of one layout (equal ops; sum and avg mix).
[[nodiscard]] constexpr bool mixable(ReduceOp a, ReduceOp b) noexcept {
  auto sum_avg = [](ReduceOp x) { return x == ReduceOp::sum || x == ReduceOp::avg; };
  return a == b || (sum_avg(a) && sum_avg(b));
}

// The placement of a tensor on one mesh dim (PyTorch's Shard, _StridedShard, Replicate, Partial).
class Placement {
 public:
  enum class Kind : std::uint8_t { replicate, shard, strided_shard, partial };

  [[nodiscard]] static Placement Replicate() noexcept { return Placement(Kind::replicate, 0, 1, ReduceOp::sum); }
  [[nodiscard]] static Placement Shard(std::int64_t dim) noexcept { return Placement(Kind::shard, dim, 1, ReduceOp::sum); }
  [[nodiscard]] static Placement StridedShard(std::int64_t dim, std::int64_t split_factor) noexcept {
    return Placement(Kind::strided_shard, dim, split_factor, ReduceOp::sum);
  }
  [[nodiscard]] static Placement Partial(ReduceOp op = ReduceOp::sum) noexcept {
    return Placement(Kind::partial, 0, 1, op);
  }

  [[nodiscard]] Kind kind() const noexcept { return kind_; }
  [[nodiscard]] bool is_replicate() const noexcept { return kind_ == Kind::replicate; }
  [[nodiscard]] bool is_shard() const noexcept { return kind_ == Kind::shard; }
  [[nodiscard]] bool is_strided_shard() const noexcept { return kind_ == Kind::strided_shard; }
  // Shard or StridedShard.
  [[nodiscard]] bool is_any_shard() const noexcept { return is_shard() || is_strided_shard(); }
  [[nodiscard]] bool is_partial() const noexcept { return kind_ == Kind::partial; }
  [[nodiscard]] std::int64_t dim() const noexcept { return dim_; }
  [[nodiscard]] std::int64_t split_factor() const noexcept { return split_factor_; }
  [[nodiscard]] ReduceOp op() const noexcept { return op_; }

  [[nodiscard]] Placement with_dim(std::int64_t dim) const noexcept {
    return Placement(kind_, dim, split_factor_, op_);
  }
  // "S(0)", "_S(0, 3)", "R", "P(sum)".
  [[nodiscard]] std::string str() const;
  // The same text appended to `out` (no temporary string).
  void append_to(fmt::memory_buffer& out) const;
  friend bool operator==(const Placement&, const Placement&) = default;

 private:
  Placement(Kind k, std::int64_t dim, std::int64_t sf, ReduceOp op) noexcept
      : kind_(k), op_(op), dim_(dim), split_factor_(sf) {}
  Kind kind_;
  ReduceOp op_;
  std::int64_t dim_;
  std::int64_t split_factor_;
};

// The result of parsing a placement string: one placement per mesh dim, and the optional
// shard-order position `[k]` written after each (-1 where none was written).
struct PlacementSpec {
  std::vector<Placement> placements;
  std::vector<int> order;
  friend bool operator==(const PlacementSpec&, const PlacementSpec&) = default;
};

// Strict parser: "S(0)[1]S(0)[0]R", "_S(0, 3)", "SS(0,3)", "P(avg)", "Shard(0), Replicate()".
// Throws dtensor::Error naming the offending character.
[[nodiscard]] PlacementSpec parse_placements(std::string_view text);

std::ostream& operator<<(std::ostream& os, const Placement& p);
[[nodiscard]] std::size_t hash_value(const Placement& p) noexcept;

}  // namespace dtensor

template <>
struct std::hash<dtensor::Placement> {
  std::size_t operator()(const dtensor::Placement& p) const noexcept { return dtensor::hash_value(p); }
};
template <>
struct fmt::formatter<dtensor::Placement> : fmt::formatter<std::string_view> {
  template <typename Ctx>
  auto format(const dtensor::Placement& p, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(p.str(), ctx);
  }
};
template <>
struct fmt::formatter<dtensor::ReduceOp> : fmt::formatter<std::string_view> {
  template <typename Ctx>
  auto format(dtensor::ReduceOp op, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(dtensor::to_string(op), ctx);
  }
};
