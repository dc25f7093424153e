#pragma once
// Kernel arguments without CUDA types: a strided box copy as the device kernel takes it
// (kernels.cu) and the CPU stand-in runs it, and the most members a narrow-float reduction takes.
// The copy kernel's arithmetic (vector width, index width, launch size, a vector's offsets) is
// here too, as plain functions the kernel calls and the CPU tests check against the host copy.
#include <algorithm>
#include <cstdint>

#if defined(__CUDACC__)
#define DTENSOR_HOST_DEVICE __host__ __device__
#else
#define DTENSOR_HOST_DEVICE
#endif

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

// The copy kernel moves one vector of this many bytes (16, 8, 4, 2 or 1) per index: the widest
// that divides the run, every stride and both base addresses.
inline int copy_vector_bytes(const StridedCopy& c, std::uintptr_t dst, std::uintptr_t src) {
  std::uint64_t align = static_cast<std::uint64_t>(c.run_bytes) | dst | src;
  for (int k = 0; k < c.ndim; ++k)
    align |= static_cast<std::uint64_t>(c.dst_stride[k]) | static_cast<std::uint64_t>(c.src_stride[k]);
  for (int v = 16; v > 1; v /= 2)
    if (align % static_cast<std::uint64_t>(v) == 0) return v;
  return 1;
}

// Threads per block of every kernel, and the most blocks a launch takes (grid-stride loops cover
// the rest): the blocks for `threads` threads.
constexpr int kCopyThreads = 256;
constexpr std::int64_t kCopyMaxBlocks = 65535;
inline std::int64_t launch_blocks(std::int64_t threads) {
  return std::clamp<std::int64_t>((threads + kCopyThreads - 1) / kCopyThreads, 1, kCopyMaxBlocks);
}
// The copy kernel's vectors per thread per round (all loaded before any is stored), and its blocks.
constexpr int kCopyUnroll = 4;
inline std::int64_t copy_blocks(std::int64_t vectors) { return launch_blocks((vectors + kCopyUnroll - 1) / kCopyUnroll); }
// Whether a copy of this many vectors runs with 32-bit indices: every vector index, each round's
// overshoot past the last (at most kCopyUnroll * kCopyMaxBlocks * kCopyThreads < 2^26) and every
// dim's count (at most the vectors) then fit, so the divisions are 32-bit (a GPU emulates a
// 64-bit division in tens of instructions, per vector).
constexpr bool copy_fits_32(std::int64_t vectors) { return vectors <= (std::int64_t{1} << 30); }

// The destination and source byte offsets of vector `x` (of `vec_bytes` bytes; `per_run` of them
// a run), with index type I (std::uint32_t where copy_fits_32, else std::int64_t).
template <typename I>
DTENSOR_HOST_DEVICE inline void copy_vector_offsets(const StridedCopy& c, I x, I per_run, int vec_bytes, std::int64_t& dst,
                                                    std::int64_t& src) {
  I run = x / per_run;
  const I within = x - run * per_run;
  std::int64_t d = 0, s = 0;
  for (int k = c.ndim - 1; k >= 0; --k) {
    const I n = static_cast<I>(c.count[k]);
    const I q = run / n;
    const I i = run - q * n;
    run = q;
    d += static_cast<std::int64_t>(i) * c.dst_stride[k];
    s += static_cast<std::int64_t>(i) * c.src_stride[k];
  }
  const std::int64_t w = static_cast<std::int64_t>(within) * vec_bytes;
  dst = d + w;
  src = s + w;
}

}  // namespace dtensor::cuda
