// Optimality evidence: the planner's cost equals the shortest path found by an independent
// exhaustive search (Bellman-Ford written here) over the whole reachable state graph, and at real
// sizes on larger meshes the cost of a plain Dijkstra (written here) over the graph's own edges.
#include <catch2/catch.hpp>
#include <cmath>
#include <algorithm>
#include <map>
#include <optional>
#include <queue>
#include <random>
#include <unordered_map>

#include "dtensor/explore.hpp"
#include "dtensor/planner.hpp"
#include "graph_oracle.hpp"
#include "planner/edges.hpp"
#include "test_util.hpp"

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

// Counts of the merged-search checks below.
struct MergedCounts {
  std::int64_t merged = 0, relabeled = 0, source_moves = 0;
};

// Every query from `sources` to `dst` whose search merges states (interchangeable mesh or tensor
// dims): every step of its plan and runner-up must be an edge of the full graph out of the layout
// before it (kind, mesh dims, next layout and cost), the plan's cost the shortest path's, and the
// runner-up's the cheapest path whose first step differs, computed here over the whole graph
// without ever returning to the source (as the search never does).
void check_merged_plans(const Mesh& mesh, const std::vector<std::int64_t>& shape, const CostModel& cm, const Sharding& dst,
                        const std::vector<Sharding>& layouts, const std::vector<Sharding>& sources, MergedCounts& n) {
  const Layout dl(mesh, shape, DType::f32, dst);
  const RedistributionGraph g(Layout(mesh, shape, DType::f32, layouts[0]), dl, cm, EdgeSet::all);
  std::vector<std::vector<GraphEdge>> out_of;
  const Graph G = graph_oracle::closure(layouts, [&](const Sharding& from) {
    out_of.push_back(g.edges(from, true));
    std::vector<std::pair<Sharding, double>> r;
    for (const auto& e : out_of.back()) r.emplace_back(e.to, e.step.cost_us);
    return r;
  });
  const auto dist = graph_oracle::distances_to(G, G.id.at(dst));
  for (const auto& src : sources) {
    const Layout sl(mesh, shape, DType::f32, src);
    GraphContext ctx(sl, dl, cm, EdgeSet::all);
    ctx.use_symmetry();
    if (!ctx.merges() || src == dst) continue;
    ++n.merged;
    n.source_moves += ctx.src_moves ? 1 : 0;
    const Plan plan = plan_redistribution(sl, dl, cm);
    const std::string what = mesh.str() + " " + shape_str(shape) + " " + src.str() + " -> " + dst.str();
    const std::size_t s_id = G.id.at(src);
    if (std::abs(plan.total_cost_us - dist[s_id]) > 1e-6 + 1e-12 * dist[s_id])
      FAIL_CHECK(what << ": planner " << plan.total_cost_us << " oracle " << dist[s_id]);
    // every step an edge of the whole graph out of the layout before it, ending at the target
    auto check_path = [&](const std::vector<Step>& steps, const char* which) {
      Sharding cur = src;
      for (const auto& st : steps) {
        REQUIRE(st.from == cur);
        const auto& edges = out_of[G.id.at(cur)];
        const bool found = std::any_of(edges.begin(), edges.end(), [&](const GraphEdge& e) {
          return e.step.kind == st.kind && e.step.mesh_dims == st.mesh_dims && e.to == st.to &&
                 std::abs(e.step.cost_us - st.cost_us) <= 1e-9 * (1 + st.cost_us);
        });
        if (!found) FAIL_CHECK(what << ": " << which << " step " << to_string(st.kind) << " to " << st.to.str() << " is no edge");
        cur = st.to;
      }
      CHECK(cur == dst);
    };
    check_path(plan.steps, "plan");
    if (plan.runner_up) check_path(plan.runner_up->steps, "runner-up");
    if (plan.steps.size() > 1 || (plan.steps.size() == 1 && plan.steps[0].to != src)) ++n.relabeled;
    // the runner-up: a first step other than the plan's, then a shortest path that does
    // not come back to the source
    Graph H = G;
    H.edges.erase(std::remove_if(H.edges.begin(), H.edges.end(), [&](const Graph::E& e) { return e.u == s_id; }), H.edges.end());
    const auto rest = graph_oracle::distances_to(H, H.id.at(dst));
    double want = INFINITY;
    for (const auto& e : out_of[s_id]) {
      const auto& f = plan.steps.front();
      if (e.step.kind == f.kind && e.step.mesh_dims == f.mesh_dims && e.to == f.to) continue;
      want = std::min(want, e.step.cost_us + rest[G.id.at(e.to)]);
    }
    if (std::isfinite(want)) {
      INFO(what);
      REQUIRE(plan.runner_up.has_value());
      REQUIRE(!plan.runner_up->steps.empty());
      const auto& f = plan.runner_up->steps.front();
      const auto& p0 = plan.steps.front();
      CHECK((f.kind != p0.kind || f.mesh_dims != p0.mesh_dims || f.to != p0.to));
      if (std::abs(plan.runner_up->total_cost_us - want) > 1e-6 + 1e-12 * want)
        FAIL_CHECK(what << ": runner-up " << plan.runner_up->total_cost_us << " oracle " << want);
    } else {
      CHECK_FALSE(plan.runner_up.has_value());
    }
  }
}

// A profile with a fitted curve per collective and link (copies and latencies by size band).
CostModel curved_model() {
  CostModel fitted = CostModel::default_model();
  for (bool inter : {false, true})
    for (Collective c : {Collective::all_gather, Collective::reduce_scatter, Collective::all_reduce, Collective::all_to_all,
                         Collective::send_recv})
      fitted.curves.push_back({c, inter, 4, {{64, 2.5, 20}, {512, 1.0 + static_cast<int>(c), 900}, {1e18, 30, 5000}}});
  return fitted;
}

TEST_CASE("interchangeable mesh dims: plans are graph paths, plan and runner-up costs are the oracle's", "[optimality]") {
  // Queries whose target stays the same when two mesh dims of one size (same side of the host
  // boundary) trade places: the planner searches one layout per class of relabelings after the
  // source and relabels the steps back. Where the exchange moves the source, paths through its
  // relabelings are real paths (to another layout) that the merged search cannot tell from paths
  // back to it: the runner-up must still be exact.
  MergedCounts n;
  CostModel hosts = CostModel::default_model();
  hosts.devices_per_host = 2;
  CostModel fitted = curved_model();
  for (const char* mesh_text : {"2x2", "2x2x2"}) {
    const Mesh mesh = Mesh::parse(mesh_text);
    const auto layouts = all_layouts(mesh, 2);
    for (const auto& shape : {std::vector<std::int64_t>{8, 8}, std::vector<std::int64_t>{9, 5}})
      for (const CostModel* cm : {&hosts, &fitted})
        for (const auto& dst : layouts) check_merged_plans(mesh, shape, *cm, dst, layouts, layouts, n);
  }
  INFO("symmetric queries " << n.merged << ", with steps " << n.relabeled << ", source moved by the exchange " << n.source_moves);
  CHECK(n.merged > 1000);
  CHECK(n.source_moves > 1000);
}

TEST_CASE("interchangeable tensor dims: a step costs the same with the dims exchanged, and so does every bound", "[optimality][bounds]") {
  // The premise of merging tensor dims (GraphContext::use_symmetry): two dims that neither end
  // shards, after a dim longer than the mesh has ranks, of one length or of lengths that the
  // rank count divides (16 and 8 on 2x2x2: every split even). Then every edge out of a
  // layout has a twin out of the exchanged layout (same kind and mesh dims, the exchanged next
  // layout) of exactly the same cost and peak, and every bound is the same. With that earlier
  // dim no longer than the ranks (4 of 8 on 2x2x2), a layout can leave every rank one index of it, a
  // gather along the first exchanged dim then needs no copy and along the second it does; with
  // lengths 8 and 12, a split of the 12 can be uneven where the same split of the 8 is not: the
  // dims are not merged there, and the costs indeed differ.
  const Mesh mesh = Mesh::parse("2x2x2");
  const auto layouts = all_layouts(mesh, 3);
  const std::array<std::int8_t, 3> swap{0, 2, 1};
  CostModel fitted = curved_model();
  CostModel hosts = CostModel::default_model();
  hosts.devices_per_host = 2;
  for (const auto& shape : {std::vector<std::int64_t>{9, 4, 4}, std::vector<std::int64_t>{4, 4, 4}, std::vector<std::int64_t>{9, 16, 8},
                            std::vector<std::int64_t>{9, 8, 12}}) {
    const bool merged = shape[0] > mesh.num_ranks() && shape[2] != 12;
    std::int64_t twins = 0, differ = 0, reordered = 0;
    for (const CostModel* cm : {&hosts, &fitted})
      for (const char* target : {"RR", "S(0)R", "P(sum)S(0)"}) {
        const Layout dl = Layout::parse(mesh, shape, DType::f32, std::string(target) + "R");
        const Layout sl(mesh, shape, DType::f32, layouts[0]);
        GraphContext sym(sl, dl, *cm, EdgeSet::all);
        sym.use_symmetry();
        if (merged) {
          REQUIRE(sym.tensor_sym_classes == std::vector<std::vector<int>>{{1, 2}});
        } else {
          REQUIRE(sym.tensor_sym_classes.empty());
        }
        const RedistributionGraph g(sl, dl, *cm, EdgeSet::all);
        GraphContext ctx(sl, dl, *cm, EdgeSet::all);  // (no merging: bounds of both layouts)
        for (const auto& s : layouts) {
          const Sharding t = s.with_tensor_dims_permuted(swap);
          REQUIRE(t.with_tensor_dims_permuted(swap) == s);
          const auto bs = ctx.table.bound[ctx.intern(s)], bt = ctx.table.bound[ctx.intern(t)];
          if (bs.us != bt.us || bs.missing != bt.missing || bs.before_last_us != bt.before_last_us || bs.traffic != bt.traffic ||
              bs.enters_host != bt.enters_host || bs.steps != bt.steps || bs.exact_ps != bt.exact_ps) {
            if (merged) FAIL_CHECK(s.str() << " bound " << bs.us << ", exchanged " << t.str() << " " << bt.us);
            ++differ;
          }
          const auto es = g.edges(s, false), et = g.edges(t, false);
          CHECK(es.size() == et.size());
          for (const auto& e : es) {
            // (a gather over mesh dims of several tensor dims lists them in tensor-dim order: the
            // twin lists the same dims, maybe in another order)
            const Sharding want = e.to.with_tensor_dims_permuted(swap);
            auto sorted = [](std::vector<int> v) {
              std::sort(v.begin(), v.end());
              return v;
            };
            const auto it = std::find_if(et.begin(), et.end(), [&](const GraphEdge& x) {
              return x.step.kind == e.step.kind && sorted(x.step.mesh_dims) == sorted(e.step.mesh_dims) && x.to == want;
            });
            if (it == et.end()) FAIL(shape_str(shape) << " " << s.str() << " -> " << e.to.str() << " (" << to_string(e.step.kind) << "): no edge "
                                                    << t.str() << " -> " << want.str());
            ++twins;
            // what the merged search's plans list such a gather's mesh dims by (all_gather_group)
            if (e.step.kind == StepKind::all_gather && e.step.mesh_dims.size() > 1) {
              std::uint32_t mask = 0;
              for (int m : e.step.mesh_dims) mask |= 1u << m;
              DimList listed;
              CHECK(all_gather_group(t, mask, listed));
              CHECK(std::vector<int>(listed.span().begin(), listed.span().end()) == it->step.mesh_dims);
              reordered += it->step.mesh_dims != e.step.mesh_dims ? 1 : 0;
            }
            if (it->step.cost_us != e.step.cost_us || it->step.peak_bytes != e.step.peak_bytes) {
              if (merged)
                FAIL_CHECK(shape_str(shape) << " " << s.str() << " -> " << e.to.str() << " costs " << e.step.cost_us << ", exchanged "
                                            << it->step.cost_us);
              ++differ;
            }
          }
        }
      }
    INFO(shape_str(shape) << ": edges with twins " << twins << ", differing " << differ << ", gathers listing their dims in another order "
                          << reordered);
    CHECK(twins > 10000);
    CHECK(reordered > 0);
    if (merged) {
      CHECK(differ == 0);
    } else {
      CHECK(differ > 0);
    }
  }
}

TEST_CASE("interchangeable tensor dims: plans are graph paths, plan and runner-up costs are the oracle's", "[optimality]") {
  // Targets that neither shard tensor dim 1 nor 2 (of one length or of lengths the ranks divide,
  // after a dim longer than the mesh's ranks): the planner searches one layout per exchange of
  // the two and permutes the steps back. From every layout of 2x2, with and without fitted
  // curves. The canonical layout puts the entries on dim 2 where only one of them has any: plans
  // that shard dim 1 on the way were permuted back.
  MergedCounts n;
  std::int64_t through_dim1 = 0;
  const Mesh mesh = Mesh::parse("2x2");
  const auto layouts = all_layouts(mesh, 3);
  CostModel fitted = curved_model();
  CostModel hosts = CostModel::default_model();
  hosts.devices_per_host = 2;
  // (one length; lengths that the 4 ranks divide)
  for (const auto& shape : {std::vector<std::int64_t>{5, 3, 3}, std::vector<std::int64_t>{5, 8, 4}})
  for (const CostModel* cm : {&hosts, &fitted})
    for (const auto& dst : layouts) {
      if (!dst.entries(1).empty() || !dst.entries(2).empty()) continue;
      check_merged_plans(mesh, shape, *cm, dst, layouts, layouts, n);
      for (const auto& src : layouts) {
        if (src == dst || !src.entries(1).empty() || !src.entries(2).empty()) continue;
        const Plan plan = plan_redistribution(Layout(mesh, shape, DType::f32, src), Layout(mesh, shape, DType::f32, dst), *cm);
        for (const auto& st : plan.steps)
          if (!st.to.entries(1).empty()) {
            ++through_dim1;
            break;
          }
      }
    }
  // and on 2x2x2 (a class of three mesh dims besides) to a few targets
  const Mesh mesh3 = Mesh::parse("2x2x2");
  const auto layouts3 = all_layouts(mesh3, 3);
  for (const auto& shape : {std::vector<std::int64_t>{9, 4, 4}, std::vector<std::int64_t>{9, 16, 8}})
    for (const char* target : {"RRR", "S(0)RR", "RP(sum)S(0)"})
      check_merged_plans(mesh3, shape, hosts, Sharding::parse(target, 3, 3), layouts3, layouts3, n);
  INFO("merged queries " << n.merged << ", with steps " << n.relabeled << ", plans through dim 1 " << through_dim1);
  CHECK(n.merged > 400);
  CHECK(through_dim1 > 10);
}

TEST_CASE("interchangeable tensor dims: the relabelings that can occur fit the edges' 16-bit index", "[optimality]") {
  // Eight interchangeable mesh dims already give 8! = 40,320 relabelings: a class of two tensor
  // dims on top (80,640) is not merged. Seven (5,040) leave room for three of four tensor dims.
  CostModel one_host = CostModel::default_model();
  one_host.devices_per_host = 256;  // every mesh dim on the same side of the host boundary
  auto classes = [&](const char* mesh_text, std::vector<std::int64_t> shape) {
    const Mesh mesh = Mesh::parse(mesh_text);
    const std::string src = "S(0)" + std::string(static_cast<std::size_t>(mesh.ndim() - 1), 'R');
    const std::string dst(static_cast<std::size_t>(mesh.ndim()), 'R');
    GraphContext ctx(Layout::parse(mesh, shape, DType::f32, src), Layout::parse(mesh, shape, DType::f32, dst), one_host, EdgeSet::all);
    ctx.use_symmetry();
    REQUIRE(ctx.sym_classes.size() == 1);
    CHECK(ctx.sym_classes[0].size() == static_cast<std::size_t>(mesh.ndim()));
    return ctx.tensor_sym_classes;
  };
  CHECK(classes("2x2x2x2x2x2x2x2", {1024, 4, 4}).empty());
  CHECK(classes("2x2x2x2x2x2x2", {1024, 4, 4}) == std::vector<std::vector<int>>{{1, 2}});
  CHECK(classes("2x2x2x2x2x2x2", {1024, 4, 4, 4, 4}) == std::vector<std::vector<int>>{{1, 2, 3}});
  // and such a query still plans (nothing to merge on the tensor side)
  const Mesh m8 = Mesh::parse("2x2x2x2x2x2x2x2");
  const Plan p = plan_redistribution(Layout::parse(m8, {1024, 4, 4}, DType::f32, "S(0)RRRRRRR"),
                                     Layout::parse(m8, {1024, 4, 4}, DType::f32, "RRRRRRRR"), one_host);
  CHECK(p.steps.size() == 1);
}

TEST_CASE("interchangeable mesh dims: every layout met after the source is canonical", "[optimality]") {
  // edges_of skips the canonical relabeling of a step over no mesh dim of a class from a canonical
  // state (the step keeps the class dims' roles in order): every state the enumeration interns,
  // the source aside, must then be canonical all the same. Expanded breadth-first from every
  // source of 2x2x2 (one class of three dims, or of two) up to 400 states per query.
  std::int64_t checked = 0, sources = 0;
  const Mesh mesh = Mesh::parse("2x2x2");
  const auto layouts = all_layouts(mesh, 2);
  CostModel hosts = CostModel::default_model();
  hosts.devices_per_host = 2;  // dim 0 inter-host: a class of the dims 1 and 2 only
  const CostModel plain = CostModel::default_model();
  for (const CostModel* cm : {static_cast<const CostModel*>(&hosts), &plain}) {
    for (const char* target : {"RRR", "S(0)RR", "P(sum)RR", "RS(1)S(1)"}) {
      const Sharding dst = Sharding::parse(target, 3, 2);
      const Layout dl(mesh, {8, 6}, DType::f32, dst);
      for (std::size_t i = 0; i < layouts.size(); i += 7) {
        const Layout sl(mesh, {8, 6}, DType::f32, layouts[i]);
        GraphContext ctx(sl, dl, *cm, EdgeSet::all);
        ctx.use_symmetry();
        if (ctx.sym_classes.empty()) continue;
        ++sources;
        const std::uint32_t src = ctx.intern(ctx.src);
        for (std::uint32_t id = 0; id < ctx.table.states.size() && id < 400; ++id) {
          (void)ctx.edges_of(id);
          if (id == src) continue;
          Relabeling p;
          if (ctx.canonical_perm(ctx.table.states[id], p)) FAIL_CHECK(layouts[i].str() << " -> " << target << ": met " << ctx.table.states[id].str() << ", not canonical");
          ++checked;
        }
      }
    }
  }
  INFO("sources " << sources << ", states checked " << checked);
  CHECK(sources > 20);
  CHECK(checked > 2000);
}

namespace {

// A profile shaped like a cluster's fit (three size bands per collective and link, latency and
// rate growing with the size, 8 devices per host): the bounds' envelopes meet every band at the
// sizes real tensors have.
CostModel cluster_like_profile() {
  CostModel m = CostModel::default_model();
  m.devices_per_host = 8;
  const Collective kinds[] = {Collective::all_gather, Collective::reduce_scatter, Collective::all_reduce, Collective::all_to_all,
                              Collective::send_recv};
  for (int k = 0; k < 5; ++k) {
    const double slow = 1.0 + 0.2 * k;  // each kind a little slower than the one before
    m.curves.push_back({kinds[k], false, 8,
                        {{65536, 6.0 * slow, 63 / slow}, {1048576, 15.0 * slow, 197 / slow}, {16777216, 30.0 * slow, 357 / slow}}});
    m.curves.push_back({kinds[k], true, 2,
                        {{65536, 30.0 * slow, 13 / slow}, {1048576, 75.0 * slow, 39 / slow}, {16777216, 150.0 * slow, 69 / slow}}});
  }
  return m;
}

// Dijkstra over the graph's own edges (written here, no bound): the cost from `from` to `to`,
// never through `avoid` (when given), or nothing when it is above `limit`.
std::optional<double> shortest(const RedistributionGraph& g, const Sharding& from, const Sharding& to, const Sharding* avoid,
                               double limit) {
  std::unordered_map<Sharding, double> dist{{from, 0.0}};
  using Item = std::pair<double, Sharding>;
  auto later = [](const Item& a, const Item& b) { return a.first > b.first; };
  std::priority_queue<Item, std::vector<Item>, decltype(later)> open(later);
  open.push({0.0, from});
  while (!open.empty()) {
    const auto [d, s] = open.top();
    open.pop();
    if (d > dist.at(s)) continue;  // a stale entry: s was reached cheaper since
    if (s == to) return d;
    if (d > limit) return std::nullopt;
    for (const auto& e : g.edges(s, false)) {
      if (avoid != nullptr && e.to == *avoid) continue;
      const double nd = d + e.step.cost_us;
      const auto it = dist.find(e.to);
      if (it == dist.end() || nd < it->second) {
        dist[e.to] = nd;
        open.push({nd, e.to});
      }
    }
  }
  return std::nullopt;
}

// A random layout text on `mesh` (R, Partial sum/avg/max, plain shards of the first
// `shard_dims` tensor dims, a random shard order on half of them), drawn from `rng`.
std::string random_layout_text(std::mt19937_64& rng, const Mesh& mesh, int shard_dims) {
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<int> kind(static_cast<std::size_t>(mesh.ndim())), dim(static_cast<std::size_t>(mesh.ndim()), -1);
  for (int m = 0; m < mesh.ndim(); ++m) {
    const int c = uni(0, 6);
    kind[static_cast<std::size_t>(m)] = c <= 1 ? 0 : c == 2 ? 1 : c == 3 ? 3 : 2;
    if (kind[static_cast<std::size_t>(m)] == 2) dim[static_cast<std::size_t>(m)] = uni(0, shard_dims - 1);
  }
  // a random shard order on half the layouts
  const bool orders = uni(0, 1) == 1;
  std::vector<int> pos(static_cast<std::size_t>(mesh.ndim()), -1);
  for (int d = 0; d < shard_dims; ++d) {
    std::vector<int> ms;
    for (int m = 0; m < mesh.ndim(); ++m)
      if (dim[static_cast<std::size_t>(m)] == d) ms.push_back(m);
    std::vector<int> perm(ms.size());
    for (std::size_t k = 0; k < perm.size(); ++k) perm[k] = static_cast<int>(k);
    std::shuffle(perm.begin(), perm.end(), rng);
    if (orders && ms.size() > 1)
      for (std::size_t k = 0; k < ms.size(); ++k) pos[static_cast<std::size_t>(ms[k])] = perm[k];
  }
  std::string t;
  for (int m = 0; m < mesh.ndim(); ++m) {
    const auto mi = static_cast<std::size_t>(m);
    if (kind[mi] == 0) t += "R";
    else if (kind[mi] == 1) t += "P(sum)";
    else if (kind[mi] == 3) t += uni(0, 1) ? "P(max)" : "P(avg)";
    else t += "S(" + std::to_string(dim[mi]) + ")" + (pos[mi] >= 0 ? "[" + std::to_string(pos[mi]) + "]" : "");
  }
  return t;
}

// A random valid layout (a text that mixes P(max) with another op is refused: drawn again).
Layout random_layout(std::mt19937_64& rng, const Mesh& mesh, const std::vector<std::int64_t>& shape, DType dtype, int shard_dims) {
  while (true) try {
      return Layout::parse(mesh, shape, dtype, random_layout_text(rng, mesh, shard_dims));
    } catch (const InputError&) {
    }
}

// Checks the plan and runner-up of src -> dst against a plain Dijkstra over the graph's edges;
// counts plans with steps and runner-ups.
void check_against_dijkstra(const Layout& src, const Layout& dst, const CostModel& cm, int& nontrivial, int& runner_ups) {
  PlanOptions o;
  o.runner_up = true;
  const Plan plan = plan_redistribution(src, dst, cm, o);
  const RedistributionGraph g(src, dst, cm, EdgeSet::all);
  const auto want = shortest(g, src.sharding(), dst.sharding(), nullptr, plan.total_cost_us * (1 + 1e-9) + 1e-6);
  const std::string what = src.mesh().str() + " " + shape_str(src.shape()) + " " + src.str() + " -> " + dst.str();
  INFO(what);
  REQUIRE(want.has_value());
  CHECK(close(plan.total_cost_us, *want));
  if (plan.steps.empty()) return;
  ++nontrivial;
  // The runner-up: the cheapest path whose first step is another, never back through the source.
  const Step& s0 = plan.steps.front();
  double best = INFINITY;
  for (const auto& e : g.edges(src.sharding(), false)) {
    if (e.to == src.sharding() || e.step.cost_us >= best) continue;
    if (e.step.kind == s0.kind && e.to == s0.to && e.step.mesh_dims == s0.mesh_dims) continue;
    if (const auto rest = shortest(g, e.to, dst.sharding(), &src.sharding(), best - e.step.cost_us + 1e-6))
      best = std::min(best, e.step.cost_us + *rest);
  }
  if (std::isinf(best)) {
    CHECK_FALSE(plan.runner_up.has_value());
  } else {
    REQUIRE(plan.runner_up.has_value());
    CHECK(close(plan.runner_up->total_cost_us, best));
    ++runner_ups;
  }
}

}  // namespace

TEST_CASE("planner is optimal at real sizes: seeded random pairs on meshes of up to 128 ranks, plan and runner-up", "[optimality]") {
  // The exhaustive oracles above use 8x8 and 9x5 tensors on meshes of at most 8 ranks. Here the
  // tensors are MiB to GiB (uneven and tiny ones too), the meshes 2-d to 4-d (a 2x2x4x8 of 128
  // ranks among them), the layouts random (shard orders, Partial sum/avg/max), under the default
  // model, the default model with two devices per host, and a cluster-like banded profile; the
  // oracle is a plain Dijkstra over the graph's own edges, so the search, its merging of
  // interchangeable dims and every bound are checked where the bench's queries live.
  const auto stride = sample_stride();
  CostModel hosts = CostModel::default_model();
  hosts.devices_per_host = 2;
  const CostModel cluster = cluster_like_profile(), def = CostModel::default_model();
  const CostModel* models[] = {&cluster, &hosts, &def};
  const char* meshes[] = {"2x2x2x2", "2x2x4", "4x2x2", "2x4", "8x2", "2x2x2", "2x2x4x8", "4x4x8", "3x2x2", "1x2x2x2"};
  std::mt19937_64 rng(20261127);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int plans = 0, runner_ups = 0, nontrivial = 0;
  const int per_model = static_cast<int>(std::max<std::int64_t>(40, 400 / stride));
  for (const CostModel* cm : models) {
    for (int i = 0; i < per_model; ++i) {
      const Mesh mesh = Mesh::parse(meshes[uni(0, 9)]);
      const int nd = uni(1, 3);
      std::vector<std::int64_t> shape;
      for (int d = 0; d < nd; ++d) {
        const int c = uni(0, 5);
        shape.push_back(c == 0 ? uni(1, 9) : c == 1 ? 1024 : c == 2 ? 4096 : c == 3 ? 64 : c == 4 ? 1000 + uni(0, 50) : 8192);
      }
      const DType dtype = uni(0, 1) ? DType::bf16 : DType::f32;
      const Layout src = random_layout(rng, mesh, shape, dtype, nd), dst = random_layout(rng, mesh, shape, dtype, nd);
      ++plans;
      check_against_dijkstra(src, dst, *cm, nontrivial, runner_ups);
    }
  }
  INFO("plans " << plans << ", with steps " << nontrivial << ", runner-ups " << runner_ups);
  CHECK(nontrivial > plans / 2);
  CHECK(runner_ups > nontrivial / 2);
}

TEST_CASE("planner is optimal at real sizes with interchangeable tensor dims of different lengths", "[optimality]") {
  // Tensors whose last two dims neither end shards, after a first dim longer than the mesh has
  // ranks: of lengths the rank count divides, the search merges the two (every split of either
  // is even); of other lengths (64 on 128 ranks, 1000) it must not. Plans and runner-ups against
  // a plain Dijkstra over the graph's own edges, at the sizes real tensors have.
  const auto stride = sample_stride();
  const CostModel cluster = cluster_like_profile(), def = CostModel::default_model();
  const char* meshes[] = {"2x2x2x2", "2x2x4", "2x4", "2x2x2", "2x2x4x8", "4x4x8", "8"};
  std::mt19937_64 rng(20261128);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const std::int64_t lengths[] = {64, 128, 256, 1024, 4096, 1000};
  int plans = 0, nontrivial = 0, runner_ups = 0, merged = 0, unmerged = 0;
  const int per_model = static_cast<int>(std::max<std::int64_t>(20, 100 / stride));
  for (const CostModel* cm : {&cluster, &def}) {
    for (int i = 0; i < per_model; ++i) {
      const Mesh mesh = Mesh::parse(meshes[uni(0, 6)]);
      const int shard_dims = uni(1, 2);
      std::vector<std::int64_t> shape{uni(0, 1) ? 8192 : 2048};
      if (shard_dims == 2) shape.push_back(uni(0, 1) ? 4096 : 1000 + uni(0, 50));
      shape.push_back(lengths[uni(0, 5)]);
      shape.push_back(lengths[uni(0, 5)]);
      const DType dtype = uni(0, 1) ? DType::bf16 : DType::f32;
      const Layout src = random_layout(rng, mesh, shape, dtype, shard_dims), dst = random_layout(rng, mesh, shape, dtype, shard_dims);
      GraphContext ctx(src, dst, *cm, EdgeSet::all);
      ctx.use_symmetry();
      const auto a = shape[shape.size() - 2], b = shape.back();
      const bool divides = a % mesh.num_ranks() == 0 && b % mesh.num_ranks() == 0;
      // (with two shardable dims the second may be free too and join a class)
      const int last = static_cast<int>(shape.size()) - 1;
      const bool tensor_merged = std::any_of(ctx.tensor_sym_classes.begin(), ctx.tensor_sym_classes.end(), [&](const auto& c) {
        return std::find(c.begin(), c.end(), last - 1) != c.end() && std::find(c.begin(), c.end(), last) != c.end();
      });
      CHECK(tensor_merged == (a == b || divides));
      if (a != b) (tensor_merged ? merged : unmerged) += 1;
      ++plans;
      check_against_dijkstra(src, dst, *cm, nontrivial, runner_ups);
    }
  }
  INFO("plans " << plans << ", with steps " << nontrivial << ", runner-ups " << runner_ups << ", merged with different lengths "
                << merged << ", not merged " << unmerged);
  CHECK(merged > plans / 4);
  CHECK(unmerged > plans / 10);
  CHECK(runner_ups > nontrivial / 2);
}

TEST_CASE("state keys: a move's key is the key of the layout it makes, and the canonical relabelings read the same on both", "[optimality]") {
  // The searches intern states by StateKey and make a next layout only when its key is new
  // (GraphContext::edges_of): for every move out of every layout (shard orders, Partials,
  // strided kinds, meshes of five dims so both key words are used), key_after must give the key
  // of the layout the move makes, the key must tell layouts apart, and the canonical relabeling
  // found on the key must be the one found on the layout.
  std::int64_t moves = 0, relabeled = 0, tensor_moved = 0, wrong = 0;
  const auto stride = sample_stride();
  auto expect = [&](bool ok, const Sharding& s, const std::string& what) {
    if (ok) return;
    if (++wrong <= 10) FAIL_CHECK(s.str() << ": " << what);
  };
  auto check = [&](const char* mesh_text, std::vector<std::int64_t> shape, const std::vector<oracle::Pl>& options,
                   const char* src_text, const char* dst_text) {
    const Mesh mesh = Mesh::parse(mesh_text);
    const Layout sl = Layout::parse(mesh, shape, DType::f32, src_text), dl = Layout::parse(mesh, shape, DType::f32, dst_text);
    const CostModel cm = CostModel::default_model();
    GraphContext ctx(sl, dl, cm, EdgeSet::all);
    ctx.use_symmetry();
    std::map<std::array<std::uint64_t, 2>, Sharding> seen;  // key -> layout: distinct layouts, distinct keys
    std::int64_t k = 0;
    for (const auto& pls : oracle::layouts(mesh.ndim(), static_cast<int>(shape.size()), options)) {
      if (k++ % stride != 0) continue;
      Sharding from;
      try {
        from = Sharding::parse(oracle::text(pls), mesh.ndim(), static_cast<int>(shape.size()));
      } catch (const InputError&) {
        continue;  // (Partial ops that do not mix)
      }
      const StateKey key = ctx.key_of(from);
      const auto [it, fresh] = seen.try_emplace(key.w, from);
      expect(fresh || it->second == from, from, "two layouts, one key");
      DimPerm p = identity_perm(), q = identity_perm();
      expect(ctx.canonical_key_perm(key, p) == ctx.canonical_mesh_perm(from, q) && p == q, from, "canonical relabeling");
      enumerate_moves(ctx, from, [&](StepKind kind, const DimList& group, const Move& mv) {
        const Sharding to = mv.apply(from, ctx.dst, group);
        const StateKey want = ctx.key_of(to);
        const StateKey got = ctx.key_after(key, from, mv, group);
        expect(got == want, to, std::string(to_string(kind)) + " key_after");
        expect((got == key) == (to == from), to, "key equal to the source's");
        DimPerm a = identity_perm(), b = identity_perm();
        const bool moved = ctx.canonical_key_perm(got, a);
        expect(moved == ctx.canonical_mesh_perm(to, b) && a == b, to, "canonical mesh relabeling");
        if (moved) {
          ++relabeled;
          expect(ctx.relabeled_key(got, a) ==
                     ctx.key_of(to.with_mesh_dims_relabeled(std::span<const std::int8_t>(a.data(), static_cast<std::size_t>(mesh.ndim())))),
                 to, "relabeled key");
        }
        // with interchangeable tensor dims too: the relabeling and the canonical layout's key
        Relabeling ra, rb;
        StateKey c;
        const bool any = ctx.canonical_key(got, ra, c);
        expect(any == ctx.canonical_perm(to, rb) && ra == rb, to, "canonical relabeling");
        expect(c == ctx.key_of(any ? ctx.relabel(to, rb) : to), to, "canonical key");
        tensor_moved += ra.tensor != Relabeling::kTensorIdentity ? 1 : 0;
        ++moves;
      });
    }
  };
  const std::vector<oracle::Pl> plain{{'R'}, {'P'}, {'M'}, {'S', 0, 1}, {'S', 1, 1}};
  const std::vector<oracle::Pl> strided{{'R'}, {'P'}, {'S', 0, 1}, {'S', 0, 2}, {'S', 1, 1}};
  check("2x2x2", {8, 8}, plain, "S(0)RR", "RRS(1)");
  check("2x2x2x2", {16, 8}, plain, "P(sum)RRR", "RRRR");
  check("2x2x2", {8, 8}, strided, "_S(0, 2)RS(1)", "RS(0)R");
  check("2x2x1x2x2", {16, 8}, plain, "S(0)RRRP(sum)", "RRRS(1)S(1)");
  check("3x2x2x2x2", {12, 8}, strided, "_S(0, 2)RRRS(0)", "RRRRR");
  // interchangeable tensor dims (of one length, and of lengths the ranks divide)
  const std::vector<oracle::Pl> three{{'R'}, {'P'}, {'S', 0, 1}, {'S', 1, 1}, {'S', 2, 1}};
  check("2x2x2", {9, 4, 4}, three, "S(0)RR", "RRR");
  check("2x2x1x2x2", {17, 16, 32}, three, "RS(0)RRR", "P(sum)RRRR");
  INFO("moves " << moves << ", relabeled on the key " << relabeled << ", tensor dims exchanged " << tensor_moved);
  CHECK(wrong == 0);
  CHECK(moves > 20000 / stride);
  CHECK(relabeled > 1000 / stride);
  CHECK(tensor_moved > 1000 / stride);
}
