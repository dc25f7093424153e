// Cross-mesh resharding (docs/cross-mesh.md), one run:
//   1. sender balance: random cross-mesh pairs (1-3-d meshes, identical, overlapping and disjoint
//      rank sets), the busiest rank's transfer bytes against the balanced bound, computed here
//      independently as a max-flow problem (element-granular: any split of a run among its holders);
//   2. training -> inference: a 7B model's layer (bf16) from FSDP+TP on dp=4,tp=2 (ranks 0-7) to two
//      tp=4 replicas, colocated (ranks 0-7) and disjoint (ranks 8-15): bytes against the bounds,
//      collectives, and the time of 2 layers on the in-process backend (one thread per world rank,
//      medians), against the naive route (gather each tensor to full on A, send, slice on B);
//   3. planning all 32 layers, uncached (median of 5).
// Usage: [BENCH_SHOW=1] bench_cross_mesh [--quick | --planning]  (--quick: section 2 on a 1/8-size layer;
// --planning: section 3 alone)
#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <random>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "dtensor/cross_mesh_executor.hpp"
#include "dtensor/plan_cache.hpp"
#include "dtensor/executor.hpp"
#include "dtensor/simulated.hpp"
#include "dtensor/simulated.hpp"

using namespace dtensor;

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const auto n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// ---- 1. the balanced bound as a max flow ----------------------------------------------------

struct Flow {
  struct E {
    int to;
    std::int64_t cap;
  };
  std::vector<E> e;
  std::vector<std::vector<int>> g;
  explicit Flow(int n) : g(static_cast<std::size_t>(n)) {}
  void add(int a, int b, std::int64_t c) {
    g[static_cast<std::size_t>(a)].push_back(static_cast<int>(e.size()));
    e.push_back({b, c});
    g[static_cast<std::size_t>(b)].push_back(static_cast<int>(e.size()));
    e.push_back({a, 0});
  }
  std::int64_t run(int s, int t) {  // Edmonds-Karp
    std::int64_t total = 0;
    while (true) {
      std::vector<int> via(g.size(), -1);
      std::deque<int> q{s};
      via[static_cast<std::size_t>(s)] = -2;
      while (!q.empty() && via[static_cast<std::size_t>(t)] == -1) {
        const int u = q.front();
        q.pop_front();
        for (int id : g[static_cast<std::size_t>(u)])
          if (e[static_cast<std::size_t>(id)].cap > 0 && via[static_cast<std::size_t>(e[static_cast<std::size_t>(id)].to)] == -1) {
            via[static_cast<std::size_t>(e[static_cast<std::size_t>(id)].to)] = id;
            q.push_back(e[static_cast<std::size_t>(id)].to);
          }
      }
      if (via[static_cast<std::size_t>(t)] == -1) return total;
      std::int64_t push = std::numeric_limits<std::int64_t>::max();
      for (int v = t; v != s; v = e[static_cast<std::size_t>(via[static_cast<std::size_t>(v)] ^ 1)].to)
        push = std::min(push, e[static_cast<std::size_t>(via[static_cast<std::size_t>(v)])].cap);
      for (int v = t; v != s; v = e[static_cast<std::size_t>(via[static_cast<std::size_t>(v)] ^ 1)].to) {
        e[static_cast<std::size_t>(via[static_cast<std::size_t>(v)])].cap -= push;
        e[static_cast<std::size_t>(via[static_cast<std::size_t>(v)] ^ 1)].cap += push;
      }
      total += push;
    }
  }
};

// The least busiest-rank bytes of the transfer between the plan's two intermediate layouts over
// every way of splitting each needed element's source among the A ranks holding it (a rank on both
// meshes that holds an element it needs keeps it locally). Computed from the layouts alone.
std::int64_t balanced_bound(const CrossMeshPlan& p) {
  const auto s = static_cast<std::int64_t>(itemsize(p.src.dtype()));
  const auto NA = p.src.mesh().num_ranks(), NB = p.dst.mesh().num_ranks();
  std::vector<std::vector<IndexSet>> hold, need;
  for (std::int64_t a = 0; a < NA; ++a) hold.push_back(p.pre.dst.indices(p.src.mesh().coord_of_rank(a)));
  for (std::int64_t b = 0; b < NB; ++b) need.push_back(p.post.src.indices(p.dst.mesh().coord_of_rank(b)));
  // pieces: (b, a distinct holding) -> elements, with the A ranks holding them
  struct Piece {
    std::int64_t n;
    std::vector<std::int64_t> holders;
  };
  std::vector<Piece> pieces;
  std::vector<std::int64_t> recv(static_cast<std::size_t>(p.world_size), 0);
  for (std::int64_t b = 0; b < NB; ++b) {
    std::vector<bool> done(static_cast<std::size_t>(NA), false);
    for (std::int64_t a = 0; a < NA; ++a) {
      if (done[static_cast<std::size_t>(a)]) continue;
      std::int64_t n = 1;
      for (std::size_t d = 0; d < need[0].size(); ++d) n *= hold[static_cast<std::size_t>(a)][d].intersect(need[static_cast<std::size_t>(b)][d]).size();
      Piece pc{n, {}};
      bool local = false;
      for (std::int64_t a2 = a; a2 < NA; ++a2)
        if (hold[static_cast<std::size_t>(a2)] == hold[static_cast<std::size_t>(a)]) {
          done[static_cast<std::size_t>(a2)] = true;
          pc.holders.push_back(a2);
          local = local || p.src_ranks[static_cast<std::size_t>(a2)] == p.dst_ranks[static_cast<std::size_t>(b)];
        }
      if (n == 0 || local) continue;
      recv[static_cast<std::size_t>(p.dst_ranks[static_cast<std::size_t>(b)])] += n;
      pieces.push_back(std::move(pc));
    }
  }
  std::int64_t total = 0, lo = 0;
  for (const auto& pc : pieces) total += pc.n;
  for (auto r : recv) lo = std::max(lo, r);
  auto feasible = [&](std::int64_t T) {
    const int P = static_cast<int>(pieces.size()), src = P + static_cast<int>(NA), snk = src + 1;
    Flow f(snk + 1);
    for (int i = 0; i < P; ++i) {
      f.add(src, i, pieces[static_cast<std::size_t>(i)].n);
      for (auto a : pieces[static_cast<std::size_t>(i)].holders) f.add(i, P + static_cast<int>(a), pieces[static_cast<std::size_t>(i)].n);
    }
    for (std::int64_t a = 0; a < NA; ++a) f.add(P + static_cast<int>(a), snk, T);
    return f.run(src, snk) == total;
  };
  std::int64_t hi = std::max(lo, total);
  if (!feasible(lo)) {
    while (hi - lo > 1) {
      const auto mid = lo + (hi - lo) / 2;
      (feasible(mid) ? hi : lo) = mid;
    }
    lo = hi;
  }
  return lo * s;
}

void section_balance(std::int64_t max_dim) {
  std::mt19937_64 rng(7);
  const std::vector<std::string> meshes{"4", "8", "3", "6", "2x2", "2x4", "4x2", "2x3", "2x2x2"};
  const std::vector<std::string> src_opts{"R", "S(0)", "S(1)", "P(sum)"}, dst_opts{"R", "S(0)", "S(1)"};
  auto pick = [&](const std::vector<std::string>& v) { return v[rng() % v.size()]; };
  double worst = 0, sum = 0;
  int over = 0, n = 0, tight = 0;
  for (int i = 0; i < 300; ++i) {
    const Mesh ma = Mesh::parse(pick(meshes)), mb = Mesh::parse(pick(meshes));
    const std::vector<std::int64_t> shape{1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(max_dim)),
                                          1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(max_dim))};
    std::string pa, pb;
    for (int m = 0; m < ma.ndim(); ++m) pa += pick(src_opts);
    for (int m = 0; m < mb.ndim(); ++m) pb += pick(dst_opts);
    std::vector<std::int64_t> ra, rb;
    for (std::int64_t r = 0; r < ma.num_ranks(); ++r) ra.push_back(r);
    const int how = static_cast<int>(rng() % 3);
    for (std::int64_t r = 0; r < mb.num_ranks(); ++r)
      rb.push_back(how == 0 ? r : how == 1 ? ma.num_ranks() + r : (mb.num_ranks() - 1 - r) + ma.num_ranks() / 2);
    const auto p = plan_cross_mesh(Layout::parse(ma, shape, DType::f32, pa), ra, Layout::parse(mb, shape, DType::f32, pb), rb,
                                   CostModel::default_model());
    const auto bound = balanced_bound(p);
    if (bound == 0) continue;
    const double ratio = static_cast<double>(p.busiest_bytes) / static_cast<double>(bound);
    worst = std::max(worst, ratio);
    sum += ratio;
    over += ratio > 1.05;
    if (ratio > 1.05 && std::getenv("BENCH_SHOW")) fmt::print("{}", explain(p));
    tight += p.busiest_bytes == bound;
    ++n;
  }
  fmt::print("1. sender balance, {} random pairs with traffic (1-3-d meshes, f32, shapes up to {}x{}):\n", n, max_dim, max_dim);
  fmt::print("   busiest rank / balanced bound (max flow): mean {:.4f}, worst {:.4f}; equal in {}, above 1.05x in {}\n",
             sum / n, worst, tight, over);
}

// ---- 2. training -> inference ------------------------------------------------------------------

struct Tensor {
  const char* name;
  std::vector<std::int64_t> shape;
  const char* from;  // on dp=4,tp=2: FSDP (dp) over TP (tp)
  const char* to;    // on rep=2,tp=4
};

std::vector<Tensor> layer(std::int64_t scale) {
  const std::int64_t h = 4096 / scale, f = 11008 / scale;
  return {{"q", {h, h}, "_S(0, 2)S(0)", "RS(0)"},      {"k", {h, h}, "_S(0, 2)S(0)", "RS(0)"},
          {"v", {h, h}, "_S(0, 2)S(0)", "RS(0)"},      {"o", {h, h}, "S(0)S(1)", "RS(1)"},
          {"gate", {f, h}, "_S(0, 2)S(0)", "RS(0)"},   {"up", {f, h}, "_S(0, 2)S(0)", "RS(0)"},
          {"down", {h, f}, "S(0)S(1)", "RS(1)"},       {"attn_norm", {h}, "S(0)R", "RR"},
          {"mlp_norm", {h}, "S(0)R", "RR"}};
}

// Busiest-rank bytes of the whole plan: each part's busiest rank, summed.
std::int64_t plan_bytes(const CrossMeshPlan& p) {
  std::int64_t b = p.busiest_bytes;
  for (const auto* pl : {&p.pre, &p.post})
    for (const auto& st : pl->steps) b += std::max(st.bytes_sent, st.bytes_received);
  return b;
}

// Median wall time (ms) of executing `plans` one after another on every world rank at once.
double time_plans(const std::vector<CrossMeshPlan>& plans, int reps) {
  const auto& p0 = plans.front();
  const auto W = p0.world_size;
  SimulatedWorld world(Mesh(std::vector<std::int64_t>{W})), on_a(p0.src.mesh()), on_b(p0.dst.mesh());
  std::vector<double> times;
  std::barrier sync(W + 1);
  std::vector<std::thread> threads;
  for (std::int64_t w = 0; w < W; ++w)
    threads.emplace_back([&, w] {
      const auto ia = std::find(p0.src_ranks.begin(), p0.src_ranks.end(), w), ib = std::find(p0.dst_ranks.begin(), p0.dst_ranks.end(), w);
      Communicator* ca = ia == p0.src_ranks.end() ? nullptr : &on_a.communicator(ia - p0.src_ranks.begin());
      Communicator* cb = ib == p0.dst_ranks.end() ? nullptr : &on_b.communicator(ib - p0.dst_ranks.begin());
      std::vector<CrossMeshExecutor> ex;
      std::vector<std::vector<std::byte>> in, out, ws;
      for (const auto& p : plans) {
        ex.emplace_back(p, world.communicator(w), ca, cb);
        in.emplace_back(static_cast<std::size_t>(ex.back().input_bytes()), std::byte{1});
        out.emplace_back(static_cast<std::size_t>(ex.back().output_bytes()));
        ws.emplace_back(static_cast<std::size_t>(ex.back().workspace_bytes()));
      }
      for (int r = 0; r < reps; ++r) {
        sync.arrive_and_wait();
        for (std::size_t k = 0; k < plans.size(); ++k) ex[k].execute(Buffers{in[k], out[k], ws[k]});
        sync.arrive_and_wait();
      }
    });
  for (int r = 0; r < reps; ++r) {
    sync.arrive_and_wait();
    const auto t0 = Clock::now();
    sync.arrive_and_wait();
    times.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  for (auto& t : threads) t.join();
  return median(times);
}

void section_training_to_inference(bool quick) {
  const std::int64_t scale = quick ? 8 : 1;
  const Mesh a = Mesh::parse("dp=4,tp=2"), b = Mesh::parse("rep=2,tp=4");
  const std::vector<std::int64_t> ra{0, 1, 2, 3, 4, 5, 6, 7};
  fmt::print("2. training -> inference: a 7B layer{} (bf16) from dp=4,tp=2 on ranks 0-7 to rep=2,tp=4\n",
             quick ? " at 1/8 of each dim" : "");
  for (const bool disjoint : {false, true}) {
    std::vector<std::int64_t> rb;
    for (std::int64_t r = 0; r < 8; ++r) rb.push_back(disjoint ? 8 + r : r);
    std::vector<CrossMeshPlan> plans, naive;
    std::int64_t cross = 0, lb_cross = 0, busiest = 0, bound = 0, bytes = 0, naive_bytes = 0, naive_cross = 0, colls = 0,
                 naive_colls = 0, gathers_in_b = 0, at_bound = 0;
    for (const auto& t : layer(scale)) {
      const Layout src = Layout::parse(a, t.shape, DType::bf16, t.from), dst = Layout::parse(b, t.shape, DType::bf16, t.to);
      auto p = plan_cross_mesh(src, ra, dst, rb, CostModel::default_model());
      CrossMeshOptions o;
      o.src_via = Sharding::replicated(2, static_cast<int>(t.shape.size()));
      o.dst_via = dst.sharding();
      auto q = plan_cross_mesh(src, ra, dst, rb, CostModel::default_model(), o);
      const auto lb = src.numel() * 2;  // disjoint: each element crosses at least once
      const bool gathers = !p.post.steps.empty();
      gathers_in_b += gathers;
      if (disjoint && gathers) at_bound += p.transfer_bytes == lb;
      cross += p.transfer_bytes;
      lb_cross += lb;
      busiest += p.busiest_bytes;
      bound += balanced_bound(p);
      bytes += plan_bytes(p);
      colls += p.collectives();
      naive_bytes += plan_bytes(q);
      naive_cross += q.transfer_bytes;
      naive_colls += q.collectives();
      plans.push_back(std::move(p));
      naive.push_back(std::move(q));
    }
    fmt::print("   {} (B on ranks {}):\n", disjoint ? "disjoint" : "colocated", disjoint ? "8-15" : "0-7");
    fmt::print("     plans: {} of 9 tensors gather inside B{}; collectives {} (naive {})\n", gathers_in_b,
               disjoint ? fmt::format(", {} of those cross exactly the lower bound", at_bound) : "", colls, naive_colls);
    fmt::print("     bytes crossing between ranks {} (each element once: {}; naive {})\n", cross, lb_cross, naive_cross);
    fmt::print("     busiest rank's transfer bytes {} vs balanced bound {} (ratio {:.4f})\n", busiest, bound,
               static_cast<double>(busiest) / static_cast<double>(bound));
    fmt::print("     busiest rank's bytes, all parts: {} vs naive {} ({:.2f}x fewer)\n", bytes, naive_bytes,
               static_cast<double>(naive_bytes) / static_cast<double>(bytes));
    std::vector<CrossMeshPlan> two = plans, two_naive = naive;
    two.insert(two.end(), plans.begin(), plans.end());
    two_naive.insert(two_naive.end(), naive.begin(), naive.end());
    const int reps = quick ? 3 : 3;
    const double t = time_plans(two, reps), tn = time_plans(two_naive, reps);
    fmt::print("     2 layers, in-process backend ({} threads on this machine), median of {}: {:.1f} ms vs naive {:.1f} ms ({:.2f}x)\n",
               plans.front().world_size, reps, t, tn, tn / t);
  }
  fmt::print("\n");
}

// ---- 3. planning 32 layers ----------------------------------------------------------------------

void section_planning() {
  const Mesh a = Mesh::parse("dp=4,tp=2"), b = Mesh::parse("rep=2,tp=4");
  const std::vector<std::int64_t> ra{0, 1, 2, 3, 4, 5, 6, 7}, rb{8, 9, 10, 11, 12, 13, 14, 15};
  const auto l = layer(1);
  std::vector<double> ms;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = Clock::now();
    for (int layer_i = 0; layer_i < 32; ++layer_i)
      for (const auto& t : l) {
        const auto p = plan_cross_mesh(Layout::parse(a, t.shape, DType::bf16, t.from), ra,
                                       Layout::parse(b, t.shape, DType::bf16, t.to), rb, CostModel::default_model());
        if (p.total_cost_us <= 0) std::abort();
      }
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  fmt::print("3. planning all 32 layers (288 tensors, disjoint ranks), every part planned: median {:.1f} ms (target 50 ms: {:.2f}x)\n",
             median(ms), median(ms) / 50);
  std::vector<double> cached;
  for (int rep = 0; rep < 5; ++rep) {
    PlanCache cache;  // fresh each time: the first layer plans, the other 31 reuse its parts
    CrossMeshOptions o;
    o.cache = &cache;
    const auto t0 = Clock::now();
    for (int layer_i = 0; layer_i < 32; ++layer_i)
      for (const auto& t : l) {
        const auto p = plan_cross_mesh(Layout::parse(a, t.shape, DType::bf16, t.from), ra,
                                       Layout::parse(b, t.shape, DType::bf16, t.to), rb, CostModel::default_model(), o);
        if (p.total_cost_us <= 0) std::abort();
      }
    cached.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  fmt::print("   the same with one PlanCache for the parts (empty at the start of each run): median {:.1f} ms ({:.2f}x the target)\n",
             median(cached), median(cached) / 50);
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  if (argc > 1 && std::strcmp(argv[1], "--planning") == 0) {
    section_planning();
    return 0;
  }
  section_balance(4096);  // bandwidth-bound: the split senders pay
  section_balance(64);    // latency-bound: the cost model may keep whole pieces (fewer peers)
  fmt::print("\n");
  section_training_to_inference(quick);
  section_planning();
  return 0;
}
