#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>

#include "dtensor/error.hpp"

// The message of the dtensor::Error `f` throws, or "<no error>".
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const dtensor::Error& e) {
    return e.what();
  }
  return "<no error>";
}

// Every `stride`-th case of an exhaustive set (1 = all of it): sanitizer builds sample with
// DTENSOR_EXHAUSTIVE_STRIDE.
inline std::int64_t sample_stride() {
  if (const char* s = std::getenv("DTENSOR_EXHAUSTIVE_STRIDE")) return std::max<std::int64_t>(1, std::atoll(s));
  return 1;
}
