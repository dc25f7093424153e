#pragma once
// Batched redistribution, the plan (docs/batch.md; batch.hpp adds its executor): many tensors
// on one mesh, each on its own optimal plan, their steps scheduled into stages; a stage of two or more tensors whose steps run the same
// collective (kind, mesh dims, dtype, reduce op) issues it once over their concatenated chunks,
// which pays one latency instead of one per tensor.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dtensor/plan_cache.hpp"
#include "dtensor/planner.hpp"

namespace dtensor {

// One stage: a step of each member tensor. `coalesced`: one collective over the members'
// concatenated chunks (packed into and unpacked from the batch's staging buffer). `grouped`: the
// members' own collectives, each on its own buffers (no staging, no packing), issued as one group
// (Communicator::group_begin/group_end: one launch on NCCL). Otherwise each member's step runs on
// its own (local steps, direct exchanges, a lone member).
struct BatchStage {
  StepKind kind = StepKind::relabel;  // local stages: the first member's kind
  std::vector<int> mesh_dims;         // the collective's group (empty for local and direct stages)
  struct Member {
    std::int32_t tensor = 0;  // the tensor (BatchPlan::plan(tensor))
    std::int32_t step = 0;    // index into that plan's steps
    friend bool operator==(const Member&, const Member&) = default;
  };
  std::vector<Member> members;
  bool coalesced = false;
  bool grouped = false;
  double cost_us = 0;
  friend bool operator==(const BatchStage&, const BatchStage&) = default;
};

struct BatchPlan {
  // The plans, each distinct plan once (in order of first use), and per tensor (in the order
  // given) the index of its plan: a model's tensors repeat a few shapes and layouts, so a batch
  // of 2^20 tensors holds its few distinct plans, not 2^20 copies (docs/batch.md).
  std::vector<Plan> distinct_plans;
  std::vector<std::uint32_t> plan_index;
  std::vector<BatchStage> stages;
  double total_cost_us = 0;     // the stages' costs
  double separate_cost_us = 0;  // the plans run one after another
  std::string cost_model;

  // Tensors in the batch, and tensor t's plan.
  [[nodiscard]] std::size_t size() const noexcept { return plan_index.size(); }
  [[nodiscard]] const Plan& plan(std::size_t t) const { return distinct_plans[plan_index[t]]; }
  // Sets the tensors' plans, each distinct plan kept once (equal plans share one entry).
  void set_plans(std::span<const Plan> plans);

  // Collectives issued (a coalesced stage counts once, a grouped stage as one launch), and without
  // batching.
  [[nodiscard]] std::int64_t collectives() const;
  [[nodiscard]] std::int64_t separate_collectives() const;
  // Largest staging buffer one rank needs for the coalesced stages (bytes; rank-independent
  // upper bound over ranks).
  [[nodiscard]] std::int64_t staging_bytes() const;
  // Stable across processes and platforms: the plans' hashes and the stage list.
  [[nodiscard]] std::uint64_t hash() const;
  [[nodiscard]] std::string to_json(int indent = -1) const;
  // Untrusted input: every plan is validated (validate_plan), and the stages must be exactly what
  // the batch scheduler allows (docs/batch.md); InputError names the offending entry.
  [[nodiscard]] static BatchPlan from_json(std::string_view json);
  friend bool operator==(const BatchPlan&, const BatchPlan&) = default;
};

// Largest batch accepted.
inline constexpr std::size_t kMaxBatchTensors = std::size_t{1} << 20;

// Plans every pair (each on its own optimal plan under `cost`), then schedules their steps into
// stages (deterministic: the same inputs give the bit-identical batch plan on every rank). Throws
// InputError for an empty batch, more than kMaxBatchTensors pairs, pairs on different meshes, or
// any pair plan_redistribution refuses (naming the pair's index).
[[nodiscard]] BatchPlan plan_batch(std::span<const std::pair<Layout, Layout>> pairs, const CostModel& cost,
                                   const PlanOptions& options = {});

// The stages of a batch whose per-tensor plans are given (each must be a valid plan of `cost` on
// one mesh, e.g. one of optimal_plans()): what plan_batch does after choosing the plans.
[[nodiscard]] BatchPlan plan_batch_from(std::vector<Plan> plans, const CostModel& cost, const PlanOptions& options = {});

// Bounded, thread-safe LRU of batch plans keyed by the pairs (mesh, shapes, dtypes, both
// shardings of each, in order), the cost model's fingerprint and the options: what a training
// loop that moves the same tensors every step looks up instead of planning again. Planning
// happens outside the lock; a refused batch is not cached.
class BatchPlanCache {
 public:
  explicit BatchPlanCache(std::size_t capacity = 256);
  [[nodiscard]] std::shared_ptr<const BatchPlan> get_or_plan(std::span<const std::pair<Layout, Layout>> pairs,
                                                             const CostModel& cost, const PlanOptions& options = {});
  [[nodiscard]] PlanCacheStats stats() const;
  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
  void clear();

  ~BatchPlanCache();
  BatchPlanCache(const BatchPlanCache&) = delete;
  BatchPlanCache& operator=(const BatchPlanCache&) = delete;

 private:
  struct Impl;
  std::size_t capacity_;
  std::unique_ptr<Impl> impl_;
};

// Checks a batch plan's structure (what from_json and the batch executor run): plans valid and on
// one mesh, every (tensor, step) in exactly one stage, each tensor's steps in order, members of a
// coalesced stage sharing one collective (kind, mesh dims, dtype, reduce op), costs as recomputed.
void validate_batch_plan(const BatchPlan& batch);

// The pairs of a batch file (docs/cli.md, `dtensor plan --batch`):
//   {"version": 1, "mesh": [2, 4], "mesh_names": [...], "mesh_ranks": [...],
//    "pairs": [{"shape": [4096, 4096], "dtype": "bf16", "from": "S(0)R", "to": "RR"}, ...]}
// with the mesh written as the library's layout JSON writes it. Strict: unknown fields, a missing
// field, an empty list or more than kMaxBatchTensors pairs are errors naming the entry.
[[nodiscard]] std::vector<std::pair<Layout, Layout>> batch_pairs_from_json(std::string_view json);

// Stages, members, collectives against per-tensor planning.
[[nodiscard]] std::string explain(const BatchPlan& batch);

}  // namespace dtensor
