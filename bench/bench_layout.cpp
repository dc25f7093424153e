// Ownership queries at scale: a 4096x4096 tensor on a 1024-rank mesh (8x8x16), per-rank index
// sets (as runs, never materialised), local shape and global offset.
#include <benchmark/benchmark.h>

#include "dtensor/layout.hpp"

using namespace dtensor;

namespace {

void BM_ownership_query(benchmark::State& st) {
  const char* placements[] = {"S(0)S(1)S(0)", "_S(0, 3)S(0)S(1)", "S(1)[1]RS(1)[0]"};
  const Layout l = Layout::parse(Mesh::parse("8x8x16"), {4096, 4096}, DType::bf16, placements[st.range(0)]);
  std::int64_t r = 0;
  for (auto _ : st) {
    const auto coord = l.mesh().coord_of_rank(r);
    benchmark::DoNotOptimize(l.indices(coord));
    benchmark::DoNotOptimize(l.global_offset(coord));
    r = (r + 37) % 1024;
  }
  st.SetLabel(placements[st.range(0)]);
}
BENCHMARK(BM_ownership_query)->DenseRange(0, 2)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
