#pragma once
// RaggedShard: asymmetric, contiguous-memory sharding on one mesh dim (veScale's placement;
// docs/ragged.md). The other placements split the tensor first (the ragged mesh dim read as
// Replicate); then each rank's whole local block, flattened row-major, is cut into contiguous
// pieces of local_units[i] units along the ragged mesh dim, a unit being the block's numel over
// the units' sum. `prefix_dims` = k names the leading tensor dims (0, ..., k-1) a cut may cross:
// every piece holds whole rows of the trailing dims (k, ...). A single-owner layout is a
// RaggedShard whose units are all zero but one.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dtensor/layout.hpp"

namespace dtensor {

struct RaggedShard {
  int mesh_dim = 0;
  int prefix_dims = 1;                // dims = (0, ..., prefix_dims - 1)
  std::vector<std::int64_t> units;    // one per coordinate of mesh_dim
  // "RaggedShard((0,),(1,2,0,1))": veScale's two tuples, dims then local_units.
  [[nodiscard]] std::string str() const;
  friend bool operator==(const RaggedShard&, const RaggedShard&) = default;
};

// A layout that may hold one RaggedShard. Without one it is exactly `base()`.
class RaggedLayout {
 public:
  // Validates (InputError naming the offending value): at most one ragged mesh dim, every mesh
  // dim before it Replicate, no Partial anywhere, units one per coordinate, each >= 0, sum > 0;
  // prefix dims 1..ndim; on every rank's block the units' sum divides the block's numel and every
  // rank's piece holds whole rows of the block's trailing dims (veScale's rule: the unit itself may
  // cut a row, as 3-element units of a 3x2 block split (2, 0) do).
  // `base`: the layout with the ragged mesh dim read as Replicate.
  RaggedLayout(Layout base, std::optional<RaggedShard> ragged);
  explicit RaggedLayout(Layout plain) : RaggedLayout(std::move(plain), std::nullopt) {}
  // "MESH SHAPE DTYPE PLACEMENTS" with at most one RaggedShard(...) token among the placements:
  // "4 8x6 f32 RaggedShard((0,),(1,2,0,1))", "2,2 6x4 bf16 RaggedShard((0,1),(1,0))S(1)".
  [[nodiscard]] static RaggedLayout parse(std::string_view text);
  [[nodiscard]] static RaggedLayout parse(Mesh mesh, std::vector<std::int64_t> shape, DType dtype,
                                          std::string_view placements);

  [[nodiscard]] const Layout& base() const noexcept { return base_; }
  [[nodiscard]] const std::optional<RaggedShard>& ragged() const noexcept { return ragged_; }
  [[nodiscard]] bool is_ragged() const noexcept { return ragged_.has_value(); }
  [[nodiscard]] const Mesh& mesh() const noexcept { return base_.mesh(); }
  [[nodiscard]] const std::vector<std::int64_t>& shape() const noexcept { return base_.shape(); }
  [[nodiscard]] DType dtype() const noexcept { return base_.dtype(); }
  [[nodiscard]] int ndim() const noexcept { return base_.ndim(); }

  // The rank's piece: element positions [start, stop) of its base block flattened row-major
  // (the whole block when not ragged).
  [[nodiscard]] Interval piece(std::span<const std::int64_t> coord) const;
  [[nodiscard]] std::int64_t local_numel(std::span<const std::int64_t> coord) const;
  // (rows, trailing extents...) where rows counts the piece's rows of the flattened prefix
  // (base().local_shape when not ragged). A flat 1-D local of local_numel elements is the same memory.
  [[nodiscard]] std::vector<std::int64_t> local_shape(std::span<const std::int64_t> coord) const;
  // The elements per unit on this rank's block (0 when not ragged).
  [[nodiscard]] std::int64_t unit_numel(std::span<const std::int64_t> coord) const;
  // The rank's global element ids (row-major over the global shape) as ascending runs, for
  // tables and pictures: computed from index runs, never by listing elements.
  [[nodiscard]] std::vector<Interval> owned_runs(std::span<const std::int64_t> coord) const;

  [[nodiscard]] std::string placements_str() const;
  [[nodiscard]] std::string str() const;
  friend bool operator==(const RaggedLayout&, const RaggedLayout&) = default;

 private:
  Layout base_;
  std::optional<RaggedShard> ragged_;
  std::vector<std::int64_t> before_;  // units before each coordinate of the ragged mesh dim, then all of them
};

// JSON: a layout's fields ("mesh", "shape", "dtype", "placements" with the RaggedShard token) and,
// when ragged, "ragged": {"mesh_dim", "dims", "local_units"} (which must agree with the text).
[[nodiscard]] std::string to_json(const RaggedLayout& l);
[[nodiscard]] RaggedLayout ragged_layout_from_json(std::string_view json);

// The position range [p0, p1) of `box` (row-major over its index sets) cut into boxes: at most
// 2 * ndim - 1 of them, in order. Each is a sub-box of `box` (index sets per dim).
[[nodiscard]] std::vector<std::vector<IndexSet>> range_boxes(const std::vector<IndexSet>& box, std::int64_t p0,
                                                             std::int64_t p1);
// The position in `box` (row-major) of element t of `sub` (row-major), a box inside `box`.
[[nodiscard]] std::int64_t position_in(const std::vector<IndexSet>& sub, std::int64_t t, const std::vector<IndexSet>& box);
// How many elements of `sub` (a box inside `box`, row-major) lie before flat position `pos` of
// `box`: the elements of `sub` whose position in `box` is < pos.
[[nodiscard]] std::int64_t count_before(const std::vector<IndexSet>& sub, const std::vector<IndexSet>& box,
                                        std::int64_t pos);

}  // namespace dtensor
