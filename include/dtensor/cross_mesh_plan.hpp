#pragma once
// Cross-mesh resharding, the plan (docs/cross-mesh.md; cross_mesh.hpp adds its executor): a tensor laid out on mesh A, whose ranks live on
// some world ranks, moved to a layout on mesh B on other (overlapping, identical or disjoint) world
// ranks. A plan has three parts: steps inside A (`pre`, a plan on A from the source to an
// intermediate layout without Partial), one grouped send/recv over the world (`messages`: each
// element B needs in its intermediate layout sent once, by one of the A ranks holding it, or
// copied locally by a rank on both meshes that holds it), and steps inside B (`post`, a plan on B
// from its intermediate layout to the target).
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dtensor/planner.hpp"

namespace dtensor {

class PlanCache;

// World ranks are ids below 2^31 (a world has at most 2^31 ranks). Every table a cross-mesh plan
// sizes by world rank is indexed by the ranks the plan uses (used_world_ranks), never by the id.
inline constexpr std::int64_t kMaxWorldSize = std::int64_t{1} << 31;

struct CrossMeshPlan {
  // The source layout on mesh A and the target on mesh B (same shape and dtype), and the world
  // rank of every mesh rank: src_ranks[r] is where A's rank r lives (r as the mesh numbers its
  // ranks, so through its explicit rank list when it has one).
  Layout src = Plan().src;
  Layout dst = Plan().dst;
  std::vector<std::int64_t> src_ranks{0}, dst_ranks{0};
  std::int64_t world_size = 1;
  Plan pre;   // on A: src -> pre.dst (no Partial)
  Plan post;  // on B: post.src -> dst
  // At most one message per (A rank, B rank) pair: the elements of the B rank's part of post.src
  // that the A rank holds in pre.dst (the intersection of the two boxes), or rows
  // [row_begin, row_end) of it along its split dim (cross_mesh_split_dim) when several holders of
  // those elements share them. Sorted by (to, from). A message whose two ranks are one world rank
  // is a local copy.
  struct Message {
    std::int64_t from = 0;      // A's mesh rank
    std::int64_t to = 0;        // B's mesh rank
    std::int64_t elements = 0;  // > 0
    std::int64_t row_begin = 0, row_end = -1;  // -1: the whole intersection
    friend bool operator==(const Message&, const Message&) = default;
  };
  std::vector<Message> messages;
  // The transfer as the cost model sees it (bytes by world rank, local copies excluded).
  std::int64_t transfer_bytes = 0;     // every message between two world ranks
  std::int64_t busiest_bytes = 0;      // max over world ranks of max(sent, received)
  std::int64_t busiest_peers = 0;      // max over world ranks of its distinct peers
  std::int64_t balanced_bound_bytes = 0;  // the least busiest_bytes any choice of senders reaches
  bool inter_host = false;             // some message crosses hosts (world rank / devices_per_host)
  double transfer_cost_us = 0;
  double total_cost_us = 0;            // pre + transfer + post
  std::string cost_model;

  [[nodiscard]] std::int64_t world_rank_of_src(std::int64_t mesh_rank) const { return src_ranks.at(static_cast<std::size_t>(mesh_rank)); }
  [[nodiscard]] std::int64_t world_rank_of_dst(std::int64_t mesh_rank) const { return dst_ranks.at(static_cast<std::size_t>(mesh_rank)); }
  // Collectives issued: the two plans' communication steps plus one grouped send/recv (when any
  // message crosses between world ranks).
  [[nodiscard]] std::int64_t collectives() const;
  // Stable across processes and platforms: both plans' hashes, the rank lists and the messages.
  [[nodiscard]] std::uint64_t hash() const;
  // The plan as JSON (docs/cli.md, `dtensor plan --to-mesh --format json`): the rank lists, the
  // two plans in their own JSON form (which carry both meshes and layouts), the messages and the
  // transfer's figures.
  [[nodiscard]] std::string to_json(int indent = -1) const;
  // Untrusted input: both plans are read as plans are (Plan::from_json), the rank lists and
  // messages checked (validate_cross_mesh_plan), the figures, costs and hash checked against what
  // the rest gives. InputError names the field.
  [[nodiscard]] static CrossMeshPlan from_json(std::string_view json);
  friend bool operator==(const CrossMeshPlan&, const CrossMeshPlan&) = default;
};

// The distinct world ranks on either mesh, ascending: a plan's ranks numbered compactly (a rank's
// index in this list). Ranks of the world on neither mesh take no part in the plan.
[[nodiscard]] std::vector<std::int64_t> used_world_ranks(std::span<const std::int64_t> src_ranks,
                                                         std::span<const std::int64_t> dst_ranks);
// The same ranks, and each mesh rank's index among them (by mesh rank of either side): what the
// planner's per-rank tables and the simulation's world are indexed by.
struct CompactRanks {
  std::vector<std::int64_t> ids;       // used_world_ranks
  std::vector<std::int64_t> src, dst;  // per mesh rank: its index in ids
};
[[nodiscard]] CompactRanks compact_world_ranks(std::span<const std::int64_t> src_ranks,
                                               std::span<const std::int64_t> dst_ranks);

// The tensor dim a split message's rows run along: the first dim of the intersection `box` with
// more than one index (0 when none has).
[[nodiscard]] int cross_mesh_split_dim(std::span<const IndexSet> box) noexcept;
// The elements message `m` moves, per tensor dim (from the plan's two intermediate layouts).
[[nodiscard]] std::vector<IndexSet> message_box(const CrossMeshPlan& plan, const CrossMeshPlan::Message& m);

struct CrossMeshOptions {
  PlanOptions plan;               // for the plans inside A and inside B
  std::int64_t world_size = -1;   // -1: one more than the largest rank listed
  // Fix the intermediate layouts instead of choosing them (the sender balance still runs): A's
  // must be reachable from the source without Partial, B's must reach the target without Partial.
  std::optional<Sharding> src_via, dst_via;
  // Plans the parts through this cache (not owned; thread-safe): a model's layers share the same
  // few parts, so planning a whole model makes each distinct part once. nullptr: plan every part.
  PlanCache* cache = nullptr;
};

// The cheapest cross-mesh plan under `cost` among the intermediate layouts it considers
// (docs/cross-mesh.md: on A, every Partial reduced to Replicate or to a Shard, and every Shard kept
// or gathered; on B, every Replicate or Partial of the target received as it is or as a Shard
// that B then gathers), with senders chosen to balance the busiest rank's bytes. Deterministic.
// Throws InputError (naming the value) for: rank lists of the wrong length, a rank listed twice
// in one mesh, a negative rank or one outside the world, shapes or dtypes that differ.
[[nodiscard]] CrossMeshPlan plan_cross_mesh(const Layout& src, std::span<const std::int64_t> src_ranks,
                                            const Layout& dst, std::span<const std::int64_t> dst_ranks,
                                            const CostModel& cost, const CrossMeshOptions& options = {});

// Checks a cross-mesh plan is one the planner could produce: both plans valid and chaining, the
// rank lists, and the messages (every element of every B rank's intermediate part received
// exactly once from an A rank holding it). Throws InputError naming the field.
void validate_cross_mesh_plan(const CrossMeshPlan& plan);
// validate_cross_mesh_plan, once per plan in this process (validate_plan_once's memo): what the
// cross-mesh executor calls.
void validate_cross_mesh_plan_once(const CrossMeshPlan& plan);

// What moves, where, and why: the three parts with their costs, bytes against the bounds.
[[nodiscard]] std::string explain(const CrossMeshPlan& plan);

}  // namespace dtensor
