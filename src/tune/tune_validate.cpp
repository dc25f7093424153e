// `tune validate`: the chosen plan against its competitors, run in rounds on a communicator.
#include "dtensor/tune_validate.hpp"

#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <cstddef>
#include <memory>

#include <fmt/format.h>

#include "dtensor/batch_executor.hpp"
#include "dtensor/cross_mesh_executor.hpp"
#include "dtensor/error.hpp"
#include "dtensor/executor.hpp"
#include "dtensor/explore.hpp"
#include "dtensor/planner.hpp"
#include "dtensor/verify.hpp"
#include "buffer.hpp"
#include "flattened_comm.hpp"

namespace dtensor::tune {
namespace {

// Every mesh dim shards tensor dim `dim`, in ascending (or descending) mesh-dim order.
std::string all_shard(int k, int dim, bool reversed) {
  std::string s;
  for (int m = 0; m < k; ++m) {
    s += fmt::format("S({})", dim);
    if (k > 1) s += fmt::format("[{}]", reversed ? k - 1 - m : m);
  }
  return s;
}
std::string repeat(const char* p, int k) {
  std::string s;
  for (int m = 0; m < k; ++m) s += p;
  return s;
}

// A 2-d shape of about `bytes`: 256 columns where the tensor is large enough (fewer for small
// ones), rows a multiple of the mesh's ranks.
std::vector<std::int64_t> shape_of(std::int64_t bytes, std::int64_t itemsize, std::int64_t ranks) {
  const std::int64_t numel = std::max<std::int64_t>(bytes / itemsize, 1);
  const std::int64_t cols = std::clamp<std::int64_t>(numel / ranks, 1, 256);
  std::int64_t rows = numel / cols;
  if (rows >= ranks) rows -= rows % ranks;
  return {std::max<std::int64_t>(rows, 1), cols};
}

std::string size_str(std::int64_t bytes) {
  if (bytes >= (std::int64_t{1} << 20) && bytes % (std::int64_t{1} << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  if (bytes >= 1024 && bytes % 1024 == 0) return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} B", bytes);
}

// What a plan does, step by step, independent of its costs (which profile priced it): equal
// keys are the same plan.
std::string plan_key(const Plan& p) {
  std::string k = p.src.str() + "|";
  for (const auto& s : p.steps) {
    k += fmt::format("{}:", to_string(s.kind));
    for (int m : s.mesh_dims) k += fmt::format("{},", m);
    k += s.to.str() + ";";
  }
  return k;
}
std::string candidate_key(const Candidate& c) {
  if (c.cross) {
    std::string k = "cross|" + plan_key(c.cross->pre) + "#" + plan_key(c.cross->post) + "#";
    for (const auto& m : c.cross->messages) k += fmt::format("{}>{}:{}:{}-{},", m.from, m.to, m.elements, m.row_begin, m.row_end);
    return k;
  }
  std::string k = c.batch ? "batch|" : "separate|";
  for (const auto& p : c.plans) k += plan_key(p) + "#";
  if (c.batch)
    for (const auto& st : c.batch->stages) {
      k += fmt::format("{}:{}:{}:", to_string(st.kind), st.coalesced, st.grouped);
      for (int m : st.mesh_dims) k += fmt::format("{},", m);
      for (const auto& mb : st.members) k += fmt::format("{}.{},", mb.tensor, mb.step);
      k += ";";
    }
  return k;
}

// The trace with each step's kind and mesh dims: two plans through the same states can differ.
std::string plan_trace(const Plan& p) {
  std::string kinds;
  for (const auto& s : p.steps) {
    if (!kinds.empty()) kinds += ", ";
    kinds += std::string(to_string(s.kind));
    for (std::size_t i = 0; i < s.mesh_dims.size(); ++i) kinds += fmt::format("{}{}", i == 0 ? " " : ",", s.mesh_dims[i]);
  }
  return fmt::format("{}  [{}]", p.trace(), kinds);
}

std::string batch_trace(const BatchPlan& b, bool staged) {
  return staged ? fmt::format("{} tensors in {} stages, {} collectives", b.size(), b.stages.size(), b.collectives())
                : fmt::format("{} tensors one after another, {} collectives", b.size(), b.separate_collectives());
}

void add(std::vector<Candidate>& out, Candidate c) {
  const auto key = candidate_key(c);
  for (auto& o : out)
    if (candidate_key(o) == key) {
      o.also.push_back(c.label);
      return;
    }
  out.push_back(std::move(c));
}

std::string cross_trace(const CrossMeshPlan& p) {
  return fmt::format("{} => {} message(s) => {}", p.pre.trace(), p.messages.size(), p.post.trace());
}

// The candidates of a cross-mesh case: the chosen plan, the transfer with no step inside either
// mesh, the source gathered first, and the route each other profile picks, priced under `model`
// (the same intermediate layouts, senders balanced again under it).
std::vector<Candidate> cross_candidates(const Layout& src, const Layout& dst, const CostModel& model,
                                        const CandidateOptions& o) {
  std::vector<std::int64_t> ranks(static_cast<std::size_t>(src.mesh().num_ranks()));
  for (std::size_t r = 0; r < ranks.size(); ++r) ranks[r] = static_cast<std::int64_t>(r);
  CrossMeshOptions co;
  co.plan.max_peak_bytes = o.max_peak_bytes;
  co.plan.runner_up = false;
  auto plan = [&](const CostModel& m, std::optional<Sharding> src_via, std::optional<Sharding> dst_via) {
    CrossMeshOptions q = co;
    q.src_via = std::move(src_via);
    q.dst_via = std::move(dst_via);
    return plan_cross_mesh(src, ranks, dst, ranks, m, q);
  };
  std::vector<Candidate> out;
  const CrossMeshPlan chosen = plan(model, std::nullopt, std::nullopt);
  add(out, {"chosen", {}, true, {}, std::nullopt, chosen, chosen.total_cost_us, cross_trace(chosen)});
  auto competitor = [&](const std::string& label, auto&& make) {
    try {
      const CrossMeshPlan p = make();
      add(out, {label, {}, false, {}, std::nullopt, p, p.total_cost_us, cross_trace(p)});
    } catch (const Error&) {  // no such route (e.g. not within the memory budget)
    }
  };
  competitor("point-to-point", [&] { return plan(model, src.sharding(), dst.sharding()); });
  competitor("gathered first", [&] {
    return plan(model, Sharding::replicated(src.mesh().ndim(), static_cast<int>(src.shape().size())), std::nullopt);
  });
  for (const auto& m : o.others)
    competitor("best under " + m.name, [&] {
      const CrossMeshPlan theirs = plan(m, std::nullopt, std::nullopt);
      return plan(model, theirs.pre.dst.sharding(), theirs.post.src.sharding());
    });
  return out;
}

// The runner-up (another first step) as a plan the executor runs.
Plan runner_up_plan(const Plan& chosen) {
  Plan p;
  p.src = chosen.src;
  p.dst = chosen.dst;
  p.cost_model = chosen.cost_model;
  p.edges = chosen.edges;
  p.steps = chosen.runner_up->steps;
  p.total_cost_us = chosen.runner_up->total_cost_us;
  for (const auto& s : p.steps) p.peak_bytes = std::max(p.peak_bytes, s.peak_bytes);
  lower_buffers(p);
  validate_plan(p);
  return p;
}


}  // namespace

std::vector<ValidateCase> validate_cases(const Mesh& mesh, std::span<const std::int64_t> bytes, DType dtype) {
  const int k = mesh.ndim();
  const auto s = static_cast<std::int64_t>(itemsize(dtype));
  std::vector<ValidateCase> out;
  for (const std::int64_t b : bytes) {
    if (b < 64 || b > (std::int64_t{1} << 34))
      throw InputError(fmt::format("validate size {} bytes: from 64 bytes to 16 GiB", b));
    const auto shape = shape_of(b, s, mesh.num_ranks());
    const std::string tag = " " + size_str(b);
    auto single = [&](const std::string& name, const std::string& from, const std::string& to) {
      out.push_back({name + tag, {{Layout::parse(mesh, shape, dtype, from), Layout::parse(mesh, shape, dtype, to)}}});
    };
    const std::string fsdp_tp = k == 1 ? "S(0)" : all_shard(k, 0, true);  // dim 0 split by every mesh dim, TP first
    const std::string unsharded = k == 1 ? "R" : repeat("R", k - 1) + "S(0)";
    single(k == 1 ? "fsdp unshard" : "fsdp-tp unshard", fsdp_tp, unsharded);
    if (k > 1) single("fsdp-tp grad reduce-scatter", repeat("P(sum)", k - 1) + "S(0)", fsdp_tp);
    if (k > 1) single("shard-order change", all_shard(k, 0, false), all_shard(k, 0, true));
    single("partial -> replicate", repeat("P(sum)", k), repeat("R", k));
    single("partial -> shard", repeat("P(sum)", k), all_shard(k, 0, false));
    single("transpose", all_shard(k, 0, false), all_shard(k, 1, false));
    // a transformer block's weights unsharded together: column-parallel (S(0) on TP) and
    // row-parallel (S(1) on TP) tensors of a half, a quarter and two eighths of the size
    ValidateCase layer{"layer unshard (4 tensors)" + tag, {}};
    const std::string row_src = k == 1 ? "S(0)" : all_shard(k - 1, 0, false) + "S(1)";
    const std::string row_dst = k == 1 ? "R" : repeat("R", k - 1) + "S(1)";
    int i = 0;
    for (std::int64_t part : {b / 2, b / 4, b / 8, b / 8}) {
      const auto sh = shape_of(std::max<std::int64_t>(part, 64), s, mesh.num_ranks());
      const bool row = i++ % 2 == 1;
      layer.pairs.emplace_back(Layout::parse(mesh, sh, dtype, row ? row_src : fsdp_tp),
                               Layout::parse(mesh, sh, dtype, row ? row_dst : unsharded));
    }
    out.push_back(std::move(layer));
    if (k > 1) {  // training's FSDP+TP weights to tensor parallelism over every rank (inference)
      const Mesh flat(std::vector<std::int64_t>{mesh.num_ranks()});
      out.push_back({"cross-mesh to a flat mesh" + tag, {{Layout::parse(mesh, shape, dtype, all_shard(k - 1, 0, false) + "S(1)"),
                                                          Layout::parse(flat, shape, dtype, "S(1)")}}});
    }
  }
  return out;
}

std::vector<ValidateCase> cases_from_json(std::string_view json) {
  const auto pairs = batch_pairs_from_json(json);
  constexpr std::size_t kMaxCasePairs = 256;  // every pair is run in rounds: a validation, not a model
  if (pairs.size() > kMaxCasePairs)
    throw InputError(fmt::format("a validation case file holds at most {} pairs (every pair runs in rounds), not {}",
                                 kMaxCasePairs, pairs.size()));
  std::vector<ValidateCase> out;
  for (std::size_t i = 0; i < pairs.size(); ++i)
    out.push_back({fmt::format("pair {}", i), {pairs[i]}});
  if (pairs.size() > 1) out.push_back({fmt::format("batch ({} tensors)", pairs.size()), pairs});
  return out;
}

double predict_plan_us(const Plan& plan, const CostModel& model) {
  const RedistributionGraph graph(plan.src, plan.dst, model, EdgeSet::all);
  double total = 0;
  for (std::size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& s = plan.steps[i];
    const auto edges = graph.edges(s.from);
    const auto it = std::find_if(edges.begin(), edges.end(), [&](const GraphEdge& e) {
      return e.to == s.to && e.step.kind == s.kind && e.step.mesh_dims == s.mesh_dims;
    });
    if (it == edges.end())
      throw InputError(fmt::format("step {} ({} {} -> {}) is not an edge of the redistribution graph", i, to_string(s.kind),
                                   s.from.str(), s.to.str()));
    total += it->step.cost_us;
  }
  return total;
}

std::vector<Candidate> validation_candidates(const ValidateCase& c, const CostModel& model, const CandidateOptions& o) {
  if (c.pairs.empty()) throw InputError(fmt::format("validate case {}: no tensors", c.name));
  PlanOptions po;
  po.max_peak_bytes = o.max_peak_bytes;
  std::vector<Candidate> out;
  if (c.pairs.size() == 1 && !(c.pairs.front().first.mesh() == c.pairs.front().second.mesh())) {
    return cross_candidates(c.pairs.front().first, c.pairs.front().second, model, o);
  }
  if (c.pairs.size() == 1) {
    // (named, not a structured binding: the lambda below captures them, which clang 14 refuses)
    const Layout& src = c.pairs.front().first;
    const Layout& dst = c.pairs.front().second;
    po.runner_up = o.runner_up;
    const Plan chosen = plan_redistribution(src, dst, model, po);
    add(out, {"chosen", {}, true, {chosen}, std::nullopt, std::nullopt, chosen.total_cost_us, plan_trace(chosen)});
    if (o.runner_up && chosen.runner_up) {
      const Plan p = runner_up_plan(chosen);
      add(out, {"runner-up", {}, false, {p}, std::nullopt, std::nullopt, p.total_cost_us, plan_trace(p)});
    }
    po.runner_up = false;
    auto competitor = [&](const std::string& label, const CostModel& m, std::optional<EdgeSet> edges) {
      PlanOptions q = po;
      q.edges = edges;
      try {
        const Plan p = plan_redistribution(src, dst, m, q);
        add(out, {label, {}, false, {p}, std::nullopt, std::nullopt, &m == &model ? p.total_cost_us : predict_plan_us(p, model), plan_trace(p)});
      } catch (const Error&) {
        // not plannable there (e.g. no plan on that edge set within the budget): not a competitor
      }
    };
    if (o.pytorch_edges) competitor("pytorch edges", model, EdgeSet::pytorch);
    for (const auto& m : o.others) competitor("best under " + m.name, m, std::nullopt);
    return out;
  }
  const BatchPlan b = plan_batch(c.pairs, model, po);
  std::vector<Plan> plans;
  for (std::size_t t = 0; t < b.size(); ++t) plans.push_back(b.plan(t));
  add(out, {"chosen", {}, true, plans, b, std::nullopt, b.total_cost_us, batch_trace(b, true)});
  add(out, {"per-tensor", {}, false, plans, std::nullopt, std::nullopt, b.separate_cost_us, batch_trace(b, false)});
  if (o.pytorch_edges) {
    po.edges = EdgeSet::pytorch;
    try {
      const BatchPlan t = plan_batch(c.pairs, model, po);
      std::vector<Plan> tp;
      for (std::size_t i = 0; i < t.size(); ++i) tp.push_back(t.plan(i));
      add(out, {"pytorch edges", {}, false, tp, t, std::nullopt, t.total_cost_us, batch_trace(t, true)});
    } catch (const Error&) {
    }
  }
  return out;
}

CaseResult skipped_case(const ValidateCase& c, std::string why) {
  CaseResult r;
  r.name = c.name;
  if (!c.pairs.empty()) {
    const auto& [src, dst] = c.pairs.front();
    r.what = c.pairs.size() == 1 ? fmt::format("{} {}: {} -> {}", shape_str(src.shape()), to_string(src.dtype()),
                                               src.placements_str(), dst.placements_str())
                                 : fmt::format("{} tensors", c.pairs.size());
  }
  r.skipped = std::move(why);
  return r;
}

CaseResult summarise(const ValidateCase& c, std::span<const Candidate> candidates, const Rounds& rounds,
                     const std::vector<bool>& verified) {
  if (verified.size() != candidates.size())
    throw InputError(fmt::format("{} verification results for {} plans", verified.size(), candidates.size()));
  CaseResult r = skipped_case(c, "");
  r.rounds = rounds.rounds();
  r.converged = rounds.converged();
  double fastest = -1, chosen = -1;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const auto& k = candidates[i];
    PlanResult p{k.label, k.also, k.chosen, k.trace, k.predicted_us, rounds.summary(i), 0, verified[i]};
    const double m = p.measured.median_us;
    p.error = m > 0 ? (p.predicted_us - m) / m : 0;
    fastest = fastest < 0 ? m : std::min(fastest, m);
    if (k.chosen) chosen = m;
    r.plans.push_back(std::move(p));
  }
  r.regret = fastest > 0 && chosen >= 0 ? chosen / fastest - 1 : 0;
  // order agreement: pairs the model tells apart, measured in the same order (a measured tie
  // does not contradict it)
  for (std::size_t i = 0; i < r.plans.size(); ++i)
    for (std::size_t j = i + 1; j < r.plans.size(); ++j) {
      const double dp = r.plans[i].predicted_us - r.plans[j].predicted_us;
      if (std::abs(dp) <= 1e-9 * std::max(r.plans[i].predicted_us, r.plans[j].predicted_us)) continue;
      ++r.pairs_compared;
      const double dm = r.plans[i].measured.median_us - r.plans[j].measured.median_us;
      if (dp * dm >= 0) ++r.pairs_agreeing;
    }
  return r;
}

namespace {

// Every rank's input, output twice (the run's and verification's copy) and `workspace`, in bytes.
long double tensor_bytes(const Layout& src, const Layout& dst, std::int64_t workspace) {
  const auto s = static_cast<long double>(itemsize(src.dtype()));
  long double total = 0;
  for (std::int64_t r = 0; r < src.mesh().num_ranks(); ++r)
    total += static_cast<long double>(src.local_numel(src.mesh().coord_of_rank(r))) * s;
  for (std::int64_t r = 0; r < dst.mesh().num_ranks(); ++r)
    total += static_cast<long double>(dst.local_numel(dst.mesh().coord_of_rank(r))) * s * 2;
  return total + static_cast<long double>(src.mesh().num_ranks()) * static_cast<long double>(workspace);
}

}  // namespace

std::int64_t validation_bytes(std::span<const Candidate> candidates) {
  long double total = 0;
  for (const auto& c : candidates) {
    if (c.cross) {
      total += tensor_bytes(c.cross->src, c.cross->dst, c.cross->pre.peak_bytes + c.cross->post.peak_bytes);
      continue;
    }
    for (const auto& p : c.plans) total += tensor_bytes(p.src, p.dst, p.peak_bytes);
    if (c.batch && !c.plans.empty())
      total += static_cast<long double>(c.plans.front().mesh().num_ranks()) * static_cast<long double>(c.batch->staging_bytes());
  }
  return total >= static_cast<long double>(INT64_MAX) ? INT64_MAX : static_cast<std::int64_t>(total);
}

namespace {

// One candidate made runnable on this rank: its executors and buffers in the communicator's memory.
class Runnable {
 public:
  Runnable(const Candidate& c, Communicator& comm, bool check) : comm_(comm), check_(check) {
    if (c.cross) {  // both meshes over the communicator's ranks, each a flattening of its mesh
      auto side = [&](const Mesh& m) -> Communicator* {
        if (m == comm.mesh()) return &comm;
        flat_.push_back(std::make_unique<detail::FlattenedCommunicator>(comm, m));
        return flat_.back().get();
      };
      Communicator* on_src = side(c.cross->src.mesh());
      Communicator* on_dst = side(c.cross->dst.mesh());
      cross_ = std::make_unique<CrossMeshExecutor>(*c.cross, comm, on_src, on_dst);
      add_tensor(*cross_, c.cross->src, c.cross->dst);
    } else {
      if (c.batch) batch_ = std::make_unique<BatchExecutor>(*c.batch, comm);
      for (std::size_t t = 0; t < c.plans.size(); ++t) {
        if (!batch_) own_.push_back(std::make_unique<Executor>(c.plans[t], comm));
        add_tensor(batch_ ? batch_->executor(t) : *own_.back(), c.plans[t].src, c.plans[t].dst);
      }
      if (batch_) staging_ = std::make_unique<detail::Buffer>(comm.memory(), static_cast<std::size_t>(batch_->staging_bytes()));
    }
    for (const auto& b : tensors_)
      buffers_.push_back({{b.in->data(), b.in->size()}, {b.out->data(), b.out->size()}, {b.ws->data(), b.ws->size()}});
  }
  void run() const {
    if (cross_) {
      cross_->execute(buffers_.front());
    } else if (batch_) {
      batch_->execute(buffers_, {staging_->data(), staging_->size()});
    } else {
      for (std::size_t t = 0; t < own_.size(); ++t) own_[t]->execute(buffers_[t]);
    }
    comm_.synchronize();
    comm_.memory().wait();
  }
  [[nodiscard]] bool verify() const {
    if (!check_) return true;
    for (std::size_t t = 0; t < tensors_.size(); ++t)
      if (!verify_rank_output(targets_[t], comm_.rank(), tensors_[t].out->download()).empty()) return false;
    return true;
  }

 private:
  struct Tensor {
    std::unique_ptr<detail::Buffer> in, out, ws;
  };
  // One tensor's buffers as its executor (plain, a batch's, cross-mesh) sizes them, the input
  // seeded, and the layout its output is verified against.
  template <class E>
  void add_tensor(const E& ex, const Layout& src, const Layout& dst) {
    auto& m = comm_.memory();
    tensors_.push_back({std::make_unique<detail::Buffer>(m, static_cast<std::size_t>(ex.input_bytes())),
                        std::make_unique<detail::Buffer>(m, static_cast<std::size_t>(ex.output_bytes())),
                        std::make_unique<detail::Buffer>(m, static_cast<std::size_t>(ex.workspace_bytes()))});
    if (check_) tensors_.back().in->upload(seeded_input(src, comm_.rank()));
    targets_.push_back(dst);
  }
  Communicator& comm_;
  bool check_;
  std::vector<std::unique_ptr<detail::FlattenedCommunicator>> flat_;
  std::unique_ptr<CrossMeshExecutor> cross_;
  std::unique_ptr<BatchExecutor> batch_;
  std::vector<std::unique_ptr<Executor>> own_;
  std::vector<Tensor> tensors_;
  std::vector<Layout> targets_;
  std::unique_ptr<detail::Buffer> staging_;
  std::vector<Buffers> buffers_;
};

double slowest(Communicator& comm, double mine) {
  double out = 0;
  for (auto t : comm.exchange(std::bit_cast<std::uint64_t>(mine))) out = std::max(out, std::bit_cast<double>(t));
  return out;
}

}  // namespace

namespace {

// The candidates `plan` returns, or the planning error that skips the case.
std::shared_ptr<const CandidateMemo::Entry> planned_entry(const std::function<std::vector<Candidate>()>& plan) {
  auto e = std::make_shared<CandidateMemo::Entry>();
  try {
    e->candidates = plan();
  } catch (const Error& err) {
    e->error = err.what();
  }
  return e;
}

}  // namespace

std::shared_ptr<const CandidateMemo::Entry> CandidateMemo::get(std::size_t index, const ValidateCase& c, const CostModel& model,
                                                              const std::function<std::vector<Candidate>()>& plan) {
  const std::lock_guard lock(mutex_);  // (planning never yields to another simulated rank)
  const auto it = entries_.find(index);
  if (it != entries_.end()) {
    if (it->second.case_name != c.name || it->second.profile != model.name)
      throw InputError(fmt::format("validate: the shared candidates of case {} are for '{}' under '{}', not '{}' under '{}'",
                                   index, it->second.case_name, it->second.profile, c.name, model.name));
    return it->second.entry;
  }
  auto e = planned_entry(plan);
  entries_.emplace(index, Keyed{c.name, model.name, e});
  return e;
}

ValidationReport validate(Communicator& comm, const CostModel& model, std::span<const ValidateCase> cases,
                          const ValidateOptions& o, const std::function<double()>& now_us) {
  ValidationReport report;
  report.profile = model.name;
  for (const auto& m : o.candidates.others) report.others.push_back(m.name);
  report.mesh = comm.mesh().str();
  for (const auto& c : cases) {
    // sources on the communicator's mesh; a target there too, or (a cross-mesh case: one pair)
    // on a flattening of it
    for (const auto& [src, dst] : c.pairs) {
      if (!(src.mesh() == comm.mesh()))
        throw InputError(fmt::format("validate case {}: mesh {} is not the communicator's {}", c.name, src.mesh().str(),
                                     comm.mesh().str()));
      if (!(dst.mesh() == comm.mesh()) &&
          (c.pairs.size() > 1 || !detail::FlattenedCommunicator::flattens(comm.mesh(), dst.mesh())))
        throw InputError(fmt::format("validate case {}: mesh {} is not the communicator's {} nor a flattening of it", c.name,
                                     dst.mesh().str(), comm.mesh().str()));
    }
    const auto plan = [&] { return validation_candidates(c, model, o.candidates); };
    const auto planned = o.memo ? o.memo->get(static_cast<std::size_t>(&c - cases.data()), c, model, plan) : planned_entry(plan);
    if (!planned->error.empty()) {  // the same on every rank: planning is deterministic
      report.cases.push_back(skipped_case(c, planned->error));
      continue;
    }
    const std::vector<Candidate>& candidates = planned->candidates;
    if (o.on_case && comm.rank() == 0) o.on_case(static_cast<std::size_t>(&c - cases.data()), cases.size(), c, candidates.size());
    Rounds rounds(candidates.size(), o.rounds);
    std::vector<std::unique_ptr<Runnable>> runs;
    std::vector<bool> verified;
    for (const auto& k : candidates) {
      runs.push_back(std::make_unique<Runnable>(k, comm, o.check_outputs));
      // warm-up, and the run verified; a timing-only simulation has nothing to warm up nor verify
      if (o.check_outputs || !o.rounds.deterministic) runs.back()->run();
      if (!o.check_outputs) {
        verified.push_back(true);
        continue;
      }
      const auto oks = comm.exchange(runs.back()->verify() ? 1 : 0);
      verified.push_back(std::all_of(oks.begin(), oks.end(), [](std::uint64_t x) { return x == 1; }));
    }
    std::vector<double> times(candidates.size());
    while (!rounds.done()) {
      for (const std::size_t i : rounds.order()) {
        (void)comm.exchange(0);  // every rank starts the plan together
        const double t0 = now_us();
        runs[i]->run();
        times[i] = now_us() - t0;
      }
      for (auto& t : times) t = slowest(comm, t);
      rounds.add(times);
    }
    report.cases.push_back(summarise(c, candidates, rounds, verified));
  }
  return report;
}

}  // namespace dtensor::tune
