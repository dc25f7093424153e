#include <iostream>

#include "common.hpp"
#include "dtensor/batch.hpp"
#include "dtensor/cross_mesh.hpp"

namespace dtensor::cli {
namespace {

PlanArgs args;

std::string plan_text(const Plan& p) {
  std::string out = fmt::format("plan {} -> {} on mesh {}, shape {} {} (cost model {}, edges {})\n", p.src.placements_str(),
                                p.dst.placements_str(), p.mesh().str(), shape_str(p.shape()), to_string(p.dtype()), p.cost_model,
                                to_string(p.edges));
  out += fmt::format("total {:.3f} us in {} step(s), peak workspace {} bytes\ntrace: {}\n", p.total_cost_us,
                     p.steps.size(), p.peak_bytes, p.trace());
  if (!p.steps.empty()) {
    out += fmt::format("\n{:>2}  {:<14} {:<9} {:<7} {:<22} {:<22} {:>12} {:>12} {:>10} {:>12} {:>12}\n", "#", "kind",
                       "mesh", "tensor", "from", "to", "sent B", "recv B", "pad B", "copy B", "cost us");
    for (std::size_t i = 0; i < p.steps.size(); ++i) {
      const auto& s = p.steps[i];
      out += fmt::format("{:>2}  {:<14} {:<9} {:<7} {:<22} {:<22} {:>12} {:>12} {:>10} {:>12} {:>12.3f}\n", i + 1,
                         to_string(s.kind), fmt::format("{}", fmt::join(s.mesh_dims, ",")),
                         fmt::format("{}", fmt::join(s.tensor_dims, ",")), s.from.str(), s.to.str(), s.bytes_sent,
                         s.bytes_received, s.padding_bytes, s.copy_bytes, s.cost_us);
      out += fmt::format("    why: {}\n", s.why);
    }
  }
  if (p.runner_up)
    out += fmt::format("\nrunner-up: {:.3f} us  {}\n", p.runner_up->total_cost_us, runner_up_trace(p));
  return out;
}

}  // namespace

void register_plan(CLI::App& app) {
  auto* cmd = app.add_subcommand("plan", "the cheapest redistribution plan between two layouts");
  add_plan_flags(*cmd, args);
  cmd->add_flag("--explain", args.explain, "explain every step (text format)");
  cmd->callback([] {
    if (!args.batch.empty()) {
      const auto req = make_batch_request(args);
      const auto pairs = read_batch_file(args.batch);
      const BatchPlan batch = plan_batch(pairs, req.cost, req.options);
      std::cout << (args.format == "json" ? batch.to_json() + "\n" : explain(batch));
      return;
    }
    if (!args.to_mesh.empty()) {
      const auto plan = plan_of(make_cross_request(args));
      std::cout << (args.format == "json" ? plan.to_json() + "\n" : explain(plan));
      return;
    }
    const auto req = make_request(args);
    const Plan plan = plan_redistribution(req.src, req.dst, req.cost, req.options);
    if (args.format == "json")
      std::cout << plan.to_json() << "\n";
    else if (args.explain)
      std::cout << explain(plan);
    else
      std::cout << plan_text(plan);
  });
}

}  // namespace dtensor::cli
