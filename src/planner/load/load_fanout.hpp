#pragma once
// The fan-out candidates of a checkpoint load (load_plan.hpp, docs/checkpoint.md): which sets of
// replicated mesh dims a load may receive sharded and gather inside the mesh, and each tensor's
// intermediate layout for one such set.
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "dtensor/cost_model.hpp"
#include "dtensor/layout.hpp"
#include "dtensor/plan_cache.hpp"

namespace dtensor::load_detail {

// The sets of mesh dims (bit m: mesh dim m) worth receiving sharded: non-empty subsets of the
// mesh dims of more than one rank on which some target is Replicate, ascending; every subset
// when there are at most 3 such dims, else each dim alone and all of them together (the union,
// which is the largest mask, last).
[[nodiscard]] std::vector<std::uint32_t> fanout_masks(std::span<const Layout> targets);

// The layout `target` is received in when the mesh dims of `mask` are received sharded: each of
// them on which the target is Replicate (and of more than one rank) becomes a Shard of one tensor
// dim appended to that dim's entries -- the dim whose plan back to the target costs least under
// `cost` (ties: the lower dim). nullopt when no dim of the mask is such, or the tensor is 0-d.
[[nodiscard]] std::optional<Layout> intermediate(const Layout& target, std::uint32_t mask, const CostModel& cost,
                                                 PlanCache& cache);

}  // namespace dtensor::load_detail
