// `tune validate`'s measurement protocol: rotated rounds until every median's 95% interval is
// within the target (order statistics: no assumption on how the times are distributed).
#include "dtensor/tune_rounds.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "dtensor/error.hpp"
#include "quantile.hpp"

namespace dtensor::tune {
namespace {

using detail::quantile;

// The 1-based ranks (j, k) of the order statistics bounding the median with 95% confidence:
// j = floor(n/2 - 0.98 sqrt(n)), k = ceil(n/2 + 1 + 0.98 sqrt(n)) (the normal approximation of
// the binomial(n, 1/2)); (0, 0) where n is too small for them to lie inside the sample.
std::pair<std::size_t, std::size_t> median_interval(std::size_t n) {
  const double rn = std::sqrt(static_cast<double>(n)), half = static_cast<double>(n) / 2;
  const double j = std::floor(half - 0.98 * rn), k = std::ceil(half + 1 + 0.98 * rn);
  if (j < 1 || k > static_cast<double>(n)) return {0, 0};
  return {static_cast<std::size_t>(j), static_cast<std::size_t>(k)};
}

}  // namespace

Rounds::Rounds(std::size_t candidates, RoundOptions o) : o_(o) {
  if (candidates == 0) throw InputError("validate: a case needs at least one plan to time");
  if (o.deterministic && o.min_rounds < 1)
    throw InputError(fmt::format("min rounds {} is below 1", o.min_rounds));
  if (!o.deterministic && o.min_rounds < 8)
    throw InputError(fmt::format("min rounds {} is below 8, the fewest that bound a median with 95% confidence (fewer only "
                                 "where the clock is deterministic: a simulation)", o.min_rounds));
  if (o.max_rounds < o.min_rounds || o.max_rounds > 100000)
    throw InputError(fmt::format("max rounds {} must be from min rounds ({}) to 100000", o.max_rounds, o.min_rounds));
  if (!(o.ci_target > 0 && o.ci_target < 1))
    throw InputError(fmt::format("the confidence target {} must be in (0, 1)", o.ci_target));
  times_.resize(candidates);
}

std::vector<std::size_t> Rounds::order() const {
  const std::size_t n = times_.size(), r = static_cast<std::size_t>(rounds()) % n;
  std::vector<std::size_t> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = (r + i) % n;
  return out;
}

void Rounds::add(std::span<const double> slowest_us) {
  if (slowest_us.size() != times_.size())
    throw InputError(fmt::format("a round of {} times for {} plans", slowest_us.size(), times_.size()));
  for (double t : slowest_us)
    if (!std::isfinite(t) || t < 0) throw InputError(fmt::format("a measured time of {} us", t));
  for (std::size_t i = 0; i < times_.size(); ++i) times_[i].push_back(slowest_us[i]);
}

TimeSummary Rounds::summary(std::size_t candidate) const {
  TimeSummary s;
  auto v = times_.at(candidate);
  s.rounds = static_cast<int>(v.size());
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.median_us = quantile(v, 0.5);
  s.q1_us = quantile(v, 0.25);
  s.q3_us = quantile(v, 0.75);
  const auto [j, k] = median_interval(v.size());
  s.ci_low_us = j == 0 ? v.front() : v[j - 1];
  s.ci_high_us = k == 0 ? v.back() : v[k - 1];
  return s;
}

bool Rounds::converged() const {
  if (o_.deterministic) return rounds() >= o_.min_rounds;  // every round the same: the point is the median
  if (rounds() < o_.min_rounds || median_interval(static_cast<std::size_t>(rounds())).first == 0) return false;
  for (std::size_t i = 0; i < times_.size(); ++i) {
    const auto s = summary(i);
    const double bound = o_.ci_target * s.median_us;
    if (s.median_us - s.ci_low_us > bound || s.ci_high_us - s.median_us > bound) return false;
  }
  return true;
}

bool Rounds::done() const { return rounds() >= o_.max_rounds || converged(); }

}  // namespace dtensor::tune
