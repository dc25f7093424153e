// libFuzzer: cost profiles. What loads must round-trip and give finite costs to the planner.
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "dtensor/error.hpp"
#include "dtensor/planner.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  try {
    const auto m = dtensor::CostModel::from_json(in);
    if (!(dtensor::CostModel::from_json(m.to_json()) == m)) {
      std::fprintf(stderr, "FINDING: cost profile round trip\n");
      std::abort();
    }
    const auto mesh = dtensor::Mesh::parse("2x4");
    const auto p = dtensor::plan_redistribution(dtensor::Layout::parse(mesh, {64, 64}, dtensor::DType::f32, "S(0)S(1)"),
                                                dtensor::Layout::parse(mesh, {64, 64}, dtensor::DType::f32, "P(sum)R"), m);
    if (!std::isfinite(p.total_cost_us)) {
      std::fprintf(stderr, "FINDING: a valid profile gave a non-finite plan cost\n");
      std::abort();
    }
  } catch (const dtensor::InputError&) {
  }
  return 0;
}
