#pragma once
// Which collective: one enum for the executor, every backend and the cost model.
#include <cstdint>
#include <optional>
#include <string_view>

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

}  // namespace dtensor
