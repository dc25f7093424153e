// GPU tests: run where a GPU is present (CTest label "gpu"). The executor's full set on the
// device-simulated backend (ranks as device buffers, so the CUDA kernels run multi-rank plans),
// NCCL itself on a 1-rank mesh, and CUDA-graph capture/replay.
#include <catch2/catch.hpp>
#include <chrono>
#include <random>

#include "../exec_check.hpp"
#include "dtensor/error.hpp"
#include "dtensor/nccl.hpp"
#include "dtensor/executor.hpp"
#include "dtensor/verify.hpp"
#include "gpu_util.hpp"
#include "../strided_cases.hpp"

using namespace dtensor;
using namespace gpu_util;

namespace {

// Every rank of the plan as device buffers on this GPU, run by the all-ranks driver on the
// in-process backend with device memory (the CUDA kernels do every copy and reduction).
exec_check::Run run_on_device(const Plan& plan, cudaStream_t stream) {
  return exec_check::run_on_memory(plan, device_memory(stream));
}

std::int64_t stride() {
  if (const char* s = std::getenv("DTENSOR_EXHAUSTIVE_STRIDE")) return std::max<std::int64_t>(1, std::atoll(s));
  return 1;
}

}  // namespace

TEST_CASE("GPU: executor full set on the device-simulated backend", "[gpu]") {
  cudaStream_t stream;
  ck(cudaStreamCreate(&stream));
  std::int64_t cases = 0, ran = 0;
  const auto st = stride();
  for (const auto& mesh : {std::vector<std::int64_t>{4}, std::vector<std::int64_t>{2, 2}, std::vector<std::int64_t>{2, 3}}) {
    for (int nd = 1; nd <= 2; ++nd) {
      const auto layouts = oracle::layouts(static_cast<int>(mesh.size()), nd, exec_check::placement_options(nd));
      exec_check::for_each_shape(nd, {0, 1, 3, 5, 8}, [&](const std::vector<std::int64_t>& shape) {
        for (EdgeSet es : {EdgeSet::all, EdgeSet::pytorch}) {
          PlanOptions o;
          o.edges = es;
          o.runner_up = false;
          for (const auto& a : layouts)
            for (const auto& b : layouts) {
              if (cases++ % st != 0) continue;
              Plan plan = plan_redistribution(Layout::parse(Mesh(mesh), shape, DType::f64, oracle::text(a)),
                                              Layout::parse(Mesh(mesh), shape, DType::f64, oracle::text(b)),
                                              CostModel::default_model(), o);
              for (DType dt : {DType::f64, DType::i64}) {
                if (exec_check::refuses_avg(a, dt) || exec_check::refuses_avg(b, dt)) continue;  // no integer average
                plan.src = Layout(plan.mesh(), plan.shape(), dt, plan.src.sharding());
                plan.dst = Layout(plan.mesh(), plan.shape(), dt, plan.dst.sharding());
                const auto err = exec_check::check(mesh, shape, dt, b, run_on_device(plan, stream));
                if (!err.empty()) FAIL(oracle::text(a) << " -> " << oracle::text(b) << " via " << plan.trace() << ": " << err);
                ++ran;
              }
            }
        }
      });
    }
  }
  CHECK(ran > 0);
  cudaStreamDestroy(stream);
}

TEST_CASE("GPU: every dtype through the kernels (bf16 f16 fp8 included)", "[gpu]") {
  cudaStream_t stream;
  ck(cudaStreamCreate(&stream));
  const std::vector<std::int64_t> mesh{2, 3};
  exec_check::for_each_random_pair(mesh, 100, 5, [&](DType dt, const auto& a, const auto& b, const auto& shape, const Plan& p) {
    const auto err = exec_check::check(mesh, shape, dt, b, run_on_device(p, stream));
    if (!err.empty()) FAIL(to_string(dt) << " " << oracle::text(a) << " -> " << oracle::text(b) << ": " << err);
  });
  cudaStreamDestroy(stream);
}

TEST_CASE("GPU: strided copies of long and short runs equal the host's", "[gpu]") {
  // The pack/unpack kernel against host_memory().copy_strided: every vector width (the base
  // offset decides it), runs from 8 bytes to 4 KiB, 1 to 4 dims, a launch of 19.5 M one-byte
  // vectors (65 B x 300,000 runs: four a thread), the output dense in one dim order and the input
  // in another (an all_gather's unpack, an all_to_all's pack; tests/strided_cases.hpp). The
  // grid-stride loop's later rounds (over 67 M vectors) are checked on the CPU
  // (tests/test_nccl_cpu.cpp, the copy kernel's arithmetic).
  cudaStream_t stream;
  ck(cudaStreamCreate(&stream));
  const auto dev = device_memory(stream);
  std::mt19937_64 rng(7);
  int checked = 0;
  for (const auto& c : strided_cases::cases({{4096, {64, 8}}, {1024, {300, 7}}, {1000, {5, 6, 7}}, {999, {33, 2}},
                                             {65, {600, 500}}, {16, {100, 50}}, {1040, {3, 2, 2, 5}}, {4096, {1}},
                                             {2048, {4097}}, {8, {9, 10, 11}}, {1600, {2, 2100}}})) {
    const std::int64_t off = c.off, bytes = c.bytes;
    std::vector<std::byte> host_src(static_cast<std::size_t>(bytes + off)), want(static_cast<std::size_t>(bytes + off), std::byte{0xAB});
    for (auto& b : host_src) b = static_cast<std::byte>(rng());
    DeviceBuffer src(host_src.size()), dst(want.size());
    ck(cudaMemcpy(src.p, host_src.data(), host_src.size(), cudaMemcpyHostToDevice));
    ck(cudaMemcpy(dst.p, want.data(), want.size(), cudaMemcpyHostToDevice));
    host_memory().copy_strided(want.data() + off, host_src.data() + off, c.run, c.count, c.dst_stride, c.src_stride);
    dev->copy_strided(dst.p + off, src.p + off, c.run, c.count, c.dst_stride, c.src_stride);
    dev->wait();
    std::vector<std::byte> got(want.size());
    ck(cudaMemcpy(got.data(), dst.p, got.size(), cudaMemcpyDeviceToHost));
    INFO("run " << c.run << " bytes, " << c.runs << " runs, offset " << off);
    REQUIRE(got == want);
    ++checked;
  }
  CHECK(checked == 55);
  cudaStreamDestroy(stream);
}

TEST_CASE("GPU: NCCL on a 1-rank mesh and CUDA-graph capture/replay", "[gpu]") {
  cudaStream_t stream;
  ck(cudaStreamCreate(&stream));
  const NcclUniqueId id = nccl_unique_id();
  NcclOptions opt;
  opt.device = 0;
  opt.stream = stream;
  NcclCommunicator comm(Mesh::parse("1x1"), 0, id, opt);
  // real collectives over groups of one rank: all_gather, all_to_all, all_reduce, reduce_scatter
  const Plan plan = chain("1x1", {64, 32}, DType::f32, {"P(sum)R", "RR", "RS(1)", "RS(0)", "P(sum)S(0)", "S(1)S(0)", "S(1)R"},
                          {StepKind::all_reduce, StepKind::local_chunk, StepKind::all_to_all, StepKind::local_fill,
                           StepKind::reduce_scatter, StepKind::all_gather});
  const Executor exec(plan, comm, chain_options(plan));  // exchanges the plan hash over NCCL, prepares the groups
  const auto host_in = seeded_input(plan.src, 0);
  DeviceBuffer in(host_in.size()), out(static_cast<std::size_t>(exec.output_bytes())),
      ws(static_cast<std::size_t>(exec.workspace_bytes()));
  ck(cudaMemcpy(in.p, host_in.data(), host_in.size(), cudaMemcpyHostToDevice));
  const Buffers b{std::span<const std::byte>(in.p, in.n), out.span(), ws.span()};
  auto check_out = [&] {
    std::vector<std::byte> host(out.n);
    ck(cudaMemcpy(host.data(), out.p, out.n, cudaMemcpyDeviceToHost));
    return verify_rank_output(plan.dst, 0, host);
  };
  exec.execute(b);
  comm.wait();
  CHECK(check_out() == "");

  // capture the whole plan into a CUDA graph and replay it
  ck(cudaMemset(out.p, 0, out.n));
  cudaGraph_t graph;
  cudaGraphExec_t graph_exec;
  ck(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  exec.execute(b);
  ck(cudaStreamEndCapture(stream, &graph));
  ck(cudaGraphInstantiate(&graph_exec, graph, 0));
  for (int i = 0; i < 3; ++i) ck(cudaGraphLaunch(graph_exec, stream));
  ck(cudaStreamSynchronize(stream));
  CHECK(check_out() == "");
  cudaGraphExecDestroy(graph_exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

TEST_CASE("GPU: a borrowed ncclComm_t and local_world", "[gpu]") {
  auto world = NcclCommunicator::local_world(Mesh::parse("1"), {0});
  REQUIRE(world.size() == 1);
  const Plan plan = chain("1", {16}, DType::f32, {"P(sum)", "R"}, {StepKind::all_reduce});
  const Executor exec(plan, *world[0], chain_options(plan));
  DeviceBuffer in(64), out(64), ws(static_cast<std::size_t>(std::max<std::int64_t>(exec.workspace_bytes(), 1)));
  ck(cudaMemset(in.p, 0, 64));
  exec.execute({std::span<const std::byte>(in.p, in.n), out.span(), ws.span()});
  world[0]->wait();
}

TEST_CASE("GPU: a duplicate-GPU mesh is rejected before NCCL", "[gpu]") {
  NcclOptions opt;
  opt.device_uuids = {"GPU-aaaa", "GPU-aaaa"};
  CHECK_THROWS_WITH(NcclCommunicator(Mesh::parse("2"), 0, nccl_unique_id(), opt),
                    Catch::Matchers::Contains("both on GPU GPU-aaaa"));
}
