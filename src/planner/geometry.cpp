// Ownership aggregates for costing and buffer sizing. Per tensor dim, a rank's index set depends
// only on its coordinates on the mesh dims in that dim's order, and those mesh dims are disjoint
// across tensor dims; so largest/smallest local sizes factor into per-dim extrema, and the
// overlap of two layouts factors into per-dim intersection tables.
#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "geometry.hpp"
#include "placement/odometer.hpp"

namespace dtensor {
namespace {

void encode(std::string& k, Entries es) {
  for (const auto& e : es) {
    k.push_back(static_cast<char>(e.mesh_dim));
    char buf[sizeof(std::int64_t)];
    std::memcpy(buf, &e.split_factor, sizeof buf);
    k.append(buf, sizeof buf);
    k.push_back(e.strided ? 's' : 'p');
  }
  k.push_back('|');
}

// Odometer over the coordinates of `dims` (others stay as they are in `coord`).
bool next_coord(std::vector<std::int64_t>& coord, const std::vector<int>& dims,
                const std::vector<std::int64_t>& mesh_shape) {
  const std::size_t n = dims.size();  // the first of `dims` turns fastest: digits numbered backwards
  return detail::next_digits(
      n, [&](std::size_t k) -> auto& { return coord[static_cast<std::size_t>(dims[n - 1 - k])]; },
      [&](std::size_t k) { return mesh_shape[static_cast<std::size_t>(dims[n - 1 - k])]; });
}

void add_unique(std::vector<int>& v, Entries es) {
  for (const auto& e : es)
    if (std::find(v.begin(), v.end(), e.mesh_dim) == v.end()) v.push_back(e.mesh_dim);
}

}  // namespace

namespace {
// Calls f(coord) for every variant of `es` in order (mixed radix, the first entry most
// significant): the coordinates of es's mesh dims set, the others 0.
template <class F>
void for_each_variant(Entries es, const std::vector<std::int64_t>& mesh_shape, F&& f) {
  std::array<std::int64_t, Sharding::kMaxMeshDims> c{};
  std::int64_t count = 1;
  for (const auto& e : es) count *= mesh_shape[static_cast<std::size_t>(e.mesh_dim)];
  for (std::int64_t v = 0; v < count; ++v) {
    std::int64_t rest = v;
    for (std::size_t k = es.size(); k-- > 0;) {
      const auto n = mesh_shape[static_cast<std::size_t>(es[k].mesh_dim)];
      c[static_cast<std::size_t>(es[k].mesh_dim)] = rest % n;
      rest /= n;
    }
    f(std::span<const std::int64_t>(c.data(), mesh_shape.size()));
  }
}
}  // namespace

std::vector<IndexSet> Geometry::variant_sets(Entries es, std::int64_t len) const {
  std::vector<IndexSet> sets;
  for_each_variant(es, mesh_shape_, [&](std::span<const std::int64_t> c) { sets.push_back(owned_indices(es, len, mesh_shape_, c)); });
  return sets;
}

std::vector<Interval> Geometry::variant_ranges(Entries es, std::int64_t len) const {
  for (const auto& e : es)
    if (e.split_factor != 1) return {};
  std::vector<Interval> out;
  std::size_t count = 1;  // one per coordinate of the entries' mesh dims
  for (const auto& e : es) count *= static_cast<std::size_t>(mesh_shape_[static_cast<std::size_t>(e.mesh_dim)]);
  out.reserve(count);
  for_each_variant(es, mesh_shape_, [&](std::span<const std::int64_t> c) { out.push_back(*owned_range(es, len, mesh_shape_, c)); });
  return out;
}

std::int64_t Geometry::variant_of(Entries es, std::span<const std::int64_t> coord) const noexcept {
  std::int64_t v = 0;
  for (const auto& e : es)
    v = v * mesh_shape_[static_cast<std::size_t>(e.mesh_dim)] + coord[static_cast<std::size_t>(e.mesh_dim)];
  return v;
}

SizeStats Geometry::dim_stats(int d, Entries entries) const {
  const auto len = shape_[static_cast<std::size_t>(d)];
  if (entries.empty()) return {len, len};
  // Fast key: up to 4 entries with split factors below 2048 pack into 64 bits, 15 per entry
  // (mesh dim, strided, split factor; never 0, so the count needs no bits) and the tensor dim.
  static_assert(Sharding::kMaxMeshDims <= 8 && Sharding::kMaxTensorDims <= 16);
  std::uint64_t fast = 0;  // 0: no fast key
  if (entries.size() <= 4) {
    fast = static_cast<std::uint64_t>(d) << 60;
    for (std::size_t k = 0; k < entries.size(); ++k) {
      const auto& e = entries[k];
      if (e.split_factor >= 2048) {
        fast = 0;
        break;
      }
      fast |= static_cast<std::uint64_t>((e.mesh_dim << 12) | (e.strided << 11) | e.split_factor) << (15 * k);
    }
  }
  if (fast) {
    if (const DimSlot* hit = dim_fast_memo_.find(dim_slot_hash(fast), [fast](const DimSlot& x) { return x.key == fast; }))
      return hit->stats;
  }
  std::string key;
  if (!fast) {
    key.push_back(static_cast<char>(d));
    encode(key, entries);
    if (auto it = dim_memo_.find(key); it != dim_memo_.end()) return it->second;
  }
  // A split's piece sizes depend only on the length of the list it splits, so the achievable
  // local sizes propagate level by level as a (small) set of lengths: exact extrema without
  // enumerating coordinates or index lists.
  thread_local std::vector<std::int64_t> sizes, next;  // scratch, reused across calls
  sizes.assign(1, len);
  for (const auto& e : entries) {
    const auto n = mesh_shape_[static_cast<std::size_t>(e.mesh_dim)];
    next.clear();
    for (const auto L : sizes) {
      for (std::int64_t i = 0; i < n; ++i) {
        std::int64_t piece = 0;
        if (e.split_factor == 1) {
          const auto b = chunk_bounds(L, n, i);
          piece = b.end - b.begin;
        } else {
          const std::int64_t outer_pieces = std::min(e.split_factor, L);
          for (std::int64_t sidx = 0; sidx < outer_pieces; ++sidx) {
            const auto o = chunk_bounds(L, e.split_factor, sidx);
            const auto b = chunk_bounds(o.end - o.begin, n, i);
            piece += b.end - b.begin;
          }
        }
        next.push_back(piece);
      }
    }
    std::sort(next.begin(), next.end());
    next.erase(std::unique(next.begin(), next.end()), next.end());
    sizes.swap(next);
  }
  const SizeStats s{sizes.back(), sizes.front()};
  if (fast) dim_fast_memo_.insert(dim_slot_hash(fast), {fast, s}, [](const DimSlot& x) { return dim_slot_hash(x.key); });
  else dim_memo_.emplace(std::move(key), s);
  return s;
}

SizeStats Geometry::numel_stats(const Sharding& s, bool remember) const {
  SizeStats out{1, 1};
  const bool same = has_remembered_ && s == remembered_;
  for (int d = 0; d < s.tensor_ndim(); ++d) {
    const auto e = s.entries(d);
    const auto ds = (same || (has_remembered_ && remembered_.tensor_ndim() == s.tensor_ndim() && e == remembered_.entries(d)))
                        ? remembered_dims_[static_cast<std::size_t>(d)]
                        : dim_stats(d, e);
    if (remember && !same) remembered_dims_[static_cast<std::size_t>(d)] = ds;
    out.max *= ds.max;
    out.min *= ds.min;
  }
  if (remember && !same) {
    remembered_ = s;
    has_remembered_ = true;
  }
  return out;
}

std::int64_t Geometry::all_to_all_chunk(const Sharding& from, const Sharding& to, int m) const {
  const int a = from.shard_dim_of(m);
  const int b = to.shard_dim_of(m);
  if (a != b) {
    // m is the last split of a in `from` and the last of b in `to`: what rank i holds of a
    // lies inside what every rank needs of a, and what rank j needs of b inside what every
    // rank holds of b, so the overlap is |held_a(i)| * |needed_b(j)| * (other dims).
    std::int64_t n = 1;
    for (int d = 0; d < from.tensor_ndim(); ++d)
      n *= d == b ? dim_stats(d, to.entries(d)).max : dim_stats(d, from.entries(d)).max;
    return n;
  }
  std::vector<int> changed{a};
  if (b != a) changed.push_back(b);
  std::string key(1, static_cast<char>(m));
  for (int x : changed) {
    key.push_back(static_cast<char>(x));
    encode(key, from.entries(x));
    encode(key, to.entries(x));
  }
  std::int64_t other = 1;
  for (int d = 0; d < from.tensor_ndim(); ++d)
    if (d != a && d != b) other *= dim_stats(d, from.entries(d)).max;
  if (auto it = a2a_memo_.find(key); it != a2a_memo_.end()) return it->second * other;

  std::vector<int> dims;
  for (int x : changed) {
    add_unique(dims, from.entries(x));
    add_unique(dims, to.entries(x));
  }
  std::erase(dims, m);
  const auto n = mesh_shape_[static_cast<std::size_t>(m)];
  std::vector<std::int64_t> ci(mesh_shape_.size(), 0);
  std::int64_t best = 0;
  do {
    std::vector<std::int64_t> cj = ci;
    for (std::int64_t i = 0; i < n; ++i) {
      ci[static_cast<std::size_t>(m)] = i;
      std::vector<IndexSet> held;
      for (int x : changed)
        held.push_back(owned_indices(from.entries(x), shape_[static_cast<std::size_t>(x)], mesh_shape_, ci));
      for (std::int64_t j = 0; j < n; ++j) {
        cj[static_cast<std::size_t>(m)] = j;
        std::int64_t prod = 1;
        for (std::size_t k = 0; k < changed.size(); ++k) {
          const int x = changed[k];
          prod *= held[k].overlap(owned_indices(to.entries(x), shape_[static_cast<std::size_t>(x)], mesh_shape_, cj));
        }
        best = std::max(best, prod);
      }
    }
    ci[static_cast<std::size_t>(m)] = 0;
  } while (next_coord(ci, dims, mesh_shape_));
  a2a_memo_.emplace(std::move(key), best);
  return best * other;
}

// Every rank r receives, from the one holder of each source box that shares r's coordinates
// off the source's sharded mesh dims (set S), the part of that box it needs. With per-tensor-dim
// intersection tables T_d[source variant][target variant], the sums over a rank's group factor
// per tensor dim (the mesh dims of different tensor dims are disjoint), so every statistic costs
// O(ranks x dims x small enumerations) instead of O(ranks^2).
// Per tensor dim, the intersection table of `from`'s and `to`'s variants, memoised across
// states (the target side rarely changes).
std::array<Geometry::OverlapTable*, Sharding::kMaxTensorDims> Geometry::overlap_tables(const Sharding& from,
                                                                                   const Sharding& to) const {
  const int nd = from.tensor_ndim();
  std::array<OverlapTable*, Sharding::kMaxTensorDims> tables{};
  thread_local std::string key;
  for (int d = 0; d < nd; ++d) {
    key.assign(1, static_cast<char>(d));
    encode(key, from.entries(d));
    encode(key, to.entries(d));
    auto it = overlap_memo_.find(key);
    if (it == overlap_memo_.end()) {
      OverlapTable t;
      const auto len = shape_[static_cast<std::size_t>(d)];
      // plain splits own ranges: interval arithmetic, no index lists
      const auto fr = variant_ranges(from.entries(d), len), tr = fr.empty() ? fr : variant_ranges(to.entries(d), len);
      const bool ranges = !fr.empty() && !tr.empty();
      const auto fs = ranges ? std::vector<IndexSet>{} : variant_sets(from.entries(d), len);
      const auto ts = ranges ? std::vector<IndexSet>{} : variant_sets(to.entries(d), len);
      const std::size_t nf = ranges ? fr.size() : fs.size(), nt = ranges ? tr.size() : ts.size();
      t.ntv = static_cast<std::int64_t>(nt);
      t.nfv = static_cast<std::int64_t>(nf);
      t.data.assign((nf + 2) * nt, 0);
      for (std::size_t j = 0; j < nt; ++j) t.need(static_cast<std::int64_t>(j)) = ranges ? tr[j].size() : ts[j].size();
      for (std::size_t i = 0; i < nf; ++i)
        for (std::size_t j = 0; j < nt; ++j) {
          const auto n = ranges ? std::max<std::int64_t>(0, std::min(fr[i].stop, tr[j].stop) - std::max(fr[i].start, tr[j].start))
                                : fs[i] == ts[j] ? fs[i].size() : fs[i].overlap(ts[j]);
          t.inter(static_cast<std::int64_t>(i), static_cast<std::int64_t>(j)) = n;
          t.src_hits(static_cast<std::int64_t>(j)) += n > 0 ? 1 : 0;
        }
      it = overlap_memo_.emplace(key, std::move(t)).first;
    }
    tables[static_cast<std::size_t>(d)] = &it->second;
  }
  return tables;
}

Geometry::DirectStats Geometry::direct_stats(const Sharding& from, const Sharding& to) const {
  const int nd = from.tensor_ndim();
  const int md = static_cast<int>(mesh_shape_.size());
  std::int64_t R = 1;
  for (auto s : mesh_shape_) R *= s;
  auto size_of = [&](int m) { return mesh_shape_[static_cast<std::size_t>(m)]; };
  std::array<char, Sharding::kMaxMeshDims> in_s{}, in_dst{};
  for (int d = 0; d < nd; ++d) {
    for (const auto& e : from.entries(d)) in_s[static_cast<std::size_t>(e.mesh_dim)] = 1;
    for (const auto& e : to.entries(d)) in_dst[static_cast<std::size_t>(e.mesh_dim)] = 1;
  }
  // source mesh dims no target entry uses: every value gives the same needs (a multiplicity)
  std::int64_t mult = 1;
  bool free_crossable = false;
  for (int m = 0; m < md; ++m)
    if (in_s[static_cast<std::size_t>(m)] && !in_dst[static_cast<std::size_t>(m)]) {
      mult *= size_of(m);
      free_crossable = free_crossable || size_of(m) > 1;
    }
  const auto tables = overlap_tables(from, to);
  DirectStats out;
  // per tensor dim: the target entries' mesh dims that vary within a rank's group
  std::array<std::array<int, Sharding::kMaxMeshDims>, Sharding::kMaxTensorDims> free_of{};
  std::array<std::size_t, Sharding::kMaxTensorDims> nfree{};
  for (int d = 0; d < nd; ++d)
    for (const auto& e : to.entries(d))
      if (in_s[static_cast<std::size_t>(e.mesh_dim)]) free_of[static_cast<std::size_t>(d)][nfree[static_cast<std::size_t>(d)]++] = e.mesh_dim;
  // A rank's variants are mixed-radix numbers over its coordinates (variant_of): per tensor dim
  // and mesh dim, the stride of that coordinate in the source and target variant (0: not used),
  // so the rank loop below keeps every variant up to date as the odometer turns.
  std::array<std::array<std::int64_t, Sharding::kMaxMeshDims>, Sharding::kMaxTensorDims> fstride{}, tstride{};
  for (int d = 0; d < nd; ++d) {
    std::int64_t f = 1, t = 1;
    const auto fe = from.entries(d), te = to.entries(d);
    for (std::size_t k = fe.size(); k-- > 0;) {
      fstride[static_cast<std::size_t>(d)][static_cast<std::size_t>(fe[k].mesh_dim)] = f;
      f *= size_of(fe[k].mesh_dim);
    }
    for (std::size_t k = te.size(); k-- > 0;) {
      tstride[static_cast<std::size_t>(d)][static_cast<std::size_t>(te[k].mesh_dim)] = t;
      t *= size_of(te[k].mesh_dim);
    }
  }
  // What a rank contributes along tensor dim d depends only on its (source, target) variants
  // there (PairStats). Per tensor dim, the pair and group tables, filled as met: flat per-thread
  // tables reused across calls (source variants x target variants entries per dim), or past a
  // flat table's worth (huge meshes) hash maps of the pairs and groups this call meets.
  std::array<PairStats*, Sharding::kMaxTensorDims> pair_tab{};
  std::array<GroupSums*, Sharding::kMaxTensorDims> group_tab{};
  std::array<std::size_t, Sharding::kMaxTensorDims> memo_at{};  // a dim's offset in the tables
  std::size_t memo_size = 0;
  for (int d = 0; d < nd; ++d) {
    memo_at[static_cast<std::size_t>(d)] = memo_size;
    memo_size += static_cast<std::size_t>(tables[static_cast<std::size_t>(d)]->nfv * tables[static_cast<std::size_t>(d)]->ntv);
  }
  thread_local std::vector<PairStats> pair_memo;
  thread_local std::vector<GroupSums> group_memo;
  thread_local std::unordered_map<std::size_t, PairStats> pair_map;
  thread_local std::unordered_map<std::size_t, GroupSums> group_map;
  if (memo_size <= std::max<std::size_t>(4096, 4 * static_cast<std::size_t>(R))) {
    pair_memo.assign(memo_size, PairStats{});
    group_memo.assign(memo_size, GroupSums{});
    for (int d = 0; d < nd; ++d) {
      pair_tab[static_cast<std::size_t>(d)] = pair_memo.data() + memo_at[static_cast<std::size_t>(d)];
      group_tab[static_cast<std::size_t>(d)] = group_memo.data() + memo_at[static_cast<std::size_t>(d)];
    }
  } else {
    pair_map.clear();
    group_map.clear();
  }
  std::array<std::int64_t, Sharding::kMaxMeshDims> q{};
  auto pair_stats = [&](int d, std::int64_t fv, std::int64_t tv) -> const PairStats& {
    const auto& t = *tables[static_cast<std::size_t>(d)];
    const auto at = static_cast<std::size_t>(fv * t.ntv + tv);
    PairStats& ps = pair_tab[static_cast<std::size_t>(d)] ? pair_tab[static_cast<std::size_t>(d)][at]
                                                          : pair_map[memo_at[static_cast<std::size_t>(d)] + at];
    if (ps.done) return ps;
    ps.done = true;
    ps.own = t.inter(fv, tv);
    ps.need = t.need(tv);
    ps.recv_hits = t.src_hits(tv);
    // the target entries' coordinates of this variant (its digits)
    const auto es = to.entries(d);
    std::array<std::int64_t, Sharding::kMaxMeshDims> c{};
    for (std::int64_t v = tv, k = static_cast<std::int64_t>(es.size()); k-- > 0;) {
      const auto m = es[static_cast<std::size_t>(k)].mesh_dim;
      c[static_cast<std::size_t>(m)] = v % size_of(m);
      v /= size_of(m);
    }
    const auto& free_dims = free_of[static_cast<std::size_t>(d)];
    const std::size_t nf = nfree[static_cast<std::size_t>(d)];
    // the group's sums depend on (source variant, the target variant's fixed part)
    std::int64_t base_tv = 0;
    for (const auto& e : es)
      base_tv = base_tv * size_of(e.mesh_dim) + (in_s[static_cast<std::size_t>(e.mesh_dim)] ? 0 : c[static_cast<std::size_t>(e.mesh_dim)]);
    const auto gat = static_cast<std::size_t>(fv * t.ntv + base_tv);
    GroupSums& gs = group_tab[static_cast<std::size_t>(d)] ? group_tab[static_cast<std::size_t>(d)][gat]
                                                           : group_map[memo_at[static_cast<std::size_t>(d)] + gat];
    if (!gs.done) {
      gs.done = true;
      gs.first_value.fill(-1);
      q = c;
      for (std::size_t k = 0; k < nf; ++k) q[static_cast<std::size_t>(free_dims[k])] = 0;
      while (true) {
        std::int64_t qtv = 0;
        for (const auto& e : es) qtv = qtv * size_of(e.mesh_dim) + q[static_cast<std::size_t>(e.mesh_dim)];
        const auto n = t.inter(fv, qtv);
        gs.sum += n;
        if (n > 0) {
          ++gs.cnt;
          for (std::size_t k = 0; k < nf; ++k) {
            const auto v = q[static_cast<std::size_t>(free_dims[k])];
            if (gs.distinct[k] == 0) {
              gs.distinct[k] = 1;
              gs.first_value[k] = v;
            } else if (gs.distinct[k] == 1 && gs.first_value[k] != v) {
              gs.distinct[k] = 2;
            }
          }
        }
        if (!detail::next_digits(
                nf, [&](std::size_t k) -> auto& { return q[static_cast<std::size_t>(free_dims[k])]; },
                [&](std::size_t k) { return size_of(free_dims[k]); }))
          break;
      }
    }
    ps.sum = gs.sum;
    ps.cnt = gs.cnt;
    // a nonzero peer differs from this rank on m unless all of them sit at this rank's value
    for (std::size_t k = 0; k < nf; ++k)
      if (gs.distinct[k] == 2 || (gs.distinct[k] == 1 && gs.first_value[k] != c[static_cast<std::size_t>(free_dims[k])]))
        ps.cross |= 1u << free_dims[k];
    return ps;
  };
  std::uint32_t free_cross = 0;  // source mesh dims no target entry uses, of two or more ranks
  if (free_crossable)
    for (int m = 0; m < md; ++m)
      if (in_s[static_cast<std::size_t>(m)] && !in_dst[static_cast<std::size_t>(m)] && size_of(m) > 1) free_cross |= 1u << m;
  // Tensor dims with no entries on either side give every rank the same (one variant each side):
  // their factors are constants. The others are looked up per rank.
  std::array<int, Sharding::kMaxTensorDims> active{};
  int nactive = 0;
  std::int64_t own0 = 1, need0 = 1, sent0 = mult, send_hits0 = mult, recv_hits0 = 1;
  bool nonzero0 = true;
  for (int d = 0; d < nd; ++d) {
    if (!from.entries(d).empty() || !to.entries(d).empty()) {
      active[static_cast<std::size_t>(nactive++)] = d;
      continue;
    }
    const PairStats& ps = pair_stats(d, 0, 0);
    own0 *= ps.own;
    need0 *= ps.need;
    recv_hits0 *= ps.recv_hits;
    sent0 *= ps.sum;
    send_hits0 *= ps.cnt;
    nonzero0 = nonzero0 && ps.cnt > 0;
  }
  // every rank, row-major, its variants kept by the strides
  std::array<std::int64_t, Sharding::kMaxMeshDims> c{};
  std::array<std::int64_t, Sharding::kMaxTensorDims> fv{}, tv{};
  for (std::int64_t p = 0; p < R; ++p) {
    std::int64_t own = own0, need = need0, sent_all = sent0, send_hits = send_hits0, recv_hits = recv_hits0;
    bool others_nonzero = nonzero0;  // per-dim: does any target variant overlap (for crossings)
    std::uint32_t cross = 0;
    for (int a = 0; a < nactive; ++a) {
      const auto d = static_cast<std::size_t>(active[static_cast<std::size_t>(a)]);
      const PairStats* ps = pair_tab[d] ? pair_tab[d] + static_cast<std::size_t>(fv[d] * tables[d]->ntv + tv[d]) : nullptr;
      if (ps == nullptr || !ps->done) ps = &pair_stats(static_cast<int>(d), fv[d], tv[d]);
      own *= ps->own;
      need *= ps->need;
      recv_hits *= ps->recv_hits;
      sent_all *= ps->sum;
      send_hits *= ps->cnt;
      others_nonzero = others_nonzero && ps->cnt > 0;
      cross |= ps->cross;
    }
    const std::int64_t self = own > 0 ? 1 : 0;
    const std::int64_t received = need - own, sent = sent_all - own;
    out.max_received = std::max(out.max_received, received);
    out.max_sent = std::max(out.max_sent, sent);
    out.max_traffic = std::max(out.max_traffic, sent + received);
    out.max_peers = std::max({out.max_peers, send_hits - self, recv_hits - self});
    // a transfer from this rank crosses mesh dim m when some receiver with another coordinate on
    // m needs part of its box: m free (no target entry) or varied within its tensor dim's target
    if (others_nonzero) out.crossed_mesh_dims |= free_cross | cross;
    // next rank: the last mesh dim turns fastest
    for (int m = md; m-- > 0;) {
      const auto mu = static_cast<std::size_t>(m);
      if (++c[mu] < size_of(m)) {
        for (int a = 0; a < nactive; ++a) {
          const auto d = static_cast<std::size_t>(active[static_cast<std::size_t>(a)]);
          fv[d] += fstride[d][mu];
          tv[d] += tstride[d][mu];
        }
        break;
      }
      for (int a = 0; a < nactive; ++a) {
        const auto d = static_cast<std::size_t>(active[static_cast<std::size_t>(a)]);
        fv[d] -= (c[mu] - 1) * fstride[d][mu];
        tv[d] -= (c[mu] - 1) * tstride[d][mu];
      }
      c[mu] = 0;
    }
  }
  return out;
}

}  // namespace dtensor
