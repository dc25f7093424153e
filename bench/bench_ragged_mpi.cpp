// A ragged gather on real MPI processes (docs/ragged.md, "Measurements"): RaggedShard -> R as the
// ragged plan dtensor chooses (its exchange sends each piece as it lies and receives it where it
// goes: no copies), against a padded gather (every piece copied into a buffer padded to the
// largest piece, one MPI all_gather, every real part copied out), which is what a collective
// without per-rank counts does. The variants run interleaved, each iteration timed from a barrier
// to the slowest rank's end; medians. Also printed: the plan dtensor chose and what its cost
// model predicts for both.
//   mpirun -np 8 build/bench/bench_ragged_mpi [--rows R] [--cols C] [--skew K] [--iters N]
// Units: rank i holds 1 + (i == 0 ? K - 1 : 0) units (rank 0 K times the others; K = 1 even).
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_args.hpp"
#include "dtensor/error.hpp"
#include "dtensor/mpi.hpp"
#include "dtensor/ragged_executor.hpp"
#include "dtensor/ragged_plan.hpp"
#include "dtensor/verify.hpp"

using namespace dtensor;

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int status = 0;
  try {
    long rows = 0, cols = 1024, skew = 8, iters = 30;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      auto count = [&](const char* flag) { return bench::count_arg(argc, argv, i, flag, 100000000); };
      if (a == "--rows") rows = count("--rows");
      else if (a == "--cols") cols = count("--cols");
      else if (a == "--skew") skew = count("--skew");
      else if (a == "--iters") iters = count("--iters");
      else throw InputError("unknown argument " + quote_input(a) + " (expected --rows, --cols, --skew, --iters)");
    }
    int world = 0, me = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    const Mesh mesh(std::vector<std::int64_t>{world});
    std::vector<std::int64_t> units(static_cast<std::size_t>(world), 1);
    units[0] = skew;
    const std::int64_t sum = skew + world - 1;
    if (rows == 0) rows = sum * 256;
    if (rows % sum != 0) throw InputError(fmt::format("--rows {} is not a multiple of the units' sum {}", rows, sum));
    std::string text = "RaggedShard((0,),(";
    for (int r = 0; r < world; ++r) text += fmt::format("{}{}", r ? "," : "", units[static_cast<std::size_t>(r)]);
    text += "))";
    const RaggedLayout src = RaggedLayout::parse(mesh, {rows, cols}, DType::f32, text);
    const RaggedLayout dst(Layout::parse(mesh, {rows, cols}, DType::f32, "R"));
    const CostModel cost = CostModel::default_model();
    const RaggedPlan plan = plan_ragged(src, dst, cost);
    MpiCommunicator comm(mesh);
    const RaggedExecutor exec(plan, comm);
    const std::vector<std::int64_t> c{me};
    const auto in = seeded_input(src, me);
    std::vector<std::byte> out(static_cast<std::size_t>(exec.output_bytes())), ws(static_cast<std::size_t>(exec.workspace_bytes()));
    // the padded gather's buffers: this rank's piece padded to the largest, then every rank's
    const std::int64_t s = 4, piece_max = rows * cols / sum * skew;
    std::vector<std::byte> padded(static_cast<std::size_t>(piece_max * s)), gathered(static_cast<std::size_t>(piece_max * s * world));
    std::vector<std::byte> out_padded(out.size());
    auto padded_gather = [&] {
      std::memcpy(padded.data(), in.data(), in.size());
      comm.all_gather(Group{{0}}, padded.data(), gathered.data(), piece_max, DType::f32);
      comm.synchronize();
      std::int64_t at = 0;
      for (int r = 0; r < world; ++r) {
        const auto n = src.local_numel(std::vector<std::int64_t>{r}) * s;
        std::memcpy(out_padded.data() + at, gathered.data() + static_cast<std::ptrdiff_t>(r) * piece_max * s, static_cast<std::size_t>(n));
        at += n;
      }
    };
    // both right first
    exec.execute({in, out, ws});
    padded_gather();
    const bool ok = verify_rank_output(dst, me, out).empty() && verify_rank_output(dst, me, out_padded).empty();
    std::vector<double> t_ragged, t_padded;
    for (long it = 0; it < iters; ++it) {
      for (int v = 0; v < 2; ++v) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        if (v == 0) exec.execute({in, out, ws});
        else padded_gather();
        double dt = (MPI_Wtime() - t0) * 1e6, worst = 0;
        MPI_Allreduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        (v == 0 ? t_ragged : t_padded).push_back(worst);
      }
    }
    // the model's view of the padded gather: one all_gather of world * piece_max, the copies in and out
    Traffic t;
    t.collective = Collective::all_gather;
    t.group = world;
    t.bytes = static_cast<double>(world * piece_max * s);
    t.copy_bytes = static_cast<double>((piece_max + rows * cols) * s);
    const double padded_model = cost.time(t).total_us();
    if (me == 0) {
      std::printf("ragged gather %s -> R, %ldx%ld f32 on %d MPI ranks (units %s), %ld iterations, verified=%s\n", text.c_str(), rows,
                  cols, world, fmt::format("{}", fmt::join(units, ",")).c_str(), iters, ok ? "yes" : "NO");
      std::printf("the model's choice: %s  (%.1f us)\n", plan.trace().c_str(), plan.total_cost_us);
      std::printf("%s", plan.explain().c_str());
      std::printf("the model's padded gather: %.1f us (all_gather of %lld bytes + %lld bytes copied)\n", padded_model,
                  static_cast<long long>(t.bytes), static_cast<long long>(t.copy_bytes));
      const double r = bench::median(t_ragged), p = bench::median(t_padded);
      std::printf("measured median: ragged %.1f us, padded %.1f us, padded / ragged %.2f\n", r, p, p / r);
    }
    status = ok ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    status = 2;
  }
  MPI_Finalize();
  return status;
}
