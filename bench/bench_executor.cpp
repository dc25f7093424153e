// The executor's local pack/unpack on host memory, against a plain memcpy of the same bytes:
// one all_gather on a non-leading dim (S(1) -> R) and one all_to_all (S(0) -> S(1)), 8192x8192
// f32 on 8 ranks. The collectives themselves are left out (a communicator whose collectives move
// nothing, with the simulated backend's local copy routines), so the figure is the executor's
// own overhead: pack/unpack bytes per second, compared with memcpy of those bytes.
#include <benchmark/benchmark.h>

#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "dtensor/executor.hpp"
#include "dtensor/explore.hpp"
#include "dtensor/planner.hpp"
#include "dtensor/simulated.hpp"
#include "dtensor/simulated.hpp"
#include "dtensor/verify.hpp"

using namespace dtensor;

namespace {

// A communicator whose collectives move nothing and whose local operations do nothing either
// (NullComm below uses it as is: the executor's own host work alone).
class NoOpComm : public Communicator {
 public:
  NoOpComm(Mesh m, std::int64_t rank) : mesh_(std::move(m)), rank_(rank) {}
  const Mesh& mesh() const override { return mesh_; }
  std::int64_t rank() const override { return rank_; }
  std::vector<std::uint64_t> exchange(std::uint64_t v) override {
    return std::vector<std::uint64_t>(static_cast<std::size_t>(mesh_.num_ranks()), v);
  }
  bool supports(Collective, DType, ReduceOp) const override { return true; }
  void all_gather(const Group&, const void*, void*, std::int64_t, DType) override {}
  void reduce_scatter(const Group&, const void*, void*, std::int64_t, DType, ReduceOp) override {}
  void all_reduce(const Group&, const void*, void*, std::int64_t, DType, ReduceOp) override {}
  void all_to_all(const Group&, const void*, void*, std::int64_t, DType) override {}
  void send_recv(std::span<const Transfer>, std::span<const Transfer>, DType) override {}
  void synchronize() override {}
  Memory& memory() override { return none_; }

 private:
  // Local operations that do nothing.
  class NoMemory final : public Memory {
   public:
    void copy(void*, const void*, std::int64_t) override {}
    void fill(void*, DType, std::int64_t, double) override {}
    void copy_strided(void*, const void*, std::int64_t, std::span<const std::int64_t>, std::span<const std::int64_t>,
                      std::span<const std::int64_t>) override {}
  } none_;
  Mesh mesh_;
  std::int64_t rank_;
};

// Local copies as the simulated backend does them; collectives move no data.
class LocalOnly final : public NoOpComm {
 public:
  using NoOpComm::NoOpComm;
  Memory& memory() override { return host_memory(); }
};

// The single-step plan of `kind` from `from` to `to` (the planner may prefer a longer path).
Plan one_step(const char* from, const char* to, StepKind kind) {
  const Layout a = Layout::parse(Mesh::parse("8"), {8192, 8192}, DType::f32, from);
  const Layout b = Layout::parse(Mesh::parse("8"), {8192, 8192}, DType::f32, to);
  Plan p = plan_redistribution(a, b, CostModel::default_model());
  const RedistributionGraph g(a, b, CostModel::default_model(), EdgeSet::all);
  for (const auto& e : g.edges(a.sharding()))
    if (e.to == b.sharding() && e.step.kind == kind) {
      p.steps = {e.step};
      p.total_cost_us = e.step.cost_us;
      p.peak_bytes = e.step.peak_bytes;
      lower_buffers(p);
      return p;
    }
  throw std::runtime_error("no such step");
}

// Every rank's executor on its own communicator, run one after the other (no collectives).
struct Fixture {
  Plan plan;
  std::vector<std::unique_ptr<LocalOnly>> comms;
  std::vector<Executor> execs;
  std::vector<std::vector<std::byte>> in, out, ws;
  Fixture(const char* from, const char* to, StepKind kind) : plan(one_step(from, to, kind)) {
    for (std::int64_t r = 0; r < 8; ++r) {
      comms.push_back(std::make_unique<LocalOnly>(plan.mesh(), r));
      execs.emplace_back(plan, *comms.back());
      in.emplace_back(static_cast<std::size_t>(execs.back().input_bytes()), std::byte{1});
      out.emplace_back(static_cast<std::size_t>(execs.back().output_bytes()));
      ws.emplace_back(static_cast<std::size_t>(execs.back().workspace_bytes()));
    }
  }
  void run() {
    for (std::size_t r = 0; r < 8; ++r) execs[r].execute({in[r], out[r], ws[r]});
  }
};

void run_plan(benchmark::State& st, const char* from, const char* to, StepKind kind) {
  Fixture f(from, to, kind);
  std::int64_t copied = 0;
  for (const auto& s : f.plan.steps) copied += s.copy_bytes;
  for (auto _ : st) f.run();
  st.SetBytesProcessed(st.iterations() * copied * 8);
  st.SetLabel(f.plan.trace());
}

void BM_exec_allgather_dim1(benchmark::State& st) { run_plan(st, "S(1)", "R", StepKind::all_gather); }
void BM_exec_all_to_all(benchmark::State& st) { run_plan(st, "S(0)", "S(1)", StepKind::all_to_all); }

// The same local bytes as one plain memcpy per rank.
void memcpy_of(benchmark::State& st, const char* from, const char* to, StepKind kind) {
  Fixture f(from, to, kind);
  std::int64_t copied = 0;
  for (const auto& s : f.plan.steps) copied += s.copy_bytes;
  std::vector<std::byte> a(static_cast<std::size_t>(copied)), b(static_cast<std::size_t>(copied));
  for (auto _ : st)
    for (int r = 0; r < 8; ++r) {
      std::memcpy(b.data(), a.data(), a.size());
      benchmark::ClobberMemory();
    }
  st.SetBytesProcessed(st.iterations() * copied * 8);
}
void BM_memcpy_allgather_bytes(benchmark::State& st) { memcpy_of(st, "S(1)", "R", StepKind::all_gather); }
void BM_memcpy_all_to_all_bytes(benchmark::State& st) { memcpy_of(st, "S(0)", "S(1)", StepKind::all_to_all); }

// The in-process backend end to end on bf16 (4 ranks, 1024x11008): a reduction against a plain
// gather of the same tensor. The reduction decodes, adds in double and rounds every element.
struct SimFixture {
  Plan plan;
  SimulatedWorld world;
  std::vector<Executor> execs;
  std::vector<const Executor*> ptrs;
  std::vector<std::vector<std::byte>> in, out, ws;
  std::vector<Buffers> bufs;
  SimFixture(const char* from, const char* to)
      : plan(plan_redistribution(Layout::parse(Mesh::parse("4"), {1024, 11008}, DType::bf16, from),
                                 Layout::parse(Mesh::parse("4"), {1024, 11008}, DType::bf16, to), CostModel::default_model())),
        world(plan.mesh()) {
    execs.reserve(4);
    for (std::int64_t r = 0; r < 4; ++r) {
      execs.emplace_back(plan, world.communicator(r), ExecutorOptions{false});
      in.push_back(seeded_input(plan.src, r));
      out.emplace_back(static_cast<std::size_t>(execs.back().output_bytes()));
      ws.emplace_back(static_cast<std::size_t>(execs.back().workspace_bytes()));
    }
    for (std::size_t r = 0; r < 4; ++r) {
      ptrs.push_back(&execs[r]);
      bufs.push_back({in[r], out[r], ws[r]});
    }
  }
};
void BM_sim_bf16_reduce_scatter(benchmark::State& st) {
  SimFixture f("P(sum)", "S(0)");
  for (auto _ : st) execute_all_ranks(f.ptrs, f.world, f.bufs);
  st.SetBytesProcessed(st.iterations() * 1024 * 11008 * 2 * 4);  // every rank's full input is read
  st.SetLabel(f.plan.trace());
}
void BM_sim_bf16_all_gather(benchmark::State& st) {
  SimFixture f("S(0)", "R");
  for (auto _ : st) execute_all_ranks(f.ptrs, f.world, f.bufs);
  st.SetBytesProcessed(st.iterations() * 1024 * 11008 * 2 * 4);  // every rank's full output is written
  st.SetLabel(f.plan.trace());
}
BENCHMARK(BM_sim_bf16_reduce_scatter)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_sim_bf16_all_gather)->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK(BM_exec_allgather_dim1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_memcpy_allgather_bytes)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_exec_all_to_all)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_memcpy_all_to_all_bytes)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

// ---- the executor's own host work per step, with a communicator that does nothing at all (no
// collective, no copy): what execute() costs besides the vendor calls it makes. Target: <= 1 us
// per step for every step kind. Reported as time and retired instructions per step (Linux
// perf_event_open; left out where the machine has no hardware counter, as in some VMs).
using NullComm = NoOpComm;

class InstructionCounter {
 public:
  InstructionCounter() {
    perf_event_attr a{};
    a.type = PERF_TYPE_HARDWARE;
    a.size = sizeof a;
    a.config = PERF_COUNT_HW_INSTRUCTIONS;
    a.disabled = 1;
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    fd_ = static_cast<int>(syscall(SYS_perf_event_open, &a, 0, -1, -1, 0));
  }
  [[nodiscard]] bool available() const { return fd_ >= 0; }
  ~InstructionCounter() {
    if (fd_ >= 0) close(fd_);
  }
  void start() {
    if (fd_ < 0) return;
    ioctl(fd_, PERF_EVENT_IOC_RESET, 0);
    ioctl(fd_, PERF_EVENT_IOC_ENABLE, 0);
  }
  std::int64_t stop() {
    if (fd_ < 0) return 0;
    ioctl(fd_, PERF_EVENT_IOC_DISABLE, 0);
    std::int64_t n = 0;
    return read(fd_, &n, sizeof n) == static_cast<ssize_t>(sizeof n) ? n : 0;
  }

 private:
  int fd_ = -1;
};

void host_per_step(benchmark::State& st, const char* mesh_text, const char* from, const char* to, EdgeSet edges) {
  const Mesh mesh = Mesh::parse(mesh_text);
  PlanOptions o;
  o.edges = edges;
  const Plan p = plan_redistribution(Layout::parse(mesh, {64, 48}, DType::f32, from), Layout::parse(mesh, {64, 48}, DType::f32, to),
                                     CostModel::default_model(), o);
  NullComm comm(mesh, 1);
  const Executor ex(p, comm, ExecutorOptions{.check_plans_agree = false, .max_workspace_bytes = {}});
  std::vector<std::byte> in(static_cast<std::size_t>(ex.input_bytes())), out(static_cast<std::size_t>(ex.output_bytes())),
      ws(static_cast<std::size_t>(ex.workspace_bytes()));
  const Buffers b{in, out, ws};
  const auto steps = static_cast<double>(std::max<std::size_t>(1, p.steps.size()));
  InstructionCounter counter;
  std::int64_t instructions = 0, runs = 0;
  for (auto _ : st) {
    counter.start();
    ex.execute(b);
    instructions += counter.stop();
    ++runs;
  }
  st.counters["ns_per_step"] = benchmark::Counter(static_cast<double>(runs) * steps * 1e-9,
                                                  benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  if (counter.available())
    st.counters["instructions_per_step"] = static_cast<double>(instructions) / static_cast<double>(runs) / steps;
  st.SetLabel(p.trace());
}
BENCHMARK_CAPTURE(host_per_step, all_gather, "2x4", "S(0)R", "RR", EdgeSet::pytorch);
BENCHMARK_CAPTURE(host_per_step, reduce_scatter, "2x4", "P(sum)R", "S(0)R", EdgeSet::pytorch);
BENCHMARK_CAPTURE(host_per_step, all_reduce, "2x4", "P(sum)R", "RR", EdgeSet::pytorch);
BENCHMARK_CAPTURE(host_per_step, all_to_all, "2x4", "RS(0)", "RS(1)", EdgeSet::pytorch);
BENCHMARK_CAPTURE(host_per_step, local_chunk, "2x4", "RR", "S(0)R", EdgeSet::pytorch);
BENCHMARK_CAPTURE(host_per_step, direct, "2x4", "S(0)S(1)", "S(1)S(0)", EdgeSet::all);
BENCHMARK_CAPTURE(host_per_step, two_steps, "2x4", "S(0)S(1)", "RR", EdgeSet::pytorch);

BENCHMARK_MAIN();
