// Planners at cluster sizes (docs/scale.md): per plan kind and rank count, the planning time, the
// peak RSS and the output size, each row in its own forked process (its own peak RSS, a time
// limit). Owners: the closed-form receive times (plan_owners) against the exchange walk it
// replaced (owner_receive_us per owner, priced the same way), side by side where the walk finishes
// within the limit. Ragged FSDP-by-memory -> rows: plan_ragged, its exchanges priced over the
// pairs a sweep of the ranks' runs finds (the pair-by-pair walk it replaced: docs/scale.md).
// Cross-mesh FSDP+TP -> TP (plan_cross_mesh) and a 70B-like checkpoint load (plan_load, the
// request built in process; its parse is not timed): the new planner only (the old figures, from
// the build before, are in docs/scale.md).
// Usage: bench_scale [--smoke] [--limit SECONDS] [--only owners|ragged|cross-mesh|load]
//   (--smoke: the smallest rows only, for CI; --only: one plan kind's rows)
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "dtensor/cross_mesh_plan.hpp"
#include "dtensor/load_plan.hpp"
#include "dtensor/owners.hpp"
#include "dtensor/ragged_plan.hpp"

using namespace dtensor;

namespace {

struct Result {
  double seconds = -1;  // -1: not done within the limit (or failed)
  double rss_mib = 0;
  double output = 0;  // plan-kind specific: owners' makespan, a ragged plan's stages
};

// Runs `f` in a child process with a wall-clock limit; the child's peak RSS is its own.
Result forked(double limit_s, const std::function<double()>& f) {
  int fd[2];
  if (pipe(fd) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    alarm(static_cast<unsigned>(std::ceil(limit_s)));
    const auto t0 = std::chrono::steady_clock::now();
    const double out = f();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double msg[2] = {s, out};
    if (write(fd[1], msg, sizeof msg) != static_cast<ssize_t>(sizeof msg)) _exit(1);
    _exit(0);
  }
  close(fd[1]);
  double msg[2] = {-1, 0};
  const ssize_t got = read(fd[0], msg, sizeof msg);
  close(fd[0]);
  int status = 0;
  rusage ru{};
  wait4(pid, &status, 0, &ru);
  Result r;
  if (got == static_cast<ssize_t>(sizeof msg) && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    r.seconds = msg[0];
    r.output = msg[1];
  }
  r.rss_mib = static_cast<double>(ru.ru_maxrss) / 1024.0;
  return r;
}

std::string cell(const Result& r) {
  if (r.seconds < 0) return "not done";
  return r.seconds < 1 ? fmt::format("{:.1f} ms, {:.0f} MiB", r.seconds * 1e3, r.rss_mib)
                       : fmt::format("{:.2f} s, {:.0f} MiB", r.seconds, r.rss_mib);
}

// A 70B-like layer stack: 7 bf16 matrices per layer, S(0) over the mesh.
std::vector<Layout> llama_matrices(const Mesh& mesh, int count) {
  const std::vector<std::vector<std::int64_t>> shapes{{8192, 8192}, {1024, 8192}, {1024, 8192}, {8192, 8192},
                                                      {28672, 8192}, {8192, 28672}, {28672, 8192}};
  std::vector<Layout> out;
  for (int i = 0; i < count; ++i) out.push_back(Layout::parse(mesh, shapes[static_cast<std::size_t>(i % 7)], DType::bf16, "S(0)"));
  return out;
}

// A Llama-like load (`layers` layers of 7 bf16 matrices + 2 norms; hidden H, FFN F, KV rows KV),
// rows saved in `saved` chunks per tensor, onto `mesh` as S(0)S(1) (matrices) and RR (norms): the
// repro's request, in process. 70B: 80 layers, 8192, 28672, 1024; 405B: 126, 16384, 53248, 1024.
std::pair<std::vector<SavedTensor>, std::vector<Layout>> load_llama(std::int64_t saved, const Mesh& mesh, int layers = 80,
                                                                    std::int64_t H = 8192, std::int64_t F = 28672,
                                                                    std::int64_t KV = 1024) {
  const std::vector<std::vector<std::int64_t>> mats{{H, H}, {KV, H}, {KV, H}, {H, H}, {F, H}, {H, F}, {F, H}};
  std::vector<SavedTensor> ts;
  std::vector<Layout> targets;
  auto add = [&](std::string name, std::vector<std::int64_t> shape, const char* placements) {
    SavedTensor t{std::move(name), shape, DType::bf16, {}};
    const std::int64_t rows = shape[0], c = (rows + saved - 1) / saved;
    for (std::int64_t i = 0; i < saved; ++i) {
      const std::int64_t a = std::min(i * c, rows), b = std::min((i + 1) * c, rows);
      if (b <= a) continue;
      SavedChunk ch{std::vector<std::int64_t>(shape.size(), 0), shape};
      ch.offsets[0] = a;
      ch.sizes[0] = b - a;
      t.chunks.push_back(std::move(ch));
    }
    targets.push_back(Layout::parse(mesh, shape, DType::bf16, placements));
    ts.push_back(std::move(t));
  };
  for (int layer = 0; layer < layers; ++layer) {
    for (std::size_t k = 0; k < mats.size(); ++k) add(fmt::format("layers.{}.m{}", layer, k), mats[k], "S(0)S(1)");
    add(fmt::format("layers.{}.attn_norm", layer), {H}, "RR");
    add(fmt::format("layers.{}.ffn_norm", layer), {H}, "RR");
  }
  return {std::move(ts), std::move(targets)};
}

std::vector<std::int64_t> iota_ranks(std::int64_t from, std::int64_t n) {
  std::vector<std::int64_t> out(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) out[static_cast<std::size_t>(i)] = from + i;
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  bool smoke = false;
  std::string only;  // one plan kind's rows
  double limit = 60;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--smoke") == 0) {
      smoke = true;
    } else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
      only = argv[++i];
      if (only != "owners" && only != "ragged" && only != "cross-mesh" && only != "load") {
        std::fprintf(stderr, "error: --only %s: owners, ragged, cross-mesh or load\n", only.c_str());
        return 2;
      }
    } else if (std::strcmp(argv[i], "--limit") == 0 && i + 1 < argc) {
      limit = std::atof(argv[++i]);
      if (!(limit > 0 && limit <= 3600)) {
        std::fprintf(stderr, "error: --limit %s: seconds from 0 to 3600\n", argv[i]);
        return 2;
      }
    } else {
      std::fprintf(stderr, "usage: bench_scale [--smoke] [--limit SECONDS] [--only owners|ragged|cross-mesh|load]\n");
      return 2;
    }
  }
  const CostModel cost = CostModel::default_model();
  if (only.empty() || only == "owners") {
    fmt::print("owners (plan_owners, S(0) bf16 matrices of a 70B-like stack, owners along mesh dim 0)\n");
    fmt::print("{:>7} {:>9} | {:>26} | {:>26} | {}\n", "ranks", "matrices", "closed form (new)", "exchange walk (old)",
               "makespan");
    const std::vector<std::pair<std::int64_t, int>> owner_rows =
        smoke ? std::vector<std::pair<std::int64_t, int>>{{64, 200}}
              : std::vector<std::pair<std::int64_t, int>>{{64, 200}, {256, 560}, {256, 600}, {1024, 1000}, {2048, 1000},
                                                          {8192, 1000}};
    for (const auto& [ranks, count] : owner_rows) {
      const Mesh mesh({ranks});
      const auto layouts = llama_matrices(mesh, count);
      const Result now = forked(limit, [&] { return plan_owners(layouts, 0, cost).makespan_us; });
      // the old table: every tensor's every owner priced by the exchange walk (owner_receive_us),
      // then the same LPT on it (evaluate_owners with plan_owners' owners prices nothing new)
      Result old;
      if (ranks <= 1024) {
        old = forked(limit, [&] {
          std::vector<double> table;
          table.reserve(static_cast<std::size_t>(count * ranks));
          for (const auto& l : layouts)
            for (std::int64_t o = 0; o < ranks; ++o) table.push_back(owner_receive_us(l, 0, o, cost));
          return table.back();
        });
      }
      fmt::print("{:>7} {:>9} | {:>26} | {:>26} | {:.1f} us\n", ranks, count, cell(now), cell(old), now.output);
    }
  }
  if (only.empty() || only == "ragged") {
    fmt::print("\nragged FSDP-by-memory -> rows (plan_ragged, bf16 24 rows per rank x 1024, units 1,3 alternating -> S(0))\n");
    fmt::print("{:>7} | {:>26} | {}\n", "ranks", "plan_ragged", "stages");
    const std::vector<std::int64_t> ragged_rows =
        smoke ? std::vector<std::int64_t>{64} : std::vector<std::int64_t>{64, 256, 512, 1024, 8192};
    auto units_of = [](std::int64_t n) {
      std::string units;
      for (std::int64_t r = 0; r < n; ++r) units += (r ? "," : "") + std::string(r % 2 ? "3" : "1");
      return units;
    };
    for (const auto ranks : ragged_rows) {
      const Mesh mesh({ranks});
      const std::string units = units_of(ranks);
      const Result r = forked(limit, [&] {
        const auto src = RaggedLayout::parse(mesh, {24 * ranks, 1024}, DType::bf16, "RaggedShard((0,),(" + units + "))");
        const auto dst = RaggedLayout::parse(mesh, {24 * ranks, 1024}, DType::bf16, "S(0)");
        return static_cast<double>(plan_ragged(src, dst, cost).stages.size());
      });
      fmt::print("{:>7} | {:>26} | {:.0f}\n", ranks, cell(r), r.output);
    }
    if (!smoke) {  // 2-d: ragged rows beside a column split, to rows and columns
      const Mesh mesh({64, 8});
      const std::string units = units_of(64);
      const Result r = forked(limit, [&] {
        const auto src = RaggedLayout::parse(mesh, {1536, 1024}, DType::bf16, "RaggedShard((0,),(" + units + "))S(1)");
        const auto dst = RaggedLayout::parse(mesh, {1536, 1024}, DType::bf16, "S(0)S(1)");
        return static_cast<double>(plan_ragged(src, dst, cost).stages.size());
      });
      fmt::print("{:>7} | {:>26} | {:.0f}   (64x8, RaggedShard((0,),(1,3,...))S(1) -> S(0)S(1), 1536x1024)\n", 512, cell(r), r.output);
    }
  }
  if (only.empty() || only == "cross-mesh") {
    fmt::print("\ncross-mesh FSDP+TP -> TP (plan_cross_mesh, 16384x8192 bf16, S(0)S(1) on Nx8 -> RS(1) on (N/2)x8, disjoint world ranks)\n");
    fmt::print("{:>13} | {:>26} | {}\n", "ranks", "plan_cross_mesh", "messages");
    const std::vector<std::int64_t> cross_rows = smoke ? std::vector<std::int64_t>{64} : std::vector<std::int64_t>{64, 256, 512, 1024};
    for (const auto rows : cross_rows) {
      const Result r = forked(limit, [&] {
        const Mesh a({rows, 8}), b({rows / 2, 8});
        const auto src = Layout::parse(a, {16384, 8192}, DType::bf16, "S(0)S(1)");
        const auto dst = Layout::parse(b, {16384, 8192}, DType::bf16, "RS(1)");
        const auto ra = iota_ranks(0, rows * 8), rb = iota_ranks(rows * 8, rows * 4);
        return static_cast<double>(plan_cross_mesh(src, ra, dst, rb, cost).messages.size());
      });
      fmt::print("{:>13} | {:>26} | {:.0f}\n", fmt::format("{} -> {}", rows * 8, rows * 4), cell(r), r.output);
    }
  }
  if (only.empty() || only == "load") {
    fmt::print("\ncheckpoint load, Llama-like (layers x 7 matrices + 2 norms, bf16, rows saved in S chunks) -> S(0)S(1)/RR\n"
               "(plan_load: the whole plan; plan_load_part: rank 0's part, planned alone)\n");
    fmt::print("{:>5} {:>6} {:>8} | {:>26} | {:>26} | {}\n", "model", "saved", "mesh", "plan_load", "plan_load_part",
               "messages (whole / rank 0)");
    struct Row {
      const char* model;
      std::int64_t saved;
      std::vector<std::int64_t> mesh;
    };
    const std::vector<Row> load_rows =
        smoke ? std::vector<Row>{{"70B", 16, {4, 4}}}
              : std::vector<Row>{{"70B", 64, {8, 16}}, {"70B", 256, {64, 8}}, {"70B", 1024, {128, 16}}, {"405B", 1024, {1024, 8}}};
    for (const auto& row : load_rows) {
      const Mesh mesh(row.mesh);
      const bool big = std::string_view(row.model) == "405B";
      const auto [ts, targets] = big ? load_llama(row.saved, mesh, 126, 16384, 53248, 1024) : load_llama(row.saved, mesh);
      const Result whole = forked(limit, [&] { return static_cast<double>(plan_load(ts, targets, cost).messages.size()); });
      const Result part =
          forked(limit, [&] { return static_cast<double>(plan_load_part(ts, targets, 0, cost).plan.messages.size()); });
      fmt::print("{:>5} {:>6} {:>8} | {:>26} | {:>26} | {:.0f} / {:.0f}\n", row.model, row.saved, mesh.str(), cell(whole),
                 cell(part), whole.output, part.output);
    }
  }
  return 0;
}
