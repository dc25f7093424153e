#pragma once
// Which collective: one enum for the executor, every backend and the cost model.
#include <cstdint>
#include <optional>
#include <string_view>

#include "dtensor/dtype.hpp"
#include "dtensor/placement.hpp"

namespace dtensor {

// The collectives nccl-tests measures; the planner's steps map onto them (direct: sendrecv).
enum class Collective : std::uint8_t { all_gather, reduce_scatter, all_reduce, all_to_all, send_recv };
// nccl-tests' names: all_gather, reduce_scatter, all_reduce, alltoall, sendrecv.
[[nodiscard]] std::string_view to_string(Collective c) noexcept;
// Accepts those names, with or without "_perf"/"_perf_mpi", and all_to_all / send_recv.
[[nodiscard]] std::optional<Collective> parse_collective(std::string_view text) noexcept;
// Whether the collective combines its members' data with a reduce op.
[[nodiscard]] constexpr bool reduces(Collective c) noexcept {
  return c == Collective::reduce_scatter || c == Collective::all_reduce;
}
// The reductions a backend runs unless it says otherwise in its `supports`: every collective and
// dtype, every op but the average of booleans (MPI and the device kernels use this rule as it is).
// Backends narrow it: NCCL's fp8 reductions need NCCL 2.24 on sm_90 or newer; torch.distributed
// (python/dtensor/torch/_communicator.py) has no fp8 reductions and no average of integers, which torch's process
// groups refuse. Only the host's reference code (host_memory, the threads backend) reduces more:
// it defines the average of booleans too, as the oracle does.
[[nodiscard]] bool reducible(Collective c, DType dtype, ReduceOp op) noexcept;

}  // namespace dtensor
