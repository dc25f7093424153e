#pragma once
// The A* search over one query's state space (search.cpp, docs/planner.md "Search"): the cheapest
// path under a memory budget, and what the planner's modes ask of the same search (a forbidden
// first edge, every state within the optimum plus a slack, a tied runner-up, the source's class).
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "dtensor/plan.hpp"
#include "state_space.hpp"

namespace dtensor {

// The search's costs are integer picoseconds.
[[nodiscard]] inline std::int64_t quantise(double us) { return std::llround(us * 1e6); }
// Bounds round down, with a margin for the rounding of each edge's quantised cost.
[[nodiscard]] inline std::int64_t quantise_bound(double us) {
  return std::max<std::int64_t>(0, static_cast<std::int64_t>(us * 1e6) - 64);
}
// A state's bound in the search's picoseconds: exact where the bound says so.
[[nodiscard]] inline std::int64_t bound_ps(const SearchBound& b) { return b.exact_ps >= 0 ? b.exact_ps : quantise_bound(b.us); }

struct Found {
  std::vector<Step> steps;
  double total_cost_us = 0;
  std::int64_t cost_ps = 0;  // the search's own (quantised) cost of the path
};

// Where the source is not fixed by the interchangeable dims' relabelings, its canonical state
// stands for the source and for its relabelings alike: a path that reaches it may be a real path
// to a relabeling of the source or one back to the source itself (which the runner-up must not
// take). The runner-up search records its edges into that state (`class_id`): the least cost so
// far plus step over them, in the search's picoseconds (plan_on decides from it).
struct SourceClassProbe {
  std::uint32_t class_id = 0;
  std::int64_t best_ps = std::numeric_limits<std::int64_t>::max();
};

// (the plan search, when a runner-up is asked for) A path into the target as cheap as the plan,
// with as many steps, whose first step is another: a runner-up (no path with another first step
// costs less, nor as much in fewer steps), found without a second search.
struct TiedRunnerUp {
  std::optional<Found> found;
};

// What a search leaves behind for optimal_plans: every state settled with its exact cost so far
// (picoseconds), once the loop has settled every state whose estimate is at most the optimum.
//
// With `slack_ps`, every state whose estimate is at most the optimum + slack, as long as at most
// `max_extra` states beyond the optimum's are settled (a count, so every rank stops alike);
// past it `complete` is false and the states up to the optimum are still all settled.
struct Settled {
  std::vector<std::int64_t> cost_ps;  // per state id; -1: not settled
  std::int64_t optimum_ps = -1;
  std::int64_t slack_ps = 0;
  std::size_t max_extra = std::numeric_limits<std::size_t>::max();
  bool complete = true;
  [[nodiscard]] std::int64_t limit_ps() const { return complete ? optimum_ps + slack_ps : optimum_ps; }
};

struct FirstEdge {
  StepKind kind;
  DimList mesh_dims;
  Sharding to;
  // the relabeling that made `to` canonical (StateTable::perms): two steps out of the source can
  // differ only in it (one kind over one group, along two interchangeable tensor dims)
  std::uint16_t perm = 0;
  bool matches(StepKind k, const DimList& dims, const Sharding& t, std::uint16_t p) const {
    return k == kind && dims == mesh_dims && p == perm && t == to;
  }
};

// What a search is asked for besides the cheapest path under its budget (every field optional).
struct SearchModes {
  // Never start with this edge (the runner-up search).
  const FirstEdge* forbidden = nullptr;
  // Go on after settling the target until every state whose estimate (cost so far + bound) is at
  // most the optimum (+ the slack) is settled, and report their costs there: every state of every
  // optimal path is among them (the bound is admissible).
  Settled* all = nullptr;
  // Record the edges into the source's canonical state (SourceClassProbe).
  SourceClassProbe* probe = nullptr;
  // Keep a runner-up as cheap as the plan, in as many steps, met on the way (TiedRunnerUp).
  TiedRunnerUp* tie = nullptr;
};

// Cheapest path under `budget` (< 0: unbounded). States are the context's interned ids (shared
// with the other searches of the same query, with their bounds and edge lists); ties still break
// by this search's own discovery order.
[[nodiscard]] std::optional<Found> search(const GraphContext& ctx, std::int64_t budget, const SearchModes& modes = {});

// Smallest budget that admits any plan (the largest step peak along the path, minimised); -1 when
// no plan exists at all.
[[nodiscard]] std::int64_t smallest_feasible_budget(const GraphContext& ctx);

}  // namespace dtensor
