// Cross-mesh resharding: every pair of 1-d layouts between meshes of 1-4 ranks on identical,
// overlapping and disjoint world ranks, run one thread per world rank and checked by the
// independent oracle; the chosen intermediate layouts against every pair of intermediates; the
// sender balance against brute force; bad input.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <cstdlib>
#include <map>
#include <numeric>

#include "dtensor/cross_mesh_executor.hpp"
#include "dtensor/error.hpp"
#include "dtensor/plan_cache.hpp"
#include "dtensor/simulate.hpp"
#include "exec_check.hpp"
#include "oracle.hpp"
#include "test_util.hpp"

using namespace dtensor;
using namespace exec_check;

namespace {


// World ranks of a mesh of `n` ranks placed `how` against a source mesh of `na` ranks on 0..na-1.
std::vector<std::int64_t> placed(std::int64_t n, std::int64_t na, int how) {
  std::vector<std::int64_t> r(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    if (how == 0) r[static_cast<std::size_t>(i)] = i;                   // from 0: identical or nested
    else if (how == 1) r[static_cast<std::size_t>(i)] = na + i;         // disjoint
    else r[static_cast<std::size_t>(i)] = na + n - 2 - i;                // reversed, overlapping the last A rank
  }
  return r;
}

std::vector<std::int64_t> iota(std::int64_t n, std::int64_t from = 0) {
  std::vector<std::int64_t> r(static_cast<std::size_t>(n));
  std::iota(r.begin(), r.end(), from);
  return r;
}

// The least possible busiest-rank bytes over every integral choice of senders (brute force).
std::int64_t brute_force_busiest(const CrossMeshPlan& p) {
  const auto s = static_cast<std::int64_t>(itemsize(p.src.dtype()));
  std::vector<std::vector<IndexSet>> hold, need;
  for (std::int64_t a = 0; a < p.src.mesh().num_ranks(); ++a) hold.push_back(p.pre.dst.indices(p.src.mesh().coord_of_rank(a)));
  for (std::int64_t b = 0; b < p.dst.mesh().num_ranks(); ++b) need.push_back(p.post.src.indices(p.dst.mesh().coord_of_rank(b)));
  struct Piece {
    std::vector<std::int64_t> holders;
    std::int64_t b, n;
  };
  std::vector<Piece> pieces;
  std::vector<std::int64_t> recv(static_cast<std::size_t>(p.world_size), 0);
  for (const auto& m : p.messages) {
    const auto wb = p.dst_ranks[static_cast<std::size_t>(m.to)];
    if (p.src_ranks[static_cast<std::size_t>(m.from)] == wb) continue;
    Piece pc{{}, m.to, m.elements};
    for (std::int64_t a = 0; a < static_cast<std::int64_t>(hold.size()); ++a)
      if (hold[static_cast<std::size_t>(a)] == hold[static_cast<std::size_t>(m.from)]) pc.holders.push_back(a);
    recv[static_cast<std::size_t>(wb)] += m.elements;
    pieces.push_back(pc);
  }
  std::int64_t best = INT64_MAX;
  std::vector<std::size_t> pick(pieces.size(), 0);
  while (true) {
    std::vector<std::int64_t> sent(static_cast<std::size_t>(p.world_size), 0);
    for (std::size_t i = 0; i < pieces.size(); ++i)
      sent[static_cast<std::size_t>(p.src_ranks[static_cast<std::size_t>(pieces[i].holders[pick[i]])])] += pieces[i].n;
    std::int64_t worst = 0;
    for (std::size_t w = 0; w < sent.size(); ++w) worst = std::max({worst, sent[w], recv[w]});
    best = std::min(best, worst);
    std::size_t k = 0;
    while (k < pieces.size() && ++pick[k] == pieces[k].holders.size()) pick[k++] = 0;
    if (k == pieces.size()) break;
  }
  return best * s;
}

}  // namespace

TEST_CASE("cross-mesh: every pair of 1-d layouts, meshes of 1-4 ranks, against the oracle", "[cross_mesh]") {
  const auto stride = sample_stride();
  const auto layouts = oracle::layouts(1, 1, placement_options(1));
  std::int64_t cases = 0, ran = 0, balanced = 0, with_choice = 0;
  for (std::int64_t na = 1; na <= 4; ++na)
    for (std::int64_t nb = 1; nb <= 4; ++nb)
      for (int how = 0; how < 3; ++how) {
        const auto src_ranks = iota(na), dst_ranks = placed(nb, na, how);
        for (std::int64_t len : {0, 1, 3, 5}) {
          for (const auto& a : layouts)
            for (const auto& b : layouts) {
              if (cases++ % stride != 0) continue;
              const Layout src = Layout::parse(Mesh({na}), {len}, DType::f64, oracle::text(a));
              const Layout dst = Layout::parse(Mesh({nb}), {len}, DType::f64, oracle::text(b));
              const auto plan = plan_cross_mesh(src, src_ranks, dst, dst_ranks, CostModel::default_model());
              REQUIRE_NOTHROW(validate_cross_mesh_plan(plan));
              const auto sim = simulate(plan);
              Run run;
              run.outputs = sim.outputs;
              const auto err = check({nb}, {len}, DType::f64, b, run);
              if (!err.empty() || !sim.verified) {
                FAIL_CHECK("A=" << na << " B=" << nb << " placement " << how << " len " << len << ": "
                                << src.placements_str() << " -> " << dst.placements_str() << "\n"
                                << explain(plan) << "oracle: " << err << " library: " << sim.mismatch);
                return;
              }
              CHECK(plan.busiest_bytes >= plan.balanced_bound_bytes);
              // the greedy sender choice against every integral choice
              std::size_t pending = 0;
              for (const auto& m : plan.messages) pending += plan.world_rank_of_src(m.from) != plan.world_rank_of_dst(m.to);
              if (pending <= 10) {
                const auto opt = brute_force_busiest(plan);
                CHECK(plan.busiest_bytes <= opt);  // split messages may beat every whole-piece choice
                ++with_choice;
                balanced += plan.busiest_bytes == opt;
              }
              ++ran;
            }
        }
      }
  INFO("cases " << cases << ", ran " << ran << ", brute-forced senders " << with_choice);
  CHECK(ran >= cases / stride - 1);
  CHECK(with_choice > ran / 2);
}

TEST_CASE("cross-mesh: the chosen intermediates against every pair of intermediates", "[cross_mesh]") {
  // Brute force: every non-Partial layout on A reachable from the source, every non-Partial
  // layout on B from which the target is reachable, each pair planned with fixed intermediates.
  const auto model = CostModel::default_model();
  std::int64_t compared = 0;
  struct Case {
    std::vector<std::int64_t> a, b;
    std::vector<std::int64_t> shape;
    std::vector<std::int64_t> src_ranks, dst_ranks;
  };
  const std::vector<Case> cases{
      {{2}, {4}, {8, 6}, {0, 1}, {0, 1, 2, 3}},
      {{4}, {2}, {5, 3}, {0, 1, 2, 3}, {4, 5}},
      {{2, 2}, {4}, {8, 4}, {0, 1, 2, 3}, {0, 1, 2, 3}},
      {{2}, {2, 2}, {6, 4}, {0, 1}, {2, 3, 4, 5}},
      {{2, 2}, {2, 2}, {4, 4}, {0, 1, 2, 3}, {3, 2, 1, 0}},
  };
  for (const auto& c : cases) {
    const auto la = oracle::layouts(static_cast<int>(c.a.size()), 2, placement_options(2));
    const auto lb = oracle::layouts(static_cast<int>(c.b.size()), 2, placement_options(2));
    auto no_partial = [](const std::vector<oracle::Pl>& l) {
      return std::none_of(l.begin(), l.end(), [](const oracle::Pl& p) { return oracle::is_partial(p); });
    };
    // sample sources and targets: every 7th / 5th (sanitizer builds: fewer), all intermediates;
    // the parts' plans through one cache (the same parts recur across pairs)
    PlanCache cache(1 << 16);
    const auto stride = static_cast<std::size_t>(sample_stride() > 1 ? 3 : 1);
    for (std::size_t i = 0; i < la.size(); i += 7 * stride)
      for (std::size_t j = 0; j < lb.size(); j += 5 * stride) {
        const Layout src = Layout::parse(Mesh(c.a), c.shape, DType::f32, oracle::text(la[i]));
        const Layout dst = Layout::parse(Mesh(c.b), c.shape, DType::f32, oracle::text(lb[j]));
        const auto plan = plan_cross_mesh(src, c.src_ranks, dst, c.dst_ranks, model);
        double best = 1e300;
        std::string best_via;
        for (const auto& x : la) {
          if (!no_partial(x)) continue;
          for (const auto& y : lb) {
            if (!no_partial(y)) continue;
            CrossMeshOptions o;
            o.cache = &cache;
            o.src_via = Layout::parse(Mesh(c.a), c.shape, DType::f32, oracle::text(x)).sharding();
            o.dst_via = Layout::parse(Mesh(c.b), c.shape, DType::f32, oracle::text(y)).sharding();
            try {
              const auto p = plan_cross_mesh(src, c.src_ranks, dst, c.dst_ranks, model, o);
              if (p.total_cost_us < best) {
                best = p.total_cost_us;
                best_via = oracle::text(x) + " / " + oracle::text(y);
              }
            } catch (const Error&) {  // not reachable within the plan options
            }
          }
        }
        INFO(src.str() << " -> " << dst.str() << ": chose " << plan.pre.dst.placements_str() << " / "
                       << plan.post.src.placements_str() << " at " << plan.total_cost_us << ", brute force "
                       << best_via << " at " << best);
        CHECK(plan.total_cost_us <= best * (1 + 1e-9));
        ++compared;
      }
  }
  CHECK(compared > (sample_stride() > 1 ? 3 : 20));
}

TEST_CASE("cross-mesh: a gather inside B sends each element across once", "[cross_mesh]") {
  // dp=4,tp=2 S(0)S(1) on ranks 0-7 to two tp=4 replicas on ranks 8-15: B receives each element
  // once (sharded over its replica dim) and all_gathers inside B.
  const Layout src = Layout::parse(Mesh::parse("dp=4,tp=2"), {4096, 4096}, DType::bf16, "S(0)S(1)");
  const Layout dst = Layout::parse(Mesh::parse("rep=2,tp=4"), {4096, 4096}, DType::bf16, "RS(1)");
  const auto plan = plan_cross_mesh(src, iota(8), dst, iota(8, 8), CostModel::default_model());
  INFO(explain(plan));
  CHECK(plan.transfer_bytes == 4096 * 4096 * 2);  // the lower bound: every element once
  CHECK(plan.busiest_bytes == plan.balanced_bound_bytes);
  REQUIRE(plan.post.steps.size() == 1);
  CHECK(plan.post.steps[0].kind == StepKind::all_gather);
  const auto small = plan_cross_mesh(Layout::parse(src.mesh(), {64, 48}, DType::f32, "S(0)S(1)"), iota(8),
                                     Layout::parse(dst.mesh(), {64, 48}, DType::f32, "RS(1)"), iota(8, 8),
                                     CostModel::default_model());
  CHECK(simulate(small).verified);
}

TEST_CASE("cross-mesh: Partial sources, 2-d meshes, strided shards, every dtype size", "[cross_mesh]") {
  const std::vector<std::tuple<std::string, std::string, std::string, std::string, std::vector<std::int64_t>, std::vector<std::int64_t>>> cases{
      {"2x2", "P(sum)S(0)", "4", "S(1)", {0, 1, 2, 3}, {4, 5, 6, 7}},
      {"2x2", "P(avg)P(sum)", "2x2", "S(1)P(max)", {0, 1, 2, 3}, {1, 2, 3, 0}},
      {"4", "_S(0, 2)", "2x2", "S(0)S(0)", {0, 1, 2, 3}, {2, 3, 4, 5}},
      {"2x2", "S(0)[1]S(0)[0]", "3", "R", {0, 1, 2, 3}, {3, 4, 5}},
      {"2x3", "RS(1)", "2x3", "S(1)R", {0, 1, 2, 3, 4, 5}, {5, 4, 3, 2, 1, 0}},
  };
  for (DType dt : {DType::f32, DType::bf16, DType::i64, DType::f8e4m3}) {
    for (const auto& [ma, pa, mb, pb, ra, rb] : cases) {
      if (!is_floating(dt) && pa.find("avg") != std::string::npos) continue;
      const Layout src = Layout::parse(Mesh::parse(ma), {7, 10}, dt, pa);
      const Layout dst = Layout::parse(Mesh::parse(mb), {7, 10}, dt, pb);
      const auto plan = plan_cross_mesh(src, ra, dst, rb, CostModel::default_model());
      const auto sim = simulate(plan);
      INFO(to_string(dt) << " " << explain(plan) << sim.mismatch);
      CHECK(sim.verified);
    }
  }
}

TEST_CASE("cross-mesh: plans are deterministic and validated", "[cross_mesh]") {
  const Layout src = Layout::parse(Mesh::parse("2x2"), {9, 5}, DType::f32, "S(0)R");
  const Layout dst = Layout::parse(Mesh::parse("3"), {9, 5}, DType::f32, "S(1)");
  const auto p1 = plan_cross_mesh(src, iota(4), dst, std::vector<std::int64_t>{4, 0, 2}, CostModel::default_model());
  const auto p2 = plan_cross_mesh(src, iota(4), dst, std::vector<std::int64_t>{4, 0, 2}, CostModel::default_model());
  CHECK(p1 == p2);
  CHECK(p1.hash() == p2.hash());
  auto bad = p1;
  bad.messages.front().elements += 1;
  CHECK_THROWS_WITH(validate_cross_mesh_plan(bad), Catch::Contains("elements"));
  bad = p1;
  bad.messages.push_back(bad.messages.back());
  CHECK_THROWS_WITH(validate_cross_mesh_plan(bad), Catch::Contains("out of order or repeated"));
  bad = p1;
  bad.messages.pop_back();
  CHECK_THROWS_WITH(validate_cross_mesh_plan(bad), Catch::Contains("receives"));
  bad = p1;
  bad.dst_ranks[1] = 4;
  CHECK_THROWS_WITH(validate_cross_mesh_plan(bad), Catch::Contains("world rank 4 is listed twice"));
  // once per process (what the executor calls): the plan passes, then a changed copy is refused every time
  CHECK_NOTHROW(validate_cross_mesh_plan_once(p1));
  CHECK_NOTHROW(validate_cross_mesh_plan_once(p2));
  bad = p1;
  bad.messages.front().elements += 1;
  for (int k = 0; k < 2; ++k) CHECK_THROWS_WITH(validate_cross_mesh_plan_once(bad), Catch::Contains("elements"));
}

TEST_CASE("cross-mesh: a plan cache for the parts changes no plan", "[cross_mesh]") {
  // The parts' floors (their A* bounds, or a cached part's cost) only prune: with or without a
  // cache, cold or warm, every request gets the same plan.
  PlanCache cache;
  CrossMeshOptions o;
  o.cache = &cache;
  const std::vector<std::tuple<const char*, const char*, const char*, const char*>> cases{
      {"2x2", "S(0)R", "4", "S(1)"}, {"2x2", "P(sum)S(1)", "2x2", "S(0)S(0)"}, {"4", "_S(0, 2)", "2x2", "RS(0)"},
      {"2x4", "S(0)S(1)", "2x4", "RS(1)"}, {"4", "P(max)", "2", "R"}};
  for (int round = 0; round < 2; ++round)  // the second round finds every part cached
    for (const auto& [ma, a, mb, b] : cases) {
      const Layout src = Layout::parse(Mesh::parse(ma), {9, 6}, DType::bf16, a);
      const Layout dst = Layout::parse(Mesh::parse(mb), {9, 6}, DType::bf16, b);
      const auto n = src.mesh().num_ranks();
      std::vector<std::int64_t> rb(static_cast<std::size_t>(dst.mesh().num_ranks()));
      std::iota(rb.begin(), rb.end(), n / 2);  // overlapping
      const auto plain = plan_cross_mesh(src, iota(n), dst, rb, CostModel::default_model());
      const auto cached = plan_cross_mesh(src, iota(n), dst, rb, CostModel::default_model(), o);
      INFO(a << " -> " << b << ", round " << round);
      CHECK(plain == cached);
    }
  CHECK(cache.stats().size > 0);
}

TEST_CASE("cross-mesh: bad input names the value", "[cross_mesh]") {
  const auto m = CostModel::default_model();
  const Layout src = Layout::parse(Mesh::parse("2"), {8}, DType::f32, "S(0)");
  const Layout dst = Layout::parse(Mesh::parse("2"), {8}, DType::f32, "R");
  const std::vector<std::int64_t> two{0, 1};
  CHECK_THROWS_WITH(plan_cross_mesh(src, two, dst, std::vector<std::int64_t>{2, 2}, m), Catch::Contains("world rank 2 is listed twice"));
  CHECK_THROWS_WITH(plan_cross_mesh(src, two, dst, std::vector<std::int64_t>{-1, 2}, m), Catch::Contains("world rank -1 is negative"));
  CrossMeshOptions o;
  o.world_size = 3;
  CHECK_THROWS_WITH(plan_cross_mesh(src, two, dst, std::vector<std::int64_t>{2, 3}, m, o),
                    Catch::Contains("world rank 3 does not exist in a world of 3 ranks"));
  CHECK_THROWS_WITH(plan_cross_mesh(src, two, dst, std::vector<std::int64_t>{2}, m), Catch::Contains("has 1 entries"));
  CHECK_THROWS_WITH(plan_cross_mesh(src, two, Layout::parse(Mesh::parse("2"), {9}, DType::f32, "R"), two, m),
                    Catch::Contains("shape 8 and target shape 9 differ"));
  CHECK_THROWS_WITH(plan_cross_mesh(src, two, Layout::parse(Mesh::parse("2"), {8}, DType::bf16, "R"), two, m),
                    Catch::Contains("dtype f32 and target dtype bf16 differ"));
  o = {};
  o.src_via = Sharding::parse("P(sum)", 1, 1);
  CHECK_THROWS_WITH(plan_cross_mesh(src, two, dst, two, m, o), Catch::Contains("P(sum)"));
}

TEST_CASE("cross-mesh: world rank ids are checked first, and tables follow the ranks used", "[cross_mesh]") {
  const auto m = CostModel::default_model();
  const Layout src = Layout::parse(Mesh::parse("2x2"), {8, 4}, DType::f32, "S(0)S(1)");
  const Layout dst = Layout::parse(Mesh::parse("2"), {8, 4}, DType::f32, "S(1)");
  const auto four = iota(4);
  // ids at or above 2^31 are refused by name before any arithmetic on them (max + 1 overflowed)
  for (const std::int64_t bad : {INT64_MAX, kMaxWorldSize, std::int64_t{1} << 40})
    CHECK_THROWS_WITH(plan_cross_mesh(src, four, dst, std::vector<std::int64_t>{4, bad}, m),
                      Catch::Contains(fmt::format("target world rank {} is not below 2^31", bad)));
  CHECK_THROWS_WITH(plan_cross_mesh(src, std::vector<std::int64_t>{0, 1, INT64_MAX, 3}, dst, std::vector<std::int64_t>{4, 5}, m),
                    Catch::Contains(fmt::format("source world rank {} is not below 2^31", INT64_MAX)));
  CHECK_THROWS_WITH(plan_cross_mesh(src, four, dst, std::vector<std::int64_t>{INT64_MIN, 5}, m), Catch::Contains("is negative"));
  CrossMeshOptions big;
  big.world_size = kMaxWorldSize + 1;
  CHECK_THROWS_WITH(plan_cross_mesh(src, four, dst, std::vector<std::int64_t>{4, 5}, m, big), Catch::Contains("above 2^31"));
  // the largest ids plan, round-trip and simulate; the plan is the one of the same ranks numbered
  // compactly whenever the ids do not change which ranks share a host
  CostModel flat = m;
  flat.devices_per_host = 0;
  for (const auto& far : {std::vector<std::int64_t>{0, kMaxWorldSize - 2}, std::vector<std::int64_t>{kMaxWorldSize - 1, 3}}) {
    const auto plan = plan_cross_mesh(src, four, dst, far, flat);
    CHECK(plan.world_size == std::max(far[0], far[1]) + 1);
    const auto near = plan_cross_mesh(src, four, dst, std::vector<std::int64_t>{far[0] > 3 ? 4 : far[0], far[1] > 3 ? 4 : far[1]}, flat);
    CHECK(plan.messages == near.messages);
    CHECK(plan.total_cost_us == near.total_cost_us);
    const auto back = CrossMeshPlan::from_json(plan.to_json());
    CHECK(back.hash() == plan.hash());
    CHECK(simulation_bytes(back) < (std::int64_t{1} << 30));  // five threads' stacks and the buffers
    const auto res = simulate(back);
    CHECK(res.verified);
  }
  // a world far larger than the ranks used: only the used ranks are simulated
  const auto plan = plan_cross_mesh(src, four, dst, std::vector<std::int64_t>{4, 5}, m);
  std::string json = plan.to_json();
  const auto at = json.find("\"world_size\":6");
  REQUIRE(at != std::string::npos);
  json.replace(at, 14, "\"world_size\":1048576");
  // the figures do not depend on the world size, the hash does
  const auto h = json.find("\"hash\":\"", json.rfind("\"cost_model\""));
  REQUIRE(h != std::string::npos);
  CrossMeshPlan wide = plan;
  wide.world_size = 1048576;
  json.replace(h + 8, 16, fmt::format("{:016x}", wide.hash()));
  const auto read = CrossMeshPlan::from_json(json);
  CHECK(read.world_size == 1048576);
  CHECK(simulate(read).verified);
  json.replace(json.find("\"world_size\":1048576"), 20, "\"world_size\":2147483649");
  CHECK_THAT(error_of([&] { (void)CrossMeshPlan::from_json(json); }), Catch::Contains("world_size"));
}

TEST_CASE("cross-mesh: replicas share a piece by rows to reach the balanced bound", "[cross_mesh]") {
  // Two A ranks hold everything; three B ranks (elsewhere) need a third each: whole pieces leave
  // one sender with two thirds, split pieces give each half, which is the bound.
  const Layout src = Layout::parse(Mesh::parse("2"), {6000, 64}, DType::f32, "R");
  const Layout dst = Layout::parse(Mesh::parse("3"), {6000, 64}, DType::f32, "S(0)");
  const auto plan = plan_cross_mesh(src, std::vector<std::int64_t>{0, 1}, dst, std::vector<std::int64_t>{2, 3, 4},
                                    CostModel::default_model());
  INFO(explain(plan));
  CHECK(plan.busiest_bytes == plan.balanced_bound_bytes);
  CHECK(plan.balanced_bound_bytes == 3000 * 64 * 4);
  CHECK(std::any_of(plan.messages.begin(), plan.messages.end(), [](const auto& m) { return m.row_end >= 0; }));
  REQUIRE_NOTHROW(validate_cross_mesh_plan(plan));
  const auto sim = simulate(plan);
  CHECK(sim.verified);
  // overlapping row ranges from two holders are refused
  auto bad = plan;
  bool edited = false;
  for (std::size_t i = 1; i < bad.messages.size() && !edited; ++i) {
    auto& m = bad.messages[i];
    const auto& q = bad.messages[i - 1];
    if (m.to == q.to && m.row_end >= 0 && q.row_end >= 0) {
      m.row_begin = q.row_begin;
      m.row_end = q.row_end;
      m.elements = q.elements;
      edited = true;
    }
  }
  REQUIRE(edited);
  CHECK_THROWS_WITH(validate_cross_mesh_plan(bad), Catch::Contains("the same elements"));
}

TEST_CASE("cross-mesh: JSON round trip, and hostile JSON refused by name", "[cross_mesh]") {
  const Layout src = Layout::parse(Mesh::parse("2x2"), {600, 16}, DType::bf16, "P(sum)S(1)");
  const Layout dst = Layout::parse(Mesh::parse("rep=2,tp=2"), {600, 16}, DType::bf16, "RS(0)");
  for (const auto& rb : {std::vector<std::int64_t>{4, 5, 6, 7}, std::vector<std::int64_t>{3, 2, 1, 0}}) {
    const auto plan = plan_cross_mesh(src, iota(4), dst, rb, CostModel::default_model());
    const auto back = CrossMeshPlan::from_json(plan.to_json());
    CHECK(back.hash() == plan.hash());
    CHECK(back.messages == plan.messages);
    CHECK(back.pre == plan.pre);
    CHECK(back.post == plan.post);
    CHECK(back.total_cost_us == plan.total_cost_us);
    CHECK(simulate(back).verified);
  }
  const auto plan = plan_cross_mesh(src, iota(4), dst, std::vector<std::int64_t>{4, 5, 6, 7}, CostModel::default_model());
  const std::string good = plan.to_json();
  auto edit = [&](const std::string& from, const std::string& to) {
    const auto at = good.find(from);
    REQUIRE(at != std::string::npos);
    std::string s = good;
    s.replace(at, from.size(), to);
    return error_of([&] { (void)CrossMeshPlan::from_json(s); });
  };
  CHECK_THAT(edit("\"world_size\":8", "\"world_size\":5"), Catch::Contains("'dst_ranks' is 5, outside [0, 4]"));
  CHECK_THAT(edit("\"dst_ranks\":[4,5,6,7]", "\"dst_ranks\":[4,5,6,6]"), Catch::Contains("world rank 6 is listed twice"));
  CHECK_THAT(edit("\"kind\":\"cross_mesh\"", "\"kind\":\"plan\""), Catch::Contains("'kind'"));
  CHECK_THAT(edit("\"messages\":[{\"from\":0", "\"messages\":[{\"from\":9"), Catch::Contains("from"));
  CHECK_THAT(edit("\"version\":1,\"world", "\"version\":1,\"extra\":1,\"world"), Catch::Contains("unknown field \"extra\""));
  CHECK_THAT(edit("\"hash\":\"", "\"hash\":\"0"), Catch::Contains("'hash'"));
  // the edited hash quoted once (not its JSON text quoted again)
  CHECK_THAT(edit("\"hash\":\"", "\"hash\":\"0"), Catch::Contains("'hash' is \"0") && !Catch::Contains("\\\""));
  CHECK_THAT(error_of([&] { (void)CrossMeshPlan::from_json("[1]"); }), Catch::Contains("must be an object"));
  // a message's element count that does not match its boxes
  const auto at = good.find("\"elements\":");
  REQUIRE(at != std::string::npos);
  std::string s = good;
  s.insert(at + 11, "1");
  CHECK_THAT(error_of([&] { (void)CrossMeshPlan::from_json(s); }), Catch::Contains("elements"));
}
