#pragma once
// How `tune validate` times its candidates: rounds until every median is known (src/tune/tune_rounds.cpp).
#include <cstddef>
#include <span>
#include <vector>

namespace dtensor::tune {

// The measurement protocol: rounds in which every candidate runs once, in an order rotated by
// the round, until each median's 95% confidence interval (distribution-free, from order
// statistics) lies within `ci_target` of the median, or `max_rounds`. Every rank feeds the same
// times (the slowest rank's), so every rank stops at the same round.
struct RoundOptions {
  int min_rounds = 8;   // the fewest that give a 95% interval
  int max_rounds = 50;
  double ci_target = 0.05;
  // The clock gives every round the same times (a simulation: SimGrid's SMPI, a virtual clock
  // without noise): min_rounds may then be from 1, and the rounds have converged once min_rounds
  // are in (the interval is the point). On a real clock rounds are what bound the median.
  bool deterministic = false;
};
struct TimeSummary {
  double median_us = 0, q1_us = 0, q3_us = 0;  // interquartile range
  double ci_low_us = 0, ci_high_us = 0;        // 95% interval of the median
  int rounds = 0;
};
class Rounds {
 public:
  // InputError for no candidates, min_rounds below 8 (below 1 on a deterministic clock), max_rounds below min_rounds or above
  // 100000, or a ci_target outside (0, 1).
  Rounds(std::size_t candidates, RoundOptions options = {});
  // The candidates' run order in the coming round: 0..n-1 rotated left by the round number.
  [[nodiscard]] std::vector<std::size_t> order() const;
  // One round's times, candidate by candidate (index order). InputError for the wrong count or
  // a time that is not finite and non-negative.
  void add(std::span<const double> slowest_us);
  [[nodiscard]] bool done() const;
  [[nodiscard]] bool converged() const;  // every interval within the target
  [[nodiscard]] int rounds() const noexcept { return static_cast<int>(times_.empty() ? 0 : times_[0].size()); }
  [[nodiscard]] TimeSummary summary(std::size_t candidate) const;

 private:
  RoundOptions o_;
  std::vector<std::vector<double>> times_;
};

}  // namespace dtensor::tune
