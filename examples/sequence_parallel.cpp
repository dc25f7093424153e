// Sequence-parallel activations (Megatron-style) with the C++ API and a plan cache.
//
// Activations [seq=2047, hidden=1024] live sequence-sharded over tp=8 (S(0)). Before the
// attention block they are all-gathered (S(0) -> R); the row-parallel output is a Partial sum
// that goes back to sequence sharding by reduce-scatter (P -> S(0)). A training step asks for
// these plans every layer, so they come from a PlanCache. Each plan runs on the simulated mesh
// and is verified. 2047 is odd: the last rank's shard is short (padding is planned and costed).
#include <cstdio>

#include "dtensor/simulate.hpp"
#include "dtensor/plan_cache.hpp"

using namespace dtensor;

int main() {
  const Mesh mesh = Mesh::parse("tp=8");
  const std::vector<std::int64_t> shape{2047, 1024};
  PlanCache cache(64);
  const auto cost = CostModel::default_model();
  const char* transitions[][2] = {{"S(0)", "R"}, {"P", "S(0)"}};
  for (int layer = 0; layer < 4; ++layer) {
    for (const auto& t : transitions) {
      const Layout src = Layout::parse(mesh, shape, DType::bf16, t[0]);
      const Layout dst = Layout::parse(mesh, shape, DType::bf16, t[1]);
      const auto plan = cache.get_or_plan(src, dst, cost);
      if (layer == 0) {
        std::printf("%-5s -> %-5s : %s, %.3f us, padding %lld bytes\n", t[0], t[1], plan->trace().c_str(),
                    plan->total_cost_us, static_cast<long long>(plan->steps.at(0).padding_bytes));
        const SimulationResult res = simulate(*plan, /*threads=*/true);  // one thread per rank
        if (!res.verified) {
          std::printf("verification failed: %s\n", res.mismatch.c_str());
          return 1;
        }
      }
    }
  }
  const auto s = cache.stats();
  std::printf("plan cache: %llu hits, %llu misses\n", static_cast<unsigned long long>(s.hits),
              static_cast<unsigned long long>(s.misses));
  return s.misses == 2 && s.hits == 6 ? 0 : 1;
}
