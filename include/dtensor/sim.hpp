#pragma once
// Simulation (src/sim): seeded inputs whose global tensor is known element by element, output
// verification against it, drivers that run every rank of a mesh in one process, and simulate(),
// which runs a plan that way and verifies it (`dtensor simulate`, Python's `simulate`, `tune
// validate`). Not needed to plan or execute a redistribution.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "dtensor/batch_executor.hpp"
#include "dtensor/cross_mesh_executor.hpp"
#include "dtensor/executor.hpp"
#include "dtensor/layout.hpp"
#include "dtensor/simulated.hpp"

namespace dtensor {

// The local input of `rank` for `layout` when the global tensor's element i holds its linear
// index i (reduced modulo what narrow dtypes hold exactly); Partial mesh dims are seeded so that
// their reduction gives that tensor back exactly. Raw bytes of the layout's dtype.
[[nodiscard]] std::vector<std::byte> seeded_input(const Layout& layout, std::int64_t rank);

// Checks every rank's local data of `layout` (outputs by global rank) against that global tensor,
// reducing Partial mesh dims over the ranks that share the other coordinates, and checks that
// together the ranks hold every element of the tensor the number of times the layout implies.
// Returns "" when right, else the first mismatch. `seeded_ranks`: the rank count the inputs were
// seeded with (narrow dtypes' values depend on it), when another mesh's (cross-mesh); 0: this one's.
[[nodiscard]] std::string verify_outputs(const Layout& layout, const std::vector<std::vector<std::byte>>& outputs,
                                         std::int64_t seeded_ranks = 0);
// The same check for one rank's output.
[[nodiscard]] std::string verify_rank_output(const Layout& layout, std::int64_t rank, std::span<const std::byte> output,
                                             std::int64_t seeded_ranks = 0);

// Runs prepared executors, one per rank (buffers[i] for executors[i]), all from this thread on
// `world`: step by step, every rank's copies, then every rank's collective, then the next step.
// The executors must have been prepared on `world`'s communicators with
// ExecutorOptions{.check_plans_agree = false} (agreement is a blocking collective).
void execute_all_ranks(std::span<const Executor* const> executors, SimulatedWorld& world,
                       std::span<const Buffers> buffers);

// Runs fn(rank, communicator) on one thread per rank of `world` and waits for all of them; if any
// throws, rethrows the exception of the lowest such rank. The world keeps its rank threads for the
// next call (started on the first).
void run_rank_threads(SimulatedWorld& world, const std::function<void(std::int64_t, Communicator&)>& fn);

// Plans nothing: runs `plan` on a fresh in-process world over seeded inputs and verifies the
// outputs (`threads`: one thread per rank with blocking collectives; otherwise all ranks from this
// thread).
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
[[nodiscard]] SimulationResult simulate(const Plan& plan, bool threads = false);

// Runs a batch plan on a fresh in-process world, one thread per rank, over seeded inputs, and
// verifies every tensor on every rank (`dtensor simulate --batch`).
struct BatchSimulationResult {
  std::vector<std::string> mismatch;  // per tensor: "" when right
  bool verified = false;              // every tensor right
  std::int64_t collectives = 0;       // launched by rank 0 (a group of collectives once)
};
[[nodiscard]] BatchSimulationResult simulate(const BatchPlan& batch);
// About the host memory simulate(batch) holds at once: every plan's buffers, every rank's staging
// and one thread stack per rank.
[[nodiscard]] std::int64_t simulation_bytes(const BatchPlan& batch);

// Runs a cross-mesh plan on fresh in-process worlds (the world, mesh A, mesh B), one thread per
// world rank the plan uses (numbered compactly; failures name the world rank id), over seeded inputs, and verifies every target rank (`dtensor simulate --to-mesh`).
struct CrossMeshSimulationResult {
  bool verified = false;
  std::string mismatch;  // first mismatch, when not verified
  std::vector<std::vector<std::byte>> outputs;  // by target mesh rank
};
[[nodiscard]] CrossMeshSimulationResult simulate(const CrossMeshPlan& plan);
// About the host memory simulate(cross-mesh plan) holds at once: its two parts' buffers and one
// thread stack per world rank it uses (ranks on neither mesh are not simulated; ids do not count).
[[nodiscard]] std::int64_t simulation_bytes(const CrossMeshPlan& plan);

// About the host memory simulate(plan, threads) holds at once: every rank's input, output and
// workspace, the outputs again as doubles for the report, the verification's coverage counts, and
// with `threads` one thread stack (simulation_thread_bytes) per rank (without, every rank runs
// on the calling thread).
[[nodiscard]] std::int64_t simulation_bytes(const Plan& plan, bool threads = false);
// The stack a simulation's thread reserves (this process's default thread stack size).
[[nodiscard]] std::int64_t simulation_thread_bytes();
// The default bound on it (the CLI's --sim-memory-limit, Python's memory_limit): half of this
// machine's physical memory.
[[nodiscard]] std::int64_t default_simulation_limit();

}  // namespace dtensor
