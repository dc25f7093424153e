// One planning request: validated once, with what every step derives from it (query.hpp).
#include <algorithm>

#include "dtensor/error.hpp"
#include "query.hpp"

namespace dtensor {

std::vector<std::pair<std::int64_t, bool>> shard_kinds_of(const Sharding& src, const Sharding& dst) {
  // plain shards, and the strided split factors the source or the target use
  std::vector<std::pair<std::int64_t, bool>> shard_kinds{{1, false}};
  for (const Sharding* x : {&src, &dst}) {
    for (int t = 0; t < x->tensor_ndim(); ++t) {
      for (const auto& en : x->entries(t))
        if (en.strided && std::find(shard_kinds.begin(), shard_kinds.end(), std::pair{en.split_factor, true}) == shard_kinds.end())
          shard_kinds.push_back({en.split_factor, true});
    }
  }
  std::sort(shard_kinds.begin() + 1, shard_kinds.end());
  return shard_kinds;
}

Query::Query(const Layout& s, const Layout& d, const CostModel& c, EdgeSet e)
    : mesh(s.mesh()), shape(s.shape()), dtype(s.dtype()), cost(c), edges(e), src(s.sharding()),
      dst(d.sharding()), geo(s.mesh().shape(), s.shape(), static_cast<std::int64_t>(itemsize(s.dtype()))) {
  if (s.mesh() != d.mesh())
    throw InputError(fmt::format("source mesh {} and target mesh {} differ: a redistribution stays on one mesh",
                            s.mesh().str(), d.mesh().str()));
  if (s.shape() != d.shape())
    throw InputError(fmt::format("source shape {} and target shape {} differ", shape_str(s.shape()), shape_str(d.shape())));
  if (s.dtype() != d.dtype())
    throw InputError(fmt::format("source dtype {} and target dtype {} differ: redistribution does not convert",
                            to_string(s.dtype()), to_string(d.dtype())));
  if (mesh.ndim() > 31) throw InputError(fmt::format("mesh {} has more than 31 dims", mesh.str()));
  s.check_runs();  // the planner's geometry works on index lists
  d.check_runs();
  // A tensor dim plays a role when the source or target shards it, or when it has two or more
  // elements: sharding an otherwise untouched dim can make a cheaper path (reduce_scatter onto
  // it, then all_to_all; e.g. PP -> S(0)[0]S(0)[1]). Size 0/1 dims never help, except under the
  // PyTorch formula, whose byte count divides by every sharded mesh dim whatever the dim's size.
  const bool pytorch_bytes = c.prices_by_shard_count();
  for (int t = 0; t < static_cast<int>(shape.size()); ++t)
    if (pytorch_bytes || shape[static_cast<std::size_t>(t)] >= 2 || !src.entries(t).empty() || !dst.entries(t).empty())
      play_dims.push_back(t);
  shard_kinds = shard_kinds_of(src, dst);

  for (auto x : shape) numel *= static_cast<double>(x);
}

}  // namespace dtensor
