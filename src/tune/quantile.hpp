#pragma once
// Order statistics shared by the tune protocols (tune_rounds.cpp, tune_storage.cpp).
#include <algorithm>
#include <cmath>
#include <vector>

namespace dtensor::tune::detail {

// Linear interpolation between order statistics (the "type 7" quantile numpy and R default to)
// of a sorted, non-empty sample.
inline double quantile(const std::vector<double>& sorted, double q) {
  const double h = (static_cast<double>(sorted.size()) - 1) * q;
  const auto lo = static_cast<std::size_t>(std::floor(h));
  const auto hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (h - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

}  // namespace dtensor::tune::detail
