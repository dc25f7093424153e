// The search's lower bounds (src/planner/bounds.cpp) on whole graphs: on every state the bound is
// at most the true remaining cost (admissible, against Bellman-Ford over the reachable graph),
// and on every edge h(u) <= c(u, v) + h(v) (consistent, which makes A* settle each state once
// with its final cost). Sizes are large enough that wire time dominates latency, so the byte
// terms are what is tested, and meshes span hosts (devices_per_host below the mesh size), so
// the host-block term is too. The same check run on the bound times 1.3 must find violations:
// the bounds are tight enough somewhere that the check can fail.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <unordered_map>

#include "dtensor/planner.hpp"
#include "graph_oracle.hpp"
#include "planner/edges.hpp"

using namespace dtensor;

namespace {

using graph_oracle::Graph;

Graph closure(const GraphContext& ctx, const std::vector<Sharding>& starts) {
  std::vector<Edge> out;
  return graph_oracle::closure(starts, [&](const Sharding& from) {
    enumerate_edges(ctx, from, out);
    std::vector<std::pair<Sharding, double>> next;
    for (const auto& e : out) next.emplace_back(e.to, e.step.cost_us);
    return next;
  });
}

struct Tally {
  std::int64_t states = 0, edges = 0, bad = 0, bad_inflated = 0;
  std::int64_t reduce_inflated = 0;  // states where 1.3x the reduction term alone exceeds the cost
  std::int64_t last_inflated = 0;    // where 1.3x the last-step term alone does
  double tightest = 0;  // largest bound / true remaining cost over states with a positive cost
};

void check_bounds(const Mesh& mesh, const std::vector<std::int64_t>& shape, const CostModel& cm, EdgeSet es, Tally& t) {
  const auto layouts = graph_oracle::all_layouts(mesh, static_cast<int>(shape.size()));
  // With every edge the bounds do not depend on the source (the whole closure is checked under
  // one context); the pytorch edge set's relaxed graph knows the source's Partial ops, so there
  // every source gets its own context and only what it reaches is checked.
  std::vector<std::pair<Sharding, Sharding>> queries;
  for (const auto& dst : layouts) {
    if (es == EdgeSet::all) queries.emplace_back(layouts[0], dst);
    else
      for (const auto& src : layouts) queries.emplace_back(src, dst);
  }
  for (const auto& [src, dst] : queries) {
    const GraphContext ctx(Layout(mesh, shape, DType::f32, src), Layout(mesh, shape, DType::f32, dst), cm, es);
    const Graph G = closure(ctx, es == EdgeSet::all ? layouts : std::vector<Sharding>{src});
    const auto dist = graph_oracle::distances_to(G, G.id.at(dst));
    std::vector<double> h(G.states.size());
    for (std::size_t u = 0; u < G.states.size(); ++u) h[u] = ctx.bounds.lower_bound(G.states[u]).us;
    auto tol = [](double x) { return 1e-6 + 1e-9 * std::abs(x); };
    for (std::size_t u = 0; u < G.states.size(); ++u) {
      ++t.states;
      if (!std::isfinite(dist[u])) continue;
      if (h[u] > dist[u] + tol(dist[u])) {
        ++t.bad;
        FAIL_CHECK("not admissible: " << mesh.str() << " " << shape_str(shape) << " " << cm.name << " " << to_string(es) << " "
                                      << G.states[u].str() << " -> " << dst.str() << ": bound " << h[u] << " > cost "
                                      << dist[u]);
      }
      if (1.3 * h[u] > dist[u] + tol(dist[u])) ++t.bad_inflated;
      if (1.3 * ctx.bounds.reduction_bound_us(G.states[u]) > dist[u] + tol(dist[u])) ++t.reduce_inflated;
      if (!equivalent(G.states[u], dst, mesh.shape(), shape) &&
          1.3 * ctx.bounds.last_step_bound_us(G.states[u], ctx.bounds.lower_bound(G.states[u]).missing) > dist[u] + tol(dist[u]))
        ++t.last_inflated;
      if (dist[u] > 0) t.tightest = std::max(t.tightest, h[u] / dist[u]);
    }
    for (const auto& e : G.edges) {
      ++t.edges;
      if (h[e.u] > e.w + h[e.v] + tol(h[e.u])) {
        ++t.bad;
        FAIL_CHECK("not consistent: " << mesh.str() << " " << shape_str(shape) << " " << cm.name << " " << to_string(es) << " "
                                      << G.states[e.u].str() << " -> " << G.states[e.v].str() << " (target " << dst.str()
                                      << "): bound " << h[e.u] << " > step " << e.w << " + bound " << h[e.v]);
      }
    }
  }
}

// The search's edge floors (Bounds::edge_floor_us: what it defers costing an edge with) are at
// most the edge's cost, on every edge out of every layout.
struct FloorTally {
  std::int64_t edges = 0, bad = 0, inflated = 0, exact = 0;
  // the missing-bytes term's rate: every step delivers what a rank receives at most at
  // CostModel::receive_bw_floor_GBps (wire_floor_us of the bytes received is at most its cost)
  std::int64_t receiving = 0, receive_inflated = 0;
  // the direct step's own floor (GraphContext::direct_floor_us: the search defers it with that)
  std::int64_t direct = 0, direct_inflated = 0;
  // Bounds::receive_floor_us of what a step's busiest rank receives
  std::int64_t enveloped = 0, envelope_inflated = 0;
};

void check_floors(const Mesh& mesh, const std::vector<std::int64_t>& shape, const CostModel& cm, EdgeSet es, FloorTally& t) {
  const auto layouts = graph_oracle::all_layouts(mesh, static_cast<int>(shape.size()));
  const GraphContext ctx(Layout(mesh, shape, DType::f32, layouts[0]), Layout(mesh, shape, DType::f32, layouts.back()), cm, es);
  std::vector<Edge> out;
  for (const auto& from : layouts) {
    enumerate_edges(ctx, from, out);
    const auto from_max = ctx.geo.numel_stats(from).max;
    for (const auto& e : out) {
      const double cost = e.step.cost_us;
      // `floor` (what `what` charges for the edge) at most its cost; 1.3x it above the cost counted
      auto at_most_cost = [&](const char* what, double floor, std::int64_t& inflated) {
        if (floor > cost + 1e-6 + 1e-9 * cost) {
          ++t.bad;
          FAIL_CHECK(what << " above the cost: " << mesh.str() << " " << shape_str(shape) << " " << cm.name << " "
                          << to_string(e.kind) << " " << from.str() << " -> " << e.to.str() << ": " << floor << " > cost "
                          << cost);
        }
        if (1.3 * floor > cost + 1e-6) ++inflated;
      };
      if (e.kind == StepKind::direct) {
        ++t.direct;
        at_most_cost("direct floor", ctx.direct_floor_us(ctx.intern(from)), t.direct_inflated);
      }
      const double floor = ctx.bounds.edge_floor_us(e.kind, e.group.span(), from, from_max);
      ++t.edges;
      at_most_cost("edge floor", floor, t.inflated);
      if (cost > 0 && std::abs(floor - cost) <= 1e-9 * cost) ++t.exact;
      if (e.step.bytes_received > 0 && !cm.prices_by_shard_count()) {
        // the byte terms' charge for what the step's busiest rank receives, on its link and on
        // either (a fitted profile's envelope of its bands)
        const double r = static_cast<double>(e.step.bytes_received);
        for (const bool own_link : {true, false}) {
          ++t.enveloped;
          at_most_cost("envelope", ctx.bounds.receive_floor_us(r, own_link && e.step.inter_host, own_link && !e.step.inter_host),
                       t.envelope_inflated);
        }
        ++t.receiving;
        at_most_cost("receive floor", cm.wire_floor_us(r), t.receive_inflated);
      }
    }
  }
}

}  // namespace

TEST_CASE("edge floors are at most the edge's cost on every edge", "[bounds]") {
  CostModel two = CostModel::default_model();
  two.devices_per_host = 2;
  CostModel fitted = two;
  fitted.name = "fitted";
  fitted.inter = {1.0, 0.1, 2000, 2500};
  for (bool inter : {false, true})
    for (Collective c : {Collective::all_gather, Collective::reduce_scatter, Collective::all_reduce, Collective::all_to_all,
                         Collective::send_recv})
      fitted.curves.push_back({c, inter, 4, {{1 << 20, 2.5, 20}, {1 << 26, 1.0 + static_cast<int>(c), 900}, {1e18, 30, 5000}}});
  CostModel torch = CostModel::pytorch();
  torch.devices_per_host = 2;
  FloorTally ring, exact, curves;
  for (const char* mesh_text : {"4", "2x2", "2x4", "2x2x2"})
    for (const auto& shape : {std::vector<std::int64_t>{1 << 14, 1 << 12}, std::vector<std::int64_t>{10007, 3001}, std::vector<std::int64_t>{9, 5}}) {
      check_floors(Mesh::parse(mesh_text), shape, two, EdgeSet::all, ring);
      check_floors(Mesh::parse(mesh_text), shape, fitted, EdgeSet::all, curves);
      check_floors(Mesh::parse(mesh_text), shape, torch, EdgeSet::pytorch, exact);
    }
  // the fitted curves price the floors too (a direct step on the send/recv curve, a collective
  // on its own): at most the cost, and 1.3x them is caught
  INFO("fitted curves: edges " << curves.edges << ", 1.3x the floor above the cost " << curves.inflated << "; direct steps "
                               << curves.direct << ", 1.3x their floor above the cost " << curves.direct_inflated);
  CHECK(curves.bad == 0);
  CHECK(curves.edges > 3000);
  CHECK(curves.inflated > curves.edges / 10);
  CHECK(curves.direct > 150);
  CHECK(curves.direct_inflated > curves.direct / 10);
  // the bands' envelope (each band's latency with its own rate) is at most the cost of every
  // receiving step, and tight enough on some that 1.3x it is caught
  INFO("fitted curves: receiving edges x 2 links " << curves.enveloped << ", 1.3x the envelope above the cost "
                                                   << curves.envelope_inflated);
  CHECK(curves.enveloped > 2000);
  CHECK(curves.envelope_inflated > 0);

  INFO("ring: edges " << ring.edges << ", 1.3x the floor above the cost " << ring.inflated << "; pytorch formula: edges "
                      << exact.edges << ", floor = cost " << exact.exact << "; receiving edges " << ring.receiving
                      << ", 1.3x the receive floor above the cost " << ring.receive_inflated);
  CHECK(ring.bad == 0);
  CHECK(exact.bad == 0);
  CHECK(ring.edges > 3000);
  // the check has teeth: floors 1.3x too high are caught
  CHECK(ring.inflated > ring.edges / 10);
  // under PyTorch's formula a collective's floor is its cost (local steps cost nothing)
  CHECK(exact.exact > exact.edges / 4);
  // the receive rate is tight on some steps: 1.3x it is caught
  CHECK(ring.receiving > 2000);
  CHECK(ring.receive_inflated > 0);
  // and the direct step's floor: at most its cost, and 1.3x it is caught
  INFO("direct steps " << ring.direct << ", 1.3x their floor above the cost " << ring.direct_inflated);
  CHECK(ring.direct > 150);
  CHECK(ring.direct_inflated > ring.direct / 10);
}

TEST_CASE("lower bounds are admissible and consistent on whole graphs, across hosts", "[bounds]") {
  CostModel two = CostModel::default_model();
  two.name = "default, 2 per host";
  two.devices_per_host = 2;
  CostModel one = CostModel::default_model();
  one.name = "default, 1 per host";
  one.devices_per_host = 1;
  // a fitted profile whose inter link is faster than the intra one
  CostModel fitted = CostModel::default_model();
  fitted.name = "fitted, fast inter";
  fitted.devices_per_host = 2;
  fitted.inter = {1.0, 0.1, 2000, 2500};
  for (bool inter : {false, true})
    for (Collective c : {Collective::all_gather, Collective::reduce_scatter, Collective::all_reduce, Collective::all_to_all,
                         Collective::send_recv})
      fitted.curves.push_back({c, inter, 4, {{1 << 20, 2.5, 20}, {1 << 26, 1.0 + static_cast<int>(c), 900}, {1e18, 30, 5000}}});
  // a profile shaped like a fit of real logs: per collective, bands whose latency and rate both
  // grow with the size (the envelope of the bands is then well above the least latency paired
  // with the best rate), the inter link's slower, fitted on 8 ranks within a host and 2 across
  CostModel banded = CostModel::default_model();
  banded.name = "fitted, banded";
  banded.devices_per_host = 2;
  for (bool inter : {false, true})
    for (Collective c : {Collective::all_gather, Collective::reduce_scatter, Collective::all_reduce, Collective::all_to_all,
                         Collective::send_recv}) {
      const double k = 1.0 + 0.2 * static_cast<int>(c), x = inter ? 5.0 : 1.0;
      banded.curves.push_back({c, inter, inter ? 2 : 8,
                               {{65536, 6 * k * x, 60 / k / x}, {1 << 20, 15 * k * x, 200 / k / x}, {1 << 24, 30 * k * x, 360 / k / x}}});
    }
  Tally t;
  for (const char* mesh_text : {"4", "2x2", "2x4", "2x2x2"})
    for (const auto& shape : {std::vector<std::int64_t>{1 << 14, 1 << 12}, std::vector<std::int64_t>{10007, 3001}, std::vector<std::int64_t>{9, 5},
                              std::vector<std::int64_t>{300, 1000}})
      for (const CostModel* cm : {&two, &one, &fitted, &banded})
        for (EdgeSet es : {EdgeSet::all, EdgeSet::pytorch})
          // the pytorch edge set checks every (source, target) pair: on the smaller meshes only
          if (es == EdgeSet::all || Mesh::parse(mesh_text).num_ranks() <= 4) check_bounds(Mesh::parse(mesh_text), shape, *cm, es, t);
  INFO("states " << t.states << ", edges " << t.edges << ", tightest bound/cost " << t.tightest << ", states where 1.3x the bound "
                 "exceeds the cost " << t.bad_inflated << ", where 1.3x the reduction term alone does " << t.reduce_inflated
                 << ", the last-step term " << t.last_inflated);
  CHECK(t.bad == 0);
  CHECK(t.states > 10000);
  // the check has teeth: a bound 1.3x too high is caught
  CHECK(t.bad_inflated > 0);
  CHECK(t.tightest > 0.9);
  // and so is the reduction term on its own (it is tight where the plan is one reduce_scatter)
  CHECK(t.reduce_inflated > 0);
  // and the last-step term (tight where the plan is one local step or one zero-copy collective)
  CHECK(t.last_inflated > 0);
}

// The host-block term counts what a block holds by descending the entries (no union built):
// the same count as the union of every member's indices, for every layout, tensor dim and
// sampled block, uneven sizes and empty chunks included.
TEST_CASE("host-block counts equal the union of the block's members", "[bounds]") {
  struct Case {
    const char* mesh;
    std::int64_t per_host;
    std::vector<std::int64_t> shape;
  };
  const std::vector<Case> cases{{"2x2x2", 2, {7, 10}}, {"4x2", 2, {9, 3}}, {"3x2x2", 4, {5, 11}},
                                {"2x2x4", 4, {13, 2}}, {"2x4x2", 2, {6, 1}}, {"2x2x2x2", 4, {10, 7}}};
  std::int64_t compared = 0, partial_holdings = 0;
  for (const auto& c : cases) {
    const Mesh mesh = Mesh::parse(c.mesh);
    CostModel cm = CostModel::default_model();
    cm.devices_per_host = c.per_host;
    const auto layouts = graph_oracle::all_layouts(mesh, static_cast<int>(c.shape.size()));
    std::vector<Sharding> targets;
    for (const auto& s : layouts)
      if (!s.has_partial()) targets.push_back(s);
    for (std::size_t t = 0; t < targets.size(); t += 5) {
      const GraphContext ctx(Layout(mesh, c.shape, DType::f32, layouts[0]), Layout(mesh, c.shape, DType::f32, targets[t]), cm,
                             EdgeSet::all);
      REQUIRE(ctx.bounds.sampled_blocks() > 0);
      for (const auto& s : layouts)
        for (int d = 0; d < static_cast<int>(c.shape.size()); ++d)
          for (std::size_t k = 0; k < ctx.bounds.sampled_blocks(); ++k) {
            const auto fast = ctx.bounds.block_count(d, s.entries(d), k, false);
            const auto ref = ctx.bounds.block_count(d, s.entries(d), k, true);
            if (fast != ref)
              FAIL_CHECK(c.mesh << " " << c.per_host << " per host, target " << targets[t].str() << ", " << s.str() << " dim " << d
                                << " block " << k << ": " << fast << " != " << ref);
            ++compared;
            partial_holdings += ref > 0 && ref < ctx.bounds.block_count(d, targets[t].entries(d), k, true);
          }
    }
  }
  INFO("compared " << compared << ", blocks holding part of their need " << partial_holdings);
  CHECK(compared > 20000);
  CHECK(partial_holdings > 1000);
}

// The host-block term samples about 4 blocks, in a set that swapping two interchangeable mesh
// dims maps onto itself (else their states could not merge); on large grids every
// (nblocks / 16)-th block. The per-rank terms' sampled ranks are closed under such swaps too.
TEST_CASE("the sampled host blocks and ranks keep interchangeable mesh dims interchangeable", "[bounds]") {
  struct Case {
    const char* mesh;
    std::int64_t per_host;
    std::size_t blocks;
  };
  for (const Case& c : {Case{"4x4x8", 8, 4}, Case{"2x2x4x8", 8, 4}, Case{"2x2x2x8", 8, 4}, Case{"4x4x4x4x4x4", 1, 16}}) {
    const Mesh mesh = Mesh::parse(c.mesh);
    CostModel cm = CostModel::default_model();
    cm.devices_per_host = c.per_host;
    const std::vector<std::int64_t> shape{64, 64};
    const GraphContext ctx(Layout::parse(mesh, shape, DType::f32, std::string(static_cast<std::size_t>(mesh.ndim()), 'R')),
                           Layout::parse(mesh, shape, DType::f32, "S(0)" + std::string(static_cast<std::size_t>(mesh.ndim() - 1), 'R')), cm,
                           EdgeSet::all);
    INFO(c.mesh << ", " << c.per_host << " per host");
    CHECK(ctx.bounds.sampled_blocks() == c.blocks);
    if (c.blocks == 4) CHECK(ctx.bounds.sample_invariant(0, 1));
  }
  // the sampled ranks too (the diagonals of a 4x4x4 mesh; every 4th rank in row-major order
  // was not: (i, j, 0) has no swapped (i, 0, j))
  const Mesh cube = Mesh::parse("4x4x4");
  const std::vector<std::int64_t> shape{64, 64};
  CostModel cm = CostModel::default_model();
  cm.devices_per_host = 64;  // one host: no blocks
  const GraphContext ctx(Layout::parse(cube, shape, DType::f32, "RRR"), Layout::parse(cube, shape, DType::f32, "S(0)S(1)R"), cm,
                         EdgeSet::all);
  CHECK(ctx.bounds.sampled_blocks() == 0);
  CHECK(ctx.bounds.sample_invariant(0, 1));
  CHECK(ctx.bounds.sample_invariant(1, 2));
  CHECK(ctx.bounds.sample_invariant(0, 2));
}

// GraphContext::intern's open-addressed index: every layout of a small mesh gets one id, the
// same on every lookup, across the index's growth.
TEST_CASE("interning gives each layout one stable id", "[planner]") {
  const Mesh mesh = Mesh::parse("2x2x2x2");
  const std::vector<std::int64_t> shape{16, 12, 8};
  const auto layouts = graph_oracle::all_layouts(mesh, 3);
  REQUIRE(layouts.size() > 500);  // past the index's first growth (at 128)
  const CostModel cm = CostModel::default_model();
  const GraphContext ctx(Layout(mesh, shape, DType::f32, layouts[0]), Layout(mesh, shape, DType::f32, layouts[1]), cm,
                         EdgeSet::all);
  std::vector<std::uint32_t> ids;
  for (const auto& s : layouts) ids.push_back(ctx.intern(s));
  std::vector<std::uint32_t> sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());  // distinct layouts, distinct ids
  CHECK(ctx.table.states.size() == layouts.size());
  for (std::size_t k = layouts.size(); k-- > 0;) {  // again, in reverse: the same ids
    CHECK(ctx.intern(layouts[k]) == ids[k]);
    CHECK(ctx.table.states[ids[k]] == layouts[k]);
  }
}
