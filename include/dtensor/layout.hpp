#pragma once
#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iosfwd>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "dtensor/dtype.hpp"
#include "dtensor/index_set.hpp"
#include "dtensor/mesh.hpp"
#include "dtensor/placement.hpp"

namespace dtensor {

// One split of a tensor dim: applied with the rank's coordinate on `mesh_dim`.
struct ShardEntry {
  int mesh_dim = 0;
  std::int64_t split_factor = 1;
  bool strided = false;  // _S(d, sf): never the same as S(d), even with sf == 1
  friend bool operator==(const ShardEntry&, const ShardEntry&) = default;
};

// A read-only view of one tensor dim's entries, in shard order.
class Entries {
 public:
  Entries() = default;
  Entries(const ShardEntry* p, std::size_t n) : p_(p), n_(n) {}
  [[nodiscard]] const ShardEntry* begin() const noexcept { return p_; }
  [[nodiscard]] const ShardEntry* end() const noexcept { return p_ + n_; }
  [[nodiscard]] std::size_t size() const noexcept { return n_; }
  [[nodiscard]] bool empty() const noexcept { return n_ == 0; }
  [[nodiscard]] const ShardEntry& operator[](std::size_t i) const noexcept { return p_[i]; }
  [[nodiscard]] const ShardEntry& back() const noexcept { return p_[n_ - 1]; }
  operator std::span<const ShardEntry>() const noexcept { return {p_, n_}; }  // NOLINT: a view converts
  friend bool operator==(const Entries& a, const Entries& b) noexcept {
    if (a.n_ != b.n_) return false;
    for (std::size_t i = 0; i < a.n_; ++i)
      if (!(a.p_[i] == b.p_[i])) return false;
    return true;
  }

 private:
  const ShardEntry* p_ = nullptr;
  std::size_t n_ = 0;
};

// The canonical, mesh-shape-independent part of a layout (docs/notation.md): for every tensor dim the
// ordered list of entries (first = outermost split), plus the Partial op of each partial mesh
// dim. Every other mesh dim is replicated. A small fixed-size value (no heap), so the planner
// can create and hash millions of them cheaply.
class Sharding {
 public:
  static constexpr int kMaxMeshDims = 8;
  static constexpr int kMaxTensorDims = 16;

  Sharding() = default;
  // Validates: every mesh dim used once, split factors >= 1, Partial ops mixable, dim limits.
  Sharding(int mesh_ndim, const std::vector<std::vector<ShardEntry>>& dims,
           const std::vector<std::optional<ReduceOp>>& partial);
  // Fully replicated sharding.
  [[nodiscard]] static Sharding replicated(int mesh_ndim, int tensor_ndim);
  // PyTorch placements + optional `[k]` positions per mesh dim (-1 = none) -> canonical form.
  // Negative shard dims are normalised with `tensor_ndim`.
  [[nodiscard]] static Sharding from_placements(std::span<const Placement> placements,
                                                std::span<const int> order, int tensor_ndim);
  [[nodiscard]] static Sharding parse(std::string_view text, int mesh_ndim, int tensor_ndim);

  [[nodiscard]] int mesh_ndim() const noexcept { return mesh_ndim_; }
  [[nodiscard]] int tensor_ndim() const noexcept { return tensor_ndim_; }
  [[nodiscard]] Entries entries(int tensor_dim) const noexcept {
    return {entries_.data() + start_[static_cast<std::size_t>(tensor_dim)],
            static_cast<std::size_t>(start_[static_cast<std::size_t>(tensor_dim) + 1] -
                                     start_[static_cast<std::size_t>(tensor_dim)])};
  }
  [[nodiscard]] std::optional<ReduceOp> partial(int mesh_dim) const noexcept {
    const auto p = partial_[static_cast<std::size_t>(mesh_dim)];
    return p < 0 ? std::nullopt : std::optional<ReduceOp>(static_cast<ReduceOp>(p));
  }
  [[nodiscard]] bool has_partial() const noexcept;
  // Tensor dim sharded by `mesh_dim` (or -1) and the entry's position in that dim's order.
  [[nodiscard]] int shard_dim_of(int mesh_dim) const noexcept;
  [[nodiscard]] int position_of(int mesh_dim) const noexcept;
  [[nodiscard]] bool is_last_in_order(int mesh_dim) const noexcept;

  [[nodiscard]] Placement placement(int mesh_dim) const;
  [[nodiscard]] std::vector<Placement> placements() const;
  // `[k]` positions per mesh dim as printed (-1 where not printed).
  [[nodiscard]] std::vector<int> printed_order() const;
  // The placement text (docs/notation.md): "S(0)[1]S(0)[0]R", "_S(0, 3)S(1)", "P(sum)R".
  [[nodiscard]] std::string str() const;

  // New values for the planner's edges.
  [[nodiscard]] Sharding with_replicate(int mesh_dim) const noexcept;
  // with_replicate over every mesh dim whose bit is set in `mesh_dims`, in one pass.
  [[nodiscard]] Sharding with_replicated(std::uint32_t mesh_dims) const noexcept;
  [[nodiscard]] Sharding with_shard_appended(int tensor_dim, ShardEntry entry) const noexcept;
  [[nodiscard]] Sharding with_partial(int mesh_dim, ReduceOp op) const noexcept;
  // The same sharding with mesh dim m renamed to to[m] (a permutation of the mesh dims): each
  // tensor dim keeps its entries' order, each Partial moves with its dim.
  [[nodiscard]] Sharding with_mesh_dims_relabeled(std::span<const std::int8_t> to) const noexcept;
  // The same sharding with tensor dim d's entries moved to tensor dim to[d] (a permutation of the
  // tensor dims): every entry keeps its mesh dim and its place in its dim's order.
  [[nodiscard]] Sharding with_tensor_dims_permuted(std::span<const std::int8_t> to) const noexcept;

  // Value equality, field by field over the used entries and offsets and the Partial slots (the
  // unused slots are kept canonical, so comparing them too would decide the same).
  friend bool operator==(const Sharding& a, const Sharding& b) noexcept {
    // (the eight Partial slots compared as one word: no library call for eight bytes)
    static_assert(kMaxMeshDims == sizeof(std::uint64_t));
    std::uint64_t pa = 0, pb = 0;
    std::memcpy(&pa, a.partial_.data(), sizeof pa);
    std::memcpy(&pb, b.partial_.data(), sizeof pb);
    if (a.tensor_ndim_ != b.tensor_ndim_ || a.mesh_ndim_ != b.mesh_ndim_ || pa != pb) return false;
    for (int d = 1; d <= a.tensor_ndim_; ++d)
      if (a.start_[static_cast<std::size_t>(d)] != b.start_[static_cast<std::size_t>(d)]) return false;
    for (int k = 0, n = a.entry_count(); k < n; ++k)
      if (!(a.entries_[static_cast<std::size_t>(k)] == b.entries_[static_cast<std::size_t>(k)])) return false;
    return true;
  }
  // What hash_value returns: over what operator== compares.
  [[nodiscard]] std::size_t hash() const noexcept;

 private:
  std::array<ShardEntry, kMaxMeshDims> entries_{};  // grouped by tensor dim, in shard order
  std::array<std::uint8_t, kMaxTensorDims + 1> start_{};
  std::array<std::int8_t, kMaxMeshDims> partial_{-1, -1, -1, -1, -1, -1, -1, -1};
  std::uint8_t mesh_ndim_ = 0;
  std::uint8_t tensor_ndim_ = 0;
  [[nodiscard]] int entry_count() const noexcept { return start_[tensor_ndim_]; }
  [[nodiscard]] std::pair<int, int> locate(int mesh_dim) const noexcept;  // (tensor dim, position) or (-1, -1)
};

[[nodiscard]] std::size_t hash_value(const Sharding& s) noexcept;
std::ostream& operator<<(std::ostream& os, const Sharding& s);

// The indices a rank with mesh coordinate `coord` owns along one tensor dim of `length` items,
// applying `entries` in order (docs/notation.md). Never materialises the list.
[[nodiscard]] IndexSet owned_indices(std::span<const ShardEntry> entries, std::int64_t length,
                                     std::span<const std::int64_t> mesh_shape,
                                     std::span<const std::int64_t> coord);
// The same rank's indices as one range when every entry is a plain split (split factor 1: chunks
// of a range are ranges); nullopt when a strided split makes them several runs.
[[nodiscard]] std::optional<Interval> owned_range(std::span<const ShardEntry> entries, std::int64_t length,
                                                  std::span<const std::int64_t> mesh_shape,
                                                  std::span<const std::int64_t> coord) noexcept;
// How many indices of one tensor dim a rank at `coord_a` owns under `a` and a rank at `coord_b`
// under `b` both own (ranges when both are plain: no lists built).
[[nodiscard]] std::int64_t owned_overlap(std::span<const ShardEntry> a, std::span<const std::int64_t> coord_a,
                                         std::span<const ShardEntry> b, std::span<const std::int64_t> coord_b,
                                         std::int64_t length, std::span<const std::int64_t> mesh_shape);
// The same rank's count and first index in closed form (O(entries), whatever the split factors);
// first: nullopt when it owns nothing.
[[nodiscard]] std::int64_t owned_count(std::span<const ShardEntry> entries, std::int64_t length,
                                       std::span<const std::int64_t> mesh_shape, std::span<const std::int64_t> coord);
[[nodiscard]] std::optional<std::int64_t> owned_first(std::span<const ShardEntry> entries, std::int64_t length,
                                                      std::span<const std::int64_t> mesh_shape,
                                                      std::span<const std::int64_t> coord);
// An upper bound on the runs owned_indices can return for one rank (saturates at 2^40).
[[nodiscard]] std::int64_t owned_runs_bound(std::span<const ShardEntry> entries, std::int64_t length);

// A distributed tensor's layout: mesh + global shape + dtype + sharding.
class Layout {
 public:
  // Validates the sharding against the mesh and the shape.
  Layout(Mesh mesh, std::vector<std::int64_t> shape, DType dtype, Sharding sharding);
  // PyTorch placements (one per mesh dim) with default shard order or `[k]` positions.
  [[nodiscard]] static Layout from_placements(Mesh mesh, std::vector<std::int64_t> shape, DType dtype,
                                              std::span<const Placement> placements,
                                              std::span<const int> order = {});
  // PyTorch's explicit shard order: per sharded tensor dim, its mesh dims in split order.
  struct ShardOrderEntry {
    std::int64_t tensor_dim;
    std::vector<int> mesh_dims;
    friend bool operator==(const ShardOrderEntry&, const ShardOrderEntry&) = default;
  };
  [[nodiscard]] static Layout from_torch(Mesh mesh, std::vector<std::int64_t> shape, DType dtype,
                                         std::span<const Placement> placements,
                                         std::span<const ShardOrderEntry> shard_order);
  [[nodiscard]] static Layout parse(Mesh mesh, std::vector<std::int64_t> shape, DType dtype,
                                    std::string_view placements);
  // The whole text form, as str() prints it: "MESH SHAPE DTYPE PLACEMENTS", e.g.
  // "dp=2,tp=4 1000x512 bf16 S(0)[1]S(0)[0]" (a 0-d tensor's shape is "()"). An explicit rank
  // list is not part of the text form (the JSON form carries it).
  [[nodiscard]] static Layout parse(std::string_view text);

  [[nodiscard]] const Mesh& mesh() const noexcept { return mesh_; }
  [[nodiscard]] const std::vector<std::int64_t>& shape() const noexcept { return shape_; }
  [[nodiscard]] DType dtype() const noexcept { return dtype_; }
  [[nodiscard]] const Sharding& sharding() const noexcept { return sharding_; }
  [[nodiscard]] int ndim() const noexcept { return static_cast<int>(shape_.size()); }
  [[nodiscard]] std::int64_t numel() const noexcept;
  [[nodiscard]] std::vector<Placement> placements() const { return sharding_.placements(); }
  [[nodiscard]] std::vector<ShardOrderEntry> torch_shard_order() const;
  // The whole layout: "dp=2,tp=4 1000x512 bf16 S(0)[1]S(0)[0]" (parse(text) reads it back).
  [[nodiscard]] std::string str() const;
  // The placements alone: "S(0)[1]S(0)[0]".
  [[nodiscard]] std::string placements_str() const { return sharding_.str(); }

  // Ownership of the rank at mesh coordinate `coord` (docs/notation.md).
  [[nodiscard]] IndexSet indices(std::span<const std::int64_t> coord, int tensor_dim) const;
  [[nodiscard]] std::vector<IndexSet> indices(std::span<const std::int64_t> coord) const;
  [[nodiscard]] std::vector<std::int64_t> local_shape(std::span<const std::int64_t> coord) const;
  // First owned index per dim; an empty shard reports the global size (PyTorch's convention).
  [[nodiscard]] std::vector<std::int64_t> global_offset(std::span<const std::int64_t> coord) const;
  [[nodiscard]] std::int64_t local_numel(std::span<const std::int64_t> coord) const;
  // Index lists (indices(), and so plans and execution) hold at most this many runs per rank
  // and tensor dim; beyond it (huge strided split factors) they throw an InputError naming the
  // split. Local shapes, offsets and numels are closed form and have no such limit.
  static constexpr std::int64_t kMaxRunsPerRank = std::int64_t{1} << 20;
  void check_runs(int only_dim = -1) const;

  friend bool operator==(const Layout&, const Layout&) = default;

 private:
  Mesh mesh_;
  std::vector<std::int64_t> shape_;
  DType dtype_;
  Sharding sharding_;
};

// Same data on every rank (docs/notation.md, equivalence): equal Partial dims and ops, equal owned index sets.
// The Sharding form takes the mesh and tensor shapes (InputError when their lengths are not the shardings' dims).
[[nodiscard]] bool equivalent(const Layout& a, const Layout& b);
[[nodiscard]] bool equivalent(const Sharding& a, const Sharding& b, std::span<const std::int64_t> mesh_shape,
                              std::span<const std::int64_t> shape);

// What rank `src_coord` owns in `a` that rank `dst_coord` needs in `b`: the per-dim overlap.
// The box is the cartesian product of the returned sets; its element count is their product.
[[nodiscard]] std::vector<IndexSet> overlap(const Layout& a, std::span<const std::int64_t> src_coord,
                                            const Layout& b, std::span<const std::int64_t> dst_coord);
[[nodiscard]] std::int64_t box_numel(std::span<const IndexSet> box) noexcept;

std::ostream& operator<<(std::ostream& os, const Layout& l);
[[nodiscard]] std::size_t hash_value(const Layout& l) noexcept;

// JSON (nlohmann's serialisation, kept out of the public headers).
[[nodiscard]] std::string to_json(const Mesh& m);
[[nodiscard]] std::string to_json(const Layout& l);
[[nodiscard]] Mesh mesh_from_json(std::string_view json);
[[nodiscard]] Layout layout_from_json(std::string_view json);

// "9x5" or "9,5"; "" or "()" is a 0-d tensor.
[[nodiscard]] std::vector<std::int64_t> parse_shape(std::string_view text);
[[nodiscard]] std::string shape_str(std::span<const std::int64_t> shape);

}  // namespace dtensor

template <>
struct std::hash<dtensor::Sharding> {
  std::size_t operator()(const dtensor::Sharding& s) const noexcept { return dtensor::hash_value(s); }
};
template <>
struct std::hash<dtensor::Layout> {
  std::size_t operator()(const dtensor::Layout& l) const noexcept { return dtensor::hash_value(l); }
};
template <>
struct fmt::formatter<dtensor::Sharding> : fmt::formatter<std::string_view> {
  template <typename Ctx>
  auto format(const dtensor::Sharding& s, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(s.str(), ctx);
  }
};
// The whole layout, as operator<< prints it (mesh, shape, dtype, placements); a message that
// means the placements alone formats l.placements_str().
template <>
struct fmt::formatter<dtensor::Layout> : fmt::formatter<std::string_view> {
  template <typename Ctx>
  auto format(const dtensor::Layout& l, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(l.str(), ctx);
  }
};
