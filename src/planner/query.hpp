#pragma once
// One planning request (query.cpp): the mesh, shape, dtype, cost model, edge set, source and
// target, validated once, and what the edges out of a state depend on.
#include <cstdint>
#include <utility>
#include <vector>

#include "dtensor/cost_model.hpp"
#include "dtensor/layout.hpp"
#include "dtensor/planner.hpp"
#include "geometry.hpp"

namespace dtensor {

// What the edges out of a state depend on: the mesh, the shape, the edge set, the target (relabel,
// local fills, direct), the tensor dims in play and the shard kinds.
struct EdgeScope {
  const Mesh& mesh;
  const std::vector<std::int64_t>& shape;
  EdgeSet edges;
  const Sharding& dst;
  const std::vector<int>& play_dims;
  const std::vector<std::pair<std::int64_t, bool>>& shard_kinds;
};
// Plain shards and the strided split factors `src` or `dst` use: the shard kinds edges create.
[[nodiscard]] std::vector<std::pair<std::int64_t, bool>> shard_kinds_of(const Sharding& src, const Sharding& dst);

// One planning request, fixed once made (validated by the constructor): the mesh, shape, dtype,
// cost model and edge set, the source and target, and what every step derives from them.
struct Query {
  Query(const Layout& src, const Layout& dst, const CostModel& cost, EdgeSet edges);
  Query(const Layout&, const Layout&, CostModel&&, EdgeSet) = delete;  // it keeps a reference
  Mesh mesh;
  std::vector<std::int64_t> shape;
  DType dtype;
  const CostModel& cost;  // the caller's: it outlives the query (RedistributionGraph keeps a copy)
  EdgeSet edges;
  Sharding src, dst;
  std::vector<int> play_dims;                               // tensor dims that may be sharded
  std::vector<std::pair<std::int64_t, bool>> shard_kinds;  // (split_factor, strided) options
  Geometry geo;
  double numel = 1;  // the tensor's element count, as the cost formulas use it
  [[nodiscard]] EdgeScope scope() const noexcept { return {mesh, shape, edges, dst, play_dims, shard_kinds}; }
};

// The edge set a request plans with: the options', else the cost profile's own (pytorch for the
// pytorch profile, all otherwise).
[[nodiscard]] inline EdgeSet edge_set_of(const CostModel& cost, const PlanOptions& options) {
  return options.edges.value_or(cost.defaults_to_pytorch_edges() ? EdgeSet::pytorch : EdgeSet::all);
}

}  // namespace dtensor
