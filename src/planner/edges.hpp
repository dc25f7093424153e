#pragma once
// The edges of the redistribution graph (edges.cpp, docs/planner.md): which steps leave a state,
// the layouts they make, and each one's costed step record.
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "call_ref.hpp"
#include "dtensor/plan.hpp"
#include "state_space.hpp"

namespace dtensor {

// One edge as the search sees it. `group` is the mesh-dim group the edge was generated with
// (empty for direct/relabel); `step` is costed, and complete (states, dims, reason) only when
// asked for.
struct Edge {
  Sharding to;
  StepKind kind;
  DimList group;
  Step step;
};
// Fills `out` with every edge out of `from`, in the planner's deterministic order. With
// `full` false the step records carry costs, bytes and peaks but no states or reason text
// (the search rebuilds the chosen path's records in full).
void enumerate_edges(const GraphContext& ctx, const Sharding& from, std::vector<Edge>& out, bool full = false,
                     bool with_direct = true);
// The same edges, in the same order, handed to `sink` one by one (nothing stored).
using EdgeSink = std::function<void(const Sharding& to, StepKind kind, const DimList& group, const Step& step)>;
void enumerate_edges(const GraphContext& ctx, const Sharding& from, const EdgeSink& sink, bool full, bool with_direct);

// The same edges as moves, before two checks that are the caller's: the next layout differs
// from `from`, and its Partial ops mix (move_keeps_ops_mixable). Direct excluded: what the search
// enumerates, costing each edge later, when it may still matter.
using MoveSink = CallRef<void(StepKind kind, const DimList& group, const Move& move)>;
void enumerate_moves(const GraphContext& ctx, const Sharding& from, MoveSink sink);
[[nodiscard]] bool move_keeps_ops_mixable(const Sharding& from, const Move& mv);

// The mesh dims of `mask` as a gather over them out of `from` lists them (`group`: by tensor
// dim, each dim's entries in shard order); false when some dim's order has an entry of the mask
// below one that is not (no gather removes it; `group` is then incomplete). The gather is an
// edge when this holds and every mesh dim of the mask shards something.
[[nodiscard]] bool all_gather_group(const Sharding& from, std::uint32_t mask, DimList& group);
// Whether the `direct` edge from `from` to the target exists (edge set all, no Partial on a
// mesh dim whose placement changes).
[[nodiscard]] bool direct_allowed(const GraphContext& ctx, const Sharding& from);
[[nodiscard]] bool direct_allowed(const EdgeScope& scope, const Sharding& from);
// Whether `kind` over `group` (in group order) is an edge from `from` to `to` (direct excluded).
[[nodiscard]] bool is_edge(const EdgeScope& scope, const Sharding& from, StepKind kind, std::span<const int> group,
                           const Sharding& to);
// The step record (bytes, peak, cost breakdown and, when `full`, states and why) of a transition.
// `crossed` (direct only): receives the mesh dims its transfers cross.
[[nodiscard]] Step make_step(const GraphContext& ctx, StepKind kind, std::span<const int> mesh_dims,
                             const Sharding& from, const Sharding& to, bool full = true, DimList* crossed = nullptr);
// A direct step as make_step(..., false, &crossed) costed it, completed into the record
// make_step(..., true) gives: states, mesh dims, tensor dims and reason.
[[nodiscard]] Step complete_direct_step(const GraphContext& ctx, Step costed, const DimList& crossed, const Sharding& from,
                                        const Sharding& to);

}  // namespace dtensor
