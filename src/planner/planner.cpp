// The planner's entry points (planner.hpp): the optimal plan and its runner-up, the optimal plans
// with a slack (and the batch planner's candidates, planner_internal.hpp), each a search on one
// query's state space (search.hpp).
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <queue>

#include "dtensor/error.hpp"
#include "dtensor/planner.hpp"
#include "edges.hpp"
#include "planner_internal.hpp"
#include "search.hpp"

namespace dtensor {

namespace {

// optimal_plans with a slack: at most this many states settled beyond the optimum's estimate,
// and at most this many arcs tried while listing the paths (counts: every rank stops alike).
constexpr std::size_t kMaxSlackStates = 4096;
constexpr std::size_t kMaxPathVisits = 1 << 16;

// The options' bounds on the context; returns the memory budget (< 0: none).
std::int64_t apply_options(GraphContext& ctx, const PlanOptions& options) {
  if (options.max_search_bytes <= 0)
    throw InputError(fmt::format("max search bytes {} must be positive", options.max_search_bytes));
  ctx.table.max_search_bytes = options.max_search_bytes;
  ctx.table.max_states = options.max_states;
  if (options.max_peak_bytes && *options.max_peak_bytes < 0)
    throw InputError(fmt::format("max peak bytes {} must not be negative", *options.max_peak_bytes));
  return options.max_peak_bytes.value_or(-1);
}

[[noreturn]] void refuse(const GraphContext& ctx, std::int64_t budget, const Layout& src, const Layout& dst, EdgeSet edges) {
  const auto need = smallest_feasible_budget(ctx);
  if (budget >= 0 && need >= 0)
    throw InputError(fmt::format("no plan from {} to {} fits in {} peak bytes; the smallest budget that admits a plan "
                                 "is {} bytes", src.placements_str(), dst.placements_str(), budget, need));
  throw InputError(fmt::format("no plan from {} to {} with edge set {}", src.placements_str(), dst.placements_str(), to_string(edges)));
}

Plan plan_of(const Layout& src, const Layout& dst, const CostModel& cost, EdgeSet edges, Found found) {
  Plan plan;
  plan.src = src;
  plan.dst = dst;
  plan.cost_model = cost.name;
  plan.edges = edges;
  plan.steps = std::move(found.steps);
  plan.total_cost_us = found.total_cost_us;
  for (const auto& s : plan.steps) plan.peak_bytes = std::max(plan.peak_bytes, s.peak_bytes);
  lower_buffers(plan);
  return plan;
}

// The optimal plan on `ctx` and, when asked, its runner-up (the same search with the chosen first
// step forbidden): what plan_redistribution returns.
Plan plan_on(const GraphContext& ctx, std::int64_t budget, const Layout& src, const Layout& dst, const CostModel& cost,
             EdgeSet edges, const PlanOptions& options) {
  TiedRunnerUp tie;
  auto best = search(ctx, budget, {.tie = options.runner_up ? &tie : nullptr});
  if (!best) refuse(ctx, budget, src, dst, edges);
  const std::int64_t best_ps = best->cost_ps;
  Plan plan = plan_of(src, dst, cost, edges, std::move(*best));
  if (options.runner_up && !plan.steps.empty() && tie.found) {  // a path as cheap with another first step
    RunnerUp r;
    r.total_cost_us = tie.found->total_cost_us;
    r.trace = trace_of(plan.src.sharding(), tie.found->steps);
    r.steps = std::move(tie.found->steps);
    plan.runner_up = std::move(r);
  } else if (options.runner_up && !plan.steps.empty()) {
    // the group the search generated the first edge with (a direct step's is empty: its
    // record lists the mesh dims its transfers cross)
    const Step& s0 = plan.steps[0];
    // (the search meets its first edges' layouts as canonical states)
    Relabeling p;
    const DimList first_group = s0.kind == StepKind::direct ? DimList{} : DimList(s0.mesh_dims);
    Sharding first_to = ctx.canonical(s0.to, p);
    const FirstEdge first{s0.kind, first_group, std::move(first_to), ctx.merges() ? ctx.relabeling_id(p) : std::uint16_t{0}};
    SourceClassProbe probe;
    if (ctx.src_moves) probe.class_id = ctx.intern(ctx.canonical(ctx.src, p));
    auto ru = search(ctx, budget, {.forbidden = &first, .probe = ctx.src_moves ? &probe : nullptr});
    // Every relabeling of the source costs best->cost_ps to the target (its plan is the plan
    // relabeled), so a path through the source's canonical state costs at least what reaching
    // it costs plus that. When such a path could be the runner-up, it could be a real path to a
    // relabeling of the source (which the merged search cannot tell from a path back to the
    // source): the runner-up is then searched over every layout, as without merging.
    if (ctx.src_moves && probe.best_ps != std::numeric_limits<std::int64_t>::max() &&
        probe.best_ps + best_ps <= (ru ? ru->cost_ps : std::numeric_limits<std::int64_t>::max())) {
      GraphContext raw(src, dst, cost, edges);
      (void)apply_options(raw, options);
      const FirstEdge raw_first{s0.kind, first_group, s0.to};
      ru = search(raw, budget, {.forbidden = &raw_first});
    }
    if (ru) {
      RunnerUp r;
      r.total_cost_us = ru->total_cost_us;
      r.trace = trace_of(plan.src.sharding(), ru->steps);
      r.steps = std::move(ru->steps);
      plan.runner_up = std::move(r);
    }
  }
  return plan;
}

}  // namespace

Plan plan_redistribution(const Layout& src, const Layout& dst, const CostModel& cost, const PlanOptions& options) {
  const EdgeSet edges = edge_set_of(cost, options);
  GraphContext ctx(src, dst, cost, edges);
  const std::int64_t budget = apply_options(ctx, options);
  ctx.use_symmetry();
  return plan_on(ctx, budget, src, dst, cost, edges, options);
}

std::vector<Plan> optimal_plans(const Layout& src, const Layout& dst, const CostModel& cost, const PlanOptions& options,
                                std::size_t max_plans, double slack_us) {
  return near_optimal_plans(src, dst, cost, options, max_plans, slack_us, 0.0);
}

std::vector<Plan> near_optimal_plans(const Layout& src, const Layout& dst, const CostModel& cost, const PlanOptions& options,
                                     std::size_t max_plans, double slack_us, double latency_share) {
  if (max_plans == 0) throw InputError("max_plans must be at least 1");
  if (!std::isfinite(slack_us) || slack_us < 0 || slack_us > 1e9)
    throw InputError(fmt::format("slack {} us must be a time from 0 to 1e9 us", slack_us));
  if (!std::isfinite(latency_share) || latency_share < 0 || latency_share > 1e3)
    throw InputError(fmt::format("latency share {} must be from 0 to 1000", latency_share));
  const EdgeSet edges = edge_set_of(cost, options);
  // The planner's own plan, searched as plan_redistribution does (one state per class of
  // interchangeable mesh dims' relabelings)...
  GraphContext own(src, dst, cost, edges);
  const std::int64_t budget = apply_options(own, options);
  own.use_symmetry();
  std::vector<Plan> out;
  out.push_back(plan_on(own, budget, src, dst, cost, edges, options));
  const std::size_t own_steps = out.front().steps.size();
  if (max_plans == 1 || own_steps == 0) return out;
  // ... and the others over every layout, relabelings included (they are other plans): on the
  // same context (its states, bounds and costed edges reused) when there was nothing to merge
  // (there the same searches first: the slack search's budget below counts the states they met)
  std::optional<GraphContext> every;
  if (own.merges()) {
    every.emplace(src, dst, cost, edges);
    (void)apply_options(*every, options);
    (void)plan_on(*every, budget, src, dst, cost, edges, options);
  }
  const GraphContext& ctx = every ? *every : own;
  // Every state whose estimate is at most the optimum (+ slack), settled with its exact cost (on
  // the same context: the states, bounds and costed edges the first search made are reused).
  Settled all;
  double own_latency = 0;
  for (const auto& st : out.front().steps) own_latency += st.alpha_us;
  all.slack_ps = quantise(slack_us + latency_share * own_latency);
  // beyond the optimum's states, at most as many more as the plan's search met (at least 512, at
  // most 4096): the slack about doubles the search at most. The floor keeps a tight bound (a
  // search that meets few states) from starving the slack search of the states it must settle.
  if (all.slack_ps > 0) all.max_extra = std::min(kMaxSlackStates, std::max<std::size_t>(512, ctx.table.states.size()));
  (void)search(ctx, budget, {.all = &all});
  const std::int64_t limit = all.limit_ps();

  // The arcs a plan within the limit can take: (u, v) both settled (a state on such a plan has an
  // estimate at most the limit, so it was settled with its exact cost), within the budget, and
  // cost(u) + step within the limit. With no slack these are the tight edges, cost(u) + step ==
  // cost(v): they hold every optimal path.
  struct Arc {
    std::uint32_t to;
    StepKind kind;
    DimList group;
    std::int64_t cost_ps;
  };
  const std::uint32_t s_id = ctx.intern(ctx.src), d_id = ctx.intern(ctx.dst);
  const auto& C = all.cost_ps;
  const std::size_t n = C.size();
  std::vector<std::vector<Arc>> arcs(n);
  for (std::uint32_t u = 0; u < n; ++u) {
    if (C[u] < 0 || u == d_id) continue;
    std::int64_t from_max = -1;
    for (auto& e : ctx.edges_of(u)) {
      if (e.to >= n || C[e.to] < 0) continue;
      // not costed when even its floor and the next state's bound pass the limit
      if (!e.costed && C[u] + quantise_bound(ctx.edge_floor(u, e, from_max)) + bound_ps(ctx.table.bound[e.to]) > limit)
        continue;
      ctx.cost_edge(u, e);
      if (budget >= 0 && e.peak_bytes > budget) continue;
      const std::int64_t c = quantise(e.cost_us);
      if (C[u] + c <= limit && (all.slack_ps > 0 || C[u] + c == C[e.to])) arcs[u].push_back({e.to, e.kind, e.group, c});
    }
    if (edges == EdgeSet::all && direct_allowed(ctx, ctx.table.states[u]) &&
        C[u] + quantise_bound(ctx.direct_floor_us(u)) <= limit) {
      const Step& d = ctx.direct_step(u);
      const std::int64_t c = quantise(d.cost_us);
      if ((budget < 0 || d.peak_bytes <= budget) && C[u] + c <= limit && (all.slack_ps > 0 || C[u] + c == all.optimum_ps))
        arcs[u].push_back({d_id, StepKind::direct, {}, c});
    }
  }
  // From each state: the least cost to the target over these arcs (exact: a plan within the
  // limit uses only them) and the fewest arcs to it (a backward Dijkstra and a backward BFS).
  constexpr std::int64_t kFar = std::numeric_limits<std::int64_t>::max();
  std::vector<std::vector<std::pair<std::uint32_t, std::int64_t>>> back(n);
  for (std::uint32_t u = 0; u < n; ++u)
    for (const auto& a : arcs[u]) back[a.to].emplace_back(u, a.cost_ps);
  std::vector<std::int64_t> rest(n, kFar), hops(n, kFar);
  {
    using Item = std::pair<std::int64_t, std::uint32_t>;
    std::priority_queue<Item, std::vector<Item>, std::greater<>> pq;
    rest[d_id] = 0;
    pq.push({0, d_id});
    while (!pq.empty()) {
      const auto [r, v] = pq.top();
      pq.pop();
      if (r > rest[v]) continue;
      for (const auto& [u, c] : back[v])
        if (r + c < rest[u]) {
          rest[u] = r + c;
          pq.push({rest[u], u});
        }
    }
    std::vector<std::uint32_t> queue{d_id};
    hops[d_id] = 0;
    for (std::size_t q = 0; q < queue.size(); ++q)
      for (const auto& [u, c] : back[queue[q]])
        if (hops[u] == kFar) {
          hops[u] = hops[queue[q]] + 1;
          queue.push_back(u);
        }
  }
  // Every path within the limit of at most the plan's step count that visits no state twice,
  // depth first in the edge order (an arc is taken only when the target stays within reach in cost
  // and steps), at most kMaxPathVisits arcs tried; then the cheapest first (ties: the order
  // found), the planner's own plan skipped.
  struct Candidate {
    std::int64_t cost_ps;
    std::vector<const Arc*> path;
  };
  std::vector<Candidate> found;
  std::vector<const Arc*> path;
  std::vector<char> on_path(n, 0);  // paths visit a state once (a plan never returns to a layout)
  std::size_t visits = 0;
  auto dfs = [&](auto&& self, std::uint32_t u, std::int64_t g, std::int64_t left) -> void {
    if (u == d_id) {
      found.push_back({g, path});
      return;
    }
    on_path[u] = 1;
    for (const auto& a : arcs[u]) {
      if (visits >= kMaxPathVisits || (all.slack_ps == 0 && found.size() > max_plans)) break;
      if (on_path[a.to] || rest[a.to] == kFar || g + a.cost_ps + rest[a.to] > limit || hops[a.to] + 1 > left) continue;
      ++visits;
      path.push_back(&a);
      self(self, a.to, g + a.cost_ps, left - 1);
      path.pop_back();
    }
    on_path[u] = 0;
  };
  if (rest[s_id] != kFar) dfs(dfs, s_id, 0, static_cast<std::int64_t>(own_steps));
  std::stable_sort(found.begin(), found.end(), [](const Candidate& a, const Candidate& b) { return a.cost_ps < b.cost_ps; });
  for (const auto& cand : found) {
    if (out.size() >= max_plans) break;
    Found f;
    std::uint32_t at = s_id;
    for (const Arc* a : cand.path) {
      f.steps.push_back(make_step(ctx, a->kind, a->group.span(), ctx.table.states[at], ctx.table.states[a->to], true));
      f.total_cost_us += f.steps.back().cost_us;
      at = a->to;
    }
    bool same = f.steps.size() == out.front().steps.size();
    for (std::size_t k = 0; same && k < f.steps.size(); ++k) {
      const Step& x = f.steps[k];
      const Step& y = out.front().steps[k];
      same = x.kind == y.kind && x.mesh_dims == y.mesh_dims && x.to == y.to;
    }
    if (!same) out.push_back(plan_of(src, dst, cost, edges, std::move(f)));
  }
  return out;
}

}  // namespace dtensor
