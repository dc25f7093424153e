#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dtensor/cost_model.hpp"
#include "dtensor/layout.hpp"
#include "dtensor/plan.hpp"

namespace dtensor {

// The default search limits (PlanOptions).
inline constexpr std::int64_t kDefaultMaxStates = 2'000'000;
inline constexpr std::int64_t kDefaultMaxSearchBytes = std::int64_t{1} << 30;

struct PlanOptions {
  // Unset: the cost profile's own (pytorch for the pytorch profile, all otherwise).
  std::optional<EdgeSet> edges;
  std::optional<std::int64_t> max_peak_bytes;  // edges whose transient peak exceeds it are not taken
  bool runner_up = true;                       // also search the best plan with another first step
  std::int64_t max_states = kDefaultMaxStates;  // search effort bound: beyond it, an error (never a wrong plan)
  // Memory bound of one planning call (states, edge and step memo tables): beyond it, an error.
  std::int64_t max_search_bytes = kDefaultMaxSearchBytes;
  friend bool operator==(const PlanOptions&, const PlanOptions&) = default;
};

// The optimal plan from `src` to exactly `dst` (same mesh, shape and dtype) under `cost`.
// Pure and deterministic: the same inputs give the bit-identical plan on every rank.
// Throws dtensor::Error explaining which constraint blocks a request.
[[nodiscard]] Plan plan_redistribution(const Layout& src, const Layout& dst, const CostModel& cost,
                                       const PlanOptions& options = {});

// Every plan of the optimal cost (equal in the planner's integer picoseconds) with at most as
// many steps as the planner's own, up to `max_plans`: the planner's own plan first (exactly as
// plan_redistribution returns it, runner-up included when asked), then the others in the search's
// deterministic edge order. With `slack_us` > 0 also the plans that cost at most that much more
// (same step limit, no layout twice), cheapest first (ties: that order); the search settles at
// most as many states beyond the optimum's as it met for the plan (at least 64, at most 4096;
// past that, only the optimal plans are listed) and tries at most 65,536 steps while listing
// them: counts, which every rank meets alike. The batch planner chooses
// among them the paths that share the most collectives (docs/batch.md). Same errors as
// plan_redistribution, and InputError for a slack that is not a time from 0 to 1e9 us.
[[nodiscard]] std::vector<Plan> optimal_plans(const Layout& src, const Layout& dst, const CostModel& cost,
                                              const PlanOptions& options = {}, std::size_t max_plans = 16,
                                              double slack_us = 0);

// (Re)computes every step's buffer record (Step::buffers: where each state and scratch region
// lives in the workspace) from the plan's steps and peak_bytes. The planner and Plan::from_json
// call it; call it after editing a plan's steps by hand. Throws InputError when peak_bytes is too
// small for a step.
void lower_buffers(Plan& plan);

// The plan as text: the request, the steps, the total, the trace and the runner-up. `prose`
// explains every step in a paragraph (what moves, why, bytes, padding, α/β/copy); `table` gives
// one row per step (`dtensor plan`; `--explain` for prose). Everything comes from the plan
// itself (it names the cost model it was planned with), so a plan read back from JSON explains
// the same.
enum class ExplainStyle : std::uint8_t { prose, table };
[[nodiscard]] std::string explain(const Plan& plan, ExplainStyle style = ExplainStyle::prose);
// The runner-up's trace; when it visits the same states as the plan (by other means, e.g. a
// direct exchange instead of a collective), followed by both step lists:
// "S(0)->R (steps: all_to_all[0]; the plan: all_gather[0])". "" when there is no runner-up.
[[nodiscard]] std::string runner_up_trace(const Plan& plan);

}  // namespace dtensor
