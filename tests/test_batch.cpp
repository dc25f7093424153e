// Batched redistribution (docs/batch.md): every tensor of a batch ends exactly as the oracle says
// (per-rank global element ids, Partial reduced), coalesced stages issue one collective, batch
// plans never cost more than the plans one after another, and batch plans read from JSON are
// checked like plans.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>
#include <limits>
#include <mutex>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "dtensor/batch_executor.hpp"
#include "dtensor/error.hpp"
#include "dtensor/explore.hpp"
#include "dtensor/executor.hpp"
#include "dtensor/simulate.hpp"
#include "dtensor/simulated.hpp"
#include "dtensor/verify.hpp"
#include "planner/planner_internal.hpp"
#include "test_util.hpp"

using namespace dtensor;
using Catch::Matchers::Contains;

namespace {

// Runs `batch` on one thread per rank over seeded inputs (dtensor::simulate) and returns the first
// tensor's mismatch ("" when every tensor is right on every rank) and the collectives rank 0 issued.
std::string run_batch(const BatchPlan& batch, std::int64_t* collectives = nullptr) {
  const auto res = simulate(batch);
  if (collectives) *collectives = res.collectives;
  for (std::size_t t = 0; t < res.mismatch.size(); ++t)
    if (!res.mismatch[t].empty())
      return fmt::format("tensor {} ({} -> {}): {}", t, batch.plan(t).src.placements_str(), batch.plan(t).dst.placements_str(),
                         res.mismatch[t]);
  return res.verified ? "" : "not verified";
}

// A profile under which coalescing always pays (copies nearly free, latency dear): the tests
// exercise coalesced stages on small tensors.
CostModel coalescing_model() {
  CostModel m = CostModel::default_model();
  m.name = "coalescing";
  m.copy_bw_GBps = 1e6;
  m.intra.alpha_us = m.inter.alpha_us = 1000;
  return m;
}

// A profile under which packing never pays (copies dear) but launches do: the tests exercise
// grouped stages (the members' own collectives launched together) on small tensors.
CostModel grouping_model() {
  CostModel m = CostModel::default_model();
  m.name = "grouping";
  m.copy_bw_GBps = 1e-3;
  m.intra.alpha_us = m.inter.alpha_us = 1000;
  return m;
}

std::vector<std::string> layouts_of(const Mesh& mesh, const std::vector<std::string>& options) {
  std::vector<std::string> out{""};
  for (int m = 0; m < mesh.ndim(); ++m) {
    std::vector<std::string> next;
    for (const auto& p : out)
      for (const auto& o : options) next.push_back(p + o);
    out = std::move(next);
  }
  return out;
}

}  // namespace

TEST_CASE("batch: an FSDP-style batch coalesces into one collective per stage and every tensor is exact", "[batch]") {
  const Mesh mesh = Mesh::parse("4");
  std::vector<std::pair<Layout, Layout>> unshard, grads;
  for (const auto& shape : {std::vector<std::int64_t>{8, 6}, {16, 3}, {5, 7}, {9}, {2, 2}, {3, 10}}) {
    const std::string s0 = "S(0)";
    unshard.emplace_back(Layout::parse(mesh, shape, DType::f32, s0), Layout::parse(mesh, shape, DType::f32, "R"));
    grads.emplace_back(Layout::parse(mesh, shape, DType::f32, "P(sum)"), Layout::parse(mesh, shape, DType::f32, s0));
  }
  for (const auto* batch_pairs : {&unshard, &grads}) {
    const BatchPlan b = plan_batch(*batch_pairs, coalescing_model());
    INFO(explain(b));
    CHECK(b.separate_collectives() == 6);
    CHECK(b.collectives() == 1);
    CHECK(b.total_cost_us < b.separate_cost_us);
    std::int64_t issued = -1;
    CHECK(run_batch(b, &issued) == "");
    CHECK(issued == b.collectives());
  }
}

TEST_CASE("batch: exhaustive pairs of tensors on meshes 2 and 2x2, uneven and empty shards, strided and Partial", "[batch]") {
  std::int64_t batches = 0, coalesced = 0, grouped = 0;
  // sanitizer builds take every stride-th pair (DTENSOR_EXHAUSTIVE_STRIDE)
  const auto stride = static_cast<std::size_t>(sample_stride());
  for (const char* mesh_text : {"2", "2x2"}) {
    const Mesh mesh = Mesh::parse(mesh_text);
    const auto layouts = layouts_of(mesh, {"R", "P(sum)", "S(0)", "S(1)", "_S(0, 2)"});
    const std::vector<std::int64_t> shape_a{5, 3}, shape_b{1, 4};  // uneven; tensor b has empty shards on dim 0
    std::mt19937_64 rng(7);
    std::size_t index = 0;
    for (const auto& a_from : layouts)
      for (const auto& a_to : layouts) {
        if (index++ % stride != 0) continue;
        // the second tensor: a sampled pair (all pairs of pairs is 600k batches on 2x2)
        const auto& b_from = layouts[rng() % layouts.size()];
        const auto& b_to = layouts[rng() % layouts.size()];
        std::vector<std::pair<Layout, Layout>> pairs;
        try {
          pairs.emplace_back(Layout::parse(mesh, shape_a, DType::f32, a_from), Layout::parse(mesh, shape_a, DType::f32, a_to));
          pairs.emplace_back(Layout::parse(mesh, shape_b, DType::f32, b_from), Layout::parse(mesh, shape_b, DType::f32, b_to));
        } catch (const InputError&) {
          continue;  // a strided split beyond its dim
        }
        for (const CostModel& cm : {CostModel::default_model(), coalescing_model(), grouping_model()}) {
          const BatchPlan b = plan_batch(pairs, cm);
          INFO(mesh_text << " " << a_from << " -> " << a_to << " and " << b_from << " -> " << b_to << "\n" << explain(b));
          CHECK(b.total_cost_us <= b.separate_cost_us + 1e-9);
          CHECK(b.collectives() <= b.separate_collectives());
          std::int64_t issued = -1;
          const auto why = run_batch(b, &issued);
          CHECK(why == "");
          CHECK(issued == b.collectives());
          for (const auto& st : b.stages) {
            coalesced += st.coalesced ? 1 : 0;
            grouped += st.grouped ? 1 : 0;
          }
          ++batches;
        }
      }
  }
  INFO("batches " << batches << ", coalesced stages " << coalesced << ", grouped stages " << grouped);
  CHECK(batches * static_cast<std::int64_t>(stride) > 500);
  CHECK(coalesced * static_cast<std::int64_t>(stride) > 100);
  CHECK(grouped > (stride > 1 ? 0 : 20));  // sampled runs (sanitizers) see a twentieth of them
}

TEST_CASE("batch: equal-cost plans are chosen to share stages, against brute force over every combination", "[batch]") {
  // Small batches (2-3 tensors, meshes 2 and 2x2): every combination of every tensor's optimal
  // plans (optimal_plans, complete here: fewer than its cap; and its plan of collectives alone,
  // which plan_batch also weighs) is scheduled by plan_batch_from; the
  // batch plan must cost exactly the least of them, never more than its plans one by one, and
  // every tensor must end exactly as the oracle says.
  const std::size_t stride = static_cast<std::size_t>(sample_stride());
  std::int64_t batches = 0, improved = 0, combos_seen = 0;
  std::mt19937_64 rng(23);
  for (const char* mesh_text : {"2", "2x2"}) {
    const Mesh mesh = Mesh::parse(mesh_text);
    const auto layouts = layouts_of(mesh, {"R", "P(sum)", "S(0)", "S(1)"});
    for (const CostModel& cm : {CostModel::pytorch(), coalescing_model(), CostModel::default_model()}) {
      const int count = static_cast<int>(std::max<std::size_t>(6, 90 / stride));
      for (int k = 0; k < count; ++k) {
        const std::size_t n = 2 + rng() % 2;
        std::vector<std::pair<Layout, Layout>> pairs;
        for (std::size_t t = 0; t < n; ++t) {
          const std::vector<std::int64_t> shape{t == 1 ? 5 : 8, t == 2 ? 1 : 6};  // uneven, empty shards
          pairs.emplace_back(Layout::parse(mesh, shape, DType::f32, layouts[rng() % layouts.size()]),
                             Layout::parse(mesh, shape, DType::f32, layouts[rng() % layouts.size()]));
        }
        std::vector<std::vector<Plan>> options;
        PlanOptions no_ru;
        no_ru.runner_up = false;
        bool within_budget = true;
        double combos = 1;
        for (const auto& [a, b] : pairs) {
          options.push_back(near_optimal_plans(a, b, cm, no_ru, 64, 0, 1.0));
          REQUIRE(options.back().size() < 64);  // complete
          if (cm.formula != CostModel::Formula::pytorch) {  // plan_batch's plan of collectives alone too
            PlanOptions collectives = no_ru;
            collectives.edges = EdgeSet::pytorch;
            Plan p = plan_redistribution(a, b, cm, collectives);
            if (std::none_of(options.back().begin(), options.back().end(), [&](const Plan& q) { return q.steps == p.steps; }))
              options.back().push_back(std::move(p));
          }
          within_budget = within_budget && options.back().size() <= 8;  // plan_batch keeps 8 per pair
          combos *= static_cast<double>(options.back().size());
        }
        within_budget = within_budget && combos <= 256;
        // brute force
        double best = 1e300;
        std::vector<std::size_t> pick(n, 0);
        while (true) {
          std::vector<Plan> chosen;
          for (std::size_t t = 0; t < n; ++t) chosen.push_back(options[t][pick[t]]);
          best = std::min(best, plan_batch_from(std::move(chosen), cm).total_cost_us);
          ++combos_seen;
          std::size_t v = n;
          while (v > 0 && ++pick[v - 1] == options[v - 1].size()) pick[--v] = 0;
          if (v == 0) break;
        }
        const BatchPlan b = plan_batch(pairs, cm);
        const BatchPlan first = plan_batch_from([&] {
          std::vector<Plan> own;
          for (const auto& o : options) own.push_back(o.front());
          return own;
        }(), cm);
        INFO(mesh_text << " " << cm.name << "\n" << explain(b) << "\nbrute force " << best);
        CHECK(b.total_cost_us >= best * (1 - 1e-9) - 1e-6);
        if (within_budget) CHECK(b.total_cost_us <= best * (1 + 1e-9) + 1e-6);
        CHECK(b.total_cost_us <= first.total_cost_us * (1 + 1e-9) + 1e-6);
        CHECK(b.total_cost_us <= b.separate_cost_us * (1 + 1e-9) + 1e-6);
        improved += b.total_cost_us < first.total_cost_us * (1 - 1e-9) ? 1 : 0;
        CHECK(run_batch(b) == "");
        CHECK(b == plan_batch(pairs, cm));  // deterministic
        ++batches;
      }
    }
  }
  INFO("batches " << batches << ", combinations " << combos_seen << ", improved by the choice " << improved);
  CHECK(batches >= 36);
  if (stride == 1) CHECK(improved > 0);  // the choice matters on some of them
  // and on this one by construction (docs/batch.md): gathering mesh dim 1 first lets the large
  // tensor share its first all_gather with the two small ones
  const Mesh m22 = Mesh::parse("2x2");
  std::vector<std::pair<Layout, Layout>> shared{
      {Layout::parse(m22, {256, 256}, DType::bf16, "S(0)S(1)"), Layout::parse(m22, {256, 256}, DType::bf16, "RR")},
      {Layout::parse(m22, {256, 64}, DType::bf16, "RS(1)"), Layout::parse(m22, {256, 64}, DType::bf16, "RR")},
      {Layout::parse(m22, {512}, DType::bf16, "RS(0)"), Layout::parse(m22, {512}, DType::bf16, "RR")}};
  const BatchPlan chosen = plan_batch(shared, CostModel::pytorch());
  INFO(explain(chosen));
  CHECK(chosen.stages.size() == 2);
  CHECK(chosen.collectives() == 2);
  CHECK(chosen.plan(0).steps.front().mesh_dims == std::vector<int>{1});
  CHECK(run_batch(chosen) == "");
}

TEST_CASE("batch: optimal_plans lists every optimal (and near-optimal) path, checked on the whole graph", "[batch]") {
  // Independent of the search: every state reachable on meshes 2 and 2x2 through the public graph
  // API, Bellman-Ford over quantised picoseconds (as the planner compares) from the source and to
  // the target, then every path of at most the optimal cost (plus a slack of 0 or 3 us), at most
  // the plan's step count and no layout twice, enumerated by depth-first search.
  std::int64_t checked = 0, multi = 0, near = 0;
  const std::size_t stride = static_cast<std::size_t>(sample_stride());
  std::size_t index = 0;
  for (const char* mesh_text : {"2", "2x2"}) {
    const Mesh mesh = Mesh::parse(mesh_text);
    const auto layouts = layouts_of(mesh, {"R", "P(sum)", "S(0)", "S(1)"});
    for (const CostModel& cm : {CostModel::pytorch(), CostModel::default_model()})
      for (const auto& from : layouts)
        for (const auto& to : layouts) {
          if (index++ % (3 * stride) != 0) continue;
          const Layout a = Layout::parse(mesh, {6, 5}, DType::f32, from), b = Layout::parse(mesh, {6, 5}, DType::f32, to);
          PlanOptions no_ru;
          no_ru.runner_up = false;
          const EdgeSet es = cm.defaults_to_pytorch_edges() ? EdgeSet::pytorch : EdgeSet::all;
          const RedistributionGraph g(a, b, cm, es);
          std::map<std::string, std::size_t> id;
          std::vector<Sharding> states;
          std::vector<std::vector<std::pair<std::size_t, Step>>> out;
          auto intern = [&](const Sharding& s) {
            auto [it, fresh] = id.try_emplace(s.str(), states.size());
            if (fresh) {
              states.push_back(s);
              out.emplace_back();
            }
            return it->second;
          };
          intern(a.sharding());
          for (std::size_t u = 0; u < states.size(); ++u)
            for (auto& e : g.edges(states[u], true)) {
              const auto v = intern(e.to);
              out[u].emplace_back(v, std::move(e.step));
            }
          const std::size_t n = states.size(), dst = id.at(b.sharding().str());
          auto q = [](double us) { return std::llround(us * 1e6); };
          constexpr std::int64_t kFar = std::numeric_limits<std::int64_t>::max();
          std::vector<std::int64_t> dist(n, kFar), to_dst(n, kFar);
          dist[0] = 0;
          to_dst[dst] = 0;
          for (bool changed = true; changed;) {  // Bellman-Ford, both ways
            changed = false;
            for (std::size_t u = 0; u < n; ++u)
              for (const auto& [v, st] : out[u]) {
                if (dist[u] != kFar && dist[u] + q(st.cost_us) < dist[v]) {
                  dist[v] = dist[u] + q(st.cost_us);
                  changed = true;
                }
                if (to_dst[v] != kFar && to_dst[v] + q(st.cost_us) < to_dst[u]) {
                  to_dst[u] = to_dst[v] + q(st.cost_us);
                  changed = true;
                }
              }
          }
          for (const double slack : {0.0, 3.0}) {
            const auto plans = optimal_plans(a, b, cm, no_ru, 1000, slack);
            REQUIRE(!plans.empty());
            REQUIRE(plans.size() < 1000);
            const std::int64_t limit = dist[dst] + q(slack);
            const auto steps = static_cast<int>(plans.front().steps.size());
            std::set<std::string> expected;
            std::vector<std::string> trail;
            std::vector<char> on_path(n, 0);  // a plan visits each layout once
            auto dfs = [&](auto&& self, std::size_t u, std::int64_t cost, int left) -> void {
              if (u == dst) {
                std::string t;
                for (const auto& x : trail) t += x;
                expected.insert(t);
                return;
              }
              if (left == 0) return;
              on_path[u] = 1;
              for (const auto& [v, st] : out[u]) {
                const auto c = cost + q(st.cost_us);
                if (on_path[v] || to_dst[v] == kFar || c + to_dst[v] > limit) continue;  // off every path within the limit
                trail.push_back(fmt::format("{}[{}]>{} ", to_string(st.kind), fmt::join(st.kind == StepKind::direct ? std::vector<int>{} : st.mesh_dims, ","), states[v].str()));
                self(self, v, c, left - 1);
                trail.pop_back();
              }
              on_path[u] = 0;
            };
            dfs(dfs, 0, 0, steps);
            std::set<std::string> got;
            double last = 0;
            for (const auto& p : plans) {
              CHECK(std::llround(p.total_cost_us * 1e6) - limit <= static_cast<std::int64_t>(p.steps.size()));
              CHECK(p.total_cost_us >= last - 1e-6);  // cheapest first
              last = p.total_cost_us;
              std::string t;
              for (const auto& st : p.steps)
                t += fmt::format("{}[{}]>{} ", to_string(st.kind), fmt::join(st.kind == StepKind::direct ? std::vector<int>{} : st.mesh_dims, ","), st.to.str());
              CHECK(got.insert(t).second);  // no plan twice
            }
            INFO(mesh_text << " " << cm.name << " " << from << " -> " << to << " slack " << slack);
            CHECK(got == expected);
            if (slack == 0) multi += plans.size() > 1 ? 1 : 0;
            else near += plans.size() > optimal_plans(a, b, cm, no_ru, 1000).size() ? 1 : 0;
          }
          ++checked;
        }
  }
  INFO("requests " << checked << ", with several optimal plans " << multi << ", with near-optimal ones " << near);
  CHECK(checked > (stride > 1 ? 5 : 100));
  if (stride == 1) CHECK(multi > 10);
  if (stride == 1) CHECK(near > 10);
}

TEST_CASE("batch: a group holds at most 2048 NCCL operations", "[batch]") {
  const Mesh mesh = Mesh::parse("2");
  std::vector<std::pair<Layout, Layout>> pairs;
  for (int i = 0; i < 2100; ++i)
    pairs.emplace_back(Layout::parse(mesh, {2, 3}, DType::f32, "S(0)"), Layout::parse(mesh, {2, 3}, DType::f32, "R"));
  const BatchPlan b = plan_batch(pairs, grouping_model());
  std::size_t largest = 0, in_groups = 0;
  for (const auto& st : b.stages)
    if (st.grouped) {
      largest = std::max(largest, st.members.size());
      in_groups += st.members.size();
    }
  CHECK(largest == 2048);
  CHECK(in_groups == 2100);
  CHECK(b.collectives() == 2);
  CHECK(run_batch(b) == "");
}

TEST_CASE("batch: random batches of up to 64 tensors on 2x2x2", "[batch]") {
  const Mesh mesh = Mesh::parse("2x2x2");
  std::mt19937_64 rng(2024);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const char* pls[] = {"R", "P(sum)", "S(0)", "S(1)", "_S(0, 2)"};
  for (int round = 0; round < 6; ++round) {
    std::vector<std::pair<Layout, Layout>> pairs;
    const int T = round == 0 ? 64 : uni(2, 40);
    while (static_cast<int>(pairs.size()) < T) {
      const std::vector<std::int64_t> shape{uni(0, 9), uni(1, 6)};
      std::string a, b;
      for (int m = 0; m < 3; ++m) {
        a += pls[uni(0, 4)];
        b += pls[uni(0, 4)];
      }
      try {
        pairs.emplace_back(Layout::parse(mesh, shape, DType::f32, a), Layout::parse(mesh, shape, DType::f32, b));
      } catch (const InputError&) {
      }
    }
    for (const CostModel& cm : {CostModel::default_model(), coalescing_model(), grouping_model()}) {
      const BatchPlan b = plan_batch(pairs, cm);
      INFO("round " << round << "\n" << explain(b));
      CHECK(b.total_cost_us <= b.separate_cost_us + 1e-9);
      CHECK(run_batch(b) == "");
      // the JSON form reads back to the same batch plan, with the same hash
      const BatchPlan back = BatchPlan::from_json(b.to_json());
      CHECK(back == b);
      CHECK(back.hash() == b.hash());
    }
  }
}

TEST_CASE("batch: bad input gets one clear error naming the entry", "[batch]") {
  const Mesh m4 = Mesh::parse("4"), m22 = Mesh::parse("2x2");
  std::vector<std::pair<Layout, Layout>> none;
  CHECK_THROWS_WITH(plan_batch(none, CostModel::default_model()), Contains("at least one"));
  std::vector<std::pair<Layout, Layout>> mixed{{Layout::parse(m4, {8}, DType::f32, "S(0)"), Layout::parse(m4, {8}, DType::f32, "R")},
                                               {Layout::parse(m22, {8}, DType::f32, "S(0)R"), Layout::parse(m22, {8}, DType::f32, "RR")}};
  CHECK_THROWS_WITH(plan_batch(mixed, CostModel::default_model()), Contains("batch entry 1") && Contains("one mesh"));
  std::vector<std::pair<Layout, Layout>> dtypes{{Layout::parse(m4, {8}, DType::f32, "S(0)"), Layout::parse(m4, {8}, DType::f32, "R")},
                                                {Layout::parse(m4, {8}, DType::f32, "S(0)"), Layout::parse(m4, {8}, DType::bf16, "R")}};
  CHECK_THROWS_WITH(plan_batch(dtypes, CostModel::default_model()), Contains("batch entry 1") && Contains("dtype"));
  // memory: staging that does not fit the bound is not used (the members' own collectives run as
  // one group, which needs no staging)
  std::vector<std::pair<Layout, Layout>> two{{Layout::parse(m4, {64, 8}, DType::f32, "S(0)"), Layout::parse(m4, {64, 8}, DType::f32, "R")},
                                             {Layout::parse(m4, {64, 8}, DType::f32, "S(0)"), Layout::parse(m4, {64, 8}, DType::f32, "R")}};
  PlanOptions gathers;
  gathers.edges = EdgeSet::pytorch;  // all_gathers (a direct exchange would need no staging)
  const BatchPlan free_b = plan_batch(two, coalescing_model(), gathers);
  REQUIRE(free_b.collectives() == 1);
  REQUIRE(free_b.staging_bytes() > 0);
  PlanOptions tight = gathers;
  tight.max_peak_bytes = free_b.staging_bytes() - 1;
  const BatchPlan bound_b = plan_batch(two, coalescing_model(), tight);
  CHECK(bound_b.collectives() == 1);
  REQUIRE(bound_b.stages.size() == 1);
  CHECK(bound_b.stages[0].grouped);
  CHECK(!bound_b.stages[0].coalesced);
  CHECK(bound_b.staging_bytes() == 0);
  CHECK(run_batch(bound_b) == "");
}

TEST_CASE("batch: a batch plan read from JSON is checked like a plan", "[batch]") {
  const Mesh mesh = Mesh::parse("2x2");
  std::vector<std::pair<Layout, Layout>> pairs;
  for (const auto& [a, b] : std::vector<std::pair<const char*, const char*>>{{"S(0)R", "RR"}, {"S(0)R", "RR"}, {"P(sum)R", "S(0)R"},
                                                                              {"RS(1)", "S(0)S(1)"}})
    pairs.emplace_back(Layout::parse(mesh, {6, 4}, DType::f32, a), Layout::parse(mesh, {6, 4}, DType::f32, b));
  const BatchPlan b = plan_batch(pairs, coalescing_model());
  REQUIRE(b.collectives() < b.separate_collectives());
  const std::string text = b.to_json();
  CHECK(BatchPlan::from_json(text) == b);
  auto edited = [&](const std::function<void(nlohmann::json&)>& edit) {
    auto j = nlohmann::json::parse(text);
    edit(j);
    return j.dump();
  };
  std::size_t co = 0;
  while (co < b.stages.size() && !b.stages[co].coalesced) ++co;
  REQUIRE(co < b.stages.size());
  // stage members out of order, repeated, dropped, from another tensor, a stage claimed coalesced
  // that is not, a tampered cost, a missing field, a plan from another mesh
  CHECK_THROWS_WITH(BatchPlan::from_json(edited([&](auto& j) { j["stages"][co]["members"].push_back(j["stages"][co]["members"][0]); })),
                    Contains("appears twice"));
  CHECK_THROWS_WITH(BatchPlan::from_json(edited([&](auto& j) { j["stages"][co]["members"].erase(0); })), Contains("batch plan"));
  CHECK_THROWS_WITH(BatchPlan::from_json(edited([&](auto& j) { j["stages"][co]["members"][0][1] = 1; })), Contains("step"));
  CHECK_THROWS_WITH(BatchPlan::from_json(edited([&](auto& j) { j["stages"][co]["members"][0][0] = 99; })), Contains("tensor"));
  CHECK_THROWS_WITH(BatchPlan::from_json(edited([&](auto& j) { j["stages"][co]["cost_us"] = 1e9; })), Contains("cost"));
  CHECK_THROWS_WITH(BatchPlan::from_json(edited([&](auto& j) { j["stages"][co]["mesh_dims"] = {1}; })), Contains("mesh dims"));
  CHECK_THROWS_WITH(BatchPlan::from_json(edited([&](auto& j) { j["total_cost_us"] = 1; })), Contains("total_cost_us"));
  CHECK_THROWS_WITH(BatchPlan::from_json(edited([&](auto& j) { j.erase("stages"); })), Contains("stages"));
  // derived figures and the hash are recomputed on read: an edited one is refused
  CHECK_THROWS_WITH(BatchPlan::from_json(edited([&](auto& j) { j["batch_hash"] = "0000000000000000"; })), Contains("batch_hash"));
  CHECK_THROWS_WITH(BatchPlan::from_json(edited([&](auto& j) { j["collectives"] = 0; })), Contains("'collectives'"));
  CHECK_THROWS_WITH(BatchPlan::from_json(edited([&](auto& j) { j["separate_collectives"] = 99; })), Contains("separate_collectives"));
  CHECK_THROWS_WITH(BatchPlan::from_json(edited([&](auto& j) { j["staging_bytes"] = 1; })), Contains("staging_bytes"));
  CHECK_THROWS_WITH(BatchPlan::from_json(edited([&](auto& j) { j["tensors"] = 7; })), Contains("tensors"));
  CHECK_THROWS_WITH(BatchPlan::from_json(edited([&](auto& j) { j["stages"] = nlohmann::json::array(); })), Contains("runs 0"));
  CHECK_THROWS_WITH(BatchPlan::from_json(edited([&](auto& j) { j["plans"][1]["from"] = "RS(0)"; })), Contains("plans[1]"));
  CHECK_THROWS_WITH(BatchPlan::from_json(edited([&](auto& j) { j["plans"] = nlohmann::json::array(); })), Contains("plans"));
  for (std::size_t k = 0; k < b.stages.size(); ++k)
    if (!b.stages[k].coalesced && b.stages[k].members.size() == 1 && b.stages[k].kind != StepKind::local_chunk) {
      CHECK_THROWS_WITH(BatchPlan::from_json(edited([&](auto& j) { j["stages"][k]["coalesced"] = true; })), Contains("two members"));
      CHECK_THROWS_WITH(BatchPlan::from_json(edited([&](auto& j) { j["stages"][k]["grouped"] = true; })), Contains("two members"));
      break;
    }
  // grouped stages: claimed on a coalesced stage as well, or with a non-boolean flag
  CHECK_THROWS_WITH(BatchPlan::from_json(edited([&](auto& j) { j["stages"][co]["grouped"] = true; })), Contains("not both"));
  CHECK_THROWS_WITH(BatchPlan::from_json(edited([&](auto& j) { j["stages"][co]["grouped"] = 1; })), Contains("grouped must be"));
  // a grouped batch reads back equal, and refuses a group of local steps or another collective
  const BatchPlan g = plan_batch(pairs, grouping_model());
  std::size_t gk = 0;
  while (gk < g.stages.size() && !g.stages[gk].grouped) ++gk;
  REQUIRE(gk < g.stages.size());
  const std::string gtext = g.to_json();
  CHECK(BatchPlan::from_json(gtext) == g);
  CHECK(BatchPlan::from_json(gtext).hash() == g.hash());
  auto gedit = [&](const std::function<void(nlohmann::json&)>& edit) {
    auto j = nlohmann::json::parse(gtext);
    edit(j);
    return j.dump();
  };
  CHECK_THROWS_WITH(BatchPlan::from_json(gedit([&](auto& j) { j["stages"][gk]["mesh_dims"] = {1}; })), Contains("mesh dims"));
  CHECK_THROWS_WITH(BatchPlan::from_json(gedit([&](auto& j) { j["stages"][gk]["cost_us"] = 1e9; })), Contains("cost"));
  CHECK_THROWS_WITH(BatchPlan::from_json(gedit([&](auto& j) { j["stages"][gk]["grouped"] = false; })), Contains("local steps only"));
}

TEST_CASE("batch: overlapping buffers are refused before anything moves", "[batch]") {
  const Mesh mesh = Mesh::parse("2");
  std::vector<std::pair<Layout, Layout>> pairs{{Layout::parse(mesh, {4}, DType::f32, "S(0)"), Layout::parse(mesh, {4}, DType::f32, "R")},
                                               {Layout::parse(mesh, {4}, DType::f32, "S(0)"), Layout::parse(mesh, {4}, DType::f32, "R")}};
  const BatchPlan b = plan_batch(pairs, coalescing_model());
  SimulatedWorld world(mesh, WorldOptions{std::chrono::milliseconds(30000), nullptr});
  std::atomic<int> refused{0};
  run_rank_threads(world, [&](std::int64_t rank, Communicator& comm) {
    BatchExecutor ex(b, comm);
    auto in0 = seeded_input(b.plan(0).src, rank), in1 = seeded_input(b.plan(1).src, rank);
    std::vector<std::byte> out(16), staging(static_cast<std::size_t>(ex.staging_bytes()));
    // both tensors write the same output
    std::vector<Buffers> bufs{{in0, out, {}}, {in1, out, {}}};
    try {
      ex.execute(bufs, staging);
    } catch (const InputError& e) {
      if (std::string(e.what()).find("overlap") != std::string::npos) ++refused;
    }
  });
  CHECK(refused == 2);

  // an output over another tensor's input that is not next to it in address order: tensor 1's
  // input lies inside tensor 0's (inputs may share memory), its output further inside
  std::vector<std::pair<Layout, Layout>> nested{{Layout::parse(mesh, {32}, DType::f32, "S(0)"), Layout::parse(mesh, {32}, DType::f32, "R")},
                                                {Layout::parse(mesh, {4}, DType::f32, "S(0)"), Layout::parse(mesh, {4}, DType::f32, "R")}};
  const BatchPlan nb = plan_batch(nested, coalescing_model());
  std::atomic<int> refused_nested{0};
  run_rank_threads(world, [&](std::int64_t rank, Communicator& comm) {
    BatchExecutor ex(nb, comm);
    REQUIRE(ex.executor(0).input_bytes() == 64);
    std::vector<std::byte> big(64), out0(static_cast<std::size_t>(ex.executor(0).output_bytes()));
    std::vector<std::byte> staging(static_cast<std::size_t>(ex.staging_bytes()));
    const auto in0 = seeded_input(nb.plan(0).src, rank);
    std::copy(in0.begin(), in0.end(), big.begin());
    const std::span<std::byte> all(big);
    std::vector<Buffers> bufs{{all, out0, {}}, {all.subspan(8, 8), all.subspan(32, 16), {}}};
    try {
      ex.execute(bufs, staging);
    } catch (const InputError& e) {
      if (std::string(e.what()).find("the input of tensor 0 and the output of tensor 1") != std::string::npos) ++refused_nested;
    }
  });
  CHECK(refused_nested == 2);
}

TEST_CASE("batch: the batch plan cache hands out one plan per request, keyed by every pair", "[batch]") {
  const Mesh mesh = Mesh::parse("2x2");
  std::vector<std::pair<Layout, Layout>> pairs;
  for (const auto& shape : {std::vector<std::int64_t>{8, 6}, {5, 7}, {9, 4}})
    pairs.emplace_back(Layout::parse(mesh, shape, DType::bf16, "S(0)S(1)"), Layout::parse(mesh, shape, DType::bf16, "RS(1)"));
  BatchPlanCache cache(2);
  const auto cost = CostModel::default_model();
  const auto first = cache.get_or_plan(pairs, cost);
  CHECK(*first == plan_batch(pairs, cost));
  CHECK(cache.get_or_plan(pairs, cost) == first);  // the same object: a hit
  auto s = cache.stats();
  CHECK((s.hits == 1 && s.misses == 1 && s.size == 1));
  // any difference in any pair, the order, the model or the options is another batch
  auto other = pairs;
  other[2].second = Layout::parse(mesh, {9, 4}, DType::bf16, "RR");
  const auto second = cache.get_or_plan(other, cost);
  CHECK(second != first);
  CHECK(*second == plan_batch(other, cost));
  auto swapped = pairs;
  std::swap(swapped[0], swapped[1]);
  CHECK(cache.get_or_plan(swapped, cost)->plan(0) == first->plan(1));
  s = cache.stats();
  CHECK((s.misses == 3 && s.evictions == 1 && s.size == 2));  // capacity 2: the least recent went
  CHECK(cache.get_or_plan(pairs, CostModel::pytorch())->cost_model == "pytorch");
  PlanOptions no_runner_up;
  no_runner_up.runner_up = false;
  CHECK(!cache.get_or_plan(pairs, cost, no_runner_up)->plan(0).runner_up);
  // a refused batch is not cached: the error each time
  std::vector<std::pair<Layout, Layout>> mixed{pairs[0], {Layout::parse(Mesh::parse("4"), {8}, DType::f32, "S(0)"),
                                                           Layout::parse(Mesh::parse("4"), {8}, DType::f32, "R")}};
  CHECK_THROWS_AS(cache.get_or_plan(mixed, cost), InputError);
  CHECK_THROWS_AS(cache.get_or_plan(mixed, cost), InputError);
  CHECK_THROWS_AS(BatchPlanCache(0), InputError);
  // threads asking at once all get a plan equal to the uncached one
  cache.clear();
  std::vector<std::thread> ts;
  std::vector<std::shared_ptr<const BatchPlan>> got(4);
  for (int t = 0; t < 4; ++t) ts.emplace_back([&, t] { got[static_cast<std::size_t>(t)] = cache.get_or_plan(pairs, cost); });
  for (auto& t : ts) t.join();
  for (const auto& g : got) CHECK(*g == *first);
}

TEST_CASE("batch: a tensor's plan of collectives alone is weighed when it coalesces better than its direct plan", "[batch]") {
  // A profile fitted on the simulated cluster (64 ranks, 8 per host; inter-node curves): a direct
  // exchange is the cheapest plan of each tensor alone, but the four tensors' all_gathers over mesh
  // dim 0 coalesce into one collective, which costs less than the direct plans' two stages.
  CostModel m = CostModel::default_model();
  m.name = "fitted";
  m.devices_per_host = 8;
  m.inter.alpha_per_peer_us = 1.1;
  m.curves.push_back({Collective::send_recv, true, 2, {{1e18, 3.45, 35.6}}});
  m.curves.push_back({Collective::all_gather, true, 8, {{1e18, 9.0, 38.5}}});
  const Mesh mesh = Mesh::parse("8x8");
  std::vector<std::pair<Layout, Layout>> pairs;
  for (const auto& [rows, from, to] : {std::tuple{4096, "S(0)[1]S(0)[0]", "RS(0)"}, std::tuple{2048, "S(0)S(1)", "RS(1)"},
                                       std::tuple{1024, "S(0)[1]S(0)[0]", "RS(0)"}, std::tuple{1024, "S(0)S(1)", "RS(1)"}})
    pairs.emplace_back(Layout::parse(mesh, {rows, 128}, DType::f32, from), Layout::parse(mesh, {rows, 128}, DType::f32, to));
  PlanOptions no_ru;
  no_ru.runner_up = false;
  const Plan alone = plan_redistribution(pairs[0].first, pairs[0].second, m, no_ru);
  REQUIRE(alone.steps.size() == 1);
  CHECK(alone.steps[0].kind == StepKind::direct);  // the premise
  PlanOptions collectives = no_ru;
  collectives.edges = EdgeSet::pytorch;
  const BatchPlan b = plan_batch(pairs, m), c = plan_batch(pairs, m, collectives);
  INFO(explain(b) << "\n" << explain(c));
  CHECK(b.total_cost_us <= c.total_cost_us * (1 + 1e-12));
  CHECK(b.collectives() == 1);
  CHECK(b.plan(0).steps[0].kind == StepKind::all_gather);
}
