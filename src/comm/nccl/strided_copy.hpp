#pragma once
// Kernel arguments without CUDA types: a strided box copy as the device kernel takes it
// (kernels.cu) and the CPU stand-in runs it, and the most members a narrow-float reduction takes.
#include <cstdint>

namespace dtensor::cuda {

constexpr int kMaxDims = 16;
constexpr int kMaxMembers = 64;
struct StridedCopy {
  std::int64_t run_bytes = 0;
  int ndim = 0;
  std::int64_t count[kMaxDims] = {};
  std::int64_t dst_stride[kMaxDims] = {};
  std::int64_t src_stride[kMaxDims] = {};
};

}  // namespace dtensor::cuda
