#pragma once
// The A* lower bounds of a query (bounds.cpp, docs/planner.md).
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include <boost/container/small_vector.hpp>

#include "dtensor/cost_model.hpp"
#include "dtensor/plan.hpp"
#include "open_table.hpp"
#include "query.hpp"

namespace dtensor {

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
    [[nodiscard]] bool vacant() const noexcept { return at == 0; }
  };
  [[nodiscard]] static std::uint64_t floor_hash(std::uint64_t at, std::int64_t from_max) noexcept {
    return ((at * 0x9e3779b97f4a7c15ULL) ^ (static_cast<std::uint64_t>(from_max) * 0xff51afd7ed558ccdULL)) >> 40;
  }
  mutable OpenTable<FloorSlot> floor_memo_{16};
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
  struct HeldSlot {
    std::uint32_t r1 = 0;  // index + 1 into held_ (0: empty)
    [[nodiscard]] bool vacant() const noexcept { return r1 == 0; }
  };
  mutable OpenTable<HeldSlot> held_slots_{16};
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

}  // namespace dtensor
