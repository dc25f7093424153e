// What each rank owns (docs/notation.md), computed on run lists: never element by element.
#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "dtensor/error.hpp"
#include "dtensor/layout.hpp"
#include "placement/odometer.hpp"

namespace dtensor {

std::optional<Interval> owned_range(std::span<const ShardEntry> entries, std::int64_t length,
                                    std::span<const std::int64_t> mesh_shape, std::span<const std::int64_t> coord) noexcept {
  std::int64_t start = 0, len = length;
  for (const auto& e : entries) {
    if (e.split_factor != 1) return std::nullopt;
    const auto b = chunk_bounds(len, mesh_shape[static_cast<std::size_t>(e.mesh_dim)], coord[static_cast<std::size_t>(e.mesh_dim)]);
    start += b.begin;
    len = b.end - b.begin;
  }
  return Interval{start, start + len};
}

std::int64_t owned_overlap(std::span<const ShardEntry> a, std::span<const std::int64_t> coord_a, std::span<const ShardEntry> b,
                           std::span<const std::int64_t> coord_b, std::int64_t length, std::span<const std::int64_t> mesh_shape) {
  const auto ra = owned_range(a, length, mesh_shape, coord_a);
  const auto rb = ra ? owned_range(b, length, mesh_shape, coord_b) : std::nullopt;
  if (ra && rb) return std::max<std::int64_t>(0, std::min(ra->stop, rb->stop) - std::max(ra->start, rb->start));
  return owned_indices(a, length, mesh_shape, coord_a).overlap(owned_indices(b, length, mesh_shape, coord_b));
}

IndexSet owned_indices(std::span<const ShardEntry> entries, std::int64_t length,
                       std::span<const std::int64_t> mesh_shape, std::span<const std::int64_t> coord) {
  if (const auto r = owned_range(entries, length, mesh_shape, coord)) return IndexSet::range(r->start, r->stop);
  IndexSet cur = IndexSet::range(0, length);
  for (const auto& e : entries) {
    const auto n = mesh_shape[static_cast<std::size_t>(e.mesh_dim)];
    const auto i = coord[static_cast<std::size_t>(e.mesh_dim)];
    const auto len = cur.size();
    if (e.split_factor == 1) {  // _S(d, 1) selects exactly what S(d) selects
      const auto b = chunk_bounds(len, n, i);
      cur = cur.slice(b.begin, b.end);
      continue;
    }
    // Strided rule: chunk into sf pieces, chunk each into n, take piece i of each. The run list
    // is scratch kept per thread (a planner query builds thousands of these sets).
    thread_local std::vector<Interval> runs;
    runs.clear();
    // pieces past the list's length are empty (chunks of ceil(len/sf) >= 1 elements)
    const std::int64_t pieces = std::min(e.split_factor, len);
    for (std::int64_t s = 0; s < pieces; ++s) {
      const auto outer = chunk_bounds(len, e.split_factor, s);
      const auto inner = chunk_bounds(outer.end - outer.begin, n, i);
      const auto piece = cur.slice(outer.begin + inner.begin, outer.begin + inner.end);
      runs.insert(runs.end(), piece.runs().begin(), piece.runs().end());
    }
    cur = IndexSet::from_runs(runs);
  }
  return cur;
}

namespace {
void check_coord(const Mesh& mesh, std::span<const std::int64_t> coord) {
  (void)mesh.position(coord);  // throws with the offending value
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

// One split of a list of `len` items as a rank sees it, in closed form: how many items it
// keeps, and where its p-th item sits in the list before the split. A strided split's chunks
// (torch.chunk into sf) all have q items but the last, so the kept pieces repeat with period q.
struct Level {
  bool strided = false;
  std::int64_t begin = 0;            // plain: the kept range's start
  std::int64_t q = 0, full = 0;      // strided: chunk size, number of full-size chunks before the last
  std::int64_t w = 0, o = 0;         // piece size and offset within a full chunk
  std::int64_t w_last = 0, o_last = 0;  // ... within the last chunk
  std::int64_t size = 0;
  [[nodiscard]] std::int64_t before(std::int64_t p) const {
    if (!strided) return begin + p;
    if (w > 0 && p < full * w) return (p / w) * q + o + p % w;
    return full * q + o_last + (p - full * w);
  }
};

std::vector<Level> levels_of(std::span<const ShardEntry> entries, std::int64_t length, std::span<const std::int64_t> mesh_shape,
                             std::span<const std::int64_t> coord) {
  std::vector<Level> out;
  std::int64_t len = length;
  for (const auto& e : entries) {
    const auto n = mesh_shape[static_cast<std::size_t>(e.mesh_dim)];
    const auto i = coord[static_cast<std::size_t>(e.mesh_dim)];
    Level l;
    if (e.split_factor == 1 || len == 0) {
      const auto b = chunk_bounds(len, e.split_factor == 1 ? n : 1, e.split_factor == 1 ? i : 0);
      l.begin = b.begin;
      l.size = e.split_factor == 1 ? b.end - b.begin : 0;
    } else {
      l.strided = true;
      l.q = ceil_div(len, e.split_factor);
      const std::int64_t chunks = ceil_div(len, l.q);
      l.full = chunks - 1;
      const auto in_full = chunk_bounds(l.q, n, i), in_last = chunk_bounds(len - l.full * l.q, n, i);
      l.w = in_full.end - in_full.begin;
      l.o = in_full.begin;
      l.w_last = in_last.end - in_last.begin;
      l.o_last = in_last.begin;
      l.size = l.full * l.w + l.w_last;
    }
    len = l.size;
    out.push_back(l);
  }
  return out;
}
}  // namespace

std::int64_t owned_count(std::span<const ShardEntry> entries, std::int64_t length, std::span<const std::int64_t> mesh_shape,
                         std::span<const std::int64_t> coord) {
  const auto ls = levels_of(entries, length, mesh_shape, coord);
  return ls.empty() ? length : ls.back().size;
}

std::optional<std::int64_t> owned_first(std::span<const ShardEntry> entries, std::int64_t length,
                                        std::span<const std::int64_t> mesh_shape, std::span<const std::int64_t> coord) {
  const auto ls = levels_of(entries, length, mesh_shape, coord);
  if ((ls.empty() ? length : ls.back().size) == 0) return std::nullopt;
  std::int64_t p = 0;
  for (auto it = ls.rbegin(); it != ls.rend(); ++it) p = it->before(p);
  return p;
}

std::int64_t owned_runs_bound(std::span<const ShardEntry> entries, std::int64_t length) {
  std::int64_t runs = 1;
  for (const auto& e : entries) {
    if (!e.strided) continue;
    const std::int64_t pieces = std::max<std::int64_t>(std::min(e.split_factor, length), 1);
    runs = runs > (std::int64_t{1} << 40) / pieces ? (std::int64_t{1} << 40) : runs * pieces;
  }
  return runs;
}

IndexSet Layout::indices(std::span<const std::int64_t> coord, int tensor_dim) const {
  check_coord(mesh_, coord);
  if (tensor_dim < 0 || tensor_dim >= ndim())
    throw InputError(fmt::format("tensor dim {} is out of range for a {}-d tensor", tensor_dim, ndim()));
  check_runs(tensor_dim);
  return owned_indices(sharding_.entries(tensor_dim), shape_[static_cast<std::size_t>(tensor_dim)],
                       mesh_.shape(), coord);
}

std::vector<IndexSet> Layout::indices(std::span<const std::int64_t> coord) const {
  check_coord(mesh_, coord);
  check_runs();
  std::vector<IndexSet> out;
  out.reserve(shape_.size());
  for (int d = 0; d < ndim(); ++d)
    out.push_back(owned_indices(sharding_.entries(d), shape_[static_cast<std::size_t>(d)], mesh_.shape(), coord));
  return out;
}

std::vector<std::int64_t> Layout::local_shape(std::span<const std::int64_t> coord) const {
  check_coord(mesh_, coord);
  std::vector<std::int64_t> out;
  for (int d = 0; d < ndim(); ++d)
    out.push_back(owned_count(sharding_.entries(d), shape_[static_cast<std::size_t>(d)], mesh_.shape(), coord));
  return out;
}

std::vector<std::int64_t> Layout::global_offset(std::span<const std::int64_t> coord) const {
  check_coord(mesh_, coord);
  std::vector<std::int64_t> out;
  for (int d = 0; d < ndim(); ++d) {
    const auto len = shape_[static_cast<std::size_t>(d)];
    out.push_back(owned_first(sharding_.entries(d), len, mesh_.shape(), coord).value_or(len));
  }
  return out;
}

std::int64_t Layout::local_numel(std::span<const std::int64_t> coord) const {
  std::int64_t n = 1;
  for (auto s : local_shape(coord)) n *= s;
  return n;
}

bool equivalent(const Sharding& a, const Sharding& b, std::span<const std::int64_t> mesh_shape,
                std::span<const std::int64_t> shape) {
  if (a.mesh_ndim() != b.mesh_ndim() || a.tensor_ndim() != b.tensor_ndim()) return false;
  if (mesh_shape.size() != static_cast<std::size_t>(a.mesh_ndim()) || shape.size() != static_cast<std::size_t>(a.tensor_ndim()))
    throw InputError(fmt::format("equivalent: a mesh of {} dims and a tensor of {} dims given for shardings of {} and {}",
                                 mesh_shape.size(), shape.size(), a.mesh_ndim(), a.tensor_ndim()));
  for (int m = 0; m < a.mesh_ndim(); ++m) {
    // A Partial over one rank is that rank's value: the same data as Replicate.
    if (mesh_shape[static_cast<std::size_t>(m)] == 1) continue;
    if (a.partial(m) != b.partial(m)) return false;
  }
  // (no heap on the common path: coordinates and mesh dims inline, plain splits compared as ranges)
  std::array<std::int64_t, Sharding::kMaxMeshDims> coord_buf{};
  const std::span<std::int64_t> coord(coord_buf.data(), mesh_shape.size());
  for (int d = 0; d < a.tensor_ndim(); ++d) {
    const auto ea = a.entries(d);
    const auto eb = b.entries(d);
    if (ea == eb) continue;
    std::array<int, 2 * Sharding::kMaxMeshDims> dims{};
    std::size_t n = 0;
    for (const auto& e : ea) dims[n++] = e.mesh_dim;
    for (const auto& e : eb)
      if (std::find(dims.begin(), dims.begin() + static_cast<std::ptrdiff_t>(n), e.mesh_dim) == dims.begin() + static_cast<std::ptrdiff_t>(n))
        dims[n++] = e.mesh_dim;
    std::fill(coord.begin(), coord.end(), 0);
    const auto len = shape[static_cast<std::size_t>(d)];
    while (true) {
      const auto ra = owned_range(ea, len, mesh_shape, coord);
      const auto rb = ra ? owned_range(eb, len, mesh_shape, coord) : std::nullopt;
      if (ra && rb) {
        // two ranges hold the same indices when equal, or when both are empty
        if (!(*ra == *rb) && (ra->size() > 0 || rb->size() > 0)) return false;
      } else if (owned_indices(ea, len, mesh_shape, coord) != owned_indices(eb, len, mesh_shape, coord)) {
        return false;
      }
      // (the first of `dims` turns fastest)
      if (!detail::next_digits(
              n, [&](std::size_t k) -> auto& { return coord[static_cast<std::size_t>(dims[n - 1 - k])]; },
              [&](std::size_t k) { return mesh_shape[static_cast<std::size_t>(dims[n - 1 - k])]; }))
        break;
    }
  }
  return true;
}

bool equivalent(const Layout& a, const Layout& b) {
  if (a.mesh() != b.mesh() || a.shape() != b.shape()) return false;
  return equivalent(a.sharding(), b.sharding(), a.mesh().shape(), a.shape());
}

std::vector<IndexSet> overlap(const Layout& a, std::span<const std::int64_t> src_coord, const Layout& b,
                              std::span<const std::int64_t> dst_coord) {
  if (a.mesh() != b.mesh())
    throw InputError(fmt::format("overlap of layouts on different meshes {} and {}", a.mesh().str(), b.mesh().str()));
  if (a.shape() != b.shape())
    throw InputError(fmt::format("overlap of layouts of different shapes {} and {}", shape_str(a.shape()),
                            shape_str(b.shape())));
  auto sa = a.indices(src_coord);
  const auto sb = b.indices(dst_coord);
  for (std::size_t d = 0; d < sa.size(); ++d) sa[d] = sa[d].intersect(sb[d]);
  return sa;
}

std::int64_t box_numel(std::span<const IndexSet> box) noexcept {
  std::int64_t n = 1;
  for (const auto& s : box) n *= s.size();
  return n;
}

}  // namespace dtensor
