// Owner planning (owners.hpp): per-owner receive times from the exchange's own transfer lists,
// LPT, and an exact branch-and-bound for small N.
#include "dtensor/owners.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "dtensor/error.hpp"
#include "placement/ragged_exchange.hpp"

namespace dtensor {
namespace {

constexpr std::size_t kExactMaxTensors = 12;
constexpr std::int64_t kMaxNodes = 4'000'000;

struct Times {
  std::size_t n = 0, m = 0;
  std::vector<double> t;  // n x m: tensor i on owner o
  [[nodiscard]] double at(std::size_t i, std::size_t o) const { return t[i * m + o]; }
};

Times times_of(std::span<const Layout> layouts, int mesh_dim, const CostModel& cost, std::span<const double> compute_us) {
  if (layouts.empty()) return {};
  const Mesh& mesh = layouts[0].mesh();
  if (mesh_dim < 0 || mesh_dim >= mesh.ndim())
    throw InputError(fmt::format("owners along mesh dim {}: the mesh {} has {} dims", mesh_dim, mesh.str(), mesh.ndim()));
  if (!compute_us.empty() && compute_us.size() != layouts.size())
    throw InputError(fmt::format("{} compute times for {} tensors", compute_us.size(), layouts.size()));
  for (std::size_t i = 0; i < compute_us.size(); ++i)
    if (!std::isfinite(compute_us[i]) || compute_us[i] < 0 || compute_us[i] > 1e12)
      throw InputError(fmt::format("compute time {} of tensor {} is not a time from 0 to 1e12 us", compute_us[i], i));
  Times T{layouts.size(), static_cast<std::size_t>(mesh.size(mesh_dim)), {}};
  T.t.resize(T.n * T.m);
  for (std::size_t i = 0; i < T.n; ++i) {
    if (layouts[i].mesh() != mesh)
      throw InputError(fmt::format("tensor {} lies on mesh {}, tensor 0 on {}", i, layouts[i].mesh().str(), mesh.str()));
    for (std::size_t o = 0; o < T.m; ++o)
      T.t[i * T.m + o] = owner_receive_us(layouts[i], mesh_dim, static_cast<std::int64_t>(o), cost) +
                         (compute_us.empty() ? 0.0 : compute_us[i]);
  }
  return T;
}

OwnerPlan finish(const Times& T, std::vector<std::int64_t> owners) {
  OwnerPlan p;
  p.owners = std::move(owners);
  p.load_us.assign(T.m, 0.0);
  for (std::size_t i = 0; i < T.n; ++i) p.load_us[static_cast<std::size_t>(p.owners[i])] += T.at(i, static_cast<std::size_t>(p.owners[i]));
  p.makespan_us = p.load_us.empty() ? 0 : *std::max_element(p.load_us.begin(), p.load_us.end());
  return p;
}

}  // namespace

RaggedLayout owner_layout(const Layout& l, int mesh_dim, std::int64_t owner) {
  if (mesh_dim < 0 || mesh_dim >= l.mesh().ndim())
    throw InputError(fmt::format("owner along mesh dim {}: the mesh {} has {} dims", mesh_dim, l.mesh().str(), l.mesh().ndim()));
  if (owner < 0 || owner >= l.mesh().size(mesh_dim))
    throw InputError(fmt::format("owner {} along mesh dim {} of size {}", owner, mesh_dim, l.mesh().size(mesh_dim)));
  if (l.ndim() == 0) throw InputError("a 0-d tensor has no owner layout (RaggedShard needs a tensor dim)");
  if (l.sharding().has_partial())
    throw InputError(fmt::format("tensor {} holds a Partial: reduce it before gathering to an owner", l.str()));
  std::vector<std::int64_t> units(static_cast<std::size_t>(l.mesh().size(mesh_dim)), 0);
  units[static_cast<std::size_t>(owner)] = 1;
  return RaggedLayout(Layout(l.mesh(), l.shape(), l.dtype(), l.sharding().with_replicate(mesh_dim)),
                      RaggedShard{mesh_dim, 1, std::move(units)});
}

double owner_receive_us(const Layout& l, int mesh_dim, std::int64_t owner, const CostModel& cost) {
  const RaggedLayout from(l), to = owner_layout(l, mesh_dim, owner);
  const Mesh& mesh = l.mesh();
  const auto s = static_cast<std::int64_t>(itemsize(l.dtype()));
  double worst = 0;
  for (std::int64_t r = 0; r < mesh.num_ranks(); ++r) {
    const auto c = mesh.coord_of_rank(r);
    if (c[static_cast<std::size_t>(mesh_dim)] != owner) continue;
    std::int64_t received = 0, peers = 0;
    bool inter = false;
    for (const auto& p : detail::exchange_recvs(from, to, c)) {
      if (p.peer == r) continue;
      received += p.count();
      ++peers;
      const auto pc = mesh.coord_of_rank(p.peer);
      for (int m = 0; m < mesh.ndim(); ++m)
        if (pc[static_cast<std::size_t>(m)] != c[static_cast<std::size_t>(m)]) inter = inter || cost.is_inter_host(mesh.shape(), m);
    }
    Traffic t;
    t.kind = peers > 0 ? Traffic::Kind::direct : Traffic::Kind::free;
    t.peers = peers;
    t.inter_host = inter;
    t.bytes = static_cast<double>(received * s);
    worst = std::max(worst, cost.time(t).total_us());
  }
  return worst;
}

OwnerPlan evaluate_owners(std::span<const Layout> layouts, int mesh_dim, const CostModel& cost,
                          std::span<const std::int64_t> owners, std::span<const double> compute_us) {
  const Times T = times_of(layouts, mesh_dim, cost, compute_us);
  if (owners.size() != layouts.size()) throw InputError(fmt::format("{} owners for {} tensors", owners.size(), layouts.size()));
  for (auto o : owners)
    if (o < 0 || static_cast<std::size_t>(o) >= T.m) throw InputError(fmt::format("owner {} outside mesh dim {} of size {}", o, mesh_dim, T.m));
  return finish(T, {owners.begin(), owners.end()});
}

OwnerPlan plan_owners(std::span<const Layout> layouts, int mesh_dim, const CostModel& cost, std::span<const double> compute_us) {
  const Times T = times_of(layouts, mesh_dim, cost, compute_us);
  if (T.n == 0) return {};
  // LPT: the largest (its worst owner's time) first, each on the owner whose load grows least
  std::vector<std::size_t> order(T.n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  auto size_of = [&](std::size_t i) {
    double x = 0;
    for (std::size_t o = 0; o < T.m; ++o) x = std::max(x, T.at(i, o));
    return x;
  };
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return size_of(a) > size_of(b); });
  std::vector<std::int64_t> owners(T.n, 0);
  std::vector<double> load(T.m, 0.0);
  for (std::size_t i : order) {
    std::size_t best = 0;
    for (std::size_t o = 1; o < T.m; ++o)
      if (load[o] + T.at(i, o) < load[best] + T.at(i, best)) best = o;
    owners[i] = static_cast<std::int64_t>(best);
    load[best] += T.at(i, best);
  }
  OwnerPlan plan = finish(T, owners);
  if (T.n > kExactMaxTensors) return plan;
  // branch-and-bound in LPT order from the heuristic's makespan
  std::vector<double> min_rest(T.n + 1, 0.0);  // the least time the tensors from k on add in all
  for (std::size_t k = T.n; k-- > 0;) {
    double mn = T.at(order[k], 0);
    for (std::size_t o = 1; o < T.m; ++o) mn = std::min(mn, T.at(order[k], o));
    min_rest[k] = min_rest[k + 1] + mn;
  }
  std::vector<std::int64_t> cur(T.n, 0);
  std::fill(load.begin(), load.end(), 0.0);
  double best = plan.makespan_us;
  std::int64_t nodes = 0;
  bool complete = true;
  auto dfs = [&](auto&& self, std::size_t k, double cur_max, double total) -> void {
    if (++nodes > kMaxNodes) {
      complete = false;
      return;
    }
    if (k == T.n) {
      if (cur_max < best) {
        best = cur_max;
        owners = cur;
      }
      return;
    }
    if (std::max(cur_max, (total + min_rest[k]) / static_cast<double>(T.m)) >= best) return;
    const std::size_t i = order[k];
    for (std::size_t o = 0; o < T.m && complete; ++o) {
      // an owner with the same load and time as an earlier one leads to the same subtrees
      bool twin = false;
      for (std::size_t q = 0; q < o && !twin; ++q) twin = load[q] == load[o] && T.at(i, q) == T.at(i, o);
      if (twin) continue;
      const double t = T.at(i, o);
      if (std::max(cur_max, load[o] + t) >= best) continue;
      load[o] += t;
      cur[i] = static_cast<std::int64_t>(o);
      self(self, k + 1, std::max(cur_max, load[o]), total + t);
      load[o] -= t;
    }
  };
  dfs(dfs, 0, 0.0, 0.0);
  OwnerPlan out = finish(T, owners);
  out.exact = complete;
  out.nodes = nodes;
  return out;
}

}  // namespace dtensor
