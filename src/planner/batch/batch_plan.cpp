// A batch plan's value (batch_plan.hpp, docs/batch.md): its counts, validation, hash, JSON and
// explanation. The planner that makes one is batch_schedule.cpp.
#include "dtensor/batch_plan.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "batch_stage.hpp"
#include "dtensor/error.hpp"
#include "dtensor/ragged_bucket.hpp"
#include "placement/hash.hpp"
#include "placement/json_fields.hpp"

namespace dtensor {

using namespace batch_detail;
using nlohmann::json;
using ordered = nlohmann::ordered_json;

void BatchPlan::set_plans(std::span<const Plan> plans) {
  std::vector<const Plan*> per_tensor;
  per_tensor.reserve(plans.size());
  for (const auto& p : plans) per_tensor.push_back(&p);
  assign_plans(*this, per_tensor);
}

std::int64_t BatchPlan::collectives() const {
  std::int64_t n = 0;
  for (const auto& st : stages) {
    if (st.coalesced || st.grouped) {
      ++n;
      continue;
    }
    for (const auto& m : st.members)
      n += is_local(plan(static_cast<std::size_t>(m.tensor)).steps[static_cast<std::size_t>(m.step)].kind) ? 0 : 1;
  }
  return n;
}

std::int64_t BatchPlan::separate_collectives() const {
  std::vector<std::int64_t> per(distinct_plans.size(), 0);
  for (std::size_t i = 0; i < distinct_plans.size(); ++i)
    for (const auto& s : distinct_plans[i].steps) per[i] += is_local(s.kind) ? 0 : 1;
  std::int64_t n = 0;
  for (auto i : plan_index) n += per[i];
  return n;
}

std::int64_t BatchPlan::staging_bytes() const {
  std::int64_t b = 0;
  const PlanList P(*this);
  for (const auto& st : stages) b = std::max(b, stage_staging_bytes(P, st));
  return b;
}

void validate_batch_plan(const BatchPlan& b) {
  const std::size_t T = b.size();
  if (T == 0) throw InputError("batch plan has no tensors");
  if (T > kMaxBatchTensors)
    throw InputError(fmt::format("batch plan has {} tensors, above the limit of {}", T, kMaxBatchTensors));
  if (b.distinct_plans.empty() || b.distinct_plans.size() > T)
    throw InputError(fmt::format("batch plan has {} distinct plans for {} tensors", b.distinct_plans.size(), T));
  std::vector<char> used(b.distinct_plans.size(), 0);
  for (std::size_t t = 0; t < T; ++t) {
    if (b.plan_index[t] >= b.distinct_plans.size())
      throw InputError(fmt::format("batch plan tensor {}'s plan {} is not one of its {} distinct plans", t, b.plan_index[t],
                                   b.distinct_plans.size()));
    used[b.plan_index[t]] = 1;
  }
  for (std::size_t i = 0; i < used.size(); ++i)
    if (!used[i]) throw InputError(fmt::format("batch plan's distinct plan {} is no tensor's plan", i));
  const PlanList P(b);
  const Mesh& mesh = P[0].mesh();
  double separate = 0;
  for (std::size_t i = 0; i < T; ++i) {
    if (P[i].mesh() != mesh)
      throw InputError(fmt::format("batch plan tensor {} is on mesh {}, tensor 0 on {}", i, P[i].mesh().str(), mesh.str()));
    separate += P[i].total_cost_us;
  }
  if (!close(separate, b.separate_cost_us))
    throw InputError(fmt::format("batch plan separate_cost_us {} is not its plans' total {}", b.separate_cost_us, separate));
  std::vector<std::size_t> next(T, 0), seen_in(T, SIZE_MAX);  // a tensor's next step; the last stage it was in
  double total = 0;
  for (std::size_t k = 0; k < b.stages.size(); ++k) {
    const BatchStage& st = b.stages[k];
    auto bad = [&](const std::string& what) { return InputError(fmt::format("batch plan stage {}: {}", k, what)); };
    if (st.members.empty()) throw bad("no members");
    if (!std::isfinite(st.cost_us) || st.cost_us < 0) throw bad(fmt::format("cost {} is not a finite non-negative time", st.cost_us));
    for (const auto& m : st.members) {
      if (m.tensor < 0 || static_cast<std::size_t>(m.tensor) >= T)
        throw bad(fmt::format("member tensor {} is not one of the {} tensors", m.tensor, T));
      const auto t = static_cast<std::size_t>(m.tensor);
      if (seen_in[t] == k) throw bad(fmt::format("tensor {} appears twice", t));
      seen_in[t] = k;
      if (m.step < 0 || static_cast<std::size_t>(m.step) != next[t])
        throw bad(fmt::format("tensor {} runs step {} where its step {} is next", t, m.step, next[t]));
      if (next[t] >= P[t].steps.size()) throw bad(fmt::format("tensor {} has no step {}", t, m.step));
      ++next[t];
    }
    const auto& f = P[static_cast<std::size_t>(st.members.front().tensor)];
    const Step& s0 = f.steps[static_cast<std::size_t>(st.members.front().step)];
    if (st.kind != s0.kind) throw bad(fmt::format("kind {} but its first member's step is {}", to_string(st.kind), to_string(s0.kind)));
    if (st.coalesced && st.grouped) throw bad("a stage is coalesced or grouped, not both");
    if (st.grouped || st.coalesced) {
      // one launch for several members: each member's step must be the same collective
      const char* what = st.grouped ? "grouped" : "coalesced";
      if (st.members.size() < 2) throw bad(fmt::format("a {} stage needs two members or more", what));
      if (st.grouped ? !is_collective(st.kind) : !coalescible(st.kind))
        throw bad(fmt::format("{} steps do not {}", to_string(st.kind), st.grouped ? "group" : "coalesce"));
      const Key k = key_of(f, s0);
      if (st.mesh_dims != k.mesh_dims) throw bad("its mesh dims are not its members'");
      for (const auto& m : st.members) {
        const Plan& p = P[static_cast<std::size_t>(m.tensor)];
        if (!(key_of(p, p.steps[static_cast<std::size_t>(m.step)]) == k))
          throw bad(fmt::format("tensor {}'s step is not the same collective (kind, mesh dims, dtype, reduce op)", m.tensor));
      }
      if (st.cost_us > members_cost(P, st) * (1 + 1e-9) + 1e-6)
        throw bad(fmt::format("{} cost {} above its members' {}", what, st.cost_us, members_cost(P, st)));
    } else {
      if (st.members.size() > 1)
        for (const auto& m : st.members)
          if (!is_local(P[static_cast<std::size_t>(m.tensor)].steps[static_cast<std::size_t>(m.step)].kind))
            throw bad(fmt::format("tensor {}'s step communicates: a stage of several members that is neither coalesced nor grouped runs local steps only", m.tensor));
      const std::vector<int> dims = st.members.size() == 1 && is_collective(s0.kind) ? s0.mesh_dims : std::vector<int>{};
      if (st.mesh_dims != dims) throw bad("its mesh dims are not its member's");
      if (!close(st.cost_us, members_cost(P, st)))
        throw bad(fmt::format("cost {} is not its members' {}", st.cost_us, members_cost(P, st)));
    }
    total += st.cost_us;
  }
  for (std::size_t t = 0; t < T; ++t)
    if (next[t] != P[t].steps.size())
      throw InputError(fmt::format("batch plan runs {} of tensor {}'s {} steps", next[t], t, P[t].steps.size()));
  if (!close(total, b.total_cost_us))
    throw InputError(fmt::format("batch plan total_cost_us {} is not its stages' total {}", b.total_cost_us, total));
}

std::uint64_t BatchPlan::hash() const {
  std::string canon = fmt::format("batch|{}|{}", cost_model, size());
  std::vector<std::string> hashes;
  for (const auto& p : distinct_plans) hashes.push_back(fmt::format("|{:016x}", p.hash()));
  for (auto i : plan_index) canon += hashes[i];
  for (const auto& st : stages) {
    canon += fmt::format(";{}:{}:{}:{}", to_string(st.kind), fmt::join(st.mesh_dims, ","), st.coalesced ? 1 : st.grouped ? 2 : 0,
                         std::llround(st.cost_us * 1e6));
    for (const auto& m : st.members) canon += fmt::format(",{}.{}", m.tensor, m.step);
  }
  return detail::fnv1a(canon.data(), canon.size());
}

std::string BatchPlan::to_json(int indent) const {
  ordered j;
  j["version"] = 1;
  j["kind"] = "batch";
  j["cost_model"] = cost_model;
  j["tensors"] = size();
  j["total_cost_us"] = total_cost_us;
  j["separate_cost_us"] = separate_cost_us;
  j["collectives"] = collectives();
  j["separate_collectives"] = separate_collectives();
  j["staging_bytes"] = staging_bytes();
  j["batch_hash"] = fmt::format("{:016x}", hash());
  j["stages"] = ordered::array();
  for (const auto& st : stages) {
    ordered s;
    s["kind"] = std::string(to_string(st.kind));
    s["mesh_dims"] = st.mesh_dims;
    s["coalesced"] = st.coalesced;
    if (st.grouped) s["grouped"] = true;  // absent: false (files written before grouping read the same)
    s["cost_us"] = st.cost_us;
    ordered members = ordered::array();
    for (const auto& m : st.members) members.push_back({m.tensor, m.step});
    s["members"] = members;
    j["stages"].push_back(s);
  }
  j["plans"] = ordered::array();
  std::vector<ordered> distinct;
  for (const auto& p : distinct_plans) distinct.push_back(ordered::parse(p.to_json()));
  for (auto i : plan_index) j["plans"].push_back(distinct[i]);
  return j.dump(indent);
}

BatchPlan BatchPlan::from_json(std::string_view text) {
  const json j = detail::parse_json(text, "batch plan");
  if (!j.is_object()) throw InputError("batch plan JSON must be an object");
  auto field = [&](const json& o, const char* key) -> const json& {
    auto it = o.find(key);
    if (it == o.end()) throw InputError(fmt::format("batch plan JSON lacks the field '{}'", key));
    return *it;
  };
  auto number = [&](const json& o, const char* key) {
    const json& v = field(o, key);
    if (!v.is_number() || !std::isfinite(v.get<double>()))
      throw InputError(fmt::format("batch plan JSON field '{}' must be a finite number, not {}", key, detail::json_quote(v)));
    return v.get<double>();
  };
  if (detail::json_int(field(j, "version"), "version", 1, 1 << 20) != 1)
    throw InputError("batch plan JSON version must be 1");
  if (field(j, "kind") != "batch") throw InputError("batch plan JSON 'kind' must be \"batch\"");
  BatchPlan b;
  const json& cm = field(j, "cost_model");
  if (!cm.is_string()) throw InputError("batch plan JSON 'cost_model' must be a string");
  b.cost_model = cm.get<std::string>();
  b.total_cost_us = number(j, "total_cost_us");
  b.separate_cost_us = number(j, "separate_cost_us");
  const json& plans = field(j, "plans");
  if (!plans.is_array() || plans.empty() || plans.size() > kMaxBatchTensors)
    throw InputError(fmt::format("batch plan JSON 'plans' must be a list of 1 to {} plans", kMaxBatchTensors));
  // each distinct plan kept once, as plan_batch keeps them (equal plans share an entry)
  DistinctPlans distinct;
  for (std::size_t i = 0; i < plans.size(); ++i) {
    Plan p;
    try {
      p = Plan::from_json(plans[i].dump());
    } catch (const InputError& e) {
      throw InputError(fmt::format("batch plan JSON plans[{}]: {}", i, e.what()));
    }
    if (p.cost_model != b.cost_model)
      throw InputError(fmt::format("batch plan JSON plans[{}] was planned under cost model {}, the batch under {}", i,
                                   quote_input(p.cost_model), quote_input(b.cost_model)));
    b.plan_index.push_back(distinct.add(std::move(p)));
  }
  b.distinct_plans = std::move(distinct).take();
  const json& stages = field(j, "stages");
  if (!stages.is_array()) throw InputError("batch plan JSON 'stages' must be a list");
  std::size_t total_steps = 0;
  for (auto i : b.plan_index) total_steps += b.distinct_plans[i].steps.size();
  if (stages.size() > total_steps)
    throw InputError(fmt::format("batch plan JSON has {} stages for {} steps", stages.size(), total_steps));
  const auto T = static_cast<std::int64_t>(b.size());
  for (std::size_t k = 0; k < stages.size(); ++k) {
    const json& s = stages[k];
    if (!s.is_object()) throw InputError(fmt::format("batch plan JSON stages[{}] must be an object", k));
    BatchStage st;
    const json& kind = field(s, "kind");
    if (!kind.is_string()) throw InputError(fmt::format("batch plan JSON stages[{}].kind must be a string", k));
    st.kind = parse_step_kind(kind.get<std::string>());
    const int md = b.plan(0).mesh().ndim();
    for (auto m : detail::json_int_list(field(s, "mesh_dims"), "mesh_dims", 0, md - 1)) st.mesh_dims.push_back(static_cast<int>(m));
    const json& co = field(s, "coalesced");
    if (!co.is_boolean()) throw InputError(fmt::format("batch plan JSON stages[{}].coalesced must be true or false", k));
    st.coalesced = co.get<bool>();
    if (s.contains("grouped")) {
      const json& gr = s["grouped"];
      if (!gr.is_boolean()) throw InputError(fmt::format("batch plan JSON stages[{}].grouped must be true or false", k));
      st.grouped = gr.get<bool>();
    }
    st.cost_us = number(s, "cost_us");
    const json& members = field(s, "members");
    if (!members.is_array() || members.empty() || members.size() > b.size())
      throw InputError(fmt::format("batch plan JSON stages[{}].members must be a list of 1 to {} [tensor, step] pairs", k, T));
    for (const auto& m : members) {
      if (!m.is_array() || m.size() != 2)
        throw InputError(fmt::format("batch plan JSON stages[{}].members entries are [tensor, step] pairs, not {}", k, detail::json_quote(m)));
      st.members.push_back({static_cast<std::int32_t>(detail::json_int(m[0], "tensor", 0, T - 1)),
                            static_cast<std::int32_t>(detail::json_int(m[1], "step", 0, 1 << 20))});
    }
    b.stages.push_back(std::move(st));
  }
  validate_batch_plan(b);
  // derived figures, where the file states them, must be what the plan gives (an edited total or
  // hash is refused, as Plan::from_json refuses an edited peak_bytes)
  auto derived = [&](const char* key, std::int64_t want) {
    if (!j.contains(key)) return;
    if (detail::json_int(j[key], key, 0, INT64_MAX) != want)
      throw InputError(fmt::format("batch plan JSON '{}' is {}, the plan's is {}", key, detail::json_quote(j[key]), want));
  };
  derived("tensors", static_cast<std::int64_t>(b.size()));
  derived("collectives", b.collectives());
  derived("separate_collectives", b.separate_collectives());
  derived("staging_bytes", b.staging_bytes());
  if (j.contains("batch_hash")) {
    const json& h = j["batch_hash"];
    if (!detail::json_hash_is(h, b.hash()))
      throw InputError(fmt::format("batch plan JSON 'batch_hash' is {}, the plan's is {:016x}", detail::json_quote(h), b.hash()));
  }
  return b;
}

std::vector<std::pair<Layout, Layout>> batch_pairs_from_json(std::string_view text) {
  // one reader for both forms (ragged_bucket.cpp); here every layout must be an ordinary one
  std::vector<std::pair<Layout, Layout>> out;
  const auto pairs = ragged_batch_pairs_from_json(text);
  out.reserve(pairs.size());
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    const auto& [a, b] = pairs[i];
    if (a.is_ragged() || b.is_ragged())
      throw InputError(fmt::format("batch file pairs[{}]: a RaggedShard layout ({}) is not for the batch planner: "
                                   "ragged batches plan through plan_ragged (dtensor plan --batch does)",
                                   i, (a.is_ragged() ? a : b).placements_str()));
    out.emplace_back(a.base(), b.base());
  }
  return out;
}

std::string explain(const BatchPlan& b) {
  std::string out = fmt::format(
      "batch of {} tensors on mesh {} (cost model {}): {} stage(s), {} collective(s) against {} planned one by one\n"
      "total {:.3f} us against {:.3f} us one after another ({:.2f}x), staging {} bytes\n",
      b.size(), b.plan(0).mesh().str(), b.cost_model, b.stages.size(), b.collectives(), b.separate_collectives(),
      b.total_cost_us, b.separate_cost_us, b.total_cost_us > 0 ? b.separate_cost_us / b.total_cost_us : 1.0, b.staging_bytes());
  out += fmt::format("\n {:>3}  {:<15} {:<9} {:>7} {:>14}  {}\n", "#", "kind", "mesh", "tensors", "cost us", "how");
  for (std::size_t k = 0; k < b.stages.size(); ++k) {
    const auto& st = b.stages[k];
    std::vector<std::string> who;
    for (const auto& m : st.members) who.push_back(fmt::format("{}.{}", m.tensor, m.step));
    const std::string how = st.coalesced ? "one collective over the members' concatenated chunks"
                            : st.grouped  ? "the members' own collectives launched as one group"
                            : is_local(st.kind) ? "local copies, no communication"
                                                : "the member's own step";
    out += fmt::format(" {:>3}  {:<15} {:<9} {:>7} {:>14.3f}  {} (tensor.step: {})\n", k + 1, to_string(st.kind),
                       fmt::format("{}", fmt::join(st.mesh_dims, ",")), st.members.size(), st.cost_us, how, fmt::join(who, " "));
  }
  out += "\ntensors:\n";
  for (std::size_t t = 0; t < b.size(); ++t) {
    const auto& p = b.plan(t);
    out += fmt::format(" {:>3}  {} {} {} -> {}: {} step(s), {:.3f} us\n", t, shape_str(p.shape()), to_string(p.dtype()),
                       p.src.placements_str(), p.dst.placements_str(), p.steps.size(), p.total_cost_us);
  }
  return out;
}

}  // namespace dtensor
