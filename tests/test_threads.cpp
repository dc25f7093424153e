// The in-process backend used SPMD-style, one thread per rank (built into the concurrency binary,
// which CI also runs under TSan): plans agree or fail fast, mismatched and missing collectives end
// in errors that name them, and random redistributions are exact.
#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <new>
#include <random>
#include <string>
#include <tuple>

#include "dtensor/error.hpp"
#include "dtensor/executor.hpp"
#include "dtensor/planner.hpp"
#include "dtensor/simulate.hpp"
#include "dtensor/simulated.hpp"

using namespace dtensor;

TEST_CASE("threads backend: random redistributions, one thread per rank", "[threads]") {
  std::mt19937_64 rng(99);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const char* pls[] = {"R", "P(sum)", "P(max)", "S(0)", "S(1)", "_S(0, 2)", "_S(1, 3)"};
  int runs = 0;
  for (const char* m : {"4", "2x2", "2x3", "2x2x2"}) {
    const Mesh mesh = Mesh::parse(m);
    SimulatedWorld world(mesh, WorldOptions{std::chrono::milliseconds(30000), nullptr});
    for (int i = 0; i < 40; ++i) {
      const std::vector<std::int64_t> shape{uni(0, 9), uni(1, 7)};
      auto layout = [&] {
        std::string s;
        for (int d = 0; d < mesh.ndim(); ++d) s += pls[uni(0, 6)];
        return s;
      };
      std::string a = layout(), b = layout();
      // Partial ops must agree within a layout: use one op per layout
      if (a.find("P(sum)") != std::string::npos) for (auto p = a.find("P(max)"); p != std::string::npos; p = a.find("P(max)")) a.replace(p, 6, "P(sum)");
      if (b.find("P(sum)") != std::string::npos) for (auto p = b.find("P(max)"); p != std::string::npos; p = b.find("P(max)")) b.replace(p, 6, "P(sum)");
      Layout src = Layout::parse(mesh, shape, DType::f32, "R" + std::string(static_cast<std::size_t>(mesh.ndim() - 1), 'R'));
      Layout dst = src;
      try {
        src = Layout::parse(mesh, shape, DType::f32, a);
        dst = Layout::parse(mesh, shape, DType::f32, b);
      } catch (const InputError&) {
        continue;  // e.g. a split factor beyond its dim
      }
      const Plan plan = plan_redistribution(src, dst, CostModel::default_model());
      const auto res = simulate(plan, /*threads=*/true);
      INFO(mesh.str() << " " << shape_str(shape) << " " << a << " -> " << b << " via " << plan.trace());
      CHECK(res.mismatch == "");
      ++runs;
    }
  }
  CHECK(runs > 100);
}

TEST_CASE("threads backend: one thread per rank, plans agree or fail fast", "[threads]") {
  using Catch::Matchers::Contains;
  const Mesh mesh = Mesh::parse("2x2");
  const Layout a = Layout::parse(mesh, {8, 6}, DType::f32, "S(0)S(1)");
  const Plan p1 = plan_redistribution(a, Layout::parse(mesh, {8, 6}, DType::f32, "RR"), CostModel::default_model());
  const Plan p2 = plan_redistribution(a, Layout::parse(mesh, {8, 6}, DType::f32, "S(1)S(0)"), CostModel::default_model());
  REQUIRE(p1.hash() != p2.hash());
  SimulatedWorld world(mesh, WorldOptions{std::chrono::milliseconds(5000), nullptr});
  const auto t0 = std::chrono::steady_clock::now();
  try {
    run_rank_threads(world, [&](std::int64_t rank, Communicator& comm) {
      const Executor exec(rank == 3 ? p2 : p1, comm);  // rank 3 was given another plan
    });
    FAIL("no error");
  } catch (const BackendError& e) {
    CHECK_THAT(e.what(), Contains("different plans"));
    CHECK_THAT(e.what(), Contains("ranks 0-2 have plan"));
    CHECK_THAT(e.what(), Contains("rank 3 has plan"));
  }
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(4));  // failed fast, no timeout
}

TEST_CASE("threads backend: plans compared on every call catch a rank that switches between cached plans",
          "[threads]") {
  const Mesh mesh = Mesh::parse("2x2");
  const Layout a = Layout::parse(mesh, {8, 6}, DType::f32, "S(0)S(1)");
  const Plan p1 = plan_redistribution(a, Layout::parse(mesh, {8, 6}, DType::f32, "RR"), CostModel::default_model());
  const Plan p2 = plan_redistribution(a, Layout::parse(mesh, {8, 6}, DType::f32, "S(1)S(0)"), CostModel::default_model());
  for (const bool every_call : {true, false}) {
    SimulatedWorld world(mesh, WorldOptions{std::chrono::milliseconds(3000), nullptr});
    std::array<std::string, 4> first, second;  // each rank's error in the agreeing and the mixed round
    const auto t0 = std::chrono::steady_clock::now();
    run_rank_threads(world, [&](std::int64_t rank, Communicator& comm) {
      const ExecutorOptions o{.check_plans_agree = true, .max_workspace_bytes = {}, .check_plans_every_call = every_call};
      const Executor e1(p1, comm, o), e2(p2, comm, o);  // both prepared (and cached) on every rank
      auto run = [&](const Executor& e) {
        std::vector<std::byte> in(static_cast<std::size_t>(e.input_bytes())), out(static_cast<std::size_t>(e.output_bytes())),
            ws(static_cast<std::size_t>(e.workspace_bytes()));
        try {
          e.execute(Buffers{in, out, ws});
          return std::string();
        } catch (const BackendError& err) {
          return std::string(err.what());
        }
      };
      first[static_cast<std::size_t>(rank)] = run(e1);
      if (every_call)  // rank 3 now runs the other plan; without the per-call check that would mismatch
        second[static_cast<std::size_t>(rank)] = run(rank == 3 ? e2 : e1);
    });
    INFO("every_call " << every_call);
    for (std::size_t r = 0; r < 4; ++r) {
      CHECK(first[r].empty());
      if (!every_call) continue;
      INFO("rank " << r << ": " << second[r]);
      CHECK(second[r].find("different plans") != std::string::npos);
      CHECK(second[r].find("ranks 0-2 have plan") != std::string::npos);
      CHECK(second[r].find("rank 3 has plan") != std::string::npos);
    }
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));  // no timeout was waited for
  }
}

TEST_CASE("threads backend: mismatched collectives and absent ranks are errors, not hangs", "[threads]") {
  using Catch::Matchers::Contains;
  const Mesh mesh = Mesh::parse("4");
  std::vector<float> send(8, 1.0f), recv(32, 0.0f);
  {
    SimulatedWorld world(mesh, WorldOptions{std::chrono::milliseconds(3000), nullptr});
    try {
      run_rank_threads(world, [&](std::int64_t rank, Communicator& comm) {
        std::vector<float> s(8, 1.0f), r(32);
        if (rank == 2)
          comm.reduce_scatter(Group{{0}}, r.data(), s.data(), 8, DType::f32, ReduceOp::sum);
        else
          comm.all_gather(Group{{0}}, s.data(), r.data(), 8, DType::f32);
      });
      FAIL("no error");
    } catch (const BackendError& e) {
      CHECK_THAT(e.what(), Contains("disagree"));
      CHECK_THAT(e.what(), Contains("reduce_scatter"));
      CHECK_THAT(e.what(), Contains("all_gather"));
    }
  }
  {
    SimulatedWorld world(mesh, WorldOptions{std::chrono::milliseconds(300), nullptr});
    const auto t0 = std::chrono::steady_clock::now();
    try {
      run_rank_threads(world, [&](std::int64_t rank, Communicator& comm) {
        std::vector<float> s(8, 1.0f), r(32);
        if (rank != 1 && rank != 3) comm.all_gather(Group{{0}}, s.data(), r.data(), 8, DType::f32);
      });
      FAIL("no error");
    } catch (const BackendError& e) {
      CHECK_THAT(e.what(), Contains("all_gather over mesh dim 0"));
      CHECK_THAT(e.what(), Contains("timed out"));
      CHECK_THAT(e.what(), Contains("ranks 1,3 of its group did not arrive"));
    }
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
  }
  {
    SimulatedWorld world(mesh, WorldOptions{std::chrono::milliseconds(300), nullptr});
    try {
      run_rank_threads(world, [&](std::int64_t rank, Communicator& comm) {
        std::vector<float> buf(4, static_cast<float>(rank));
        std::vector<Transfer> sends, recvs;
        if (rank == 0) recvs.push_back({2, buf.data(), 4});  // rank 2 never sends
        comm.send_recv(sends, recvs, DType::f32);
      });
      FAIL("no error");
    } catch (const BackendError& e) {
      CHECK_THAT(e.what(), Contains("rank 2 never sent"));
    }
  }
  {  // lockstep: a collective issued by some ranks only is named with the missing ranks
    SimulatedWorld world(mesh);
    const Plan p = plan_redistribution(Layout::parse(mesh, {8}, DType::f32, "S(0)"), Layout::parse(mesh, {8}, DType::f32, "R"),
                                       CostModel::default_model());
    std::vector<Executor> ex;
    for (std::int64_t r = 0; r < 4; ++r) ex.emplace_back(p, world.communicator(r), ExecutorOptions{false});
    std::vector<std::vector<std::byte>> in(4), out(4), ws(4);
    std::vector<Buffers> bufs;
    std::vector<const Executor*> ptrs;
    for (std::size_t r = 0; r < 3; ++r) {
      in[r].resize(static_cast<std::size_t>(ex[r].input_bytes()));
      out[r].resize(static_cast<std::size_t>(ex[r].output_bytes()));
      ws[r].resize(static_cast<std::size_t>(ex[r].workspace_bytes()));
      bufs.push_back({in[r], out[r], ws[r]});
      ptrs.push_back(&ex[r]);
    }
    CHECK_THROWS_WITH(execute_all_ranks(ptrs, world, bufs), Contains("but not by ranks 3"));
  }
}

TEST_CASE("threads backend: a rank that fails is named with its own error, its peers stop at once", "[threads]") {
  using Catch::Matchers::Contains;
  const Mesh mesh = Mesh::parse("2x2");
  // a 60 s timeout: the peers must stop because rank 2 failed, not because they timed out
  SimulatedWorld world(mesh, WorldOptions{std::chrono::milliseconds(60000), nullptr});
  std::mutex mu;
  std::vector<std::string> seen;
  auto record = [&](const std::exception& e) {
    std::lock_guard lock(mu);
    seen.emplace_back(e.what());
  };
  // a collective: rank 2 runs out of memory before it; 0 and 1 (dim 1's group of 0) and 3 wait
  try {
    run_rank_threads(world, [&](std::int64_t rank, Communicator& comm) {
      std::vector<float> s(4, 1.0f), r(8);
      if (rank == 2) throw std::bad_alloc();
      try {
        comm.all_gather(Group{{0}}, s.data(), r.data(), 4, DType::f32);
      } catch (const BackendError& e) {
        record(e);
        throw;
      }
    });
    FAIL("no error");
  } catch (const BackendError& e) {  // the first failure, rank 2's own
    CHECK_THAT(e.what(), Contains("rank 2 of the simulated world ran out of memory"));
  }
  {
    std::lock_guard lock(mu);
    REQUIRE(seen.size() == 1);  // rank 0 waits on rank 2 in dim 0's group (ranks 1 and 3 complete theirs)
    CHECK_THAT(seen[0], Contains("rank 2 of its group failed before arriving: out of memory"));
    CHECK_THAT(seen[0], !Contains("timed out"));
    seen.clear();
  }
  // point to point: rank 1 fails; rank 0 waits for its data, rank 3 sends to it
  try {
    run_rank_threads(world, [&](std::int64_t rank, Communicator& comm) {
      std::vector<float> buf(4, static_cast<float>(rank));
      std::vector<Transfer> sends, recvs;
      if (rank == 1) throw InputError("rank 1's own bad input");
      if (rank == 0) recvs.push_back({1, buf.data(), 4});
      if (rank == 3) sends.push_back({1, buf.data(), 4});
      try {
        comm.send_recv(sends, recvs, DType::f32);
      } catch (const BackendError& e) {
        record(e);
        throw;
      }
    });
    FAIL("no error");
  } catch (const InputError& e) {  // rank 1's error as it threw it
    CHECK_THAT(e.what(), Contains("rank 1's own bad input"));
  }
  std::lock_guard lock(mu);
  REQUIRE(seen.size() == 2);
  std::sort(seen.begin(), seen.end());
  CHECK_THAT(seen[0], Contains("on rank 0: rank 1, which was to send it data, failed: rank 1's own bad input"));
  CHECK_THAT(seen[1], Contains("on rank 3: rank 1, which was to receive its data, failed"));
}

TEST_CASE("threads backend: cross-mesh plans, one thread per world rank on three worlds", "[threads]") {
  // the world's send/recv and each mesh's collectives run concurrently from the same threads
  const std::vector<std::tuple<std::string, std::string, std::string, std::string, std::vector<std::int64_t>,
                               std::vector<std::int64_t>>>
      cases{{"2x2", "P(sum)S(0)", "3", "S(1)", {0, 1, 2, 3}, {2, 3, 4}},
            {"dp=2,tp=2", "S(0)S(1)", "rep=2,tp=2", "RS(1)", {0, 1, 2, 3}, {4, 5, 6, 7}},
            {"2", "R", "3", "S(0)", {0, 1}, {2, 3, 4}}};
  for (const auto& [ma, pa, mb, pb, ra, rb] : cases) {
    const Layout src = Layout::parse(Mesh::parse(ma), {600, 16}, DType::f32, pa);
    const Layout dst = Layout::parse(Mesh::parse(mb), {600, 16}, DType::f32, pb);
    const auto plan = plan_cross_mesh(src, ra, dst, rb, CostModel::default_model());
    const auto sim = simulate(plan);
    INFO(explain(plan) << sim.mismatch);
    CHECK(sim.verified);
  }
}
