#pragma once
// Device kernels of the NCCL backend: strided box copies (pack/unpack/pad/reorder), fills with
// an element's bit pattern (padding, the exact Replicate -> Partial identity), and element-wise
// reductions for the device-simulated backend. All launch on the given stream; none allocates.
#include <cuda_runtime.h>

#include <cstdint>

#include "strided_copy.hpp"

namespace dtensor::cuda {

cudaError_t launch_copy_strided(void* dst, const void* src, const StridedCopy& c, cudaStream_t stream);
// Fills `count` elements of `elem_bytes` bytes with `pattern` (little-endian element bits).
cudaError_t launch_fill(void* dst, std::uint64_t pattern, int elem_bytes, std::int64_t count, cudaStream_t stream);
// acc = op(acc, x) on `count` elements; dtype/op are dtensor's enum values. avg accumulates.
cudaError_t launch_reduce(int dtype, int op, void* acc, const void* x, std::int64_t count, cudaStream_t stream);
cudaError_t launch_average(int dtype, void* acc, std::int64_t count, std::int64_t members, cudaStream_t stream);
// Narrow floats (bf16, f16, fp8): out = the reduction of n members (n <= kMaxMembers) widened to
// double, divided once for avg, rounded once: the CPU executor's bits (reduce_math.hpp).
struct Members {
  const void* p[kMaxMembers] = {};
};
cudaError_t launch_reduce_members(int dtype, int op, void* out, const Members& in, int n, std::int64_t count,
                                  cudaStream_t stream);

}  // namespace dtensor::cuda
