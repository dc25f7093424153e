#pragma once
// Shared by the host and GPU executor tests: the SPEC §5 global values, the oracle check of a
// run's outputs, the case enumeration, and running a plan on an in-process world in any Memory.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "dtensor/layout.hpp"
#include "dtensor/planner.hpp"
#include "dtensor/scalar.hpp"
#include "dtensor/executor.hpp"
#include "dtensor/simulated.hpp"
#include "dtensor/verify.hpp"
#include "oracle.hpp"

namespace exec_check {
using namespace dtensor;

struct Run {
  std::vector<std::vector<std::byte>> outputs;
};

// The value of global element `id`, written from SPEC §5 (not the library's function).
inline double global_value(DType t, std::int64_t id, std::int64_t ranks) {
  // f32/i32: mod 2^24 / 2^31 divided by the next power of two >= 2 * ranks (docs/cli.md)
  std::int64_t room = 2;
  while (room < 2 * ranks && room < (std::int64_t{1} << 20)) room *= 2;
  switch (t) {
    case DType::f32: return static_cast<double>(id % ((std::int64_t{1} << 24) / room));
    case DType::i32: return static_cast<double>(id % ((std::int64_t{1} << 31) / room));
    case DType::f8e4m3: return static_cast<double>(id % 16);
    case DType::f8e5m2: return static_cast<double>(id % 8);
    case DType::bf16: case DType::f16: case DType::u8: return static_cast<double>(id % 256);
    case DType::i8: return static_cast<double>(id % 128);
    case DType::boolean: return static_cast<double>(id % 2);
    default: return static_cast<double>(id);
  }
}

// "" when every rank's output matches the oracle for layout `pls`.
inline std::string check(const std::vector<std::int64_t>& mesh, const std::vector<std::int64_t>& shape, DType dt,
                  const std::vector<oracle::Pl>& pls, const Run& run) {
  const Mesh m(mesh);
  std::vector<int> partial;
  for (std::size_t k = 0; k < pls.size(); ++k)
    if (oracle::is_partial(pls[k])) partial.push_back(static_cast<int>(k));
  for (std::int64_t r = 0; r < m.num_ranks(); ++r) {
    const auto c = m.coord_of_rank(r);
    const auto ids = oracle::local_ids(shape, oracle::owned(mesh, shape, pls, c));
    const auto& out = run.outputs[static_cast<std::size_t>(r)];
    if (out.size() != ids.size() * itemsize(dt)) return fmt::format("rank {}: {} bytes for {} elements", r, out.size(), ids.size());
    // members of this rank's Partial group (varying the partial coordinates)
    std::vector<std::int64_t> group;
    std::vector<std::int64_t> cc = c;
    for (int pm : partial) cc[static_cast<std::size_t>(pm)] = 0;
    while (true) {
      group.push_back(m.rank_at(cc));
      std::size_t k = partial.size();
      bool done = true;
      while (k-- > 0) {
        auto& x = cc[static_cast<std::size_t>(partial[k])];
        if (++x < mesh[static_cast<std::size_t>(partial[k])]) { done = false; break; }
        x = 0;
      }
      if (done) break;
    }
    for (std::size_t e = 0; e < ids.size(); ++e) {
      double v;
      if (partial.empty()) {
        v = load_element(dt, out.data(), static_cast<std::int64_t>(e));
      } else {
        const char op = pls[static_cast<std::size_t>(partial[0])].kind;
        const bool linear = op == 'P' || op == 'A';
        v = linear ? 0.0 : load_element(dt, run.outputs[static_cast<std::size_t>(group[0])].data(), static_cast<std::int64_t>(e));
        for (std::size_t g = linear ? 0 : 1; g < group.size(); ++g) {
          const double x = load_element(dt, run.outputs[static_cast<std::size_t>(group[g])].data(), static_cast<std::int64_t>(e));
          v = linear ? v + x : op == 'M' ? std::max(v, x) : op == 'N' ? std::min(v, x) : v * x;
        }
        if (linear)
          for (int pm : partial)
            if (pls[static_cast<std::size_t>(pm)].kind == 'A') v /= static_cast<double>(mesh[static_cast<std::size_t>(pm)]);
      }
      const double want = global_value(dt, ids[e], m.num_ranks());
      const bool ok = dt == DType::boolean ? ((v != 0) == (want != 0)) : v == want;
      if (!ok) return fmt::format("rank {} element {} (global {}): {} != {}", r, e, ids[e], v, want);
    }
  }
  return "";
}

// Partial(avg) needs a floating dtype: layouts with it on an integer or bool dtype are refused.
inline bool refuses_avg(const std::vector<oracle::Pl>& pls, DType t) {
  return !is_floating(t) && std::any_of(pls.begin(), pls.end(), [](const oracle::Pl& p) { return p.kind == 'A'; });
}

inline std::vector<oracle::Pl> placement_options(int tensor_ndim) {
  std::vector<oracle::Pl> o{{'R'}, {'P'}, {'A'}, {'M'}, {'N'}, {'X'}};
  for (int d = 0; d < tensor_ndim; ++d) {
    o.push_back({'S', d, 1});
    o.push_back({'T', d, 2});
  }
  return o;
}

using oracle::for_each_shape;

// fn(dtype, a, b, shape, plan) for `per_dtype` random pairs of every dtype on `mesh` (2-d
// layouts and shapes up to 8x8, drawn from `seed`; pairs with Partial(avg) on an integer dtype
// skipped), each planned under the default model.
template <class F>
void for_each_random_pair(const std::vector<std::int64_t>& mesh, int per_dtype, std::uint64_t seed, F&& fn) {
  const auto layouts = oracle::layouts(static_cast<int>(mesh.size()), 2, placement_options(2));
  std::mt19937_64 rng(seed);
  for (DType dt : kAllDTypes)
    for (int i = 0; i < per_dtype; ++i) {
      const auto& a = layouts[rng() % layouts.size()];
      const auto& b = layouts[rng() % layouts.size()];
      const std::vector<std::int64_t> shape{static_cast<std::int64_t>(rng() % 9), static_cast<std::int64_t>(rng() % 9)};
      if (refuses_avg(a, dt) || refuses_avg(b, dt)) continue;  // no integer average
      const Plan plan = plan_redistribution(Layout::parse(Mesh(mesh), shape, dt, oracle::text(a)),
                                            Layout::parse(Mesh(mesh), shape, dt, oracle::text(b)), CostModel::default_model());
      fn(dt, a, b, shape, plan);
    }
}

// Every rank of `plan` on one in-process world whose buffers and operations are `mem`'s (e.g.
// dtensor::device_memory: the kernels do every copy and reduction), run by the all-ranks driver;
// the outputs, downloaded.
inline Run run_on_memory(const Plan& plan, const std::shared_ptr<Memory>& mem) {
  SimulatedWorld world(plan.mesh(), WorldOptions{std::chrono::milliseconds(60000), mem});
  const auto R = static_cast<std::size_t>(plan.mesh().num_ranks());
  std::vector<Executor> execs;
  execs.reserve(R);
  struct Owned {
    Memory& m;
    std::vector<void*> p;
    ~Owned() {
      for (void* x : p) m.release(x);
    }
  } owned{*mem, {}};
  auto buffer = [&](std::size_t n) {
    owned.p.push_back(mem->allocate(n));
    return static_cast<std::byte*>(owned.p.back());
  };
  std::vector<Buffers> bufs;
  for (std::size_t r = 0; r < R; ++r) {
    execs.emplace_back(plan, world.communicator(static_cast<std::int64_t>(r)), ExecutorOptions{false});
    const auto host = seeded_input(plan.src, static_cast<std::int64_t>(r));
    std::byte* in = buffer(host.size());
    mem->upload(in, host.data(), host.size());
    const auto on = static_cast<std::size_t>(execs.back().output_bytes());
    const auto wn = static_cast<std::size_t>(execs.back().workspace_bytes());
    std::byte* out = buffer(on);
    std::byte* ws = buffer(wn);
    bufs.push_back({std::span<const std::byte>(in, host.size()), std::span<std::byte>(out, on), std::span<std::byte>(ws, wn)});
  }
  std::vector<const Executor*> ptrs;
  for (const auto& e : execs) ptrs.push_back(&e);
  execute_all_ranks(ptrs, world, bufs);
  mem->wait();
  Run run;
  for (const auto& b : bufs) {
    run.outputs.emplace_back(b.output.size());
    mem->download(run.outputs.back().data(), b.output.data(), b.output.size());
  }
  return run;
}

}  // namespace exec_check
