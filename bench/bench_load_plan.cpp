// Planning a checkpoint load at the scale of pytorch/pytorch#169113 (a LLaMA-70B load from 64 to
// 128 ranks): ~720 bf16 tensors saved as FSDP2+TP on dp=8,tp=8 (one chunk per rank and tensor,
// replicated norms once per dp rank: ~46,000 chunks), loaded as FSDP+TP on dp=16,tp=8. Prints the
// median planning time of 5 runs, the chunks, messages, bytes read against the balanced bound;
// then the same checkpoint loaded as TP on 8 replicated over dp=16 (every tensor has replicas:
// the fan-out candidates all count). Then the tiling check on 4,096 to 65,536 chunks off any grid.
// Usage: bench_load_plan [--quick]  (--quick: 8 layers instead of 80)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "dtensor/load_plan.hpp"

using namespace dtensor;

namespace {

// Each rank's box of `layout` (plain shards: one interval per dim), replicas once.
std::vector<SavedChunk> chunks_of(const Layout& layout) {
  std::vector<SavedChunk> out;
  for (std::int64_t r = 0; r < layout.mesh().num_ranks(); ++r) {
    SavedChunk c;
    for (const auto& s : layout.indices(layout.mesh().coord_of_rank(r))) {
      c.offsets.push_back(s.empty() ? 0 : s.runs().front().start);
      c.sizes.push_back(s.size());
    }
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const int layers = quick ? 8 : 80;
  const Mesh save_mesh = Mesh::parse("dp=8,tp=8"), load_mesh = Mesh::parse("dp=16,tp=8");
  struct Param {
    std::string name;
    std::vector<std::int64_t> shape;
    bool row_parallel;  // TP splits dim 1 (else dim 0); 1-d: replicated over TP
  };
  std::vector<Param> params{{"embed", {128256, 8192}, false}, {"lm_head", {128256, 8192}, false}, {"norm", {8192}, false}};
  for (int l = 0; l < layers; ++l) {
    const std::string p = fmt::format("layers.{}.", l);
    params.push_back({p + "q", {8192, 8192}, false});
    params.push_back({p + "k", {1024, 8192}, false});
    params.push_back({p + "v", {1024, 8192}, false});
    params.push_back({p + "o", {8192, 8192}, true});
    params.push_back({p + "gate", {28672, 8192}, false});
    params.push_back({p + "up", {28672, 8192}, false});
    params.push_back({p + "down", {8192, 28672}, true});
    params.push_back({p + "attn_norm", {8192}, false});
    params.push_back({p + "mlp_norm", {8192}, false});
  }
  auto placements = [](const Param& p) -> std::string {
    if (p.shape.size() == 1) return "S(0)R";
    return p.row_parallel ? "S(0)S(1)" : "S(0)S(0)";
  };
  std::vector<SavedTensor> saved;
  std::vector<Layout> targets;
  std::int64_t chunks = 0, bytes = 0;
  for (const auto& p : params) {
    const Layout src = Layout::parse(save_mesh, p.shape, DType::bf16, placements(p));
    saved.push_back({p.name, p.shape, DType::bf16, chunks_of(src)});
    targets.push_back(Layout::parse(load_mesh, p.shape, DType::bf16, placements(p)));
    chunks += static_cast<std::int64_t>(saved.back().chunks.size());
    bytes += src.numel() * 2;
  }
  fmt::print("{} tensors ({:.1f} GB bf16) saved by {} ranks in {} chunks, loaded by {} ranks\n", saved.size(), bytes / 1e9,
             save_mesh.num_ranks(), chunks, load_mesh.num_ranks());
  const CostModel cost = CostModel::default_model();
  // as FSDP+TP (the norms replicated over tp), then as TP on 8 replicated over dp=16 (inference
  // or RL rollout weights: every tensor has replicas), each with the fan-out the model picks
  auto run = [&](const char* what, const std::vector<Layout>& to) {
    std::vector<double> ms;
    LoadPlan plan;
    for (int i = 0; i < 5; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      plan = plan_load(saved, to, cost);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    fmt::print("{}: planning median {:.1f} ms of 5 (min {:.1f}, max {:.1f})\n", what, ms[2], ms.front(), ms.back());
    fmt::print("  reads: {} bytes, busiest reader {} against the balanced bound {} ({:.3f}x); {} messages, {} bytes moved\n",
               plan.total_read_bytes, plan.busiest_read_bytes, plan.balanced_read_bytes,
               static_cast<double>(plan.busiest_read_bytes) / static_cast<double>(plan.balanced_read_bytes),
               plan.messages.size(), plan.moved_bytes);
    fmt::print("  fan-out: {} tensor(s) gathered inside the mesh; predicted: reads {:.0f} us + transfer {:.0f} us + gather "
               "{:.0f} us\n", plan.staged.size(), plan.read_us, plan.transfer_us, plan.post_us);
  };
  run("FSDP+TP on dp=16,tp=8", targets);
  std::vector<Layout> replicas;
  for (const auto& p : params)
    replicas.push_back(Layout::parse(load_mesh, p.shape, DType::bf16, p.shape.size() == 1 ? "RR" : p.row_parallel ? "RS(1)" : "RS(0)"));
  run("TP on 8 x 16 replicas", replicas);
  // the tiling check off a grid: 256 rows of 65,536 columns, each row cut into 256 chunks at its
  // own offsets (too many grid cells: the sweep), at 2^12 .. 2^16 chunks (time per chunk should
  // stay about flat: O(n log n))
  for (const std::int64_t rows : {16, 64, 256}) {
    const std::int64_t C = 65536;
    SavedTensor t{"rows", {rows, C}, DType::f32, {}};
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t shift = (r * 37) % 256;
      t.chunks.push_back({{r, 0}, {1, shift}});
      for (std::int64_t k = 0; k < 255; ++k) t.chunks.push_back({{r, shift + 256 * k}, {1, 256}});
      t.chunks.push_back({{r, shift + 256 * 255}, {1, C - shift - 256 * 255}});
    }
    const Layout target = Layout::parse(Mesh::parse("2"), {rows, C}, DType::f32, "S(0)");
    std::vector<double> ms;
    for (int rep = 0; rep < 5; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      check_saved(t, target);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    fmt::print("tiling check, {} off-grid chunks: median {:.1f} ms of 5 ({:.2f} us per chunk)\n", t.chunks.size(), ms[2],
               ms[2] * 1e3 / static_cast<double>(t.chunks.size()));
  }
  return 0;
}
