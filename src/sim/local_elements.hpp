#pragma once
// A layout's local elements (what verify.cpp and host_tensor.cpp walk): each local element's
// global index, and the value a Partial group's local tensors reduce to.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "placement/groups.hpp"
#include "dtensor/layout.hpp"
#include "dtensor/scalar.hpp"
#include "placement/odometer.hpp"

namespace dtensor::sim_detail {

// Calls f(local_position, global_linear_index) for every local element, row-major.
template <typename F>
void for_each_local(const Layout& l, const std::vector<IndexSet>& sets, F&& f) {
  const auto nd = static_cast<std::size_t>(l.ndim());
  std::vector<std::vector<std::int64_t>> idx;
  for (const auto& s : sets) {
    if (s.empty()) return;
    idx.push_back(s.materialize());
  }
  std::vector<std::size_t> pos(nd, 0);
  std::int64_t local = 0;
  while (true) {
    std::int64_t lin = 0;
    for (std::size_t d = 0; d < nd; ++d) lin = lin * l.shape()[d] + idx[d][pos[d]];
    f(local++, lin);
    if (!detail::next_digits(nd, [&](std::size_t d) -> auto& { return pos[d]; }, [&](std::size_t d) { return idx[d].size(); }))
      return;
  }
}

inline std::vector<int> partial_dims_of(const Layout& l) {
  std::vector<int> out;
  for (int m = 0; m < l.mesh().ndim(); ++m)
    if (l.sharding().partial(m)) out.push_back(m);
  return out;
}

// The Partial group of the rank at `c` (global ranks, the lead first) when `c` leads it (coordinate
// 0 on every Partial mesh dim); empty otherwise. Without Partial dims every rank leads a group of one.
inline std::vector<std::int64_t> led_group(const Mesh& mesh, const std::vector<std::int64_t>& c, const std::vector<int>& partial_dims) {
  for (int m : partial_dims)
    if (c[static_cast<std::size_t>(m)] != 0) return {};
  std::vector<std::int64_t> group;
  for (const auto& gc : detail::group_members(mesh, c, partial_dims)) group.push_back(mesh.rank_at(gc));
  return group;
}

// Local element k reduced over a Partial group's local tensors with the layout's ops: sum and avg
// mix linearly (then the avg dims' sizes divide), max, min and product fold.
inline double group_value(const Layout& l, const std::vector<std::vector<std::byte>>& locals,
                   const std::vector<std::int64_t>& group, const std::vector<int>& partial_dims, std::int64_t k) {
  double acc = load_element(l.dtype(), locals[static_cast<std::size_t>(group[0])].data(), k);
  if (partial_dims.empty()) return acc;
  const ReduceOp op0 = *l.sharding().partial(partial_dims[0]);
  for (std::size_t g = 1; g < group.size(); ++g) {
    const double x = load_element(l.dtype(), locals[static_cast<std::size_t>(group[g])].data(), k);
    switch (op0) {
      case ReduceOp::sum: case ReduceOp::avg: acc += x; break;
      case ReduceOp::max: acc = std::max(acc, x); break;
      case ReduceOp::min: acc = std::min(acc, x); break;
      case ReduceOp::product: acc *= x; break;
    }
  }
  for (int m : partial_dims)
    if (*l.sharding().partial(m) == ReduceOp::avg) acc /= static_cast<double>(l.mesh().size(m));
  return acc;
}

}  // namespace dtensor::sim_detail
