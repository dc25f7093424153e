// Global tensors to the ranks' local tensors and back (host_tensor.hpp).
#include "dtensor/host_tensor.hpp"

#include <cstring>
#include <optional>

#include "dtensor/error.hpp"
#include "dtensor/scalar.hpp"
#include "local_elements.hpp"

namespace dtensor {

using namespace sim_detail;

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

}  // namespace dtensor
