// `dtensor load-plan`: the plan of a checkpoint load (docs/checkpoint.md) from a load request file,
// one tensor's part of it, or whether a plan file fits the request.
#include <charconv>
#include <cmath>
#include <iostream>

#include "common.hpp"
#include "dtensor/error.hpp"
#include "dtensor/load_request.hpp"

namespace dtensor::cli {
namespace {

struct LoadArgs {
  std::string request, cost_model = "default", read_bw, read_alpha, tensor, check, rank, fanout = "cheapest", format = "text";
} args;

// A finite number in [lo, hi] for `flag`, the whole text (no trailing garbage).
double parse_number(const char* flag, const std::string& text, double lo, double hi) {
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || !std::isfinite(v) || v < lo || v > hi)
    throw InputError(fmt::format("{} {}: a number in [{}, {}]", flag, quote_input(text), lo, hi));
  return v;
}

}  // namespace

void register_load_plan(CLI::App& app) {
  auto* cmd = app.add_subcommand("load-plan", "the plan of a checkpoint load: who reads which saved chunk, what moves after");
  cmd->add_option("--request", args.request, "load request JSON: the saved chunks and target layouts "
                                             "(dtensor.torch.checkpoint.request_json writes one)")->required();
  cmd->add_option("--cost-model", args.cost_model, "default, pytorch, or a JSON profile file (its 'storage' prices the reads)")
      ->capture_default_str();
  cmd->add_option("--read-bw", args.read_bw, "storage read bandwidth per reading rank, GB/s (overrides the profile's)");
  cmd->add_option("--read-alpha", args.read_alpha, "storage latency per chunk opened, us (overrides the profile's)");
  cmd->add_option("--fanout", args.fanout, "how replicas get their copies: cheapest (by the cost model), direct (point "
                                           "to point from the readers) or gather (sharded, then gathered inside the mesh)")
      ->capture_default_str();
  cmd->add_option("--tensor", args.tensor, "show this tensor's chunks: reader and receiving ranks");
  cmd->add_option("--rank", args.rank, "plan only this mesh rank's part, as that rank does alone: its reads, the messages "
                                       "it sends and receives, and the plan's figures");
  cmd->add_option("--check", args.check, "a plan JSON file: whether it is a plan of this request (exit 1 when not)");
  cmd->add_option("--format", args.format, "text or json")->capture_default_str();
  cmd->callback([] {
    check_format(args.format);
    if (!args.check.empty() && !args.tensor.empty())
      throw InputError(fmt::format("--tensor {} with --check: one or the other (--check checks the whole plan file; "
                                   "--tensor shows one tensor of the plan made here)", quote_input(args.tensor)));
    if (!args.rank.empty() && (!args.check.empty() || !args.tensor.empty()))
      throw InputError(fmt::format("--rank {} with --{}: one or the other", quote_input(args.rank),
                                   args.check.empty() ? "tensor" : "check"));
    const LoadRequest req = for_flag("--request", [&] {
      return LoadRequest::from_json(read_input_file(args.request, "load request", 256u << 20));
    });
    const CostModel cost = for_flag("--cost-model", [&] { return CostModel::load(args.cost_model); });
    LoadOptions o;
    if (!args.read_bw.empty()) o.read_bw_GBps = parse_number("--read-bw", args.read_bw, 1e-3, 1e6);
    if (!args.read_alpha.empty()) o.read_alpha_us = parse_number("--read-alpha", args.read_alpha, 0, 1e6);
    o.fanout = for_flag("--fanout", [&] { return parse_fanout(args.fanout); });
    if (!args.check.empty()) {
      const LoadPlan plan = for_flag("--check", [&] { return LoadPlan::from_json(read_input_file(args.check, "plan", 256u << 20)); });
      try {
        check_load_entries(plan, req.saved, req.targets);  // another load's plan exits 1
      } catch (const InputError& e) {
        std::cout << "not a plan of this request: " << e.what() << "\n";
        g_exit_status = 1;
        return;
      }
      // the figures the entries give: an edited file exits 2
      for_flag("--check", [&] { check_load_figures(plan, req.saved, req.targets, &cost); });
      std::cout << fmt::format("ok: plan {:016x} loads the request's {} tensors (every chunk read once, every rank its "
                               "elements)\n", plan.hash(), req.saved.size());
      return;
    }
    if (!args.rank.empty()) {
      const std::int64_t ranks = req.targets.empty() ? 1 : req.targets.front().mesh().num_ranks();
      const LoadPart part = plan_load_part(req.saved, req.targets, parse_index("--rank", args.rank, ranks), cost, o);
      std::cout << (args.format == "json" ? part.to_json() + "\n" : explain(part));
      return;
    }
    const LoadPlan plan = plan_load(req.saved, req.targets, cost, o);
    if (!args.tensor.empty()) {
      const auto t = for_flag("--tensor", [&] { return req.index_of(args.tensor); });
      std::cout << show_tensor(plan, req.saved, t);
      return;
    }
    std::cout << (args.format == "json" ? plan.to_json() + "\n" : explain(plan));
  });
}

}  // namespace dtensor::cli
