#pragma once
#include <cstdint>
#include <vector>

#include "dtensor/mesh.hpp"
#include "placement/odometer.hpp"

namespace dtensor::detail {

// Coordinates of the members of `c`'s group over mesh dims `dims` (every other coordinate as in
// `c`), in member order: row-major over `dims` in the listed order, as collectives rank them.
inline std::vector<std::vector<std::int64_t>> group_members(const Mesh& mesh, const std::vector<std::int64_t>& c,
                                                            const std::vector<int>& dims) {
  std::vector<std::vector<std::int64_t>> out;
  std::vector<std::int64_t> cur = c;
  for (int m : dims) cur[static_cast<std::size_t>(m)] = 0;
  do {
    out.push_back(cur);
  } while (next_digits(
      dims.size(), [&](std::size_t k) -> auto& { return cur[static_cast<std::size_t>(dims[k])]; },
      [&](std::size_t k) { return mesh.size(dims[k]); }));
  return out;
}

}  // namespace dtensor::detail
