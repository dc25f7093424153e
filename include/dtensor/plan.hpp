#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dtensor/collective.hpp"
#include "dtensor/layout.hpp"

namespace dtensor {

enum class StepKind : std::uint8_t {
  all_gather, reduce_scatter, all_reduce, all_to_all, local_chunk, local_fill, direct, relabel
};
[[nodiscard]] std::string_view to_string(StepKind k) noexcept;
[[nodiscard]] StepKind parse_step_kind(std::string_view text);
[[nodiscard]] bool is_communication(StepKind k) noexcept;
// The collective a communication step runs (direct: the grouped send/recv); none for local steps.
[[nodiscard]] std::optional<Collective> collective_of(StepKind k) noexcept;

enum class EdgeSet : std::uint8_t { all, pytorch };
[[nodiscard]] std::string_view to_string(EdgeSet e) noexcept;
[[nodiscard]] EdgeSet parse_edge_set(std::string_view text);

// How the executor lays one step out in memory, decided once by the planner (the executor
// reads it and decides nothing). Counts are elements, offsets bytes into the workspace. A state
// offset of -1 means the caller's buffer: the input for the first step's source, the output for
// the last step's target.
struct StepBuffers {
  std::int64_t chunk = 0;         // per-member count of the collective, padded to the largest rank's
  bool zero_copy = false;         // the collective reads and writes the state buffers directly
  bool pad_send = false;          // all_gather: this rank's part first copied into a padded send region
  std::int64_t from_offset = -1;  // where the step's source state lives
  std::int64_t to_offset = -1;    // where the step's target state is written
  std::int64_t send_offset = 0;   // scratch regions (direct: sends then receives, both in `send`)
  std::int64_t send_elems = 0;
  std::int64_t recv_offset = 0;
  std::int64_t recv_elems = 0;
  friend bool operator==(const StepBuffers&, const StepBuffers&) = default;
};

// One step of a plan (its record: docs/cli.md, plan JSON). Byte counts are the largest over ranks.
struct Step {
  StepKind kind = StepKind::relabel;
  std::vector<int> mesh_dims;    // a flattened collective lists two or more, in group order
  std::vector<int> tensor_dims;  // tensor dims whose placement changes
  Sharding from;
  Sharding to;
  std::int64_t bytes_sent = 0;
  std::int64_t bytes_received = 0;
  std::int64_t padding_bytes = 0;
  std::int64_t copy_bytes = 0;
  std::int64_t peak_bytes = 0;
  std::int64_t peers = 0;  // group size - 1 for collectives, largest peer count for direct
  bool inter_host = false;
  double alpha_us = 0;  // cost breakdown: latency, wire time, local copies
  double wire_us = 0;
  double copy_us = 0;
  double cost_us = 0;
  std::string why;
  StepBuffers buffers;  // set by the planner for the chosen plan's steps (not the runner-up's)
  friend bool operator==(const Step&, const Step&) = default;
};

struct RunnerUp {
  double total_cost_us = 0;
  std::string trace;
  std::vector<Step> steps;
  friend bool operator==(const RunnerUp&, const RunnerUp&) = default;
};

struct Plan {
  // Source and target layouts: the same mesh, shape and dtype, placements differ. A
  // default-constructed plan is the empty redistribution of a 0-d f32 tensor on a 1-rank mesh.
  Layout src = Layout(Mesh(std::vector<std::int64_t>{1}), {}, DType::f32, Sharding::replicated(1, 0));
  Layout dst = src;
  std::string cost_model;
  EdgeSet edges = EdgeSet::all;
  std::vector<Step> steps;
  double total_cost_us = 0;
  std::int64_t peak_bytes = 0;  // the workspace the executor asks for
  std::optional<RunnerUp> runner_up;

  [[nodiscard]] const Mesh& mesh() const noexcept { return src.mesh(); }
  [[nodiscard]] const std::vector<std::int64_t>& shape() const noexcept { return src.shape(); }
  [[nodiscard]] DType dtype() const noexcept { return src.dtype(); }
  // PyTorch notation: states joined by "->", "-->" before a state a flattened step reaches.
  [[nodiscard]] std::string trace() const;
  // Stable across processes and platforms: FNV-1a over the canonical step list.
  [[nodiscard]] std::uint64_t hash() const;
  [[nodiscard]] std::string to_json(int indent = -1) const;
  [[nodiscard]] static Plan from_json(std::string_view json);
  friend bool operator==(const Plan&, const Plan&) = default;
};

[[nodiscard]] std::string trace_of(const Sharding& src, const std::vector<Step>& steps);

// A plan is untrusted input: checks that it is exactly one this library's planner produces.
// Every step must be an edge of the redistribution graph out of its state (its kind, its mesh
// dims in group order: existing, distinct, as many as the kind takes; its changed tensor dims and
// its target state), the states must chain from the source to the target, every buffer record
// must be what the lowering writes, and `peak_bytes` what the steps need -- or, when
// `max_workspace_bytes` is given, anything from that need up to it. Throws InputError naming the
// step and the field. The executor runs it on every plan, and Plan::from_json on every plan it reads.
void validate_plan(const Plan& plan, std::optional<std::int64_t> max_workspace_bytes = std::nullopt);
// validate_plan, once per plan in this process: a plan equal (whole) to one of the last 16 that
// passed under the same bound is not checked again. Thread-safe. What the executors call, so the
// ranks of an in-process world (threads, SMPI's simulated processes) check a shared plan once.
void validate_plan_once(const Plan& plan, std::optional<std::int64_t> max_workspace_bytes = std::nullopt);

// The structural part of validate_plan, alone: every step's states fit the mesh and the tensor,
// and the steps chain from the source to the target. Throws InputError naming the step and field.
void check_chain(const Plan& plan);

}  // namespace dtensor
