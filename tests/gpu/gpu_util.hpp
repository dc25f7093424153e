#pragma once
// Helpers for the GPU tests and benchmarks: device buffers per rank, and single-step plans
// chosen from the redistribution graph (so a 1-rank mesh still issues real NCCL collectives).
#include <cuda_runtime.h>

#include <stdexcept>
#include <vector>

#include "dtensor/executor.hpp"
#include "dtensor/explore.hpp"
#include "dtensor/planner.hpp"

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

// The plan through `states`, step k being the graph's edge of kind `kinds[k]` (the planner
// would often take a cheaper or free path, e.g. relabel on a 1-rank mesh).
inline Plan chain(const char* mesh, std::vector<std::int64_t> shape, DType dt, const std::vector<const char*>& states,
                  const std::vector<StepKind>& kinds) {
  const Mesh m = Mesh::parse(mesh);
  Plan p;
  p.cost_model = "default";
  p.src = Layout::parse(m, shape, dt, states.front());
  p.dst = Layout::parse(m, shape, dt, states.back());
  for (std::size_t k = 0; k + 1 < states.size(); ++k) {
    const Layout a = Layout::parse(m, shape, dt, states[k]), b = Layout::parse(m, shape, dt, states[k + 1]);
    const RedistributionGraph g(a, b, CostModel::default_model(), EdgeSet::all);
    bool found = false;
    for (const auto& e : g.edges(a.sharding()))
      if (e.to == b.sharding() && e.step.kind == kinds[k]) {
        p.steps.push_back(e.step);
        p.total_cost_us += e.step.cost_us;
        found = true;
        break;
      }
    if (!found) throw std::runtime_error("no such step");
  }
  // the workspace: generous (the executor checks it against every step's need)
  for (const auto& s : p.steps) p.peak_bytes = std::max(p.peak_bytes, s.peak_bytes);
  std::int64_t elems = 1;
  for (auto x : shape) elems *= x;
  p.peak_bytes = std::max<std::int64_t>(p.peak_bytes, 4 * elems * static_cast<std::int64_t>(itemsize(dt)) + 4096);
  lower_buffers(p);
  return p;
}

}  // namespace gpu_util
