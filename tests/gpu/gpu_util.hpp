#pragma once
// Helpers for the GPU tests and benchmarks: device buffers per rank, and single-step plans
// chosen from the redistribution graph (so a 1-rank mesh still issues real NCCL collectives).
#include <cuda_runtime.h>

#include <stdexcept>
#include <vector>

#include "dtensor/executor.hpp"
#include "dtensor/explore.hpp"
#include "dtensor/planner.hpp"
#include "../plan_chain.hpp"

namespace gpu_util {
using namespace dtensor;

inline void ck(cudaError_t e) {
  if (e != cudaSuccess) throw std::runtime_error(cudaGetErrorString(e));
}

struct DeviceBuffer {
  std::byte* p = nullptr;
  std::size_t n = 0;
  explicit DeviceBuffer(std::size_t bytes) : n(bytes) {
    if (bytes) ck(cudaMalloc(reinterpret_cast<void**>(&p), bytes));
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : p(o.p), n(o.n) { o.p = nullptr; o.n = 0; }
  DeviceBuffer(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (p) cudaFree(p);
  }
  std::span<std::byte> span() { return {p, n}; }
};

using plan_chain::chain;
using plan_chain::chain_options;

}  // namespace gpu_util
