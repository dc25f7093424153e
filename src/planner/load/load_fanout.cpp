// Fan-out candidates of a checkpoint load (load_fanout.hpp).
#include "load_fanout.hpp"

#include <algorithm>

namespace dtensor::load_detail {
namespace {

// Mesh dim m of `target` is received sharded when replicated there over more than one rank.
bool replicated(const Layout& target, int m) {
  return target.mesh().size(m) > 1 && target.sharding().shard_dim_of(m) < 0 && !target.sharding().partial(m);
}

}  // namespace

std::vector<std::uint32_t> fanout_masks(std::span<const Layout> targets) {
  std::vector<int> dims;
  if (targets.empty()) return {};
  const int nd = targets.front().mesh().ndim();
  for (int m = 0; m < nd && m < 32; ++m)
    if (std::any_of(targets.begin(), targets.end(), [&](const Layout& t) { return replicated(t, m); })) dims.push_back(m);
  std::vector<std::uint32_t> out;
  if (dims.size() <= 3) {
    for (std::uint32_t pick = 1; pick < (1u << dims.size()); ++pick) {
      std::uint32_t mask = 0;
      for (std::size_t k = 0; k < dims.size(); ++k)
        if (pick >> k & 1u) mask |= 1u << dims[k];
      out.push_back(mask);
    }
  } else {
    std::uint32_t all = 0;
    for (int m : dims) out.push_back(1u << m), all |= 1u << m;
    out.push_back(all);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<Layout> intermediate(const Layout& target, std::uint32_t mask, const CostModel& cost, PlanCache& cache) {
  std::vector<int> dims;
  for (int m = 0; m < target.mesh().ndim() && m < 32; ++m)
    if ((mask >> m & 1u) && replicated(target, m)) dims.push_back(m);
  if (dims.empty() || target.ndim() == 0) return std::nullopt;
  std::optional<Layout> best;
  double best_cost = 0;
  for (int d = 0; d < target.ndim(); ++d) {
    Sharding s = target.sharding();
    for (int m : dims) s = s.with_shard_appended(d, ShardEntry{m, 1, false});
    Layout via(target.mesh(), target.shape(), target.dtype(), std::move(s));
    const double c = cache.get_or_plan(via, target, cost)->total_cost_us;
    if (!best || c < best_cost - 1e-9) best = std::move(via), best_cost = c;
  }
  return best;
}

}  // namespace dtensor::load_detail
