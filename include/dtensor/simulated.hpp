#pragma once
// The in-process backend ("threads"): every rank of a mesh in one process on host memory, with
// the real semantics of every collective. A SimulatedWorld hands out one Communicator per rank;
// used from one thread per rank (like NCCL's one thread per GPU), a collective blocks until every
// member of its group has issued it, and fails with a BackendError naming the collective and the
// ranks that did not arrive when they do not come within the timeout, or naming both calls when
// ranks issue different collectives.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "dtensor/comm.hpp"
#include "dtensor/cost_model.hpp"
#include "dtensor/executor.hpp"

namespace dtensor {

struct WorldOptions {
  // A rank that waits longer than this for its peers fails with a BackendError naming them.
  std::chrono::milliseconds timeout{60000};
  // Where every rank's buffers live and how collectives move and reduce them (the world runs
  // them with memory->copy and memory->reduce). nullptr: host memory; dtensor::device_memory
  // (the NCCL backend) checks the CUDA kernels on multi-rank plans on one GPU.
  std::shared_ptr<Memory> memory;
  // A virtual clock per rank, for testing timing code on CPU (`dtensor tune measure`): every
  // collective moves its members' clocks to the latest of them plus the time `clock_profile`
  // charges for it (predict_collective_us), times 1 + clock_noise * u with u in [-1, 1] drawn
  // from `clock_seed` and the collective's identity (the same in every run). A grouped
  // send/recv moves a rank's clock past its peers' sends by what the profile charges a direct step
  // of its peers and bytes (the larger of the counts it sends and receives).
  // Local copies (copy, fill, copy_strided) advance the rank's clock by the profile's copy time.
  // nullptr: no clock (clock_us stays 0).
  std::shared_ptr<const CostModel> clock_profile;
  double clock_noise = 0;
  std::uint64_t clock_seed = 1;
};

class SimulatedWorld {
 public:
  explicit SimulatedWorld(Mesh mesh, WorldOptions options = {});
  ~SimulatedWorld();
  SimulatedWorld(const SimulatedWorld&) = delete;
  SimulatedWorld& operator=(const SimulatedWorld&) = delete;

  [[nodiscard]] const Mesh& mesh() const noexcept;
  // The communicator of global rank `rank` (owned by the world, valid while it lives).
  [[nodiscard]] Communicator& communicator(std::int64_t rank);
  // Collectives completed so far (for tests).
  [[nodiscard]] std::int64_t collectives_run() const noexcept;
  // The rank's virtual clock in µs (WorldOptions::clock_profile; 0 without one).
  [[nodiscard]] double clock_us(std::int64_t rank) const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  friend struct WorldAccess;
};

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

}  // namespace dtensor
