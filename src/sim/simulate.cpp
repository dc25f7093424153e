// simulate(): a plan, batch or cross-mesh plan run on fresh in-process worlds over seeded inputs,
// every rank's output verified against the target layout (`dtensor simulate`, Python's simulate,
// `tune validate`), and the host memory such a run holds.
#include <algorithm>
#include <climits>
#include <pthread.h>
#include <unistd.h>

#include <fmt/format.h>

#include "dtensor/error.hpp"
#include "dtensor/scalar.hpp"
#include "dtensor/batch_executor.hpp"
#include "dtensor/cross_mesh_executor.hpp"
#include "dtensor/executor.hpp"
#include "dtensor/simulate.hpp"
#include "dtensor/simulated.hpp"
#include "dtensor/verify.hpp"

namespace dtensor {
namespace {
std::int64_t rank_index(const std::vector<std::int64_t>& ranks, std::int64_t w) {
  const auto it = std::find(ranks.begin(), ranks.end(), w);
  return it == ranks.end() ? -1 : static_cast<std::int64_t>(it - ranks.begin());
}

std::int64_t saturating_add(std::int64_t a, long double b) {
  const long double t = static_cast<long double>(a) + b;
  return t > static_cast<long double>(INT64_MAX) ? INT64_MAX : static_cast<std::int64_t>(t);
}

// The buffers simulate(plan) holds, without its threads' stacks.
std::int64_t data_bytes(const Plan& plan) {
  const Layout src = plan.src, dst = plan.dst;
  const auto s = static_cast<std::int64_t>(itemsize(plan.dtype()));
  const auto R = plan.mesh().num_ranks();
  long double total = static_cast<long double>(R) * static_cast<long double>(plan.peak_bytes);
  for (std::int64_t r = 0; r < R; ++r) {
    const auto c = plan.mesh().coord_of_rank(r);
    total += static_cast<long double>(src.local_numel(c)) * s + static_cast<long double>(dst.local_numel(c)) * (s + 8);
  }
  if (dst.numel() <= (std::int64_t{1} << 26)) total += static_cast<long double>(dst.numel()) * 4;
  return total > static_cast<long double>(INT64_MAX) ? INT64_MAX : static_cast<std::int64_t>(total);
}

}  // namespace

std::int64_t simulation_thread_bytes() {
  pthread_attr_t attr;
  std::size_t size = 0;
  if (::pthread_attr_init(&attr) == 0) {
    if (::pthread_attr_getstacksize(&attr, &size) != 0) size = 0;
    ::pthread_attr_destroy(&attr);
  }
  return size > 0 ? static_cast<std::int64_t>(size) : (std::int64_t{8} << 20);
}

std::int64_t simulation_bytes(const Plan& plan, bool threads) {
  const long double stacks = threads ? static_cast<long double>(plan.mesh().num_ranks()) * simulation_thread_bytes() : 0;
  return saturating_add(data_bytes(plan), stacks);
}

std::int64_t default_simulation_limit() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<std::int64_t>(pages) * page / 2 : (std::int64_t{8} << 30);
}

SimulationResult simulate(const Plan& plan, bool threads) {
  SimulatedWorld world(plan.mesh());
  const Layout src = plan.src, dst = plan.dst;
  const auto R = plan.mesh().num_ranks();
  std::vector<std::vector<std::byte>> inputs, outputs(static_cast<std::size_t>(R)), workspaces(static_cast<std::size_t>(R));
  for (std::int64_t r = 0; r < R; ++r) inputs.push_back(seeded_input(src, r));
  if (threads) {
    // Every rank's preparation first, from this thread: a plan some rank refuses is refused here,
    // at once, instead of leaving the other ranks to wait for it until the timeout.
    for (std::int64_t r = 0; r < R; ++r)
      (void)Executor(plan, world.communicator(r), ExecutorOptions{.check_plans_agree = false, .max_workspace_bytes = {}, .check_plans_every_call = false});
    run_rank_threads(world, [&](std::int64_t r, Communicator& comm) {
      const Executor exec(plan, comm);
      const auto u = static_cast<std::size_t>(r);
      outputs[u].resize(static_cast<std::size_t>(exec.output_bytes()));
      workspaces[u].resize(static_cast<std::size_t>(exec.workspace_bytes()));
      exec.execute({inputs[u], outputs[u], workspaces[u]});
    });
  } else {
    std::vector<Executor> execs;
    std::vector<const Executor*> ptrs;
    std::vector<Buffers> bufs;
    execs.reserve(static_cast<std::size_t>(R));
    for (std::int64_t r = 0; r < R; ++r) {
      execs.emplace_back(plan, world.communicator(r), ExecutorOptions{.check_plans_agree = false, .max_workspace_bytes = {}, .check_plans_every_call = false});
      const auto u = static_cast<std::size_t>(r);
      outputs[u].resize(static_cast<std::size_t>(execs.back().output_bytes()));
      workspaces[u].resize(static_cast<std::size_t>(execs.back().workspace_bytes()));
    }
    for (std::int64_t r = 0; r < R; ++r) {
      const auto u = static_cast<std::size_t>(r);
      ptrs.push_back(&execs[u]);
      bufs.push_back({inputs[u], outputs[u], workspaces[u]});
    }
    execute_all_ranks(ptrs, world, bufs);
  }
  SimulationResult res;
  res.mismatch = verify_outputs(dst, outputs);
  res.verified = res.mismatch.empty();
  for (std::int64_t r = 0; r < R; ++r) {
    SimulationResult::Rank rk;
    rk.rank = r;
    rk.coord = plan.mesh().coord_of_rank(r);
    rk.local_shape = dst.local_shape(rk.coord);
    const auto n = static_cast<std::int64_t>(outputs[static_cast<std::size_t>(r)].size() / itemsize(plan.dtype()));
    for (std::int64_t k = 0; k < n; ++k) rk.data.push_back(load_element(plan.dtype(), outputs[static_cast<std::size_t>(r)].data(), k));
    res.ranks.push_back(std::move(rk));
  }
  return res;
}


namespace {
// Counts the launches a rank issues (forwarding everything to the backend): each collective on
// its own, and a group (group_begin .. group_end) of collectives once.
class CountingCommunicator final : public Communicator {
 public:
  explicit CountingCommunicator(Communicator& c) : c_(c) {}
  const Mesh& mesh() const override { return c_.mesh(); }
  std::int64_t rank() const override { return c_.rank(); }
  bool supports(Collective c, DType d, ReduceOp o) const override { return c_.supports(c, d, o); }
  std::vector<std::uint64_t> exchange(std::uint64_t v) override { return c_.exchange(v); }
  void prepare(std::span<const Group> g) override { c_.prepare(g); }
  void all_gather(const Group& g, const void* s, void* r, std::int64_t n, DType d) override {
    launch();
    c_.all_gather(g, s, r, n, d);
  }
  void reduce_scatter(const Group& g, const void* s, void* r, std::int64_t n, DType d, ReduceOp o) override {
    launch();
    c_.reduce_scatter(g, s, r, n, d, o);
  }
  void all_reduce(const Group& g, const void* s, void* r, std::int64_t n, DType d, ReduceOp o) override {
    launch();
    c_.all_reduce(g, s, r, n, d, o);
  }
  void all_to_all(const Group& g, const void* s, void* r, std::int64_t n, DType d) override {
    launch();
    c_.all_to_all(g, s, r, n, d);
  }
  void send_recv(std::span<const Transfer> s, std::span<const Transfer> r, DType d) override {
    launch();
    c_.send_recv(s, r, d);
  }
  void synchronize() override { c_.synchronize(); }
  void group_begin() override {
    if (depth_++ == 0) in_group_ = 0;
    c_.group_begin();
  }
  void group_end() override {
    c_.group_end();
    if (depth_ > 0 && --depth_ == 0 && in_group_ > 0) ++count;
  }
  Memory& memory() override { return c_.memory(); }
  std::int64_t count = 0;

 private:
  void launch() {
    if (depth_ > 0)
      ++in_group_;
    else
      ++count;
  }
  Communicator& c_;
  int depth_ = 0;
  std::int64_t in_group_ = 0;
};
}  // namespace

std::int64_t simulation_bytes(const BatchPlan& batch) {
  const auto R = batch.plan(0).mesh().num_ranks();
  long double need = static_cast<long double>(batch.staging_bytes()) * R + static_cast<long double>(R) * simulation_thread_bytes();
  std::vector<long double> per;
  for (const auto& p : batch.distinct_plans) per.push_back(static_cast<long double>(data_bytes(p)));
  for (auto i : batch.plan_index) need += per[i];
  return saturating_add(0, need);
}

BatchSimulationResult simulate(const BatchPlan& batch) {
  validate_batch_plan(batch);
  const Mesh& mesh = batch.plan(0).mesh();
  SimulatedWorld world(mesh);
  const std::size_t T = batch.size();
  const auto R = static_cast<std::size_t>(mesh.num_ranks());
  std::vector<std::vector<std::vector<std::byte>>> outputs(T, std::vector<std::vector<std::byte>>(R));
  BatchSimulationResult res;
  run_rank_threads(world, [&](std::int64_t rank, Communicator& comm) {
    CountingCommunicator counting(comm);
    BatchExecutor ex(batch, counting);
    std::vector<std::vector<std::byte>> in(T), ws(T);
    std::vector<Buffers> bufs(T);
    for (std::size_t t = 0; t < T; ++t) {
      in[t] = seeded_input(batch.plan(t).src, rank);
      auto& out = outputs[t][static_cast<std::size_t>(rank)];
      out.assign(static_cast<std::size_t>(ex.executor(t).output_bytes()), std::byte{0});
      ws[t].assign(static_cast<std::size_t>(ex.executor(t).workspace_bytes()), std::byte{0});
      bufs[t] = {in[t], out, ws[t]};
    }
    std::vector<std::byte> staging(static_cast<std::size_t>(ex.staging_bytes()));
    counting.count = 0;
    ex.execute(bufs, staging);
    if (rank == 0) res.collectives = counting.count;
  });
  res.verified = true;
  for (std::size_t t = 0; t < T; ++t) {
    res.mismatch.push_back(verify_outputs(batch.plan(t).dst, outputs[t]));
    res.verified = res.verified && res.mismatch.back().empty();
  }
  return res;
}


std::int64_t simulation_bytes(const CrossMeshPlan& plan) {
  const auto used = used_world_ranks(plan.src_ranks, plan.dst_ranks).size();
  return saturating_add(data_bytes(plan.pre) + data_bytes(plan.post),
                        static_cast<long double>(used) * simulation_thread_bytes());
}

CrossMeshSimulationResult simulate(const CrossMeshPlan& plan) {
  validate_cross_mesh_plan(plan);
  // Ranks of the world on neither mesh take no part, and a message's world ranks matter only in
  // whether they are one: the world simulated is the used ranks, numbered compactly (a thread
  // each), whatever their ids.
  CompactRanks ranks = compact_world_ranks(plan.src_ranks, plan.dst_ranks);
  CrossMeshPlan compact = plan;
  compact.src_ranks = std::move(ranks.src);
  compact.dst_ranks = std::move(ranks.dst);
  compact.world_size = static_cast<std::int64_t>(ranks.ids.size());
  CrossMeshSimulationResult res;
  SimulatedWorld world(Mesh(std::vector<std::int64_t>{compact.world_size}));
  SimulatedWorld on_a(plan.src.mesh()), on_b(plan.dst.mesh());
  std::vector<std::vector<std::byte>> outputs(static_cast<std::size_t>(plan.dst.mesh().num_ranks()));
  run_rank_threads(world, [&](std::int64_t w, Communicator& comm) {
    try {
      const std::int64_t ra = rank_index(compact.src_ranks, w), rb = rank_index(compact.dst_ranks, w);
      CrossMeshExecutor ex(compact, comm, ra >= 0 ? &on_a.communicator(ra) : nullptr, rb >= 0 ? &on_b.communicator(rb) : nullptr);
      std::vector<std::byte> in = ra >= 0 ? seeded_input(plan.src, ra) : std::vector<std::byte>{};
      std::vector<std::byte> out(static_cast<std::size_t>(ex.output_bytes()));
      std::vector<std::byte> ws(static_cast<std::size_t>(ex.workspace_bytes()));
      ex.execute(Buffers{in, out, ws});
      if (rb >= 0) outputs[static_cast<std::size_t>(rb)] = std::move(out);
    } catch (const std::exception& e) {
      throw BackendError(fmt::format("world rank {}: {}", ranks.ids[static_cast<std::size_t>(w)], e.what()));
    }
  });
  res.mismatch = verify_outputs(plan.dst, outputs, plan.src.mesh().num_ranks());
  res.verified = res.mismatch.empty();
  res.outputs = std::move(outputs);
  return res;
}

}  // namespace dtensor
