// Planner + executor on the simulated backend, checked against the independent oracle: every
// rank holds exactly the global elements its target layout names (per oracle::owned), and for
// Partial targets the reduction over the partial mesh dims equals the global tensor.
#include <catch2/catch.hpp>
#include <cstring>
#include <random>

#include "dtensor/error.hpp"
#include "dtensor/executor.hpp"
#include "dtensor/planner.hpp"
#include "dtensor/scalar.hpp"
#include "dtensor/simulated.hpp"
#include "exec_check.hpp"
#include "oracle.hpp"

using namespace dtensor;
using namespace exec_check;

namespace {

Run run_plan(const Plan& plan) {
  SimulatedCommunicator comm(plan.mesh);
  const Executor exec(plan, comm);
  const Layout src = plan.src_layout();
  const auto R = plan.mesh.num_ranks();
  std::vector<std::vector<std::byte>> in, ws;
  Run run;
  std::vector<RankBuffers> bufs;
  for (std::int64_t r = 0; r < R; ++r) {
    in.push_back(seeded_input(src, r));
    run.outputs.emplace_back(static_cast<std::size_t>(exec.output_bytes(r)));
    ws.emplace_back(static_cast<std::size_t>(exec.workspace_bytes()));
  }
  const auto in_copy = in;
  for (std::int64_t r = 0; r < R; ++r)
    bufs.push_back({r, in[static_cast<std::size_t>(r)], run.outputs[static_cast<std::size_t>(r)], ws[static_cast<std::size_t>(r)]});
  exec.execute(comm, bufs);
  if (in != in_copy) FAIL("the executor wrote its input buffer");
  return run;
}

// Every `stride`-th case of the full set (1 = all of it); sanitizer builds may sample.
std::int64_t sample_stride() {
  if (const char* s = std::getenv("DTENSOR_EXHAUSTIVE_STRIDE")) return std::max<std::int64_t>(1, std::atoll(s));
  return 1;
}

}  // namespace

TEST_CASE("executor: full set against the oracle", "[executor]") {
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
              if (cases++ % stride != 0) continue;
              const Layout dst = Layout::parse(Mesh(mesh), shape, DType::f64, oracle::text(b));
              Plan plan = plan_redistribution(src, dst, CostModel::default_model(), o);
              for (DType dt : {DType::f64, DType::i64}) {
                plan.dtype = dt;  // same itemsize: the same plan
                const auto err = check(mesh, shape, dt, b, run_plan(plan));
                if (!err.empty()) {
                  FAIL_CHECK(Mesh(mesh).str() << " " << shape_str(shape) << " " << to_string(dt) << " edges "
                                              << to_string(es) << ": " << src.str() << " -> " << dst.str() << " via "
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
    const Layout src = Layout::parse(Mesh(mesh), shape, DType::i64, oracle::text(a));
    const Layout dst = Layout::parse(Mesh(mesh), shape, DType::i64, oracle::text(b));
    PlanOptions o;
    o.runner_up = false;
    o.edges = done % 2 ? EdgeSet::all : EdgeSet::pytorch;
    const Plan fwd = plan_redistribution(src, dst, CostModel::default_model(), o);
    const auto err = check(mesh, shape, DType::i64, b, run_plan(fwd));
    if (!err.empty()) FAIL(Mesh(mesh).str() << " " << shape_str(shape) << ": " << src.str() << " -> " << dst.str() << " via " << fwd.trace() << ": " << err);
    // X -> Y -> X is the identity (the source data again, Partial contributions reduced)
    if (done % 10 == 0) {
      const Plan back = plan_redistribution(dst, src, CostModel::default_model(), o);
      const auto err2 = check(mesh, shape, DType::i64, a, run_plan(back));
      if (!err2.empty()) FAIL("round trip " << src.str() << " -> " << dst.str() << " -> back: " << err2);
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
      const Layout src = Layout::parse(Mesh(mesh), shape, dt, oracle::text(a));
      const Layout dst = Layout::parse(Mesh(mesh), shape, dt, oracle::text(b));
      const Plan p = plan_redistribution(src, dst, CostModel::default_model());
      const auto err = check(mesh, shape, dt, b, run_plan(p));
      if (!err.empty()) FAIL(to_string(dt) << " " << src.str() << " -> " << dst.str() << " via " << p.trace() << ": " << err);
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
  SimulatedCommunicator comm(mesh);
  const Executor exec(p, comm);
  std::vector<std::vector<std::byte>> in, out, ws;
  for (std::int64_t r = 0; r < 4; ++r) {
    in.emplace_back(static_cast<std::size_t>(exec.input_bytes(r)));
    out.emplace_back(static_cast<std::size_t>(exec.output_bytes(r)));
    ws.emplace_back(static_cast<std::size_t>(exec.workspace_bytes()));
  }
  auto bufs = [&] {
    std::vector<RankBuffers> b;
    for (std::int64_t r = 0; r < 4; ++r) b.push_back({r, in[static_cast<std::size_t>(r)], out[static_cast<std::size_t>(r)], ws[static_cast<std::size_t>(r)]});
    return b;
  };
  out[2].resize(out[2].size() + 4);
  try {
    exec.execute(comm, bufs());
    FAIL("no error");
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Contains("rank 2: output buffer has"));
  }
  out[2].resize(out[2].size() - 4);
  in[1].pop_back();
  CHECK_THROWS_WITH(exec.execute(comm, bufs()), Contains("rank 1: input buffer"));
  in[1].emplace_back();
  if (exec.workspace_bytes() > 0) {
    ws[3].pop_back();
    CHECK_THROWS_WITH(exec.execute(comm, bufs()), Contains("rank 3: workspace"));
    ws[3].emplace_back();
  }
  CHECK_NOTHROW(exec.execute(comm, bufs()));
  // a plan whose recorded peak is too small for its steps is refused when prepared
  Plan bad = p;
  bad.peak_bytes = 0;
  if (p.peak_bytes > 0) CHECK_THROWS_WITH(Executor(bad, comm), Contains("peak_bytes"));
}
