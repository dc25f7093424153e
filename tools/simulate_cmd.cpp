#include <climits>
#include <iostream>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include "common.hpp"
#include "dtensor/ragged_executor.hpp"
#include "dtensor/ragged_plan.hpp"
#include "dtensor/simulate.hpp"
#include "dtensor/simulated.hpp"
#include "dtensor/verify.hpp"

namespace dtensor::cli {
namespace {

PlanArgs args;
std::int64_t max_values = 64;
bool with_data = false;
std::string sim_memory_limit;

std::int64_t memory_limit() {
  return sim_memory_limit.empty() ? default_simulation_limit() : parse_bytes("--sim-memory-limit", sim_memory_limit);
}

// --batch FILE: plan the batch, run it on the simulated mesh (one thread per rank), verify every
// tensor on every rank; exit status 1 when any is wrong.
void simulate_batch() {
  const auto req = make_batch_request(args);
  const BatchPlan batch = plan_batch(read_batch_file(args.batch), req.cost, req.options);
  if (const auto need = simulation_bytes(batch), limit = memory_limit(); need > limit)
    throw InputError(fmt::format("simulating the batch of {} tensors on mesh {} needs about {} bytes of host memory, above the "
                                 "limit of {} bytes (--sim-memory-limit)",
                                 batch.size(), batch.plan(0).mesh().str(), need, limit));
  const BatchSimulationResult res = simulate(batch);
  if (args.format == "json") {
    auto j = nlohmann::ordered_json::parse(batch.to_json());
    j.erase("plans");
    j["verified"] = res.verified;
    j["collectives_issued"] = res.collectives;
    j["results"] = nlohmann::ordered_json::array();
    for (std::size_t t = 0; t < batch.size(); ++t) {
      const auto& p = batch.plan(t);
      nlohmann::ordered_json tj{{"index", t}, {"shape", p.shape()}, {"dtype", std::string(to_string(p.dtype()))},
                                {"from", p.src.placements_str()}, {"to", p.dst.placements_str()}, {"trace", p.trace()},
                                {"verified", res.mismatch[t].empty()}};
      if (!res.mismatch[t].empty()) tj["mismatch"] = res.mismatch[t];
      j["results"].push_back(std::move(tj));
    }
    std::cout << j.dump() << "\n";
  } else {
    std::cout << explain(batch);
    std::cout << fmt::format("\nsimulated on mesh {} ({} ranks): {} collective(s) issued per rank\n", batch.plan(0).mesh().str(),
                             batch.plan(0).mesh().num_ranks(), res.collectives);
    for (std::size_t t = 0; t < batch.size(); ++t)
      if (!res.mismatch[t].empty()) std::cout << fmt::format("tensor {}: VERIFICATION FAILED: {}\n", t, res.mismatch[t]);
    if (res.verified) std::cout << "verified: every rank holds exactly every tensor's target data\n";
  }
  if (!res.verified) g_exit_status = 1;
}

// --to-mesh: plan across the two meshes, run every world rank on its own thread, verify B.
void simulate_cross() {
  const auto plan = plan_of(make_cross_request(args));
  if (const auto need = simulation_bytes(plan), limit = memory_limit(); need > limit)
    throw InputError(fmt::format("simulating the cross-mesh plan needs about {} bytes of host memory, above the limit of {} "
                                 "bytes (--sim-memory-limit)", need, limit));
  const auto res = simulate(plan);
  if (args.format == "json") {
    auto j = nlohmann::ordered_json::parse(plan.to_json());
    j["verified"] = res.verified;
    if (!res.verified) j["mismatch"] = res.mismatch;
    std::cout << j.dump() << "\n";
  } else {
    std::cout << explain(plan);
    std::cout << fmt::format("simulated on the {} world ranks it uses, of a world of {} (one thread each)\n",
                             used_world_ranks(plan.src_ranks, plan.dst_ranks).size(), plan.world_size);
    std::cout << (res.verified ? "verified: every target rank holds exactly its target data\n"
                               : "VERIFICATION FAILED: " + res.mismatch + "\n");
  }
  if (!res.verified) g_exit_status = 1;
}

// A pair with a RaggedShard side: the ragged plan run on the simulated mesh (one thread per rank,
// seeded inputs), every rank verified; exit status 1 when any is wrong.
void simulate_ragged() {
  const auto req = make_ragged_request(args);
  const RaggedPlan plan = plan_ragged(req.src, req.dst, req.cost, req.options);
  const Mesh& mesh = plan.src.mesh();
  const auto R = static_cast<std::size_t>(mesh.num_ranks());
  SimulatedWorld world(mesh);
  // every rank's executor prepared from here (no plan exchange: one process made the one plan), and
  // the host memory they need counted before anything is allocated
  std::vector<std::optional<RaggedExecutor>> execs(R);
  std::int64_t need = 0;
  for (std::size_t r = 0; r < R; ++r) {
    execs[r].emplace(plan, world.communicator(static_cast<std::int64_t>(r)), ExecutorOptions{.check_plans_agree = false});
    need += execs[r]->input_bytes() + execs[r]->output_bytes() + execs[r]->workspace_bytes();
  }
  if (const auto limit = memory_limit(); need > limit)
    throw InputError(fmt::format("simulating {} on mesh {} needs about {} bytes of host memory, above the limit of {} bytes "
                                 "(--sim-memory-limit)", plan.trace(), mesh.str(), need, limit));
  std::vector<std::vector<std::byte>> outputs(R);
  run_rank_threads(world, [&](std::int64_t r, Communicator&) {
    const auto& ex = *execs[static_cast<std::size_t>(r)];
    const auto in = seeded_input(plan.src, r);
    std::vector<std::byte> ws(static_cast<std::size_t>(ex.workspace_bytes()));
    auto& out = outputs[static_cast<std::size_t>(r)];
    out.resize(static_cast<std::size_t>(ex.output_bytes()));
    ex.execute({in, out, ws});
  });
  std::string mismatch;
  if (plan.dst.is_ragged())
    for (std::size_t r = 0; r < R && mismatch.empty(); ++r) mismatch = verify_rank_output(plan.dst, static_cast<std::int64_t>(r), outputs[r]);
  else
    mismatch = verify_outputs(plan.dst.base(), outputs);  // Partial targets reduced over their groups
  if (args.format == "json") {
    auto j = nlohmann::ordered_json::parse(plan.to_json());
    j["verified"] = mismatch.empty();
    if (!mismatch.empty()) j["mismatch"] = mismatch;
    std::cout << j.dump() << "\n";
  } else {
    std::cout << plan.explain();
    std::cout << fmt::format("simulated on mesh {} ({} ranks, one thread each)\n", mesh.str(), mesh.num_ranks());
    std::cout << (mismatch.empty() ? "verified: every rank holds exactly its target data\n" : "VERIFICATION FAILED: " + mismatch + "\n");
  }
  if (!mismatch.empty()) g_exit_status = 1;
}

}  // namespace

void register_simulate(CLI::App& app) {
  auto* cmd = app.add_subcommand("simulate", "plan, run on the simulated mesh, and verify every rank");
  add_plan_flags(*cmd, args);
  cmd->add_option("--show", max_values, "text format: values shown per rank")->capture_default_str();
  cmd->add_flag("--data", with_data, "json format: include every rank's values even above 65,536 elements");
  cmd->add_option("--sim-memory-limit", sim_memory_limit,
                  "refuse simulations that need more host memory than this (default: half of this machine's memory)");
  cmd->callback([] {
    if (!args.batch.empty() && args.to_mesh.empty()) {
      simulate_batch();
      return;
    }
    if (!args.to_mesh.empty()) {
      simulate_cross();
      return;
    }
    if (args.from.find("RaggedShard") != std::string::npos || args.to.find("RaggedShard") != std::string::npos) {
      simulate_ragged();
      return;
    }
    const auto req = make_request(args);
    const Plan plan = plan_redistribution(req.src, req.dst, req.cost, req.options);
    const std::int64_t limit = memory_limit();
    if (const auto need = simulation_bytes(plan); need > limit)
      throw InputError(fmt::format("simulating {} on mesh {} needs about {} bytes of host memory, above the limit of {} bytes "
                                   "(--sim-memory-limit; --max-memory bounds the plan's workspace, not this)",
                                   plan.trace(), plan.mesh().str(), need, limit));
    const SimulationResult res = simulate(plan);
    if (args.format == "json") {
      auto j = nlohmann::ordered_json::parse(plan.to_json());
      j["verified"] = res.verified;
      if (!res.verified) j["mismatch"] = res.mismatch;
      // data: for tensors of at most 65,536 elements, or when --data asks for it
      const bool data = with_data || plan.dst.numel() <= 65536;
      j["ranks"] = nlohmann::ordered_json::array();
      for (const auto& r : res.ranks) {
        nlohmann::ordered_json rj{{"rank", r.rank}, {"coord", r.coord}, {"local_shape", r.local_shape}};
        if (data) rj["data"] = r.data;
        j["ranks"].push_back(std::move(rj));
      }
      std::cout << j.dump() << "\n";
    } else {
      std::cout << fmt::format("simulated {} -> {} on mesh {} ({} ranks), shape {} {}\n", plan.src.placements_str(), plan.dst.placements_str(),
                               plan.mesh().str(), plan.mesh().num_ranks(), shape_str(plan.shape()), to_string(plan.dtype()));
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
