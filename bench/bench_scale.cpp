// Planners at cluster sizes (docs/scale.md): per plan kind and rank count, the planning time, the
// peak RSS and the output size, each row in its own forked process (its own peak RSS, a time
// limit). Owners: the closed-form receive times (plan_owners) against the exchange walk it
// replaced (owner_receive_us per owner, priced the same way), side by side where the walk finishes
// within the limit. Ragged FSDP-by-memory -> rows: plan_ragged, its exchanges priced over the
// pairs a sweep of the ranks' runs finds (the pair-by-pair walk it replaced: docs/scale.md).
// Usage: bench_scale [--smoke] [--limit SECONDS]   (--smoke: the smallest rows only, for CI)
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

}  // namespace

int main(int argc, char** argv) {
  bool smoke = false;
  double limit = 60;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--smoke") == 0) {
      smoke = true;
    } else if (std::strcmp(argv[i], "--limit") == 0 && i + 1 < argc) {
      limit = std::atof(argv[++i]);
      if (!(limit > 0 && limit <= 3600)) {
        std::fprintf(stderr, "error: --limit %s: seconds from 0 to 3600\n", argv[i]);
        return 2;
      }
    } else {
      std::fprintf(stderr, "usage: bench_scale [--smoke] [--limit SECONDS]\n");
      return 2;
    }
  }
  const CostModel cost = CostModel::default_model();
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
  fmt::print("\nragged FSDP-by-memory -> rows (plan_ragged, bf16 24 rows per rank x 1024, units 1,3 alternating -> S(0))\n");
  fmt::print("{:>7} | {:>26} | {}\n", "ranks", "plan_ragged", "stages");
  const std::vector<std::int64_t> ragged_rows = smoke ? std::vector<std::int64_t>{64} : std::vector<std::int64_t>{64, 256, 512, 1024};
  for (const auto ranks : ragged_rows) {
    const Mesh mesh({ranks});
    std::string units;
    for (std::int64_t r = 0; r < ranks; ++r) units += (r ? "," : "") + std::string(r % 2 ? "3" : "1");
    const Result r = forked(limit, [&] {
      const auto src = RaggedLayout::parse(mesh, {24 * ranks, 1024}, DType::bf16, "RaggedShard((0,),(" + units + "))");
      const auto dst = RaggedLayout::parse(mesh, {24 * ranks, 1024}, DType::bf16, "S(0)");
      return static_cast<double>(plan_ragged(src, dst, cost).stages.size());
    });
    fmt::print("{:>7} | {:>26} | {:.0f}\n", ranks, cell(r), r.output);
  }
  return 0;
}
