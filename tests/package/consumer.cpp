#include <dtensor/layout.hpp>
#include <dtensor/planner.hpp>
#include <iostream>

int main() {
  const dtensor::Mesh mesh = dtensor::Mesh::parse("2x2");
  const auto src = dtensor::Layout::parse(mesh, {9, 5}, dtensor::DType::f32, "S(0)S(0)");
  const auto dst = dtensor::Layout::parse(mesh, {9, 5}, dtensor::DType::f32, "RR");
  const auto plan = dtensor::plan_redistribution(src, dst, dtensor::CostModel::default_model());
  const std::vector<std::int64_t> coord{1, 1};
  if (src.global_offset(coord)[0] != 7 || plan.steps.empty()) return 1;
  std::cout << plan.trace() << "\n";
  return 0;
}
