#pragma once
// Strided box copies for the copy kernel's tests (the GPU kernel on a device, its arithmetic on
// the CPU): each shape (run bytes, counts) at base offsets 0, 1, 2, 4 and 8 bytes (every vector
// width), the output dense row-major and the input dense with the dims in reverse order (an
// all_gather's unpack, an all_to_all's pack).
#include <cstdint>
#include <utility>
#include <vector>

namespace strided_cases {

struct Case {
  std::int64_t run = 0, off = 0, runs = 1, bytes = 0;
  std::vector<std::int64_t> count, dst_stride, src_stride;
};

inline std::vector<Case> cases(const std::vector<std::pair<std::int64_t, std::vector<std::int64_t>>>& shapes) {
  std::vector<Case> out;
  for (const auto& [run, count] : shapes)
    for (const std::int64_t off : {0, 1, 2, 4, 8}) {
      Case c;
      c.run = run;
      c.off = off;
      c.count = count;
      const std::size_t nd = count.size();
      for (auto n : count) c.runs *= n;
      c.bytes = c.runs * run;
      c.dst_stride.resize(nd);
      c.src_stride.resize(nd);
      std::int64_t acc = run;
      for (std::size_t k = nd; k-- > 0;) c.dst_stride[k] = acc, acc *= count[k];
      acc = run;
      for (std::size_t k = 0; k < nd; ++k) c.src_stride[k] = acc, acc *= count[k];
      out.push_back(std::move(c));
    }
  return out;
}

}  // namespace strided_cases
