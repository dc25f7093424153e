#pragma once
#include <cstddef>

namespace dtensor::detail {

// One step of an odometer over `n` digits, digit k running over [0, limit(k)) with the last digit
// turning fastest (row-major order). `digit(k)` gives a reference to digit k. Returns false, with
// every digit back at 0, once every combination has been visited. Callers that want the first
// digit fastest number their digits backwards.
template <class Digit, class Limit>
[[nodiscard]] bool next_digits(std::size_t n, Digit&& digit, Limit&& limit) {
  for (std::size_t k = n; k-- > 0;) {
    auto& x = digit(k);
    if (++x < limit(k)) return true;
    x = 0;
  }
  return false;
}

}  // namespace dtensor::detail
