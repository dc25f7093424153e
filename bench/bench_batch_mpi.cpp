// Batched redistribution on real MPI processes (docs/batch.md, "Measurements"): one batch through
// the batch executor, against the same tensors' plans run one after another, and against FSDP2's
// way (copy every local shard into one flat buffer, one all_gather, copy every tensor out), all
// S(0) -> R on a 1-d mesh of every process, bf16. The variants run interleaved, each iteration
// timed from a barrier to the slowest rank's end; medians over the iterations.
//   mpirun -np 8 build/bench/bench_batch_mpi [--case small|layer] [--scale K] [--iters N]
// small: 64 tensors of 4096 elements. layer: one transformer layer of a 7B model (q, k, v, o
// 4096x4096, gate/up 11008x4096, down 4096x11008, two norms 4096), every dim but the norms'
// divided by --scale (default 4: the full layer holds ~3 GB per process, 8 of them exceed a
// 24 GiB machine).
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bench_args.hpp"
#include "dtensor/batch_executor.hpp"
#include "dtensor/error.hpp"
#include "dtensor/mpi.hpp"
#include "dtensor/executor.hpp"
#include "dtensor/verify.hpp"

using namespace dtensor;

namespace {

double now_us() { return MPI_Wtime() * 1e6; }

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int status = 0;
  try {
    std::string which = "small";
    int iters = 30, scale = 4;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      // a positive count, or one error naming the flag and its text
      auto count = [&](const char* flag) {
        const std::string t = argv[++i];
        char* end = nullptr;
        const long v = std::strtol(t.c_str(), &end, 10);
        if (t.empty() || *end != '\0' || v < 1 || v > 1000000)
          throw InputError(std::string(flag) + " " + quote_input(t) + ": expected a count from 1 to 1000000");
        return static_cast<int>(v);
      };
      if (a == "--case" && i + 1 < argc) which = argv[++i];
      else if (a == "--iters" && i + 1 < argc) iters = count("--iters");
      else if (a == "--scale" && i + 1 < argc) scale = count("--scale");
      else throw InputError("usage: bench_batch_mpi [--case small|layer] [--scale K] [--iters N]");
    }
    int size = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const Mesh mesh({size});
    MpiCommunicator comm(mesh);
    const std::int64_t rank = comm.rank();
    std::vector<std::vector<std::int64_t>> shapes;
    if (which == "small") {
      for (int i = 0; i < 64; ++i) shapes.push_back({4096});
    } else if (which == "layer") {
      const std::int64_t h = 4096 / scale, f = 11008 / scale;
      shapes = {{h, h}, {h, h}, {h, h}, {h, h}, {f, h}, {f, h}, {h, f}, {4096}, {4096}};
    } else {
      throw InputError("--case " + which + ": small or layer");
    }
    std::vector<std::pair<Layout, Layout>> pairs;
    for (const auto& s : shapes) pairs.emplace_back(Layout::parse(mesh, s, DType::bf16, "S(0)"), Layout::parse(mesh, s, DType::bf16, "R"));
    const auto cost = CostModel::default_model();
    const BatchPlan batch = plan_batch(pairs, cost);
    const BatchExecutor bex(batch, comm);
    std::vector<Executor> singles;
    for (std::size_t t = 0; t < batch.size(); ++t) singles.emplace_back(batch.plan(t), comm);
    const std::size_t T = pairs.size();
    std::vector<std::vector<std::byte>> in(T), out(T), ws(T);
    std::vector<Buffers> bufs(T);
    std::int64_t flat_in = 0, flat_total = 0;
    std::vector<std::int64_t> chunk(T);  // this rank's shard bytes (even shards: every rank the same)
    for (std::size_t t = 0; t < T; ++t) {
      in[t] = seeded_input(pairs[t].first, rank);
      out[t].resize(static_cast<std::size_t>(bex.executor(t).output_bytes()));
      ws[t].resize(static_cast<std::size_t>(std::max(bex.executor(t).workspace_bytes(), singles[t].workspace_bytes())));
      bufs[t] = {in[t], out[t], ws[t]};
      chunk[t] = static_cast<std::int64_t>(in[t].size());
      flat_in += chunk[t];
      flat_total += static_cast<std::int64_t>(out[t].size());
      if (static_cast<std::int64_t>(out[t].size()) != chunk[t] * size)
        throw InputError("the FSDP2 variant needs even shards: every tensor's dim 0 a multiple of the ranks");
    }
    std::vector<std::byte> staging(static_cast<std::size_t>(bex.staging_bytes()));
    std::vector<std::byte> flat_send(static_cast<std::size_t>(flat_in)), flat_recv(static_cast<std::size_t>(flat_in) * size);
    auto fsdp2 = [&] {  // copy-in, one all_gather, copy-out (rank r's flat chunk holds every tensor's shard)
      std::int64_t off = 0;
      for (std::size_t t = 0; t < T; ++t) {
        std::memcpy(flat_send.data() + off, in[t].data(), static_cast<std::size_t>(chunk[t]));
        off += chunk[t];
      }
      comm.all_gather(Group{{0}}, flat_send.data(), flat_recv.data(), flat_in / 2, DType::bf16);
      for (std::int64_t r = 0; r < size; ++r) {
        std::int64_t o = 0;
        for (std::size_t t = 0; t < T; ++t) {
          std::memcpy(out[t].data() + r * chunk[t], flat_recv.data() + r * flat_in + o, static_cast<std::size_t>(chunk[t]));
          o += chunk[t];
        }
      }
    };
    auto per_tensor = [&] {
      for (std::size_t t = 0; t < T; ++t) singles[t].execute(bufs[t]);
    };
    auto batched = [&] { bex.execute(bufs, staging); };
    auto timed = [&](auto&& fn) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = now_us();
      fn();
      double dt = now_us() - t0, slowest = 0;
      MPI_Allreduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      return slowest;
    };
    // every variant's outputs checked against the oracle, each from zeroed outputs
    std::string bad;
    for (const auto& [name, fn] : {std::pair<const char*, std::function<void()>>{"fsdp2", fsdp2}, {"per_tensor", per_tensor},
                                   {"batch", batched}}) {
      for (auto& o : out) std::fill(o.begin(), o.end(), std::byte{0});
      fn();
      for (std::size_t t = 0; t < T && bad.empty(); ++t)
        if (auto why = verify_rank_output(pairs[t].second, rank, out[t]); !why.empty()) bad = std::string(name) + ": " + why;
    }
    std::vector<double> tf, tp, tb;
    for (int i = 0; i < 3; ++i) timed(fsdp2), timed(per_tensor), timed(batched);  // warm-up
    for (int i = 0; i < iters; ++i) {
      tf.push_back(timed(fsdp2));
      tp.push_back(timed(per_tensor));
      tb.push_back(timed(batched));
    }
    int ok = bad.empty() ? 1 : 0, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (rank == 0) {
      const double f = bench::median(tf), p = bench::median(tp), b = bench::median(tb);
      std::printf("case=%s ranks=%d tensors=%zu bytes_per_rank_out=%lld collectives batch=%lld per_tensor=%lld verified=%s\n",
                  which.c_str(), size, T, static_cast<long long>(flat_total), static_cast<long long>(batch.collectives()),
                  static_cast<long long>(batch.separate_collectives()), all_ok ? "yes" : "NO");
      std::printf("median us (slowest rank, %d iterations): fsdp2 %.1f  per_tensor %.1f  batch %.1f\n", iters, f, p, b);
      std::printf("batch / fsdp2 = %.3f   per_tensor / batch = %.3f\n", b / f, p / b);
    }
    if (!all_ok) status = 1;
    if (!bad.empty()) std::fprintf(stderr, "rank %lld: %s\n", static_cast<long long>(rank), bad.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    status = 2;
  }
  MPI_Finalize();
  return status;
}
