#include "dtensor/plan_cache.hpp"

#include "../placement/hash.hpp"
#include "dtensor/error.hpp"

namespace dtensor {

PlanCache::PlanCache(std::size_t capacity) : capacity_(capacity) {
  if (capacity_ == 0) throw InputError("plan cache capacity must be at least 1");
}

std::shared_ptr<const Plan> PlanCache::get_or_plan(const Layout& src, const Layout& dst, const CostModel& cost,
                                                   const PlanOptions& options) {
  const std::uint64_t cost_id = cost.fingerprint();
  std::uint64_t h = hash_value(src);
  detail::hash_combine(h, hash_value(dst.sharding()));
  detail::hash_combine(h, cost_id);
  detail::hash_combine(h, static_cast<std::uint64_t>(options.edges ? static_cast<int>(*options.edges) + 1 : 0) * 2 +
                              (options.runner_up ? 1 : 0));
  detail::hash_combine(h, static_cast<std::uint64_t>(options.max_peak_bytes.value_or(-1)));
  detail::hash_combine(h, static_cast<std::uint64_t>(options.max_states));
  detail::hash_combine(h, static_cast<std::uint64_t>(options.max_search_bytes));
  const KeyRef probe{src, dst, cost_id, options, static_cast<std::size_t>(h)};
  // the target's mesh/shape/dtype must match the source's for the key to describe the request
  const bool same_frame = src.mesh() == dst.mesh() && src.shape() == dst.shape() && src.dtype() == dst.dtype();
  if (same_frame) {
    std::lock_guard lock(mu_);
    if (auto it = index_.find(probe); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      ++stats_.hits;
      return it->second->second;
    }
    ++stats_.misses;
  }
  // Plan outside the lock; errors (including mismatched frames) propagate uncached.
  auto plan = std::make_shared<const Plan>(plan_redistribution(src, dst, cost, options));
  std::lock_guard lock(mu_);
  if (auto it = index_.find(probe); it != index_.end()) {  // another thread planned it meanwhile
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->second;
  }
  lru_.emplace_front(Key{src.mesh(), src.shape(), src.dtype(), src.sharding(), dst.sharding(), cost_id, options, probe.hash},
                     plan);
  index_.emplace(lru_.front().first, lru_.begin());
  while (lru_.size() > capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
    ++stats_.evictions;
  }
  stats_.size = lru_.size();
  return plan;
}

PlanCacheStats PlanCache::stats() const {
  std::lock_guard lock(mu_);
  PlanCacheStats s = stats_;
  s.size = lru_.size();
  return s;
}

void PlanCache::clear() {
  std::lock_guard lock(mu_);
  lru_.clear();
  index_.clear();
  stats_.size = 0;
}

}  // namespace dtensor
