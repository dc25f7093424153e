#pragma once
#include <string>
#include <vector>

#ifdef exit
// smpicxx (the SimGrid build, docs/virtual-cluster.md) defines exit(x) as a macro, which CLI11's
// App::exit(error, out, err) cannot take; the CLI ends by returning from main, never by exit().
#undef exit
#endif
#include <CLI/CLI.hpp>

#include "dtensor/error.hpp"
#include "dtensor/layout.hpp"
#include "dtensor/cross_mesh_executor.hpp"
#include "dtensor/planner.hpp"
#include "dtensor/ragged.hpp"

namespace dtensor::cli {

// Flags shared by `plan` and `simulate`.
struct PlanArgs {
  std::string mesh, shape, from, to, dtype = "f32", cost_model = "default", edges, format = "text";
  std::string max_memory;
  bool max_memory_given = false;
  std::string max_states, max_search_memory;  // `--max-memory ''` is an error, not "no limit"
  bool explain = false;
  std::string batch;  // --batch FILE: a batch file instead of --mesh/--shape/--from/--to
  std::string to_mesh, ranks, to_ranks;  // cross-mesh: --to-mesh M2 --ranks LIST --to-ranks LIST
};
void add_plan_flags(CLI::App& cmd, PlanArgs& a);

struct PlanRequest {
  Layout src;
  Layout dst;
  CostModel cost;
  PlanOptions options;
};
[[nodiscard]] PlanRequest make_request(const PlanArgs& a);
// --from/--to with a RaggedShard (`plan`, `simulate`).
struct RaggedRequest {
  RaggedLayout src, dst;
  CostModel cost;
  PlanOptions options;
};
[[nodiscard]] RaggedRequest make_ragged_request(const PlanArgs& a);
// --to-mesh: the source on --mesh at --ranks, the target on --to-mesh at --to-ranks.
struct CrossRequest {
  Layout src, dst;
  std::vector<std::int64_t> src_ranks, dst_ranks;
  CostModel cost;
  PlanOptions options;
};
[[nodiscard]] CrossRequest make_cross_request(const PlanArgs& a);
// The cross-mesh plan of a request, under its options.
[[nodiscard]] CrossMeshPlan plan_of(const CrossRequest& req);
// The cost model and options of the flags, for --batch (no layouts).
[[nodiscard]] PlanRequest make_batch_request(const PlanArgs& a);
// --batch FILE: the pairs of a batch file (at most 64 MiB).
[[nodiscard]] std::vector<std::pair<Layout, Layout>> read_batch_file(const std::string& path);

// Block grid of which ranks own which part of a 1-d or 2-d tensor, or "" when not drawable.
[[nodiscard]] std::string ownership_grid(const Layout& l, std::size_t max_blocks = 48);

void check_format(const std::string& format);
// "1GiB", "512MiB", "64KiB", "1e9"-free byte counts: an integer with an optional unit
// (B, KiB, MiB, GiB, TiB, or K/M/G/T as 1024-based, KB/MB/GB/TB as 1000-based).
[[nodiscard]] std::int64_t parse_bytes(const std::string& flag, const std::string& text);
// A non-negative integer below `limit` for `flag`, strictly (no sign tricks, no saturation).
[[nodiscard]] std::int64_t parse_index(const std::string& flag, const std::string& text, std::int64_t limit);
// Runs `f`, prefixing an InputError with the flag it came from ("--from: ...").
template <typename F>
auto for_flag(const char* flag, F&& f) {
  try {
    return f();
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", flag, e.what()));
  }
}

// Each registers a subcommand whose callback prints to stdout and throws dtensor::Error on bad input.
void register_layout(CLI::App& app);
void register_load_plan(CLI::App& app);
void register_plan(CLI::App& app);
void register_simulate(CLI::App& app);
void register_show(CLI::App& app);
void register_tune(CLI::App& app);
void register_tune_storage(CLI::App& tune);  // `tune storage`, under register_tune's subcommand
// Exit status a callback asks for (simulate: 1 when verification fails).
extern int g_exit_status;

}  // namespace dtensor::cli
