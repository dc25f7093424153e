#pragma once
// Single-owner layouts and the planner that picks owners (docs/ragged.md, "Owners"): for N tensors,
// one owner each along a mesh dim, chosen to minimise the largest per-rank time (the cost-model
// time of the bytes the owner receives, plus the compute it is given). Structure-aware optimizers
// (Muon, Shampoo) gather each matrix to its owner, compute there, and scatter back; the gather and
// the scatter are ordinary ragged plans between each tensor's layout and its owner layout.
#include <cstdint>
#include <span>
#include <vector>

#include "dtensor/cost_model.hpp"
#include "dtensor/ragged.hpp"

namespace dtensor {

// The layout in which the rank at coordinate `owner` on `mesh_dim` holds the whole block `l` gives
// its group (every other mesh dim unchanged): RaggedShard((0,), units all zero but owner's).
// InputError when `l` holds a Partial, or a non-Replicate placement before `mesh_dim`.
[[nodiscard]] RaggedLayout owner_layout(const Layout& l, int mesh_dim, std::int64_t owner);

struct OwnerPlan {
  std::vector<std::int64_t> owners;  // per tensor: its owner's coordinate on the mesh dim
  std::vector<double> load_us;       // per coordinate: receive time plus compute of what it owns
  double makespan_us = 0;            // the largest load
  bool exact = false;                // branch-and-bound proved it optimal
  std::int64_t nodes = 0;            // branch-and-bound nodes visited (0: the heuristic alone)
};

// The time the rank at `owner` spends receiving tensor `l` into its owner layout (the busiest such
// rank over the other mesh dims), under `cost`.
[[nodiscard]] double owner_receive_us(const Layout& l, int mesh_dim, std::int64_t owner, const CostModel& cost);
// Every owner's owner_receive_us at once, bit-identical: in closed form from the layout's local
// sizes (O(ranks)) when mesh_dim's split is the last of its tensor dim's order (or it has none),
// else by the exchange walk. `closed` (optional) says which.
[[nodiscard]] std::vector<double> owner_receive_times(const Layout& l, int mesh_dim, const CostModel& cost,
                                                      bool* closed = nullptr);

// Owners for `layouts` (one mesh), minimising the largest load: the heuristic puts the tensors,
// largest first, each on the least-loaded owner (Graham's LPT: within 4/3 - 1/(3m) of the optimum
// when the times do not depend on the owner); for N <= 12 an exact branch-and-bound (at most
// 4,000,000 nodes, then the best found, exact = false). Ties go to the lowest coordinate; the same
// answer on every rank. `compute_us`: empty, or one time per tensor (>= 0, finite).
[[nodiscard]] OwnerPlan plan_owners(std::span<const Layout> layouts, int mesh_dim, const CostModel& cost,
                                    std::span<const double> compute_us = {});
// The compute of a Muon step per tensor, as plan_owners' `compute_us`: `iterations` Newton-Schulz
// iterations on the tensor as an M x N matrix (M its first extent, N the product of the others),
// each X X^T (min^2 max multiply-adds), A A (min^3) and B X (min^2 max), two flops a multiply-add,
// at `flops_per_us`. A 0-d or 1-d tensor computes nothing here (Muon leaves them to AdamW).
// InputError for iterations outside 1..1000 or a rate that is not a finite positive number.
[[nodiscard]] std::vector<double> newton_schulz_us(std::span<const Layout> layouts, int iterations, double flops_per_us);
// The same times, owners given (round-robin, say): for comparisons.
[[nodiscard]] OwnerPlan evaluate_owners(std::span<const Layout> layouts, int mesh_dim, const CostModel& cost,
                                        std::span<const std::int64_t> owners, std::span<const double> compute_us = {});

}  // namespace dtensor
