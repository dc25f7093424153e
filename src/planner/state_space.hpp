#pragma once
// The search state of one query (state_space.cpp): its states as small ids keyed by StateKey, their
// bounds and edge lists, the relabelings that merge interchangeable dims, and GraphContext, what the
// searches and the edge enumeration work on.
#include <array>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "bounds.hpp"
#include "dtensor/plan.hpp"
#include "open_table.hpp"
#include "query.hpp"

namespace dtensor {

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
  struct IdSlot {
    std::uint32_t id1 = 0;  // id + 1; 0: empty
    [[nodiscard]] bool vacant() const noexcept { return id1 == 0; }
  };
  struct HashOf {  // a placed id's hash
    const std::vector<std::uint64_t>* hashes;
    std::uint64_t operator()(IdSlot x) const noexcept { return (*hashes)[x.id1 - 1]; }
  };

 public:
  // The id of the state with key `s` among `states`' keys (hash `h`), or -1; `slot` is where it
  // would go.
  [[nodiscard]] std::int64_t find(const StateKey& s, std::uint64_t h, const std::vector<StateKey>& states, std::size_t& slot) const {
    const IdSlot* hit = ids_.find(h, [&](IdSlot x) { return hashes_[x.id1 - 1] == h && states[x.id1 - 1] == s; }, slot);
    return hit ? static_cast<std::int64_t>(hit->id1) - 1 : -1;
  }
  // Records id (the next one, hash `h`) at `slot` from find, growing when half full.
  void insert(std::uint32_t id, std::uint64_t h, std::size_t slot) {
    hashes_.push_back(h);
    ids_.insert_at(slot, h, IdSlot{id + 1}, HashOf{&hashes_});
  }
  void reserve(std::size_t n) {
    hashes_.reserve(n);
    ids_.reserve(2 * n, HashOf{&hashes_});
  }
  // Empty, keeping the memory (a pooled table's index).
  void clear() {
    hashes_.clear();
    ids_.clear();
  }
  [[nodiscard]] std::size_t slot_count() const noexcept { return ids_.slot_count(); }

 private:
  OpenTable<IdSlot> ids_{128};
  std::vector<std::uint64_t> hashes_;  // per id
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

}  // namespace dtensor
