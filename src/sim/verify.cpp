// The simulation (docs/cli.md, simulate): seeded inputs, a run on the simulated backend, and verification of
// every rank against the target layout.
#include <cmath>

#include <cstring>
#include <exception>
#include <optional>
#include <thread>
#include <climits>
#include <unistd.h>

#include "dtensor/error.hpp"
#include "dtensor/executor.hpp"
#include "dtensor/scalar.hpp"
#include "dtensor/host_tensor.hpp"
#include "dtensor/sim.hpp"
#include "comm/groups.hpp"

namespace dtensor {
namespace {

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

bool wide(DType t) { return t == DType::f64 || t == DType::f32 || t == DType::i64 || t == DType::i32; }

// The contribution of a rank at coordinate `c` on Partial mesh dim m (size n, op) for value w:
// reducing the contributions over m gives w back exactly.
double seed(DType t, ReduceOp op, double w, std::int64_t c, std::int64_t n) {
  const double delta = wide(t) ? 1.0 : 0.0;
  switch (op) {
    case ReduceOp::sum: return c == 0 ? w - static_cast<double>(n - 1) * delta : delta;
    case ReduceOp::avg: return c == 0 ? w - static_cast<double>(n - 1) * delta : w + delta;
    case ReduceOp::max: {
      if (c == 0) return w;
      const bool unsigned_t = t == DType::u8 || t == DType::boolean;
      return unsigned_t && w == 0 ? w : w - 1;
    }
    case ReduceOp::min: {
      if (c == 0) return w;
      const bool at_top = (t == DType::u8 && w >= 255) || (t == DType::i8 && w >= 127) || (t == DType::boolean && w >= 1);
      return at_top ? w : w + 1;
    }
    case ReduceOp::product: return c == 0 ? w : 1.0;
  }
  return w;
}

std::vector<int> partial_dims_of(const Layout& l) {
  std::vector<int> out;
  for (int m = 0; m < l.mesh().ndim(); ++m)
    if (l.sharding().partial(m)) out.push_back(m);
  return out;
}

// The Partial group of the rank at `c` (global ranks, the lead first) when `c` leads it (coordinate
// 0 on every Partial mesh dim); empty otherwise. Without Partial dims every rank leads a group of one.
std::vector<std::int64_t> led_group(const Mesh& mesh, const std::vector<std::int64_t>& c, const std::vector<int>& partial_dims) {
  for (int m : partial_dims)
    if (c[static_cast<std::size_t>(m)] != 0) return {};
  std::vector<std::int64_t> group;
  for (const auto& gc : detail::group_members(mesh, c, partial_dims)) group.push_back(mesh.rank_at(gc));
  return group;
}

// Local element k reduced over a Partial group's local tensors with the layout's ops: sum and avg
// mix linearly (then the avg dims' sizes divide), max, min and product fold.
double group_value(const Layout& l, const std::vector<std::vector<std::byte>>& locals,
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

// Every element must be held by exactly (product of the sizes of the mesh dims that do not shard)
// ranks: Shard mesh dims partition a tensor dim, the others copy it. This does not trust the
// layout's index sets to be a partition: it counts them.
std::string check_coverage(const Layout& l) {
  const Mesh& mesh = l.mesh();
  std::int64_t copies = 1;
  for (int m = 0; m < mesh.ndim(); ++m)
    if (l.sharding().shard_dim_of(m) < 0) copies *= mesh.size(m);
  const std::int64_t numel = l.numel();
  std::int64_t total = 0;
  const bool count_each = numel <= (std::int64_t{1} << 26);
  std::vector<std::int32_t> hits(count_each ? static_cast<std::size_t>(numel) : 0, 0);
  for (std::int64_t r = 0; r < mesh.num_ranks(); ++r) {
    const auto sets = l.indices(mesh.coord_of_rank(r));
    total += box_numel(sets);
    if (count_each) for_each_local(l, sets, [&](std::int64_t, std::int64_t lin) { ++hits[static_cast<std::size_t>(lin)]; });
  }
  if (total != numel * copies)
    return fmt::format("the ranks hold {} elements in all; a tensor of {} elements laid out as {} needs {} ({} per "
                       "element)", total, numel, l.placements_str(), numel * copies, copies);
  for (std::size_t i = 0; i < hits.size(); ++i)
    if (hits[i] != copies)
      return fmt::format("global element {} is held by {} ranks, the layout {} implies {}", i, hits[i], l.placements_str(), copies);
  return "";
}

}  // namespace

std::vector<std::byte> seeded_input(const Layout& l, std::int64_t rank) {
  const auto c = l.mesh().coord_of_rank(rank);
  const auto sets = l.indices(c);
  const auto s = static_cast<std::int64_t>(itemsize(l.dtype()));
  std::vector<std::byte> out(static_cast<std::size_t>(box_numel(sets) * s));
  for_each_local(l, sets, [&](std::int64_t k, std::int64_t lin) {
    double w = simulation_value(l.dtype(), lin, l.mesh().num_ranks());
    for (int m = 0; m < l.mesh().ndim(); ++m)
      if (auto op = l.sharding().partial(m)) w = seed(l.dtype(), *op, w, c[static_cast<std::size_t>(m)], l.mesh().size(m));
    store_element(l.dtype(), out.data(), k, w);
  });
  return out;
}

std::string verify_outputs(const Layout& l, const std::vector<std::vector<std::byte>>& outputs, std::int64_t seeded_ranks) {
  const std::int64_t value_ranks = seeded_ranks > 0 ? seeded_ranks : l.mesh().num_ranks();
  const Mesh& mesh = l.mesh();
  if (static_cast<std::int64_t>(outputs.size()) != mesh.num_ranks())
    throw InputError(fmt::format("verify_outputs got {} rank outputs for {} ranks", outputs.size(), mesh.num_ranks()));
  const std::vector<int> partial_dims = partial_dims_of(l);
  const auto s = static_cast<std::int64_t>(itemsize(l.dtype()));
  if (auto err = check_coverage(l); !err.empty()) return err;
  for (std::int64_t r = 0; r < mesh.num_ranks(); ++r) {
    const auto c = mesh.coord_of_rank(r);
    const auto group = led_group(mesh, c, partial_dims);
    if (group.empty()) continue;  // checked through the lead rank of its Partial group
    const auto sets = l.indices(c);
    if (static_cast<std::int64_t>(outputs[static_cast<std::size_t>(r)].size()) != box_numel(sets) * s)
      return fmt::format("rank {} holds {} bytes, its layout needs {}", r, outputs[static_cast<std::size_t>(r)].size(),
                         box_numel(sets) * s);
    std::string err;
    for_each_local(l, sets, [&](std::int64_t k, std::int64_t lin) {
      if (!err.empty()) return;
      const double v = group_value(l, outputs, group, partial_dims, k);
      const double want = simulation_value(l.dtype(), lin, value_ranks);
      const bool ok = l.dtype() == DType::boolean ? ((v != 0) == (want != 0)) : v == want;
      if (!ok)
        err = fmt::format("rank {} (coord {}) local element {} (global index {}) is {}, expected {}", r,
                          fmt::join(c, ","), k, lin, v, want);
    });
    if (!err.empty()) return err;
  }
  return "";
}

std::vector<std::vector<std::byte>> distribute_bytes(const Layout& l, std::span<const std::byte> global) {
  const auto s = static_cast<std::int64_t>(itemsize(l.dtype()));
  if (static_cast<std::int64_t>(global.size()) != l.numel() * s)
    throw InputError(fmt::format("distribute: the global tensor has {} bytes; {} {} needs {}", global.size(),
                                 shape_str(l.shape()), to_string(l.dtype()), l.numel() * s));
  const Mesh& mesh = l.mesh();
  std::vector<std::vector<std::byte>> out(static_cast<std::size_t>(mesh.num_ranks()));
  for (std::int64_t r = 0; r < mesh.num_ranks(); ++r) {
    const auto c = mesh.coord_of_rank(r);
    const auto sets = l.indices(c);
    auto& mine = out[static_cast<std::size_t>(r)];
    mine.resize(static_cast<std::size_t>(box_numel(sets) * s));
    // identity when a Partial dim's coordinate is not 0 and the op does not keep the value
    std::optional<double> fill;
    for (int m = 0; m < mesh.ndim(); ++m)
      if (auto op = l.sharding().partial(m); op && c[static_cast<std::size_t>(m)] != 0 &&
                                             (*op == ReduceOp::sum || *op == ReduceOp::product))
        fill = identity_of(*op);
    for_each_local(l, sets, [&](std::int64_t k, std::int64_t lin) {
      if (fill)
        store_element(l.dtype(), mine.data(), k, *fill);
      else
        std::memcpy(mine.data() + k * s, global.data() + lin * s, static_cast<std::size_t>(s));
    });
  }
  return out;
}

std::vector<std::byte> gather_bytes(const Layout& l, const std::vector<std::vector<std::byte>>& locals) {
  const Mesh& mesh = l.mesh();
  const auto s = static_cast<std::int64_t>(itemsize(l.dtype()));
  if (static_cast<std::int64_t>(locals.size()) != mesh.num_ranks())
    throw InputError(fmt::format("gather: {} local tensors for mesh {} of {} ranks", locals.size(), mesh.str(), mesh.num_ranks()));
  const std::vector<int> partial_dims = partial_dims_of(l);
  std::vector<std::byte> global(static_cast<std::size_t>(l.numel() * s));
  for (std::int64_t r = 0; r < mesh.num_ranks(); ++r) {
    const auto c = mesh.coord_of_rank(r);
    const auto sets = l.indices(c);
    if (static_cast<std::int64_t>(locals[static_cast<std::size_t>(r)].size()) != box_numel(sets) * s)
      throw InputError(fmt::format("gather: rank {} holds {} bytes, its part of layout {} is {}", r,
                                   locals[static_cast<std::size_t>(r)].size(), l.placements_str(), box_numel(sets) * s));
    const auto group = led_group(mesh, c, partial_dims);
    if (group.empty()) continue;
    for_each_local(l, sets, [&](std::int64_t k, std::int64_t lin) {
      if (partial_dims.empty())
        std::memcpy(global.data() + lin * s, locals[static_cast<std::size_t>(r)].data() + k * s, static_cast<std::size_t>(s));
      else
        store_element(l.dtype(), global.data(), lin, group_value(l, locals, group, partial_dims, k));
    });
  }
  return global;
}

std::string verify_rank_output(const Layout& l, std::int64_t rank, std::span<const std::byte> output,
                               std::int64_t seeded_ranks) {
  const std::int64_t value_ranks = seeded_ranks > 0 ? seeded_ranks : l.mesh().num_ranks();
  if (l.sharding().has_partial())
    throw InputError(fmt::format("verify_rank_output: layout {} holds Partial values; reduce them first", l.placements_str()));
  const auto sets = l.indices(l.mesh().coord_of_rank(rank));
  const auto s = static_cast<std::int64_t>(itemsize(l.dtype()));
  if (static_cast<std::int64_t>(output.size()) != box_numel(sets) * s)
    return fmt::format("rank {} holds {} bytes, its layout needs {}", rank, output.size(), box_numel(sets) * s);
  std::string err;
  for_each_local(l, sets, [&](std::int64_t k, std::int64_t lin) {
    if (!err.empty()) return;
    const double v = load_element(l.dtype(), output.data(), k);
    const double want = simulation_value(l.dtype(), lin, value_ranks);
    const bool ok = l.dtype() == DType::boolean ? ((v != 0) == (want != 0)) : v == want;
    if (!ok) err = fmt::format("rank {} local element {} (global index {}) is {}, expected {}", rank, k, lin, v, want);
  });
  return err;
}

}  // namespace dtensor
