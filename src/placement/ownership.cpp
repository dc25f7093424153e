// What each rank owns (docs/notation.md), computed on run lists: never element by element.
#include <algorithm>

#include "dtensor/error.hpp"
#include "dtensor/layout.hpp"

namespace dtensor {

IndexSet owned_indices(std::span<const ShardEntry> entries, std::int64_t length,
                       std::span<const std::int64_t> mesh_shape, std::span<const std::int64_t> coord) {
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
    // Strided rule: chunk into sf pieces, chunk each into n, take piece i of each.
    std::vector<Interval> runs;
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
}  // namespace

IndexSet Layout::indices(std::span<const std::int64_t> coord, int tensor_dim) const {
  check_coord(mesh_, coord);
  if (tensor_dim < 0 || tensor_dim >= ndim())
    throw InputError(fmt::format("tensor dim {} is out of range for a {}-d tensor", tensor_dim, ndim()));
  return owned_indices(sharding_.entries(tensor_dim), shape_[static_cast<std::size_t>(tensor_dim)],
                       mesh_.shape(), coord);
}

std::vector<IndexSet> Layout::indices(std::span<const std::int64_t> coord) const {
  check_coord(mesh_, coord);
  std::vector<IndexSet> out;
  out.reserve(shape_.size());
  for (int d = 0; d < ndim(); ++d)
    out.push_back(owned_indices(sharding_.entries(d), shape_[static_cast<std::size_t>(d)], mesh_.shape(), coord));
  return out;
}

std::vector<std::int64_t> Layout::local_shape(std::span<const std::int64_t> coord) const {
  std::vector<std::int64_t> out;
  for (const auto& s : indices(coord)) out.push_back(s.size());
  return out;
}

std::vector<std::int64_t> Layout::global_offset(std::span<const std::int64_t> coord) const {
  std::vector<std::int64_t> out;
  const auto sets = indices(coord);
  for (std::size_t d = 0; d < sets.size(); ++d) out.push_back(sets[d].first_or(shape_[d]));
  return out;
}

std::int64_t Layout::local_numel(std::span<const std::int64_t> coord) const {
  std::int64_t n = 1;
  for (const auto& s : indices(coord)) n *= s.size();
  return n;
}

bool equivalent(const Sharding& a, const Sharding& b, std::span<const std::int64_t> mesh_shape,
                std::span<const std::int64_t> shape) {
  if (a.mesh_ndim() != b.mesh_ndim() || a.tensor_ndim() != b.tensor_ndim()) return false;
  for (int m = 0; m < a.mesh_ndim(); ++m) {
    // A Partial over one rank is that rank's value: the same data as Replicate.
    if (mesh_shape[static_cast<std::size_t>(m)] == 1) continue;
    if (a.partial(m) != b.partial(m)) return false;
  }
  std::vector<std::int64_t> coord(mesh_shape.size(), 0);
  for (int d = 0; d < a.tensor_ndim(); ++d) {
    const auto ea = a.entries(d);
    const auto eb = b.entries(d);
    if (ea == eb) continue;
    std::vector<int> dims;
    for (const auto& e : ea) dims.push_back(e.mesh_dim);
    for (const auto& e : eb)
      if (std::find(dims.begin(), dims.end(), e.mesh_dim) == dims.end()) dims.push_back(e.mesh_dim);
    std::fill(coord.begin(), coord.end(), 0);
    const auto len = shape[static_cast<std::size_t>(d)];
    while (true) {
      if (owned_indices(ea, len, mesh_shape, coord) != owned_indices(eb, len, mesh_shape, coord)) return false;
      std::size_t k = 0;
      for (; k < dims.size(); ++k) {
        auto& c = coord[static_cast<std::size_t>(dims[k])];
        if (++c < mesh_shape[static_cast<std::size_t>(dims[k])]) break;
        c = 0;
      }
      if (k == dims.size()) break;
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
