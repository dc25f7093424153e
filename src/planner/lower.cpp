// Lowering: the planner decides, once per plan, where every state and scratch region of every
// step lives in the workspace; the executor only reads these records.
#include <algorithm>

#include "dtensor/error.hpp"
#include "lower.hpp"

namespace dtensor {
namespace {

std::int64_t group_size(const std::vector<std::int64_t>& mesh_shape, std::span<const int> mesh_dims) {
  std::int64_t n = 1;
  for (int m : mesh_dims) n *= mesh_shape[static_cast<std::size_t>(m)];
  return n;
}

bool entries_unit_split(const Sharding& s, int d, std::span<const int> mesh_dims) {
  for (const auto& e : s.entries(d))
    if (std::find(mesh_dims.begin(), mesh_dims.end(), e.mesh_dim) != mesh_dims.end() && e.split_factor != 1)
      return false;
  return true;
}

// The collective's concatenated per-peer chunks are the local tensor in row-major order:
// one tensor dim `d` changes, splits are plain chunks, sizes are even, and every dim before
// `d` has at most one element locally.
bool contiguous_concat(const Geometry& g, const Sharding& whole, const Sharding& piece, int d,
                       std::span<const int> mesh_dims) {
  if (!entries_unit_split(piece, d, mesh_dims) || !entries_unit_split(whole, d, mesh_dims)) return false;
  const auto ps = g.dim_stats(d, piece.entries(d));
  if (ps.max != ps.min) return false;
  for (int k = 0; k < d; ++k)
    if (g.dim_stats(k, whole.entries(k)).max > 1) return false;
  return true;
}

}  // namespace

// The buffers one step needs (its collective's send/receive regions and whether it can work in
// place): what lower_buffers records and what the search and validate_plan price.
BufferGeometry step_buffers(const Geometry& g, StepKind kind, std::span<const int> mesh_dims,
                         std::span<const int> tensor_dims, const Sharding& from, const Sharding& to,
                         const Geometry::DirectStats* direct) {
  BufferGeometry b;
  const auto F = g.numel_stats(from, true);
  const auto T = g.numel_stats(to);
  b.from_max = F.max;
  b.from_min = F.min;
  b.to_max = T.max;
  b.to_min = T.min;
  b.group_size = group_size(g.mesh_shape(), mesh_dims);
  const auto n = b.group_size;
  switch (kind) {
    case StepKind::all_gather:
      b.chunk = F.max;
      b.pad_send = F.max != F.min;
      // Every rank must hold exactly `chunk` elements (the collective's count is global).
      b.zero_copy = F.max == F.min && tensor_dims.size() == 1 && contiguous_concat(g, to, from, tensor_dims[0], mesh_dims);
      if (!b.zero_copy) {
        b.recv_elems = n * b.chunk;
        b.send_elems = b.pad_send ? b.chunk : 0;
      }
      break;
    case StepKind::reduce_scatter:
      b.chunk = T.max;
      b.zero_copy = T.max == T.min && tensor_dims.size() == 1 && contiguous_concat(g, from, to, tensor_dims[0], mesh_dims);
      if (!b.zero_copy) {
        b.send_elems = n * b.chunk;
        b.recv_elems = b.chunk;
      }
      break;
    case StepKind::all_reduce:
      b.chunk = F.max;
      b.zero_copy = true;
      break;
    case StepKind::all_to_all:
      b.chunk = g.all_to_all_chunk(from, to, mesh_dims[0]);
      b.send_elems = n * b.chunk;
      b.recv_elems = n * b.chunk;
      break;
    case StepKind::direct: {
      b.send_elems = direct ? direct->max_traffic : g.direct_stats(from, to).max_traffic;
      break;
    }
    case StepKind::local_chunk:
    case StepKind::local_fill:
    case StepKind::relabel:
      break;
  }
  return b;
}

std::int64_t step_peak_bytes(const Geometry& g, const BufferGeometry& b, bool from_is_input, bool to_is_output) {
  const auto s = g.itemsize();
  std::int64_t peak = 0;
  if (b.send_elems) peak += ws_round(b.send_elems * s);
  if (b.recv_elems) peak += ws_round(b.recv_elems * s);
  if (!from_is_input) peak += ws_round(b.from_max * s);
  if (!to_is_output) peak += ws_round(b.to_max * s);
  return peak;
}

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
