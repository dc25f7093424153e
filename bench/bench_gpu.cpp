// GPU benchmarks (need a GPU; built wherever NCCL is found):
//  - pack/unpack kernel bandwidth: the executor's unpack of an all_gather on a non-leading dim
//    (S(1) -> R, 8192x8192 f32, 8 peers) against cudaMemcpy device-to-device of the same bytes;
//  - host overhead per executed step: execute() on a 6-step plan over NCCL (1-rank mesh);
//  - CUDA-graph replay versus eager issue of the same plan;
//  - the strided copy at run lengths 2, 4, 8, 16, 64 and 256 bytes (256 MiB moved each), and the
//    device reduction (sum of 2 inputs, 64 Mi elements) for every dtype that reduces on the
//    device: scripts/gpu-run.sh prints each as a ratio to the D2D copy of the same bytes.
#include <benchmark/benchmark.h>

#include <string>

#include "dtensor/memory.hpp"
#include "dtensor/nccl.hpp"
#include "gpu/gpu_util.hpp"

using namespace dtensor;
using namespace gpu_util;

namespace {

cudaStream_t the_stream() {
  static cudaStream_t s = [] {
    cudaStream_t x;
    ck(cudaStreamCreate(&x));
    return x;
  }();
  return s;
}

// Device time of `f` (issued on the stream) per iteration, with CUDA events.
template <typename F>
void time_device(benchmark::State& st, F&& f) {
  cudaEvent_t a, b;
  ck(cudaEventCreate(&a));
  ck(cudaEventCreate(&b));
  for (auto _ : st) {
    ck(cudaEventRecord(a, the_stream()));
    f();
    ck(cudaEventRecord(b, the_stream()));
    ck(cudaEventSynchronize(b));
    float ms = 0;
    ck(cudaEventElapsedTime(&ms, a, b));
    st.SetIterationTime(ms / 1e3);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
}

constexpr std::int64_t kRows = 8192, kCols = 8192, kPeers = 8;

void BM_unpack_kernel(benchmark::State& st) {
  const auto mem = device_memory(the_stream());
  const std::int64_t bytes = kRows * kCols * 4;
  DeviceBuffer src(static_cast<std::size_t>(bytes)), dst(static_cast<std::size_t>(bytes));
  // recv buffer [peer][row][col/8] -> output [row][col]: one strided copy (rows x peers runs)
  const std::int64_t run = kCols / kPeers * 4;
  const std::vector<std::int64_t> count{kRows, kPeers}, ds{kCols * 4, run}, ss{run, kRows * run};
  time_device(st, [&] { mem->copy_strided(dst.p, src.p, run, count, ds, ss); });
  st.SetBytesProcessed(st.iterations() * bytes);
}
BENCHMARK(BM_unpack_kernel)->UseManualTime()->Unit(benchmark::kMicrosecond);

void BM_memcpy_d2d(benchmark::State& st) {
  const std::int64_t bytes = kRows * kCols * 4;
  DeviceBuffer src(static_cast<std::size_t>(bytes)), dst(static_cast<std::size_t>(bytes));
  time_device(st, [&] { ck(cudaMemcpyAsync(dst.p, src.p, static_cast<std::size_t>(bytes), cudaMemcpyDeviceToDevice, the_stream())); });
  st.SetBytesProcessed(st.iterations() * bytes);
}
BENCHMARK(BM_memcpy_d2d)->UseManualTime()->Unit(benchmark::kMicrosecond);

// The strided copy at one run length: runs of `run` bytes gathered from a source whose runs are
// two apart (every other run), so source and destination differ in layout as an unpack's do.
void BM_strided_copy(benchmark::State& st) {
  const auto mem = device_memory(the_stream());
  const std::int64_t run = st.range(0), bytes = std::int64_t{256} << 20, runs = bytes / run;
  DeviceBuffer src(static_cast<std::size_t>(2 * bytes)), dst(static_cast<std::size_t>(bytes));
  const std::vector<std::int64_t> count{runs}, ds{run}, ss{2 * run};
  time_device(st, [&] { mem->copy_strided(dst.p, src.p, run, count, ds, ss); });
  st.SetBytesProcessed(st.iterations() * bytes);
}
BENCHMARK(BM_strided_copy)->Arg(2)->Arg(4)->Arg(8)->Arg(16)->Arg(64)->Arg(256)->UseManualTime()->Unit(benchmark::kMicrosecond);

// The device reduction out = a + b over 64 Mi elements of one dtype; bytes processed: the output's
// (the D2D ratio then reads as output bandwidth against copy bandwidth).
void BM_reduce(benchmark::State& st) {
  const auto dtype = static_cast<DType>(st.range(0));
  const auto mem = device_memory(the_stream());
  if (!mem->supports(Collective::all_reduce, dtype, ReduceOp::sum)) {
    st.SkipWithError("no device sum for this dtype");
    return;
  }
  const std::int64_t n = std::int64_t{64} << 20, bytes = n * static_cast<std::int64_t>(itemsize(dtype));
  DeviceBuffer a(static_cast<std::size_t>(bytes)), b(static_cast<std::size_t>(bytes)), out(static_cast<std::size_t>(bytes));
  const void* const in[] = {a.p, b.p};
  time_device(st, [&] { mem->reduce(dtype, ReduceOp::sum, out.p, in, n); });
  st.SetBytesProcessed(st.iterations() * bytes);
  st.SetLabel(std::string(to_string(dtype)));
}
void reduce_args(benchmark::internal::Benchmark* b) {
  for (const DType d : kAllDTypes) b->Arg(static_cast<std::int64_t>(d));
}
BENCHMARK(BM_reduce)->Apply(reduce_args)->UseManualTime()->Unit(benchmark::kMicrosecond);

struct NcclFixture {
  Plan plan;
  std::unique_ptr<NcclCommunicator> comm;
  std::unique_ptr<Executor> exec;
  std::unique_ptr<DeviceBuffer> in, out, ws;
  Buffers b;
  NcclFixture()
      : plan(chain("1x1", {1024, 1024}, DType::f32, {"P(sum)R", "RR", "RS(1)", "RS(0)", "P(sum)S(0)", "S(1)S(0)", "S(1)R"},
                   {StepKind::all_reduce, StepKind::local_chunk, StepKind::all_to_all, StepKind::local_fill,
                    StepKind::reduce_scatter, StepKind::all_gather})) {
    NcclOptions o;
    o.device = 0;
    o.stream = the_stream();
    comm = std::make_unique<NcclCommunicator>(Mesh::parse("1x1"), 0, nccl_unique_id(), o);
    exec = std::make_unique<Executor>(plan, *comm, chain_options(plan));
    in = std::make_unique<DeviceBuffer>(static_cast<std::size_t>(exec->input_bytes()));
    out = std::make_unique<DeviceBuffer>(static_cast<std::size_t>(exec->output_bytes()));
    ws = std::make_unique<DeviceBuffer>(static_cast<std::size_t>(exec->workspace_bytes()));
    b = {std::span<const std::byte>(in->p, in->n), out->span(), ws->span()};
  }
};

void BM_host_overhead_per_step(benchmark::State& st) {
  NcclFixture f;
  for (auto _ : st) f.exec->execute(f.b);  // host time of issuing only
  ck(cudaStreamSynchronize(the_stream()));
  st.counters["steps"] = static_cast<double>(f.plan.steps.size());
  st.counters["us_per_step"] = benchmark::Counter(static_cast<double>(f.plan.steps.size()),
                                                  benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_host_overhead_per_step)->Unit(benchmark::kMicrosecond);

void BM_eager(benchmark::State& st) {
  NcclFixture f;
  time_device(st, [&] { f.exec->execute(f.b); });
}
BENCHMARK(BM_eager)->UseManualTime()->Unit(benchmark::kMicrosecond);

void BM_graph_replay(benchmark::State& st) {
  NcclFixture f;
  cudaGraph_t g;
  cudaGraphExec_t ge;
  ck(cudaStreamBeginCapture(the_stream(), cudaStreamCaptureModeThreadLocal));
  f.exec->execute(f.b);
  ck(cudaStreamEndCapture(the_stream(), &g));
  ck(cudaGraphInstantiate(&ge, g, 0));
  time_device(st, [&] { ck(cudaGraphLaunch(ge, the_stream())); });
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
}
BENCHMARK(BM_graph_replay)->UseManualTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
