// Planner + executor on the simulated backend, checked against the independent oracle: every
// rank holds exactly the global elements its target layout names (per oracle::owned), and for
// Partial targets the reduction over the partial mesh dims equals the global tensor.
#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <cstring>
#include <random>

#include "dtensor/error.hpp"
#include "dtensor/executor.hpp"
#include "dtensor/planner.hpp"
#include "dtensor/scalar.hpp"
#include "dtensor/simulate.hpp"
#include "dtensor/simulated.hpp"
#include "dtensor/verify.hpp"
#include "exec_check.hpp"
#include "oracle.hpp"
#include "plan_mutations.hpp"
#include "test_util.hpp"

using namespace dtensor;
using namespace exec_check;

namespace {

// Runs `plan` on the in-process backend: `threads` one thread per rank with blocking
// collectives (the SPMD path), otherwise every rank from this thread (lockstep).
SimulatedWorld& world_of(const Mesh& mesh) {  // one world (and its rank threads) per mesh
  static std::map<std::vector<std::int64_t>, std::unique_ptr<SimulatedWorld>> worlds;
  auto& w = worlds[mesh.shape()];
  if (!w || w->mesh() != mesh) w = std::make_unique<SimulatedWorld>(mesh, WorldOptions{std::chrono::milliseconds(20000), nullptr});
  return *w;
}

Run run_plan(const Plan& plan, bool threads = false) {
  SimulatedWorld& world = world_of(plan.mesh());
  const Layout src = plan.src;
  const auto R = static_cast<std::size_t>(plan.mesh().num_ranks());
  std::vector<std::vector<std::byte>> in(R), ws(R);
  Run run;
  run.outputs.resize(R);
  for (std::size_t r = 0; r < R; ++r) in[r] = seeded_input(src, static_cast<std::int64_t>(r));
  const auto in_copy = in;
  if (threads) {
    run_rank_threads(world, [&](std::int64_t rank, Communicator& comm) {
      const auto r = static_cast<std::size_t>(rank);
      const Executor exec(plan, comm);
      run.outputs[r].resize(static_cast<std::size_t>(exec.output_bytes()));
      ws[r].resize(static_cast<std::size_t>(exec.workspace_bytes()));
      exec.execute({in[r], run.outputs[r], ws[r]});
    });
  } else {
    std::vector<Executor> execs;
    std::vector<const Executor*> ptrs;
    std::vector<Buffers> bufs;
    execs.reserve(R);
    for (std::size_t r = 0; r < R; ++r) {
      execs.emplace_back(plan, world.communicator(static_cast<std::int64_t>(r)), ExecutorOptions{false});
      run.outputs[r].resize(static_cast<std::size_t>(execs.back().output_bytes()));
      ws[r].resize(static_cast<std::size_t>(execs.back().workspace_bytes()));
    }
    for (std::size_t r = 0; r < R; ++r) {
      ptrs.push_back(&execs[r]);
      bufs.push_back({in[r], run.outputs[r], ws[r]});
    }
    execute_all_ranks(ptrs, world, bufs);
  }
  if (in != in_copy) FAIL("the executor wrote its input buffer");
  return run;
}

// Every n-th case of the full set runs one thread per rank (1 = all of them).
std::int64_t threads_stride() {
  if (const char* s = std::getenv("DTENSOR_THREADS_STRIDE")) return std::max<std::int64_t>(1, std::atoll(s));
  return 8;
}


}  // namespace

TEST_CASE("executor: full set against the oracle", "[executor][exhaustive]") {
  const auto stride = sample_stride();
  std::int64_t cases = 0, ran = 0;
  for (const auto& mesh : {std::vector<std::int64_t>{4}, std::vector<std::int64_t>{2, 2}, std::vector<std::int64_t>{2, 3}}) {
    for (int nd = 1; nd <= 2; ++nd) {
      const auto layouts = oracle::layouts(static_cast<int>(mesh.size()), nd, placement_options(nd));
      for_each_shape(nd, {0, 1, 3, 5, 8}, [&](const std::vector<std::int64_t>& shape) {
        for (EdgeSet es : {EdgeSet::all, EdgeSet::pytorch}) {
          PlanOptions o;
          o.edges = es;
          o.runner_up = false;
          for (const auto& a : layouts) {
            const Layout src = Layout::parse(Mesh(mesh), shape, DType::f64, oracle::text(a));
            for (const auto& b : layouts) {
              const std::int64_t index = cases++;
              if (index % stride != 0) continue;
              const Layout dst = Layout::parse(Mesh(mesh), shape, DType::f64, oracle::text(b));
              Plan plan = plan_redistribution(src, dst, CostModel::default_model(), o);
              for (DType dt : {DType::f64, DType::i64}) {
                if (refuses_avg(a, dt) || refuses_avg(b, dt)) {  // i64 average: refused when the layout is made
                  CHECK_THROWS_AS(Layout(plan.mesh(), plan.shape(), dt, (refuses_avg(a, dt) ? plan.src : plan.dst).sharding()),
                                  InputError);
                  ++ran;
                  continue;
                }
                // same itemsize: the same plan
                plan.src = Layout(plan.mesh(), plan.shape(), dt, plan.src.sharding());
                plan.dst = Layout(plan.mesh(), plan.shape(), dt, plan.dst.sharding());
                // every case's i64 run on the lockstep driver; the f64 run of every 8th case
                // (DTENSOR_THREADS_STRIDE) one thread per rank with blocking collectives (~5x the cost)
                const bool threads = dt == DType::f64 && (index / stride) % threads_stride() == 0;
                const auto err = check(mesh, shape, dt, b, run_plan(plan, threads));
                if (!err.empty()) {
                  FAIL_CHECK(Mesh(mesh).str() << " " << shape_str(shape) << " " << to_string(dt) << " edges "
                                              << to_string(es) << ": " << src.placements_str() << " -> " << dst.placements_str() << " via "
                                              << plan.trace() << ": " << err);
                  return;
                }
                ++ran;
              }
            }
          }
        }
      });
    }
  }
  INFO("cases " << cases << ", runs " << ran << ", stride " << stride);
  CHECK(ran >= 2 * cases / stride - 2);
}

TEST_CASE("executor: 20,000 seeded random pairs, round trips, larger meshes", "[executor]") {
  std::mt19937_64 rng(777);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const std::vector<std::vector<std::int64_t>> meshes{{2, 2, 2}, {2, 4}, {4, 4, 8}};
  const std::int64_t total = 20000 / sample_stride();
  std::int64_t done = 0, round_trips = 0;
  while (done < total) {
    const auto& mesh = meshes[static_cast<std::size_t>(done % 3)];
    const int nd = uni(1, 3);
    std::vector<std::int64_t> shape;
    for (int d = 0; d < nd; ++d) shape.push_back(uni(0, mesh.size() == 3 && mesh[2] == 8 ? 9 : 13));
    auto random_pls = [&] {
      std::vector<oracle::Pl> pls;
      const char ops[] = {'P', 'A', 'M', 'N', 'X'};
      const char op = ops[uni(0, 4)];
      for (std::size_t m = 0; m < mesh.size(); ++m) {
        switch (uni(0, 3)) {
          case 0: pls.push_back({'R'}); break;
          case 1: pls.push_back({op}); break;
          case 2: pls.push_back({'S', uni(0, nd - 1), 1}); break;
          default: pls.push_back({'T', uni(0, nd - 1), uni(2, 3)}); break;
        }
      }
      return pls;
    };
    const auto a = random_pls(), b = random_pls();
    // i64 where it can (exact at any size); an average needs a floating dtype
    const DType dt = refuses_avg(a, DType::i64) || refuses_avg(b, DType::i64) ? DType::f64 : DType::i64;
    const Layout src = Layout::parse(Mesh(mesh), shape, dt, oracle::text(a));
    const Layout dst = Layout::parse(Mesh(mesh), shape, dt, oracle::text(b));
    PlanOptions o;
    o.runner_up = false;
    o.edges = done % 2 ? EdgeSet::all : EdgeSet::pytorch;
    const Plan fwd = plan_redistribution(src, dst, CostModel::default_model(), o);
    const auto err = check(mesh, shape, dt, b, run_plan(fwd));
    if (!err.empty()) FAIL(Mesh(mesh).str() << " " << shape_str(shape) << ": " << src.placements_str() << " -> " << dst.placements_str() << " via " << fwd.trace() << ": " << err);
    // X -> Y -> X is the identity (the source data again, Partial contributions reduced)
    if (done % 10 == 0) {
      const Plan back = plan_redistribution(dst, src, CostModel::default_model(), o);
      const auto err2 = check(mesh, shape, dt, a, run_plan(back));
      if (!err2.empty()) FAIL("round trip " << src.placements_str() << " -> " << dst.placements_str() << " -> back: " << err2);
      ++round_trips;
    }
    ++done;
  }
  CHECK(done == total);
  CHECK(round_trips > 0);
}

TEST_CASE("executor: every dtype on a sample", "[executor]") {
  const std::vector<std::int64_t> mesh{2, 3};
  const auto layouts = oracle::layouts(2, 2, placement_options(2));
  std::mt19937_64 rng(11);
  int runs = 0;
  for (DType dt : kAllDTypes) {
    for (int i = 0; i < 150; ++i) {
      const auto& a = layouts[rng() % layouts.size()];
      const auto& b = layouts[rng() % layouts.size()];
      const std::vector<std::int64_t> shape{static_cast<std::int64_t>(rng() % 9), static_cast<std::int64_t>(rng() % 9)};
      if (refuses_avg(a, dt) || refuses_avg(b, dt)) {
        CHECK_THROWS_WITH(Layout::parse(Mesh(mesh), shape, dt, oracle::text(refuses_avg(a, dt) ? a : b)),
                          Catch::Matchers::Contains("Partial(avg)") && Catch::Matchers::Contains(std::string(to_string(dt))));
        ++runs;
        continue;
      }
      const Layout src = Layout::parse(Mesh(mesh), shape, dt, oracle::text(a));
      const Layout dst = Layout::parse(Mesh(mesh), shape, dt, oracle::text(b));
      const Plan p = plan_redistribution(src, dst, CostModel::default_model());
      const auto err = check(mesh, shape, dt, b, run_plan(p));
      if (!err.empty()) FAIL(to_string(dt) << " " << src.placements_str() << " -> " << dst.placements_str() << " via " << p.trace() << ": " << err);
      ++runs;
    }
  }
  CHECK(runs == 150 * 11);
}

TEST_CASE("executor: buffers of the wrong size are rejected", "[executor]") {
  using Catch::Matchers::Contains;
  const Mesh mesh = Mesh::parse("2x2");
  const Plan p = plan_redistribution(Layout::parse(mesh, {9, 5}, DType::f32, "S(0)S(1)"),
                                     Layout::parse(mesh, {9, 5}, DType::f32, "RS(0)"), CostModel::default_model());
  SimulatedWorld world(mesh);
  const Executor exec(p, world.communicator(2), ExecutorOptions{false});
  std::vector<std::byte> in(static_cast<std::size_t>(exec.input_bytes())), out(static_cast<std::size_t>(exec.output_bytes())),
      ws(static_cast<std::size_t>(exec.workspace_bytes()));
  out.resize(out.size() + 4);
  CHECK_THROWS_WITH(exec.execute({in, out, ws}), Contains("rank 2: output buffer has"));
  out.resize(out.size() - 4);
  in.pop_back();
  CHECK_THROWS_WITH(exec.execute({in, out, ws}), Contains("rank 2: input buffer"));
  in.emplace_back();
  REQUIRE(exec.workspace_bytes() > 0);
  ws.pop_back();
  CHECK_THROWS_WITH(exec.execute({in, out, ws}), Contains("rank 2: workspace"));
  // a plan whose recorded peak is too small for its buffer records is refused when prepared
  Plan bad = p;
  bad.peak_bytes = 0;
  CHECK_THROWS_AS(Executor(bad, world.communicator(0), ExecutorOptions{false}), InputError);
  CHECK_THROWS_WITH(Executor(bad, world.communicator(0), ExecutorOptions{false}), Contains("'peak_bytes'"));
}

TEST_CASE("executor: a plan is validated once per process; a changed plan or bound is validated again", "[executor]") {
  using Catch::Matchers::Contains;
  const Mesh mesh = Mesh::parse("2x2");
  const Plan p = plan_redistribution(Layout::parse(mesh, {9, 6}, DType::f32, "S(0)S(1)"),
                                     Layout::parse(mesh, {9, 6}, DType::f32, "S(1)S(0)"), CostModel::default_model());
  REQUIRE(p.peak_bytes > 0);
  SimulatedWorld world(mesh);
  for (std::int64_t r = 0; r < 4; ++r) CHECK_NOTHROW(Executor(p, world.communicator(r), ExecutorOptions{false}));
  // a copy with one buffer record changed is not the remembered plan: checked, refused, every time
  Plan bad = p;
  bad.steps.back().buffers.send_elems += 1;
  for (int k = 0; k < 2; ++k)
    CHECK_THROWS_WITH(Executor(bad, world.communicator(0), ExecutorOptions{false}), Contains("send_elems"));
  // the remembered plan under a bound below its need is checked again, and refused
  ExecutorOptions tight{false};
  tight.max_workspace_bytes = p.peak_bytes - 1;
  CHECK_THROWS_WITH(Executor(p, world.communicator(0), tight), Contains("'peak_bytes'"));
  CHECK_NOTHROW(validate_plan_once(p));
  CHECK_THROWS_WITH(validate_plan_once(bad), Contains("send_elems"));
}

TEST_CASE("executor: a plan read back from JSON executes without re-planning", "[executor]") {
  const Mesh mesh = Mesh::parse("dp=2,tp=3");
  const Plan p = plan_redistribution(Layout::parse(mesh, {7, 5}, DType::f32, "S(0)[1]S(0)[0]"),
                                     Layout::parse(mesh, {7, 5}, DType::f32, "RS(1)"), CostModel::default_model());
  const Plan q = Plan::from_json(p.to_json());
  CHECK(q == p);
  for (const auto& s : q.steps) CHECK((s.buffers.from_offset >= -1 && s.buffers.to_offset >= -1));
  const auto res = simulate(q);
  CHECK(res.verified);
  CHECK(res.mismatch.empty());
  // integer fields must be integers in range: never truncated, never UB
  using Catch::Matchers::Contains;
  auto with = [&](const std::string& from, const std::string& to) {
    std::string t = p.to_json();
    const auto at = t.find(from);
    REQUIRE(at != std::string::npos);
    return t.replace(at, from.size(), to);
  };
  CHECK_THROWS_WITH(Plan::from_json(with("\"mesh\":[2,3]", "\"mesh\":[1e30,3]")), Contains("must be an integer"));
  CHECK_THROWS_WITH(Plan::from_json(with("\"mesh\":[2,3]", "\"mesh\":[2.9,3]")), Contains("must be an integer"));
  CHECK_THROWS_WITH(Plan::from_json(with("\"mesh\":[2,3]", "\"mesh\":[4294967298,3]")), Contains("4294967298"));
  CHECK_THROWS_WITH(Plan::from_json(with("\"peak_bytes\":", "\"peak_bytes\":1e400,\"x\":")), Contains("invalid plan JSON"));
  CHECK_THROWS_WITH(Plan::from_json(std::string(100000, '[')), Contains("nested deeper"));
}

TEST_CASE("executor: hostile buffer records in a plan are refused, never run", "[executor]") {
  using Catch::Matchers::Contains;
  const Mesh mesh = Mesh::parse("4");
  const Plan p = plan_redistribution(Layout::parse(mesh, {10, 6}, DType::f32, "S(1)"),
                                     Layout::parse(mesh, {10, 6}, DType::f32, "S(0)"), CostModel::default_model());
  REQUIRE(!p.steps.empty());
  SimulatedWorld world(mesh);
  Communicator& c = world.communicator(1);
  {
    Plan bad = p;
    bad.steps[0].buffers.send_offset = p.peak_bytes;  // outside the workspace
    bad.steps[0].buffers.send_elems = std::max<std::int64_t>(1, bad.steps[0].buffers.send_elems);
    CHECK_THROWS_AS(Executor(bad, c, ExecutorOptions{false}), InputError);
  }
  {
    Plan bad = p;
    bad.steps[0].buffers.send_elems = 1;  // smaller than what the rank exchanges
    CHECK_THROWS_WITH(Executor(bad, c, ExecutorOptions{false}), Contains("'buffers.send_elems'"));
  }
  {
    Plan bad = p;
    bad.steps[0].buffers.recv_offset = bad.steps[0].buffers.send_offset;  // overlapping scratch
    if (bad.steps[0].buffers.recv_elems > 0 && bad.steps[0].buffers.send_elems > 0)
      CHECK_THROWS_WITH(Executor(bad, c, ExecutorOptions{false}), Contains("'buffers.recv_offset'"));
  }
  {
    Plan bad = p;  // a target layout of another shape than the source's
    bad.dst = Layout::parse(mesh, {10, 7}, DType::f32, "S(0)");
    CHECK_THROWS_WITH(Executor(bad, c, ExecutorOptions{false}), Contains("differ in mesh, shape or dtype"));
  }
}


// A plan is untrusted input (docs/executor.md): every structural mutation of real plans is either
// refused with an InputError before anything runs, or runs to the oracle's result. Under ASan
// (scripts/test.sh) no mutant may read or write outside its buffers.
TEST_CASE("executor: structurally mutated plans are refused or run right", "[trust]") {
  const auto stride = sample_stride();
  std::mt19937_64 rng(7);
  std::int64_t plans = 0, mutants = 0, refused = 0, accepted = 0, index = 0;
  for (const auto& mesh : {std::vector<std::int64_t>{4}, std::vector<std::int64_t>{2, 2}, std::vector<std::int64_t>{2, 3},
                           std::vector<std::int64_t>{2, 1, 2}}) {
    const int nd = 2;
    const auto layouts = oracle::layouts(static_cast<int>(mesh.size()), nd, placement_options(nd));
    for (int trial = 0; trial < 24; ++trial) {
      const auto& a = layouts[rng() % layouts.size()];
      const auto& b = layouts[rng() % layouts.size()];
      const std::vector<std::int64_t> shape{static_cast<std::int64_t>(rng() % 9), static_cast<std::int64_t>(1 + rng() % 6)};
      if (index++ % stride != 0) continue;
      const Mesh m(mesh);
      PlanOptions o;
      o.runner_up = false;
      const Plan p = plan_redistribution(Layout::parse(m, shape, DType::f64, oracle::text(a)),
                                         Layout::parse(m, shape, DType::f64, oracle::text(b)), CostModel::default_model(), o);
      ++plans;
      REQUIRE(check(mesh, shape, DType::f64, b, run_plan(p)).empty());
      for (const Plan& q : plan_mutations::all(p)) {
        ++mutants;
        Run r;
        try {
          r = run_plan(q);
        } catch (const InputError&) {
          ++refused;
          continue;
        }
        ++accepted;
        const auto err = check(mesh, shape, DType::f64, b, r);
        if (!err.empty())
          FAIL(fmt::format("a mutant of {} -> {} on {} ran to a wrong result: {}\n{}", oracle::text(a), oracle::text(b),
                           m.str(), err, q.to_json(1)));
      }
    }
  }
  INFO(fmt::format("{} plans, {} mutants: {} refused, {} accepted and right", plans, mutants, refused, accepted));
  CHECK(plans > 0);
  CHECK(refused > 0);
  WARN(fmt::format("{} plans, {} mutants: {} refused, {} accepted and right", plans, mutants, refused, accepted));
}

TEST_CASE("executor: the plan-trust issue's reproducers are refused by name", "[trust]") {
  using Catch::Matchers::Contains;
  const Mesh mesh = Mesh::parse("2x2");
  const Plan p = plan_redistribution(Layout::parse(mesh, {9, 5}, DType::f32, "S(0)S(1)"),
                                     Layout::parse(mesh, {9, 5}, DType::f32, "S(1)S(0)"), CostModel::default_model());
  SimulatedWorld world(mesh);
  Communicator& c = world.communicator(0);
  std::size_t comm = p.steps.size();
  for (std::size_t k = 0; k < p.steps.size(); ++k)
    if (is_communication(p.steps[k].kind)) comm = k;
  REQUIRE(comm < p.steps.size());
  auto refused = [&](Plan q) { return error_of([&] { (void)Executor(q, c, ExecutorOptions{false}); }); };
  Plan q = p;
  q.steps[comm].kind = StepKind::local_chunk;  // was a heap-buffer-overflow read
  CHECK_THAT(refused(q), Contains(fmt::format("plan step {}", comm)) && (Contains("'kind'") || Contains("'mesh_dims'")));
  if (q.steps[comm].mesh_dims.size() == 1) CHECK_THAT(refused(q), Contains("'kind'"));
  q = p;
  q.steps[comm].mesh_dims = {0, 0};  // was unbounded memory growth
  CHECK_THAT(refused(q), Contains("twice") && Contains("'mesh_dims'"));
  q = p;
  q.steps[comm].mesh_dims = {};  // was std::out_of_range
  CHECK_THAT(refused(q), Contains("'mesh_dims'"));
  q = p;
  q.steps[comm].buffers.zero_copy = !q.steps[comm].buffers.zero_copy;  // was a silent wrong result
  CHECK_THAT(refused(q), Contains("'buffers.zero_copy'"));
  q = p;
  q.peak_bytes = std::int64_t{1} << 30;  // was a 3.8 GB allocation in Python's simulate
  CHECK_THAT(refused(q), Contains("'peak_bytes'") && Contains("exceeds"));
  ExecutorOptions roomy{false};
  roomy.max_workspace_bytes = std::int64_t{1} << 31;
  lower_buffers(q);  // lowered for the larger workspace: runs where the caller allows it
  CHECK_NOTHROW(Executor(q, c, roomy));
  // Plan::from_json runs the same check
  std::string t = p.to_json();
  const auto at = t.find("\"zero_copy\":");
  REQUIRE(at != std::string::npos);
  const bool zc = t.compare(at + 12, 4, "true") == 0;
  t.replace(at + 12, zc ? 4 : 5, zc ? "false" : "true");
  CHECK_THAT(error_of([&] { (void)Plan::from_json(t); }), Contains("'buffers.zero_copy'"));
}
