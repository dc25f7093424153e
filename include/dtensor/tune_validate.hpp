#pragma once
// Does the cost model pick the fastest plan? (`dtensor tune validate`, `python -m dtensor.tune
// validate`; docs/cost-model.md, "Validating on your cluster".) For each case the plan the
// planner chooses is run against its competitors -- the runner-up with another first step, the
// optimal plan on PyTorch's edge set, the best plan of every other profile named, a batch's
// per-tensor plans -- in rotated rounds until every median is known to 5%, and the report gives
// per plan predicted and measured time, per case whether the model orders the plans as the
// hardware does, and the regret: what choosing by the model cost against the fastest plan run.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "dtensor/batch_plan.hpp"
#include "dtensor/comm.hpp"
#include "dtensor/cost_model.hpp"
#include "dtensor/cross_mesh_plan.hpp"
#include "dtensor/layout.hpp"
#include "dtensor/plan.hpp"
#include "dtensor/tune_report.hpp"
#include "dtensor/tune_rounds.hpp"

namespace dtensor::tune {

// One case: a redistribution (one pair) or one layer's tensors moved together (several pairs,
// planned as a batch), all on one mesh; or a cross-mesh transfer (one pair whose target's mesh
// flattens consecutive dims of the source's, over the same ranks: 2x4 -> 8).
struct ValidateCase {
  std::string name;
  std::vector<std::pair<Layout, Layout>> pairs;
};

// The built-in set on `mesh`, every case at each tensor size in `bytes` (f32 by default; the
// 2-d tensors are sized to the bytes, rows a multiple of the mesh's ranks where the size allows):
// the FSDP+TP unshard and gradient reduce-scatter, a shard-order change (2-d meshes and up),
// Partial -> Replicate and Partial -> Shard reductions, a transpose, a batched layer (four
// tensors of a transformer block unsharded together), and (2-d meshes and up) a cross-mesh
// transfer of FSDP+TP weights to tensor parallelism over the flattened mesh. InputError for a size below 64 bytes or
// above 2^34.
[[nodiscard]] std::vector<ValidateCase> validate_cases(const Mesh& mesh, std::span<const std::int64_t> bytes,
                                                       DType dtype = DType::f32);
// The cases of a batch file (the JSON of `dtensor plan --batch`, read as untrusted input): every
// pair its own case, and all of them together as one batched case when there are two or more.
[[nodiscard]] std::vector<ValidateCase> cases_from_json(std::string_view json);

// A plan run in the comparison. `plans` holds one plan, or a batch's plans (run as `batch`'s
// stages when set, else one after another); a cross-mesh case's plan is `cross` (plans empty).
struct Candidate {
  // "chosen", "runner-up", "pytorch edges", "best under NAME", "per-tensor"; cross-mesh:
  // "point-to-point" (no step inside either mesh), "gathered first" (A replicates, then sends)
  std::string label;
  std::vector<std::string> also;   // the labels of other candidates that are this same plan
  bool chosen = false;             // the plan the validated profile picks
  std::vector<Plan> plans;
  std::optional<BatchPlan> batch;
  std::optional<CrossMeshPlan> cross;
  double predicted_us = 0;         // under the validated profile
  std::string trace;
};
struct CandidateOptions {
  // Other profiles whose best plan competes (each priced under the validated profile).
  std::vector<CostModel> others;
  bool pytorch_edges = true;       // the optimal plan on PyTorch's edge set
  bool runner_up = true;           // the best plan with another first step
  std::optional<std::int64_t> max_peak_bytes;  // the memory budget every plan must keep
};
// The candidates of a case under `model`: the chosen plan first, the others in the order above,
// each distinct plan once (a plan several sources name carries their labels in `also`). Throws
// dtensor::Error when the chosen plan cannot be planned (e.g. under the memory budget); a
// competitor that cannot is left out. Deterministic.
[[nodiscard]] std::vector<Candidate> validation_candidates(const ValidateCase& c, const CostModel& model,
                                                           const CandidateOptions& options = {});

// The memory a case's run holds at once on all of its mesh's ranks (the candidates' runnables are
// alive together): per candidate and tensor, every rank's input, output (and the output again, as
// verification downloads it) and workspace, a batch's staging, a cross-mesh plan's steps on both
// sides. Saturates at INT64_MAX. What `tune validate --sim-memory-limit` checks before allocating.
[[nodiscard]] std::int64_t validation_bytes(std::span<const Candidate> candidates);

// A plan's time under `model` (each step priced as the planner prices that edge): how a plan
// another profile chose is predicted under this one. InputError when a step is not an edge of
// the graph (a plan from elsewhere).
[[nodiscard]] double predict_plan_us(const Plan& plan, const CostModel& model);

// The case's line from its candidates, the rounds run and which candidates verified.
[[nodiscard]] CaseResult summarise(const ValidateCase& c, std::span<const Candidate> candidates, const Rounds& rounds,
                                   const std::vector<bool>& verified);
[[nodiscard]] CaseResult skipped_case(const ValidateCase& c, std::string why);

// SPMD: every rank of the communicator's mesh calls it with the same arguments; buffers in
// comm.memory() (host for threads and MPI, the GPU's for NCCL); `now_us` reads this rank's clock
// (wall or virtual). Each candidate runs once untimed (its output verified on every rank), then
// in rounds. Every rank gets the same report (profile, mesh and clock fields left for the caller).
// The candidates of each case planned once for all callers of one validation in a process: the
// simulated ranks of an SMPI run are one process (docs/virtual-cluster.md), and planning every
// candidate on every one of 1,024 ranks would dominate the simulation's wall time (a cross-mesh
// plan at 1,024 ranks takes seconds). Planning is deterministic, so every rank would have planned
// the same. Thread-safe. Entries are keyed by the case's index in `cases` and checked against its
// name and the validated profile's, so a memo handed to a different validation throws InputError.
class CandidateMemo {
 public:
  struct Entry {
    std::vector<Candidate> candidates;
    std::string error;  // the planning error (the case is skipped) when not empty
  };
  // The entry for case `index`, planned by `plan` (returning the candidates, or throwing
  // dtensor::Error) the first time it is asked for.
  std::shared_ptr<const Entry> get(std::size_t index, const ValidateCase& c, const CostModel& model,
                                   const std::function<std::vector<Candidate>()>& plan);

 private:
  struct Keyed {
    std::string case_name, profile;
    std::shared_ptr<const Entry> entry;
  };
  std::mutex mutex_;
  std::map<std::size_t, Keyed> entries_;
};

struct ValidateOptions {
  CandidateOptions candidates;
  RoundOptions rounds;
  // false: a timing-only run (folded buffers on a simulated cluster, docs/virtual-cluster.md):
  // inputs are not seeded nor outputs checked (every plan reported verified); the caller says so.
  bool check_outputs = true;
  // Not owned: the candidates shared by every caller in this process (nullptr: each plans its own).
  CandidateMemo* memo = nullptr;
  // Called on rank 0 as each case starts (its index, the case count, the case, its plans): the
  // progress of a long run (a simulated cluster of 1,024 ranks takes minutes per case).
  std::function<void(std::size_t, std::size_t, const ValidateCase&, std::size_t)> on_case;
};
[[nodiscard]] ValidationReport validate(Communicator& comm, const CostModel& model, std::span<const ValidateCase> cases,
                                        const ValidateOptions& options, const std::function<double()>& now_us);

}  // namespace dtensor::tune
