#pragma once
// What planner.cpp offers the other planners (the batch planner's candidates).
#include <cstddef>
#include <vector>

#include "dtensor/planner.hpp"

namespace dtensor {

// optimal_plans with a slack of `slack_us` plus `latency_share` times the latency (α) of the
// planner's own plan's steps: the batch planner's candidates (docs/batch.md).
[[nodiscard]] std::vector<Plan> near_optimal_plans(const Layout& src, const Layout& dst, const CostModel& cost,
                                                   const PlanOptions& options, std::size_t max_plans, double slack_us,
                                                   double latency_share);

}  // namespace dtensor
