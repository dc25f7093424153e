// Optimality evidence: the planner's cost equals the shortest path found by an independent
// exhaustive search (Bellman-Ford written here) over the whole reachable state graph.
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <random>
#include <unordered_map>

#include "dtensor/explore.hpp"
#include "dtensor/planner.hpp"
#include "graph_oracle.hpp"

using namespace dtensor;

namespace {

using graph_oracle::all_layouts;
using graph_oracle::Graph;

// Breadth-first closure of the graph from `starts`.
Graph explore(const RedistributionGraph& g, const std::vector<Sharding>& starts) {
  return graph_oracle::closure(starts, [&](const Sharding& from) {
    std::vector<std::pair<Sharding, double>> out;
    for (const auto& e : g.edges(from, false)) out.emplace_back(e.to, e.step.cost_us);
    return out;
  });
}

std::vector<double> bellman_ford_to(const Graph& G, std::size_t target) { return graph_oracle::distances_to(G, target); }

bool close(double a, double b) { return std::abs(a - b) <= 1e-5 + 1e-12 * std::abs(b); }

}  // namespace

TEST_CASE("planner is optimal: every pair, exhaustive oracle", "[optimality]") {
  std::int64_t pairs = 0;
  for (const char* mesh_text : {"4", "2x2", "2x3", "2x2x2"}) {
    const Mesh mesh = Mesh::parse(mesh_text);
    for (const auto& shape : {std::vector<std::int64_t>{8, 8}, std::vector<std::int64_t>{9, 5}}) {
      const auto layouts = all_layouts(mesh, 2);
      std::vector<std::pair<CostModel, EdgeSet>> configs{{CostModel::default_model(), EdgeSet::all},
                                                         {CostModel::default_model(), EdgeSet::pytorch}};
      configs.emplace_back(CostModel::pytorch(), EdgeSet::pytorch);
      // a fitted profile (curves with bands across these small sizes, latencies below and
      // bandwidths above the links'): the bounds must stay admissible with curves too
      CostModel fitted = CostModel::default_model();
      for (bool inter : {false, true})
        for (Collective c : {Collective::all_gather, Collective::reduce_scatter, Collective::all_reduce, Collective::all_to_all,
                             Collective::send_recv})
          fitted.curves.push_back({c, inter, 4, {{64, 2.5, 20}, {512, 1.0 + static_cast<int>(c), 900}, {1e18, 30, 5000}}});
      configs.emplace_back(fitted, EdgeSet::all);
      configs.emplace_back(fitted, EdgeSet::pytorch);
      // two devices per host: these meshes then span hosts (the host-block bound applies), with
      // an inter link slower and one faster than the intra link
      CostModel hosts = CostModel::default_model();
      hosts.devices_per_host = 2;
      configs.emplace_back(hosts, EdgeSet::all);
      CostModel fast_inter = fitted;
      fast_inter.devices_per_host = 2;
      fast_inter.inter = {1.0, 0.1, 2000, 2500};
      configs.emplace_back(fast_inter, EdgeSet::all);
      for (const auto& [cm, es] : configs) {
        PlanOptions o;
        o.edges = es;
        o.runner_up = false;
        for (const auto& dst : layouts) {
          const Layout dl(mesh, shape, DType::f32, dst);
          const RedistributionGraph g(Layout(mesh, shape, DType::f32, layouts[0]), dl, cm, es);
          const Graph G = explore(g, layouts);
          const auto dist = bellman_ford_to(G, G.id.at(dst));
          for (const auto& src : layouts) {
            const double want = dist[G.id.at(src)];
            const double got = plan_redistribution(Layout(mesh, shape, DType::f32, src), dl, cm, o).total_cost_us;
            if (!close(got, want))
              FAIL_CHECK("mesh " << mesh_text << " shape " << shape_str(shape) << " " << src.str() << " -> " << dst.str()
                                 << " edges " << to_string(es) << ": planner " << got << " oracle " << want);
            ++pairs;
          }
        }
      }
    }
  }
  INFO("pairs checked: " << pairs);
  CHECK(pairs > 10000);
}

TEST_CASE("planner is optimal: seeded random pairs with strided shards", "[optimality]") {
  std::mt19937_64 rng(4242);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int checked = 0;
  const char* meshes[] = {"4", "2x2", "2x3", "2x2x2"};
  while (checked < 150) {
    const Mesh mesh = Mesh::parse(meshes[uni(0, 3)]);
    const std::vector<std::int64_t> shape{uni(0, 1) ? 8 : 9, uni(0, 1) ? 8 : 5};
    auto random_layout = [&] {
      std::string t;
      for (int m = 0; m < mesh.ndim(); ++m) {
        switch (uni(0, 4)) {
          case 0: t += "R"; break;
          case 1: t += "P"; break;
          case 2: t += "S(" + std::to_string(uni(0, 1)) + ")"; break;
          default: t += "_S(" + std::to_string(uni(0, 1)) + ", " + std::to_string(uni(2, 3)) + ")"; break;
        }
      }
      return Layout::parse(mesh, shape, DType::f32, t);
    };
    const Layout src = random_layout(), dst = random_layout();
    CostModel hosts = CostModel::default_model();
    hosts.devices_per_host = 2;  // the host-block bound applies on these meshes
    for (const auto& [cm, es] : {std::pair{CostModel::default_model(), EdgeSet::all}, std::pair{CostModel::default_model(), EdgeSet::pytorch},
                                 std::pair{hosts, EdgeSet::all}}) {
      PlanOptions o;
      o.edges = es;
      o.runner_up = false;
      const RedistributionGraph g(src, dst, cm, es);
      const Graph G = explore(g, {src.sharding()});
      const auto dist = bellman_ford_to(G, G.id.at(dst.sharding()));
      const double got = plan_redistribution(src, dst, cm, o).total_cost_us;
      if (!close(got, dist[0]))
        FAIL_CHECK(src.placements_str() << " -> " << dst.placements_str() << " on " << mesh.str() << ": planner " << got << " oracle " << dist[0]);
    }
    ++checked;
  }
  CHECK(checked == 150);
}
