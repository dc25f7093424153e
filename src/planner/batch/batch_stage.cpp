// What the batch plan's value and its scheduler share (batch_stage.hpp).
#include "batch_stage.hpp"

namespace dtensor::batch_detail {

template <class P>
std::uint32_t DistinctPlans::add_plan(P&& p) {
  auto& same_hash = by_hash_[p.hash()];
  for (const auto i : same_hash)
    if (plans_[i] == p) return i;
  const auto at = static_cast<std::uint32_t>(plans_.size());
  plans_.push_back(std::forward<P>(p));
  same_hash.push_back(at);
  return at;
}
std::uint32_t DistinctPlans::add(const Plan& p) { return add_plan(p); }
std::uint32_t DistinctPlans::add(Plan&& p) { return add_plan(std::move(p)); }

void assign_plans(BatchPlan& b, std::span<const Plan* const> per_tensor) {
  DistinctPlans distinct;
  std::vector<std::uint32_t> index;
  index.reserve(per_tensor.size());
  std::unordered_map<const Plan*, std::uint32_t> by_address;  // (the same plan again: no hash)
  for (const Plan* p : per_tensor) {
    const auto [it, fresh] = by_address.try_emplace(p, 0);
    if (fresh) it->second = distinct.add(*p);
    index.push_back(it->second);
  }
  b.distinct_plans = std::move(distinct).take();
  b.plan_index = std::move(index);
}

std::int64_t coalesced_staging(const CoalescedSum& a) {
  if (a.kind == StepKind::direct) return 0;
  return staging_layout(a.t.collective, a.n, a.C, a.item).bytes;
}

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

}  // namespace dtensor::batch_detail
