// SPMD redistribution: every rank plans on its own, checks that all ranks hold the same plan,
// fills its input from the global arange, executes its part, and checks its own output against
// the expected shard. One program, three launchers:
//
//   spmd_redistribute --mesh 2x4 --shape 1000x512 --from 'S(0)[1]S(0)[0]' --to 'RS(1)'          # threads
//   mpirun -np 8 spmd_redistribute --backend mpi --mesh 2x4 ...                                  # MPI (CPU)
//   mpirun -np 8 spmd_redistribute --backend nccl --mesh 2x4 ...                                 # NCCL (GPUs)
//
// `--backend nccl` without mpirun drives every visible GPU from one process (one thread per GPU;
// the mesh must have that many ranks). Rank 0 prints one summary line:
//   ranks=N plan_hash=H verified=V/N time_per_iter_us=T first_iter_us=C
// (T: the mean of --iters warm runs, default 20, after one timed cold run C; --random: one run per pair)
// `--random K --seed S` runs K random (shape, source, target) pairs on the mesh instead, one
// summary line each (`--ragged`: one side or both a RaggedShard layout, run as a ragged plan). Two faults can be injected, to see the failure modes: `--inject-mismatch R`
// makes rank R plan another target (the run fails, exit 4, naming the ranks whose plans differ);
// `--inject-absent R` makes rank R stall instead of executing (its peers time out after
// --timeout seconds, naming the collective, exit 4). `--random K --batch` runs the K pairs as one
// batch (plan_batch, BatchExecutor: small tensors' collectives coalesced) and prints
//   batch=K ranks=N batch_hash=H collectives=C separate=S verified=V/N time_us=T
// Exit status: 0 every rank verified, 1 verification failed, 2 bad input (including a world size
// that differs from the mesh), 4 backend failure or timeout.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dtensor/error.hpp"
#include "dtensor/batch_executor.hpp"
#include "dtensor/executor.hpp"
#include "dtensor/planner.hpp"
#include "dtensor/ragged_executor.hpp"
#include "dtensor/ragged_plan.hpp"
#include "dtensor/simulated.hpp"
#include "dtensor/verify.hpp"
#ifdef DTENSOR_WITH_MPI
#include "dtensor/mpi.hpp"
#endif
#ifdef DTENSOR_WITH_NCCL
#include <cuda_runtime.h>

#include "dtensor/nccl.hpp"
#ifdef DTENSOR_WITH_MPI
#include "dtensor/nccl_mpi.hpp"
#endif
#endif

using namespace dtensor;

namespace {

struct Args {
  std::string mesh, shape, from, to, dtype = "f32", backend = "threads", cost_model = "default";
  std::int64_t iters = 0, random = 0, seed = 1, inject_mismatch = -1, inject_absent = -1;
  double timeout_s = 60;
  bool batch = false;
  bool ragged = false;  // --random K --ragged: one side of each pair (or both) a RaggedShard layout
};

// The clock runs are timed with, in microseconds: steady wall time, or MPI_Wtime under MPI (the
// simulated network's clock under SimGrid's smpirun, docs/virtual-cluster.md).
double wall_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
double (*now_us)() = &wall_us;

[[noreturn]] void usage_error(const std::string& msg) { throw InputError(msg); }

Args parse_args(int argc, char** argv) {
  Args a;
  auto need = [&](int& i) -> std::string {
    if (i + 1 >= argc) usage_error(fmt::format("{} needs a value", argv[i]));
    return argv[++i];
  };
  auto integer = [&](const std::string& flag, const std::string& v, std::int64_t lo) {
    char* end = nullptr;
    errno = 0;
    const long long x = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || errno == ERANGE || x < lo)
      usage_error(fmt::format("{} '{}' is not an integer >= {}", flag, v, lo));
    return static_cast<std::int64_t>(x);
  };
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    if (f == "--mesh") a.mesh = need(i);
    else if (f == "--shape") a.shape = need(i);
    else if (f == "--from") a.from = need(i);
    else if (f == "--to") a.to = need(i);
    else if (f == "--dtype") a.dtype = need(i);
    else if (f == "--backend") a.backend = need(i);
    else if (f == "--cost-model") a.cost_model = need(i);
    else if (f == "--iters") a.iters = integer(f, need(i), 1);
    else if (f == "--random") a.random = integer(f, need(i), 1);
    else if (f == "--seed") a.seed = integer(f, need(i), 0);
    else if (f == "--inject-mismatch") a.inject_mismatch = integer(f, need(i), 0);
    else if (f == "--inject-absent") a.inject_absent = integer(f, need(i), 0);
    else if (f == "--batch") a.batch = true;
    else if (f == "--ragged") a.ragged = true;
    else if (f == "--timeout") {
      const std::string v = need(i);
      char* end = nullptr;
      a.timeout_s = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(a.timeout_s > 0) || a.timeout_s > 86400)
        usage_error(fmt::format("--timeout '{}' is not a number of seconds in (0, 86400]", v));
    } else if (f == "--help" || f == "-h") {
      std::printf("usage: spmd_redistribute --mesh M (--shape S --from X --to Y | --random K [--seed S] [--batch | --ragged]) [--dtype T]\n"
                  "       [--backend threads|mpi|nccl] [--iters N] [--timeout SECONDS] [--cost-model NAME|FILE]\n");
      std::exit(0);
    } else {
      usage_error(fmt::format("unknown flag '{}'", f));
    }
  }
  if (a.mesh.empty()) usage_error("--mesh is required");
  if (a.random == 0 && (a.shape.empty() || a.from.empty() || a.to.empty()))
    usage_error("--shape, --from and --to are required (or --random K)");
  if (a.batch && a.random == 0) usage_error("--batch runs the --random K pairs as one batch: give --random K");
  if (a.ragged && (a.random == 0 || a.batch)) usage_error("--ragged draws --random K pairs (without --batch): give --random K");
  if (a.backend != "threads" && a.backend != "mpi" && a.backend != "nccl")
    usage_error(fmt::format("unknown backend '{}' (expected threads, mpi or nccl)", a.backend));
  return a;
}

struct Case {
  std::vector<std::int64_t> shape;
  std::string from, to;
};

// Deterministic on every rank: the same seed gives the same list everywhere.
std::vector<Case> random_cases(const Mesh& mesh, std::int64_t n, std::int64_t seed, dtensor::DType dt, bool ragged) {
  std::mt19937_64 rng(static_cast<std::uint64_t>(seed));
  auto uni = [&](std::int64_t lo, std::int64_t hi) { return lo + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(hi - lo + 1)); };
  const char* ops[] = {"sum", "avg", "max", "min"};
  std::vector<Case> out;
  while (static_cast<std::int64_t>(out.size()) < n) {
    Case c;
    const auto nd = uni(1, 3);
    for (std::int64_t d = 0; d < nd; ++d) c.shape.push_back(uni(0, 13));
    const char* op = ops[uni(0, 3)];
    if (!is_floating(dt) && std::string_view(op) == "avg") op = "sum";  // an average needs a floating dtype
    auto pls = [&] {
      std::string s;
      for (int m = 0; m < mesh.ndim(); ++m) {
        switch (uni(0, 4)) {
          case 0: s += "R"; break;
          case 1: s += fmt::format("P({})", op); break;
          case 2: case 3: s += fmt::format("S({})", uni(0, nd - 1)); break;
          default: s += fmt::format("_S({}, {})", uni(0, nd - 1), uni(2, 3)); break;
        }
      }
      return s;
    };
    // a RaggedShard layout: Replicate before the ragged mesh dim, R or S(d) after, units in 0..2
    auto ragged_pls = [&] {
      const auto r = uni(0, mesh.ndim() - 1);
      std::string s, units;
      for (int m = 0; m < mesh.ndim(); ++m) {
        if (m < r || (m > r && uni(0, 1) == 0)) s += "R";
        else if (m > r) s += fmt::format("S({})", uni(0, nd - 1));
        else {
          for (std::int64_t i = 0; i < mesh.size(m); ++i) units += fmt::format("{}{}", i ? "," : "", uni(0, 2));
          std::string dims;
          for (std::int64_t d = 0, k = uni(1, nd); d < k; ++d) dims += fmt::format("{},", d);
          s += fmt::format("RaggedShard(({}),({}))", dims, units);
        }
      }
      return s;
    };
    const auto side = ragged ? uni(0, 2) : -1;  // 0: the source ragged, 1: the target, 2: both
    c.from = side == 0 || side == 2 ? ragged_pls() : pls();
    c.to = side == 1 || side == 2 ? ragged_pls() : pls();
    try {  // keep the layouts that are valid (e.g. a split factor within its dim, units that divide)
      (void)RaggedLayout::parse(mesh, c.shape, DType::f32, c.from);
      (void)RaggedLayout::parse(mesh, c.shape, DType::f32, c.to);
    } catch (const InputError&) {
      continue;
    }
    out.push_back(std::move(c));
  }
  return out;
}

// A buffer in the backend's memory (Communicator::memory(): host, or the GPU's for NCCL).
struct Buffer {
  Memory* mem;
  std::byte* p = nullptr;
  std::size_t n = 0;
  Buffer(Memory& m, std::size_t bytes) : mem(&m), p(static_cast<std::byte*>(m.allocate(bytes))), n(bytes) {}
  Buffer(const Buffer&) = delete;
  ~Buffer() { mem->release(p); }
};

struct Absent {};  // --inject-absent: this rank leaves without executing

struct Outcome {
  std::uint64_t plan_hash = 0;
  bool verified = false;
  std::string mismatch;
  double time_us = 0;
  double first_us = 0;  // the first (cold) run of a single pair
};

// Reduces the Partial mesh dims of a target (the library's own all_reduce, each dim's op) so
// that every rank holds plain values of its shard; returns the layout to verify against.
Layout reduce_partials(Communicator& comm, const Layout& dst, std::byte* out, std::int64_t out_bytes) {
  Layout check = dst;
  for (int m = 0; m < dst.mesh().ndim(); ++m)
    if (auto op = dst.sharding().partial(m)) {
      comm.all_reduce(Group{{m}}, out, out, out_bytes / static_cast<std::int64_t>(itemsize(dst.dtype())), dst.dtype(), *op);
      comm.synchronize();
      check = Layout(dst.mesh(), dst.shape(), dst.dtype(), check.sharding().with_replicate(m));
    }
  return check;
}

// One rank's part of a prepared case: fill, execute (timed), reduce Partial dims, verify. `Exec`:
// an Executor (a plan) or a RaggedExecutor (a ragged plan).
template <class Exec>
Outcome run_prepared(Communicator& comm, const Args& a, const Exec& exec, const RaggedLayout& src, const RaggedLayout& dst,
                     std::uint64_t plan_hash) {
  Memory& mem = comm.memory();
  const auto wait = [&mem] { mem.wait(); };
  if (comm.rank() == a.inject_absent) throw Absent{};
  const auto host_in = seeded_input(src, comm.rank());
  Buffer in(mem, host_in.size()), out(mem, static_cast<std::size_t>(exec.output_bytes())),
      ws(mem, static_cast<std::size_t>(exec.workspace_bytes()));
  mem.upload(in.p, host_in.data(), host_in.size());
  const Buffers b{std::span<const std::byte>(in.p, in.n), std::span<std::byte>(out.p, out.n), std::span<std::byte>(ws.p, ws.n)};
  // One pair: a timed first (cold) run, then --iters (default 20) warm ones. --random: one run per
  // pair (CI runs many pairs).
  const std::int64_t iters = a.iters > 0 ? a.iters : (a.random > 0 ? 1 : 20);
  Outcome o;
  if (a.random == 0) {
    const double c0 = now_us();
    exec.execute(b);
    wait();
    o.first_us = now_us() - c0;
  }
  const double t0 = now_us();
  for (std::int64_t i = 0; i < iters; ++i) exec.execute(b);  // the input is never written: every run gives the same output
  wait();
  const double t1 = now_us();
  o.plan_hash = plan_hash;
  o.time_us = (t1 - t0) / static_cast<double>(iters);
  // Partial targets: reduce over each Partial mesh dim with its op (the library's own collective),
  // then every rank holds plain values of the target's shard.
  const RaggedLayout check = dst.is_ragged() ? dst : RaggedLayout(reduce_partials(comm, dst.base(), out.p, exec.output_bytes()));
  wait();
  std::vector<std::byte> host_out(out.n);
  mem.download(host_out.data(), out.p, out.n);
  o.mismatch = verify_rank_output(check, comm.rank(), host_out);
  o.verified = o.mismatch.empty();
  return o;
}

// One rank's part of one case: plan, agree, then run_prepared. A case with a RaggedShard side runs
// as a ragged plan (exchanges and ordinary stages).
Outcome run_rank(Communicator& comm, const Args& a, const Case& c, const CostModel& cost) {
  const Mesh& mesh = comm.mesh();
  const DType dt = parse_dtype(a.dtype);
  if (c.from.find("RaggedShard") != std::string::npos || c.to.find("RaggedShard") != std::string::npos) {
    const RaggedLayout src = RaggedLayout::parse(mesh, c.shape, dt, c.from), dst = RaggedLayout::parse(mesh, c.shape, dt, c.to);
    const RaggedPlan plan = plan_ragged(src, dst, cost);
    const RaggedExecutor exec(plan, comm);  // exchanges plan hashes
    return run_prepared(comm, a, exec, src, dst, plan.hash());
  }
  const Layout src = Layout::parse(mesh, c.shape, dt, c.from);
  const Layout dst = Layout::parse(mesh, c.shape, dt, c.to);
  Layout planned_dst = dst;
  if (comm.rank() == a.inject_mismatch)  // a deliberate disagreement, to exercise the agreement check
    planned_dst = Layout::parse(mesh, c.shape, dt, src.placements_str() == dst.placements_str() ? Sharding::replicated(mesh.ndim(), static_cast<int>(c.shape.size())).str() : src.placements_str());
  const Plan plan = plan_redistribution(src, planned_dst, cost);
  const Executor exec(plan, comm);  // exchanges plan hashes: differing ranks fail here, all of them
  return run_prepared(comm, a, exec, RaggedLayout(src), RaggedLayout(dst), plan.hash());
}

// --batch: every case in one batch plan, run once through the batch executor, each tensor
// verified on every rank. Returns the exit status; rank 0 prints one summary line.
int run_batch(Communicator& comm, const Args& a, const std::vector<Case>& cases) {
  Memory& mem = comm.memory();
  const auto wait = [&mem] { mem.wait(); };
  const Mesh& mesh = comm.mesh();
  const DType dt = parse_dtype(a.dtype);
  std::vector<std::pair<Layout, Layout>> pairs;
  for (const auto& c : cases) pairs.emplace_back(Layout::parse(mesh, c.shape, dt, c.from), Layout::parse(mesh, c.shape, dt, c.to));
  const BatchPlan batch = plan_batch(pairs, CostModel::load(a.cost_model));
  const BatchExecutor exec(batch, comm);  // one batch-hash exchange: differing ranks fail here
  const std::size_t T = cases.size();
  std::vector<std::unique_ptr<Buffer>> in, out, ws;
  std::vector<Buffers> bufs;
  for (std::size_t t = 0; t < T; ++t) {
    const auto host_in = seeded_input(pairs[t].first, comm.rank());
    in.push_back(std::make_unique<Buffer>(mem, host_in.size()));
    mem.upload(in.back()->p, host_in.data(), host_in.size());
    out.push_back(std::make_unique<Buffer>(mem, static_cast<std::size_t>(exec.executor(t).output_bytes())));
    ws.push_back(std::make_unique<Buffer>(mem, static_cast<std::size_t>(exec.executor(t).workspace_bytes())));
    bufs.push_back({std::span<const std::byte>(in[t]->p, in[t]->n), std::span<std::byte>(out[t]->p, out[t]->n),
                    std::span<std::byte>(ws[t]->p, ws[t]->n)});
  }
  Buffer staging(mem, static_cast<std::size_t>(exec.staging_bytes()));
  const double t0 = now_us();
  exec.execute(bufs, std::span<std::byte>(staging.p, staging.n));
  wait();
  const double us = now_us() - t0;
  std::string mismatch;
  for (std::size_t t = 0; t < T && mismatch.empty(); ++t) {
    const Layout check = reduce_partials(comm, pairs[t].second, out[t]->p, static_cast<std::int64_t>(out[t]->n));
    wait();
    std::vector<std::byte> host_out(out[t]->n);
    mem.download(host_out.data(), out[t]->p, out[t]->n);
    if (auto why = verify_rank_output(check, comm.rank(), host_out); !why.empty())
      mismatch = fmt::format("tensor {} ({} -> {}, shape {}): {}", t, cases[t].from, cases[t].to, shape_str(cases[t].shape), why);
  }
  if (!mismatch.empty())
    std::fprintf(stderr, "rank %lld: VERIFICATION FAILED: %s\n", static_cast<long long>(comm.rank()), mismatch.c_str());
  const auto ok = comm.exchange(mismatch.empty() ? 1 : 0);
  const auto ns = comm.exchange(static_cast<std::uint64_t>(us * 1000));
  const auto R = mesh.num_ranks();
  const auto verified = std::count(ok.begin(), ok.end(), 1u);
  if (comm.rank() == 0) {
    std::printf("batch=%zu ranks=%lld batch_hash=%016llx collectives=%lld separate=%lld verified=%lld/%lld time_us=%.3f\n", T,
                static_cast<long long>(R), static_cast<unsigned long long>(batch.hash()), static_cast<long long>(batch.collectives()),
                static_cast<long long>(batch.separate_collectives()), static_cast<long long>(verified), static_cast<long long>(R),
                static_cast<double>(*std::max_element(ns.begin(), ns.end())) / 1000.0);
    std::fflush(stdout);
  }
  return verified == R ? 0 : 1;
}

// Runs every case on this rank; returns the exit status. Rank 0 prints the summaries.
int run_cases(Communicator& comm, const Args& a, const std::vector<Case>& cases, bool print_rank_hash) {
  if (a.batch) return run_batch(comm, a, cases);
  const CostModel cost = CostModel::load(a.cost_model);
  const auto R = comm.mesh().num_ranks();
  bool all_ok = true;
  for (const auto& c : cases) {
    Outcome o;
    try {
      o = run_rank(comm, a, c, cost);
    } catch (const Absent&) {
      // A stuck peer: it never issues the collective; the others' watchdogs must end the run.
      std::fprintf(stderr, "rank %lld: stuck, not executing (--inject-absent)\n", static_cast<long long>(comm.rank()));
      std::fflush(stderr);
      std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<std::int64_t>(a.timeout_s * 3000)));
      return 0;
    }
    if (print_rank_hash) std::printf("rank %lld: plan_hash=%016llx\n", static_cast<long long>(comm.rank()),
                                     static_cast<unsigned long long>(o.plan_hash));
    const auto ok = comm.exchange(o.verified ? 1 : 0);
    const auto ns = comm.exchange(static_cast<std::uint64_t>(o.time_us * 1000));
    const auto first_ns = comm.exchange(static_cast<std::uint64_t>(o.first_us * 1000));
    const auto verified = std::count(ok.begin(), ok.end(), 1u);
    all_ok = all_ok && verified == R;
    if (!o.verified) std::fprintf(stderr, "rank %lld: VERIFICATION FAILED (%s -> %s, shape %s): %s\n",
                                  static_cast<long long>(comm.rank()), c.from.c_str(), c.to.c_str(),
                                  shape_str(c.shape).c_str(), o.mismatch.c_str());
    if (comm.rank() == 0) {
      const double t = static_cast<double>(*std::max_element(ns.begin(), ns.end())) / 1000.0;
      const double first = static_cast<double>(*std::max_element(first_ns.begin(), first_ns.end())) / 1000.0;
      std::printf("ranks=%lld plan_hash=%016llx verified=%lld/%lld time_per_iter_us=%.3f%s%s\n", static_cast<long long>(R),
                  static_cast<unsigned long long>(o.plan_hash), static_cast<long long>(verified),
                  static_cast<long long>(R), t, a.random == 0 ? fmt::format(" first_iter_us={:.3f}", first).c_str() : "",
                  cases.size() > 1 ? fmt::format("  ({} {} -> {})", shape_str(c.shape), c.from, c.to).c_str() : "");
      std::fflush(stdout);
    }
  }
  return all_ok ? 0 : 1;
}

std::vector<Case> cases_of(const Args& a, const Mesh& mesh) {
  if (a.random > 0) return random_cases(mesh, a.random, a.seed, parse_dtype(a.dtype), a.ragged);
  return {Case{parse_shape(a.shape), a.from, a.to}};
}

int run_threads(const Args& a) {
  const Mesh mesh = Mesh::parse(a.mesh);
  if (a.inject_mismatch >= mesh.num_ranks())
    throw InputError(fmt::format("--inject-mismatch {} is not a rank of mesh {}", a.inject_mismatch, mesh.str()));
  const auto cases = cases_of(a, mesh);
  WorldOptions o;
  o.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(a.timeout_s * 1000));
  SimulatedWorld world(mesh, o);
  std::vector<int> status(static_cast<std::size_t>(mesh.num_ranks()), 0);
  run_rank_threads(world, [&](std::int64_t r, Communicator& comm) {
    status[static_cast<std::size_t>(r)] = run_cases(comm, a, cases, a.random == 0);
  });
  return *std::max_element(status.begin(), status.end());
}


}  // namespace

int main(int argc, char** argv) {
  bool mpi = false;
  int mpi_rank = 0;
  try {
    const Args a = parse_args(argc, argv);
    if (a.backend == "threads") return run_threads(a);
#ifdef DTENSOR_WITH_MPI
    const bool launched_by_mpi = std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE") || std::getenv("PMIX_RANK");
    if (a.backend == "mpi" || (a.backend == "nccl" && launched_by_mpi)) {
      MPI_Init(&argc, &argv);
      mpi = true;
      now_us = [] { return MPI_Wtime() * 1e6; };
      MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
      const Mesh mesh = Mesh::parse(a.mesh);
      const auto cases = cases_of(a, mesh);
      int status = 0;
      if (a.backend == "mpi") {
        MpiOptions o;
        o.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(a.timeout_s * 1000));
        MpiCommunicator comm(mesh, MPI_COMM_WORLD, o);
        status = run_cases(comm, a, cases, a.random == 0);
      } else {
#ifdef DTENSOR_WITH_NCCL
        NcclOptions o;
        o.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(a.timeout_s * 1000));
        auto comm = nccl_communicator_from_mpi(mesh, o);
        status = run_cases(*comm, a, cases, a.random == 0);
#endif
      }
      MPI_Finalize();
      return status;
    }
#endif
    if (a.backend == "mpi") throw InputError("this build has no MPI backend (install libopenmpi-dev and rebuild)");
#ifdef DTENSOR_WITH_NCCL
    {  // one process, one thread per visible GPU
      const Mesh mesh = Mesh::parse(a.mesh);
      const int gpus = cuda_device_count();
      if (mesh.num_ranks() != gpus)
        throw InputError(fmt::format("mesh {} has {} ranks but this process sees {} GPU(s); give one rank per GPU "
                                     "(or launch with mpirun)", mesh.str(), mesh.num_ranks(), gpus));
      const auto cases = cases_of(a, mesh);
      std::vector<int> devices(static_cast<std::size_t>(gpus));
      for (int g = 0; g < gpus; ++g) devices[static_cast<std::size_t>(g)] = g;
      auto comms = NcclCommunicator::local_world(mesh, devices, std::chrono::milliseconds(static_cast<std::int64_t>(a.timeout_s * 1000)));
      std::vector<int> status(comms.size(), 0);
      std::vector<std::exception_ptr> errors(comms.size());
      std::vector<std::thread> threads;
      for (std::size_t r = 0; r < comms.size(); ++r)
        threads.emplace_back([&, r] {
          try {
            cudaSetDevice(devices[r]);
            auto* c = comms[r].get();
            status[r] = run_cases(*c, a, cases, a.random == 0);
          } catch (...) {
            errors[r] = std::current_exception();
          }
        });
      for (auto& t : threads) t.join();
      for (const auto& e : errors)
        if (e) std::rethrow_exception(e);
      return *std::max_element(status.begin(), status.end());
    }
#else
    throw InputError("this build has no NCCL backend (needs CUDA and NCCL at build time)");
#endif
  } catch (const InputError& e) {
    if (mpi_rank == 0) std::fprintf(stderr, "error: %s\n", e.what());
#ifdef DTENSOR_WITH_MPI
    if (mpi) MPI_Finalize();
#endif
    return 2;
  } catch (const BackendError& e) {
    std::fprintf(stderr, "error: rank %d: %s\n", mpi_rank, e.what());
#ifdef DTENSOR_WITH_MPI
    if (mpi) MPI_Abort(MPI_COMM_WORLD, 4);  // peers may be blocked in a collective: end the job
#endif
    return 4;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: internal: %s\n", e.what());
#ifdef DTENSOR_WITH_MPI
    if (mpi) MPI_Abort(MPI_COMM_WORLD, 3);
#endif
    return 3;
  }
}
