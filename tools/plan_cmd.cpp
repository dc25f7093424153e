#include <iostream>

#include "common.hpp"
#include "dtensor/batch_executor.hpp"
#include "dtensor/cross_mesh_executor.hpp"
#include "dtensor/ragged_plan.hpp"

namespace dtensor::cli {
namespace {

PlanArgs args;

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
    if (args.from.find("RaggedShard") != std::string::npos || args.to.find("RaggedShard") != std::string::npos) {
      const auto req = make_ragged_request(args);
      const RaggedPlan plan = plan_ragged(req.src, req.dst, req.cost, req.options);
      std::cout << (args.format == "json" ? plan.to_json() + "\n" : plan.explain());
      return;
    }
    const auto req = make_request(args);
    const Plan plan = plan_redistribution(req.src, req.dst, req.cost, req.options);
    if (args.format == "json")
      std::cout << plan.to_json() << "\n";
    else
      std::cout << explain(plan, args.explain ? ExplainStyle::prose : ExplainStyle::table);
  });
}

}  // namespace dtensor::cli
