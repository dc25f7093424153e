#pragma once
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>

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
  [[nodiscard]] PlanCacheStats stats() const;
  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
  void clear();

  struct Key {
    Mesh mesh;
    std::vector<std::int64_t> shape;
    DType dtype;
    Sharding src, dst;
    std::uint64_t cost;
    PlanOptions options;
    std::size_t hash;
    friend bool operator==(const Key& a, const Key& b) {
      return a.hash == b.hash && a.dtype == b.dtype && a.cost == b.cost && a.options == b.options &&
             a.shape == b.shape && a.src == b.src && a.dst == b.dst && a.mesh == b.mesh;
    }
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
    bool operator()(const Key& a, const Key& b) const { return a == b; }
    bool operator()(const KeyRef& a, const Key& b) const {
      return a.hash == b.hash && a.src.dtype() == b.dtype && a.cost == b.cost && a.options == b.options &&
             a.src.shape() == b.shape && a.src.sharding() == b.src && a.dst.sharding() == b.dst && a.src.mesh() == b.mesh;
    }
    bool operator()(const Key& a, const KeyRef& b) const { return (*this)(b, a); }
  };

 private:
  using Entry = std::pair<Key, std::shared_ptr<const Plan>>;
  std::size_t capacity_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // front = most recent
  std::unordered_map<Key, std::list<Entry>::iterator, KeyHash, KeyEq> index_;
  PlanCacheStats stats_;
};

}  // namespace dtensor
