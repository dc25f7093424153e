#pragma once
// Structural mutations of a plan: the edits an attacker (or a bug) makes to a plan's JSON, each
// coherent enough to get past the JSON reader: step kinds, mesh dims (other, repeated, missing,
// reordered), tensor dims, states, every buffer field, the step order and the workspace.
// Shared by the Catch2 trust test and the structural plan fuzzer.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "dtensor/plan.hpp"

namespace plan_mutations {
using namespace dtensor;

inline std::vector<std::vector<int>> dim_lists(int mesh_ndim) {
  std::vector<std::vector<int>> out{{}};
  for (int a = 0; a < mesh_ndim; ++a) {
    out.push_back({a});
    out.push_back({a, a});
    for (int b = 0; b < mesh_ndim; ++b)
      if (b != a) out.push_back({a, b});
  }
  std::vector<int> all;
  for (int a = 0; a < mesh_ndim; ++a) all.push_back(a);
  out.push_back(all);
  std::reverse(all.begin(), all.end());
  out.push_back(all);
  out.push_back({mesh_ndim});  // out of range (the JSON reader refuses it; the executor must too)
  return out;
}

inline std::vector<Sharding> state_pool(const Plan& p) {
  std::vector<Sharding> pool{p.src.sharding(), p.dst.sharding()};
  for (const auto& s : p.steps) {
    pool.push_back(s.from);
    pool.push_back(s.to);
  }
  const int md = p.mesh().ndim();
  const std::size_t base = pool.size();
  for (std::size_t i = 0; i < base; ++i)
    for (int m = 0; m < md; ++m) {
      pool.push_back(pool[i].with_replicate(m));
      pool.push_back(pool[i].with_partial(m, ReduceOp::sum));
    }
  std::vector<Sharding> out;
  for (auto& s : pool)
    if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  return out;
}

// Every single mutation of `p` (deterministic order). Some may leave the plan as it was or turn
// it into another valid plan: those must still run to the right result.
inline std::vector<Plan> all(const Plan& p) {
  std::vector<Plan> out;
  const std::size_t S = p.steps.size();
  const int md = p.mesh().ndim();
  const auto pool = state_pool(p);
  constexpr StepKind kinds[] = {StepKind::all_gather, StepKind::reduce_scatter, StepKind::all_reduce, StepKind::all_to_all,
                                StepKind::local_chunk, StepKind::local_fill,     StepKind::direct,     StepKind::relabel};
  for (std::size_t k = 0; k < S; ++k) {
    auto edit = [&](auto&& f) {
      Plan q = p;
      f(q.steps[k]);
      out.push_back(std::move(q));
    };
    for (StepKind kind : kinds)
      if (kind != p.steps[k].kind) edit([&](Step& s) { s.kind = kind; });
    for (const auto& dims : dim_lists(md))
      if (dims != p.steps[k].mesh_dims) edit([&](Step& s) { s.mesh_dims = dims; });
    for (StepKind kind : kinds)  // kind and group changed together
      for (int m = 0; m < md; ++m) edit([&](Step& s) { s.kind = kind; s.mesh_dims = {m}; });
    for (const std::vector<int>& td : {std::vector<int>{}, {0}, {1}, {0, 1}})
      if (td != p.steps[k].tensor_dims && static_cast<int>(td.size()) <= p.src.ndim() &&
          std::all_of(td.begin(), td.end(), [&](int d) { return d < p.src.ndim(); }))
        edit([&](Step& s) { s.tensor_dims = td; });
    for (const auto& st : pool) {
      if (st != p.steps[k].to) edit([&](Step& s) { s.to = st; });
      if (st != p.steps[k].from) edit([&](Step& s) { s.from = st; });
      if (st != p.steps[k].to && k + 1 < S) {  // a coherent edit: this step's target and the next's source
        Plan q = p;
        q.steps[k].to = st;
        q.steps[k + 1].from = st;
        out.push_back(std::move(q));
      }
    }
    edit([](Step& s) { s.buffers.zero_copy = !s.buffers.zero_copy; });
    edit([](Step& s) { s.buffers.pad_send = !s.buffers.pad_send; });
    using F = std::int64_t StepBuffers::*;
    for (F f : {&StepBuffers::chunk, &StepBuffers::from_offset, &StepBuffers::to_offset, &StepBuffers::send_offset,
                &StepBuffers::send_elems, &StepBuffers::recv_offset, &StepBuffers::recv_elems})
      for (std::int64_t d : {std::int64_t{-1}, std::int64_t{1}, std::int64_t{256}, std::int64_t{-256}})
        edit([&](Step& s) { s.buffers.*f += d; });
    edit([](Step& s) { s.buffers.chunk *= 2; });
    edit([](Step& s) { s.buffers.send_elems = s.buffers.recv_elems = 0; });
    {
      Plan q = p;  // step removed
      q.steps.erase(q.steps.begin() + static_cast<std::ptrdiff_t>(k));
      out.push_back(std::move(q));
      q = p;  // step repeated
      q.steps.insert(q.steps.begin() + static_cast<std::ptrdiff_t>(k), p.steps[k]);
      out.push_back(std::move(q));
    }
    if (k + 1 < S) {
      Plan q = p;
      std::swap(q.steps[k], q.steps[k + 1]);
      out.push_back(std::move(q));
    }
  }
  for (std::int64_t d : {std::int64_t{-256}, std::int64_t{256}, std::int64_t{1} << 30}) {
    Plan q = p;
    q.peak_bytes += d;
    out.push_back(std::move(q));
  }
  {
    Plan q = p;  // the steps of another plan: none
    q.steps.clear();
    q.peak_bytes = 0;
    out.push_back(std::move(q));
  }
  return out;
}

}  // namespace plan_mutations
