#pragma once
// A query's ownership geometry (geometry.cpp): who owns which elements under a layout, as sizes,
// variants and overlaps, memoised per query; and DimList, a collective's group of mesh dims.
#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "dtensor/index_set.hpp"
#include "dtensor/layout.hpp"
#include "open_table.hpp"

namespace dtensor {

// A short list of mesh dims (a collective's group), without heap.
struct DimList {
  std::array<int, Sharding::kMaxMeshDims> v{};
  std::uint8_t n = 0;
  DimList() = default;
  DimList(std::initializer_list<int> l) {
    for (int x : l) push(x);
  }
  explicit DimList(std::span<const int> l) {
    for (int x : l) push(x);
  }
  void push(int x) { v[n++] = x; }
  [[nodiscard]] std::size_t size() const noexcept { return n; }
  [[nodiscard]] std::span<const int> span() const noexcept { return {v.data(), n}; }
  [[nodiscard]] std::vector<int> vec() const { return {v.begin(), v.begin() + n}; }
  friend bool operator==(const DimList& a, const DimList& b) noexcept {
    return a.n == b.n && std::equal(a.v.begin(), a.v.begin() + a.n, b.v.begin());
  }
};

// PyTorch's byte count of a step out of `from`: the tensor's bytes over the product of the sizes of
// the mesh dims holding Shard or _StridedShard (its _is_shard_like). One computation for the step
// records, the search's edge floors and coalesced stages, so they agree to the bit.
[[nodiscard]] inline double shard_bytes(double numel, std::int64_t itemsize, std::span<const std::int64_t> mesh_shape,
                                        const Sharding& from) {
  double num_shards = 1;
  for (int d = 0; d < from.tensor_ndim(); ++d)
    for (const auto& e : from.entries(d)) num_shards *= static_cast<double>(mesh_shape[static_cast<std::size_t>(e.mesh_dim)]);
  return numel * static_cast<double>(itemsize) / num_shards;
}

struct SizeStats {
  std::int64_t max = 0;
  std::int64_t min = 0;
};

// Per-query memo of ownership aggregates. Every function is a pure function of its arguments.
class Geometry {
 public:
  Geometry(std::vector<std::int64_t> mesh_shape, std::vector<std::int64_t> shape, std::int64_t itemsize)
      : mesh_shape_(std::move(mesh_shape)), shape_(std::move(shape)), itemsize_(itemsize) {}

  [[nodiscard]] const std::vector<std::int64_t>& mesh_shape() const { return mesh_shape_; }
  [[nodiscard]] const std::vector<std::int64_t>& shape() const { return shape_; }
  [[nodiscard]] std::int64_t itemsize() const { return itemsize_; }

  // The index sets of every variant of `entries` (a variant = one combination of coordinates on
  // its mesh dims, mixed radix with the first entry most significant), and a coordinate's variant.
  [[nodiscard]] std::vector<IndexSet> variant_sets(Entries entries, std::int64_t length) const;
  [[nodiscard]] std::int64_t variant_of(Entries entries, std::span<const std::int64_t> coord) const noexcept;
  // The same variants as ranges when every entry is a plain split (empty otherwise).
  [[nodiscard]] std::vector<Interval> variant_ranges(Entries entries, std::int64_t length) const;
  // Largest/smallest owned size of tensor dim d over all ranks.
  [[nodiscard]] SizeStats dim_stats(int d, Entries entries) const;
  // Largest/smallest local numel over all ranks. With `remember`, the per-dim figures of `s`
  // are kept, and later calls reuse them for every tensor dim whose entries are the same (the
  // edges of one state all start from it).
  [[nodiscard]] SizeStats numel_stats(const Sharding& s, bool remember = false) const;
  // Largest element count one rank sends one peer in an all_to_all on mesh dim m.
  [[nodiscard]] std::int64_t all_to_all_chunk(const Sharding& from, const Sharding& to, int m) const;

  struct DirectStats {
    std::int64_t max_sent = 0;      // elements, largest over ranks
    std::int64_t max_received = 0;  // elements
    std::int64_t max_peers = 0;
    std::int64_t max_traffic = 0;   // elements sent + received by one rank
    std::uint32_t crossed_mesh_dims = 0;  // bit m: some transfer crosses mesh dim m
  };
  [[nodiscard]] DirectStats direct_stats(const Sharding& from, const Sharding& to) const;

 private:
  std::vector<std::int64_t> mesh_shape_;
  std::vector<std::int64_t> shape_;
  std::int64_t itemsize_;
  // dim_stats by its packed key (nonzero)
  struct DimSlot {
    std::uint64_t key = 0;  // 0: empty
    SizeStats stats;
    [[nodiscard]] bool vacant() const noexcept { return key == 0; }
  };
  [[nodiscard]] static std::uint64_t dim_slot_hash(std::uint64_t key) noexcept { return (key * 0x9e3779b97f4a7c15ULL) >> 40; }
  mutable OpenTable<DimSlot> dim_fast_memo_{64};
  mutable Sharding remembered_;
  mutable std::array<SizeStats, Sharding::kMaxTensorDims> remembered_dims_{};
  mutable bool has_remembered_ = false;
  mutable std::unordered_map<std::string, SizeStats> dim_memo_;
  mutable std::unordered_map<std::string, std::int64_t> a2a_memo_;
  // direct_stats's per tensor dim facts of a rank with (source variant, target variant): the
  // overlap, the target's size, the source variants holding part of it, and over its group (its
  // peers: the source's mesh dims vary, the others stay) the elements they need of its box, how
  // many need any, and the target's mesh dims on which they differ from it (a bit mask).
  struct PairStats {
    bool done = false;
    std::int64_t own = 0, need = 0, recv_hits = 0, sum = 0, cnt = 0;
    std::uint32_t cross = 0;
  };
  // A group's sums, per (source variant, the target variant's digits on mesh dims the source
  // does not use); per free dim (target mesh dims the source uses): 0, 1 or 2+ values among the
  // peers that need something, and the first.
  struct GroupSums {
    bool done = false;
    std::int64_t sum = 0, cnt = 0;
    std::array<std::int8_t, Sharding::kMaxMeshDims> distinct{};
    std::array<std::int64_t, Sharding::kMaxMeshDims> first_value{};
  };
  struct OverlapTable {
    std::int64_t ntv = 0, nfv = 0;  // target and source variants
    // one list: inter[source variant * ntv + target variant], then need[target variant] (owned
    // size), then src_hits[target variant] (source variants overlapping it)
    std::vector<std::int64_t> data;
    [[nodiscard]] std::int64_t& inter(std::int64_t fv, std::int64_t tv) noexcept { return data[static_cast<std::size_t>(fv * ntv + tv)]; }
    [[nodiscard]] std::int64_t& need(std::int64_t tv) noexcept { return data[static_cast<std::size_t>(nfv * ntv + tv)]; }
    [[nodiscard]] std::int64_t& src_hits(std::int64_t tv) noexcept { return data[static_cast<std::size_t>((nfv + 1) * ntv + tv)]; }
    [[nodiscard]] std::int64_t inter(std::int64_t fv, std::int64_t tv) const noexcept { return data[static_cast<std::size_t>(fv * ntv + tv)]; }
    [[nodiscard]] std::int64_t need(std::int64_t tv) const noexcept { return data[static_cast<std::size_t>(nfv * ntv + tv)]; }
    [[nodiscard]] std::int64_t src_hits(std::int64_t tv) const noexcept { return data[static_cast<std::size_t>((nfv + 1) * ntv + tv)]; }
  };
  [[nodiscard]] std::array<OverlapTable*, Sharding::kMaxTensorDims> overlap_tables(const Sharding& from,
                                                                                 const Sharding& to) const;
  mutable std::unordered_map<std::string, OverlapTable> overlap_memo_;
};

}  // namespace dtensor
