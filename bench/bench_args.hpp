#pragma once
// What the MPI benchmarks share: the median of timings and a strict count argument.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "dtensor/error.hpp"

namespace bench {

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// argv[i + 1] as a count from 1 to `most` (i is advanced past it), or one InputError naming the flag and its text.
inline long count_arg(int argc, char** argv, int& i, const char* flag, long most) {
  if (i + 1 >= argc) throw dtensor::InputError(std::string(flag) + " needs a value");
  const std::string t = argv[++i];
  char* end = nullptr;
  const long v = std::strtol(t.c_str(), &end, 10);
  if (t.empty() || *end != '\0' || v < 1 || v > most)
    throw dtensor::InputError(std::string(flag) + " " + dtensor::quote_input(t) + ": expected a count from 1 to " + std::to_string(most));
  return v;
}

}  // namespace bench
