// Batch plans (docs/batch.md): per-tensor optimal plans, their steps scheduled into stages, and
// the stages that issue one collective for several tensors.
#include "dtensor/batch_plan.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "dtensor/error.hpp"
#include "geometry.hpp"
#include "placement/workspace.hpp"
#include "planner_internal.hpp"
#include "placement/hash.hpp"
#include "placement/json_fields.hpp"
#include "placement/odometer.hpp"

namespace dtensor {
namespace {

using nlohmann::json;
using ordered = nlohmann::ordered_json;

constexpr std::size_t kMaxGroupOps = 2048;  // NCCL operations in one group call, at most

bool is_local(StepKind k) { return k == StepKind::local_chunk || k == StepKind::local_fill || k == StepKind::relabel; }
bool is_collective(StepKind k) {
  return k == StepKind::all_gather || k == StepKind::reduce_scatter || k == StepKind::all_reduce || k == StepKind::all_to_all;
}

// The reduce op a step's collective runs with (reductions only).
std::optional<ReduceOp> op_of(const Step& s) {
  if (s.kind != StepKind::reduce_scatter && s.kind != StepKind::all_reduce) return std::nullopt;
  return s.from.partial(s.mesh_dims.front());
}

// What must agree for steps of different tensors to share one collective.
struct Key {
  StepKind kind;
  std::vector<int> mesh_dims;
  DType dtype;
  std::optional<ReduceOp> op;
  friend bool operator==(const Key&, const Key&) = default;
  friend auto operator<=>(const Key&, const Key&) = default;
};
// Direct exchanges of any tensors share one grouped send/recv (their transfer lists joined).
Key key_of(const Plan& p, const Step& s) {
  if (s.kind == StepKind::direct) return {s.kind, {}, p.dtype(), std::nullopt};
  return {s.kind, s.mesh_dims, p.dtype(), op_of(s)};
}
bool coalescible(StepKind k) { return is_collective(k) || k == StepKind::direct; }

std::int64_t group_size(const Mesh& mesh, const std::vector<int>& dims) {
  std::int64_t n = 1;
  for (int m : dims) n *= mesh.size(m);
  return n;
}

// The per-member count a step's collective runs with on any rank (all_reduce: the largest local
// size, an upper bound for ranks with less).
std::int64_t member_count(const Step& s) { return s.buffers.chunk; }

// A batch's plans by pointer: what the scheduler reads while the choice among each tensor's
// optimal plans changes them (no copies).
struct PlanList {
  std::vector<const Plan*> p;
  explicit PlanList(const BatchPlan& b) {
    p.reserve(b.size());
    for (auto i : b.plan_index) p.push_back(&b.distinct_plans[i]);
  }
  const Plan& operator[](std::size_t i) const { return *p[i]; }
  [[nodiscard]] std::size_t size() const noexcept { return p.size(); }
};

// Sets b's plans from one plan per tensor: each distinct plan copied once, in order of first use
// (the same pointer, or an equal plan, shares an entry), so that equal batches are equal values.
void assign_plans(BatchPlan& b, std::span<const Plan* const> per_tensor) {
  std::vector<Plan> distinct;
  std::vector<std::uint32_t> index;
  index.reserve(per_tensor.size());
  std::unordered_map<const Plan*, std::uint32_t> by_address;
  std::unordered_map<std::uint64_t, std::vector<std::uint32_t>> by_hash;
  for (const Plan* p : per_tensor) {
    if (const auto it = by_address.find(p); it != by_address.end()) {
      index.push_back(it->second);
      continue;
    }
    auto& same_hash = by_hash[p->hash()];
    std::uint32_t at = static_cast<std::uint32_t>(distinct.size());
    for (const auto i : same_hash)
      if (distinct[i] == *p) at = i;
    if (at == distinct.size()) {
      distinct.push_back(*p);
      same_hash.push_back(at);
    }
    by_address.emplace(p, at);
    index.push_back(at);
  }
  b.distinct_plans = std::move(distinct);
  b.plan_index = std::move(index);
}

// A coalesced stage's traffic summed member by member, in member order: coalesced_cost folds a
// stage's members, the scheduler adds its candidates one at a time (the same sums either way).
struct CoalescedSum {
  StepKind kind = StepKind::direct;
  const Mesh* mesh = nullptr;
  std::int64_t n = 1;      // group size
  std::int64_t item = 1;   // bytes per element
  Traffic t;               // without the staging copies
  std::int64_t C = 0;      // the members' counts (collectives)
  std::int64_t peers = 0;  // the members' peers (direct)
};

// The sums of a stage of `kind` over `mesh_dims` whose first member is `first`, before any member.
template <class Plans>
CoalescedSum coalesced_start(const Plans& P, StepKind kind, const std::vector<int>& mesh_dims, const BatchStage::Member& first) {
  const Plan& p0 = P[static_cast<std::size_t>(first.tensor)];
  CoalescedSum a;
  a.kind = kind;
  a.mesh = &p0.mesh();
  a.item = static_cast<std::int64_t>(itemsize(p0.dtype()));
  if (kind == StepKind::direct) {
    a.t.kind = Traffic::Kind::direct;
    return a;
  }
  a.n = group_size(p0.mesh(), mesh_dims);
  a.t.kind = Traffic::Kind::collective;
  a.t.collective = collective_of(kind).value();  // communication kinds only
  a.t.group = a.n;
  a.t.inter_host = p0.steps[static_cast<std::size_t>(first.step)].inter_host;
  return a;
}

template <class Plans>
void coalesced_add(CoalescedSum& a, const Plans& P, const BatchStage::Member& m) {
  const Plan& p = P[static_cast<std::size_t>(m.tensor)];
  const Step& step = p.steps[static_cast<std::size_t>(m.step)];
  if (a.kind == StepKind::direct) {
    // One grouped send/recv: at most every member's peers and the sum of the busiest ranks'
    // bytes (an upper bound: the busiest rank of the union sends and receives no more).
    a.peers += step.peers;
    a.t.bytes += static_cast<double>(std::max(step.bytes_sent, step.bytes_received));
    a.t.copy_bytes += static_cast<double>(step.copy_bytes);
    a.t.inter_host = a.t.inter_host || step.inter_host;
    return;
  }
  const auto s = static_cast<double>(a.item);
  const std::int64_t c = member_count(step);
  a.C += c;
  a.t.bytes += static_cast<double>(a.kind == StepKind::all_reduce ? c : a.n * c) * s;
  double numel = 1;
  for (auto x : p.shape()) numel *= static_cast<double>(x);
  a.t.shard_bytes += shard_bytes(numel, a.item, a.mesh->shape(), step.from);
  a.t.copy_bytes += static_cast<double>(step.copy_bytes);
}

// The staging buffer a coalesced collective needs (a grouped send/recv reads and writes in place).
std::int64_t coalesced_staging(const CoalescedSum& a) {
  if (a.kind == StepKind::direct) return 0;
  return staging_layout(a.t.collective, a.n, a.C, a.item).bytes;
}

// One collective over the members' concatenated chunks: one latency, the combined bytes on the
// wire, the members' own copies plus packing into and unpacking from the staging buffer.
double coalesced_total(const CostModel& cost, const CoalescedSum& a) {
  Traffic t = a.t;
  if (a.kind == StepKind::direct) {
    t.peers = std::min(a.peers, a.mesh->num_ranks() - 1);
    return cost.time(t).total_us();
  }
  const auto staged = staging_layout(t.collective, a.n, a.C, a.item);
  t.copy_bytes += static_cast<double>(staged.send_elems + staged.recv_elems) * static_cast<double>(a.item);
  return cost.time(t).total_us();
}

template <class Plans>
CoalescedSum coalesced_sum(const Plans& P, const BatchStage& st) {
  CoalescedSum a = coalesced_start(P, st.kind, st.mesh_dims, st.members.front());
  for (const auto& m : st.members) coalesced_add(a, P, m);
  return a;
}

template <class Plans>
std::int64_t stage_staging_bytes(const Plans& P, const BatchStage& st) {
  if (!st.coalesced) return 0;
  return coalesced_staging(coalesced_sum(P, st));
}

template <class Plans>
double coalesced_cost(const CostModel& cost, const Plans& P, const BatchStage& st) {
  return coalesced_total(cost, coalesced_sum(P, st));
}

template <class Plans>
double members_cost(const Plans& P, const BatchStage& st) {
  double c = 0;
  for (const auto& m : st.members) c += P[static_cast<std::size_t>(m.tensor)].steps[static_cast<std::size_t>(m.step)].cost_us;
  return c;
}

// The members' own collectives launched as one group: each still pays its own wire time, copies
// and ring hops, and the group pays the link's base latency (the launch) once instead of once per
// member (docs/batch.md: an assumption about NCCL's grouped launch, not a measurement).
template <class Plans>
double grouped_cost(const CostModel& cost, const Plans& P, const BatchStage& st) {
  const Step& s0 = P[static_cast<std::size_t>(st.members.front().tensor)].steps[static_cast<std::size_t>(st.members.front().step)];
  const double base = (s0.inter_host ? cost.inter : cost.intra).alpha_us;
  // every member's launch share but one is saved: the smallest stays paid
  double c = 0, shared = 0, keep = base;
  for (const auto& m : st.members) {
    const Step& step = P[static_cast<std::size_t>(m.tensor)].steps[static_cast<std::size_t>(m.step)];
    const double share = std::max(0.0, std::min(base, step.alpha_us));
    c += step.cost_us;
    shared += share;
    keep = std::min(keep, share);
  }
  return c - (shared - keep);
}

bool close(double a, double b) { return std::abs(a - b) <= 1e-6 + 1e-9 * std::max(std::abs(a), std::abs(b)); }

}  // namespace

void BatchPlan::set_plans(std::span<const Plan> plans) {
  std::vector<const Plan*> per_tensor;
  per_tensor.reserve(plans.size());
  for (const auto& p : plans) per_tensor.push_back(&p);
  assign_plans(*this, per_tensor);
}

std::int64_t BatchPlan::collectives() const {
  std::int64_t n = 0;
  for (const auto& st : stages) {
    if (st.coalesced || st.grouped) {
      ++n;
      continue;
    }
    for (const auto& m : st.members)
      n += is_local(plan(static_cast<std::size_t>(m.tensor)).steps[static_cast<std::size_t>(m.step)].kind) ? 0 : 1;
  }
  return n;
}

std::int64_t BatchPlan::separate_collectives() const {
  std::vector<std::int64_t> per(distinct_plans.size(), 0);
  for (std::size_t i = 0; i < distinct_plans.size(); ++i)
    for (const auto& s : distinct_plans[i].steps) per[i] += is_local(s.kind) ? 0 : 1;
  std::int64_t n = 0;
  for (auto i : plan_index) n += per[i];
  return n;
}

std::int64_t BatchPlan::staging_bytes() const {
  std::int64_t b = 0;
  const PlanList P(*this);
  for (const auto& st : stages) b = std::max(b, stage_staging_bytes(P, st));
  return b;
}

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

void validate_batch_plan(const BatchPlan& b) {
  const std::size_t T = b.size();
  if (T == 0) throw InputError("batch plan has no tensors");
  if (T > kMaxBatchTensors)
    throw InputError(fmt::format("batch plan has {} tensors, above the limit of {}", T, kMaxBatchTensors));
  if (b.distinct_plans.empty() || b.distinct_plans.size() > T)
    throw InputError(fmt::format("batch plan has {} distinct plans for {} tensors", b.distinct_plans.size(), T));
  std::vector<char> used(b.distinct_plans.size(), 0);
  for (std::size_t t = 0; t < T; ++t) {
    if (b.plan_index[t] >= b.distinct_plans.size())
      throw InputError(fmt::format("batch plan tensor {}'s plan {} is not one of its {} distinct plans", t, b.plan_index[t],
                                   b.distinct_plans.size()));
    used[b.plan_index[t]] = 1;
  }
  for (std::size_t i = 0; i < used.size(); ++i)
    if (!used[i]) throw InputError(fmt::format("batch plan's distinct plan {} is no tensor's plan", i));
  const PlanList P(b);
  const Mesh& mesh = P[0].mesh();
  double separate = 0;
  for (std::size_t i = 0; i < T; ++i) {
    if (P[i].mesh() != mesh)
      throw InputError(fmt::format("batch plan tensor {} is on mesh {}, tensor 0 on {}", i, P[i].mesh().str(), mesh.str()));
    separate += P[i].total_cost_us;
  }
  if (!close(separate, b.separate_cost_us))
    throw InputError(fmt::format("batch plan separate_cost_us {} is not its plans' total {}", b.separate_cost_us, separate));
  std::vector<std::size_t> next(T, 0), seen_in(T, SIZE_MAX);  // a tensor's next step; the last stage it was in
  double total = 0;
  for (std::size_t k = 0; k < b.stages.size(); ++k) {
    const BatchStage& st = b.stages[k];
    auto bad = [&](const std::string& what) { return InputError(fmt::format("batch plan stage {}: {}", k, what)); };
    if (st.members.empty()) throw bad("no members");
    if (!std::isfinite(st.cost_us) || st.cost_us < 0) throw bad(fmt::format("cost {} is not a finite non-negative time", st.cost_us));
    for (const auto& m : st.members) {
      if (m.tensor < 0 || static_cast<std::size_t>(m.tensor) >= T)
        throw bad(fmt::format("member tensor {} is not one of the {} tensors", m.tensor, T));
      const auto t = static_cast<std::size_t>(m.tensor);
      if (seen_in[t] == k) throw bad(fmt::format("tensor {} appears twice", t));
      seen_in[t] = k;
      if (m.step < 0 || static_cast<std::size_t>(m.step) != next[t])
        throw bad(fmt::format("tensor {} runs step {} where its step {} is next", t, m.step, next[t]));
      if (next[t] >= P[t].steps.size()) throw bad(fmt::format("tensor {} has no step {}", t, m.step));
      ++next[t];
    }
    const auto& f = P[static_cast<std::size_t>(st.members.front().tensor)];
    const Step& s0 = f.steps[static_cast<std::size_t>(st.members.front().step)];
    if (st.kind != s0.kind) throw bad(fmt::format("kind {} but its first member's step is {}", to_string(st.kind), to_string(s0.kind)));
    if (st.coalesced && st.grouped) throw bad("a stage is coalesced or grouped, not both");
    if (st.grouped || st.coalesced) {
      // one launch for several members: each member's step must be the same collective
      const char* what = st.grouped ? "grouped" : "coalesced";
      if (st.members.size() < 2) throw bad(fmt::format("a {} stage needs two members or more", what));
      if (st.grouped ? !is_collective(st.kind) : !coalescible(st.kind))
        throw bad(fmt::format("{} steps do not {}", to_string(st.kind), st.grouped ? "group" : "coalesce"));
      const Key k = key_of(f, s0);
      if (st.mesh_dims != k.mesh_dims) throw bad("its mesh dims are not its members'");
      for (const auto& m : st.members) {
        const Plan& p = P[static_cast<std::size_t>(m.tensor)];
        if (!(key_of(p, p.steps[static_cast<std::size_t>(m.step)]) == k))
          throw bad(fmt::format("tensor {}'s step is not the same collective (kind, mesh dims, dtype, reduce op)", m.tensor));
      }
      if (st.cost_us > members_cost(P, st) * (1 + 1e-9) + 1e-6)
        throw bad(fmt::format("{} cost {} above its members' {}", what, st.cost_us, members_cost(P, st)));
    } else {
      if (st.members.size() > 1)
        for (const auto& m : st.members)
          if (!is_local(P[static_cast<std::size_t>(m.tensor)].steps[static_cast<std::size_t>(m.step)].kind))
            throw bad(fmt::format("tensor {}'s step communicates: a stage of several members that is neither coalesced nor grouped runs local steps only", m.tensor));
      const std::vector<int> dims = st.members.size() == 1 && is_collective(s0.kind) ? s0.mesh_dims : std::vector<int>{};
      if (st.mesh_dims != dims) throw bad("its mesh dims are not its member's");
      if (!close(st.cost_us, members_cost(P, st)))
        throw bad(fmt::format("cost {} is not its members' {}", st.cost_us, members_cost(P, st)));
    }
    total += st.cost_us;
  }
  for (std::size_t t = 0; t < T; ++t)
    if (next[t] != P[t].steps.size())
      throw InputError(fmt::format("batch plan runs {} of tensor {}'s {} steps", next[t], t, P[t].steps.size()));
  if (!close(total, b.total_cost_us))
    throw InputError(fmt::format("batch plan total_cost_us {} is not its stages' total {}", b.total_cost_us, total));
}

std::uint64_t BatchPlan::hash() const {
  std::string canon = fmt::format("batch|{}|{}", cost_model, size());
  std::vector<std::string> hashes;
  for (const auto& p : distinct_plans) hashes.push_back(fmt::format("|{:016x}", p.hash()));
  for (auto i : plan_index) canon += hashes[i];
  for (const auto& st : stages) {
    canon += fmt::format(";{}:{}:{}:{}", to_string(st.kind), fmt::join(st.mesh_dims, ","), st.coalesced ? 1 : st.grouped ? 2 : 0,
                         std::llround(st.cost_us * 1e6));
    for (const auto& m : st.members) canon += fmt::format(",{}.{}", m.tensor, m.step);
  }
  return detail::fnv1a(canon.data(), canon.size());
}

std::string BatchPlan::to_json(int indent) const {
  ordered j;
  j["version"] = 1;
  j["kind"] = "batch";
  j["cost_model"] = cost_model;
  j["tensors"] = size();
  j["total_cost_us"] = total_cost_us;
  j["separate_cost_us"] = separate_cost_us;
  j["collectives"] = collectives();
  j["separate_collectives"] = separate_collectives();
  j["staging_bytes"] = staging_bytes();
  j["batch_hash"] = fmt::format("{:016x}", hash());
  j["stages"] = ordered::array();
  for (const auto& st : stages) {
    ordered s;
    s["kind"] = std::string(to_string(st.kind));
    s["mesh_dims"] = st.mesh_dims;
    s["coalesced"] = st.coalesced;
    if (st.grouped) s["grouped"] = true;  // absent: false (files written before grouping read the same)
    s["cost_us"] = st.cost_us;
    ordered members = ordered::array();
    for (const auto& m : st.members) members.push_back({m.tensor, m.step});
    s["members"] = members;
    j["stages"].push_back(s);
  }
  j["plans"] = ordered::array();
  std::vector<ordered> distinct;
  for (const auto& p : distinct_plans) distinct.push_back(ordered::parse(p.to_json()));
  for (auto i : plan_index) j["plans"].push_back(distinct[i]);
  return j.dump(indent);
}

BatchPlan BatchPlan::from_json(std::string_view text) {
  const json j = detail::parse_json(text, "batch plan");
  if (!j.is_object()) throw InputError("batch plan JSON must be an object");
  auto field = [&](const json& o, const char* key) -> const json& {
    auto it = o.find(key);
    if (it == o.end()) throw InputError(fmt::format("batch plan JSON lacks the field '{}'", key));
    return *it;
  };
  auto number = [&](const json& o, const char* key) {
    const json& v = field(o, key);
    if (!v.is_number() || !std::isfinite(v.get<double>()))
      throw InputError(fmt::format("batch plan JSON field '{}' must be a finite number, not {}", key, detail::json_quote(v)));
    return v.get<double>();
  };
  if (detail::json_int(field(j, "version"), "version", 1, 1 << 20) != 1)
    throw InputError("batch plan JSON version must be 1");
  if (field(j, "kind") != "batch") throw InputError("batch plan JSON 'kind' must be \"batch\"");
  BatchPlan b;
  const json& cm = field(j, "cost_model");
  if (!cm.is_string()) throw InputError("batch plan JSON 'cost_model' must be a string");
  b.cost_model = cm.get<std::string>();
  b.total_cost_us = number(j, "total_cost_us");
  b.separate_cost_us = number(j, "separate_cost_us");
  const json& plans = field(j, "plans");
  if (!plans.is_array() || plans.empty() || plans.size() > kMaxBatchTensors)
    throw InputError(fmt::format("batch plan JSON 'plans' must be a list of 1 to {} plans", kMaxBatchTensors));
  // each distinct plan kept once, as plan_batch keeps them (equal plans share an entry)
  std::unordered_map<std::uint64_t, std::vector<std::uint32_t>> by_hash;
  for (std::size_t i = 0; i < plans.size(); ++i) {
    Plan p;
    try {
      p = Plan::from_json(plans[i].dump());
    } catch (const InputError& e) {
      throw InputError(fmt::format("batch plan JSON plans[{}]: {}", i, e.what()));
    }
    if (p.cost_model != b.cost_model)
      throw InputError(fmt::format("batch plan JSON plans[{}] was planned under cost model {}, the batch under {}", i,
                                   quote_input(p.cost_model), quote_input(b.cost_model)));
    auto& same_hash = by_hash[p.hash()];
    auto at = static_cast<std::uint32_t>(b.distinct_plans.size());
    for (const auto k : same_hash)
      if (b.distinct_plans[k] == p) at = k;
    if (at == b.distinct_plans.size()) {
      b.distinct_plans.push_back(std::move(p));
      same_hash.push_back(at);
    }
    b.plan_index.push_back(at);
  }
  const json& stages = field(j, "stages");
  if (!stages.is_array()) throw InputError("batch plan JSON 'stages' must be a list");
  std::size_t total_steps = 0;
  for (auto i : b.plan_index) total_steps += b.distinct_plans[i].steps.size();
  if (stages.size() > total_steps)
    throw InputError(fmt::format("batch plan JSON has {} stages for {} steps", stages.size(), total_steps));
  const auto T = static_cast<std::int64_t>(b.size());
  for (std::size_t k = 0; k < stages.size(); ++k) {
    const json& s = stages[k];
    if (!s.is_object()) throw InputError(fmt::format("batch plan JSON stages[{}] must be an object", k));
    BatchStage st;
    const json& kind = field(s, "kind");
    if (!kind.is_string()) throw InputError(fmt::format("batch plan JSON stages[{}].kind must be a string", k));
    st.kind = parse_step_kind(kind.get<std::string>());
    const int md = b.plan(0).mesh().ndim();
    for (auto m : detail::json_int_list(field(s, "mesh_dims"), "mesh_dims", 0, md - 1)) st.mesh_dims.push_back(static_cast<int>(m));
    const json& co = field(s, "coalesced");
    if (!co.is_boolean()) throw InputError(fmt::format("batch plan JSON stages[{}].coalesced must be true or false", k));
    st.coalesced = co.get<bool>();
    if (s.contains("grouped")) {
      const json& gr = s["grouped"];
      if (!gr.is_boolean()) throw InputError(fmt::format("batch plan JSON stages[{}].grouped must be true or false", k));
      st.grouped = gr.get<bool>();
    }
    st.cost_us = number(s, "cost_us");
    const json& members = field(s, "members");
    if (!members.is_array() || members.empty() || members.size() > b.size())
      throw InputError(fmt::format("batch plan JSON stages[{}].members must be a list of 1 to {} [tensor, step] pairs", k, T));
    for (const auto& m : members) {
      if (!m.is_array() || m.size() != 2)
        throw InputError(fmt::format("batch plan JSON stages[{}].members entries are [tensor, step] pairs, not {}", k, detail::json_quote(m)));
      st.members.push_back({static_cast<std::int32_t>(detail::json_int(m[0], "tensor", 0, T - 1)),
                            static_cast<std::int32_t>(detail::json_int(m[1], "step", 0, 1 << 20))});
    }
    b.stages.push_back(std::move(st));
  }
  validate_batch_plan(b);
  return b;
}

std::vector<std::pair<Layout, Layout>> batch_pairs_from_json(std::string_view text) {
  const json j = detail::parse_json(text, "batch file");
  if (!j.is_object()) throw InputError("batch file must be a JSON object");
  for (const auto& [k, v] : j.items())
    if (k != "version" && k != "mesh" && k != "mesh_names" && k != "mesh_ranks" && k != "pairs")
      throw InputError(fmt::format("batch file: unknown field {}", quote_input(k)));
  auto v = j.find("version");
  if (v == j.end()) throw InputError("batch file lacks 'version'");
  if (detail::json_int(*v, "version", 1, 1 << 20) != 1) throw InputError("batch file: version must be 1");
  const Mesh mesh = detail::read_mesh_fields(j, "batch file");
  auto pairs = j.find("pairs");
  if (pairs == j.end() || !pairs->is_array() || pairs->empty() || pairs->size() > kMaxBatchTensors)
    throw InputError(fmt::format("batch file: 'pairs' must be a list of 1 to {} entries", kMaxBatchTensors));
  std::vector<std::pair<Layout, Layout>> out;
  out.reserve(pairs->size());
  for (std::size_t i = 0; i < pairs->size(); ++i) {
    const json& p = (*pairs)[i];
    const std::string where = fmt::format("batch file pairs[{}]", i);
    if (!p.is_object()) throw InputError(fmt::format("{} must be an object, not {}", where, detail::json_quote(p)));
    for (const auto& [k, x] : p.items())
      if (k != "shape" && k != "dtype" && k != "from" && k != "to")
        throw InputError(fmt::format("{}: unknown field {}", where, quote_input(k)));
    auto text_of = [&](const char* key) {
      auto it = p.find(key);
      if (it == p.end() || !it->is_string()) throw InputError(fmt::format("{}.{} must be a string", where, key));
      return it->get<std::string>();
    };
    try {
      const auto shape = detail::read_shape_field(p, where);
      const DType dtype = p.contains("dtype") ? parse_dtype(text_of("dtype")) : DType::f32;
      out.emplace_back(Layout::parse(mesh, shape, dtype, text_of("from")), Layout::parse(mesh, shape, dtype, text_of("to")));
    } catch (const InputError& e) {
      const std::string msg = e.what();
      throw InputError(msg.starts_with(where) ? msg : fmt::format("{}: {}", where, msg));
    }
  }
  return out;
}

std::string explain(const BatchPlan& b) {
  std::string out = fmt::format(
      "batch of {} tensors on mesh {} (cost model {}): {} stage(s), {} collective(s) against {} planned one by one\n"
      "total {:.3f} us against {:.3f} us one after another ({:.2f}x), staging {} bytes\n",
      b.size(), b.plan(0).mesh().str(), b.cost_model, b.stages.size(), b.collectives(), b.separate_collectives(),
      b.total_cost_us, b.separate_cost_us, b.total_cost_us > 0 ? b.separate_cost_us / b.total_cost_us : 1.0, b.staging_bytes());
  out += fmt::format("\n {:>3}  {:<15} {:<9} {:>7} {:>14}  {}\n", "#", "kind", "mesh", "tensors", "cost us", "how");
  for (std::size_t k = 0; k < b.stages.size(); ++k) {
    const auto& st = b.stages[k];
    std::vector<std::string> who;
    for (const auto& m : st.members) who.push_back(fmt::format("{}.{}", m.tensor, m.step));
    const std::string how = st.coalesced ? "one collective over the members' concatenated chunks"
                            : st.grouped  ? "the members' own collectives launched as one group"
                            : is_local(st.kind) ? "local copies, no communication"
                                                : "the member's own step";
    out += fmt::format(" {:>3}  {:<15} {:<9} {:>7} {:>14.3f}  {} (tensor.step: {})\n", k + 1, to_string(st.kind),
                       fmt::format("{}", fmt::join(st.mesh_dims, ",")), st.members.size(), st.cost_us, how, fmt::join(who, " "));
  }
  out += "\ntensors:\n";
  for (std::size_t t = 0; t < b.size(); ++t) {
    const auto& p = b.plan(t);
    out += fmt::format(" {:>3}  {} {} {} -> {}: {} step(s), {:.3f} us\n", t, shape_str(p.shape()), to_string(p.dtype()),
                       p.src.placements_str(), p.dst.placements_str(), p.steps.size(), p.total_cost_us);
  }
  return out;
}

}  // namespace dtensor
