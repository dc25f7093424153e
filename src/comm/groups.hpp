#pragma once
#include <cstdint>
#include <vector>

#include "dtensor/mesh.hpp"

namespace dtensor::detail {

// Coordinates of the members of `c`'s group over mesh dims `dims` (every other coordinate as in
// `c`), in member order: row-major over `dims` in the listed order, as collectives rank them.
inline std::vector<std::vector<std::int64_t>> group_members(const Mesh& mesh, const std::vector<std::int64_t>& c,
                                                            const std::vector<int>& dims) {
  std::vector<std::vector<std::int64_t>> out;
  std::vector<std::int64_t> cur = c;
  for (int m : dims) cur[static_cast<std::size_t>(m)] = 0;
  while (true) {
    out.push_back(cur);
    std::size_t k = dims.size();
    bool done = true;
    while (k-- > 0) {
      auto& x = cur[static_cast<std::size_t>(dims[k])];
      if (++x < mesh.size(dims[k])) {
        done = false;
        break;
      }
      x = 0;
    }
    if (done) break;
  }
  return out;
}

}  // namespace dtensor::detail
