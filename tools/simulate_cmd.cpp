#include <iostream>
#include <nlohmann/json.hpp>

#include "common.hpp"
#include "dtensor/testing.hpp"

namespace dtensor::cli {
namespace {

PlanArgs args;
std::int64_t max_values = 64;

}  // namespace

void register_simulate(CLI::App& app) {
  auto* cmd = app.add_subcommand("simulate", "plan, run on the simulated mesh, and verify every rank");
  add_plan_flags(*cmd, args);
  cmd->add_option("--show", max_values, "text format: values shown per rank")->capture_default_str();
  cmd->callback([] {
    const auto req = make_request(args);
    const Plan plan = plan_redistribution(req.src, req.dst, req.cost, req.options);
    const SimulationResult res = simulate(plan);
    if (args.format == "json") {
      auto j = nlohmann::ordered_json::parse(plan.to_json());
      j["verified"] = res.verified;
      if (!res.verified) j["mismatch"] = res.mismatch;
      j["ranks"] = nlohmann::ordered_json::array();
      for (const auto& r : res.ranks)
        j["ranks"].push_back({{"rank", r.rank}, {"coord", r.coord}, {"local_shape", r.local_shape}, {"data", r.data}});
      std::cout << j.dump() << "\n";
    } else {
      std::cout << fmt::format("simulated {} -> {} on mesh {} ({} ranks), shape {} {}\n", plan.src.str(), plan.dst.str(),
                               plan.mesh.str(), plan.mesh.num_ranks(), shape_str(plan.shape), to_string(plan.dtype));
      std::cout << fmt::format("plan: {} ({} step(s), {:.3f} us, workspace {} bytes)\n", plan.trace(), plan.steps.size(),
                               plan.total_cost_us, plan.peak_bytes);
      for (const auto& r : res.ranks) {
        std::string vals;
        for (std::size_t k = 0; k < r.data.size() && static_cast<std::int64_t>(k) < max_values; ++k)
          vals += fmt::format("{}{}", k ? " " : "", r.data[k]);
        if (static_cast<std::int64_t>(r.data.size()) > max_values) vals += fmt::format(" ... ({} values)", r.data.size());
        std::cout << fmt::format("rank {:>3} ({}) local {}: [{}]\n", r.rank, fmt::join(r.coord, ","),
                                 shape_str(r.local_shape), vals);
      }
      std::cout << (res.verified ? "verified: every rank holds exactly its target data\n"
                                 : "VERIFICATION FAILED: " + res.mismatch + "\n");
    }
    if (!res.verified) g_exit_status = 1;
  });
}

}  // namespace dtensor::cli
