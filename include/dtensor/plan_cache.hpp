#pragma once
#include <cstdint>
#include <memory>

#include "dtensor/planner.hpp"

namespace dtensor {

struct PlanCacheStats {
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;
  std::uint64_t evictions = 0;
  std::size_t size = 0;
};

// Bounded, thread-safe LRU of plans keyed by canonical immutable values: mesh, shape, dtype,
// both shardings, the cost model's fingerprint and the options. Planning happens outside the
// lock, so a slow miss never blocks hits.
class PlanCache {
 public:
  explicit PlanCache(std::size_t capacity = 1024);
  [[nodiscard]] std::shared_ptr<const Plan> get_or_plan(const Layout& src, const Layout& dst, const CostModel& cost,
                                                        const PlanOptions& options = {});
  // The cached plan of this request, or nullptr: plans nothing, counts no hit or miss and leaves
  // the eviction order as it is.
  [[nodiscard]] std::shared_ptr<const Plan> peek(const Layout& src, const Layout& dst, const CostModel& cost,
                                                 const PlanOptions& options = {}) const;
  [[nodiscard]] PlanCacheStats stats() const;
  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
  void clear();

  ~PlanCache();
  PlanCache(const PlanCache&) = delete;
  PlanCache& operator=(const PlanCache&) = delete;

 private:
  struct Impl;  // keys, LRU list, index and mutex
  std::size_t capacity_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dtensor
