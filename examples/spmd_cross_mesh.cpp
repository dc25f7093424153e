// Cross-mesh resharding SPMD, one process (MPI) or one thread (threads) per world rank:
//   spmd_cross_mesh --world 8 --random K [--seed S]                       # threads
//   mpirun -np 8 spmd_cross_mesh --backend mpi --random K [--seed S]      # MPI (CPU)
//   ... --meshes 8x16x8,1024                     # both meshes fixed (at scale), the rest drawn
// Each of the K random cases (identical on every rank, from the seed) draws a source mesh and a
// target mesh of 1-3 dims on random world ranks (identical, overlapping or disjoint sets, in any
// order), a shape of 1-3 dims (sizes 0-9: uneven and empty shards; with --meshes, up to four times
// the largest mesh dim, so that large meshes hold data), a source layout (Shard,
// _StridedShard, Replicate, Partial) and a target layout (no Partial: every rank checks its own
// output alone), and a dtype. Every world rank plans it (plan_cross_mesh), builds its executor on
// the world communicator and, where it is on them, on its source- and target-mesh communicators
// (MPI: MPI_Comm_split of the world per case), runs it over seeded inputs, and checks its target
// part against the global tensor. Rank 0 prints one line per case:
//   case=I world=W src=MESH@RANKS dst=MESH@RANKS trace verified=V/W
// Exit: 0 all verified, 1 a mismatch, 2 bad arguments, 4 backend failure.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dtensor/cross_mesh_executor.hpp"
#include "dtensor/error.hpp"
#include "dtensor/executor.hpp"
#include "dtensor/simulated.hpp"
#include "dtensor/simulated.hpp"
#include "dtensor/verify.hpp"
#ifdef DTENSOR_WITH_MPI
#include "dtensor/mpi.hpp"
#endif

using namespace dtensor;

namespace {

struct Case {
  Layout src, dst;
  std::vector<std::int64_t> src_ranks, dst_ranks;
  friend bool operator==(const Case&, const Case&) = default;
};

struct Args {
  std::string backend = "threads";
  std::int64_t world = 8, random = 0;
  std::uint64_t seed = 1;
  std::optional<std::pair<Mesh, Mesh>> meshes;  // --meshes A,B: the source and target meshes
};

Case draw(std::mt19937_64& rng, std::int64_t world, const Args& args) {
  static const std::vector<std::string> meshes{"1", "2", "3", "4", "5", "6", "7", "8", "2x2", "2x3", "3x2", "2x4", "4x2", "2x2x2"};
  auto pick_mesh = [&] {
    while (true) {
      Mesh m = Mesh::parse(meshes[rng() % meshes.size()]);
      if (m.num_ranks() <= world) return m;
    }
  };
  auto layout = [&](const Mesh& m, const std::vector<std::int64_t>& shape, DType dt, bool partial) {
    while (true) {
      std::string p;
      for (int d = 0; d < m.ndim(); ++d) {
        const auto k = rng() % (partial ? 5 : 3);
        const auto td = rng() % shape.size();
        p += k == 0 ? std::string("R") : k == 1 ? fmt::format("S({})", td) : k == 2 ? fmt::format("_S({}, 2)", td)
                                                : k == 3 ? std::string("P(sum)") : std::string("P(max)");
      }
      try {
        return Layout::parse(m, shape, dt, p);
      } catch (const InputError&) {  // e.g. an invalid combination: draw again
      }
    }
  };
  const Mesh a = args.meshes ? args.meshes->first : pick_mesh(), b = args.meshes ? args.meshes->second : pick_mesh();
  std::int64_t sizes = 10;
  if (args.meshes)
    for (const Mesh* m : {&a, &b})
      for (auto n : m->shape()) sizes = std::max(sizes, 4 * n + 1);
  std::vector<std::int64_t> shape(1 + rng() % 3);
  for (auto& s : shape) s = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(sizes));
  static const DType dtypes[] = {DType::f32, DType::bf16, DType::i64, DType::f64};
  const DType dt = dtypes[rng() % 4];
  std::vector<std::int64_t> perm(static_cast<std::size_t>(world));
  for (std::int64_t r = 0; r < world; ++r) perm[static_cast<std::size_t>(r)] = r;
  std::shuffle(perm.begin(), perm.end(), rng);
  Case c{layout(a, shape, dt, true), layout(b, shape, dt, false), {}, {}};
  c.src_ranks.assign(perm.begin(), perm.begin() + a.num_ranks());
  switch (rng() % 3) {
    case 0:  // from the same shuffled ranks: identical or nested sets
      c.dst_ranks.assign(perm.begin(), perm.begin() + b.num_ranks());
      break;
    case 1:  // the far end of the permutation: disjoint where the world is large enough
      c.dst_ranks.assign(perm.end() - b.num_ranks(), perm.end());
      break;
    default:  // a fresh shuffle: any overlap
      std::shuffle(perm.begin(), perm.end(), rng);
      c.dst_ranks.assign(perm.begin(), perm.begin() + b.num_ranks());
  }
  return c;
}

std::int64_t index_in(const std::vector<std::int64_t>& v, std::int64_t w) {
  const auto it = std::find(v.begin(), v.end(), w);
  return it == v.end() ? -1 : it - v.begin();
}

// This world rank's part of one case: "" when its target part (if any) is right.
std::string run_rank(const CrossMeshPlan& plan, Communicator& world, Communicator* on_a, Communicator* on_b) {
  const auto w = world.rank();
  const auto ra = index_in(plan.src_ranks, w), rb = index_in(plan.dst_ranks, w);
  const CrossMeshExecutor ex(plan, world, on_a, on_b);
  const auto in = ra >= 0 ? seeded_input(plan.src, ra) : std::vector<std::byte>{};
  std::vector<std::byte> out(static_cast<std::size_t>(ex.output_bytes())), ws(static_cast<std::size_t>(ex.workspace_bytes()));
  ex.execute(Buffers{in, out, ws});
  return rb >= 0 ? verify_rank_output(plan.dst, rb, out, plan.src.mesh().num_ranks()) : std::string();
}

// InputError when --meshes names a mesh of more ranks than the world has.
void check_meshes_fit(const Args& a, std::int64_t world) {
  if (!a.meshes) return;
  for (const Mesh* m : {&a.meshes->first, &a.meshes->second})
    if (m->num_ranks() > world)
      throw InputError(fmt::format("--meshes: {} has {} ranks, more than the world's {}", m->str(), m->num_ranks(), world));
}

// A rank list, whole up to 16 ranks, else its first 8 and its length.
std::string ranks_str(const std::vector<std::int64_t>& r) {
  if (r.size() <= 16) return fmt::format("{}", fmt::join(r, ","));
  return fmt::format("{},...({} ranks)", fmt::join(r.begin(), r.begin() + 8, ","), r.size());
}

std::string describe(const Case& c, const CrossMeshPlan& p) {
  return fmt::format("src={}@{} dst={}@{} {} {} {} -> {} via {} | {}", c.src.mesh().str(), ranks_str(c.src_ranks),
                     c.dst.mesh().str(), ranks_str(c.dst_ranks), fmt::join(c.src.shape(), "x"), to_string(c.src.dtype()),
                     c.src.placements_str(), c.dst.placements_str(), p.pre.trace(), p.post.trace());
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    auto need = [&]() -> std::string {
      if (i + 1 >= argc) throw InputError(fmt::format("{} needs a value", f));
      return argv[++i];
    };
    auto integer = [&](const std::string& v) {
      char* end = nullptr;
      const long long x = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end || x < 1 || x > 1000000) throw InputError(fmt::format("{} {}: expected an integer in [1, 1000000]", f, v));
      return static_cast<std::int64_t>(x);
    };
    if (f == "--backend") a.backend = need();
    else if (f == "--world") a.world = integer(need());
    else if (f == "--random") a.random = integer(need());
    else if (f == "--seed") a.seed = static_cast<std::uint64_t>(integer(need()));
    else if (f == "--meshes") {
      const std::string v = need();
      const auto comma = v.find(',');
      if (comma == std::string::npos) throw InputError(fmt::format("--meshes {}: expected two meshes, e.g. 8x16x8,1024", v));
      a.meshes = std::pair{Mesh::parse(v.substr(0, comma)), Mesh::parse(v.substr(comma + 1))};
    } else throw InputError(fmt::format("unknown flag {} (--backend threads|mpi, --world N, --random K, --seed S, --meshes A,B)", f));
  }
  if (a.random == 0) throw InputError("--random K is required");
  if (a.backend == "threads") check_meshes_fit(a, a.world);
  if (a.backend != "threads" && a.backend != "mpi") throw InputError(fmt::format("unknown backend '{}'", a.backend));
  return a;
}

int run_threads(const Args& a) {
  std::mt19937_64 rng(a.seed);
  SimulatedWorld world(Mesh(std::vector<std::int64_t>{a.world}));
  int failed = 0;
  for (std::int64_t k = 0; k < a.random; ++k) {
    const Case c = draw(rng, a.world, a);
    const auto plan = plan_cross_mesh(c.src, c.src_ranks, c.dst, c.dst_ranks, CostModel::default_model(),
                                      CrossMeshOptions{{}, a.world, {}, {}, nullptr});
    SimulatedWorld on_a(c.src.mesh()), on_b(c.dst.mesh());
    std::vector<std::string> err(static_cast<std::size_t>(a.world));
    std::vector<std::thread> threads;
    for (std::int64_t w = 0; w < a.world; ++w)
      threads.emplace_back([&, w] {
        try {
          const auto ra = index_in(c.src_ranks, w), rb = index_in(c.dst_ranks, w);
          err[static_cast<std::size_t>(w)] = run_rank(plan, world.communicator(w), ra >= 0 ? &on_a.communicator(ra) : nullptr,
                                                      rb >= 0 ? &on_b.communicator(rb) : nullptr);
        } catch (const std::exception& e) {
          err[static_cast<std::size_t>(w)] = e.what();
        }
      });
    for (auto& t : threads) t.join();
    std::int64_t ok = 0;
    for (const auto& e : err) ok += e.empty();
    std::printf("case=%lld world=%lld %s verified=%lld/%lld\n", static_cast<long long>(k), static_cast<long long>(a.world),
                describe(c, plan).c_str(), static_cast<long long>(ok), static_cast<long long>(a.world));
    for (std::size_t w = 0; w < err.size(); ++w)
      if (!err[w].empty()) std::printf("  world rank %zu: %s\n", w, err[w].c_str());
    failed += ok != a.world;
  }
  return failed ? 1 : 0;
}

#ifdef DTENSOR_WITH_MPI
// The plan of case k. Under SimGrid's SMPI every simulated rank is a context of one process, and
// planning a transfer between two 1,024-rank meshes takes seconds: the first rank to reach a case
// plans it and the others reuse that plan (planning calls no MPI, so no other rank runs meanwhile;
// the case must match in full). Under real MPI each process plans each case once, as before.
// The last two cases are kept: ranks are at most one case apart (each case splits the world).
const CrossMeshPlan& planned_once(std::int64_t k, const Case& c, std::int64_t world) {
  static std::map<std::int64_t, std::pair<Case, CrossMeshPlan>> planned;
  if (auto it = planned.find(k); it != planned.end() && it->second.first == c) return it->second.second;
  while (!planned.empty() && planned.begin()->first < k - 1) planned.erase(planned.begin());
  auto plan = plan_cross_mesh(c.src, c.src_ranks, c.dst, c.dst_ranks, CostModel::default_model(),
                              CrossMeshOptions{{}, world, {}, {}, nullptr});
  return (planned.insert_or_assign(k, std::pair{c, std::move(plan)}).first)->second.second;
}

int run_mpi(const Args& a) {
  int size = 0, me = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  std::mt19937_64 rng(a.seed);
  check_meshes_fit(a, size);
  MpiCommunicator world(Mesh(std::vector<std::int64_t>{size}), MPI_COMM_WORLD);
  int failed = 0;
  for (std::int64_t k = 0; k < a.random; ++k) {
    const Case c = draw(rng, size, a);
    const CrossMeshPlan& plan = planned_once(k, c, size);
    // each mesh's communicator: its members split off the world, ordered by mesh rank
    auto sub = [&](const std::vector<std::int64_t>& ranks, const Mesh& mesh) -> std::unique_ptr<MpiCommunicator> {
      const auto r = index_in(ranks, me);
      MPI_Comm comm = MPI_COMM_NULL;
      MPI_Comm_split(MPI_COMM_WORLD, r >= 0 ? 1 : MPI_UNDEFINED, static_cast<int>(r), &comm);
      if (comm == MPI_COMM_NULL) return nullptr;
      auto out = std::make_unique<MpiCommunicator>(mesh, comm);
      MPI_Comm_free(&comm);
      return out;
    };
    auto on_a = sub(c.src_ranks, c.src.mesh());
    auto on_b = sub(c.dst_ranks, c.dst.mesh());
    const std::string err = run_rank(plan, world, on_a.get(), on_b.get());
    int ok = err.empty() ? 1 : 0, all = 0;
    if (!err.empty()) std::fprintf(stderr, "case %lld world rank %d: %s\n", static_cast<long long>(k), me, err.c_str());
    MPI_Reduce(&ok, &all, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (me == 0) {
      std::printf("case=%lld world=%d %s verified=%d/%d\n", static_cast<long long>(k), size, describe(c, plan).c_str(), all, size);
      std::fflush(stdout);
    }
    failed += all != size;
  }
  MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return failed ? 1 : 0;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  bool mpi = false;
  try {
    const Args a = parse(argc, argv);
    if (a.backend == "threads") return run_threads(a);
#ifdef DTENSOR_WITH_MPI
    MPI_Init(&argc, &argv);
    mpi = true;
    const int status = run_mpi(a);
    MPI_Finalize();
    return status;
#else
    throw InputError("this build has no MPI backend (install libopenmpi-dev and rebuild)");
#endif
  } catch (const InputError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
#ifdef DTENSOR_WITH_MPI
    if (mpi) MPI_Abort(MPI_COMM_WORLD, 2);
#endif
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
#ifdef DTENSOR_WITH_MPI
    if (mpi) MPI_Abort(MPI_COMM_WORLD, 4);
#endif
    return 4;
  }
}
