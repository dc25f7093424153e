#pragma once
// The parts of a cross-mesh plan that its value (cross_mesh_plan.cpp) and its planner
// (cross_mesh_planner.cpp) share (cross_mesh_transfer.cpp): the checks of a world rank list, the
// ranks a plan uses, each rank's index sets, a split message's box, and the transfer's figures
// (bytes, busiest rank, peers) as its messages give them.
#include <cstdint>
#include <span>
#include <vector>

#include "dtensor/cross_mesh_plan.hpp"

namespace dtensor::cross_mesh_detail {

// A side's world rank list: one id per mesh rank, each below 2^31 (and below `world` when it is
// not negative), none twice.
void check_rank_list(const char* which, const Mesh& mesh, std::span<const std::int64_t> ranks, std::int64_t world);

// The world ranks a plan uses, numbered compactly (0 .. used-1 in the order of their ids), so
// that every per-world-rank table follows the plan's ranks, never the largest id.
struct UsedRanks {
  std::span<const std::int64_t> src_ids, dst_ids;  // world rank ids, by mesh rank
  std::vector<std::int64_t> src, dst;              // compact index, by mesh rank
  std::size_t used = 0;
  UsedRanks(std::span<const std::int64_t> a, std::span<const std::int64_t> b);
};

// Per mesh rank, its index sets under `l`.
[[nodiscard]] std::vector<std::vector<IndexSet>> rank_sets(const Layout& l);

// The rows of `box` that message `m` carries (the whole box when it is not split).
[[nodiscard]] std::vector<IndexSet> split_box(std::vector<IndexSet> box, const CrossMeshPlan::Message& m);

struct TransferResult {
  std::vector<CrossMeshPlan::Message> messages;
  std::int64_t transfer_bytes = 0, busiest_bytes = 0, busiest_peers = 0, bound_bytes = 0, copy_bytes = 0;
  bool inter_host = false;
};

// The transfer's figures from its messages (sorted by receiver, then sender): bytes between world
// ranks, the busiest rank's bytes, peers and copies, whether it crosses hosts (`devices_per_host`
// > 0), with `bound` (elements) as the balanced bound.
[[nodiscard]] TransferResult finish(std::vector<CrossMeshPlan::Message> messages, const UsedRanks& u, std::int64_t s,
                                    std::int64_t devices_per_host, std::int64_t bound);

}  // namespace dtensor::cross_mesh_detail
