// Planning latency: uncached (full Dijkstra + runner-up) per mesh and edge set, and cached lookup.
#include <benchmark/benchmark.h>

#include "dtensor/plan_cache.hpp"
#include "dtensor/planner.hpp"

using namespace dtensor;

namespace {

struct Case {
  const char* mesh;
  std::vector<std::int64_t> shape;
  std::vector<std::pair<const char*, const char*>> pairs;
};

// A fixed set of src/dst pairs per mesh: FSDP/TP-style reshards, order changes, Partial reductions.
const std::vector<Case>& cases() {
  static const std::vector<Case> c{
      {"8", {4096, 4096}, {{"S(0)", "R"}, {"S(0)", "S(1)"}, {"P", "S(0)"}, {"R", "S(1)"}, {"P", "R"}}},
      {"2x4", {4096, 4096, 64}, {{"S(0)S(1)", "S(1)S(0)"}, {"PR", "S(0)S(0)"}, {"S(0)S(0)", "RS(2)"}, {"RP", "S(1)R"}, {"S(0)[1]S(0)[0]", "S(0)S(0)"}}},
      {"2x2x2", {4096, 4096, 64}, {{"S(0)S(1)S(2)", "RRR"}, {"PPP", "S(0)S(0)S(0)"}, {"S(0)S(0)R", "RS(1)S(1)"}, {"RS(1)P", "S(2)RR"}, {"S(0)[0]S(0)[1]S(2)", "S(0)[1]S(0)[0]S(2)"}}},
      {"4x4x8", {8192, 8192, 128}, {{"S(0)S(1)S(2)", "RRR"}, {"PRS(1)", "S(0)RS(1)"}, {"S(0)S(0)R", "RS(1)S(1)"}, {"RRP", "RRS(0)"}, {"S(0)S(1)R", "S(1)S(0)R"}}},
      {"2x2x4x8", {8192, 8192, 64, 64}, {{"S(0)S(1)RR", "RRS(0)S(1)"}, {"PRRS(2)", "S(0)RRS(2)"}, {"S(0)S(0)S(1)R", "RRRR"}, {"RRRP", "RRRS(3)"}, {"S(0)RS(1)R", "RS(0)RS(1)"}}},
  };
  return c;
}

void BM_plan_uncached(benchmark::State& st) {
  const Case& c = cases()[static_cast<std::size_t>(st.range(0))];
  PlanOptions o;
  o.edges = st.range(1) == 0 ? EdgeSet::pytorch : EdgeSet::all;
  o.runner_up = st.range(2) == 1;
  const auto cost = CostModel::default_model();
  const Mesh mesh = Mesh::parse(c.mesh);
  std::vector<std::pair<Layout, Layout>> pairs;
  for (const auto& [a, b] : c.pairs)
    pairs.emplace_back(Layout::parse(mesh, c.shape, DType::bf16, a), Layout::parse(mesh, c.shape, DType::bf16, b));
  std::size_t i = 0;
  for (auto _ : st) {
    const auto& [src, dst] = pairs[i++ % pairs.size()];
    benchmark::DoNotOptimize(plan_redistribution(src, dst, cost, o));
  }
  st.SetLabel(std::string(c.mesh) + (o.edges == EdgeSet::pytorch ? " pytorch" : " all") +
              (o.runner_up ? " +runner-up" : ""));
}
// args: mesh case, edge set (0 pytorch, 1 all), runner-up search (0 off, 1 on: the default)
BENCHMARK(BM_plan_uncached)->ArgsProduct({{0, 1, 2, 3, 4}, {0, 1}, {0, 1}})->Unit(benchmark::kMicrosecond);

void BM_plan_cached(benchmark::State& st) {
  PlanCache cache(256);
  const auto cost = CostModel::default_model();
  const Mesh mesh = Mesh::parse("4x4x8");
  const Layout a = Layout::parse(mesh, {8192, 8192, 128}, DType::bf16, "S(0)S(1)S(2)");
  const Layout b = Layout::parse(mesh, {8192, 8192, 128}, DType::bf16, "RRR");
  (void)cache.get_or_plan(a, b, cost);
  for (auto _ : st) benchmark::DoNotOptimize(cache.get_or_plan(a, b, cost));
}
BENCHMARK(BM_plan_cached);

}  // namespace

BENCHMARK_MAIN();
