// libFuzzer: structural plan mutations. The input picks a small redistribution (mesh, shape,
// source and target placements), plans it, then applies up to four mutations from
// tests/plan_mutations.hpp (kinds, mesh dims, tensor dims, states, every buffer field, step
// order, workspace), each to the previous mutant. Every mutant must either be refused with an
// InputError or run to the verified result; never crash, hang or touch memory outside its
// buffers (ASan/UBSan), never a wrong answer (FINDING abort).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "dtensor/error.hpp"
#include "dtensor/planner.hpp"
#include "dtensor/simulate.hpp"
#include "plan_mutations.hpp"

using namespace dtensor;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::size_t at = 0;
  auto next = [&]() -> unsigned { return at < size ? data[at++] : 0u; };
  static const std::vector<std::vector<std::int64_t>> meshes{{4}, {2, 2}, {2, 3}, {2, 1, 2}, {3}};
  const auto& ms = meshes[next() % meshes.size()];
  const std::vector<std::int64_t> shape{static_cast<std::int64_t>(next() % 9), static_cast<std::int64_t>(next() % 7)};
  static const char* const pls[] = {"R", "P(sum)", "P(avg)", "P(max)", "S(0)", "S(1)", "_S(0, 2)", "_S(1, 2)"};
  auto placements = [&] {
    std::string s;
    for (std::size_t m = 0; m < ms.size(); ++m) s += pls[next() % 8];
    return s;
  };
  const std::string from = placements(), to = placements();
  try {
    const Mesh mesh(ms);
    PlanOptions o;
    o.runner_up = false;
    o.edges = next() % 2 ? EdgeSet::all : EdgeSet::pytorch;
    Plan p = plan_redistribution(Layout::parse(mesh, shape, DType::f32, from), Layout::parse(mesh, shape, DType::f32, to),
                                 CostModel::default_model(), o);
    const unsigned rounds = 1 + next() % 4;
    for (unsigned r = 0; r < rounds; ++r) {
      const auto all = plan_mutations::all(p);
      if (all.empty()) break;
      const unsigned pick = next() | (next() << 8);
      p = all[pick % all.size()];
    }
    const auto res = simulate(p);
    if (!res.verified) {
      std::fprintf(stderr, "FINDING: an accepted mutant ran to a wrong result: %s\n%s\n", res.mismatch.c_str(),
                   p.to_json(1).c_str());
      std::abort();
    }
  } catch (const InputError&) {
  }
  return 0;
}
