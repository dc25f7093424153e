// Ownership aggregates for costing and buffer sizing. Per tensor dim, a rank's index set depends
// only on its coordinates on the mesh dims in that dim's order, and those mesh dims are disjoint
// across tensor dims; so largest/smallest local sizes factor into per-dim extrema, and the
// overlap of two layouts factors into per-dim intersection tables.
#include <algorithm>
#include <cstring>

#include "graph.hpp"

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
  for (int m : dims) {
    auto& c = coord[static_cast<std::size_t>(m)];
    if (++c < mesh_shape[static_cast<std::size_t>(m)]) return true;
    c = 0;
  }
  return false;
}

std::vector<int> mesh_dims_of(Entries es) {
  std::vector<int> out;
  for (const auto& e : es) out.push_back(e.mesh_dim);
  return out;
}

void add_unique(std::vector<int>& v, Entries es) {
  for (const auto& e : es)
    if (std::find(v.begin(), v.end(), e.mesh_dim) == v.end()) v.push_back(e.mesh_dim);
}

}  // namespace

SizeStats Geometry::dim_stats(int d, Entries entries) const {
  const auto len = shape_[static_cast<std::size_t>(d)];
  if (entries.empty()) return {len, len};
  // Fast key: up to 3 entries with small mesh dims and split factors pack into 64 bits.
  std::uint64_t fast = entries.size() <= 3 && d < 256 ? (static_cast<std::uint64_t>(d) << 52) | (entries.size() << 48) : 0;
  for (std::size_t k = 0; fast && k < entries.size(); ++k) {
    const auto& e = entries[k];
    if (e.mesh_dim >= 16 || e.split_factor >= 2048) {
      fast = 0;
      break;
    }
    fast |= static_cast<std::uint64_t>((e.mesh_dim << 12) | (e.strided << 11) | e.split_factor) << (16 * k);
  }
  if (fast) {
    if (auto it = dim_fast_memo_.find(fast); it != dim_fast_memo_.end()) return it->second;
  }
  std::string key;
  if (!fast) {
    key.push_back(static_cast<char>(d));
    encode(key, entries);
    if (auto it = dim_memo_.find(key); it != dim_memo_.end()) return it->second;
  }
  std::vector<std::int64_t> coord(mesh_shape_.size(), 0);
  const auto dims = mesh_dims_of(entries);
  SizeStats s{0, len};
  do {
    const auto n = owned_indices(entries, len, mesh_shape_, coord).size();
    s.max = std::max(s.max, n);
    s.min = std::min(s.min, n);
  } while (next_coord(coord, dims, mesh_shape_));
  if (fast) dim_fast_memo_.emplace(fast, s);
  else dim_memo_.emplace(std::move(key), s);
  return s;
}

SizeStats Geometry::numel_stats(const Sharding& s) const {
  SizeStats out{1, 1};
  for (int d = 0; d < s.tensor_ndim(); ++d) {
    const auto ds = dim_stats(d, s.entries(d));
    out.max *= ds.max;
    out.min *= ds.min;
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
          prod *= held[k].intersect(owned_indices(to.entries(x), shape_[static_cast<std::size_t>(x)], mesh_shape_, cj)).size();
        }
        best = std::max(best, prod);
      }
    }
    ci[static_cast<std::size_t>(m)] = 0;
  } while (next_coord(ci, dims, mesh_shape_));
  a2a_memo_.emplace(std::move(key), best);
  return best * other;
}

Geometry::DirectStats Geometry::direct_stats(const Sharding& from, const Sharding& to) const {
  const int nd = from.tensor_ndim();
  const int md = static_cast<int>(mesh_shape_.size());
  std::int64_t R = 1;
  for (auto s : mesh_shape_) R *= s;
  // Per tensor dim: variant index of every rank in `from` and in `to`, and the table of
  // intersection sizes between variants.
  struct DimTable {
    std::vector<std::int32_t> fv, tv;  // per rank position
    std::int64_t ntv = 0;
    std::vector<std::int64_t> inter;   // [fv * ntv + tv]
  };
  std::vector<DimTable> tables(static_cast<std::size_t>(nd));
  std::vector<std::vector<std::int64_t>> coords(static_cast<std::size_t>(R));
  {
    std::vector<std::int64_t> c(static_cast<std::size_t>(md), 0);
    for (std::int64_t p = 0; p < R; ++p) {
      coords[static_cast<std::size_t>(p)] = c;
      for (int m = md - 1; m >= 0; --m) {
        if (++c[static_cast<std::size_t>(m)] < mesh_shape_[static_cast<std::size_t>(m)]) break;
        c[static_cast<std::size_t>(m)] = 0;
      }
    }
  }
  auto variant = [&](Entries es, const std::vector<std::int64_t>& c) {
    std::int64_t v = 0;
    for (const auto& e : es) v = v * mesh_shape_[static_cast<std::size_t>(e.mesh_dim)] + c[static_cast<std::size_t>(e.mesh_dim)];
    return static_cast<std::int32_t>(v);
  };
  auto variant_sets = [&](Entries es, std::int64_t len) {
    std::vector<IndexSet> sets;
    std::vector<std::int64_t> c(static_cast<std::size_t>(md), 0);
    // enumerate variants in the same mixed-radix order as `variant` (first entry most significant)
    std::int64_t count = 1;
    for (const auto& e : es) count *= mesh_shape_[static_cast<std::size_t>(e.mesh_dim)];
    for (std::int64_t v = 0; v < count; ++v) {
      std::int64_t rest = v;
      for (std::size_t k = es.size(); k-- > 0;) {
        const auto n = mesh_shape_[static_cast<std::size_t>(es[k].mesh_dim)];
        c[static_cast<std::size_t>(es[k].mesh_dim)] = rest % n;
        rest /= n;
      }
      sets.push_back(owned_indices(es, len, mesh_shape_, c));
    }
    return sets;
  };
  for (int d = 0; d < nd; ++d) {
    auto& t = tables[static_cast<std::size_t>(d)];
    const auto len = shape_[static_cast<std::size_t>(d)];
    const auto fs = variant_sets(from.entries(d), len);
    const auto ts = variant_sets(to.entries(d), len);
    t.ntv = static_cast<std::int64_t>(ts.size());
    t.inter.resize(fs.size() * ts.size());
    for (std::size_t i = 0; i < fs.size(); ++i)
      for (std::size_t j = 0; j < ts.size(); ++j)
        t.inter[i * ts.size() + j] = fs[i] == ts[j] ? fs[i].size() : fs[i].intersect(ts[j]).size();
    t.fv.resize(static_cast<std::size_t>(R));
    t.tv.resize(static_cast<std::size_t>(R));
    for (std::int64_t p = 0; p < R; ++p) {
      t.fv[static_cast<std::size_t>(p)] = variant(from.entries(d), coords[static_cast<std::size_t>(p)]);
      t.tv[static_cast<std::size_t>(p)] = variant(to.entries(d), coords[static_cast<std::size_t>(p)]);
    }
  }
  std::vector<int> sharded;
  for (int d = 0; d < nd; ++d)
    for (const auto& e : from.entries(d)) sharded.push_back(e.mesh_dim);
  std::sort(sharded.begin(), sharded.end());
  std::vector<std::int64_t> stride(static_cast<std::size_t>(md), 1);
  for (int m = md - 2; m >= 0; --m)
    stride[static_cast<std::size_t>(m)] = stride[static_cast<std::size_t>(m) + 1] * mesh_shape_[static_cast<std::size_t>(m) + 1];

  std::vector<std::int64_t> sent(static_cast<std::size_t>(R), 0), recv(static_cast<std::size_t>(R), 0);
  std::vector<std::uint8_t> talk(static_cast<std::size_t>(R * R), 0);
  DirectStats out;
  std::vector<std::int64_t> c;
  for (std::int64_t j = 0; j < R; ++j) {
    c = coords[static_cast<std::size_t>(j)];
    std::vector<std::int64_t> base = c;
    for (int m : sharded) c[static_cast<std::size_t>(m)] = 0;
    do {
      std::int64_t i = 0;
      std::uint32_t crossed = 0;
      for (int m = 0; m < md; ++m) {
        i += c[static_cast<std::size_t>(m)] * stride[static_cast<std::size_t>(m)];
        if (c[static_cast<std::size_t>(m)] != base[static_cast<std::size_t>(m)]) crossed |= 1u << m;
      }
      if (i == j) continue;
      std::int64_t n = 1;
      for (int d = 0; d < nd && n; ++d) {
        const auto& t = tables[static_cast<std::size_t>(d)];
        n *= t.inter[static_cast<std::size_t>(t.fv[static_cast<std::size_t>(i)] * t.ntv + t.tv[static_cast<std::size_t>(j)])];
      }
      if (n == 0) continue;
      recv[static_cast<std::size_t>(j)] += n;
      sent[static_cast<std::size_t>(i)] += n;
      talk[static_cast<std::size_t>(i * R + j)] = 1;
      out.crossed_mesh_dims |= crossed;
    } while (next_coord(c, sharded, mesh_shape_));
  }
  for (std::int64_t r = 0; r < R; ++r) {
    std::int64_t peers = 0;
    for (std::int64_t q = 0; q < R; ++q)
      peers += (talk[static_cast<std::size_t>(r * R + q)] | talk[static_cast<std::size_t>(q * R + r)]) ? 1 : 0;
    out.max_peers = std::max(out.max_peers, peers);
    out.max_sent = std::max(out.max_sent, sent[static_cast<std::size_t>(r)]);
    out.max_received = std::max(out.max_received, recv[static_cast<std::size_t>(r)]);
    out.max_traffic = std::max(out.max_traffic, sent[static_cast<std::size_t>(r)] + recv[static_cast<std::size_t>(r)]);
  }
  return out;
}

}  // namespace dtensor
