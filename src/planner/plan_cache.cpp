#include "dtensor/plan_cache.hpp"

#include "placement/hash.hpp"
#include "dtensor/error.hpp"

#include <list>
#include <mutex>
#include <unordered_map>

namespace dtensor {

struct PlanCache::Impl {
  struct Key {
    Mesh mesh;
    std::vector<std::int64_t> shape;
    DType dtype;
    Sharding src, dst;
    std::uint64_t cost;
    PlanOptions options;
    std::size_t hash;
  };
  // Lookups probe with references to the caller's values: no copies on a hit.
  struct KeyRef {
    const Layout& src;
    const Layout& dst;
    std::uint64_t cost;
    const PlanOptions& options;
    std::size_t hash;
  };
  struct KeyHash {
    using is_transparent = void;
    std::size_t operator()(const Key& k) const noexcept { return k.hash; }
    std::size_t operator()(const KeyRef& k) const noexcept { return k.hash; }
  };
  struct KeyEq {
    using is_transparent = void;
    bool operator()(const Key& a, const Key& b) const {
      return a.hash == b.hash && a.dtype == b.dtype && a.cost == b.cost && a.options == b.options && a.shape == b.shape &&
             a.src == b.src && a.dst == b.dst && a.mesh == b.mesh;
    }
    bool operator()(const KeyRef& a, const Key& b) const {
      return a.hash == b.hash && a.src.dtype() == b.dtype && a.cost == b.cost && a.options == b.options &&
             a.src.shape() == b.shape && a.src.sharding() == b.src && a.dst.sharding() == b.dst && a.src.mesh() == b.mesh;
    }
    bool operator()(const Key& a, const KeyRef& b) const { return (*this)(b, a); }
  };
  using Entry = std::pair<Key, std::shared_ptr<const Plan>>;
  mutable std::mutex mu;
  std::list<Entry> lru;  // front = most recent
  std::unordered_map<Key, std::list<Entry>::iterator, KeyHash, KeyEq> index;
  PlanCacheStats stats;
};

PlanCache::PlanCache(std::size_t capacity) : capacity_(capacity), impl_(std::make_unique<Impl>()) {
  if (capacity_ == 0) throw InputError("plan cache capacity must be at least 1");
}
PlanCache::~PlanCache() = default;

std::shared_ptr<const Plan> PlanCache::get_or_plan(const Layout& src, const Layout& dst, const CostModel& cost,
                                                   const PlanOptions& options) {
  Impl& I = *impl_;
  const std::uint64_t cost_id = cost.fingerprint();
  std::uint64_t h = hash_value(src);
  detail::hash_combine(h, hash_value(dst.sharding()));
  detail::hash_combine(h, cost_id);
  detail::hash_combine(h, static_cast<std::uint64_t>(options.edges ? static_cast<int>(*options.edges) + 1 : 0) * 2 +
                              (options.runner_up ? 1 : 0));
  detail::hash_combine(h, static_cast<std::uint64_t>(options.max_peak_bytes.value_or(-1)));
  detail::hash_combine(h, static_cast<std::uint64_t>(options.max_states));
  detail::hash_combine(h, static_cast<std::uint64_t>(options.max_search_bytes));
  const Impl::KeyRef probe{src, dst, cost_id, options, static_cast<std::size_t>(h)};
  // the target's mesh/shape/dtype must match the source's for the key to describe the request
  const bool same_frame = src.mesh() == dst.mesh() && src.shape() == dst.shape() && src.dtype() == dst.dtype();
  if (same_frame) {
    std::lock_guard lock(I.mu);
    if (auto it = I.index.find(probe); it != I.index.end()) {
      if (it->second != I.lru.begin()) I.lru.splice(I.lru.begin(), I.lru, it->second);
      ++I.stats.hits;
      return it->second->second;
    }
    ++I.stats.misses;
  }
  // Plan outside the lock; errors (including mismatched frames) propagate uncached.
  auto plan = std::make_shared<const Plan>(plan_redistribution(src, dst, cost, options));
  std::lock_guard lock(I.mu);
  if (auto it = I.index.find(probe); it != I.index.end()) {  // another thread planned it meanwhile
    I.lru.splice(I.lru.begin(), I.lru, it->second);
    return it->second->second;
  }
  I.lru.emplace_front(Impl::Key{src.mesh(), src.shape(), src.dtype(), src.sharding(), dst.sharding(), cost_id, options, probe.hash},
                     plan);
  I.index.emplace(I.lru.front().first, I.lru.begin());
  while (I.lru.size() > capacity_) {
    I.index.erase(I.lru.back().first);
    I.lru.pop_back();
    ++I.stats.evictions;
  }
  I.stats.size = I.lru.size();
  return plan;
}

PlanCacheStats PlanCache::stats() const {
  const Impl& I = *impl_;
  std::lock_guard lock(I.mu);
  PlanCacheStats s = I.stats;
  s.size = I.lru.size();
  return s;
}

void PlanCache::clear() {
  Impl& I = *impl_;
  std::lock_guard lock(I.mu);
  I.lru.clear();
  I.index.clear();
  I.stats.size = 0;
}

}  // namespace dtensor
