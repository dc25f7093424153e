#include <dtensor/executor.hpp>
#include <dtensor/layout.hpp>
#include <dtensor/planner.hpp>
#include <dtensor/sim.hpp>
#include <dtensor/viz.hpp>
#include <iostream>

int main() {
  const dtensor::Mesh mesh = dtensor::Mesh::parse("2x2");
  const auto src = dtensor::Layout::parse(mesh, {9, 5}, dtensor::DType::f32, "S(0)S(0)");
  const auto dst = dtensor::Layout::parse(mesh, {9, 5}, dtensor::DType::f32, "RR");
  const auto plan = dtensor::plan_redistribution(src, dst, dtensor::CostModel::default_model());
  const std::vector<std::int64_t> coord{1, 1};
  if (src.global_offset(coord)[0] != 7 || plan.steps.empty()) return 1;
  // one thread per rank, each with its own communicator and executor
  dtensor::SimulatedWorld world(mesh);
  int bad = 0;
  dtensor::run_rank_threads(world, [&](std::int64_t rank, dtensor::Communicator& comm) {
    const dtensor::Executor exec(plan, comm);
    const auto in = dtensor::seeded_input(src, rank);
    std::vector<std::byte> out(static_cast<std::size_t>(exec.output_bytes())),
        ws(static_cast<std::size_t>(exec.workspace_bytes()));
    exec.execute({in, out, ws});
    if (!dtensor::verify_rank_output(dst, rank, out).empty()) bad = 1;
  });
  // the installed picture library renders the plan
  const std::string svg = dtensor::viz::render_svg(plan, dtensor::viz::Options{});
  if (svg.find("<svg xmlns") == std::string::npos) return 1;
  std::cout << plan.trace() << "\n";
  return bad;
}
