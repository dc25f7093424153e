#pragma once
// The parts of a batch plan that its value (batch_plan.cpp) and its scheduler (batch_schedule.cpp)
// share (batch_stage.cpp): which steps may share a collective, what a stage costs (coalesced,
// grouped, or its members one by one) and the staging it needs, and a batch's distinct plans.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "dtensor/batch_plan.hpp"
#include "dtensor/cost_model.hpp"
#include "planner/geometry.hpp"
#include "placement/workspace.hpp"

namespace dtensor::batch_detail {

constexpr std::size_t kMaxGroupOps = 2048;  // NCCL operations in one group call, at most

inline bool is_local(StepKind k) { return k == StepKind::local_chunk || k == StepKind::local_fill || k == StepKind::relabel; }
inline bool is_collective(StepKind k) {
  return k == StepKind::all_gather || k == StepKind::reduce_scatter || k == StepKind::all_reduce || k == StepKind::all_to_all;
}

// The reduce op a step's collective runs with (reductions only).
inline std::optional<ReduceOp> op_of(const Step& s) {
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
inline Key key_of(const Plan& p, const Step& s) {
  if (s.kind == StepKind::direct) return {s.kind, {}, p.dtype(), std::nullopt};
  return {s.kind, s.mesh_dims, p.dtype(), op_of(s)};
}
inline bool coalescible(StepKind k) { return is_collective(k) || k == StepKind::direct; }

inline std::int64_t group_size(const Mesh& mesh, const std::vector<int>& dims) {
  std::int64_t n = 1;
  for (int m : dims) n *= mesh.size(m);
  return n;
}

// The per-member count a step's collective runs with on any rank (all_reduce: the largest local
// size, an upper bound for ranks with less).
inline std::int64_t member_count(const Step& s) { return s.buffers.chunk; }

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

// A batch's distinct plans as they are gathered: equal plans (by hash, then equality) share one
// entry, in order of first use, so that equal batches are equal values.
class DistinctPlans {
 public:
  // The entry of `p`, added when new.
  std::uint32_t add(const Plan& p);
  std::uint32_t add(Plan&& p);
  [[nodiscard]] std::vector<Plan> take() && { return std::move(plans_); }

 private:
  template <class P>
  std::uint32_t add_plan(P&& p);
  std::vector<Plan> plans_;
  std::unordered_map<std::uint64_t, std::vector<std::uint32_t>> by_hash_;
};

// Sets b's plans from one plan per tensor: each distinct plan copied once, in order of first use
// (the same pointer, or an equal plan, shares an entry), so that equal batches are equal values.
void assign_plans(BatchPlan& b, std::span<const Plan* const> per_tensor);

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
[[nodiscard]] std::int64_t coalesced_staging(const CoalescedSum& a);

// One collective over the members' concatenated chunks: one latency, the combined bytes on the
// wire, the members' own copies plus packing into and unpacking from the staging buffer.
double coalesced_total(const CostModel& cost, const CoalescedSum& a);

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

inline bool close(double a, double b) { return std::abs(a - b) <= 1e-6 + 1e-9 * std::max(std::abs(a), std::abs(b)); }

}  // namespace dtensor::batch_detail
