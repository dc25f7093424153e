#pragma once
// The CrossMeshExecutor (docs/cross-mesh.md): runs one world rank's part of a cross-mesh plan
// (cross_mesh_plan.hpp).
#include <cstdint>
#include <memory>
#include <span>

#include "dtensor/comm.hpp"
#include "dtensor/executor.hpp"
#include "dtensor/cross_mesh_plan.hpp"

namespace dtensor {

// Runs one world rank's part of a cross-mesh plan. `world`: a communicator over every world rank
// (its rank() is this world rank, its mesh has world_size ranks; only its send_recv and exchange
// are used). `on_src`: this rank's communicator of mesh A (nullptr when the rank is not on A);
// `on_dst` likewise for B. Every world rank constructs one (a collective over `world`: the plan
// hashes are compared). Buffers: `input` is this rank's source part (empty when not on A),
// `output` its target part (empty when not on B), `workspace` at least workspace_bytes().
class CrossMeshExecutor {
 public:
  CrossMeshExecutor(const CrossMeshPlan& plan, Communicator& world, Communicator* on_src, Communicator* on_dst,
                    ExecutorOptions options = {});
  ~CrossMeshExecutor();
  CrossMeshExecutor(CrossMeshExecutor&&) noexcept;
  CrossMeshExecutor& operator=(CrossMeshExecutor&&) noexcept;
  [[nodiscard]] std::int64_t input_bytes() const noexcept;
  [[nodiscard]] std::int64_t output_bytes() const noexcept;
  [[nodiscard]] std::int64_t workspace_bytes() const noexcept;
  void execute(const Buffers& buffers) const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace dtensor
