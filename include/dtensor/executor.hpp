#pragma once
// The executor: runs this rank's part of a plan and decides nothing. Everything it does is read
// from the plan (states, groups, and each step's buffer record); preparing turns that into a
// list of copies and one collective per step for this rank, so `execute` only issues them: no
// allocation, no planning.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "dtensor/comm.hpp"
#include "dtensor/plan.hpp"

namespace dtensor {

// One rank's buffers, in the backend's memory (host for threads/MPI, device for NCCL).
struct Buffers {
  std::span<const std::byte> input;  // the source layout's local tensor (never written)
  std::span<std::byte> output;       // the target layout's local tensor
  std::span<std::byte> workspace;    // at least plan.peak_bytes
};

struct ExecutorOptions {
  // Exchange plan hashes with every rank when prepared and fail (BackendError) naming the ranks
  // whose plan differs. Costs one small collective per Executor.
  bool check_plans_agree = true;
  // The workspace a plan may ask for. Unset: exactly what its steps need (validate_plan); a plan
  // lowered with a larger peak_bytes (lower_buffers after a hand edit) needs this raised.
  std::optional<std::int64_t> max_workspace_bytes;
  // Compare plan hashes at the start of every execute() as well: one 8-byte all_gather over the
  // mesh per call (none on a one-rank mesh). A rank that runs another plan than its peers (say,
  // another target after both plans were cached) then fails on every rank with the plan-hash
  // message instead of meeting them in mismatched collectives. With it set, the check when
  // prepared is left to the first call.
  bool check_plans_every_call = false;
};

class Executor {
 public:
  // Prepares `comm.rank()`'s part of `plan` on `comm`, which must outlive the executor. Every rank
  // of the mesh constructs its Executor (a collective: the plans are compared, then the backend
  // prepares its groups). Throws InputError for a malformed plan or a step the backend cannot
  // run (e.g. an fp8 reduction), before any data moves.
  Executor(const Plan& plan, Communicator& comm, ExecutorOptions options = {});
  ~Executor();
  Executor(Executor&&) noexcept;
  Executor& operator=(Executor&&) noexcept;

  [[nodiscard]] std::int64_t rank() const noexcept;
  [[nodiscard]] std::int64_t workspace_bytes() const noexcept;  // == plan.peak_bytes
  [[nodiscard]] std::int64_t input_bytes() const noexcept;
  [[nodiscard]] std::int64_t output_bytes() const noexcept;
  // Collectives this rank issues per execute() (each followed by Communicator::synchronize()).
  [[nodiscard]] std::int64_t collectives() const noexcept;
  // Whether the last thing execute() does is a collective (no local copy after its synchronize()):
  // then a backend may leave that collective in flight when execute() returns and complete it later
  // (dtensor.torch's async_op on CPU).
  [[nodiscard]] bool ends_with_collective() const noexcept;
  // Runs every step of this rank; every rank of the mesh executes concurrently.
  void execute(const Buffers& buffers) const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  friend class ExecutorSteps;  // step by step, for the batch executor and the all-ranks driver
};

}  // namespace dtensor
