#pragma once
// Hand-chained plans for the GPU tests and benchmarks (a 1-rank mesh still issues real NCCL
// collectives when each step is the graph edge of a chosen kind). CUDA-free, so the CPU tests
// run the very plans the GPU tests run (test_nccl_cpu.cpp) and CI sees them refused or accepted.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "dtensor/executor.hpp"
#include "dtensor/explore.hpp"
#include "dtensor/planner.hpp"

namespace plan_chain {
using namespace dtensor;

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
  // the workspace: generous (the executor checks it against every step's need; run the plan
  // with chain_options)
  for (const auto& s : p.steps) p.peak_bytes = std::max(p.peak_bytes, s.peak_bytes);
  std::int64_t elems = 1;
  for (auto x : shape) elems *= x;
  p.peak_bytes = std::max<std::int64_t>(p.peak_bytes, 4 * elems * static_cast<std::int64_t>(itemsize(dt)) + 4096);
  lower_buffers(p);
  return p;
}

// The options to run a chain() plan with: its workspace is generous, above what its steps need,
// so the executor's workspace bound (unset: exactly that need) is raised to it.
inline ExecutorOptions chain_options(const Plan& p) {
  ExecutorOptions o;
  o.max_workspace_bytes = p.peak_bytes;
  return o;
}

}  // namespace plan_chain
