#pragma once
// Runs one rank's part of a ragged plan (ragged_plan.hpp) on any Communicator: ordinary stages
// through an Executor each, exchanges as one grouped send/recv whose packing copies were computed
// when prepared. Buffers as the Executor's: the input is the source piece (local_numel elements,
// row-major), the output the target's, the workspace at least workspace_bytes().
#include <cstdint>
#include <memory>

#include "dtensor/comm.hpp"
#include "dtensor/executor.hpp"
#include "dtensor/ragged_plan.hpp"

namespace dtensor {

class RaggedExecutor {
 public:
  // Collective (every rank of the mesh constructs one): checks the stages chain from the plan's
  // source to its target, compares plan hashes (options.check_plans_agree), prepares every stage.
  RaggedExecutor(const RaggedPlan& plan, Communicator& comm, ExecutorOptions options = {});
  ~RaggedExecutor();
  RaggedExecutor(RaggedExecutor&&) noexcept;
  RaggedExecutor& operator=(RaggedExecutor&&) noexcept;

  [[nodiscard]] std::int64_t input_bytes() const noexcept;
  [[nodiscard]] std::int64_t output_bytes() const noexcept;
  [[nodiscard]] std::int64_t workspace_bytes() const noexcept;
  // Collectives (grouped send/recv included) this rank issues per execute().
  [[nodiscard]] std::int64_t collectives() const noexcept;
  // Bytes this rank copies locally per execute() in its exchanges (packing, unpacking, its own part).
  [[nodiscard]] std::int64_t exchange_copy_bytes() const noexcept;
  void execute(const Buffers& buffers) const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace dtensor
