#pragma once
// The in-process backend ("threads"): every rank of a mesh in one process on host memory, with
// the real semantics of every collective. A SimulatedWorld hands out one Communicator per rank;
// used from one thread per rank (like NCCL's one thread per GPU), a collective blocks until every
// member of its group has issued it, and fails with a BackendError naming the collective and the
// ranks that did not arrive when they do not come within the timeout, or naming both calls when
// ranks issue different collectives.
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>

#include "dtensor/comm.hpp"
#include "dtensor/cost_model.hpp"

namespace dtensor {

// How the in-process backend touches memory. The default works on host memory (16- and 8-bit
// floats reduced in double and rounded once); dtensor::nccl offers a device-memory variant that
// checks the CUDA kernels on multi-rank plans.
class SimulatedMemory {
 public:
  virtual ~SimulatedMemory() = default;
  [[nodiscard]] virtual bool supports(Collective c, DType dtype, ReduceOp op) const;
  virtual void move(void* dst, const void* src, std::int64_t bytes);
  // out = op over inputs (avg: divided by their number); `out` may alias no input but the first.
  virtual void reduce(DType dtype, ReduceOp op, void* out, std::span<const void* const> inputs, std::int64_t count);
  virtual void fill(void* dst, DType dtype, std::int64_t count, double value);
  virtual void copy_strided(void* dst, const void* src, std::int64_t run_bytes, std::span<const std::int64_t> count,
                            std::span<const std::int64_t> dst_stride, std::span<const std::int64_t> src_stride);
};

struct WorldOptions {
  // A rank that waits longer than this for its peers fails with a BackendError naming them.
  std::chrono::milliseconds timeout{60000};
  // nullptr: host memory.
  std::shared_ptr<SimulatedMemory> memory;
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

}  // namespace dtensor
