#pragma once
// The executor of SPEC §4: interprets a plan and decides nothing. It is prepared once per plan
// and set of local ranks (every index set, box copy and transfer is computed then), and
// `execute` only issues copies and collectives: no allocation, no planning.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "dtensor/comm.hpp"
#include "dtensor/plan.hpp"

namespace dtensor {

struct RankBuffers {
  std::int64_t rank = 0;                  // global rank id
  std::span<const std::byte> input;       // the source layout's local tensor (never written)
  std::span<std::byte> output;            // the target layout's local tensor
  std::span<std::byte> workspace;         // at least plan.peak_bytes
};

class Executor {
 public:
  // Prepares `plan` for the given global ranks (empty: every rank of the mesh). Throws when the
  // backend cannot run a step (e.g. an fp8 reduction), before any communication.
  Executor(const Plan& plan, const Communicator& comm, std::vector<std::int64_t> ranks = {});
  ~Executor();
  Executor(Executor&&) noexcept;
  Executor& operator=(Executor&&) noexcept;

  [[nodiscard]] std::int64_t workspace_bytes() const noexcept;  // == plan.peak_bytes
  [[nodiscard]] std::int64_t input_bytes(std::int64_t rank) const;
  [[nodiscard]] std::int64_t output_bytes(std::int64_t rank) const;
  // Runs every step for every prepared rank in `buffers` (each prepared rank exactly once).
  void execute(Communicator& comm, std::span<const RankBuffers> buffers) const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Runs a plan on the simulated backend over the SPEC §5 global tensor (element value = its
// linear index, reduced for narrow dtypes; Partial sources seeded so that their reduction is
// that tensor) and verifies every rank against the target layout.
struct SimulationResult {
  struct Rank {
    std::int64_t rank;
    std::vector<std::int64_t> coord;
    std::vector<std::int64_t> local_shape;
    std::vector<double> data;  // row-major local values
  };
  std::vector<Rank> ranks;
  bool verified = false;
  std::string mismatch;  // first mismatch, when not verified
};
[[nodiscard]] SimulationResult simulate(const Plan& plan);

// The SPEC §5 local input of `rank` for `layout` (Partial dims seeded exactly), as raw bytes.
[[nodiscard]] std::vector<std::byte> seeded_input(const Layout& layout, std::int64_t rank);
// Checks a rank's local data of `layout` against the global tensor, reducing Partial dims over
// the ranks that share the other coordinates. Returns "" when right, else the first mismatch.
[[nodiscard]] std::string verify_outputs(const Layout& layout, const std::vector<std::vector<std::byte>>& outputs);

}  // namespace dtensor
