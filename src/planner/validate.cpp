// A plan is untrusted input (it may come from JSON, a file, another process): before anything
// runs it, every step is re-derived from the redistribution graph and the lowering and compared
// field by field. A plan passes only if it is one the planner could have produced: each step an
// edge out of its state (kind, mesh dims in group order, changed tensor dims, target state), the
// states chaining from the source to the target, every buffer record what lower_buffers writes,
// and the workspace what the steps need (or, when the caller allows more, within that bound).
#include <algorithm>

#include "dtensor/error.hpp"
#include "edges.hpp"
#include "lower.hpp"
#include "recently_validated.hpp"

namespace dtensor {
namespace {

std::string dims_str(const std::vector<int>& v) { return fmt::format("[{}]", fmt::join(v, ",")); }

[[noreturn]] void bad(std::size_t k, const Step& st, const char* field, const std::string& what) {
  throw InputError(fmt::format("plan step {} ({} over mesh dims {}): field '{}' {}", k, to_string(st.kind),
                               dims_str(st.mesh_dims), field, what));
}

std::vector<int> changed_dims(const Sharding& from, const Sharding& to) {
  std::vector<int> out;
  for (int d = 0; d < from.tensor_ndim(); ++d)
    if (from.entries(d) != to.entries(d)) out.push_back(d);
  return out;
}

// How many mesh dims a kind's group holds, and whether several are allowed.
void check_group_shape(std::size_t k, const Step& st, int mesh_ndim) {
  const auto& md = st.mesh_dims;
  for (std::size_t i = 0; i < md.size(); ++i) {
    if (md[i] < 0 || md[i] >= mesh_ndim)
      bad(k, st, "mesh_dims", fmt::format("names mesh dim {}, outside the {}-d mesh", md[i], mesh_ndim));
    for (std::size_t j = 0; j < i; ++j)
      if (md[j] == md[i]) bad(k, st, "mesh_dims", fmt::format("lists mesh dim {} twice", md[i]));
  }
  switch (st.kind) {
    case StepKind::relabel:
      if (!md.empty()) bad(k, st, "mesh_dims", "must be empty for a relabel");
      break;
    case StepKind::direct: break;  // the dims its transfers cross: checked against the geometry
    case StepKind::all_to_all:
    case StepKind::local_chunk:
    case StepKind::local_fill:
      if (md.size() != 1) bad(k, st, "mesh_dims", fmt::format("must name exactly one mesh dim for {}", to_string(st.kind)));
      break;
    case StepKind::all_gather:
    case StepKind::reduce_scatter:
    case StepKind::all_reduce:
      if (md.empty()) bad(k, st, "mesh_dims", fmt::format("must name at least one mesh dim for {}", to_string(st.kind)));
      break;
  }
}

}  // namespace

void check_chain(const Plan& plan) {
  const int md = plan.src.mesh().ndim(), td = static_cast<int>(plan.shape().size());
  Sharding cur = plan.src.sharding();
  for (std::size_t k = 0; k < plan.steps.size(); ++k) {
    const Step& st = plan.steps[k];
    for (const auto* s : {&st.from, &st.to})
      if (s->mesh_ndim() != md || s->tensor_ndim() != td)
        bad(k, st, s == &st.from ? "from" : "to",
            fmt::format("{} does not fit a {}-d mesh and a {}-d tensor", s->str(), md, td));
    if (st.from != cur) bad(k, st, "from", fmt::format("is {} but the previous state is {}", st.from.str(), cur.str()));
    cur = st.to;
  }
  if (cur != plan.dst.sharding())
    throw InputError(fmt::format("plan steps end in {} but the target is {}", cur.str(), plan.dst.placements_str()));
}

void validate_plan(const Plan& plan, std::optional<std::int64_t> max_workspace_bytes) {
  const Mesh& mesh = plan.mesh();
  if (plan.dst.mesh() != mesh || plan.dst.shape() != plan.shape() || plan.dst.dtype() != plan.dtype())
    throw InputError(fmt::format("the plan's source {} and target {} differ in mesh, shape or dtype", plan.src.str(),
                                 plan.dst.str()));
  if (plan.shape().size() > 15) throw InputError(fmt::format("tensors of {} dims exceed the executor's 15", plan.shape().size()));
  if (plan.peak_bytes < 0) throw InputError(fmt::format("plan field 'peak_bytes' {} is negative", plan.peak_bytes));
  const std::size_t S = plan.steps.size();
  if (S == 0) {
    if (plan.src.sharding() != plan.dst.sharding())
      throw InputError(fmt::format("plan has no steps but its source {} is not its target {}", plan.src.placements_str(),
                                   plan.dst.placements_str()));
    if (plan.peak_bytes != 0) throw InputError(fmt::format("plan has no steps but 'peak_bytes' is {}, not 0", plan.peak_bytes));
    return;
  }
  const Geometry geo(mesh.shape(), plan.shape(), static_cast<std::int64_t>(itemsize(plan.dtype())));
  std::vector<int> play_dims;  // every tensor dim: a superset of what any cost model plays with
  for (int d = 0; d < static_cast<int>(plan.shape().size()); ++d) play_dims.push_back(d);
  check_chain(plan);
  for (std::size_t k = 0; k < S; ++k) {
    const Step& st = plan.steps[k];
    check_group_shape(k, st, mesh.ndim());
    // The graph as the planner sees it on the way to this step's target, with every edge of
    // every edge set and every tensor dim in play: its edges out of `from` are the steps that
    // can take `from` to `to` (local fills to any Partial and relabels included, so hand-made
    // chains through other states than the planner's are accepted when each step is exact).
    Layout(mesh, plan.shape(), plan.dtype(), st.to).check_runs();  // a state the mesh and shape admit
    const auto kinds = shard_kinds_of(plan.src.sharding(), st.to);
    const EdgeScope scope{mesh, plan.shape(), EdgeSet::all, st.to, play_dims, kinds};
    if (st.tensor_dims != changed_dims(st.from, st.to))
      bad(k, st, "tensor_dims", fmt::format("is {}, but the step changes tensor dims {}", dims_str(st.tensor_dims),
                                            dims_str(changed_dims(st.from, st.to))));
    if (st.kind == StepKind::direct) {
      if (!direct_allowed(scope, st.from))
        bad(k, st, "kind", fmt::format("direct cannot go from {} to {} (Partial on a mesh dim that changes)", st.from.str(),
                                       st.to.str()));
      const auto ds = geo.direct_stats(st.from, st.to);
      std::vector<int> crossed;
      for (int m = 0; m < mesh.ndim(); ++m)
        if (ds.crossed_mesh_dims & (1u << m)) crossed.push_back(m);
      if (st.mesh_dims != crossed)
        bad(k, st, "mesh_dims", fmt::format("must be the mesh dims its transfers cross, {}", dims_str(crossed)));
    } else {
      const bool found = is_edge(scope, st.from, st.kind, st.mesh_dims, st.to);
      if (!found)
        bad(k, st, "kind", fmt::format("{} over mesh dims {} cannot take {} to {}", to_string(st.kind), dims_str(st.mesh_dims),
                                       st.from.str(), st.to.str()));
    }
  }

  // The workspace the steps need, and the lowering's records for it.
  std::int64_t need = 0;
  for (std::size_t k = 0; k < S; ++k) {
    const Step& st = plan.steps[k];
    const auto b = step_buffers(geo, st.kind, st.mesh_dims, st.tensor_dims, st.from, st.to);
    need = std::max(need, step_peak_bytes(geo, b, k == 0, k + 1 == S));
  }
  if (plan.peak_bytes < need)
    throw InputError(fmt::format("plan field 'peak_bytes' {} is below the {} bytes its steps need", plan.peak_bytes, need));
  const std::int64_t limit = max_workspace_bytes.value_or(need);
  if (plan.peak_bytes > limit)
    throw InputError(fmt::format("plan field 'peak_bytes' {} exceeds the workspace bound of {} bytes ({})", plan.peak_bytes,
                                 limit, max_workspace_bytes ? "the caller's limit" : "what its steps need"));
  Plan lowered;
  lowered.src = plan.src;
  lowered.dst = plan.dst;
  lowered.steps = plan.steps;
  lowered.peak_bytes = plan.peak_bytes;
  lower_buffers(lowered);
  for (std::size_t k = 0; k < S; ++k) {
    const StepBuffers& have = plan.steps[k].buffers;
    const StepBuffers& want = lowered.steps[k].buffers;
    const Step& st = plan.steps[k];
    auto cmp = [&](const char* name, std::int64_t h, std::int64_t w) {
      if (h != w) bad(k, st, name, fmt::format("is {}; the lowering of this step gives {}", h, w));
    };
    cmp("buffers.chunk", have.chunk, want.chunk);
    cmp("buffers.zero_copy", have.zero_copy, want.zero_copy);
    cmp("buffers.pad_send", have.pad_send, want.pad_send);
    cmp("buffers.from_offset", have.from_offset, want.from_offset);
    cmp("buffers.to_offset", have.to_offset, want.to_offset);
    cmp("buffers.send_offset", have.send_offset, want.send_offset);
    cmp("buffers.send_elems", have.send_elems, want.send_elems);
    cmp("buffers.recv_offset", have.recv_offset, want.recv_offset);
    cmp("buffers.recv_elems", have.recv_elems, want.recv_elems);
  }
}

void validate_plan_once(const Plan& plan, std::optional<std::int64_t> max_workspace_bytes) {
  static detail::RecentlyValidated<Plan> recent;
  recent.check(plan, max_workspace_bytes, [&] { validate_plan(plan, max_workspace_bytes); });
}

}  // namespace dtensor
