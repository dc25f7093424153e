#include <iostream>

#include <nlohmann/json.hpp>

#include "common.hpp"
#include "dtensor/batch_executor.hpp"
#include "dtensor/cross_mesh_executor.hpp"
#include "dtensor/ragged_bucket.hpp"
#include "dtensor/ragged_plan.hpp"

namespace dtensor::cli {
namespace {

PlanArgs args;

// --batch with RaggedShard layouts: a bucket (FSDP's flat parameter) gathered as one exchange of
// the flat buffer when the sources form one and every target is Replicate; else one ragged plan per pair.
void plan_ragged_batch(const std::vector<std::pair<RaggedLayout, RaggedLayout>>& pairs, const PlanRequest& req) {
  std::vector<RaggedLayout> srcs;
  bool to_replicate = true;
  for (const auto& [a, b] : pairs) {
    srcs.push_back(a);
    bool all_r = !b.is_ragged();
    for (const auto& p : b.base().placements()) all_r = all_r && p.is_replicate();
    to_replicate = to_replicate && all_r;
  }
  const auto bucket = to_replicate ? bucket_of(srcs) : std::nullopt;
  nlohmann::ordered_json j;
  std::string text;
  if (bucket) {
    const RaggedLayout full(Layout(bucket->flat.mesh(), bucket->flat.shape(), bucket->flat.dtype(),
                                   Sharding::replicated(bucket->flat.mesh().ndim(), 1)));
    const RaggedPlan plan = plan_ragged(bucket->flat, full, req.cost, req.options);
    text += fmt::format("a bucket of {} tensors ({} elements, {} per rank along mesh dim {}): gathered as one flat buffer; "
                        "tensor i is a view of it at offset {}\n", pairs.size(), bucket->flat.shape()[0],
                        fmt::join(bucket->flat.ragged()->units, ","), bucket->flat.ragged()->mesh_dim, fmt::join(bucket->offsets, ","));
    text += plan.explain();
    j["bucket"] = {{"layout", nlohmann::ordered_json::parse(to_json(bucket->flat))}, {"offsets", bucket->offsets},
                   {"plan", nlohmann::ordered_json::parse(plan.to_json())}};
  } else {
    j["bucket"] = nullptr;
    j["plans"] = nlohmann::ordered_json::array();
    double total = 0;
    for (const auto& [a, b] : pairs) {
      const RaggedPlan plan = plan_ragged(a, b, req.cost, req.options);
      text += plan.explain();
      total += plan.total_cost_us;
      j["plans"].push_back(nlohmann::ordered_json::parse(plan.to_json()));
    }
    text += fmt::format("{} ragged plans, {:.2f} us in all (one after another; not a bucket)\n", pairs.size(), total);
  }
  std::cout << (args.format == "json" ? j.dump() + "\n" : text);
}

}  // namespace

void register_plan(CLI::App& app) {
  auto* cmd = app.add_subcommand("plan", "the cheapest redistribution plan between two layouts");
  add_plan_flags(*cmd, args);
  cmd->add_flag("--explain", args.explain, "explain every step (text format)");
  cmd->callback([] {
    if (!args.batch.empty()) {
      const auto req = make_batch_request(args);
      const std::string file = for_flag("--batch", [&] { return read_input_file(args.batch, "batch file", 64u << 20); });
      if (file.find("RaggedShard") != std::string::npos) {
        plan_ragged_batch(for_flag("--batch", [&] { return ragged_batch_pairs_from_json(file); }), req);
        return;
      }
      const auto pairs = for_flag("--batch", [&] { return batch_pairs_from_json(file); });
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
