#pragma once
// The buffers of one step (lower.cpp): the regions the executor allocates, in elements, and the
// bytes a step keeps live; the planner's peaks and the executor read the same numbers.
#include <cstdint>
#include <span>

#include "dtensor/plan.hpp"
#include "geometry.hpp"
#include "placement/workspace.hpp"

namespace dtensor {

// Buffer geometry of one step, in elements; the executor allocates exactly these regions.
struct BufferGeometry {
  std::int64_t group_size = 1;
  std::int64_t chunk = 0;       // padded per-peer chunk of a collective
  bool zero_copy = false;       // the collective runs on the caller's buffers directly
  bool pad_send = false;        // all_gather: own chunk copied into a padded send buffer
  std::int64_t send_elems = 0;  // scratch regions
  std::int64_t recv_elems = 0;
  std::int64_t from_max = 0;    // largest local numel before / after
  std::int64_t to_max = 0;
  std::int64_t from_min = 0;
  std::int64_t to_min = 0;
};
[[nodiscard]] BufferGeometry step_buffers(const Geometry& g, StepKind kind, std::span<const int> mesh_dims,
                                       std::span<const int> tensor_dims, const Sharding& from,
                                       const Sharding& to, const Geometry::DirectStats* direct = nullptr);
// Bytes live during a step besides the caller's buffers.
[[nodiscard]] std::int64_t step_peak_bytes(const Geometry& g, const BufferGeometry& b, bool from_is_input,
                                           bool to_is_output);

}  // namespace dtensor
