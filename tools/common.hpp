#pragma once
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "dtensor/layout.hpp"
#include "dtensor/planner.hpp"

namespace dtensor::cli {

// Flags shared by `plan` and `simulate`.
struct PlanArgs {
  std::string mesh, shape, from, to, dtype = "f32", cost_model = "default", edges, format = "text";
  std::string max_memory;
  bool explain = false;
};
void add_plan_flags(CLI::App& cmd, PlanArgs& a);

struct PlanRequest {
  Layout src;
  Layout dst;
  CostModel cost;
  PlanOptions options;
};
[[nodiscard]] PlanRequest make_request(const PlanArgs& a);

// Block grid of which ranks own which part of a 1-d or 2-d tensor, or "" when not drawable.
[[nodiscard]] std::string ownership_grid(const Layout& l, std::size_t max_blocks = 48);

void check_format(const std::string& format);

// Each registers a subcommand whose callback prints to stdout and throws dtensor::Error on bad input.
void register_layout(CLI::App& app);
void register_plan(CLI::App& app);
void register_simulate(CLI::App& app);
void register_show(CLI::App& app);
// Exit status a callback asks for (simulate: 1 when verification fails).
extern int g_exit_status;

}  // namespace dtensor::cli
