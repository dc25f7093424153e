#include <fmt/format.h>

#include "dtensor/error.hpp"
#include "dtensor/planner.hpp"

namespace dtensor {
namespace {

std::string group_str(const Plan& plan, const Step& s) {
  if (s.mesh_dims.empty()) return "no mesh dim";
  std::string out;
  for (std::size_t i = 0; i < s.mesh_dims.size(); ++i)
    out += (i ? " + " : "") + plan.mesh().describe_dim(s.mesh_dims[i]);
  return out;
}

std::string steps_kinds(const std::vector<Step>& steps) {
  std::string out;
  for (const auto& s : steps) out += fmt::format("{}{}[{}]", out.empty() ? "" : ", ", to_string(s.kind), fmt::join(s.mesh_dims, ","));
  return out;
}

}  // namespace

std::string runner_up_trace(const Plan& plan) {
  if (!plan.runner_up) return {};
  if (plan.runner_up->trace == plan.trace() && !plan.runner_up->steps.empty())
    return fmt::format("{} (steps: {}; the plan: {})", plan.runner_up->trace, steps_kinds(plan.runner_up->steps),
                       steps_kinds(plan.steps));
  return plan.runner_up->trace;
}

std::string explain(const Plan& plan, ExplainStyle style) {
  std::string out = fmt::format("plan {} -> {} on mesh {}, shape {} {} (cost model {}, edges {})\n", plan.src.placements_str(),
                                plan.dst.placements_str(), plan.mesh().str(), shape_str(plan.shape()), to_string(plan.dtype()),
                                plan.cost_model, to_string(plan.edges));
  if (plan.steps.empty()) out += "source and target are the same layout: nothing to do (cost 0)\n";
  if (style == ExplainStyle::table && !plan.steps.empty()) {
    out += fmt::format("\n{:>2}  {:<14} {:<9} {:<7} {:<22} {:<22} {:>12} {:>12} {:>10} {:>12} {:>12}\n", "#", "kind", "mesh",
                       "tensor", "from", "to", "sent B", "recv B", "pad B", "copy B", "cost us");
    for (std::size_t i = 0; i < plan.steps.size(); ++i) {
      const auto& s = plan.steps[i];
      out += fmt::format("{:>2}  {:<14} {:<9} {:<7} {:<22} {:<22} {:>12} {:>12} {:>10} {:>12} {:>12.3f}\n", i + 1,
                         to_string(s.kind), fmt::format("{}", fmt::join(s.mesh_dims, ",")),
                         fmt::format("{}", fmt::join(s.tensor_dims, ",")), s.from.str(), s.to.str(), s.bytes_sent,
                         s.bytes_received, s.padding_bytes, s.copy_bytes, s.cost_us);
      out += fmt::format("    why: {}\n", s.why);
    }
  }
  if (style == ExplainStyle::prose) {
    for (std::size_t i = 0; i < plan.steps.size(); ++i) {
      const Step& s = plan.steps[i];
      out += fmt::format("\nstep {}: {} over {}{}\n", i + 1, to_string(s.kind), group_str(plan, s),
                         s.inter_host ? " [inter-host link]" : (is_communication(s.kind) ? " [intra-host link]" : ""));
      out += fmt::format("  {} -> {}", s.from.str(), s.to.str());
      if (!s.tensor_dims.empty()) out += fmt::format("  (tensor dim(s) {} change)", fmt::join(s.tensor_dims, ","));
      out += fmt::format("\n  why: {}\n", s.why);
      if (is_communication(s.kind))
        out += fmt::format("  moves: {} sent, {} received per rank (largest), {} peer(s), {} of it padding\n",
                           bytes_text(s.bytes_sent), bytes_text(s.bytes_received), s.peers, bytes_text(s.padding_bytes));
      out += fmt::format("  local copies: {}; workspace live during the step: {}\n", bytes_text(s.copy_bytes),
                         bytes_text(s.peak_bytes));
      out += fmt::format("  cost: α {:.3f} us + wire {:.3f} us + copy {:.3f} us = {:.3f} us\n", s.alpha_us, s.wire_us,
                         s.copy_us, s.cost_us);
    }
  }
  out += fmt::format("\ntotal: {:.3f} us in {} step(s), workspace {} ({} bytes; {} bytes per element)\ntrace: {}\n",
                     plan.total_cost_us, plan.steps.size(), bytes_text(plan.peak_bytes), plan.peak_bytes,
                     itemsize(plan.dtype()), plan.trace());
  if (plan.runner_up)
    out += fmt::format("runner-up (cheapest plan with another first step): {:.3f} us (+{:.3f} us)\n  trace: {}\n",
                       plan.runner_up->total_cost_us, plan.runner_up->total_cost_us - plan.total_cost_us,
                       runner_up_trace(plan));
  else
    out += "runner-up: none (no other first step reaches the target)\n";
  return out;
}

}  // namespace dtensor
