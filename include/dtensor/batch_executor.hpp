#pragma once
// The BatchExecutor (docs/batch.md): runs a batch plan (batch_plan.hpp) on any backend.
#include <cstdint>
#include <memory>
#include <span>

#include "dtensor/comm.hpp"
#include "dtensor/executor.hpp"
#include "dtensor/batch_plan.hpp"

namespace dtensor {

// Runs this rank's part of a batch plan: per tensor its own buffers (input, output, workspace of
// that plan's peak_bytes), plus one staging buffer of at least staging_bytes() for the coalesced
// stages, all in the backend's memory. A collective: every rank of the mesh constructs one (the
// batch plans' hashes are compared once when ExecutorOptions::check_plans_agree).
class BatchExecutor {
 public:
  BatchExecutor(const BatchPlan& batch, Communicator& comm, ExecutorOptions options = {});
  ~BatchExecutor();
  BatchExecutor(BatchExecutor&&) noexcept;
  BatchExecutor& operator=(BatchExecutor&&) noexcept;
  [[nodiscard]] std::size_t size() const noexcept;  // tensors
  [[nodiscard]] std::int64_t staging_bytes() const noexcept;
  [[nodiscard]] const Executor& executor(std::size_t tensor) const;
  void execute(std::span<const Buffers> buffers, std::span<std::byte> staging) const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace dtensor
