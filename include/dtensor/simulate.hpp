#pragma once
// Simulation (simulate.cpp): simulate() runs a plan, a batch plan or a cross-mesh plan on a fresh
// in-process world over seeded inputs and verifies every rank (`dtensor simulate`, Python's
// `simulate`, `tune validate`), and what memory that takes. Not needed to plan or execute a
// redistribution.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "dtensor/batch_plan.hpp"
#include "dtensor/cross_mesh_plan.hpp"
#include "dtensor/plan.hpp"

namespace dtensor {

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
