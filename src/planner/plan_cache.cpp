#include "dtensor/plan_cache.hpp"

#include "dtensor/batch_plan.hpp"
#include "dtensor/error.hpp"
#include "placement/hash.hpp"
#include "planner/lru.hpp"

#include <algorithm>

namespace dtensor {
namespace {

// The cost model's fingerprint and every option into a cache key's hash.
void combine_request(std::uint64_t& h, std::uint64_t cost_id, const PlanOptions& options) {
  detail::hash_combine(h, cost_id);
  detail::hash_combine(h, static_cast<std::uint64_t>(options.edges ? static_cast<int>(*options.edges) + 1 : 0) * 2 +
                              (options.runner_up ? 1 : 0));
  detail::hash_combine(h, static_cast<std::uint64_t>(options.max_peak_bytes.value_or(-1)));
  detail::hash_combine(h, static_cast<std::uint64_t>(options.max_states));
  detail::hash_combine(h, static_cast<std::uint64_t>(options.max_search_bytes));
}

}  // namespace

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
  explicit Impl(std::size_t capacity) : lru(capacity) {}
  detail::Lru<Key, Plan, detail::StoredHash, KeyEq> lru;
};

PlanCache::PlanCache(std::size_t capacity)
    : capacity_(capacity), impl_(capacity ? std::make_unique<Impl>(capacity) : nullptr) {
  if (capacity_ == 0) throw InputError("plan cache capacity must be at least 1");
}
PlanCache::~PlanCache() = default;

namespace {
std::uint64_t request_hash(const Layout& src, const Layout& dst, std::uint64_t cost_id, const PlanOptions& options) {
  std::uint64_t h = hash_value(src);
  detail::hash_combine(h, hash_value(dst.sharding()));
  combine_request(h, cost_id, options);
  return h;
}
// the target's mesh/shape/dtype must match the source's for the key to describe the request
bool same_frame(const Layout& src, const Layout& dst) {
  return src.mesh() == dst.mesh() && src.shape() == dst.shape() && src.dtype() == dst.dtype();
}
}  // namespace

std::shared_ptr<const Plan> PlanCache::get_or_plan(const Layout& src, const Layout& dst, const CostModel& cost,
                                                   const PlanOptions& options) {
  Impl& I = *impl_;
  const std::uint64_t cost_id = cost.fingerprint();
  const Impl::KeyRef probe{src, dst, cost_id, options, static_cast<std::size_t>(request_hash(src, dst, cost_id, options))};
  if (same_frame(src, dst))
    if (auto hit = I.lru.find(probe)) return hit;
  // Plan outside the lock; errors (including mismatched frames) propagate uncached.
  auto plan = std::make_shared<const Plan>(plan_redistribution(src, dst, cost, options));
  return I.lru.insert(
      probe,
      [&] { return Impl::Key{src.mesh(), src.shape(), src.dtype(), src.sharding(), dst.sharding(), cost_id, options, probe.hash}; },
      std::move(plan));
}

std::shared_ptr<const Plan> PlanCache::peek(const Layout& src, const Layout& dst, const CostModel& cost,
                                            const PlanOptions& options) const {
  if (!same_frame(src, dst)) return nullptr;
  const std::uint64_t cost_id = cost.fingerprint();
  return impl_->lru.peek(Impl::KeyRef{src, dst, cost_id, options, static_cast<std::size_t>(request_hash(src, dst, cost_id, options))});
}

PlanCacheStats PlanCache::stats() const { return impl_->lru.stats(); }
void PlanCache::clear() { impl_->lru.clear(); }

// ---------------------------------------------------------------- batches

struct BatchPlanCache::Impl {
  using Pairs = std::span<const std::pair<Layout, Layout>>;
  struct Key {
    std::vector<std::pair<Layout, Layout>> pairs;
    std::uint64_t cost;
    PlanOptions options;
    std::size_t hash;
  };
  struct KeyRef {
    Pairs pairs;
    std::uint64_t cost;
    const PlanOptions& options;
    std::size_t hash;
  };
  static bool same(Pairs a, Pairs b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }
  struct KeyEq {  // Key or KeyRef on either side: the pairs compared as spans
    using is_transparent = void;
    template <class A, class B>
    bool operator()(const A& a, const B& b) const {
      return a.hash == b.hash && a.cost == b.cost && a.options == b.options && same(a.pairs, b.pairs);
    }
  };
  explicit Impl(std::size_t capacity) : lru(capacity) {}
  detail::Lru<Key, BatchPlan, detail::StoredHash, KeyEq> lru;
};

BatchPlanCache::BatchPlanCache(std::size_t capacity)
    : capacity_(capacity), impl_(capacity ? std::make_unique<Impl>(capacity) : nullptr) {
  if (capacity_ == 0) throw InputError("batch plan cache capacity must be at least 1");
}
BatchPlanCache::~BatchPlanCache() = default;

std::shared_ptr<const BatchPlan> BatchPlanCache::get_or_plan(std::span<const std::pair<Layout, Layout>> pairs,
                                                             const CostModel& cost, const PlanOptions& options) {
  Impl& I = *impl_;
  const std::uint64_t cost_id = cost.fingerprint();
  std::uint64_t h = pairs.size();
  if (!pairs.empty()) detail::hash_combine(h, hash_value(pairs.front().first.mesh()));  // plan_batch: one mesh
  for (const auto& [src, dst] : pairs) {
    detail::hash_combine(h, hash_value(src.sharding()));
    detail::hash_combine(h, hash_value(dst.sharding()));
    for (auto x : src.shape()) detail::hash_combine(h, static_cast<std::uint64_t>(x));
    detail::hash_combine(h, static_cast<std::uint64_t>(src.dtype()));
  }
  combine_request(h, cost_id, options);
  const Impl::KeyRef probe{pairs, cost_id, options, static_cast<std::size_t>(h)};
  if (auto hit = I.lru.find(probe)) return hit;
  // Plan outside the lock; a batch plan_batch refuses is not cached.
  auto batch = std::make_shared<const BatchPlan>(plan_batch(pairs, cost, options));
  return I.lru.insert(
      probe, [&] { return Impl::Key{{pairs.begin(), pairs.end()}, cost_id, options, probe.hash}; }, std::move(batch));
}

PlanCacheStats BatchPlanCache::stats() const { return impl_->lru.stats(); }
void BatchPlanCache::clear() { impl_->lru.clear(); }

}  // namespace dtensor
