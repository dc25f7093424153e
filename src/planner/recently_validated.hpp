#pragma once
// Plans this process validated recently, kept whole and compared whole: the executors of an
// in-process world's ranks (the threads backend, SMPI's simulated processes) are built for the
// same plan, which is then validated once instead of once per rank. At 1,024 simulated ranks
// that per-rank validation was nearly all of a case's wall time.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <utility>

namespace dtensor::detail {

template <class P>
class RecentlyValidated {
 public:
  // Runs `validate` (which throws for a bad plan) unless a plan equal to `plan` passed it under
  // the same `bound`; a plan that passes is remembered, the oldest of kKeep forgotten.
  template <class F>
  void check(const P& plan, std::optional<std::int64_t> bound, F&& validate) {
    {
      const std::lock_guard lock(mu_);
      for (const auto& [p, b] : recent_)
        if (b == bound && p == plan) return;
    }
    validate();
    const std::lock_guard lock(mu_);
    recent_.emplace_back(plan, bound);
    if (recent_.size() > kKeep) recent_.pop_front();
  }

 private:
  static constexpr std::size_t kKeep = 16;
  std::mutex mu_;
  std::deque<std::pair<P, std::optional<std::int64_t>>> recent_;
};

}  // namespace dtensor::detail
