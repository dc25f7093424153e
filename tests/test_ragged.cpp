// RaggedShard: the layout algebra against the oracle (ragged_cases.hpp), text and JSON, bad input.
#include <array>
#include <nlohmann/json.hpp>
#include <catch2/catch.hpp>

#include <cstring>
#include <map>
#include <random>

#include "dtensor/error.hpp"
#include "dtensor/ragged.hpp"
#include "ragged_cases.hpp"
#include "test_util.hpp"

using namespace dtensor;
using ragged_cases::Case;

namespace {

const std::vector<std::vector<std::int64_t>> kMeshes{{2}, {3}, {2, 2}, {2, 3}, {2, 2, 2}};

// Every ragged case of `mesh` for an nd-d tensor: each ragged mesh dim, R or S(d) on each later
// mesh dim, every k, every units vector in {0, 1, 2}^n but the zero one.
template <class F>
void for_each_case(const std::vector<std::int64_t>& mesh, int nd, F&& f) {
  const int md = static_cast<int>(mesh.size());
  for (int r = 0; r < md; ++r) {
    const int free = md - r - 1;
    std::int64_t combos = 1;
    for (int i = 0; i < free; ++i) combos *= nd + 1;
    for (std::int64_t pick = 0; pick < combos; ++pick) {
      Case c;
      c.rdim = r;
      std::int64_t p = pick;
      for (int m = 0; m < md; ++m) {
        if (m <= r) {
          c.base.push_back({'R'});
          continue;
        }
        const int o = static_cast<int>(p % (nd + 1));
        p /= nd + 1;
        c.base.push_back(o == 0 ? oracle::Pl{'R'} : oracle::Pl{'S', o - 1, 1});
      }
      const auto n = mesh[static_cast<std::size_t>(r)];
      std::int64_t unit_combos = 1;
      for (std::int64_t i = 0; i < n; ++i) unit_combos *= 3;
      for (int k = 1; k <= nd; ++k)
        for (std::int64_t u = 1; u < unit_combos; ++u) {
          c.k = k;
          c.units.clear();
          for (std::int64_t i = 0, x = u; i < n; ++i, x /= 3) c.units.push_back(x % 3);
          f(c);
        }
    }
  }
}

std::vector<std::int64_t> expand(const std::vector<Interval>& runs) {
  std::vector<std::int64_t> out;
  for (const auto& r : runs)
    for (auto x = r.start; x < r.stop; ++x) out.push_back(x);
  return out;
}

}  // namespace

TEST_CASE("ragged layouts: pieces, local shapes and owned runs against the oracle", "[ragged]") {
  std::mt19937_64 rng(53);
  std::int64_t checked = 0, refused = 0, cut_units = 0;
  for (const auto& mesh_shape : kMeshes) {
    const Mesh mesh(mesh_shape);
    for (int nd = 1; nd <= 3; ++nd)
      for (int sample = 0; sample < 4; ++sample) {
        std::vector<std::int64_t> shape;
        for (int d = 0; d < nd; ++d) shape.push_back(static_cast<std::int64_t>(rng() % 7));
        for_each_case(mesh_shape, nd, [&](const Case& c) {
          const std::string text = ragged_cases::text(c);
          const bool ok = ragged_cases::valid(mesh_shape, shape, c);
          std::optional<RaggedLayout> l;
          try {
            l = RaggedLayout::parse(mesh, shape, DType::f32, text);
          } catch (const InputError& e) {
            INFO(mesh.str() << " " << shape_str(shape) << " " << text << ": " << e.what());
            CHECK(!ok);
            ++refused;
            return;
          }
          INFO(mesh.str() << " " << shape_str(shape) << " " << text);
          REQUIRE(ok);
          REQUIRE(l->is_ragged());
          cut_units += ragged_cases::unit_cuts_row(mesh_shape, shape, c) ? 1 : 0;
          // the canonical text (shard orders printed as [k] where a dim has two entries) reads back
          CHECK(RaggedLayout::parse(mesh, shape, DType::f32, l->placements_str()) == *l);
          CHECK(l->placements_str().find(l->ragged()->str()) != std::string::npos);
          CHECK(RaggedLayout::parse(l->str()) == *l);
          CHECK(ragged_layout_from_json(to_json(*l)) == *l);
          for (std::int64_t r = 0; r < mesh.num_ranks(); ++r) {
            const auto coord = mesh.coord_of_rank(r);
            const auto want = ragged_cases::piece(mesh_shape, shape, c, coord);
            CHECK(l->local_numel(coord) == static_cast<std::int64_t>(want.size()));
            CHECK(expand(l->owned_runs(coord)) == want);
            // (rows, trailing...) holds the piece, its trailing extents the block's
            const auto ls = l->local_shape(coord);
            const auto block = l->base().local_shape(coord);
            REQUIRE(ls.size() == block.size() - static_cast<std::size_t>(c.k) + 1);
            std::int64_t n = 1;
            for (auto x : ls) n *= x;
            CHECK(n == static_cast<std::int64_t>(want.size()));
            for (std::size_t d = 1; d < ls.size(); ++d) CHECK(ls[d] == block[d - 1 + static_cast<std::size_t>(c.k)]);
          }
          ++checked;
        });
      }
  }
  INFO("checked " << checked << ", refused " << refused << ", units cutting a row " << cut_units);
  CHECK(checked > 1000);
  CHECK(refused > 100);
  CHECK(cut_units > 50);  // layouts whose unit cuts a row but whose pieces do not
}

TEST_CASE("ragged layouts: a single owner, the FSDP-by-memory cut, text forms", "[ragged]") {
  // all units on rank 2: rank 2 holds the whole 6x4 matrix, the others nothing
  const auto owner = RaggedLayout::parse("4 6x4 f32 RaggedShard((0,),(0,0,1,0))");
  CHECK(owner.local_numel(std::vector<std::int64_t>{2}) == 24);
  CHECK(owner.local_shape(std::vector<std::int64_t>{2}) == std::vector<std::int64_t>{6, 4});
  CHECK(owner.local_numel(std::vector<std::int64_t>{0}) == 0);
  // dims (0, 1): cuts may cross rows of dim 1 (whole elements of the 3x4 matrix's flat memory)
  const auto flat = RaggedLayout::parse("2 3x4 bf16 RaggedShard((0,1),(1,2))");
  CHECK(flat.piece(std::vector<std::int64_t>{1}).start == 4);
  CHECK(flat.local_shape(std::vector<std::int64_t>{1}) == std::vector<std::int64_t>{8});
  // veScale's keyword spelling and PyTorch's tuple form read the same
  CHECK(RaggedLayout::parse("2x2 4x4 f32 (RaggedShard(dims=(0,), local_units=(1, 1)), Shard(1))") ==
        RaggedLayout::parse("2x2 4x4 f32 RaggedShard((0,),(1,1))S(1)"));
  // on a 2-d mesh after a Replicate
  const auto second = RaggedLayout::parse("2x3 6x2 f32 RRaggedShard((0),(1,0,2))");
  CHECK(second.ragged()->mesh_dim == 1);
  CHECK(second.placements_str() == "RRaggedShard((0,),(1,0,2))");
  // veScale's rule: units may cut a row so long as every piece holds whole rows
  const auto shared = RaggedLayout::parse("2x2 3x2 f32 RRaggedShard((0,),(2,0))");  // units of 3 elements
  CHECK(shared.local_shape(std::vector<std::int64_t>{0, 0}) == std::vector<std::int64_t>{3, 2});
  CHECK(shared.local_shape(std::vector<std::int64_t>{1, 1}) == std::vector<std::int64_t>{0, 2});
  const auto thirds = RaggedLayout::parse("3 3x6 f32 RaggedShard((0,),(3,3,3))");  // units of 2, rows of 6
  CHECK(thirds.local_shape(std::vector<std::int64_t>{2}) == std::vector<std::int64_t>{1, 6});
  CHECK(thirds.piece(std::vector<std::int64_t>{2}).start == 12);
  const auto two_dims = RaggedLayout::parse("3 4x4x6 f32 RaggedShard((0,1),(3,0,3))");  // units of 16, rows of 6
  CHECK(two_dims.local_shape(std::vector<std::int64_t>{2}) == std::vector<std::int64_t>{8, 6});
  // not ragged: exactly the ordinary layout
  CHECK(RaggedLayout::parse("2 4 f32 S(0)").base() == Layout::parse("2 4 f32 S(0)"));
}

TEST_CASE("ragged layouts: bad input gets one clear error", "[ragged]") {
  const std::vector<std::pair<const char*, const char*>> bad{
      {"4 8 f32 RaggedShard((0,),(1,1,1))", "has 3 entries"},
      {"4 8 f32 RaggedShard((0,),(1,-1,1,1))", "must not be negative"},
      {"4 8 f32 RaggedShard((0,),(0,0,0,0))", "all zero"},
      {"4 9 f32 RaggedShard((0,),(1,1,1,1))", "does not divide"},
      {"2 3x4 f32 RaggedShard((0,),(1,4))", "does not divide"},
      {"2 2x4 f32 RaggedShard((0,),(1,7))", "piece of rank 0 (mesh coordinate (0)), elements [0, 1) of its block"},
      {"3 2x3 f32 RaggedShard((0,),(0,2,1))", "piece of rank 1 (mesh coordinate (1)), elements [0, 4)"},
      {"2x2 7x2 f32 RaggedShard((0,),(1,1))S(0)", "piece of rank 1 (mesh coordinate (0,1))"},
      {"2 4x4 f32 RaggedShard((1,),(1,1))", "leading run"},
      {"2 4x4 f32 RaggedShard((0,0),(1,1))", "repeated"},
      {"2 4x4 f32 RaggedShard((0,5),(1,1))", "out of range"},
      {"2 4x4 f32 RaggedShard((),(1,1))", "must not be empty"},
      {"2x2 4x4 f32 RaggedShard((0,),(1,1))RaggedShard((0,),(1,1))", "two RaggedShard"},
      {"2x2 4x4 f32 S(1)RaggedShard((0,),(1,1))", "before every other non-Replicate"},
      {"2x2 4x4 f32 RaggedShard((0,),(1,1))P", "Partial"},
      {"2 4 f32 RaggedShard((0,),(1,1)", "never closed"},
      {"2 4 f32 RaggedShard((0,),(1,99999999999999999))", "too large"},
      {"2 4 f32 RaggedShard((0,)(1,1))", "expected ','"},
  };
  for (const auto& [text, what] : bad) {
    INFO(text);
    CHECK_THROWS_WITH(RaggedLayout::parse(text), Catch::Contains(what));
  }
  // JSON whose 'ragged' record disagrees with its placements
  auto j = to_json(RaggedLayout::parse("4 8 f32 RaggedShard((0,),(1,1,1,1))"));
  const auto at = j.find("[1,1,1,1]");
  REQUIRE(at != std::string::npos);
  j.replace(at, 9, "[1,1,2,0]");
  CHECK_THROWS_WITH(ragged_layout_from_json(j), Catch::Contains("disagrees"));
  // owned_runs follows the runs it returns: a piece whose trailing dims are whole is one run
  // however many rows it holds, and more runs than a rank's index lists support is an error
  const auto huge = RaggedLayout::parse("2 1024x1024x1024x1024 f32 RaggedShard((0,),(1,1))");
  const std::vector<std::int64_t> c1{1};
  CHECK(huge.owned_runs(c1) == std::vector<Interval>{{std::int64_t{1} << 39, std::int64_t{1} << 40}});
  const auto split = RaggedLayout::parse("2x2 1024x1024x1024x4 f32 RaggedShard((0,),(1,1))S(3)");
  const std::vector<std::int64_t> c01{0, 1};
  CHECK_THROWS_WITH(split.owned_runs(c01), Catch::Contains("separate runs"));
  // the value is bounded, not the digits: leading zeros read as the small number they write
  CHECK(RaggedLayout::parse("2 4 f32 RaggedShard((0,),(00000000000000001,1))") ==
        RaggedLayout::parse("2 4 f32 RaggedShard((0,),(1,1))"));
  CHECK_THROWS_WITH(RaggedLayout::parse("2 4 f32 RaggedShard((0,),(00000000000000000099999999999999999,1))"),
                    Catch::Contains("too large"));
}

// ---- planning and execution ----------------------------------------------------------------

#include "dtensor/ragged_executor.hpp"
#include "dtensor/ragged_plan.hpp"
#include "dtensor/scalar.hpp"
#include "dtensor/simulated.hpp"
#include "dtensor/verify.hpp"
#include "exec_check.hpp"

namespace {

// Runs `plan` on a threads world, one thread per rank; inputs from the oracle's ids (a ragged or
// plain source) or seeded_input (a Partial source). Returns every rank's output.
exec_check::Run run_ragged(const RaggedPlan& plan, const Case& src_case, SimulatedWorld& world) {
  const Mesh& mesh = plan.src.mesh();
  const auto R = static_cast<std::size_t>(mesh.num_ranks());
  const DType dt = plan.src.dtype();
  const auto s = itemsize(dt);
  exec_check::Run run;
  run.outputs.resize(R);
  run_rank_threads(world, [&](std::int64_t r, Communicator& comm) {
    RaggedExecutor ex(plan, comm);
    const auto coord = mesh.coord_of_rank(r);
    std::vector<std::byte> in;
    bool partial = false;
    for (const auto& p : src_case.base) partial = partial || oracle::is_partial(p);
    if (partial) {
      in = seeded_input(plan.src.base(), r);
    } else {
      const auto ids = ragged_cases::piece(mesh.shape(), plan.src.shape(), src_case, coord);
      in.resize(ids.size() * s);
      for (std::size_t e = 0; e < ids.size(); ++e)
        store_element(dt, in.data(), static_cast<std::int64_t>(e), exec_check::global_value(dt, ids[e], mesh.num_ranks()));
    }
    std::vector<std::byte> out(static_cast<std::size_t>(ex.output_bytes()));
    std::vector<std::byte> ws(static_cast<std::size_t>(ex.workspace_bytes()));
    ex.execute({in, out, ws});
    run.outputs[static_cast<std::size_t>(r)] = std::move(out);
  });
  return run;
}

// "" when every rank's output is the target's piece of the global values.
std::string check_ragged(const Mesh& mesh, const std::vector<std::int64_t>& shape, DType dt, const Case& dst,
                         const exec_check::Run& run) {
  if (dst.rdim < 0) return exec_check::check(mesh.shape(), shape, dt, dst.base, run);
  for (std::int64_t r = 0; r < mesh.num_ranks(); ++r) {
    const auto ids = ragged_cases::piece(mesh.shape(), shape, dst, mesh.coord_of_rank(r));
    const auto& out = run.outputs[static_cast<std::size_t>(r)];
    if (out.size() != ids.size() * itemsize(dt)) return fmt::format("rank {}: {} bytes for {} elements", r, out.size(), ids.size());
    for (std::size_t e = 0; e < ids.size(); ++e) {
      const double got = load_element(dt, out.data(), static_cast<std::int64_t>(e));
      const double want = exec_check::global_value(dt, ids[e], mesh.num_ranks());
      if (got != want) return fmt::format("rank {} element {} (global {}): {} != {}", r, e, ids[e], got, want);
    }
  }
  return "";
}

}  // namespace

TEST_CASE("ragged plans: every pair mixing ragged and plain layouts runs exactly on threads", "[ragged_exec]") {
  std::mt19937_64 rng(530);
  std::int64_t pairs = 0, exchanges = 0, local_cuts = 0, seen = 0, cut_units = 0;
  const std::int64_t stride = sample_stride();  // sanitizer builds: every stride-th pair
  for (const auto& mesh_shape : kMeshes) {
    const Mesh mesh(mesh_shape);
    SimulatedWorld world(mesh, WorldOptions{std::chrono::milliseconds(30000), nullptr});
    for (int sample = 0; sample < 6; ++sample) {
      const int nd = 1 + static_cast<int>(rng() % 3);
      std::vector<std::int64_t> shape;
      for (int d = 0; d < nd; ++d) shape.push_back(1 + static_cast<std::int64_t>(rng() % 6));
      const DType dt = std::array{DType::f32, DType::bf16, DType::i32}[static_cast<std::size_t>(sample % 3)];
      // a pool of valid ragged layouts and of plain ones (Partial among the plain sources)
      std::vector<Case> ragged, plain;
      for (int tries = 0; tries < 400 && ragged.size() < 5; ++tries) {
        auto c = ragged_cases::random_ragged(mesh_shape, nd, rng);
        if (ragged_cases::valid(mesh_shape, shape, c)) ragged.push_back(std::move(c));
      }
      for (int i = 0; i < 4; ++i) {
        auto c = ragged_cases::random_plain(mesh_shape, nd, rng, i % 2 == 0);
        plain.push_back(std::move(c));
      }
      auto layout = [&](const Case& c) {
        return RaggedLayout::parse(mesh, shape, dt, ragged_cases::text(c));
      };
      auto run_pair = [&](const Case& a, const Case& b) {
        if (seen++ % stride != 0) return;
        const auto src = layout(a), dst = layout(b);
        const RaggedPlan plan = plan_ragged(src, dst, CostModel::default_model());
        INFO(mesh.str() << " " << shape_str(shape) << " " << to_string(dt) << " " << src.placements_str() << " -> "
                        << dst.placements_str() << ": " << plan.trace());
        CHECK(plan_ragged(src, dst, CostModel::default_model()) == plan);  // deterministic
        for (const auto& st : plan.stages)
          if (st.exchange) {
            ++exchanges;
            local_cuts += st.exchange->peers == 0 ? 1 : 0;
          }
        const auto run = run_ragged(plan, a, world);
        CHECK(check_ragged(mesh, shape, dt, b, run) == "");
        ++pairs;
        cut_units += ragged_cases::unit_cuts_row(mesh_shape, shape, a) || ragged_cases::unit_cuts_row(mesh_shape, shape, b);
      };
      for (const auto& a : ragged) {
        for (const auto& b : ragged) run_pair(a, b);
        for (const auto& b : plain) run_pair(a, b);
      }
      for (const auto& a : plain)
        for (const auto& b : ragged) run_pair(a, b);
    }
  }
  INFO(pairs << " pairs, " << exchanges << " exchanges, " << local_cuts << " local cuts, " << cut_units
              << " with a unit cutting a row");
  CHECK(pairs * stride > 300);
  CHECK(local_cuts > 0);
  CHECK(cut_units * stride > 10);
}

// ---- optimality --------------------------------------------------------------------------

#include "graph_oracle.hpp"

TEST_CASE("ragged plans: as cheap as the whole graph with ragged ends", "[ragged_exec]") {
  // The graph: every plain layout of {R, P(sum), P(max), S(d)} (every shard order), the two ends;
  // plain layouts joined by their optimal plans (test_optimality checks those against the whole
  // single-step graph), a ragged end joined to every plain non-Partial layout and to the other end
  // by an exchange. The shortest path is the best exchange, plan, exchange chain.
  std::mt19937_64 rng(5353);
  const CostModel cost = CostModel::default_model();
  std::int64_t cases = 0, worse = 0, seen = 0;
  const std::int64_t stride = sample_stride();  // sanitizer builds: every stride-th pair
  double worst = 0;
  for (const auto& mesh_shape : std::vector<std::vector<std::int64_t>>{{2}, {3}, {2, 2}, {2, 3}}) {
    const Mesh mesh(mesh_shape);
    for (int sample = 0; sample < 3; ++sample) {
      const int nd = 1 + static_cast<int>(rng() % 2);
      std::vector<std::int64_t> shape;
      for (int d = 0; d < nd; ++d) shape.push_back(2 + static_cast<std::int64_t>(rng() % 5) * 2);
      std::vector<Layout> plain;
      for (const auto& s : graph_oracle::all_layouts(mesh, nd)) plain.emplace_back(mesh, shape, DType::f32, s);
      std::vector<RaggedLayout> ragged;
      for (int tries = 0; tries < 300 && ragged.size() < 3; ++tries) {
        const auto c = ragged_cases::random_ragged(mesh_shape, nd, rng);
        if (ragged_cases::valid(mesh_shape, shape, c)) ragged.push_back(RaggedLayout::parse(mesh, shape, DType::f32, ragged_cases::text(c)));
      }
      // distances between plain layouts
      const std::size_t n = plain.size();
      std::vector<double> d(n * n, 0);
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < n; ++j)
          if (i != j) d[i * n + j] = plan_redistribution(plain[i], plain[j], cost, PlanOptions{.runner_up = false}).total_cost_us;
      auto is_plain_np = [&](std::size_t i) { return !plain[i].sharding().has_partial(); };
      auto oracle_cost = [&](const RaggedLayout& src, const RaggedLayout& dst) {
        if (src == dst) return 0.0;
        double best = src.is_ragged() && dst.is_ragged() ? ragged_exchange(src, dst, cost).cost_us : INFINITY;
        std::vector<double> into(n, INFINITY), out_of(n, INFINITY);  // src -> M1, M2 -> dst
        for (std::size_t i = 0; i < n; ++i) {
          if (src.is_ragged()) into[i] = is_plain_np(i) ? ragged_exchange(src, RaggedLayout(plain[i]), cost).cost_us : INFINITY;
          else into[i] = plain[i] == src.base() ? 0 : INFINITY;
          if (dst.is_ragged()) out_of[i] = is_plain_np(i) ? ragged_exchange(RaggedLayout(plain[i]), dst, cost).cost_us : INFINITY;
          else out_of[i] = plain[i] == dst.base() ? 0 : INFINITY;
        }
        for (std::size_t i = 0; i < n; ++i)
          for (std::size_t j = 0; j < n; ++j) best = std::min(best, into[i] + d[i * n + j] + out_of[j]);
        return best;
      };
      auto check = [&](const RaggedLayout& a, const RaggedLayout& b) {
        if (seen++ % stride != 0) return;
        const double got = plan_ragged(a, b, cost).total_cost_us, want = oracle_cost(a, b);
        INFO(mesh.str() << " " << shape_str(shape) << " " << a.placements_str() << " -> " << b.placements_str());
        CHECK(got >= want - 1e-9);  // never cheaper than the graph allows
        if (got > want + 1e-6) {
          ++worse;
          if (std::getenv("DTENSOR_RAGGED_GAPS")) fmt::print("{} {} {} -> {}: {} vs {}\n", mesh.str(), shape_str(shape), a.placements_str(), b.placements_str(), got, want);
          worst = std::max(worst, got / want);
        }
        ++cases;
      };
      for (const auto& a : ragged) {
        for (const auto& b : ragged) check(a, b);
        for (std::size_t i = 0; i < n; i += 3) {
          check(a, RaggedLayout(plain[i]));
          check(RaggedLayout(plain[i]), a);
        }
      }
    }
  }
  WARN(cases << " pairs; the planner's chain costs more than the graph's best on " << worse << " (worst ratio " << worst << ")");
  CHECK(cases * stride > 100);
}

// ---- owners ------------------------------------------------------------------------------

#include "dtensor/owners.hpp"

TEST_CASE("owners: the closed-form receive times equal the exchange walk's, bit for bit", "[ragged]") {
  // random plain layouts (S, _S(d, 2), R; uneven and empty shards; explicit orders) on meshes up to
  // 2x2x2 and 4x2, every mesh dim, under the default model and one with 2 devices per host (the
  // inter-host link): every owner's time is the same double either way
  std::mt19937_64 rng(6600);
  const CostModel plain = CostModel::default_model();
  CostModel two_per_host = CostModel::default_model();
  two_per_host.devices_per_host = 2;
  std::int64_t closed_rows = 0, walked_rows = 0, refused = 0;
  const std::vector<std::vector<std::int64_t>> meshes{{2}, {3}, {5}, {2, 2}, {2, 3}, {3, 2}, {2, 2, 2}, {4, 2}};
  for (const auto& mesh_shape : meshes) {
    const Mesh mesh(mesh_shape);
    for (int sample = 0; sample < 40; ++sample) {
      const int nd = 1 + static_cast<int>(rng() % 3);
      std::vector<std::int64_t> shape;
      for (int d = 0; d < nd; ++d) shape.push_back(static_cast<std::int64_t>(rng() % 9));
      std::string text = ragged_cases::text(ragged_cases::random_plain(mesh_shape, nd, rng, false));
      if (mesh_shape.size() >= 2 && sample % 5 == 0) text = "S(0)[1]S(0)[0]" + std::string(mesh_shape.size() - 2, 'R');
      std::optional<Layout> l;
      try {
        l = Layout::parse(mesh, shape, DType::bf16, text);
      } catch (const InputError&) {
        continue;
      }
      for (int md = 0; md < mesh.ndim(); ++md)
        for (const CostModel* cost : std::array<const CostModel*, 2>{&plain, &two_per_host}) {
          bool closed = false;
          std::vector<double> row;
          try {
            row = owner_receive_times(*l, md, *cost, &closed);
          } catch (const InputError& e) {  // refused as the walk refuses it (a sharded mesh dim before md)
            CHECK_THROWS_WITH(owner_receive_us(*l, md, 0, *cost), e.what());
            ++refused;
            continue;
          }
          INFO(l->str() << " owners along mesh dim " << md << (closed ? " (closed form)" : " (walk)"));
          REQUIRE(row.size() == static_cast<std::size_t>(mesh.size(md)));
          for (std::int64_t o = 0; o < mesh.size(md); ++o) CHECK(row[static_cast<std::size_t>(o)] == owner_receive_us(*l, md, o, *cost));
          (closed ? closed_rows : walked_rows) += 1;
        }
    }
  }
  INFO(closed_rows << " rows in closed form, " << walked_rows << " walked, " << refused << " refused");
  CHECK(closed_rows > 500);
  CHECK(walked_rows > 5);
}

TEST_CASE("owners: the exact solver against brute force, the heuristic and round-robin beside it", "[ragged]") {
  std::mt19937_64 rng(5300);
  const CostModel cost = CostModel::default_model();
  struct Row {
    int cases = 0;
    double heur_sum = 0, heur_max = 0, rr_sum = 0, rr_max = 0;
    int heur_optimal = 0;
  };
  std::map<std::string, Row> table;
  for (const auto& mesh_shape : std::vector<std::vector<std::int64_t>>{{2}, {3}, {4}, {2, 2}}) {
    const Mesh mesh(mesh_shape);
    const int mesh_dim = static_cast<int>(mesh_shape.size()) - 1;
    const auto m = mesh_shape.back();
    for (int sample = 0; sample < 12; ++sample) {
      const std::size_t N = 2 + rng() % 5;
      std::vector<Layout> ls;
      std::vector<double> compute;
      for (std::size_t i = 0; i < N; ++i) {
        const std::vector<std::int64_t> shape{1 + static_cast<std::int64_t>(rng() % 64) * 16, 8 + static_cast<std::int64_t>(rng() % 8) * 64};
        ls.push_back(Layout::parse(mesh, shape, DType::f32, std::string(static_cast<std::size_t>(mesh.ndim() - 1), 'R') + "S(0)"));
        compute.push_back(sample % 2 ? static_cast<double>(shape[0] * shape[1]) * 1e-4 : 0.0);
      }
      const auto got = plan_owners(ls, mesh_dim, cost, compute);
      REQUIRE(got.exact);
      // brute force over every assignment, from each tensor's time on each owner alone
      std::vector<double> t(N * static_cast<std::size_t>(m));
      for (std::size_t i = 0; i < N; ++i)
        for (std::int64_t o = 0; o < m; ++o) {
          const std::vector<std::int64_t> one{o};
          t[i * static_cast<std::size_t>(m) + static_cast<std::size_t>(o)] =
              evaluate_owners(std::span<const Layout>(&ls[i], 1), mesh_dim, cost, one, std::span<const double>(&compute[i], 1)).makespan_us;
        }
      double brute = INFINITY;
      std::vector<std::int64_t> a(N, 0);
      while (true) {
        std::vector<double> load(static_cast<std::size_t>(m), 0.0);
        for (std::size_t i = 0; i < N; ++i) load[static_cast<std::size_t>(a[i])] += t[i * static_cast<std::size_t>(m) + static_cast<std::size_t>(a[i])];
        brute = std::min(brute, *std::max_element(load.begin(), load.end()));
        std::size_t k = 0;
        for (; k < N; ++k) {
          if (++a[k] < m) break;
          a[k] = 0;
        }
        if (k == N) break;
      }
      CHECK(got.makespan_us == Approx(brute).epsilon(1e-12));
      CHECK(evaluate_owners(ls, mesh_dim, cost, got.owners, compute).makespan_us == Approx(got.makespan_us));
      CHECK(plan_owners(ls, mesh_dim, cost, compute).owners == got.owners);  // deterministic
      // the heuristic alone: 13 tensors or more skip the exact search; run it on a copy padded past 12
      std::vector<Layout> padded = ls;
      std::vector<double> padded_compute = compute;
      while (padded.size() <= 12) {
        padded.push_back(Layout::parse(mesh, {1}, DType::f32, std::string(static_cast<std::size_t>(mesh.ndim()), 'R')));
        padded_compute.push_back(0);
      }
      const auto heur = plan_owners(padded, mesh_dim, cost, padded_compute);
      CHECK(!heur.exact);
      std::vector<std::int64_t> heur_owners(heur.owners.begin(), heur.owners.begin() + static_cast<std::ptrdiff_t>(N));
      const double h = evaluate_owners(ls, mesh_dim, cost, heur_owners, compute).makespan_us;
      std::vector<std::int64_t> rr(N);
      for (std::size_t i = 0; i < N; ++i) rr[i] = static_cast<std::int64_t>(i) % m;
      const double r = evaluate_owners(ls, mesh_dim, cost, rr, compute).makespan_us;
      CHECK(h >= brute * (1 - 1e-12));
      CHECK(r >= brute * (1 - 1e-12));
      Row& row = table[fmt::format("{}{}", mesh.str(), sample % 2 ? " +compute" : "")];
      ++row.cases;
      row.heur_sum += h / brute;
      row.heur_max = std::max(row.heur_max, h / brute);
      row.rr_sum += r / brute;
      row.rr_max = std::max(row.rr_max, r / brute);
      row.heur_optimal += h <= brute * (1 + 1e-12) ? 1 : 0;
    }
  }
  std::string out = "| mesh | cases | LPT optimal | LPT / exact mean, max | round-robin / exact mean, max |\n|---|---|---|---|---|\n";
  for (const auto& [k, row] : table)
    out += fmt::format("| {} | {} | {} | {:.3f}, {:.3f} | {:.3f}, {:.3f} |\n", k, row.cases, row.heur_optimal,
                       row.heur_sum / row.cases, row.heur_max, row.rr_sum / row.cases, row.rr_max);
  if (std::getenv("DTENSOR_OWNER_TABLE")) fmt::print("{}", out);
  for (const auto& [k, row] : table) CHECK(row.heur_max <= 4.0 / 3.0 + 1e-9);
}

TEST_CASE("owners: gather to owners and scatter back run exactly; bad input", "[ragged]") {
  const Mesh mesh(std::vector<std::int64_t>{2, 3});
  const CostModel cost = CostModel::default_model();
  // owners along mesh dim 0; mesh dim 1's placement stays
  std::vector<Layout> ls{Layout::parse(mesh, {7, 4}, DType::f32, "S(0)R"), Layout::parse(mesh, {5, 6}, DType::f32, "S(0)S(1)"),
                         Layout::parse(mesh, {9, 2}, DType::f32, "S(1)S(0)"), Layout::parse(mesh, {3, 3}, DType::f32, "RS(0)")};
  const auto p = plan_owners(ls, 0, cost);
  REQUIRE(p.owners.size() == 4);
  SimulatedWorld world(mesh, WorldOptions{std::chrono::milliseconds(30000), nullptr});
  for (std::size_t i = 0; i < ls.size(); ++i) {
    const auto owner = owner_layout(ls[i], 0, p.owners[i]);
    // the owner of each group along mesh dim 0 holds that group's whole block
    for (std::int64_t r = 0; r < mesh.num_ranks(); ++r) {
      const auto c = mesh.coord_of_rank(r);
      CHECK(owner.local_numel(c) == (c[0] == p.owners[i] ? owner.base().local_numel(c) : 0));
    }
    Case src_case;
    for (const auto& pl : ls[i].placements()) src_case.base.push_back(pl.is_shard() ? oracle::Pl{'S', static_cast<int>(pl.dim()), 1} : oracle::Pl{'R'});
    Case owner_case = src_case;
    owner_case.base[0] = {'R'};
    owner_case.rdim = 0;
    owner_case.units = owner.ragged()->units;
    const auto gather = plan_ragged(RaggedLayout(ls[i]), owner, cost);
    CHECK(check_ragged(mesh, ls[i].shape(), DType::f32, owner_case, run_ragged(gather, src_case, world)) == "");
    const auto scatter = plan_ragged(owner, RaggedLayout(ls[i]), cost);
    CHECK(check_ragged(mesh, ls[i].shape(), DType::f32, src_case, run_ragged(scatter, owner_case, world)) == "");
  }
  CHECK_THROWS_WITH(plan_owners(ls, 2, cost), Catch::Contains("mesh dim 2"));
  const std::vector<double> bad_count{1.0};
  CHECK_THROWS_WITH(plan_owners(ls, 1, cost, bad_count), Catch::Contains("1 compute times for 4 tensors"));
  const std::vector<double> negative{1.0, -2.0, 0.0, 0.0};
  CHECK_THROWS_WITH(plan_owners(ls, 1, cost, negative), Catch::Contains("-2"));
  const std::vector<double> nan{1.0, std::nan(""), 0.0, 0.0};
  CHECK_THROWS_WITH(plan_owners(ls, 1, cost, nan), Catch::Contains("not a time"));
  const std::vector<Layout> partial{Layout::parse(mesh, {4}, DType::f32, "P(sum)R")};
  CHECK_THROWS_WITH(plan_owners(partial, 1, cost), Catch::Contains("Partial"));
  CHECK_THROWS_WITH(owner_layout(ls[0], 0, 2), Catch::Contains("owner 2"));
}

// ---- FSDP buckets ------------------------------------------------------------------------

#include <atomic>

#include "dtensor/ragged_bucket.hpp"

namespace {

// Host memory that counts the bytes of local copies (the collectives' own moves included).
struct CountingMemory : Memory {
  std::atomic<std::int64_t> copied{0};
  void copy(void* dst, const void* src, std::int64_t bytes) override {
    copied += bytes;
    Memory::copy(dst, src, bytes);
  }
  void copy_strided(void* dst, const void* src, std::int64_t run_bytes, std::span<const std::int64_t> count,
                    std::span<const std::int64_t> dst_stride, std::span<const std::int64_t> src_stride) override {
    std::int64_t n = run_bytes;
    for (auto c : count) n *= c;
    copied += n;
    Memory::copy_strided(dst, src, run_bytes, count, dst_stride, src_stride);
  }
};

}  // namespace

TEST_CASE("buckets: FSDP's flat parameter as ragged members, recognised, gathered as one exchange", "[ragged]") {
  const std::vector<std::vector<std::int64_t>> shapes{{6, 4}, {10}, {3, 3, 2}, {7}};
  for (const auto& [mesh_text, mesh_dim] : std::vector<std::pair<const char*, int>>{{"4", 0}, {"2x3", 1}, {"3", 0}}) {
    const Mesh mesh = Mesh::parse(mesh_text);
    INFO(mesh.str());
    const auto members = flat_bucket_layouts(mesh, mesh_dim, shapes, DType::f32);
    const auto bucket = bucket_of(members);
    REQUIRE(bucket);
    CHECK(bucket->offsets == std::vector<std::int64_t>{0, 24, 34, 52});
    // torch.chunk of 59 elements over the mesh dim
    const auto n = mesh.size(mesh_dim);
    const std::int64_t chunk = (59 + n - 1) / n;
    for (std::int64_t c = 0; c < n; ++c)
      CHECK(bucket->flat.ragged()->units[static_cast<std::size_t>(c)] == std::max<std::int64_t>(0, std::min<std::int64_t>(59, (c + 1) * chunk) - c * chunk));
    // each rank's members' pieces are its slice of the concatenation (the oracle: the flat ids)
    for (std::int64_t r = 0; r < mesh.num_ranks(); ++r) {
      const auto coord = mesh.coord_of_rank(r);
      std::vector<std::int64_t> ids;
      for (std::size_t i = 0; i < members.size(); ++i)
        for (const auto& run : members[i].owned_runs(coord))
          for (auto x = run.start; x < run.stop; ++x) ids.push_back(bucket->offsets[i] + x);
      CHECK(expand(bucket->flat.owned_runs(coord)) == ids);
    }
    // the gather: one exchange of the flat buffer, no packing; with the local buffer a view of
    // the output at the rank's offset, no copy at all
    const RaggedLayout full(Layout(mesh, {59}, DType::f32, Sharding::replicated(mesh.ndim(), 1)));
    const RaggedPlan plan = plan_ragged(bucket->flat, full, CostModel::default_model());
    REQUIRE(plan.stages.size() == 1);
    REQUIRE(plan.stages[0].exchange);
    CHECK(plan.stages[0].exchange->copy_bytes == plan.stages[0].exchange->own_bytes);  // no packing
    // the threads world moves a transfer's bytes with memory.copy too: those are the received bytes
    std::int64_t wire = 0, own = 0;
    for (auto x : exchange_received(bucket->flat, full)) wire += x * 4;
    for (std::int64_t r = 0; r < mesh.num_ranks(); ++r) own += bucket->flat.local_numel(mesh.coord_of_rank(r)) * 4;
    for (const bool aliased : {true, false}) {
      auto mem = std::make_shared<CountingMemory>();
      SimulatedWorld world(mesh, WorldOptions{std::chrono::milliseconds(30000), mem});
      std::vector<std::optional<RaggedExecutor>> execs(static_cast<std::size_t>(mesh.num_ranks()));
      run_rank_threads(world, [&](std::int64_t r, Communicator& comm) { execs[static_cast<std::size_t>(r)].emplace(plan, comm); });
      mem->copied = 0;  // (the plan-hash exchange is behind us)
      std::vector<std::string> errors(static_cast<std::size_t>(mesh.num_ranks()));
      run_rank_threads(world, [&](std::int64_t r, Communicator&) {
        const auto& ex = *execs[static_cast<std::size_t>(r)];
        const auto coord = mesh.coord_of_rank(r);
        const auto in = seeded_input(bucket->flat, r);
        std::vector<std::byte> out(static_cast<std::size_t>(ex.output_bytes())), ws(static_cast<std::size_t>(ex.workspace_bytes()));
        const auto at = static_cast<std::size_t>(bucket->flat.piece(coord).start * 4);
        std::memcpy(out.data() + at, in.data(), in.size());  // the local bucket, inside the output (FSDP's layout)
        ex.execute({aliased ? std::span<const std::byte>(out.data() + at, in.size()) : std::span<const std::byte>(in), out, ws});
        errors[static_cast<std::size_t>(r)] = verify_rank_output(full, r, out);
      });
      for (const auto& e : errors) CHECK(e == "");
      // sends and receives in place; the own part copied only when the buffers do not alias
      CHECK(mem->copied.load() == wire + (aliased ? 0 : own));
    }
  }
  // not a bucket: the pieces of member 1 out of order
  const Mesh mesh = Mesh::parse("4");
  auto members = flat_bucket_layouts(mesh, 0, shapes, DType::f32);
  members[1] = RaggedLayout::parse(mesh, {10}, DType::f32, "RaggedShard((0,),(0,0,8,2))");
  CHECK_FALSE(bucket_of(members));
  CHECK_FALSE(bucket_of(std::vector<RaggedLayout>{RaggedLayout::parse("4 8 f32 S(0)")}));
  CHECK_THROWS_WITH(flat_bucket_layouts(mesh, 0, std::vector<std::vector<std::int64_t>>{{4, 0}}, DType::f32), Catch::Contains("empty"));
  CHECK_THROWS_WITH(flat_bucket_layouts(mesh, 1, shapes, DType::f32), Catch::Contains("mesh dim 1"));
}

TEST_CASE("ragged plans: JSON read back as untrusted input", "[ragged]") {
  std::mt19937_64 rng(5399);
  const CostModel cost = CostModel::default_model();
  int round_trips = 0;
  for (const auto& mesh_shape : kMeshes) {
    const Mesh mesh(mesh_shape);
    for (int tries = 0; tries < 200 && round_trips < 12 * static_cast<int>(mesh_shape.size()); ++tries) {
      const int nd = 1 + static_cast<int>(rng() % 2);
      std::vector<std::int64_t> shape;
      for (int d = 0; d < nd; ++d) shape.push_back(2 + static_cast<std::int64_t>(rng() % 3) * 2);
      const auto r = ragged_cases::random_ragged(mesh_shape, nd, rng);
      if (!ragged_cases::valid(mesh_shape, shape, r)) continue;
      const auto p = ragged_cases::random_plain(mesh_shape, nd, rng, true);
      const auto a = RaggedLayout::parse(mesh, shape, DType::f32, ragged_cases::text(p));
      const auto b = RaggedLayout::parse(mesh, shape, DType::f32, ragged_cases::text(r));
      const RaggedPlan plan = plan_ragged(a, b, cost);
      INFO(plan.trace());
      CHECK(RaggedPlan::from_json(plan.to_json()) == plan);
      ++round_trips;
    }
  }
  CHECK(round_trips > 30);
  // a record that disagrees with its layouts, a broken chain, unknown fields: one error each
  const Mesh mesh = Mesh::parse("4");
  const RaggedPlan plan = plan_ragged(RaggedLayout::parse("4 8x6 f32 S(0)"), RaggedLayout::parse("4 8x6 f32 RaggedShard((0,),(0,0,1,0))"), cost);
  REQUIRE(plan.stages.size() == 1);
  const std::string good = plan.to_json();
  auto edit = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const auto at = s.find(from);
    REQUIRE(at != std::string::npos);
    s.replace(at, from.size(), to);
    return s;
  };
  const auto sent = fmt::format("\"bytes_sent\":{}", plan.stages[0].exchange->bytes_sent);
  CHECK_THROWS_WITH(RaggedPlan::from_json(edit(sent, "\"bytes_sent\":1")), Catch::Contains("bytes_sent is 1; the layouts give"));
  CHECK_THROWS_WITH(RaggedPlan::from_json(edit("\"peers\":", "\"peerz\":")), Catch::Contains("unknown field"));
  CHECK_THROWS_WITH(RaggedPlan::from_json(edit("\"to\":\"RaggedShard((0,),(0,0,1,0))\"", "\"to\":\"RaggedShard((0,),(0,1,0,0))\"")),
                    Catch::Contains("the stages end at RaggedShard((0,),(0,1,0,0)), not at its target"));
  CHECK_THROWS_WITH(RaggedPlan::from_json(edit("\"from\":\"S(0)\"", "\"from\":\"R\"")), Catch::Contains("starts at R, not at S(0)"));
  CHECK_THROWS_WITH(RaggedPlan::from_json(edit("\"kind\":\"exchange\"", "\"kind\":\"teleport\"")), Catch::Contains("kind must be"));
  CHECK_THROWS_WITH(RaggedPlan::from_json(edit("\"mesh_dims\":[0]", "\"mesh_dims\":[7]")), Catch::Contains("mesh_dims (7) are not the ones its transfers cross (0)"));
  CHECK_THROWS_WITH(RaggedPlan::from_json("[1]"), Catch::Contains("must be an object"));
  // derived figures recomputed on read: an edited total, trace or hash is refused
  CHECK_THROWS_WITH(RaggedPlan::from_json(edit("\"trace\":\"", "\"trace\":\"R=>")), Catch::Contains("'trace'"));
  CHECK_THROWS_WITH(RaggedPlan::from_json(edit("\"plan_hash\":\"", "\"plan_hash\":\"f")), Catch::Contains("'plan_hash'"));
  {
    auto j = nlohmann::json::parse(good);
    j["total_cost_us"] = j["total_cost_us"].get<double>() + 1;
    CHECK_THROWS_WITH(RaggedPlan::from_json(j.dump()), Catch::Contains("'total_cost_us'"));
  }
}

#include "placement/ragged_exchange.hpp"

TEST_CASE("ragged exchanges: the planner's record is what the executor's transfer lists give, rank by rank", "[ragged]") {
  // the record (one pass over sender/receiver pairs) against each rank's own send and receive
  // lists (what RaggedExecutor prepares), maxima over ranks
  std::mt19937_64 rng(5355);
  int compared = 0;
  for (const auto& mesh_shape : kMeshes) {
    const Mesh mesh(mesh_shape);
    for (int tries = 0; tries < 300 && compared < 40 * static_cast<int>(mesh_shape.size()); ++tries) {
      const int nd = 1 + static_cast<int>(rng() % 3);
      std::vector<std::int64_t> shape;
      for (int d = 0; d < nd; ++d) shape.push_back(1 + static_cast<std::int64_t>(rng() % 6));
      const auto r = ragged_cases::random_ragged(mesh_shape, nd, rng);
      if (!ragged_cases::valid(mesh_shape, shape, r)) continue;
      auto p = ragged_cases::random_plain(mesh_shape, nd, rng, false);
      const auto a = RaggedLayout::parse(mesh, shape, DType::bf16, ragged_cases::text(r));
      const auto b = RaggedLayout::parse(mesh, shape, DType::bf16, ragged_cases::text(p));
      for (const auto& [from, to] : {std::pair{a, b}, std::pair{b, a}}) {
        const auto ex = ragged_exchange(from, to, CostModel::default_model());
        // the sweep's candidate pairs hold every pair with elements to move
        const auto candidates = detail::exchange_candidates(from, to);
        REQUIRE(candidates.has_value());
        std::int64_t sent = 0, received = 0, copies = 0, own = 0, peers = 0;
        for (std::int64_t k = 0; k < mesh.num_ranks(); ++k) {
          const auto c = mesh.coord_of_rank(k);
          std::int64_t s = 0, rc = 0, cp = 0, ow = 0, sp = 0, rp = 0;
          for (const auto& t : detail::exchange_sends(from, to, c)) {
            const auto& mine = (*candidates)[static_cast<std::size_t>(k)];
            CHECK(std::binary_search(mine.begin(), mine.end(), t.peer));
            if (t.peer == k) { cp += t.count(); ow += t.count(); continue; }
            s += t.count();
            ++sp;
            if (!detail::contiguous_in(t.box, t.lo, t.hi, from.base().indices(c))) cp += t.count();
          }
          for (const auto& t : detail::exchange_recvs(from, to, c)) {
            if (t.peer == k) continue;
            rc += t.count();
            ++rp;
            if (!detail::contiguous_in(t.box, t.lo, t.hi, to.base().indices(c))) cp += t.count();
          }
          sent = std::max(sent, s * 2);
          received = std::max(received, rc * 2);
          copies = std::max(copies, cp * 2);
          own = std::max(own, ow * 2);
          peers = std::max({peers, sp, rp});
        }
        INFO(mesh.str() << " " << shape_str(shape) << " " << from.placements_str() << " => " << to.placements_str());
        CHECK(ex.bytes_sent == sent);
        CHECK(ex.bytes_received == received);
        CHECK(ex.copy_bytes == copies);
        CHECK(ex.own_bytes == own);
        CHECK(ex.peers == peers);
        ++compared;
      }
    }
  }
  CHECK(compared > 100);
}

TEST_CASE("ragged: count_before in closed form on dense boxes matches counting positions one by one", "[ragged]") {
  // box: a dense block; sub: a dense or strided sub-box of it; every pos from -1 to past the end
  std::mt19937_64 rng(20261129);
  auto uni = [&](std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng); };
  int checked = 0, dense = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const auto nd = uni(1, 3);
    std::vector<IndexSet> box, sub;
    for (std::int64_t d = 0; d < nd; ++d) {
      const auto a = uni(0, 5), len = uni(1, 5);
      box.push_back(IndexSet::range(a, a + len));
      const auto s0 = uni(a, a + len - 1), s1 = uni(s0 + 1, a + len);
      if (trial % 4 == 3 && s1 - s0 >= 3)  // two runs: the search path
        sub.push_back(IndexSet::from_runs(std::vector<Interval>{{s0, s0 + 1}, {s0 + 2, s1}}));
      else
        sub.push_back(IndexSet::range(s0, s1));
    }
    std::int64_t n = 1, total = 1;
    for (std::int64_t d = 0; d < nd; ++d) n *= sub[static_cast<std::size_t>(d)].size(), total *= box[static_cast<std::size_t>(d)].size();
    bool all_one_run = true;
    for (const auto& s : sub) all_one_run = all_one_run && s.runs().size() == 1;
    dense += all_one_run ? 1 : 0;
    for (std::int64_t pos = -1; pos <= total + 1; ++pos) {
      std::int64_t want = 0;
      for (std::int64_t t = 0; t < n; ++t) want += position_in(sub, t, box) < pos ? 1 : 0;
      REQUIRE(count_before(sub, box, pos) == want);
      ++checked;
    }
  }
  CHECK(dense > 250);
  CHECK(checked > 5000);
}

TEST_CASE("ragged: exchanges past 2^24 pairs or 65,536 ranks are refused by name; the planner takes another chain", "[ragged]") {
  // 8192x2: ragged rows beside a column split, to RR. The direct exchange has every rank receive
  // from every other (2^28 pairs): refused; the chain through the base (an all-gather-v per
  // column block, then an all-gather of the columns) is planned instead.
  const Mesh mesh({8192, 2});
  std::string units;
  for (int r = 0; r < 8192; ++r) units += (r ? "," : "") + std::string(r % 2 ? "3" : "1");
  const auto src = RaggedLayout::parse(mesh, {8192 * 4, 16}, DType::bf16, "RaggedShard((0,),(" + units + "))S(1)");
  const auto dst = RaggedLayout::parse(mesh, {8192 * 4, 16}, DType::bf16, "RR");
  CHECK_THROWS_WITH(ragged_exchange(src, dst, CostModel::default_model()), Catch::Contains("pairs more than 2^24 (sender, receiver) ranks"));
  const RaggedPlan p = plan_ragged(src, dst, CostModel::default_model());
  REQUIRE(p.stages.size() == 2);
  CHECK(p.stages[0].exchange.has_value());
  CHECK(p.stages[0].exchange->to.placements_str() == "RS(1)");
  // a mesh past the rank cap: every exchange is refused, and the error says why
  const Mesh big({65537});
  std::string ones = "1";
  for (int i = 1; i < 65537; ++i) ones += ",1";
  const auto r = RaggedLayout::parse(big, {65537}, DType::f32, "RaggedShard((0,),(" + ones + "))");
  CHECK_THROWS_WITH(plan_ragged(r, RaggedLayout::parse(big, {65537}, DType::f32, "S(0)"), CostModel::default_model()),
                    Catch::Contains("at most 65536 are planned"));
}
