#pragma once
// The arguments of the device kernels, as both the NCCL backend and the device memory of the
// in-process backend build them: an element's fill pattern and a strided copy's geometry.
#include <cstdint>
#include <cstring>
#include <span>

#include "dtensor/error.hpp"
#include "dtensor/scalar.hpp"
#include "strided_copy.hpp"

namespace dtensor::cuda {

// The little-endian bits of `value` stored as one element of `dtype`.
inline std::uint64_t pattern_of(DType dtype, double value) {
  unsigned char buf[8] = {};
  store_element(dtype, buf, 0, value);
  std::uint64_t p = 0;
  std::memcpy(&p, buf, sizeof p);
  return p;
}

inline StridedCopy strided(std::int64_t run_bytes, std::span<const std::int64_t> count, std::span<const std::int64_t> ds,
                           std::span<const std::int64_t> ss) {
  StridedCopy c;
  if (count.size() > static_cast<std::size_t>(kMaxDims)) throw InputError("strided copy has too many dims");
  c.run_bytes = run_bytes;
  c.ndim = static_cast<int>(count.size());
  for (std::size_t k = 0; k < count.size(); ++k) {
    c.count[k] = count[k];
    c.dst_stride[k] = ds[k];
    c.src_stride[k] = ss[k];
  }
  return c;
}

}  // namespace dtensor::cuda
