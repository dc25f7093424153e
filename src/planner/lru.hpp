#pragma once
// The bounded, thread-safe LRU behind the plan caches (PlanCache, BatchPlanCache): values shared
// as shared_ptr<const V>, looked up by a probe that refers to the caller's values (no copies on
// a hit; Hash and Eq are transparent over Key and Probe), the key built only on insertion.
#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "dtensor/plan_cache.hpp"

namespace dtensor::detail {

// Keys and probes that carry their hash as `hash`.
struct StoredHash {
  using is_transparent = void;
  template <class K>
  std::size_t operator()(const K& k) const noexcept {
    return k.hash;
  }
};

template <class Key, class V, class Hash, class Eq>
class Lru {
 public:
  explicit Lru(std::size_t capacity) : capacity_(capacity) {}

  // The cached value for `probe` (made most recent), or nullptr; counts a hit or a miss.
  template <class Probe>
  std::shared_ptr<const V> find(const Probe& probe) {
    std::lock_guard lock(mu_);
    if (auto it = index_.find(probe); it != index_.end()) {
      if (it->second != lru_.begin()) lru_.splice(lru_.begin(), lru_, it->second);
      ++stats_.hits;
      return it->second->second;
    }
    ++stats_.misses;
    return nullptr;
  }
  // The cached value for `probe`, or nullptr; counts nothing and leaves the order as it is.
  template <class Probe>
  std::shared_ptr<const V> peek(const Probe& probe) const {
    std::lock_guard lock(mu_);
    if (auto it = index_.find(probe); it != index_.end()) return it->second->second;
    return nullptr;
  }
  // Inserts `value` under make_key() unless another thread did meanwhile (then returns theirs);
  // evicts the least recent entries past the capacity.
  template <class Probe, class MakeKey>
  std::shared_ptr<const V> insert(const Probe& probe, MakeKey&& make_key, std::shared_ptr<const V> value) {
    std::lock_guard lock(mu_);
    if (auto it = index_.find(probe); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->second;
    }
    lru_.emplace_front(make_key(), std::move(value));
    index_.emplace(lru_.front().first, lru_.begin());
    while (lru_.size() > capacity_) {
      index_.erase(lru_.back().first);
      lru_.pop_back();
      ++stats_.evictions;
    }
    return lru_.front().second;
  }
  [[nodiscard]] PlanCacheStats stats() const {
    std::lock_guard lock(mu_);
    PlanCacheStats s = stats_;
    s.size = lru_.size();
    return s;
  }
  void clear() {
    std::lock_guard lock(mu_);
    lru_.clear();
    index_.clear();
  }

 private:
  using Entry = std::pair<Key, std::shared_ptr<const V>>;
  std::size_t capacity_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // front = most recent
  std::unordered_map<Key, typename std::list<Entry>::iterator, Hash, Eq> index_;
  PlanCacheStats stats_;
};

}  // namespace dtensor::detail
