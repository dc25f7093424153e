// The batch planner (batch_plan.hpp, docs/batch.md): per-tensor optimal plans, their steps
// scheduled into stages, and the stages that issue one collective for several tensors.
#include "dtensor/batch_plan.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "batch_stage.hpp"
#include "dtensor/error.hpp"
#include "placement/odometer.hpp"
#include "planner/planner_internal.hpp"

namespace dtensor {

using namespace batch_detail;

namespace {

// Schedules the plans' steps into `stages` (docs/batch.md); returns their total cost.
double schedule(const PlanList& P, std::vector<BatchStage>& stages, const CostModel& cost, const PlanOptions& options) {
  stages.clear();
  // Schedule: every round takes, for each tensor, at most its next step. Local steps of every
  // tensor go first (one stage: no communication); otherwise the collective shared by the most
  // tensors' next steps (ties: the first tensor's), which coalesces when that is cheaper than
  // running the members one after another and the staging fits the memory bound.
  const std::size_t T = P.size();
  std::vector<std::size_t> next(T, 0);
  std::size_t left = 0;
  for (std::size_t t = 0; t < P.size(); ++t) left += P[t].steps.size();
  auto step_at = [&](std::size_t t) -> const Step& { return P[t].steps[next[t]]; };
  auto push_single = [&](std::size_t t) {
    BatchStage st;
    st.kind = step_at(t).kind;
    if (!is_local(st.kind) && st.kind != StepKind::direct) st.mesh_dims = step_at(t).mesh_dims;
    st.members.push_back({static_cast<std::int32_t>(t), static_cast<std::int32_t>(next[t])});
    st.cost_us = step_at(t).cost_us;
    stages.push_back(std::move(st));
  };
  // Who waits on what, kept as the steps advance so that a round costs what it schedules (plus
  // logarithms), never a pass over every tensor: the tensors whose next step is local, those
  // whose next step shares no collective, and per collective key the tensors whose next step has
  // it, by size (then index) and by index; the keys ordered by (most tensors, first tensor).
  struct Bucket {
    Key key;
    std::set<std::pair<std::int64_t, std::size_t>> by_size;
    std::set<std::size_t> ids;
  };
  std::vector<Bucket> buckets;
  std::map<Key, std::size_t> bucket_of;
  std::set<std::tuple<std::size_t, std::size_t, std::size_t>> ranked;  // (T - count, first, bucket)
  std::set<std::size_t> local_ready, single_ready;
  std::vector<std::size_t> in_bucket(T, SIZE_MAX);
  auto size_of = [&](std::size_t t) { return std::max(step_at(t).bytes_sent, step_at(t).bytes_received); };
  auto rank_entry = [&](std::size_t b) {
    return std::tuple{T - buckets[b].ids.size(), *buckets[b].ids.begin(), b};
  };
  auto enter = [&](std::size_t t) {
    if (next[t] >= P[t].steps.size()) return;
    const StepKind kind = step_at(t).kind;
    if (is_local(kind)) {
      local_ready.insert(t);
    } else if (!coalescible(kind)) {
      single_ready.insert(t);
    } else {
      Key key = key_of(P[t], step_at(t));
      auto [it, fresh] = bucket_of.try_emplace(key, buckets.size());
      if (fresh) buckets.push_back({std::move(key), {}, {}});
      const std::size_t b = it->second;
      if (!buckets[b].ids.empty()) ranked.erase(rank_entry(b));
      buckets[b].by_size.insert({size_of(t), t});
      buckets[b].ids.insert(t);
      ranked.insert(rank_entry(b));
      in_bucket[t] = b;
    }
  };
  auto leave = [&](std::size_t t) {
    if (local_ready.erase(t) || single_ready.erase(t)) return;
    const std::size_t b = std::exchange(in_bucket[t], SIZE_MAX);
    ranked.erase(rank_entry(b));
    buckets[b].by_size.erase({size_of(t), t});
    buckets[b].ids.erase(t);
    if (!buckets[b].ids.empty()) ranked.insert(rank_entry(b));
  };
  auto advance = [&](std::size_t t) {
    leave(t);
    ++next[t];
    --left;
    enter(t);
  };
  for (std::size_t t = 0; t < T; ++t) enter(t);
  while (left > 0) {
    if (!local_ready.empty()) {
      BatchStage local;
      const std::vector<std::size_t> who(local_ready.begin(), local_ready.end());
      local.kind = step_at(who.front()).kind;
      for (std::size_t t : who) local.members.push_back({static_cast<std::int32_t>(t), static_cast<std::int32_t>(next[t])});
      local.cost_us = members_cost(P, local);
      for (std::size_t t : who) advance(t);
      stages.push_back(std::move(local));
      continue;
    }
    // the most shared collective key among the next steps (direct steps of one dtype share one);
    // ties go to the key whose first tensor comes first, a step that shares nothing counting one
    std::size_t best_t = single_ready.empty() ? T : *single_ready.begin();
    std::size_t best_count = single_ready.empty() ? 0 : 1;
    std::size_t best_bucket = SIZE_MAX;
    if (!ranked.empty()) {
      const auto [inv, first, b] = *ranked.begin();
      const std::size_t count = T - inv;
      if (count > best_count || (count == best_count && first < best_t)) {
        best_count = count;
        best_t = first;
        best_bucket = b;
      }
    }
    if (best_bucket == SIZE_MAX || best_count == 1) {
      push_single(best_t);
      advance(best_t);
      continue;
    }
    // The members: every tensor whose next step is this collective, smallest first; each joins
    // the coalesced group when that costs less than running it on its own (its latency saved
    // against packing and unpacking it), and the group's staging fits the memory bound. The
    // others run on their own.
    const Key k = buckets[best_bucket].key;
    // NCCL takes at most 2048 operations in one group (an all_to_all is a send and a receive per
    // member): the smallest that fit are this round's candidates, the others wait for the next
    std::size_t cap = SIZE_MAX;
    if (is_collective(k.kind)) {
      const std::size_t per =
          k.kind == StepKind::all_to_all ? static_cast<std::size_t>(2 * group_size(P[best_t].mesh(), k.mesh_dims)) : 1;
      cap = std::max<std::size_t>(2, kMaxGroupOps / per);
    }
    std::vector<std::size_t> cands;
    for (const auto& [bytes, u] : buckets[best_bucket].by_size) {
      if (cands.size() == cap) break;
      cands.push_back(u);
    }
    BatchStage st;
    st.kind = step_at(best_t).kind;
    st.mesh_dims = k.mesh_dims;
    st.coalesced = true;
    double group_cost = 0;
    std::vector<std::size_t> alone;
    CoalescedSum sum;  // the group's traffic so far
    for (std::size_t u : cands) {
      const double own = step_at(u).cost_us;
      const BatchStage::Member member{static_cast<std::int32_t>(u), static_cast<std::int32_t>(next[u])};
      if (st.members.empty()) {
        st.members.push_back(member);
        sum = coalesced_start(P, st.kind, st.mesh_dims, member);
        coalesced_add(sum, P, member);
        group_cost = own;
        continue;
      }
      CoalescedSum with = sum;
      coalesced_add(with, P, member);
      const double together = coalesced_total(cost, with);
      const bool fits = !options.max_peak_bytes || coalesced_staging(with) <= *options.max_peak_bytes;
      if (fits && together < group_cost + own) {
        st.members.push_back(member);
        sum = with;
        group_cost = together;
      } else {
        alone.push_back(u);
      }
    }
    if (st.members.size() < 2) {
      alone.push_back(static_cast<std::size_t>(st.members.front().tensor));
      st.members.clear();
    }
    std::sort(alone.begin(), alone.end());
    // Grouping (ring formulas, collectives): the members' own collectives launched together, no
    // packing. Three ways to run the candidates, the cheapest taken (ties: fewer launches, then the
    // earlier way): A the packed group and the rest alone; B every candidate in one group; C the
    // packed group and the rest in one group.
    auto as_group = [&](const std::vector<std::size_t>& who) {
      BatchStage g;
      g.kind = st.kind;
      g.mesh_dims = k.mesh_dims;
      g.grouped = true;
      for (std::size_t u : who) g.members.push_back({static_cast<std::int32_t>(u), static_cast<std::int32_t>(next[u])});
      std::sort(g.members.begin(), g.members.end(), [](const auto& x, const auto& y) { return x.tensor < y.tensor; });
      g.cost_us = grouped_cost(cost, P, g);
      return g;
    };
    double alone_cost = 0;
    for (std::size_t u : alone) alone_cost += step_at(u).cost_us;
    const double packed_cost = st.members.empty() ? 0.0 : group_cost;
    enum class Way { a, b, c } way = Way::a;
    std::optional<BatchStage> grouped;
    if (cost.formula == CostModel::Formula::ring && is_collective(st.kind) && cands.size() >= 2) {
      const double cost_a = packed_cost + alone_cost;
      const auto launches_a = static_cast<double>((st.members.empty() ? 0 : 1) + alone.size());
      double best_cost = cost_a, best_launches = launches_a;
      auto better = [&](double c, double launches) {
        return c < best_cost && !close(c, best_cost) ? true : close(c, best_cost) && launches < best_launches;
      };
      BatchStage all_of = as_group(cands);
      if (better(all_of.cost_us, 1)) {
        way = Way::b;
        best_cost = all_of.cost_us;
        best_launches = 1;
        grouped = std::move(all_of);
      }
      if (!st.members.empty() && alone.size() >= 2) {
        BatchStage rest = as_group(alone);
        if (better(packed_cost + rest.cost_us, 2)) {
          way = Way::c;
          grouped = std::move(rest);
        }
      }
    }
    auto take = [&](BatchStage stage) {
      for (const auto& m : stage.members) advance(static_cast<std::size_t>(m.tensor));
      stages.push_back(std::move(stage));
    };
    if (way == Way::b) {
      take(std::move(*grouped));
      continue;
    }
    if (!st.members.empty()) {
      std::sort(st.members.begin(), st.members.end(), [](const auto& x, const auto& y) { return x.tensor < y.tensor; });
      st.cost_us = group_cost;
      take(std::move(st));
    }
    if (way == Way::c) {
      take(std::move(*grouped));
      continue;
    }
    for (std::size_t u : alone) {
      push_single(u);
      advance(u);
    }
  }
  double total = 0;
  for (const auto& st : stages) total += st.cost_us;
  return total;
}

constexpr std::size_t kMaxAlternatives = 8;       // candidate plans kept per distinct pair, its own included
constexpr std::size_t kChoiceSchedules = 256;      // schedules tried per batch, at most
constexpr std::size_t kChoiceTensorSteps = 1 << 16;  // ... and at most this many tensors scheduled in all

// Among each tensor's candidate plans (its optimal plans and those within its slack), the
// combination whose stages cost least: every combination when there are few enough (per tensor, or per distinct pair when per tensor
// there are too many); otherwise coordinate descent over the distinct pairs in order, each trying
// its plans and keeping one only when the total drops, while the budget lasts. The budget is a
// count of schedules, never wall time, so every rank makes the same choice; ties keep the
// earlier combination (the planner's own plans first).
void choose_alternatives(BatchPlan& b, const std::vector<std::vector<Plan>>& alts, const std::vector<std::size_t>& klass,
                         const CostModel& cost, const PlanOptions& options) {
  const std::size_t T = b.size(), K = alts.size();
  double combos_per_class = 1, combos_per_tensor = 1;
  for (std::size_t k = 0; k < K; ++k) combos_per_class *= static_cast<double>(alts[k].size() + 1);
  if (combos_per_class <= 1) return;  // every pair has one optimal plan
  for (std::size_t t = 0; t < T; ++t) combos_per_tensor *= static_cast<double>(alts[klass[t]].size() + 1);
  const std::size_t budget = std::min(kChoiceSchedules, std::max<std::size_t>(1, kChoiceTensorSteps / T));
  PlanList P(b);
  const std::vector<const Plan*> own = P.p;
  auto plan_of = [&](std::size_t t, std::size_t c) { return c == 0 ? own[t] : &alts[klass[t]][c - 1]; };
  std::vector<BatchStage> stages;
  std::size_t used = 0;
  double best = b.total_cost_us;
  std::vector<std::size_t> best_choice(T, 0);
  auto lower = [&](double total) { return total < best && !close(total, best); };
  // variables: each tensor, or each distinct pair (its tensors take the same plan)
  const bool per_tensor = combos_per_tensor <= static_cast<double>(budget);
  const std::size_t V = per_tensor ? T : K;
  auto options_of = [&](std::size_t v) { return (per_tensor ? alts[klass[v]].size() : alts[v].size()) + 1; };
  std::vector<std::size_t> choice(V, 0);
  auto evaluate = [&]() {
    for (std::size_t t = 0; t < T; ++t) P.p[t] = plan_of(t, choice[per_tensor ? t : klass[t]]);
    ++used;
    return schedule(P, stages, cost, options);
  };
  auto keep_if_lower = [&](double total) {
    if (!lower(total)) return false;
    best = total;
    for (std::size_t t = 0; t < T; ++t) best_choice[t] = choice[per_tensor ? t : klass[t]];
    return true;
  };
  if (per_tensor || combos_per_class <= static_cast<double>(budget)) {
    // every combination, the last variable fastest (the all-zero one is the schedule already made)
    while (detail::next_digits(V, [&](std::size_t v) -> auto& { return choice[v]; }, options_of)) keep_if_lower(evaluate());
  } else {
    for (std::size_t v = 0; v < V && used < budget; ++v) {
      std::size_t keep = 0;
      for (std::size_t c = 1; c < options_of(v) && used < budget; ++c) {
        choice[v] = c;
        if (keep_if_lower(evaluate())) keep = c;
      }
      choice[v] = keep;
    }
  }
  bool changed = false;
  for (auto c : best_choice) changed = changed || c != 0;
  if (!changed) return;
  std::vector<const Plan*> chosen;
  chosen.reserve(T);
  b.separate_cost_us = 0;
  for (std::size_t t = 0; t < T; ++t) {
    chosen.push_back(plan_of(t, best_choice[t]));
    b.separate_cost_us += chosen.back()->total_cost_us;
  }
  assign_plans(b, chosen);
  b.total_cost_us = schedule(PlanList(b), b.stages, cost, options);
}

}  // namespace

BatchPlan plan_batch_from(std::vector<Plan> plans, const CostModel& cost, const PlanOptions& options) {
  if (plans.empty()) throw InputError("a batch needs at least one plan");
  if (plans.size() > kMaxBatchTensors)
    throw InputError(fmt::format("a batch of {} tensors is above the limit of {}", plans.size(), kMaxBatchTensors));
  BatchPlan b;
  b.cost_model = cost.name;
  const Mesh& mesh = plans.front().mesh();
  for (std::size_t i = 0; i < plans.size(); ++i) {
    if (plans[i].mesh() != mesh)
      throw InputError(fmt::format("batch entry {} is on mesh {}, the batch's first entry on {}: a batch stays on one mesh", i,
                                   plans[i].mesh().str(), mesh.str()));
    if (plans[i].cost_model != cost.name)
      throw InputError(fmt::format("batch entry {} was planned with cost model {}, the batch uses {}", i, plans[i].cost_model, cost.name));
    validate_plan(plans[i]);
    b.separate_cost_us += plans[i].total_cost_us;
  }
  b.set_plans(plans);
  b.total_cost_us = schedule(PlanList(b), b.stages, cost, options);
  return b;
}

namespace {

// With every edge allowed, a pair's cheapest plan may be a direct exchange while its plan of
// collectives alone (PyTorch's edge set) is dearer by more than the window above, yet coalesces
// with the other tensors' collectives into fewer launches: at 64 simulated ranks (a fitted
// profile, 4 MiB layer of 4 tensors) the direct plans scheduled to 26.2 us, the collectives alone
// to 21.3. That plan joins the candidates (last, replacing the dearest when they are full).
void add_collective_alternative(const Layout& src, const Layout& dst, const CostModel& cost, const PlanOptions& options,
                                std::vector<Plan>& all) {
  if (cost.formula == CostModel::Formula::pytorch || options.edges.value_or(EdgeSet::all) != EdgeSet::all) return;
  PlanOptions po = options;
  po.edges = EdgeSet::pytorch;
  po.runner_up = false;
  std::optional<Plan> p;
  try {
    p = plan_redistribution(src, dst, cost, po);
  } catch (const InputError&) {
    return;  // (a peak bound PyTorch's edges cannot meet)
  }
  for (const Plan& q : all)
    if (q.steps == p->steps) return;
  if (all.size() >= kMaxAlternatives) all.pop_back();
  all.push_back(std::move(*p));
}

}  // namespace

BatchPlan plan_batch(std::span<const std::pair<Layout, Layout>> pairs, const CostModel& cost, const PlanOptions& options) {
  if (pairs.empty()) throw InputError("a batch needs at least one (source, target) pair");
  if (pairs.size() > kMaxBatchTensors)
    throw InputError(fmt::format("a batch of {} tensors is above the limit of {}", pairs.size(), kMaxBatchTensors));
  BatchPlan b;
  b.cost_model = cost.name;
  const Mesh& mesh = pairs.front().first.mesh();
  // A model's tensors repeat a few shapes and layouts: each distinct pair is planned once.
  std::unordered_map<std::string, std::size_t> planned;
  b.plan_index.reserve(pairs.size());
  // Per distinct pair, its other candidate plans; per tensor, its distinct pair.
  std::vector<std::vector<Plan>> alternatives;
  std::vector<std::size_t> klass;
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    const auto& [src, dst] = pairs[i];
    if (src.mesh() != mesh || dst.mesh() != mesh)
      throw InputError(fmt::format("batch entry {} is on mesh {}, the batch's first entry on {}: a batch stays on one mesh", i,
                                   (src.mesh() != mesh ? src.mesh() : dst.mesh()).str(), mesh.str()));
    const std::string key = fmt::format("{}|{}|{}|{}|{}|{}", fmt::join(src.shape(), ","), to_string(src.dtype()),
                                        src.sharding().str(), fmt::join(dst.shape(), ","), to_string(dst.dtype()), dst.sharding().str());
    if (auto it = planned.find(key); it != planned.end()) {
      b.plan_index.push_back(b.plan_index[it->second]);
      klass.push_back(klass[it->second]);
    } else {
      try {
        // the planner's own plan (with its runner-up when asked) first, then the other candidates:
        // the optimal plans, and those dearer by at most the latency of the planner's own plan's
        // steps (what sharing every launch could save it)
        auto all = near_optimal_plans(src, dst, cost, options, kMaxAlternatives, 0, 1.0);
        add_collective_alternative(src, dst, cost, options, all);
        b.plan_index.push_back(static_cast<std::uint32_t>(b.distinct_plans.size()));
        b.distinct_plans.push_back(std::move(all.front()));
        all.erase(all.begin());
        alternatives.push_back(std::move(all));
      } catch (const InputError& e) {
        throw InputError(fmt::format("batch entry {}: {}", i, e.what()));
      }
      planned.emplace(key, i);
      klass.push_back(alternatives.size() - 1);
    }
    b.separate_cost_us += b.plan(i).total_cost_us;
  }
  b.total_cost_us = schedule(PlanList(b), b.stages, cost, options);
  choose_alternatives(b, alternatives, klass, cost, options);
  return b;
}

}  // namespace dtensor
