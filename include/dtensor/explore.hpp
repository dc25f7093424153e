#pragma once
// The redistribution graph itself, for tools and tests: its edges out of any state, and the part
// of it a search explores. Planning needs none of this (planner.hpp).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "dtensor/planner.hpp"

namespace dtensor {

struct GraphEdge {
  Sharding to;
  Step step;  // fully costed step record
};
struct GraphContext;  // opaque per-query context

class RedistributionGraph {
 public:
  RedistributionGraph(const Layout& src, const Layout& dst, const CostModel& cost, EdgeSet edges);
  ~RedistributionGraph();
  RedistributionGraph(const RedistributionGraph&) = delete;
  RedistributionGraph& operator=(const RedistributionGraph&) = delete;
  // Every edge out of `from`, in the planner's deterministic order. A step's peak counts the
  // `from` buffer unless `from` is the source and the `to` buffer unless `to` is the target.
  // With `records` false the steps carry costs, bytes and peaks only (no states, no reasons).
  [[nodiscard]] std::vector<GraphEdge> edges(const Sharding& from, bool records = true) const;
  [[nodiscard]] const Sharding& source() const;
  [[nodiscard]] const Sharding& target() const;

 private:
  std::unique_ptr<const CostModel> cost_;  // the graph's own copy (the context refers to it)
  std::unique_ptr<GraphContext> ctx_;  // (complete in explore.cpp, where the destructor is)
};

// The part of the graph within `max_cost_us` of the source: states cheapest-first (at most
// `max_states` of them, the source first) with their cheapest cost, and every edge explored
// between them. What `dtensor show --format dot` draws.
struct ExploredGraph {
  struct Node {
    Sharding state;
    double cost_us = 0;  // cheapest cost from the source
  };
  struct Arc {
    std::size_t from = 0, to = 0;  // node indices
    StepKind kind = StepKind::relabel;
    std::vector<int> mesh_dims;
    double cost_us = 0;
  };
  std::vector<Node> nodes;
  std::vector<Arc> arcs;
};
[[nodiscard]] ExploredGraph explore(const Layout& src, const Layout& dst, const CostModel& cost, EdgeSet edges,
                                    double max_cost_us, std::size_t max_states = 200);

}  // namespace dtensor
