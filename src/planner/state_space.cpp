// The search state of a query (state_space.hpp): interning states by key, their edge lists and
// direct steps, the relabelings of interchangeable dims (docs/planner.md, "Symmetry"), the limits
// on states and bytes, and the per-thread pool of small tables.
#include <algorithm>
#include <array>
#include <cstring>
#include <limits>

#include "dtensor/error.hpp"
#include "edges.hpp"
#include "state_space.hpp"

namespace dtensor {

void StateTable::reset() {
  states.clear();
  keys.clear();
  state_ids.clear();
  bound.clear();
  edge_list.clear();
  edges_done.clear();
  direct_at.clear();
  direct_floor.clear();
  direct_steps.clear();
  direct_dims.clear();
  perms.clear();
  mesh_perm_ids.clear();
  perm_ids.clear();
  search_bytes = 0;
  max_states = kDefaultMaxStates;
  max_search_bytes = kDefaultMaxSearchBytes;
}

namespace {
// One table per thread kept from the last small query (its lists' memory: a query's contexts
// otherwise allocate them afresh), taken by the next context made on the thread.
struct SparePool {
  StateTable table;
  bool full = false;
};
thread_local SparePool spare_table;
constexpr std::size_t kSpareStates = 256;  // larger tables are freed, not kept
}  // namespace

GraphContext::GraphContext(const Layout& s, const Layout& d, const CostModel& c, EdgeSet e)
    : Query(s, d, c, e), bounds(static_cast<const Query&>(*this)) {
  // (the shard kinds are the plain one and the source's and target's strided ones, at most 17:
  // every kind has its 6-bit index in a StateKey)
  dst_key_ = key_of(dst);
  if (spare_table.full) {
    table = std::move(spare_table.table);
    spare_table.full = false;
    return;
  }
  table.states.reserve(64);
  table.keys.reserve(64);
  table.bound.reserve(64);
  table.edge_list.reserve(64);
  table.edges_done.reserve(64);
  table.direct_at.reserve(64);
  table.direct_floor.reserve(64);
  table.state_ids.reserve(64);
}

GraphContext::~GraphContext() {
  if (spare_table.full || table.states.capacity() > kSpareStates || table.state_ids.slot_count() > 4 * kSpareStates) return;
  table.reset();
  spare_table.table = std::move(table);
  spare_table.full = true;
}

void GraphContext::charge(std::int64_t bytes) const {
  table.search_bytes += bytes;
  if (table.search_bytes > table.max_search_bytes)
    throw InputError(fmt::format("planning {} -> {} needs more than {} bytes of search state (PlanOptions::max_search_bytes, "
                                 "CLI --max-search-memory); the mesh and tensor have too many intermediate layouts to "
                                 "search within it", src.str(), dst.str(), table.max_search_bytes));
}

StateKey GraphContext::key_of(const Sharding& s) const {
  StateKey k;
  for (int m = 0; m < s.mesh_ndim(); ++m)
    if (const auto op = s.partial(m)) k.set(m, static_cast<std::uint16_t>(0x4000 | static_cast<unsigned>(*op)));
  for (int d = 0; d < s.tensor_ndim(); ++d) {
    const auto es = s.entries(d);
    for (std::size_t i = 0; i < es.size(); ++i) {
      const auto kind = std::find(shard_kinds.begin(), shard_kinds.end(), std::pair{es[i].split_factor, es[i].strided});
      if (kind == shard_kinds.end())  // (no edge makes one: only a caller's own layout can have it)
        throw std::logic_error("GraphContext::key_of: " + s.str() + " has a shard kind that neither the source nor the target has");
      k.set(es[i].mesh_dim, static_cast<std::uint16_t>(0x8000 | d << 9 | static_cast<int>(i) << 6 |
                                                       static_cast<int>(kind - shard_kinds.begin())));
    }
  }
  return k;
}

StateKey GraphContext::key_after(const StateKey& k, const Sharding& from, const Move& mv, const DimList& group) const noexcept {
  StateKey r = k;
  switch (mv.op) {
    case Move::Op::target: return dst_key_;
    case Move::Op::append: {
      // after the entries of dim d, less the one the mesh dim leaves there (all_to_all within a
      // dim: the last, so no other entry moves)
      const int m = mv.entry.mesh_dim;
      const std::uint16_t was = k.role(m);
      const bool on_d = (was & 0x8000) != 0 && (was >> 9 & 0xf) == mv.d;
      const int at = static_cast<int>(from.entries(mv.d).size()) - (on_d ? 1 : 0);
      r.set(m, static_cast<std::uint16_t>(0x8000 | mv.d << 9 | at << 6 | mv.kind));
      return r;
    }
    case Move::Op::partial: r.set(mv.m, static_cast<std::uint16_t>(0x4000 | static_cast<unsigned>(mv.rop))); return r;
    case Move::Op::replicate: r.set(mv.m, 0); return r;
    case Move::Op::replicated:
      for (int m = 0; m < from.mesh_ndim(); ++m)
        if ((mv.mask >> m) & 1u) r.set(m, 0);
      return r;
    case Move::Op::scatter: {
      int at = static_cast<int>(from.entries(mv.d).size());
      for (int m : group.span()) r.set(m, static_cast<std::uint16_t>(0x8000 | mv.d << 9 | at++ << 6));  // (plain: kind 0)
      return r;
    }
  }
  return r;
}

StateKey GraphContext::relabeled_key(const StateKey& k, const DimPerm& p) const noexcept {
  StateKey r;
  for (int m = 0; m < mesh.ndim(); ++m) r.set(p[static_cast<std::size_t>(m)], k.role(m));
  return r;
}

std::uint32_t GraphContext::add_state(const Sharding& s, const StateKey& key, std::uint64_t h, std::size_t slot) const {
  auto& T = table;
  if (static_cast<std::int64_t>(T.states.size()) >= T.max_states) {
    throw InputError(fmt::format("planning {} -> {} explored more than {} states (PlanOptions::max_states, CLI --max-states); the "
                                 "mesh and tensor have too many intermediate layouts to search exhaustively",
                                 src.str(), dst.str(), T.max_states));
  }
  charge(static_cast<std::int64_t>(2 * sizeof(Sharding) + sizeof(SearchBound) + 160));
  const auto id = static_cast<std::uint32_t>(T.states.size());
  T.bound.push_back(bounds.lower_bound(s));
  T.states.push_back(s);
  T.keys.push_back(key);
  T.edge_list.emplace_back();
  T.edges_done.push_back(0);
  T.direct_at.push_back(-1);
  T.direct_floor.push_back(-1);
  T.state_ids.insert(id, h, slot);
  return id;
}

template <typename Make>
std::uint32_t GraphContext::intern_key(const StateKey& k, Make&& make) const {
  const std::uint64_t h = k.hash();
  std::size_t slot = 0;
  if (const std::int64_t id = table.state_ids.find(k, h, table.keys, slot); id >= 0) return static_cast<std::uint32_t>(id);
  return add_state(make(), k, h, slot);
}

std::uint32_t GraphContext::intern(const Sharding& s) const {
  return intern_key(key_of(s), [&]() -> const Sharding& { return s; });
}

void GraphContext::use_symmetry() {
  sym_classes.clear();
  tensor_sym_classes.clear();
  sym_mask_ = 0;
  sym_flat_n_ = 0;
  src_moves = false;
  for (int m = 0; m < Sharding::kMaxMeshDims; ++m) mesh_rep_[static_cast<std::size_t>(m)] = static_cast<std::int8_t>(m);
  if (edges != EdgeSet::all) return;
  const int md = mesh.ndim();
  std::array<int, Sharding::kMaxMeshDims> root{};
  for (int m = 0; m < md; ++m) root[static_cast<std::size_t>(m)] = m;
  auto find = [&](int m) {
    while (root[static_cast<std::size_t>(m)] != m) m = root[static_cast<std::size_t>(m)];
    return m;
  };
  for (int i = 0; i < md; ++i)
    for (int j = i + 1; j < md; ++j) {
      if (mesh.size(i) < 2 || mesh.size(i) != mesh.size(j) ||
          cost.is_inter_host(mesh.shape(), i) != cost.is_inter_host(mesh.shape(), j))
        continue;
      DimPerm swap = identity_perm();
      swap[static_cast<std::size_t>(i)] = static_cast<std::int8_t>(j);
      swap[static_cast<std::size_t>(j)] = static_cast<std::int8_t>(i);
      const std::span<const std::int8_t> sw(swap.data(), static_cast<std::size_t>(md));
      if (dst.with_mesh_dims_relabeled(sw) != dst) continue;
      if (!bounds.sample_invariant(i, j)) continue;
      root[static_cast<std::size_t>(find(j))] = find(i);  // transpositions that join generate every permutation of the class
      // The source may change: it is interned as it is, and only the states after it
      // canonically. Some relabeling moves it exactly when one of these transpositions does
      // (they generate them all, and ones that fix it compose into ones that fix it).
      src_moves = src_moves || src.with_mesh_dims_relabeled(sw) != src;
    }
  for (int m = 0; m < md; ++m) {
    const int r = find(m);
    if (r == m) continue;
    auto it = std::find_if(sym_classes.begin(), sym_classes.end(), [&](const auto& c) { return c.front() == r; });
    if (it == sym_classes.end()) sym_classes.push_back({r, m});
    else it->push_back(m);
  }
  for (auto& c : sym_classes) std::sort(c.begin(), c.end());
  for (const auto& c : sym_classes)
    for (int m : c) {
      sym_mask_ |= 1u << m;
      sym_flat_[sym_flat_n_++] = static_cast<std::int8_t>(m);
      mesh_rep_[static_cast<std::size_t>(m)] = static_cast<std::int8_t>(c.front());
    }
  // Interchangeable tensor dims: no entry in the source or the target (both stay as they are
  // when the dims are exchanged), some earlier tensor dim longer than the mesh has ranks, and
  // either one length or lengths that every product of mesh dims divides (no strided entry at
  // either end, so no step makes one). Every layout splits that earlier dim into at most as many
  // parts as there are ranks, so some rank holds two or more of its indices: a gather or
  // reduce_scatter along any later dim is never contiguous (step_buffers), whichever of the
  // exchanged dims it runs along. Everything else a step costs (bytes, peers, copies, peaks) and
  // every bound reads the dims' lengths and entries only: with one length the exchanged layout
  // reads the same values; with divisible lengths every split of either dim is even, each rank's
  // range along a dim is its length times a fraction that the entries alone fix, and what is
  // counted is a product over tensor dims of such ranges' sizes and overlaps, the same with the
  // lengths exchanged.
  const int nd = static_cast<int>(shape.size());
  int first = 0;  // the first tensor dim after one longer than the mesh has ranks
  while (first < nd && shape[static_cast<std::size_t>(first)] <= mesh.num_ranks()) ++first;
  ++first;
  auto free_dim = [&](int i) { return src.entries(i).empty() && dst.entries(i).empty(); };
  auto plain = [](const Sharding& s) {
    for (int d = 0; d < s.tensor_ndim(); ++d)
      for (const auto& e : s.entries(d))
        if (e.strided || e.split_factor != 1) return false;
    return true;
  };
  const bool even_splits = plain(src) && plain(dst);
  // the dims' class key: their length, or -1 for every length that the mesh's rank count divides
  auto length_key = [&](int i) -> std::int64_t {
    const std::int64_t n = shape[static_cast<std::size_t>(i)];
    return even_splits && n > 0 && n % mesh.num_ranks() == 0 ? -1 : n;
  };
  std::uint32_t placed = 0;  // (no allocation unless some class has two dims: most queries have none)
  for (int i = first; i < nd; ++i) {
    if ((placed >> i) & 1u || !free_dim(i)) continue;
    for (int j = i + 1; j < nd; ++j) {
      if ((placed >> j) & 1u || !free_dim(j) || length_key(j) != length_key(i)) continue;
      if (!((placed >> i) & 1u)) {
        tensor_sym_classes.push_back({i});
        placed |= 1u << i;
      }
      tensor_sym_classes.back().push_back(j);
      placed |= 1u << j;
    }
  }
  // Edges record their relabeling as a 16-bit index (SearchEdge::perm), so the relabelings that
  // can occur, the classes' permutations together, stay below 65,536: the mesh classes' (at most
  // 8! = 40,320) first, then each tensor class, cut to the dims that still fit (none when not two).
  std::uint64_t order = 1;
  for (const auto& c : sym_classes)
    for (std::uint64_t k = 2; k <= c.size(); ++k) order *= k;
  for (auto& c : tensor_sym_classes) {
    std::size_t keep = 0;
    while (keep < c.size() && order * (keep + 1) < 65536) order *= ++keep;
    c.resize(keep < 2 ? 0 : keep);
  }
  std::erase_if(tensor_sym_classes, [](const auto& c) { return c.empty(); });
  // the relabeling table, with the identity as 0, only for a query that merges
  if (merges() && table.perms.empty()) (void)relabeling_id(Relabeling{});
}

namespace {
// The identity tensor permutation as relabeling_id's key reads it (two words of its bytes).
const std::array<std::uint64_t, 2> kTensorIdentityWords = [] {
  std::array<std::uint64_t, 2> w{};
  std::memcpy(w.data(), Relabeling::kTensorIdentity.data(), sizeof w);
  return w;
}();
}  // namespace

std::uint16_t GraphContext::relabeling_id(const Relabeling& p) const {
  static_assert(sizeof(DimPerm) == 8 && sizeof(TensorPerm) == 16);
  StateTable::RelabelingKey key{};
  std::memcpy(&key.words[0], p.mesh.data(), 8);
  std::memcpy(&key.words[1], p.tensor.data(), 16);
  // (relabelings of mesh dims alone by their mesh word: one word to hash and compare)
  std::uint16_t id = static_cast<std::uint16_t>(table.perms.size());
  bool fresh = false;
  if (key.words[1] == kTensorIdentityWords[0] && key.words[2] == kTensorIdentityWords[1]) {
    const auto r = table.mesh_perm_ids.try_emplace(key.words[0], id);
    id = r.first->second;
    fresh = r.second;
  } else {
    const auto r = table.perm_ids.try_emplace(key, id);
    id = r.first->second;
    fresh = r.second;
  }
  if (fresh) {
    charge(static_cast<std::int64_t>(sizeof(Relabeling) + 48));
    table.perms.push_back(p);
  }
  return id;
}

namespace {
// The stable order of a class's dims by `less` (equal ones keep their class order), written into
// the relabeling `p` (p[dim] = the class slot the dim goes to); false, and `p` left as it is,
// when the class is in order already (most are). An insertion sort: a class has at most 16 dims.
template <typename Perm, typename Less>
[[gnu::always_inline]] inline bool order_class(const std::vector<int>& cls, Less&& less, Perm& p) {
  const std::size_t n = cls.size();
  std::size_t k = 1;
  while (k < n && !less(cls[k], cls[k - 1])) ++k;
  if (k == n) return false;
  std::array<int, Sharding::kMaxTensorDims> order{};
  for (k = 0; k < n; ++k) {
    const int x = cls[k];
    std::size_t j = k;
    for (; j > 0 && less(x, order[j - 1]); --j) order[j] = order[j - 1];
    order[j] = x;
  }
  for (k = 0; k < n; ++k) p[static_cast<std::size_t>(order[k])] = static_cast<std::int8_t>(cls[k]);
  return true;
}
}  // namespace

bool GraphContext::canonical_perm(const Sharding& s, Relabeling& r) const {
  r = Relabeling{};
  if (tensor_sym_classes.empty()) return canonical_mesh_perm(s, r.mesh);
  // Interchangeable tensor dims first: ordered by their entries, each read as (its mesh dim's
  // class, or the mesh dim where it has none; strided; split factor), in shard order, a prefix
  // first. No mesh relabeling changes that order, so the mesh dims' roles are then read on the
  // permuted layout. Dims whose entries read the same keep their order (those two layouts may
  // then be interned apart: fewer merges, never a wrong one).
  auto less = [&](int a, int b) {
    const auto ea = s.entries(a), eb = s.entries(b);
    for (std::size_t k = 0; k < ea.size() && k < eb.size(); ++k) {
      const auto& x = ea[k];
      const auto& y = eb[k];
      const int rx = mesh_rep_[static_cast<std::size_t>(x.mesh_dim)], ry = mesh_rep_[static_cast<std::size_t>(y.mesh_dim)];
      if (rx != ry) return rx < ry;
      if (x.strided != y.strided) return y.strided;
      if (x.split_factor != y.split_factor) return x.split_factor < y.split_factor;
    }
    return ea.size() < eb.size();
  };
  bool moved = false;
  for (const auto& cls : tensor_sym_classes) moved = order_class(cls, less, r.tensor) || moved;
  if (!moved) return canonical_mesh_perm(s, r.mesh);
  (void)canonical_mesh_perm(s.with_tensor_dims_permuted(std::span<const std::int8_t>(r.tensor.data(), static_cast<std::size_t>(s.tensor_ndim()))),
                            r.mesh);
  return true;
}

bool GraphContext::canonical_mesh_perm(const Sharding& s, DimPerm& p) const {
  if (sym_classes.empty()) return false;
  // A mesh dim's role in `s`: Replicate, Partial(op), or the entry it is (tensor dim, position
  // in the shard order, strided, split factor). Relabelings within a class permute the roles
  // among its dims; the canonical one gives them to the class's dims in ascending role order.
  // Dims of equal roles (Replicate, one Partial op) give the same layout in either order. A role
  // compares as (kind, op or tensor dim, position, strided) packed in one word, then the split
  // factor (only the class dims' roles are filled in).
  struct Role {
    std::uint64_t key;
    std::int64_t sf;
    bool operator<(const Role& o) const { return key != o.key ? key < o.key : sf < o.sf; }
  };
  std::array<Role, Sharding::kMaxMeshDims> role;  // NOLINT: the class dims' entries are set here (no memset)
  for (std::size_t k = 0; k < sym_flat_n_; ++k) {
    const int m = sym_flat_[k];
    const auto op = s.partial(m);
    role[static_cast<std::size_t>(m)] = {op ? (std::uint64_t{1} << 48) | static_cast<std::uint64_t>(*op) << 32 : 0, 0};
  }
  for (int d = 0; d < s.tensor_ndim(); ++d) {  // the sharded ones: one pass over the entries
    const auto es = s.entries(d);
    for (std::size_t k = 0; k < es.size(); ++k)
      if ((sym_mask_ >> es[k].mesh_dim) & 1u)
        role[static_cast<std::size_t>(es[k].mesh_dim)] = {(std::uint64_t{2} << 48) | static_cast<std::uint64_t>(d) << 32 |
                                                              static_cast<std::uint64_t>(k) << 1 | (es[k].strided ? 1u : 0u),
                                                          es[k].split_factor};
  }
  // the class's dims by role, equal roles in class order
  auto less = [&](int a, int b) { return role[static_cast<std::size_t>(a)] < role[static_cast<std::size_t>(b)]; };
  bool moved = false;
  for (const auto& cls : sym_classes) moved = order_class(cls, less, p) || moved;
  return moved;
}

bool GraphContext::canonical_key_perm(const StateKey& k, DimPerm& p) const {
  // canonical_mesh_perm's order on the key's roles (which compare as its roles do)
  auto less = [&](int a, int b) { return k.role(a) < k.role(b); };
  bool moved = false;
  for (const auto& cls : sym_classes) moved = order_class(cls, less, p) || moved;
  return moved;
}

bool GraphContext::canonical_key(const StateKey& k, Relabeling& r, StateKey& c) const {
  r = Relabeling{};
  StateKey t = k;
  bool moved = false;
  if (!tensor_sym_classes.empty()) {
    // canonical_perm's order of interchangeable tensor dims, read on the key: per dim its
    // entries' (mesh dim's class, shard kind) by position
    std::array<std::array<std::uint16_t, Sharding::kMaxMeshDims>, Sharding::kMaxTensorDims> seq;  // NOLINT: read below len only
    std::array<std::uint8_t, Sharding::kMaxTensorDims> len{};
    for (int m = 0; m < mesh.ndim(); ++m) {
      const std::uint16_t role = k.role(m);
      if (!(role & 0x8000)) continue;
      const int d = role >> 9 & 0xf, pos = role >> 6 & 7;
      seq[static_cast<std::size_t>(d)][static_cast<std::size_t>(pos)] =
          static_cast<std::uint16_t>(mesh_rep_[static_cast<std::size_t>(m)] << 6 | (role & 0x3f));
      len[static_cast<std::size_t>(d)] = std::max<std::uint8_t>(len[static_cast<std::size_t>(d)], static_cast<std::uint8_t>(pos + 1));
    }
    auto less = [&](int a, int b) {
      const auto& sa = seq[static_cast<std::size_t>(a)];
      const auto& sb = seq[static_cast<std::size_t>(b)];
      const std::size_t la = len[static_cast<std::size_t>(a)], lb = len[static_cast<std::size_t>(b)];
      for (std::size_t i = 0; i < la && i < lb; ++i)
        if (sa[i] != sb[i]) return sa[i] < sb[i];
      return la < lb;
    };
    for (const auto& cls : tensor_sym_classes) moved = order_class(cls, less, r.tensor) || moved;
    if (moved)
      for (int m = 0; m < mesh.ndim(); ++m) {
        const std::uint16_t role = k.role(m);
        if (!(role & 0x8000)) continue;
        const int d = r.tensor[static_cast<std::size_t>(role >> 9 & 0xf)];
        t.set(m, static_cast<std::uint16_t>((role & ~(0xf << 9)) | d << 9));
      }
  }
  const bool mesh_moved = canonical_key_perm(t, r.mesh);
  c = mesh_moved ? relabeled_key(t, r.mesh) : t;
  return moved || mesh_moved;
}

Sharding GraphContext::canonical(const Sharding& s, Relabeling& p) const { return canonical_perm(s, p) ? relabel(s, p) : s; }

std::vector<SearchEdge>& GraphContext::edges_of(std::uint32_t id) const {
  auto& T = table;
  if (!T.edges_done[id]) {
    // collected in a reused scratch list, then copied once at its final size (no regrowth)
    thread_local std::vector<SearchEdge> scratch;
    scratch.clear();
    const Sharding from = T.states[id];  // interning may grow `states`
    // On the states' keys: a move changes the roles of the mesh dims it touches, and the next
    // layout is made only when its key is new. Every state met is canonical but the source may
    // not be. Without interchangeable tensor dims, from a canonical state a step over no mesh dim
    // of a class leaves the class dims' roles in their order (it changes their entries' positions
    // only by removing the last entries of a tensor dim or appending after them; a relabel or
    // direct step makes the target, which every relabeling fixes): its layout is canonical as it
    // is, without asking. With interchangeable tensor dims a step over any mesh dim may change
    // their entries, and so their order: every next layout is made canonical.
    const StateKey k0 = T.keys[id];
    DimPerm p0 = identity_perm();
    const bool untouched_canonical = tensor_sym_classes.empty() && (!merges() || !canonical_key_perm(k0, p0));
    enumerate_moves(*this, from, [&](StepKind kind, const DimList& group, const Move& mv) {
      const StateKey k = key_after(k0, from, mv, group);
      if (k == k0 || !move_keeps_ops_mixable(from, mv)) return;
      std::uint32_t touched = 0;  // (the group: every mesh dim whose role the move changes)
      for (int m : group.span()) touched |= 1u << m;
      Relabeling p;
      StateKey c;
      if ((untouched_canonical && (touched & sym_mask_) == 0) || !canonical_key(k, p, c)) {
        scratch.push_back({intern_key(k, [&] { return mv.apply(from, dst, group); }), kind, group});
        return;
      }
      scratch.push_back({intern_key(c, [&] { return relabel(mv.apply(from, dst, group), p); }), kind, group, relabeling_id(p)});
    });
    charge(static_cast<std::int64_t>(scratch.size() * sizeof(SearchEdge) + 64));
    T.edge_list[id].assign(scratch.begin(), scratch.end());
    T.edges_done[id] = 1;
  }
  return T.edge_list[id];
}

namespace {
void keep_cost(SearchEdge& e, const Step& st) {
  e.cost_us = st.cost_us;
  e.peak_bytes = st.peak_bytes;
  e.costed = true;
}
}  // namespace

void GraphContext::cost_edge(std::uint32_t from, SearchEdge& e) const {
  if (e.costed) return;
  if (e.perm == 0) return keep_cost(e, make_step(*this, e.kind, e.group.span(), table.states[from], table.states[e.to], false));
  // the step reaches the layout the edge made, which its canonical state relabels (perm)
  const int tensor_moves = tensor_sym_classes.empty() ? 0 : static_cast<int>(shape.size());
  const Sharding made = relabel(table.states[e.to], table.perms[e.perm].inverse(mesh.ndim(), tensor_moves));
  keep_cost(e, make_step(*this, e.kind, e.group.span(), table.states[from], made, false));
}

double GraphContext::edge_floor(std::uint32_t from, SearchEdge& e, std::int64_t& from_max) const {
  if (e.floor_us < 0) {
    if (from_max < 0) from_max = geo.numel_stats(table.states[from]).max;
    e.floor_us = bounds.edge_floor_us(e.kind, e.group.span(), table.states[from], from_max);
  }
  return e.floor_us;
}

double GraphContext::direct_floor_us(std::uint32_t u) const {
  // (once per state: the runner-up search meets the plan search's states again)
  double& kept = table.direct_floor[u];
  if (kept < 0) kept = compute_direct_floor_us(u);
  return kept;
}

// A floor of the direct step's cost from state `u`. The step costs its latency (one peer at
// least) and wire time: the busiest rank's bytes, at least what the state lacks (`missing`), at
// its link's p2p bandwidth or on a fitted send/recv curve (Bounds::direct_comm_floor_us; under
// PyTorch's formula only the latency). And (ring formulas) it copies: it packs what its busiest
// rank sends, unpacks what it receives (Bounds' `traffic`: at least `missing`) and writes the
// target's largest shard. And it costs at least the state's bound, whose terms price received
// bytes at the fastest receive rate, which for a direct step includes unpacking them: so also
// at least the bound without its last-step term (which charges the target's copy) plus the
// copies other than unpacking what the busiest rank lacks.
double GraphContext::compute_direct_floor_us(std::uint32_t u) const {
  const GraphContext& ctx = *this;
  const LinkParams& L = ctx.bounds.optimistic().intra;  // bound_link's constants, computed once per query
  const LinkParams& X = ctx.bounds.optimistic().inter;
  const auto& bu = ctx.table.bound[u];
  // with nothing missing a direct step is local copies only (no peers, no latency)
  // (a step whose transfers cross a host boundary is priced on the inter-host link)
  const double bytes = static_cast<double>(bu.missing * ctx.geo.itemsize());
  if (ctx.cost.formula == CostModel::Formula::pytorch)  // (latency only, as this floor always took there)
    return bu.missing == 0 ? 0.0 : std::min(L.alpha_us, X.alpha_us) + std::min(L.alpha_per_peer_us, X.alpha_per_peer_us);
  const double comm = bu.missing == 0 ? 0.0 : ctx.bounds.direct_comm_floor_us(bytes, bu.enters_host);
  const double copies = ctx.bounds.direct_copy_floor_us(std::max(bu.missing, bu.traffic));
  const double unpack = ctx.bounds.direct_copy_floor_us(bu.missing) - ctx.bounds.direct_copy_floor_us(0);
  const double before_last = bu.before_last_us >= 0 ? bu.before_last_us : bu.us;
  return std::max({comm + copies, before_last + copies - unpack, bu.us});
}

const Step& GraphContext::direct_step(std::uint32_t id) const {
  auto& T = table;
  if (T.direct_at[id] < 0) {
    charge(static_cast<std::int64_t>(sizeof(Step) + sizeof(DimList) + 64));
    T.direct_at[id] = static_cast<std::int32_t>(T.direct_steps.size());
    DimList crossed;
    T.direct_steps.push_back(make_step(*this, StepKind::direct, {}, T.states[id], dst, false, &crossed));
    T.direct_dims.push_back(crossed);
  }
  return T.direct_steps[static_cast<std::size_t>(T.direct_at[id])];
}

}  // namespace dtensor
