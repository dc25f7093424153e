#pragma once
// Plans between layouts that may hold a RaggedShard (docs/ragged.md). A ragged plan is a short
// chain of stages: ordinary plans between non-ragged layouts (the A* planner's) and exchanges, one
// grouped send/recv of per-rank counts between two layouts either of which may be ragged. The
// planner takes the cheapest chain through a bounded set of meeting points (each ragged end's base
// layout and its Shard-like neighbour, the other end, and on small meshes every plain layout): the
// search never meets ragged units that are not the source's or the target's.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dtensor/cost_model.hpp"
#include "dtensor/plan.hpp"
#include "dtensor/planner.hpp"
#include "dtensor/ragged.hpp"

namespace dtensor {

// One grouped send/recv from `from` to `to` (neither Partial): every rank receives each element of
// its piece from the one member of its group over `from`'s sharded and ragged mesh dims that holds
// it. Byte counts are the largest over ranks.
struct RaggedExchange {
  RaggedLayout from, to;
  std::vector<int> mesh_dims;  // the mesh dims some transfer crosses
  // copy_bytes: the busiest rank's local copies, own_bytes of them its own part (source piece to
  // target piece: none when the two buffers alias there, as a local bucket that is a view of the
  // gathered one), the rest packing and unpacking through scratch
  std::int64_t bytes_sent = 0, bytes_received = 0, copy_bytes = 0, own_bytes = 0, peers = 0;
  std::int64_t scratch_elems = 0;  // the largest rank's packing scratch (sends then receives)
  double alpha_us = 0, wire_us = 0, copy_us = 0, cost_us = 0;
  friend bool operator==(const RaggedExchange&, const RaggedExchange&) = default;
};

struct RaggedStage {
  std::optional<Plan> plan;                 // an ordinary plan between two non-ragged layouts, or
  std::optional<RaggedExchange> exchange;  // an exchange
  [[nodiscard]] RaggedLayout from() const;
  [[nodiscard]] RaggedLayout to() const;
  [[nodiscard]] double cost_us() const noexcept;
  friend bool operator==(const RaggedStage&, const RaggedStage&) = default;
};

struct RaggedPlan {
  RaggedLayout src, dst;
  std::string cost_model;
  std::vector<RaggedStage> stages;  // empty when src == dst
  double total_cost_us = 0;
  // "RaggedShard((0,),(1,1,2))-[exchange]->R-[all_gather[0]]->S(0)": each stage's kind between states.
  [[nodiscard]] std::string trace() const;
  // Stable across processes: FNV-1a over the layouts and every stage.
  [[nodiscard]] std::uint64_t hash() const;
  // The layouts, the trace, the total, the hash and every stage (an ordinary stage as its plan's
  // JSON, an exchange as its record).
  [[nodiscard]] std::string to_json() const;
  // Reads to_json's form as untrusted input: every ordinary stage through Plan::from_json (so
  // validate_plan), every exchange's transfer record (mesh dims, bytes, copies, peers) recomputed
  // from its layouts and required equal (the executor never reads a count from a plan: it derives
  // every transfer from the layouts), the stages chained from src to dst. InputError naming the
  // stage and field otherwise.
  [[nodiscard]] static RaggedPlan from_json(std::string_view json);
  // A table: one row per stage, then the total.
  [[nodiscard]] std::string explain() const;
  friend bool operator==(const RaggedPlan&, const RaggedPlan&) = default;
};

// Every stage exactly one of a plan and an exchange, each starting where the one before ends (the
// first at `src`), the last ending at `dst`: InputError naming the stage otherwise. RaggedExecutor
// and RaggedPlan::from_json run it.
void check_chain(const RaggedPlan& plan);

// The exchange from `from` to `to` (same mesh, shape and dtype; neither Partial), costed under `cost`.
// Meshes above 4096 ranks are refused (costing pairs every rank with its group).
[[nodiscard]] RaggedExchange ragged_exchange(const RaggedLayout& from, const RaggedLayout& to, const CostModel& cost);

// Per rank (by global rank), the elements it receives from other ranks in the exchange from `from`
// to `to` (neither Partial): what a gather to owners, a scatter back or an all-gather moves.
[[nodiscard]] std::vector<std::int64_t> exchange_received(const RaggedLayout& from, const RaggedLayout& to);

// The cheapest chain from `src` to `dst` (same mesh, shape and dtype) under `cost`; with neither
// ragged, the ordinary plan as one stage. Deterministic: the same inputs give the same plan on
// every rank. Throws InputError for layouts of different meshes, shapes or dtypes.
[[nodiscard]] RaggedPlan plan_ragged(const RaggedLayout& src, const RaggedLayout& dst, const CostModel& cost,
                                     const PlanOptions& options = {});

// On meshes of at most kRaggedEnumerationRanks ranks, where {R, S(d)} per mesh dim with every
// shard order gives at most kRaggedEnumerationStates layouts, the planner meets the ordinary graph
// at every one of them (exact against the whole graph with ragged ends); beyond, at the ragged ends'
// neighbours and the other end.
inline constexpr std::int64_t kRaggedEnumerationRanks = 64;
inline constexpr std::int64_t kRaggedEnumerationStates = 512;
// Those plain layouts (empty when the bounds are passed).
[[nodiscard]] std::vector<Layout> plain_meeting_points(const Mesh& mesh, const std::vector<std::int64_t>& shape, DType dtype);

// The meeting points the planner tries next to a ragged layout: its base (the ragged mesh dim read
// as Replicate) and its Shard-like neighbour (the ragged mesh dim as the innermost split of tensor
// dim 0). Empty for a non-ragged layout.
[[nodiscard]] std::vector<Layout> ragged_neighbours(const RaggedLayout& l);

}  // namespace dtensor
