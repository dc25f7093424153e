// Owner planning (owners.hpp): per-owner receive times from the exchange's own transfer lists,
// LPT, and an exact branch-and-bound for small N.
#include "dtensor/owners.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <unordered_map>

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

// Every owner's receive time for `l` at once, in closed form, where mesh_dim's split (if any) is
// the last of its tensor dim's order: then the owner's target block is the union of the blocks
// its line along mesh_dim holds, so it receives each other member's whole block, from that member
// alone (a rank differing on another mesh dim holds other elements, or the same ones as a replica
// outside the exchange's group). Per line (the coordinates on the other mesh dims) the members'
// sizes give, for each owner, the bytes (the line's total less its own) and peers (the non-empty
// others); the owner's time is the worst line's. The same integers owner_receive_us's walk adds
// up, so the same doubles: O(ranks) local sizes per layout instead of one exchange per rank.
// Empty (nullopt) when the split is not last: the exchange walk decides.
std::optional<std::vector<double>> closed_form_times(const Layout& l, int mesh_dim, const CostModel& cost) {
  const Sharding& sh = l.sharding();
  if (sh.has_partial()) return std::nullopt;  // (owner_layout refuses it: the walk names the error)
  if (sh.shard_dim_of(mesh_dim) >= 0 && !sh.is_last_in_order(mesh_dim)) return std::nullopt;
  const Mesh& mesh = l.mesh();
  const auto m = static_cast<std::size_t>(mesh.size(mesh_dim));
  if (sh.shard_dim_of(mesh_dim) < 0) {  // replicated along mesh_dim: every owner holds its block already
    Traffic none;
    none.kind = Traffic::Kind::free;
    return std::vector<double>(m, cost.time(none).total_us());
  }
  const auto s = static_cast<std::int64_t>(itemsize(l.dtype()));
  const bool inter = cost.is_inter_host(mesh.shape(), mesh_dim);
  std::vector<double> worst(m, 0.0);
  std::vector<std::int64_t> numel(m);
  std::vector<std::int64_t> c(static_cast<std::size_t>(mesh.ndim()), 0);
  while (true) {  // each line: every coordinate with 0 on mesh_dim
    std::int64_t total = 0, nonempty = 0;
    for (std::size_t k = 0; k < m; ++k) {
      c[static_cast<std::size_t>(mesh_dim)] = static_cast<std::int64_t>(k);
      numel[k] = l.local_numel(c);
      total += numel[k];
      nonempty += numel[k] > 0 ? 1 : 0;
    }
    c[static_cast<std::size_t>(mesh_dim)] = 0;
    for (std::size_t o = 0; o < m; ++o) {
      const std::int64_t peers = nonempty - (numel[o] > 0 ? 1 : 0);
      Traffic t;
      t.kind = peers > 0 ? Traffic::Kind::direct : Traffic::Kind::free;
      t.peers = peers;
      t.inter_host = peers > 0 && inter;
      t.bytes = static_cast<double>((total - numel[o]) * s);
      worst[o] = std::max(worst[o], cost.time(t).total_us());
    }
    int d = mesh.ndim();
    while (d-- > 0) {
      if (d == mesh_dim) continue;
      if (++c[static_cast<std::size_t>(d)] < mesh.size(d)) break;
      c[static_cast<std::size_t>(d)] = 0;
    }
    if (d < 0) break;
  }
  return worst;
}

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
  // one row of receive times per distinct layout (a model's layers repeat a few shapes)
  std::unordered_map<Layout, std::vector<double>> rows;
  for (std::size_t i = 0; i < T.n; ++i) {
    if (layouts[i].mesh() != mesh)
      throw InputError(fmt::format("tensor {} lies on mesh {}, tensor 0 on {}", i, layouts[i].mesh().str(), mesh.str()));
    auto it = rows.find(layouts[i]);
    if (it == rows.end()) {
      it = rows.emplace(layouts[i], owner_receive_times(layouts[i], mesh_dim, cost)).first;
    }
    for (std::size_t o = 0; o < T.m; ++o) T.t[i * T.m + o] = it->second[o] + (compute_us.empty() ? 0.0 : compute_us[i]);
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

std::vector<double> owner_receive_times(const Layout& l, int mesh_dim, const CostModel& cost, bool* closed) {
  if (mesh_dim < 0 || mesh_dim >= l.mesh().ndim())
    throw InputError(fmt::format("owners along mesh dim {}: the mesh {} has {} dims", mesh_dim, l.mesh().str(), l.mesh().ndim()));
  (void)owner_layout(l, mesh_dim, 0);  // the walk's refusals (a Partial, a sharded mesh dim before mesh_dim), its words
  if (auto row = closed_form_times(l, mesh_dim, cost)) {
    if (closed) *closed = true;
    return std::move(*row);
  }
  if (closed) *closed = false;
  std::vector<double> row;
  for (std::int64_t o = 0; o < l.mesh().size(mesh_dim); ++o) row.push_back(owner_receive_us(l, mesh_dim, o, cost));
  return row;
}

std::vector<double> newton_schulz_us(std::span<const Layout> layouts, int iterations, double flops_per_us) {
  if (iterations < 1 || iterations > 1000)
    throw InputError(fmt::format("Newton-Schulz iterations {}: from 1 to 1000", iterations));
  if (!std::isfinite(flops_per_us) || !(flops_per_us > 0) || flops_per_us > 1e15)
    throw InputError(fmt::format("flops_per_us {} is not a rate above 0 (at most 1e15)", flops_per_us));
  std::vector<double> out;
  out.reserve(layouts.size());
  for (const auto& l : layouts) {
    if (l.ndim() < 2) {
      out.push_back(0.0);
      continue;
    }
    double rows = static_cast<double>(l.shape()[0]), cols = 1;
    for (int d = 1; d < l.ndim(); ++d) cols *= static_cast<double>(l.shape()[static_cast<std::size_t>(d)]);
    const double lo = std::min(rows, cols), hi = std::max(rows, cols);
    const double macs = 2 * lo * lo * hi + lo * lo * lo;
    out.push_back(static_cast<double>(iterations) * 2 * macs / flops_per_us);
  }
  return out;
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
