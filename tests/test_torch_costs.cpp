// Fidelity with torch 2.15's graph planner: for 400 seeded random pairs (meshes 1-d to 4-d,
// Partial sum/avg/max, shard orders, uneven and size-1 dims), dtensor's `pytorch` cost model
// with the `pytorch` edge set finds a plan of exactly the cost torch's own Dijkstra finds. The
// costs were computed by torch itself (tests/data/torch_costs.txt says with which command).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "dtensor/planner.hpp"

using namespace dtensor;

namespace {
std::string trim(std::string s) {
  const auto a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t\r");
  return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
}
}  // namespace

TEST_CASE("pytorch cost model equals torch 2.15's graph-planner cost on pinned pairs", "[planner]") {
  std::ifstream in(DTENSOR_TEST_DATA "/torch_costs.txt");
  REQUIRE(in.good());
  PlanOptions o;
  o.edges = EdgeSet::pytorch;
  o.runner_up = false;
  const auto model = CostModel::pytorch();
  int pairs = 0, wrong = 0;
  std::string line;
  while (std::getline(in, line)) {
    if (trim(line).empty() || line[0] == '#') continue;
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string part; std::getline(ss, part, '|');) f.push_back(trim(part));
    REQUIRE(f.size() == 5);
    std::vector<std::int64_t> shape;
    std::stringstream sh(f[1]);
    for (std::string x; std::getline(sh, x, 'x');) shape.push_back(std::stoll(x));
    const Mesh mesh = Mesh::parse(f[0]);
    const double want = std::stod(f[4]);
    const Plan p = plan_redistribution(Layout::parse(mesh, shape, DType::bf16, f[2]),
                                       Layout::parse(mesh, shape, DType::bf16, f[3]), model, o);
    ++pairs;
    if (std::abs(p.total_cost_us - want) > 1e-9 * std::max(1.0, want)) {
      ++wrong;
      FAIL_CHECK(line << ": dtensor " << p.total_cost_us << " us via " << p.trace());
    }
  }
  CHECK(pairs >= 400);
  CHECK(wrong == 0);
}
