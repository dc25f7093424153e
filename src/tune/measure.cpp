// `dtensor tune measure`: the library's collectives timed over the intra- and inter-node groups
// of a mesh, written as nccl-tests logs so that `tune fit` reads them.
#include <algorithm>
#include <cstddef>
#include <memory>
#include <mutex>

#include <fmt/format.h>

#include "dtensor/error.hpp"
#include "dtensor/simulated.hpp"
#include "dtensor/tune.hpp"
#include "buffer.hpp"

namespace dtensor::tune {

std::vector<MeasuredLog> measure(Communicator& comm, const MeasureOptions& o, const std::function<double()>& now_us) {
  if (o.min_bytes < 1 || o.max_bytes < o.min_bytes || o.max_bytes > (std::int64_t{1} << 34))
    throw InputError(fmt::format("measure sizes {}:{} must satisfy 1 <= min <= max <= 16 GiB", o.min_bytes, o.max_bytes));
  if (o.iters < 1 || o.warmup < 0) throw InputError("measure needs at least one iteration and no negative warm-up");
  if (o.devices_per_host < 1) throw InputError("devices per host must be at least 1");
  const Mesh& mesh = comm.mesh();
  CostModel topo;
  topo.devices_per_host = o.devices_per_host;
  std::vector<int> intra, inter;
  for (int m = 0; m < mesh.ndim(); ++m)
    if (mesh.size(m) > 1) (topo.is_inter_host(mesh.shape(), m) ? inter : intra).push_back(m);
  // The inter link is timed over one inter-node mesh dim, the largest (the last of equals): the
  // planner's collectives run over one mesh dim at a time, and a curve is most exact at the group
  // size it was measured on (MPI's algorithms change with the group: recursive halving over 32
  // ranks does not scale to 8 by the ring's hops). Timing every inter dim together (one rank per
  // host) made 256 ranks' 8-rank reduce_scatters predicted 2.5x too fast, and at 1,024 ranks each
  // call spanned 128 hosts.
  if (inter.size() > 1) {
    int best = inter.front();
    for (int m : inter)
      if (mesh.size(m) >= mesh.size(best)) best = m;
    inter = {best};
  }
  const auto me = mesh.coord_of_rank(comm.rank());
  const DType dt = DType::f32;
  const std::int64_t s = 4;
  std::vector<MeasuredLog> out;
  for (const auto& [dims, link] : {std::pair{intra, "intra"}, std::pair{inter, "inter"}}) {
    if (dims.empty()) continue;
    const Group g{dims};
    comm.prepare(std::span<const Group>(&g, 1));  // backends that make groups ahead (torch.distributed)
    // the group's members, row-major over its dims, and this rank's position
    std::int64_t n = 1, pos = 0;
    for (int m : dims) {
      n *= mesh.size(m);
      pos = pos * mesh.size(m) + me[static_cast<std::size_t>(m)];
    }
    std::vector<std::int64_t> members;
    for (std::int64_t q = 0; q < n; ++q) {
      auto c = me;
      std::int64_t rem = q;
      for (std::size_t i = dims.size(); i-- > 0;) {
        c[static_cast<std::size_t>(dims[i])] = rem % mesh.size(dims[i]);
        rem /= mesh.size(dims[i]);
      }
      members.push_back(mesh.rank_at(c));
    }
    const std::int64_t next = members[static_cast<std::size_t>((pos + 1) % n)];
    const std::int64_t prev = members[static_cast<std::size_t>((pos + n - 1) % n)];
    // every call's send and receive buffers are at most max_bytes: the counts below split the
    // size over the members where nccl-tests does (all_gather's output, reduce_scatter's input,
    // all_to_all's buffers are the size itself)
    const auto buffer_bytes = static_cast<std::size_t>(o.max_bytes + 64);
    detail::Buffer a(comm.memory(), buffer_bytes), b(comm.memory(), buffer_bytes);
    for (Collective c : {Collective::all_gather, Collective::reduce_scatter, Collective::all_reduce, Collective::all_to_all,
                         Collective::send_recv}) {
      std::string rows;
      for (std::int64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= 2) {
        // elements per call as nccl-tests sizes them: the buffer split over the members where it is
        const bool split = c == Collective::all_gather || c == Collective::reduce_scatter || c == Collective::all_to_all;
        const std::int64_t count = split ? bytes / (s * n) : bytes / s;
        if (count < 1) continue;
        auto once = [&] {
          switch (c) {
            case Collective::all_gather: comm.all_gather(g, a.data(), b.data(), count, dt); break;
            case Collective::reduce_scatter: comm.reduce_scatter(g, a.data(), b.data(), count, dt, ReduceOp::sum); break;
            case Collective::all_reduce: comm.all_reduce(g, a.data(), b.data(), count, dt, ReduceOp::sum); break;
            case Collective::all_to_all: comm.all_to_all(g, a.data(), b.data(), count, dt); break;
            case Collective::send_recv: {
              const Transfer send{next, a.data(), count}, recv{prev, b.data(), count};
              comm.send_recv({&send, 1}, {&recv, 1}, dt);
              break;
            }
          }
        };
        for (int i = 0; i < o.warmup; ++i) once();
        comm.synchronize();
        comm.memory().wait();
        const double t0 = now_us();
        for (int i = 0; i < o.iters; ++i) once();
        comm.synchronize();
        comm.memory().wait();
        const double t = std::max((now_us() - t0) / o.iters, 1e-3);
        const std::int64_t size = split ? count * s * n : count * s;
        const double algbw = static_cast<double>(size) / t / 1e3, busbw = algbw * bus_factor(c, n);
        rows += fmt::format("{:>12} {:>12} {:>8} {:>6} {:>6} {:>8.2f} {:>7.2f} {:>7.2f} {:>6} {:>8.2f} {:>7.2f} {:>7.2f} {:>6}\n",
                            size, size / s, "float", c == Collective::all_gather || c == Collective::all_to_all ? "none" : "sum",
                            -1, t, algbw, busbw, "N/A", t, algbw, busbw, "N/A");
      }
      if (comm.rank() != 0 || rows.empty()) continue;
      std::string text = fmt::format("# Collective test starting: {}_perf\n", to_string(c));
      text += fmt::format("# nThread 1 nGpus 1 minBytes {} maxBytes {} step: 2(factor) warmup iters: {} iters: {} agg iters: 1 "
                          "validation: 0 graph: 0\n#\n# Using devices\n", o.min_bytes, o.max_bytes, o.warmup, o.iters);
      for (std::int64_t q = 0; q < n; ++q) {
        const auto r = members[static_cast<std::size_t>(q)];
        // the intra group shares a host; across hosts every member has its own
        const bool same_host = std::string_view(link) == "intra";
        text += fmt::format("#  Rank {:2} Group  0 Pid {} on host-{} device {:2} [dtensor] mesh rank {}\n", q, r,
                            same_host ? 0 : q, same_host ? q : 0, r);
      }
      text += "#\n#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw "
              "#wrong\n#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n";
      out.push_back({fmt::format("{}-{}.txt", to_string(c), link), text + rows});
    }
  }
  return out;
}

std::vector<MeasuredLog> measure_on_virtual_clock(const Mesh& mesh, const CostModel& truth, double noise,
                                                  const MeasureOptions& options, std::uint64_t seed) {
  WorldOptions wo;
  wo.clock_profile = std::make_shared<const CostModel>(truth);
  wo.clock_noise = noise;
  wo.clock_seed = seed;
  SimulatedWorld world(mesh, wo);
  std::vector<MeasuredLog> logs;
  std::mutex mu;
  run_rank_threads(world, [&](std::int64_t rank, Communicator& comm) {
    auto mine = measure(comm, options, [&world, rank] { return world.clock_us(rank); });
    if (rank != 0 && !mine.empty())
      throw InputError(fmt::format("tune::measure returned {} logs on rank {}; only rank 0 writes logs", mine.size(), rank));
    std::lock_guard lock(mu);
    if (rank == 0) logs = std::move(mine);
  });
  return logs;
}

}  // namespace dtensor::tune
