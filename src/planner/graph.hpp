#pragma once
// The redistribution graph (docs/planner.md): its states are Shardings of one tensor on one mesh, its
// edges the steps of the table, each fully costed. Shared by the search, the tests' oracle and
// the executor (which must agree with the planner on every buffer size).
#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <type_traits>
#include <utility>
#include <optional>
#include <initializer_list>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/container/small_vector.hpp>

#include "dtensor/cost_model.hpp"
#include "dtensor/layout.hpp"
#include "dtensor/plan.hpp"
#include "dtensor/planner.hpp"
#include "placement/workspace.hpp"

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
  // dim_stats by its packed key (nonzero): open addressing, at most half full
  struct FastMemo {
    std::vector<std::pair<std::uint64_t, SizeStats>> slots;  // key 0: empty
    std::size_t used = 0;
    [[nodiscard]] const SizeStats* find(std::uint64_t key) const noexcept {
      if (slots.empty()) return nullptr;
      const std::size_t mask = slots.size() - 1;
      for (std::size_t i = (key * 0x9e3779b97f4a7c15ULL) >> 40 & mask;; i = (i + 1) & mask) {
        if (slots[i].first == key) return &slots[i].second;
        if (slots[i].first == 0) return nullptr;
      }
    }
    void insert(std::uint64_t key, SizeStats v) {
      if (2 * (used + 1) > slots.size()) {
        std::vector<std::pair<std::uint64_t, SizeStats>> old(std::max<std::size_t>(64, 2 * slots.size()));
        old.swap(slots);
        used = 0;
        for (const auto& [k, x] : old)
          if (k != 0) insert(k, x);
      }
      const std::size_t mask = slots.size() - 1;
      std::size_t i = (key * 0x9e3779b97f4a7c15ULL) >> 40 & mask;
      while (slots[i].first != 0 && slots[i].first != key) i = (i + 1) & mask;
      if (slots[i].first == 0) ++used;
      slots[i] = {key, v};
    }
  };
  mutable FastMemo dim_fast_memo_;
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


// Buffer geometry of one step, in elements; the executor allocates exactly these regions.
struct BufferGeometry {
  std::int64_t group_size = 1;
  std::int64_t chunk = 0;       // padded per-peer chunk of a collective
  bool zero_copy = false;       // the collective runs on the caller's buffers directly
  bool pad_send = false;        // all_gather: own chunk copied into a padded send buffer
  std::int64_t send_elems = 0;  // scratch regions
  std::int64_t recv_elems = 0;
  std::int64_t from_max = 0;    // largest local numel before / after
  std::int64_t to_max = 0;
  std::int64_t from_min = 0;
  std::int64_t to_min = 0;
};
[[nodiscard]] BufferGeometry step_buffers(const Geometry& g, StepKind kind, std::span<const int> mesh_dims,
                                       std::span<const int> tensor_dims, const Sharding& from,
                                       const Sharding& to, const Geometry::DirectStats* direct = nullptr);
// Bytes live during a step besides the caller's buffers.
[[nodiscard]] std::int64_t step_peak_bytes(const Geometry& g, const BufferGeometry& b, bool from_is_input,
                                           bool to_is_output);

struct SearchBound {
  double us = 0;
  std::int64_t missing = 0;
  // Where the bound is exact in the search's own integer picoseconds (the PyTorch formula's
  // relaxed graph, whose steps cost exactly what the real ones do): that value (else -1), and
  // the fewest steps of a relaxed path of that cost, a bound on the steps still to take.
  std::int64_t exact_ps = -1;
  std::int32_t steps = 0;
  // The bound without its last-step term (Bounds::last_step_bound_us), which charges the target
  // buffer's copy: a direct step's floor adds that copy to this (< 0: the same as `us`).
  double before_last_us = -1;
  // A floor of a direct step's busiest rank's sent + received elements from this state (the
  // copies it makes): at least `missing` (docs/planner.md).
  std::int64_t traffic = 0;
  // Some host block lacks elements none of its ranks holds: a direct step from here moves data
  // between hosts, so it is priced on the inter-host link.
  bool enters_host = false;
};

// A relabeling of the mesh dims: dim m becomes dim p[m] (Sharding::with_mesh_dims_relabeled).
using DimPerm = std::array<std::int8_t, Sharding::kMaxMeshDims>;
// A permutation of the tensor dims: dim d becomes dim p[d] (Sharding::with_tensor_dims_permuted).
using TensorPerm = std::array<std::int8_t, Sharding::kMaxTensorDims>;
template <class Perm>
[[nodiscard]] constexpr Perm identity_of() noexcept {
  Perm p{};
  for (std::size_t m = 0; m < p.size(); ++m) p[m] = static_cast<std::int8_t>(m);
  return p;
}
[[nodiscard]] constexpr DimPerm identity_perm() noexcept { return identity_of<DimPerm>(); }
// What the searches merge states by (GraphContext::use_symmetry): a relabeling of interchangeable
// mesh dims and a permutation of interchangeable tensor dims. The two act on separate parts of a
// layout (the entries' mesh dims and Partial slots; which tensor dim holds which entries), so
// they commute, and relabelings compose part by part.
struct Relabeling {
  // (constants: a default relabeling is three stores)
  static constexpr DimPerm kMeshIdentity = identity_of<DimPerm>();
  static constexpr TensorPerm kTensorIdentity = identity_of<TensorPerm>();
  DimPerm mesh = kMeshIdentity;
  TensorPerm tensor = kTensorIdentity;
  bool operator==(const Relabeling&) const = default;
  [[nodiscard]] Sharding apply(const Sharding& s, int mesh_ndim, bool tensor_moves) const noexcept {
    Sharding r = s.with_mesh_dims_relabeled(std::span<const std::int8_t>(mesh.data(), static_cast<std::size_t>(mesh_ndim)));
    return tensor_moves ? r.with_tensor_dims_permuted(std::span<const std::int8_t>(tensor.data(), static_cast<std::size_t>(s.tensor_ndim())))
                        : r;
  }
  // (over the first mesh_ndim mesh dims and tensor_ndim tensor dims; the others stay in place)
  [[nodiscard]] Relabeling inverse(int mesh_ndim, int tensor_ndim) const noexcept {
    Relabeling r;
    for (int m = 0; m < mesh_ndim; ++m) r.mesh[static_cast<std::size_t>(mesh[static_cast<std::size_t>(m)])] = static_cast<std::int8_t>(m);
    for (int d = 0; d < tensor_ndim; ++d)
      r.tensor[static_cast<std::size_t>(tensor[static_cast<std::size_t>(d)])] = static_cast<std::int8_t>(d);
    return r;
  }
};

// One edge as the searches keep it: the target's state id, how the edge was generated, its cost.
// With interchangeable mesh dims (GraphContext::use_symmetry) `to` is the canonical state of the
// layout the edge reaches, `perm` the relabeling that made it (an index into StateTable::perms;
// 0: identity).
struct SearchEdge {
  std::uint32_t to;
  StepKind kind;
  DimList group;
  std::uint16_t perm = 0;
  bool costed = false;  // cost and peak are filled in when a search first needs them
  bool met = false;     // some search met it (costed it, or deferred it with its floor)
  double floor_us = -1;  // Bounds::edge_floor_us, once a search deferred it (< 0: not yet)
  double cost_us = 0;
  std::int64_t peak_bytes = 0;
};

// What the edges out of a state depend on: the mesh, the shape, the edge set, the target (relabel,
// local fills, direct), the tensor dims in play and the shard kinds.
struct EdgeScope {
  const Mesh& mesh;
  const std::vector<std::int64_t>& shape;
  EdgeSet edges;
  const Sharding& dst;
  const std::vector<int>& play_dims;
  const std::vector<std::pair<std::int64_t, bool>>& shard_kinds;
};
// Plain shards and the strided split factors `src` or `dst` use: the shard kinds edges create.
[[nodiscard]] std::vector<std::pair<std::int64_t, bool>> shard_kinds_of(const Sharding& src, const Sharding& dst);

// One planning request, fixed once made (validated by the constructor): the mesh, shape, dtype,
// cost model and edge set, the source and target, and what every step derives from them.
struct Query {
  Query(const Layout& src, const Layout& dst, const CostModel& cost, EdgeSet edges);
  Query(const Layout&, const Layout&, CostModel&&, EdgeSet) = delete;  // it keeps a reference
  Mesh mesh;
  std::vector<std::int64_t> shape;
  DType dtype;
  const CostModel& cost;  // the caller's: it outlives the query (RedistributionGraph keeps a copy)
  EdgeSet edges;
  Sharding src, dst;
  std::vector<int> play_dims;                               // tensor dims that may be sharded
  std::vector<std::pair<std::int64_t, bool>> shard_kinds;  // (split_factor, strided) options
  Geometry geo;
  double numel = 1;  // the tensor's element count, as the cost formulas use it
  [[nodiscard]] EdgeScope scope() const noexcept { return {mesh, shape, edges, dst, play_dims, shard_kinds}; }
};

// The A* lower bounds of one query (bounds.cpp, docs/planner.md): admissible and consistent,
// built once from the query's tables; lookups memoise per (tensor dim, entries).
class Bounds {
 public:
  explicit Bounds(const Query& q);
  Bounds(const Bounds&) = delete;
  Bounds& operator=(const Bounds&) = delete;
  // A* lower bound on the cost from `s` to the target (µs), and the largest number of target
  // elements one rank still lacks in `s`.
  using Bound = SearchBound;
  [[nodiscard]] Bound lower_bound(const Sharding& s) const;
  // One of its terms (ring formulas; 0 otherwise): the reductions `s` still needs, as the
  // busiest rank's share of the contributions the ranks must receive to combine every
  // element's down to the target's count, at the fastest receive rate, plus one latency.
  [[nodiscard]] double reduction_bound_us(const Sharding& s) const;
  // Another (ring formulas; 0 otherwise): what the last step into the target must cost, from a
  // state not equivalent to it whose busiest rank lacks `missing` of the target's elements.
  [[nodiscard]] double last_step_bound_us(const Sharding& s, std::int64_t missing) const;
  // The busiest rank's sent + received elements of a direct step, at least: what it lacks
  // (`missing`), and twice the average of what the ranks lack (`lacking`: their sum), since
  // every lacking element is sent once and received once.
  [[nodiscard]] std::int64_t direct_traffic_floor(std::int64_t missing, std::int64_t lacking) const noexcept {
    return std::max(missing, (2 * lacking + mesh.num_ranks() - 1) / mesh.num_ranks());
  }
  // The least copy time of a direct step into the target whose busiest rank sends and receives
  // at least `traffic` elements (at least what it lacks): it packs and unpacks those and writes
  // the target's largest shard.
  [[nodiscard]] double direct_copy_floor_us(std::int64_t traffic) const noexcept {
    return static_cast<double>((traffic + dst_max_numel_) * geo.itemsize()) / (cost.copy_bw_GBps * 1e3);
  }
  // The least communication time of a direct step (ring formulas) whose busiest rank receives
  // at least `bytes`: on the inter-host link when it must cross hosts, else on the cheaper link.
  [[nodiscard]] double direct_comm_floor_us(double bytes, bool enters_host) const;
  // A floor of the cost of a `kind` step over `group` out of `from`, whatever state it leads to,
  // from what `from` fixes (`from_max`: its largest local shard, elements). The search costs an
  // edge only once this floor could still be on a plan within reach (search.cpp). Direct: 0.
  [[nodiscard]] double edge_floor_us(StepKind kind, std::span<const int> group, const Sharding& from,
                                     std::int64_t from_max) const;
  // Whether the ranks and host blocks the bounds sample map onto sampled ones when mesh dims i
  // and j (of one size) trade coordinates: then every bound is the same for a state and for its
  // relabeling that swaps i and j.
  [[nodiscard]] bool sample_invariant(int i, int j) const;
  // The cost model with bound_link's constants on both links and no curves (what bounds price with).
  [[nodiscard]] const CostModel& optimistic() const noexcept { return optimistic_; }
  // (tests) The host-block term's sampled blocks (0 without the term), and block k's count of
  // its needed elements along dim d that its ranks hold under `e`: as the bound counts it, or by
  // the union of every member's indices (`reference`).
  [[nodiscard]] std::size_t sampled_blocks() const noexcept { return blocks_ ? blocks_->coords.size() : 0; }
  [[nodiscard]] std::int64_t block_count(int d, Entries e, std::size_t k, bool reference) const;
  // What the byte terms charge for `bytes` (> 0) received by one rank in steps on the inter-host
  // link (`inter`), within a host (`intra`) or either (neither; the missing-bytes, reduction and
  // last-step terms): at most the cost of any such step whose busiest rank receives that much
  // (a fitted profile's envelope, else one latency plus the bytes at the best receive rate).
  [[nodiscard]] double receive_floor_us(double bytes, bool inter, bool intra) const noexcept;

 private:
  // the query, by the names the bound code reads
  const Mesh& mesh;
  const std::vector<std::int64_t>& shape;
  const DType dtype;
  const CostModel& cost;
  const EdgeSet edges;
  const Sharding& src;
  const Sharding& dst;
  const Geometry& geo;
  const double numel;
  struct DimTable {
    std::vector<std::int32_t> variant;  // per rank position: variant of the target's dim
    std::vector<std::int64_t> need;     // per target variant: owned size
    std::vector<Interval> range;        // per target variant: its one range (empty: strided)
  };
  void init_bounds();  // the tables below (bounds.cpp)
  // optimistic_.wire_floor_us(bytes) at its rate computed once: the least time of the steps that
  // deliver `bytes` to one rank (0 under the PyTorch formula)
  [[nodiscard]] double wire_floor_us(double bytes) const noexcept {
    return recv_floor_bytes_per_us_ > 0 && bytes > 0 ? bytes / recv_floor_bytes_per_us_ : 0.0;
  }
  double recv_floor_bytes_per_us_ = 0;
  // The least latency any communication step pays, on either link.
  [[nodiscard]] double alpha_floor_us() const noexcept {
    return std::min(optimistic_.intra.alpha_us, optimistic_.inter.alpha_us);
  }
  // Fitted curves (ring formulas): per link (within a host, between hosts, either) the least
  // time of a step on it whose busiest rank receives `bytes`: the lower envelope of one line
  // (latency at two ranks, time per byte) per band of each collective's curve, and the link's
  // constants for a collective without one. A band charges its own latency with its own rate,
  // where bound_link pairs the least latency of any band with the best rate of any. Concave and
  // nonnegative at 0 bytes, so steps that receive b1, b2, ... cost at least the envelope of
  // b1 + b2 + ...: the byte terms below sum over a path's steps through it. Unset without curves
  // (the single line alpha_floor_us + wire_floor_us is then the envelope).
  struct Envelope {
    boost::container::small_vector<std::pair<double, double>, 8> lines;  // (latency us, us per byte), by increasing bytes
    [[nodiscard]] double at(double bytes) const noexcept {
      if (bytes <= 0) return 0;
      double t = lines.front().first + bytes * lines.front().second;
      for (std::size_t i = 1; i < lines.size(); ++i) t = std::min(t, lines[i].first + bytes * lines[i].second);
      return t;
    }
  };
  enum Link : std::uint8_t { kIntra = 0, kInter = 1, kEither = 2 };
  std::optional<std::array<Envelope, 3>> envelopes_;
  // receive_floor_us on either link for a positive byte count (ring formulas): the missing-bytes,
  // reduction and last-step terms' charge, inline on their hot path
  [[nodiscard]] double receive_either_us(double bytes) const noexcept {
    return envelopes_ ? (*envelopes_)[kEither].at(bytes) : alpha_floor_us() + wire_floor_us(bytes);
  }
  void build_envelopes();
  std::vector<DimTable> dst_tables_;
  std::vector<std::int64_t> rank_need_;  // per sampled rank position: its target shard's elements
  std::int64_t max_rank_need_ = 0;       // the largest of them
  std::int64_t dst_max_numel_ = 0;  // the target's largest local shard (elements)
  // last_step_bound_us: the fewest ranks of a mesh dim (two or more) the target replicates over
  // (0: none), and whether it shards over a mesh dim of two or more ranks
  std::int64_t dst_replicate_min_ = 0;
  bool dst_shards_ = false;
  // edge_floor_us of a collective under the ring formulas, which depends only on (kind, group
  // size, link, the source's largest shard): open addressing over that key, at most half full
  struct FloorSlot {
    std::uint64_t at = 0;  // kind, group size and link (0: empty)
    std::int64_t from_max = 0;
    double us = 0;
  };
  mutable std::vector<FloorSlot> floor_memo_;
  mutable std::size_t floor_memo_used_ = 0;
  // pytorch edge set: the least a communication step over mesh dim m alone can cost (0 for a
  // mesh dim of one rank), and whether the tensor has any element
  std::vector<double> comm_floor_us_;
  bool empty_tensor_ = false;
  // The cost model with its most optimistic constants (bound_link on both links, no curves):
  // what the lower bounds price their relaxed steps with, through CostModel::time.
  CostModel optimistic_;
  // PyTorch formula with the pytorch edge set: exact distances to the target in a relaxed graph
  // whose states keep, per mesh dim of two or more ranks, only a class (R, Shard of the target's
  // tensor dim, Shard of another, Partial of the target's op, another Partial). A step's cost
  // under that formula depends on nothing else, so every step maps onto a relaxed step of the
  // same cost and these distances are a consistent bound (docs/planner.md).
  struct Abstraction {
    std::vector<int> dims;                          // mesh dims of two or more ranks
    std::vector<std::array<std::int16_t, 5>> code;  // per dim: class -> digit (-1: class cannot occur)
    std::vector<std::int64_t> weight;               // per dim: mixed-radix weight
    std::vector<double> dist;                       // per relaxed state: cost to the target's class
    std::vector<std::int64_t> dist_ps;              // PyTorch formula: the same in exact picoseconds
    std::vector<std::int32_t> steps;                // and the fewest steps at that cost
  };
  std::optional<Abstraction> abstraction_;
  void build_abstraction();
  [[nodiscard]] int class_of(const Sharding& s, int m) const noexcept;
  // the ranks the bound looks at: their mesh coordinates, one after another (no list per rank)
  struct SampledCoords {
    std::vector<std::int64_t> flat;
    std::size_t ndim = 0;
    [[nodiscard]] std::size_t size() const noexcept { return ndim == 0 ? 0 : flat.size() / ndim; }
    [[nodiscard]] std::span<const std::int64_t> operator[](std::size_t p) const noexcept {
      return std::span<const std::int64_t>(flat).subspan(p * ndim, ndim);
    }
  };
  SampledCoords coords_;
  // Host blocks: the ranks that share their coordinates on every inter-host mesh dim. Only a step
  // over an inter-host mesh dim moves data between blocks, and every such step pays the inter
  // link, so the elements a block needs and none of its ranks holds bound the inter-host wire
  // time of any path (bounds.cpp). Built for ring formulas when the target has no Partial.
  struct Blocks {
    std::vector<char> intra;                         // per mesh dim: intra-host with two or more ranks
    std::vector<char> inter;                         // per mesh dim: inter-host with two or more ranks
    std::int64_t ranks = 1;                          // ranks per block
    std::vector<std::vector<std::int64_t>> coords;   // sampled blocks: one member's coordinate each
    std::vector<std::vector<IndexSet>> need;         // [tensor dim][block]: the target's elements the block owns
    std::vector<double> need_numel;                  // [block]: product over tensor dims
    std::vector<std::vector<std::int64_t>> rank_need;  // [tensor dim][block]: how much the sampled member owns
    std::vector<double> rank_need_numel;             // [block]
    double alpha_us = 0, bw_GBps = 0;                // the least latency and best bandwidth of an inter-host step
    double intra_alpha_us = 0, intra_bw_GBps = 0;    // the same for steps within a block
    // block_bound_us of any state with a Partial over an inter-host mesh dim (the same for all
    // of them: every block and rank lacks all it needs), once computed (-1: not yet)
    mutable double all_lacking_us = -1;
    mutable bool all_lacking_enters = false;
  };
  std::optional<Blocks> blocks_;
  void build_blocks();
  [[nodiscard]] IndexSet block_union(int d, Entries e, std::span<const std::int64_t> coord) const;
  // need.overlap(block_union(d, e, coord)), without building the union where `e` has no strided entry
  [[nodiscard]] std::int64_t block_overlap(int d, Entries e, std::span<const std::int64_t> coord, const IndexSet& need) const;
  // What a state holds along one tensor dim, by (tensor dim, entries), made when first asked and
  // kept for the query: one record per distinct pair, found by open addressing over its hash (no
  // node or table allocated per pair); the counts live in one array, `held_values_`, as offsets
  // (the array grows while a state's dims are looked up: pointers are taken after).
  struct HeldRecord {
    std::array<ShardEntry, Sharding::kMaxMeshDims> v{};  // the entries (rules out hash collisions)
    std::uint8_t n = 0;
    std::int8_t d = -1;
    std::int32_t rank_at = -1;   // [rank position]: the target's elements along d the sampled rank holds
    std::int32_t block_at = -1;  // [block] held by the block, then [block] by its sampled member
    [[nodiscard]] bool same(int dim, Entries e) const {
      return d == dim && n == e.size() && std::equal(e.begin(), e.end(), v.begin());
    }
  };
  mutable std::vector<HeldRecord> held_;
  mutable std::vector<std::uint32_t> held_slots_;  // index + 1 into held_ (0: empty), at most half full
  mutable std::vector<std::int64_t> held_values_;
  // the record of (d, e), made (without tables) if absent
  [[nodiscard]] std::uint32_t held_record(int d, Entries e) const;
  // offsets into held_values_ of record r's tables, made if absent
  [[nodiscard]] std::size_t held_table(std::uint32_t r) const;
  [[nodiscard]] std::size_t block_held(std::uint32_t r) const;
  // `enters` (when given) is set when some sampled block lacks elements none of its ranks holds;
  // `records` are the state's held_record per tensor dim.
  [[nodiscard]] double block_bound_us(const Sharding& s, std::span<const std::uint32_t> records, bool* enters) const;
};

// A layout in 16 bits per mesh dim, what the searches key the states they meet by (a layout
// has one key and a key one layout, for a query's mesh, tensor dims and shard kinds): 0 for
// Replicate, 0x4000 | op for a Partial, 0x8000 | tensor dim << 9 | position in its order << 6 |
// shard kind for a shard (its index among the query's shard kinds, which run in the order of
// (strided, split factor)). Mesh dims 0-3 in the first word, 4-7 in the second. The roles
// compare as GraphContext::canonical_mesh_perm orders them, so the canonical relabeling can be
// found on the key.
struct StateKey {
  std::array<std::uint64_t, 2> w{};
  bool operator==(const StateKey&) const = default;
  [[nodiscard]] std::uint16_t role(int m) const noexcept {
    return static_cast<std::uint16_t>(w[static_cast<std::size_t>(m) >> 2] >> ((m & 3) * 16));
  }
  void set(int m, std::uint16_t r) noexcept {
    auto& x = w[static_cast<std::size_t>(m) >> 2];
    const int sh = (m & 3) * 16;
    x = (x & ~(std::uint64_t{0xffff} << sh)) | std::uint64_t{r} << sh;
  }
  [[nodiscard]] std::uint64_t hash() const noexcept {
    std::uint64_t h = w[0] * 0x9e3779b97f4a7c15ULL ^ w[1] * 0xc2b2ae3d27d4eb4fULL;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ULL;
    return h ^ h >> 32;
  }
};

// The ids of a table's states by their keys: open addressing over their hashes (linear probing, at
// most half full), no node per state.
class StateIndex {
 public:
  // The id of the state with key `s` among `states`' keys (hash `h`), or -1; `slot` is where it
  // would go.
  [[nodiscard]] std::int64_t find(const StateKey& s, std::uint64_t h, const std::vector<StateKey>& states, std::size_t& slot) const {
    if (slots_.empty()) return -1;
    for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
      const std::uint32_t v = slots_[i];
      if (v == 0) {
        slot = i;
        return -1;
      }
      if (hashes_[v - 1] == h && states[v - 1] == s) return v - 1;
    }
  }
  // Records id (the next one, hash `h`) at `slot` from find, growing when half full.
  void insert(std::uint32_t id, std::uint64_t h, std::size_t slot) {
    hashes_.push_back(h);
    if (2 * (hashes_.size() + 1) > slots_.size()) {
      rehash(std::max<std::size_t>(128, 4 * hashes_.size()));
      return;
    }
    slots_[slot] = id + 1;
  }
  void reserve(std::size_t n) {
    hashes_.reserve(n);
    rehash(std::max<std::size_t>(128, 4 * n));
  }
  // Empty, keeping the memory (a pooled table's index).
  void clear() {
    hashes_.clear();
    std::fill(slots_.begin(), slots_.end(), 0u);
  }
  [[nodiscard]] std::size_t slot_count() const noexcept { return slots_.size(); }

 private:
  void rehash(std::size_t cap) {
    std::size_t c = 1;
    while (c < cap) c <<= 1;
    slots_.assign(c, 0);
    mask_ = c - 1;
    for (std::uint32_t id = 0; id < hashes_.size(); ++id) {
      std::size_t i = hashes_[id] & mask_;
      while (slots_[i] != 0) i = (i + 1) & mask_;
      slots_[i] = id + 1;
    }
  }
  std::vector<std::uint32_t> slots_;  // id + 1; 0: empty
  std::vector<std::uint64_t> hashes_;  // per id
  std::size_t mask_ = 0;
};

// How an edge's next layout is made from the layout it leaves: the target itself (relabel,
// direct), an entry appended to tensor dim `d` (replacing what mesh dim `entry.mesh_dim` held:
// local_chunk, reduce_scatter, all_to_all), a Partial on mesh dim `m`, mesh dim `m` or the dims
// of `mask` replicated (gathers, all_reduce), or the edge's group appended in order to dim `d`
// (a flattened reduce_scatter).
struct Move {
  enum class Op : std::uint8_t { target, append, partial, replicate, replicated, scatter };
  Op op = Op::target;
  std::int8_t m = 0, d = 0;
  std::uint8_t kind = 0;  // append: the entry's index among the query's shard kinds
  ReduceOp rop{};
  ShardEntry entry{};
  std::uint32_t mask = 0;
  [[nodiscard]] Sharding apply(const Sharding& from, const Sharding& dst, const DimList& group) const;
};

// The search state of one query, shared by its plan and runner-up searches: the states met so
// far as small integer ids (first met first), their lower bounds, their edge lists once
// enumerated (direct excluded) and their direct steps once costed, with the limits on them.
struct StateTable {
  std::vector<Sharding> states;
  std::vector<StateKey> keys;  // per state: its key, what state_ids finds it by
  StateIndex state_ids;
  std::vector<SearchBound> bound;
  std::vector<std::vector<SearchEdge>> edge_list;
  std::vector<char> edges_done;
  std::vector<std::int32_t> direct_at;
  std::vector<double> direct_floor;  // per state: its direct step's floor once computed (< 0: not yet)
  std::vector<Step> direct_steps;
  std::vector<DimList> direct_dims;  // per cached direct step: the mesh dims its transfers cross
  // the relabelings edges made their layouts canonical with (GraphContext::use_symmetry), the
  // identity first once there is any; at most 8! of them
  std::vector<Relabeling> perms;
  struct RelabelingKey {
    std::array<std::uint64_t, 3> words;  // the mesh part, then the tensor part's 16 bytes
    bool operator==(const RelabelingKey&) const = default;
  };
  struct RelabelingHash {
    std::size_t operator()(const RelabelingKey& k) const noexcept {
      return static_cast<std::size_t>((k.words[0] * 0x9e3779b97f4a7c15ULL) ^ (k.words[1] * 0xff51afd7ed558ccdULL) ^ k.words[2]);
    }
  };
  // (relabelings of mesh dims alone, the common case, by their mesh part; the others in full)
  std::unordered_map<std::uint64_t, std::uint16_t> mesh_perm_ids;
  std::unordered_map<RelabelingKey, std::uint16_t, RelabelingHash> perm_ids;
  std::int64_t search_bytes = 0;  // approximate bytes held by the table and the searches' queues
  std::int64_t max_states = kDefaultMaxStates;
  std::int64_t max_search_bytes = kDefaultMaxSearchBytes;
  // Empty with the default limits, keeping the lists' memory (GraphContext reuses a small
  // query's table per thread: most queries meet a few dozen states).
  void reset();
};

// What the searches and the edge enumeration work on: the query (immutable), its bounds, and
// the search state (the only thing a search changes).
struct GraphContext : Query {
  GraphContext(const Layout& src, const Layout& dst, const CostModel& cost, EdgeSet edges);
  GraphContext(const Layout&, const Layout&, CostModel&&, EdgeSet) = delete;  // it keeps a reference
  GraphContext(const GraphContext&) = delete;
  GraphContext& operator=(const GraphContext&) = delete;
  ~GraphContext();
  Bounds bounds;
  mutable StateTable table;
  // The id of `s`, interning it (and computing its bound) when new; throws past table.max_states.
  std::uint32_t intern(const Sharding& s) const;
  // A layout's key (every layout of the query's shard kinds has one: the source's, the target's
  // and every one an edge makes).
  [[nodiscard]] StateKey key_of(const Sharding& s) const;
  // The key of the layout `mv` makes out of `from` (key `k`) with an edge over `group`.
  [[nodiscard]] StateKey key_after(const StateKey& k, const Sharding& from, const Move& mv, const DimList& group) const noexcept;
  std::vector<SearchEdge>& edges_of(std::uint32_t id) const;
  // Costs edge `e` out of state `from` (once; the searches share the record).
  void cost_edge(std::uint32_t from, SearchEdge& e) const;
  // Bounds::edge_floor_us of edge `e` out of state `from` (once; kept in the record). `from_max`
  // caches the state's largest local shard across its edges (< 0: not computed yet).
  double edge_floor(std::uint32_t from, SearchEdge& e, std::int64_t& from_max) const;
  const Step& direct_step(std::uint32_t id) const;
  // A floor of the direct step's cost from state `id` (the search defers the step with it; once
  // per state, kept in the table).
  double direct_floor_us(std::uint32_t id) const;
  // Interchangeable mesh dims (docs/planner.md): dims of one size on the same side of the host
  // boundary whose exchange leaves the target and the bounds' samples as they are. Every step's
  // cost, every bound and every distance to the target is then the same for a layout and for its
  // relabeling, so the searches intern one canonical layout per class of relabelings after the
  // source (a plan step out of a canonical state is relabeled back along the path). Call before
  // searching; the edge set must be `all` (the PyTorch edge set's relaxed graph is not checked
  // for it).
  void use_symmetry();
  // Classes of two or more interchangeable mesh dims, each ascending (empty: none, or not used).
  std::vector<std::vector<int>> sym_classes;
  // Classes of two or more interchangeable tensor dims, each ascending: dims of one size that
  // neither the source nor the target shards, after a tensor dim longer than the mesh has ranks
  // (so no gather or reduce_scatter along any of them, or after them, can work without a copy:
  // every step then costs the same with them exchanged).
  std::vector<std::vector<int>> tensor_sym_classes;
  // Whether the searches merge states at all (some class of either kind).
  [[nodiscard]] bool merges() const noexcept { return !sym_classes.empty() || !tensor_sym_classes.empty(); }
  // Whether some relabeling of those classes changes the source (plan_on then checks the
  // runner-up against paths through the source's canonical state).
  bool src_moves = false;
  // The canonical representative of `s` among its relabelings, and `p` with it == relabel(s, p).
  [[nodiscard]] Sharding canonical(const Sharding& s, Relabeling& p) const;
  // The same relabeling alone; false when it is the identity (`s` is canonical).
  [[nodiscard]] bool canonical_perm(const Sharding& s, Relabeling& p) const;
  // The index of relabeling `p` in table.perms, adding it when new (the identity is 0).
  [[nodiscard]] std::uint16_t relabeling_id(const Relabeling& p) const;
  // `s` relabeled by `p` (with_mesh_dims_relabeled, then with_tensor_dims_permuted if any
  // tensor dims are interchangeable).
  [[nodiscard]] Sharding relabel(const Sharding& s, const Relabeling& p) const noexcept {
    return p.apply(s, mesh.ndim(), !tensor_sym_classes.empty());
  }
  // Adds to table.search_bytes; throws past table.max_search_bytes.
  void charge(std::int64_t bytes) const;
  // canonical_perm's mesh part: the relabeling of interchangeable mesh dims alone (`p` is left
  // as it is when that is the identity)
  [[nodiscard]] bool canonical_mesh_perm(const Sharding& s, DimPerm& p) const;
  // the same on a state's key, and the key relabeled by it
  [[nodiscard]] bool canonical_key_perm(const StateKey& k, DimPerm& p) const;
  [[nodiscard]] StateKey relabeled_key(const StateKey& k, const DimPerm& p) const noexcept;
  // canonical_perm on a state's key: the relabeling `r`, and `c` the canonical layout's key
  // (false, and `c` the key itself, when the layout is canonical)
  [[nodiscard]] bool canonical_key(const StateKey& k, Relabeling& r, StateKey& c) const;

 private:
  // the dims of sym_classes as a bit mask and one after another (what canonical_perm reads)
  std::uint32_t sym_mask_ = 0;
  std::array<std::int8_t, Sharding::kMaxMeshDims> sym_flat_{};
  std::size_t sym_flat_n_ = 0;
  // the id of the state with key `k`, interning make() when new
  template <typename Make>
  std::uint32_t intern_key(const StateKey& k, Make&& make) const;
  std::uint32_t add_state(const Sharding& s, const StateKey& key, std::uint64_t h, std::size_t slot) const;
  StateKey dst_key_{};
  // per mesh dim, the first dim of its class (itself where it has none): what a tensor dim's
  // entries are compared by when ordering interchangeable tensor dims (no mesh relabeling
  // changes it)
  std::array<std::int8_t, Sharding::kMaxMeshDims> mesh_rep_{};
  [[nodiscard]] double compute_direct_floor_us(std::uint32_t id) const;
};

// One edge as the search sees it. `group` is the mesh-dim group the edge was generated with
// (empty for direct/relabel); `step` is costed, and complete (states, dims, reason) only when
// asked for.
struct Edge {
  Sharding to;
  StepKind kind;
  DimList group;
  Step step;
};
// Fills `out` with every edge out of `from`, in the planner's deterministic order. With
// `full` false the step records carry costs, bytes and peaks but no states or reason text
// (the search rebuilds the chosen path's records in full).
void enumerate_edges(const GraphContext& ctx, const Sharding& from, std::vector<Edge>& out, bool full = false,
                     bool with_direct = true);
// The same edges, in the same order, handed to `sink` one by one (nothing stored).
using EdgeSink = std::function<void(const Sharding& to, StepKind kind, const DimList& group, const Step& step)>;
void enumerate_edges(const GraphContext& ctx, const Sharding& from, const EdgeSink& sink, bool full, bool with_direct);
// A callable's reference (it must outlive the call it is passed to): no copy, no allocation,
// for sinks called once per edge.
template <typename Signature>
class CallRef;
template <typename R, typename... Args>
class CallRef<R(Args...)> {
 public:
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, CallRef>>>
  CallRef(F&& f) noexcept  // NOLINT: converts from any callable, like std::function (a CallRef is copied)
      : obj_(const_cast<void*>(static_cast<const void*>(&f))),
        call_([](void* o, Args... a) -> R { return (*static_cast<std::remove_reference_t<F>*>(o))(std::forward<Args>(a)...); }) {}
  R operator()(Args... a) const { return call_(obj_, std::forward<Args>(a)...); }

 private:
  void* obj_;
  R (*call_)(void*, Args...);
};

// The same edges as moves, before two checks that are the caller's: the next layout differs
// from `from`, and its Partial ops mix (move_keeps_ops_mixable). Direct excluded: what the search
// enumerates, costing each edge later, when it may still matter.
using MoveSink = CallRef<void(StepKind kind, const DimList& group, const Move& move)>;
void enumerate_moves(const GraphContext& ctx, const Sharding& from, MoveSink sink);
[[nodiscard]] bool move_keeps_ops_mixable(const Sharding& from, const Move& mv);
// The edge set a request plans with: the options', else the cost profile's own (pytorch for the
// pytorch profile, all otherwise).
[[nodiscard]] inline EdgeSet edge_set_of(const CostModel& cost, const PlanOptions& options) {
  return options.edges.value_or(cost.defaults_to_pytorch_edges() ? EdgeSet::pytorch : EdgeSet::all);
}

// optimal_plans with a slack of `slack_us` plus `latency_share` times the latency (α) of the
// planner's own plan's steps: the batch planner's candidates (docs/batch.md).
[[nodiscard]] std::vector<Plan> near_optimal_plans(const Layout& src, const Layout& dst, const CostModel& cost,
                                                   const PlanOptions& options, std::size_t max_plans, double slack_us,
                                                   double latency_share);

// The mesh dims of `mask` as a gather over them out of `from` lists them (`group`: by tensor
// dim, each dim's entries in shard order); false when some dim's order has an entry of the mask
// below one that is not (no gather removes it; `group` is then incomplete). The gather is an
// edge when this holds and every mesh dim of the mask shards something.
[[nodiscard]] bool all_gather_group(const Sharding& from, std::uint32_t mask, DimList& group);
// Whether the `direct` edge from `from` to the target exists (edge set all, no Partial on a
// mesh dim whose placement changes).
[[nodiscard]] bool direct_allowed(const GraphContext& ctx, const Sharding& from);
[[nodiscard]] bool direct_allowed(const EdgeScope& scope, const Sharding& from);
// Whether `kind` over `group` (in group order) is an edge from `from` to `to` (direct excluded).
[[nodiscard]] bool is_edge(const EdgeScope& scope, const Sharding& from, StepKind kind, std::span<const int> group,
                           const Sharding& to);
// The step record (bytes, peak, cost breakdown and, when `full`, states and why) of a transition.
// `crossed` (direct only): receives the mesh dims its transfers cross.
[[nodiscard]] Step make_step(const GraphContext& ctx, StepKind kind, std::span<const int> mesh_dims,
                             const Sharding& from, const Sharding& to, bool full = true, DimList* crossed = nullptr);
// A direct step as make_step(..., false, &crossed) costed it, completed into the record
// make_step(..., true) gives: states, mesh dims, tensor dims and reason.
[[nodiscard]] Step complete_direct_step(const GraphContext& ctx, Step costed, const DimList& crossed, const Sharding& from,
                                        const Sharding& to);

}  // namespace dtensor
