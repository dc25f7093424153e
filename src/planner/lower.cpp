// Lowering: the planner decides, once per plan, where every state and scratch region of every
// step lives in the workspace; the executor only reads these records.
#include "dtensor/error.hpp"
#include "graph.hpp"

namespace dtensor {

void lower_buffers(Plan& plan) {
  const auto s = static_cast<std::int64_t>(itemsize(plan.dtype()));
  const Geometry geo(plan.mesh().shape(), plan.shape(), s);
  const std::size_t S = plan.steps.size();
  std::vector<std::int64_t> state_max(S + 1, 0);
  for (std::size_t k = 0; k < S; ++k) state_max[k] = geo.numel_stats(plan.steps[k].from).max;
  if (S > 0) state_max[S] = geo.numel_stats(plan.steps[S - 1].to).max;
  const std::int64_t W = plan.peak_bytes;
  // Intermediate states alternate: odd ones at the front of the workspace, even ones at the
  // back, so a step's source and target never overlap; scratch sits between them.
  auto state_offset = [&](std::size_t k) -> std::int64_t {
    if (k == 0 || k == S) return -1;
    if (k % 2 == 1) return 0;
    return W - ws_round(state_max[k] * s);
  };
  for (std::size_t k = 0; k < S; ++k) {
    Step& st = plan.steps[k];
    const auto b = step_buffers(geo, st.kind, st.mesh_dims, st.tensor_dims, st.from, st.to);
    const auto need = step_peak_bytes(geo, b, k == 0, k + 1 == S);
    if (need > W)
      throw InputError(fmt::format("plan's peak_bytes {} is below the {} bytes step {} needs", W, need, k));
    std::int64_t base = 0;
    if (k > 0 && k % 2 == 1) base = ws_round(state_max[k] * s);              // source at the front
    if (k + 1 < S && (k + 1) % 2 == 1) base = ws_round(state_max[k + 1] * s);  // target at the front
    StepBuffers& out = st.buffers;
    out = StepBuffers{};
    out.chunk = b.chunk;
    out.zero_copy = b.zero_copy;
    out.pad_send = b.pad_send;
    out.from_offset = state_offset(k);
    out.to_offset = state_offset(k + 1);
    out.send_offset = base;
    out.send_elems = b.send_elems;
    out.recv_offset = base + ws_round(b.send_elems * s);
    out.recv_elems = b.recv_elems;
  }
}

}  // namespace dtensor
