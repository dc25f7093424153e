// The NCCL backend's host logic (src/comm/nccl/nccl.cpp, the very code of
// dtensor::nccl) on the CPU stand-in for NCCL 2.28's non-blocking mode (tests/fakes/nccl_vendor_cpu.hpp): world
// creation, splits whose handles appear only when the parent is polled, calls that return
// ncclInProgress, member order of flattened and permuted groups, grouped send/recv, the plan-hash
// exchange, the watchdog and abort. Ranks are threads; every output is checked against the oracle.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

#include "comm/nccl/device_args.hpp"
#include "fakes/nccl_vendor_cpu.hpp"
#include "dtensor/batch_executor.hpp"
#include "dtensor/cross_mesh_executor.hpp"
#include "dtensor/error.hpp"
#include "dtensor/executor.hpp"
#include "dtensor/nccl.hpp"
#include "dtensor/planner.hpp"
#include "dtensor/verify.hpp"
#include "exec_check.hpp"
#include "oracle.hpp"
#include "plan_chain.hpp"
#include "dtensor/ragged_executor.hpp"
#include "ragged_cases.hpp"
#include "strided_cases.hpp"

using namespace dtensor;
namespace cpu = dtensor::nccl_vendor::cpu;

namespace {

struct Case {
  std::vector<std::int64_t> shape;
  std::vector<oracle::Pl> from, to;
  DType dtype;
};

std::vector<Case> random_cases(int mesh_ndim, int n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto layouts = oracle::layouts(mesh_ndim, 2, exec_check::placement_options(2));
  const DType dtypes[] = {DType::f64, DType::f32, DType::bf16, DType::i32, DType::f8e4m3};
  std::vector<Case> out;
  while (static_cast<int>(out.size()) < n) {
    Case c;
    c.shape = {static_cast<std::int64_t>(rng() % 10), static_cast<std::int64_t>(1 + rng() % 7)};
    c.from = layouts[rng() % layouts.size()];
    c.to = layouts[rng() % layouts.size()];
    c.dtype = dtypes[rng() % std::size(dtypes)];
    if (exec_check::refuses_avg(c.from, c.dtype) || exec_check::refuses_avg(c.to, c.dtype)) c.dtype = DType::f64;
    out.push_back(std::move(c));
  }
  return out;
}

// Runs fn(rank) on one thread per rank; rethrows the lowest rank's exception.
void per_rank(std::int64_t ranks, const std::function<void(std::int64_t)>& fn) {
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(ranks));
  std::vector<std::thread> threads;
  for (std::int64_t r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

struct StreamGuard {
  void* s = cpu::stream_create();
  ~StreamGuard() { cpu::stream_destroy(s); }
};

// One rank's communicator on its own stand-in GPU and stream (declare the stream first: it must
// outlive the communicator).
NcclOptions rank_options(std::int64_t rank, void* stream, int timeout_ms) {
  NcclOptions o;
  o.device = static_cast<int>(rank);
  o.stream = stream;
  o.timeout = std::chrono::milliseconds(timeout_ms);
  return o;
}

}  // namespace

TEST_CASE("NCCL backend on the CPU stand-in: random SPMD pairs on 4 and 8 ranks", "[nccl_cpu]") {
  const auto before = cpu::counters();
  struct MeshCase {
    Mesh mesh;
    int pairs;
  };
  const std::vector<MeshCase> meshes{
      {Mesh(std::vector<std::int64_t>{2, 2}), 80},
      {Mesh(std::vector<std::int64_t>{4}), 60},
      {Mesh(std::vector<std::int64_t>{2, 2}, {}, {3, 1, 0, 2}), 70},  // permuted: groups order members by coordinate
      {Mesh(std::vector<std::int64_t>{2, 4}), 80},
      {Mesh(std::vector<std::int64_t>{2, 2, 2}), 70},
      {Mesh(std::vector<std::int64_t>{2, 4}, {}, {7, 6, 5, 4, 3, 2, 1, 0}), 60},
  };
  std::int64_t verified = 0;
  std::uint64_t seed = 1;
  for (const auto& mc : meshes) {
    const Mesh& mesh = mc.mesh;
    const auto R = mesh.num_ranks();
    const auto cases = random_cases(mesh.ndim(), mc.pairs, seed++);
    std::vector<std::vector<std::vector<std::byte>>> outputs(cases.size(), std::vector<std::vector<std::byte>>(static_cast<std::size_t>(R)));
    std::vector<std::string> traces(cases.size());
    const NcclUniqueId id = nccl_unique_id();
    per_rank(R, [&](std::int64_t rank) {
      StreamGuard stream;
      NcclCommunicator comm(mesh, rank, id, rank_options(rank, stream.s, 30000));
      for (std::size_t i = 0; i < cases.size(); ++i) {
        const auto& c = cases[i];
        PlanOptions po;
        po.runner_up = false;
        const Plan p = plan_redistribution(Layout::parse(mesh, c.shape, c.dtype, oracle::text(c.from)),
                                           Layout::parse(mesh, c.shape, c.dtype, oracle::text(c.to)),
                                           CostModel::default_model(), po);
        if (rank == 0) traces[i] = p.trace();
        const Executor ex(p, comm);  // plan-hash exchange over the world, then the splits
        const auto in = seeded_input(p.src, rank);
        auto& out = outputs[i][static_cast<std::size_t>(mesh.position(mesh.coord_of_rank(rank)))];
        out.resize(static_cast<std::size_t>(ex.output_bytes()));
        std::vector<std::byte> ws(static_cast<std::size_t>(ex.workspace_bytes()));
        ex.execute({in, out, ws});
        comm.wait();
      }
    });
    for (std::size_t i = 0; i < cases.size(); ++i) {
      // the oracle indexes ranks by mesh position (row-major coordinates)
      const auto err = exec_check::check(mesh.shape(), cases[i].shape, cases[i].dtype, cases[i].to, exec_check::Run{outputs[i]});
      if (!err.empty())
        FAIL(fmt::format("{} {} {}: {} -> {} via {}: {}", mesh.str(), shape_str(cases[i].shape), to_string(cases[i].dtype),
                         oracle::text(cases[i].from), oracle::text(cases[i].to), traces[i], err));
      ++verified;
    }
  }
  CHECK(verified == 420);  // 210 pairs on 4 ranks, 210 on 8
  const auto after = cpu::counters();
  // the protocol was exercised: deferred split handles and operations that stayed in progress
  CHECK(after.deferred_split_handles > before.deferred_split_handles);
  CHECK(after.in_progress_returns > before.in_progress_returns);
  CHECK(after.invalid_usage == before.invalid_usage);
}

TEST_CASE("NCCL backend on the CPU stand-in: a dead peer ends in a BackendError naming the collective", "[nccl_cpu]") {
  const Mesh mesh(std::vector<std::int64_t>{2, 2});
  const NcclUniqueId id = nccl_unique_id();
  const Plan p = plan_redistribution(Layout::parse(mesh, {8, 6}, DType::f32, "S(0)S(1)"), Layout::parse(mesh, {8, 6}, DType::f32, "RR"),
                                     CostModel::default_model());
  REQUIRE(!p.steps.empty());
  std::mutex mu;
  std::vector<std::string> errors(4);
  const auto t0 = std::chrono::steady_clock::now();
  per_rank(4, [&](std::int64_t rank) {
    StreamGuard stream;
    NcclCommunicator comm(mesh, rank, id, rank_options(rank, stream.s, 1000));
    const Executor ex(p, comm);
    if (rank == 3) return;  // prepared, then never runs its part
    const auto in = seeded_input(p.src, rank);
    std::vector<std::byte> out(static_cast<std::size_t>(ex.output_bytes())), ws(static_cast<std::size_t>(ex.workspace_bytes()));
    try {
      ex.execute({in, out, ws});
      comm.wait();
    } catch (const BackendError& e) {
      std::lock_guard lk(mu);
      errors[static_cast<std::size_t>(rank)] = e.what();
    }
    cpu::stream_drain(stream.s);  // the queued copies still use the buffers
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r << ": " << errors[static_cast<std::size_t>(r)]);
    CHECK_THAT(errors[static_cast<std::size_t>(r)], Catch::Matchers::Contains("within 1000 ms") ||
                                                         Catch::Matchers::Contains("failed: NCCL error"));
    CHECK_THAT(errors[static_cast<std::size_t>(r)], Catch::Matchers::Contains(std::string(to_string(p.steps[0].kind))) ||
                                                         Catch::Matchers::Contains("direct exchange"));
  }
  CHECK(seconds < 20);
}

TEST_CASE("NCCL backend on the CPU stand-in: CUDA-graph capture before prepare is refused", "[nccl_cpu]") {
  const Mesh mesh(std::vector<std::int64_t>{2, 2});
  const NcclUniqueId id = nccl_unique_id();
  const Plan p = plan_redistribution(Layout::parse(mesh, {8, 6}, DType::f32, "P(sum)S(1)"),
                                     Layout::parse(mesh, {8, 6}, DType::f32, "RS(1)"), CostModel::default_model());
  REQUIRE(!p.steps.empty());
  std::vector<std::string> refused(4);
  std::vector<std::string> verified(4, "not run");
  per_rank(4, [&](std::int64_t rank) {
    StreamGuard stream;
    NcclCommunicator comm(mesh, rank, id, rank_options(rank, stream.s, 20000));
    cpu::set_capturing(stream.s, true);  // capturing before the groups exist: refused, nothing split
    try {
      const Executor ex(p, comm);
    } catch (const InputError& e) {
      refused[static_cast<std::size_t>(rank)] = e.what();
    }
    cpu::set_capturing(stream.s, false);
    const Executor ex(p, comm);  // prepared outside capture
    cpu::set_capturing(stream.s, true);  // then captured: runs
    const auto in = seeded_input(p.src, rank);
    std::vector<std::byte> out(static_cast<std::size_t>(ex.output_bytes())), ws(static_cast<std::size_t>(ex.workspace_bytes()));
    ex.execute({in, out, ws});
    comm.wait();
    cpu::set_capturing(stream.s, false);
    verified[static_cast<std::size_t>(rank)] = verify_rank_output(p.dst, rank, out);
  });
  for (int r = 0; r < 4; ++r) {
    CHECK_THAT(refused[static_cast<std::size_t>(r)], Catch::Matchers::Contains("before capturing"));
    CHECK(verified[static_cast<std::size_t>(r)] == "");
  }
}

TEST_CASE("NCCL backend on the CPU stand-in: cross-mesh plans over three communicators per rank", "[nccl_cpu]") {
  // per world rank: the world's communicator for the transfer, and one per mesh it is on, all on
  // the rank's one stream (so the parts run in order on it)
  struct CrossCase {
    const char *ma, *pa, *mb, *pb;
    std::vector<std::int64_t> ra, rb;
    DType dtype;
  };
  const std::vector<CrossCase> cases{
      {"2x2", "P(sum)S(0)", "3", "S(1)", {0, 1, 2, 3}, {2, 3, 4}, DType::f32},
      {"dp=2,tp=2", "S(0)S(1)", "rep=2,tp=2", "RS(1)", {0, 1, 2, 3}, {4, 5, 6, 7}, DType::bf16},
      {"2", "R", "3", "S(0)", {0, 1}, {2, 3, 4}, DType::f64},
      {"4", "_S(0, 2)", "2x2", "S(0)S(0)", {0, 1, 2, 3}, {3, 2, 1, 0}, DType::i32},
      {"2x2", "S(0)[1]S(0)[0]", "5", "R", {4, 3, 2, 1}, {0, 1, 2, 3, 4}, DType::f32},
  };
  const std::int64_t W = 8;
  const Mesh world_mesh(std::vector<std::int64_t>{W});
  for (const auto& c : cases) {
    const Layout src = Layout::parse(Mesh::parse(c.ma), {600, 9}, c.dtype, c.pa);
    const Layout dst = Layout::parse(Mesh::parse(c.mb), {600, 9}, c.dtype, c.pb);
    CrossMeshOptions o;
    o.world_size = W;
    const auto plan = plan_cross_mesh(src, c.ra, dst, c.rb, CostModel::default_model(), o);
    const NcclUniqueId world_id = nccl_unique_id(), a_id = nccl_unique_id(), b_id = nccl_unique_id();
    std::vector<std::vector<std::byte>> outputs(static_cast<std::size_t>(dst.mesh().num_ranks()));
    per_rank(W, [&](std::int64_t w) {
      StreamGuard stream;
      NcclCommunicator world(world_mesh, w, world_id, rank_options(w, stream.s, 30000));
      const auto ia = std::find(c.ra.begin(), c.ra.end(), w), ib = std::find(c.rb.begin(), c.rb.end(), w);
      const std::int64_t ra = ia == c.ra.end() ? -1 : ia - c.ra.begin(), rb = ib == c.rb.end() ? -1 : ib - c.rb.begin();
      NcclOptions oa = rank_options(w, stream.s, 30000), ob = oa;
      std::unique_ptr<NcclCommunicator> on_a, on_b;
      if (ra >= 0) on_a = std::make_unique<NcclCommunicator>(src.mesh(), ra, a_id, oa);
      if (rb >= 0) on_b = std::make_unique<NcclCommunicator>(dst.mesh(), rb, b_id, ob);
      const CrossMeshExecutor ex(plan, world, on_a.get(), on_b.get());
      const auto in = ra >= 0 ? seeded_input(src, ra) : std::vector<std::byte>{};
      std::vector<std::byte> out(static_cast<std::size_t>(ex.output_bytes())), ws(static_cast<std::size_t>(ex.workspace_bytes()));
      ex.execute({in, out, ws});
      world.wait();
      if (on_a) on_a->wait();
      if (on_b) on_b->wait();
      if (rb >= 0) outputs[static_cast<std::size_t>(rb)] = std::move(out);
    });
    INFO(explain(plan));
    CHECK(verify_outputs(dst, outputs, src.mesh().num_ranks()) == "");
  }
}

// dtensor::device_memory (the in-process backend on device buffers: the code that checks the
// CUDA kernels on multi-rank plans on one GPU) on the stand-in's stream and kernels: every dtype,
// random layouts on a 2x3 mesh, every output checked against the oracle, buffers allocated,
// uploaded and downloaded through the Memory interface.
TEST_CASE("nccl stand-in: device_memory runs multi-rank plans through the kernels, every dtype", "[nccl_cpu]") {
  void* stream = cpu::stream_create();
  const std::vector<std::int64_t> mesh{2, 3};
  std::int64_t ran = 0;
  exec_check::for_each_random_pair(mesh, 25, 5, [&](DType dt, const auto& a, const auto& b, const auto& shape, const Plan& plan) {
    const auto err = exec_check::check(mesh, shape, dt, b, exec_check::run_on_memory(plan, device_memory(stream)));
    if (!err.empty()) FAIL(to_string(dt) << " " << oracle::text(a) << " -> " << oracle::text(b) << ": " << err);
    ++ran;
  });
  CHECK(ran > 200);
  cpu::stream_destroy(stream);
}

TEST_CASE("NCCL backend on the CPU stand-in: the GPU tests' hand-chained plans", "[nccl_cpu]") {
  // tests/gpu and bench_gpu run these plans on a real GPU, which CI does not have: here they run
  // on the stand-in, so a change to what the executor accepts shows in CI (a generous workspace
  // is refused unless the caller's bound admits it, as an H200 run found).
  struct Chain {
    const char* mesh;
    std::vector<std::int64_t> shape;
    std::vector<const char*> states;
    std::vector<StepKind> kinds;
  };
  const std::vector<const char*> six{"P(sum)R", "RR", "RS(1)", "RS(0)", "P(sum)S(0)", "S(1)S(0)", "S(1)R"};
  const std::vector<StepKind> six_kinds{StepKind::all_reduce, StepKind::local_chunk,    StepKind::all_to_all,
                                        StepKind::local_fill, StepKind::reduce_scatter, StepKind::all_gather};
  const std::vector<Chain> chains{{"1x1", {64, 32}, six, six_kinds},
                                  {"1x1", {1024, 1024}, six, six_kinds},
                                  {"1", {16}, {"P(sum)", "R"}, {StepKind::all_reduce}}};
  for (const auto& c : chains) {
    const Plan plan = plan_chain::chain(c.mesh, c.shape, DType::f32, c.states, c.kinds);
    INFO(plan.mesh().str() << " " << shape_str(c.shape) << " " << plan.trace());
    REQUIRE(plan.steps.size() == c.kinds.size());
    std::string refused, verified = "not run";
    per_rank(1, [&](std::int64_t rank) {
      StreamGuard stream;
      NcclCommunicator comm(plan.mesh(), rank, nccl_unique_id(), rank_options(rank, stream.s, 20000));
      try {
        const Executor ex(plan, comm);
      } catch (const InputError& e) {
        refused = e.what();
      }
      const Executor ex(plan, comm, plan_chain::chain_options(plan));
      const auto in = seeded_input(plan.src, rank);
      std::vector<std::byte> out(static_cast<std::size_t>(ex.output_bytes())), ws(static_cast<std::size_t>(ex.workspace_bytes()));
      ex.execute({in, out, ws});
      comm.wait();
      verified = verify_rank_output(plan.dst, rank, out);
    });
    CHECK_THAT(refused, Catch::Matchers::Contains("exceeds the workspace bound"));
    CHECK(verified == "");
  }
}

TEST_CASE("NCCL backend on the CPU stand-in: a batch with grouped and coalesced stages", "[nccl_cpu]") {
  // Grouped stages run the members' own collectives between ncclGroupStart and ncclGroupEnd on
  // the group's communicator; coalesced ones one collective over the staging buffer. Four ranks,
  // every tensor checked against the oracle.
  const Mesh mesh(std::vector<std::int64_t>{2, 2});
  using oracle::Pl;
  const std::vector<Pl> s0r{Pl{'S', 0}, Pl{'R'}}, psr{Pl{'P'}, Pl{'R'}}, rr{Pl{'R'}, Pl{'R'}}, rs1{Pl{'R'}, Pl{'S', 1}};
  struct T {
    std::vector<std::int64_t> shape;
    std::vector<Pl> from, to;
  };
  const std::vector<T> tensors{{{8, 6}, s0r, rr}, {{5, 3}, s0r, rr}, {{7, 4}, psr, rr}, {{9, 2}, psr, rr}, {{3, 8}, rs1, rr}, {{4, 5}, s0r, rr}};
  std::vector<std::pair<Layout, Layout>> pairs;
  for (const auto& t : tensors)
    pairs.emplace_back(Layout::parse(mesh, t.shape, DType::f32, oracle::text(t.from)), Layout::parse(mesh, t.shape, DType::f32, oracle::text(t.to)));
  CostModel grouping = CostModel::default_model();  // packing dear, launches dearer: grouped stages
  grouping.name = "grouping";
  grouping.copy_bw_GBps = 1e-3;
  grouping.intra.alpha_us = grouping.inter.alpha_us = 1000;
  CostModel packing = CostModel::default_model();  // copies free: coalesced stages
  packing.name = "packing";
  packing.copy_bw_GBps = 1e6;
  packing.intra.alpha_us = packing.inter.alpha_us = 1000;
  const auto before = cpu::counters();
  for (const CostModel* cm : {&grouping, &packing}) {
    const BatchPlan batch = plan_batch(pairs, *cm);
    bool grouped = false, coalesced = false;
    for (const auto& st : batch.stages) {
      grouped = grouped || st.grouped;
      coalesced = coalesced || st.coalesced;
    }
    INFO(explain(batch));
    CHECK((cm == &grouping ? grouped : coalesced));
    std::vector<std::vector<std::vector<std::byte>>> outputs(tensors.size(), std::vector<std::vector<std::byte>>(4));
    const NcclUniqueId id = nccl_unique_id();
    per_rank(4, [&](std::int64_t rank) {
      StreamGuard stream;
      NcclCommunicator comm(mesh, rank, id, rank_options(rank, stream.s, 30000));
      const BatchExecutor ex(batch, comm);
      std::vector<std::vector<std::byte>> ins, ws;
      std::vector<Buffers> bufs;
      for (std::size_t t = 0; t < tensors.size(); ++t) {
        ins.push_back(seeded_input(batch.plan(t).src, rank));
        auto& out = outputs[t][static_cast<std::size_t>(mesh.position(mesh.coord_of_rank(rank)))];
        out.resize(static_cast<std::size_t>(ex.executor(t).output_bytes()));
        ws.emplace_back(static_cast<std::size_t>(ex.executor(t).workspace_bytes()));
      }
      for (std::size_t t = 0; t < tensors.size(); ++t)
        bufs.push_back({ins[t], outputs[t][static_cast<std::size_t>(mesh.position(mesh.coord_of_rank(rank)))], ws[t]});
      std::vector<std::byte> staging(static_cast<std::size_t>(ex.staging_bytes()));
      ex.execute(bufs, staging);
      comm.wait();
    });
    for (std::size_t t = 0; t < tensors.size(); ++t) {
      const auto err = exec_check::check(mesh.shape(), tensors[t].shape, DType::f32, tensors[t].to, exec_check::Run{outputs[t]});
      INFO("tensor " << t);
      CHECK(err == "");
    }
  }
  CHECK(cpu::counters().invalid_usage == before.invalid_usage);  // every group ended, none ended twice
}

TEST_CASE("the copy kernel's arithmetic: its launch and each vector's offsets give the host's copy", "[nccl_cpu]") {
  // What the device kernel computes (comm/nccl/strided_copy.hpp), run here thread by thread as
  // its grid-stride loop schedules the vectors: every vector width (the base offset decides it),
  // 1 to 4 dims, runs of 8 bytes to 4 KiB; each destination vector written once, the bytes equal
  // host_memory().copy_strided's, and the 32-bit indices' offsets equal the 64-bit ones.
  // the vectors thread t of a launch `stride` threads wide takes, in the kernel's order
  auto thread_vectors = [](std::int64_t t, std::int64_t total, std::int64_t stride, auto&& take) {
    for (std::int64_t first = t; first < total; first += stride * cuda::kCopyUnroll)
      for (int u = 0; u < cuda::kCopyUnroll && first + u * stride < total; ++u) take(first + u * stride);
  };
  std::mt19937_64 rng(11);
  int checked = 0, widths = 0;
  for (const auto& sc : strided_cases::cases({{4096, {16, 8}}, {1024, {30, 7}}, {1000, {5, 6, 7}}, {999, {33, 2}},
                                              {65, {60, 50}}, {16, {100, 50}}, {1040, {3, 2, 2, 5}}, {4096, {1}},
                                              {2048, {65}}, {8, {9, 10, 11}}, {24, {7, 3}}})) {
    const std::int64_t off = sc.off, bytes = sc.bytes;
    // 16-byte-aligned buffers, the copy starting `off` bytes in
    std::vector<std::uint64_t> src_words(static_cast<std::size_t>((bytes + off) / 8 + 2)), want_words(src_words.size()),
        got_words(src_words.size());
    for (auto& w : src_words) w = rng();
    auto* src = reinterpret_cast<std::byte*>(src_words.data()) + off;
    auto* want = reinterpret_cast<std::byte*>(want_words.data()) + off;
    auto* got = reinterpret_cast<std::byte*>(got_words.data()) + off;
    host_memory().copy_strided(want, src, sc.run, sc.count, sc.dst_stride, sc.src_stride);
    const cuda::StridedCopy c = cuda::strided(sc.run, sc.count, sc.dst_stride, sc.src_stride);
    const int vec = cuda::copy_vector_bytes(c, reinterpret_cast<std::uintptr_t>(got), reinterpret_cast<std::uintptr_t>(src));
    REQUIRE(sc.run % vec == 0);
    REQUIRE(reinterpret_cast<std::uintptr_t>(got) % static_cast<std::uintptr_t>(vec) == 0);
    widths |= vec;
    const std::int64_t per_run = sc.run / vec, total = per_run * sc.runs;
    REQUIRE(cuda::copy_fits_32(total));
    const std::int64_t stride = cuda::copy_blocks(total) * cuda::kCopyThreads;
    std::vector<std::uint8_t> writes(static_cast<std::size_t>(total), 0);
    std::int64_t mismatched = 0;
    for (std::int64_t t = 0; t < stride; ++t)
      thread_vectors(t, total, stride, [&](std::int64_t x) {
        std::int64_t d = 0, s = 0, d64 = 0, s64 = 0;
        cuda::copy_vector_offsets<std::uint32_t>(c, static_cast<std::uint32_t>(x), static_cast<std::uint32_t>(per_run), vec, d, s);
        cuda::copy_vector_offsets<std::int64_t>(c, x, per_run, vec, d64, s64);
        if (d != d64 || s != s64 || d < 0 || d + vec > bytes || s < 0 || s + vec > bytes) {
          ++mismatched;
          return;
        }
        std::memcpy(got + d, src + s, static_cast<std::size_t>(vec));
        ++writes[static_cast<std::size_t>(d / vec)];
      });
    INFO("run " << sc.run << " bytes, " << sc.runs << " runs, offset " << off << ", " << vec << "-byte vectors");
    CHECK(mismatched == 0);
    CHECK(std::all_of(writes.begin(), writes.end(), [](std::uint8_t w) { return w == 1; }));
    CHECK(std::memcmp(got, want, static_cast<std::size_t>(bytes)) == 0);
    ++checked;
  }
  CHECK(checked == 55);
  CHECK(widths == (16 | 8 | 4 | 2 | 1));
  // A launch whose vectors outnumber its threads (the most blocks, four vectors a thread a
  // round): thread t takes t, t + stride, t + 2 stride, ... in rounds of four, up to the end.
  {
    const std::int64_t total = std::int64_t{3} << 28, stride = cuda::copy_blocks(total) * cuda::kCopyThreads;
    CHECK(stride * cuda::kCopyUnroll < total);
    for (const std::int64_t t : {std::int64_t{0}, std::int64_t{12345}, stride - 1}) {
      std::vector<std::int64_t> seen;
      thread_vectors(t, total, stride, [&](std::int64_t x) { seen.push_back(x); });
      const auto want_n = static_cast<std::size_t>((total - t + stride - 1) / stride);
      REQUIRE(seen.size() == want_n);
      for (std::size_t j = 0; j < seen.size(); ++j) CHECK(seen[j] == t + static_cast<std::int64_t>(j) * stride);
    }
  }
  // The 32-bit limit: 2^30 vectors run with 32-bit indices (offsets past 4 GiB stay exact), one
  // more with 64-bit ones; the last vectors' offsets agree either way.
  const std::int64_t n = std::int64_t{1} << 30;
  const std::vector<std::int64_t> count{n / 1024, 1024}, ds{16 * 1024 * 3, 16}, ss{16, 16 * (n / 1024)};
  const cuda::StridedCopy big = cuda::strided(16, count, ds, ss);
  CHECK(cuda::copy_vector_bytes(big, 0, 0) == 16);
  CHECK(cuda::copy_fits_32(n));
  CHECK_FALSE(cuda::copy_fits_32(n + 1));
  CHECK(cuda::copy_blocks(n) == cuda::kCopyMaxBlocks);
  for (const std::int64_t x : {std::int64_t{0}, n / 2 + 12345, n - 1025, n - 1}) {
    std::int64_t d = 0, s = 0, d64 = 0, s64 = 0;
    cuda::copy_vector_offsets<std::uint32_t>(big, static_cast<std::uint32_t>(x), 1u, 16, d, s);
    cuda::copy_vector_offsets<std::int64_t>(big, x, 1, 16, d64, s64);
    CHECK(d == d64);
    CHECK(s == s64);
    CHECK(d == (x / 1024) * ds[0] + (x % 1024) * ds[1]);  // past 2^32 for the last ones
    CHECK(s == (x / 1024) * ss[0] + (x % 1024) * ss[1]);
  }
  // one run of 2^30 16-byte vectors (16 GiB): the offset within the run passes 2^32 bytes
  const std::vector<std::int64_t> one{1}, zero{0};
  const cuda::StridedCopy long_run = cuda::strided(16 * n, one, zero, zero);
  for (const std::int64_t x : {std::int64_t{0}, n / 3, n - 1}) {
    std::int64_t d = 0, s = 0;
    cuda::copy_vector_offsets<std::uint32_t>(long_run, static_cast<std::uint32_t>(x), static_cast<std::uint32_t>(n), 16, d, s);
    CHECK(d == 16 * x);
    CHECK(s == 16 * x);
  }
}

TEST_CASE("NCCL backend on the CPU stand-in: ragged plans (grouped send/recv of per-rank counts)", "[nccl_cpu]") {
  // Random pairs with a RaggedShard side (Partial among the plain sources), as ragged plans on
  // the NCCL host logic: the exchanges' transfers and the ordinary stages' collectives.
  std::mt19937_64 rng(5301);
  std::int64_t verified = 0;
  for (const auto& mesh : {Mesh(std::vector<std::int64_t>{4}), Mesh(std::vector<std::int64_t>{2, 2}, {}, {3, 1, 0, 2}),
                           Mesh(std::vector<std::int64_t>{2, 2, 2})}) {
    struct Pair {
      RaggedLayout src, dst;
    };
    std::vector<Pair> pairs;
    while (pairs.size() < 24) {
      const int nd = 1 + static_cast<int>(rng() % 3);
      std::vector<std::int64_t> shape;
      for (int d = 0; d < nd; ++d) shape.push_back(1 + static_cast<std::int64_t>(rng() % 6));
      const auto r = ragged_cases::random_ragged(mesh.shape(), nd, rng);
      if (!ragged_cases::valid(mesh.shape(), shape, r)) continue;
      const auto p = ragged_cases::random_plain(mesh.shape(), nd, rng, pairs.size() % 2 == 0);
      const DType dt = pairs.size() % 3 == 0 ? DType::bf16 : DType::f32;
      const auto rl = RaggedLayout::parse(mesh, shape, dt, ragged_cases::text(r));
      const auto pl = RaggedLayout::parse(mesh, shape, dt, ragged_cases::text(p));
      if (pairs.size() % 2 == 0) pairs.push_back({pl, rl});  // the plain side may hold a Partial source
      else pairs.push_back({rl, pl});  // drawn without Partial: verified rank by rank
    }
    std::vector<std::vector<std::string>> errors(pairs.size(), std::vector<std::string>(static_cast<std::size_t>(mesh.num_ranks())));
    const NcclUniqueId id = nccl_unique_id();
    per_rank(mesh.num_ranks(), [&](std::int64_t rank) {
      StreamGuard stream;
      NcclCommunicator comm(mesh, rank, id, rank_options(rank, stream.s, 30000));
      for (std::size_t i = 0; i < pairs.size(); ++i) {
        const RaggedPlan plan = plan_ragged(pairs[i].src, pairs[i].dst, CostModel::default_model());
        const RaggedExecutor ex(plan, comm);
        const auto in = seeded_input(pairs[i].src, rank);
        std::vector<std::byte> out(static_cast<std::size_t>(ex.output_bytes())), ws(static_cast<std::size_t>(ex.workspace_bytes()));
        ex.execute({in, out, ws});
        comm.wait();
        errors[i][static_cast<std::size_t>(rank)] = verify_rank_output(pairs[i].dst, rank, out);
      }
    });
    for (std::size_t i = 0; i < pairs.size(); ++i)
      for (const auto& e : errors[i]) {
        INFO(mesh.str() << " " << pairs[i].src.str() << " -> " << pairs[i].dst.placements_str());
        CHECK(e == "");
        ++verified;
      }
  }
  CHECK(verified == 24 * (4 + 4 + 8));
}
