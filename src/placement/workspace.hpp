#pragma once
// Workspace layout shared by the planner (which sizes buffers) and the executors (which carve
// them): region alignment, and the staging buffer of a coalesced batch stage (docs/batch.md).
#include <cstdint>

#include "dtensor/collective.hpp"

namespace dtensor {

// Workspace regions are aligned so that GPU buffers carved from one workspace stay aligned.
inline constexpr std::int64_t kWorkspaceAlign = 256;
[[nodiscard]] inline std::int64_t ws_round(std::int64_t bytes) {
  return (bytes + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
}

// A coalesced stage's staging buffer for members whose per-member counts sum to C over a group of
// n: the send region first (all_gather C, reduce_scatter and all_to_all n*C, all_reduce C
// elements), then, aligned, the receive region (all_gather and all_to_all n*C, reduce_scatter
// and all_reduce C).
struct StagingLayout {
  std::int64_t send_elems = 0, recv_elems = 0;
  std::int64_t recv_at = 0;  // bytes
  std::int64_t bytes = 0;    // the whole buffer
};
[[nodiscard]] inline StagingLayout staging_layout(Collective c, std::int64_t n, std::int64_t C, std::int64_t itemsize) {
  StagingLayout l;
  l.send_elems = c == Collective::reduce_scatter || c == Collective::all_to_all ? n * C : C;
  l.recv_elems = c == Collective::all_gather || c == Collective::all_to_all ? n * C : C;
  l.recv_at = ws_round(l.send_elems * itemsize);
  l.bytes = l.recv_at + ws_round(l.recv_elems * itemsize);
  return l;
}

}  // namespace dtensor
