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
#include "dtensor/verify.hpp"
#include "placement/groups.hpp"
#include "local_elements.hpp"

namespace dtensor {

using namespace sim_detail;

namespace {

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

std::vector<std::byte> seeded_input(const RaggedLayout& l, std::int64_t rank) {
  if (!l.is_ragged()) return seeded_input(l.base(), rank);
  const auto c = l.mesh().coord_of_rank(rank);
  const auto piece = l.piece(c);
  std::vector<std::byte> out(static_cast<std::size_t>(piece.size() * static_cast<std::int64_t>(itemsize(l.dtype()))));
  for_each_local(l.base(), l.base().indices(c), [&](std::int64_t k, std::int64_t lin) {
    if (k >= piece.start && k < piece.stop)
      store_element(l.dtype(), out.data(), k - piece.start, simulation_value(l.dtype(), lin, l.mesh().num_ranks()));
  });
  return out;
}

std::string verify_rank_output(const RaggedLayout& l, std::int64_t rank, std::span<const std::byte> output,
                               std::int64_t seeded_ranks) {
  if (!l.is_ragged()) return verify_rank_output(l.base(), rank, output, seeded_ranks);
  const std::int64_t value_ranks = seeded_ranks > 0 ? seeded_ranks : l.mesh().num_ranks();
  const auto c = l.mesh().coord_of_rank(rank);
  const auto piece = l.piece(c);
  const auto s = static_cast<std::int64_t>(itemsize(l.dtype()));
  if (static_cast<std::int64_t>(output.size()) != piece.size() * s)
    return fmt::format("rank {} holds {} bytes, its ragged piece needs {}", rank, output.size(), piece.size() * s);
  std::string err;
  for_each_local(l.base(), l.base().indices(c), [&](std::int64_t k, std::int64_t lin) {
    if (!err.empty() || k < piece.start || k >= piece.stop) return;
    const double v = load_element(l.dtype(), output.data(), k - piece.start);
    const double want = simulation_value(l.dtype(), lin, value_ranks);
    const bool ok = l.dtype() == DType::boolean ? ((v != 0) == (want != 0)) : v == want;
    if (!ok) err = fmt::format("rank {} ragged local element {} (global index {}) is {}, expected {}", rank, k - piece.start, lin, v, want);
  });
  return err;
}

}  // namespace dtensor
