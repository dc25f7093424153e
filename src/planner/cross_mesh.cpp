// Cross-mesh planning (docs/cross-mesh.md): intermediate layouts on both meshes, the transfer
// between them with balanced senders, and the three parts' costs.
#include "dtensor/cross_mesh.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <fmt/ranges.h>

#include "dtensor/error.hpp"
#include "placement/hash.hpp"

namespace dtensor {
namespace {

constexpr std::size_t kMaxCandidates = 64;  // per side

void check_rank_list(const char* which, const Mesh& mesh, std::span<const std::int64_t> ranks, std::int64_t world) {
  if (static_cast<std::int64_t>(ranks.size()) != mesh.num_ranks())
    throw InputError(fmt::format("{} mesh {} has {} ranks but its world rank list has {} entries", which, mesh.str(),
                                 mesh.num_ranks(), ranks.size()));
  std::set<std::int64_t> seen;
  for (auto r : ranks) {
    if (r < 0) throw InputError(fmt::format("{} world rank {} is negative", which, r));
    if (world >= 0 && r >= world)
      throw InputError(fmt::format("{} world rank {} does not exist in a world of {} ranks", which, r, world));
    if (!seen.insert(r).second) throw InputError(fmt::format("{} world rank {} is listed twice", which, r));
  }
}

std::int64_t world_of(std::span<const std::int64_t> a, std::span<const std::int64_t> b, std::int64_t given) {
  if (given >= 0) return given;
  std::int64_t m = 0;
  for (auto r : a) m = std::max(m, r + 1);
  for (auto r : b) m = std::max(m, r + 1);
  return m;
}

// Per mesh rank, its index sets under `l`.
std::vector<std::vector<IndexSet>> rank_sets(const Layout& l) {
  std::vector<std::vector<IndexSet>> out;
  const auto n = l.mesh().num_ranks();
  out.reserve(static_cast<std::size_t>(n));
  for (std::int64_t r = 0; r < n; ++r) out.push_back(l.indices(l.mesh().coord_of_rank(r)));
  return out;
}

struct TransferResult {
  std::vector<CrossMeshPlan::Message> messages;
  std::int64_t transfer_bytes = 0, busiest_bytes = 0, busiest_peers = 0, bound_bytes = 0, copy_bytes = 0;
  bool inter_host = false;
};

// The transfer from `mid_a` (no Partial) to `mid_b`: every B rank's part, block by block of A's
// holdings (two A ranks hold identical or disjoint boxes), from a holder on its own world rank
// when there is one, else from the holder the greedy balance picks (largest pieces first, to
// the holder whose max(sent, received) grows least; ties: the lower mesh rank).
TransferResult compute_transfer(const Layout& mid_a, std::span<const std::int64_t> src_ranks, const Layout& mid_b,
                                std::span<const std::int64_t> dst_ranks, std::int64_t world,
                                std::int64_t devices_per_host) {
  TransferResult t;
  const auto s = static_cast<std::int64_t>(itemsize(mid_a.dtype()));
  const auto hold = rank_sets(mid_a);
  const auto need = rank_sets(mid_b);
  // replica classes of A: ranks with identical holdings, in order of their lowest rank
  std::vector<std::vector<std::int64_t>> classes;
  {
    // key: the holdings' runs, flattened (dims separated by -1)
    std::map<std::vector<std::int64_t>, std::size_t> index;
    for (std::int64_t a = 0; a < static_cast<std::int64_t>(hold.size()); ++a) {
      if (box_numel(hold[static_cast<std::size_t>(a)]) == 0) continue;
      std::vector<std::int64_t> key;
      for (const auto& set : hold[static_cast<std::size_t>(a)]) {
        for (const auto& r : set.runs()) key.insert(key.end(), {r.start, r.stop});
        key.push_back(-1);
      }
      auto [it, fresh] = index.try_emplace(std::move(key), classes.size());
      if (fresh) classes.emplace_back();
      classes[it->second].push_back(a);
    }
  }
  std::vector<std::int64_t> sent(static_cast<std::size_t>(world), 0), recv(static_cast<std::size_t>(world), 0),
      local(static_cast<std::size_t>(world), 0);
  std::vector<std::int64_t> class_total(classes.size(), 0);
  struct Piece {
    std::size_t k;
    std::int64_t b, n;
  };
  std::vector<Piece> pending;
  for (std::int64_t b = 0; b < static_cast<std::int64_t>(need.size()); ++b) {
    const auto& nb = need[static_cast<std::size_t>(b)];
    const auto wb = dst_ranks[static_cast<std::size_t>(b)];
    for (std::size_t k = 0; k < classes.size(); ++k) {
      const auto& hk = hold[static_cast<std::size_t>(classes[k].front())];
      std::int64_t n = 1;
      for (std::size_t d = 0; d < nb.size() && n > 0; ++d) n *= nb[d].overlap(hk[d]);
      if (nb.empty()) n = 1;
      if (n == 0) continue;
      std::optional<std::int64_t> self;
      for (auto a : classes[k])
        if (src_ranks[static_cast<std::size_t>(a)] == wb) self = a;
      if (self) {
        t.messages.push_back({*self, b, n});
        local[static_cast<std::size_t>(wb)] += n;
        continue;
      }
      pending.push_back({k, b, n});
      recv[static_cast<std::size_t>(wb)] += n;
      class_total[k] += n;
    }
  }
  std::stable_sort(pending.begin(), pending.end(), [](const Piece& x, const Piece& y) { return x.n > y.n; });
  for (const auto& p : pending) {
    std::int64_t best = -1, best_key = 0, best_sent = 0;
    for (auto a : classes[p.k]) {
      const auto w = static_cast<std::size_t>(src_ranks[static_cast<std::size_t>(a)]);
      const auto key = std::max(sent[w] + p.n, recv[w]);
      if (best < 0 || key < best_key || (key == best_key && sent[w] < best_sent)) {
        best = a;
        best_key = key;
        best_sent = sent[w];
      }
    }
    sent[static_cast<std::size_t>(src_ranks[static_cast<std::size_t>(best)])] += p.n;
    t.messages.push_back({best, p.b, p.n});
  }
  std::sort(t.messages.begin(), t.messages.end(),
            [](const auto& x, const auto& y) { return x.to != y.to ? x.to < y.to : x.from < y.from; });
  std::vector<std::set<std::int64_t>> peers(static_cast<std::size_t>(world));
  for (const auto& m : t.messages) {
    const auto wa = src_ranks[static_cast<std::size_t>(m.from)], wb = dst_ranks[static_cast<std::size_t>(m.to)];
    if (wa == wb) continue;
    t.transfer_bytes += m.elements * s;
    peers[static_cast<std::size_t>(wa)].insert(wb);
    peers[static_cast<std::size_t>(wb)].insert(wa);
    if (devices_per_host > 0 && wa / devices_per_host != wb / devices_per_host) t.inter_host = true;
  }
  std::int64_t bound = 0;
  for (std::size_t w = 0; w < static_cast<std::size_t>(world); ++w) {
    t.busiest_bytes = std::max(t.busiest_bytes, std::max(sent[w], recv[w]) * s);
    t.busiest_peers = std::max(t.busiest_peers, static_cast<std::int64_t>(peers[w].size()));
    t.copy_bytes = std::max(t.copy_bytes, (sent[w] + recv[w] + local[w]) * s);
    bound = std::max(bound, recv[w]);
  }
  for (std::size_t k = 0; k < classes.size(); ++k) {
    const auto c = static_cast<std::int64_t>(classes[k].size());
    bound = std::max(bound, (class_total[k] + c - 1) / c);
  }
  t.bound_bytes = bound * s;
  return t;
}

double transfer_cost(const TransferResult& t, const CostModel& cost) {
  Traffic tr;
  tr.copy_bytes = static_cast<double>(t.copy_bytes);
  if (t.transfer_bytes == 0) {
    tr.kind = Traffic::Kind::local;
  } else {
    tr.kind = Traffic::Kind::direct;
    tr.peers = t.busiest_peers;
    tr.inter_host = t.inter_host;
    tr.bytes = static_cast<double>(t.busiest_bytes);
  }
  return cost.time(tr).total_us();
}

// Every layout with, per mesh dim, Replicate, a plain Shard of some tensor dim, or one of the
// strided splits `strided` lists (those of the source and target), shards in mesh-dim order, in
// odometer order from all-Replicate.
void add_plain_layouts(int mesh_ndim, int tensor_ndim, const std::vector<std::pair<int, ShardEntry>>& strided,
                       std::vector<Sharding>& out) {
  std::vector<std::pair<int, ShardEntry>> options;  // tensor dim, entry (its mesh dim set per use)
  for (int d = 0; d < tensor_ndim; ++d) options.emplace_back(d, ShardEntry{0, 1, false});
  for (const auto& o : strided)
    if (std::find(options.begin(), options.end(), o) == options.end()) options.push_back(o);
  const int n = static_cast<int>(options.size());
  std::vector<int> pick(static_cast<std::size_t>(mesh_ndim), -1);  // -1: R
  while (out.size() < kMaxCandidates) {
    Sharding s = Sharding::replicated(mesh_ndim, tensor_ndim);
    for (int m = 0; m < mesh_ndim; ++m)
      if (const int p = pick[static_cast<std::size_t>(m)]; p >= 0) {
        ShardEntry e = options[static_cast<std::size_t>(p)].second;
        e.mesh_dim = m;
        s = s.with_shard_appended(options[static_cast<std::size_t>(p)].first, e);
      }
    if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
    int m = mesh_ndim;
    while (m-- > 0) {
      auto& p = pick[static_cast<std::size_t>(m)];
      if (++p < n) break;
      p = -1;
    }
    if (m < 0) break;
  }
}

std::vector<std::pair<int, ShardEntry>> strided_splits(const Sharding& a, const Sharding& b) {
  std::vector<std::pair<int, ShardEntry>> out;
  for (const Sharding* s : {&a, &b})
    for (int d = 0; d < s->tensor_ndim(); ++d)
      for (auto e : s->entries(d))
        if (e.strided || e.split_factor > 1) {
          e.mesh_dim = 0;
          if (std::find(out.begin(), out.end(), std::pair(d, e)) == out.end()) out.emplace_back(d, e);
        }
  return out;
}

void add_unique(std::vector<Sharding>& out, const Sharding& s) {
  if (out.size() < kMaxCandidates && std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
}

// On A: the source with its Partials reduced (to R, or to S(d) appended) and its shards kept or
// gathered; then the plain layouts.
std::vector<Sharding> src_candidates(const Layout& src, const Layout& dst) {
  const Sharding& s = src.sharding();
  std::vector<Sharding> derived{s};
  for (int m = 0; m < s.mesh_ndim(); ++m) {
    std::vector<Sharding> next;
    for (const auto& c : derived) {
      if (s.partial(m)) {
        next.push_back(c.with_replicate(m));
        for (int d = 0; d < s.tensor_ndim(); ++d) next.push_back(c.with_shard_appended(d, ShardEntry{m, 1, false}));
      } else {
        next.push_back(c);
        if (s.shard_dim_of(m) >= 0) next.push_back(c.with_replicate(m));
      }
    }
    derived = std::move(next);
    if (derived.size() > kMaxCandidates) derived.resize(kMaxCandidates);
  }
  std::vector<Sharding> out;
  for (const auto& c : derived) add_unique(out, c);
  add_plain_layouts(s.mesh_ndim(), s.tensor_ndim(), strided_splits(src.sharding(), dst.sharding()), out);
  return out;
}

// On B: the target with every Partial received as R or S(d), every R received as it is or as
// S(d); then the plain layouts.
std::vector<Sharding> dst_candidates(const Layout& src, const Layout& dst) {
  const Sharding& s = dst.sharding();
  Sharding base = s;
  for (int m = 0; m < s.mesh_ndim(); ++m)
    if (s.partial(m)) base = base.with_replicate(m);
  std::vector<Sharding> derived{base};
  for (int m = 0; m < s.mesh_ndim(); ++m) {
    if (s.shard_dim_of(m) >= 0) continue;
    std::vector<Sharding> next;
    for (const auto& c : derived) {
      next.push_back(c);
      for (int d = 0; d < s.tensor_ndim(); ++d) next.push_back(c.with_shard_appended(d, ShardEntry{m, 1, false}));
    }
    derived = std::move(next);
    if (derived.size() > kMaxCandidates) derived.resize(kMaxCandidates);
  }
  std::vector<Sharding> out;
  for (const auto& c : derived) add_unique(out, c);
  add_plain_layouts(s.mesh_ndim(), s.tensor_ndim(), strided_splits(src.sharding(), dst.sharding()), out);
  return out;
}

}  // namespace

std::int64_t CrossMeshPlan::collectives() const {
  std::int64_t n = 0;
  for (const auto& st : pre.steps) n += is_communication(st.kind) ? 1 : 0;
  for (const auto& st : post.steps) n += is_communication(st.kind) ? 1 : 0;
  return n + (transfer_bytes > 0 ? 1 : 0);
}

std::uint64_t CrossMeshPlan::hash() const {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  detail::hash_combine(h, pre.hash());
  detail::hash_combine(h, post.hash());
  detail::hash_combine(h, static_cast<std::uint64_t>(world_size));
  for (auto r : src_ranks) detail::hash_combine(h, static_cast<std::uint64_t>(r));
  detail::hash_combine(h, 0x5eed);
  for (auto r : dst_ranks) detail::hash_combine(h, static_cast<std::uint64_t>(r));
  for (const auto& m : messages) {
    detail::hash_combine(h, static_cast<std::uint64_t>(m.from));
    detail::hash_combine(h, static_cast<std::uint64_t>(m.to));
    detail::hash_combine(h, static_cast<std::uint64_t>(m.elements));
  }
  return h;
}

CrossMeshPlan plan_cross_mesh(const Layout& src, std::span<const std::int64_t> src_ranks, const Layout& dst,
                              std::span<const std::int64_t> dst_ranks, const CostModel& cost,
                              const CrossMeshOptions& options) {
  if (src.shape() != dst.shape())
    throw InputError(fmt::format("source shape {} and target shape {} differ", fmt::join(src.shape(), "x"),
                                 fmt::join(dst.shape(), "x")));
  if (src.dtype() != dst.dtype())
    throw InputError(fmt::format("source dtype {} and target dtype {} differ", to_string(src.dtype()),
                                 to_string(dst.dtype())));
  if (options.world_size == 0 || options.world_size < -1)
    throw InputError(fmt::format("world size {} is not positive", options.world_size));
  check_rank_list("source", src.mesh(), src_ranks, options.world_size);
  check_rank_list("target", dst.mesh(), dst_ranks, options.world_size);
  const std::int64_t world = world_of(src_ranks, dst_ranks, options.world_size);

  CrossMeshPlan best;
  std::optional<double> best_cost;
  std::optional<std::string> first_error;
  std::vector<std::optional<Plan>> pres, posts;
  const auto sc = options.src_via ? std::vector<Sharding>{*options.src_via} : src_candidates(src, dst);
  const auto dc = options.dst_via ? std::vector<Sharding>{*options.dst_via} : dst_candidates(src, dst);
  for (const auto* via : {&options.src_via, &options.dst_via})
    if (*via && (*via)->has_partial())
      throw InputError(fmt::format("intermediate layout {} has a Partial: the transfer moves whole values", (*via)->str()));
  for (const auto& c : sc) {
    try {
      pres.emplace_back(plan_redistribution(src, Layout(src.mesh(), src.shape(), src.dtype(), c), cost, options.plan));
    } catch (const Error& e) {
      if (!first_error) first_error = e.what();
      pres.emplace_back();
    }
  }
  for (const auto& c : dc) {
    try {
      posts.emplace_back(plan_redistribution(Layout(dst.mesh(), dst.shape(), dst.dtype(), c), dst, cost, options.plan));
    } catch (const Error& e) {
      if (!first_error) first_error = e.what();
      posts.emplace_back();
    }
  }
  // every (pre, post) pair, cheapest pre + post first: a pair whose two plans alone cost more
  // than the best total found cannot win (the transfer costs >= 0)
  std::vector<std::pair<std::size_t, std::size_t>> order;
  for (std::size_t i = 0; i < pres.size(); ++i)
    for (std::size_t j = 0; j < posts.size(); ++j)
      if (pres[i] && posts[j]) order.emplace_back(i, j);
  std::stable_sort(order.begin(), order.end(), [&](const auto& x, const auto& y) {
    return pres[x.first]->total_cost_us + posts[x.second]->total_cost_us <
           pres[y.first]->total_cost_us + posts[y.second]->total_cost_us;
  });
  std::optional<std::pair<std::size_t, std::size_t>> best_pair;
  for (const auto& [i, j] : order) {
    const Plan& pre = *pres[i];
    const Plan& post = *posts[j];
    if (best_cost && pre.total_cost_us + post.total_cost_us > *best_cost) break;
    const auto t = compute_transfer(pre.dst, src_ranks, post.src, dst_ranks, world, cost.devices_per_host);
    const double tc = transfer_cost(t, cost);
    const double total = pre.total_cost_us + tc + post.total_cost_us;
    // ties: the earlier pair in candidate order (the source's and target's own layouts first)
    if (best_cost && (total > *best_cost || (total == *best_cost && std::pair(i, j) > *best_pair))) continue;
    best_cost = total;
    best_pair = std::pair(i, j);
    best.src = src;
    best.dst = dst;
    best.src_ranks.assign(src_ranks.begin(), src_ranks.end());
    best.dst_ranks.assign(dst_ranks.begin(), dst_ranks.end());
    best.world_size = world;
    best.pre = pre;
    best.post = post;
    best.messages = t.messages;
    best.transfer_bytes = t.transfer_bytes;
    best.busiest_bytes = t.busiest_bytes;
    best.busiest_peers = t.busiest_peers;
    best.balanced_bound_bytes = t.bound_bytes;
    best.inter_host = t.inter_host;
    best.transfer_cost_us = tc;
    best.total_cost_us = total;
    best.cost_model = cost.name;
  }
  if (!best_cost) throw Error(fmt::format("no cross-mesh plan: {}", first_error.value_or("no candidate layout")));
  return best;
}

void validate_cross_mesh_plan(const CrossMeshPlan& p) {
  if (p.src.shape() != p.dst.shape() || p.src.dtype() != p.dst.dtype())
    throw InputError("cross-mesh plan: source and target differ in shape or dtype");
  if (p.world_size <= 0) throw InputError(fmt::format("cross-mesh plan: world size {} is not positive", p.world_size));
  check_rank_list("source", p.src.mesh(), p.src_ranks, p.world_size);
  check_rank_list("target", p.dst.mesh(), p.dst_ranks, p.world_size);
  if (p.pre.src != p.src) throw InputError("cross-mesh plan: the plan inside A does not start at the source layout");
  if (p.post.dst != p.dst) throw InputError("cross-mesh plan: the plan inside B does not end at the target layout");
  if (p.pre.dst.sharding().has_partial())
    throw InputError(fmt::format("cross-mesh plan: A's intermediate layout {} has a Partial", p.pre.dst.placements_str()));
  if (p.post.src.sharding().has_partial())
    throw InputError(fmt::format("cross-mesh plan: B's intermediate layout {} has a Partial", p.post.src.placements_str()));
  validate_plan(p.pre);
  validate_plan(p.post);
  const auto hold = rank_sets(p.pre.dst);
  const auto need = rank_sets(p.post.src);
  const auto na = static_cast<std::int64_t>(hold.size()), nb = static_cast<std::int64_t>(need.size());
  std::vector<std::int64_t> got(static_cast<std::size_t>(nb), 0);
  for (std::size_t i = 0; i < p.messages.size(); ++i) {
    const auto& m = p.messages[i];
    if (m.from < 0 || m.from >= na || m.to < 0 || m.to >= nb)
      throw InputError(fmt::format("cross-mesh message {} names rank {} of A or {} of B, which do not exist", i, m.from, m.to));
    if (i > 0) {
      const auto& q = p.messages[i - 1];
      if (q.to > m.to || (q.to == m.to && q.from >= m.from))
        throw InputError(fmt::format("cross-mesh message {} is out of order or repeated", i));
    }
    const auto box = [&] {
      std::int64_t n = 1;
      const auto& h = hold[static_cast<std::size_t>(m.from)];
      const auto& w = need[static_cast<std::size_t>(m.to)];
      for (std::size_t d = 0; d < h.size(); ++d) n *= h[d].overlap(w[d]);
      return n;
    }();
    if (m.elements <= 0 || m.elements != box)
      throw InputError(fmt::format("cross-mesh message {} (A rank {} to B rank {}) has {} elements; the ranks share {}", i,
                                   m.from, m.to, m.elements, box));
    // two senders to one receiver must hold different (so disjoint) blocks
    for (std::size_t j = i; j-- > 0 && p.messages[j].to == m.to;)
      if (hold[static_cast<std::size_t>(p.messages[j].from)] == hold[static_cast<std::size_t>(m.from)])
        throw InputError(fmt::format("cross-mesh messages {} and {} send B rank {} the same elements", j, i, m.to));
    got[static_cast<std::size_t>(m.to)] += m.elements;
  }
  for (std::int64_t b = 0; b < nb; ++b)
    if (got[static_cast<std::size_t>(b)] != box_numel(need[static_cast<std::size_t>(b)]))
      throw InputError(fmt::format("cross-mesh plan: B rank {} receives {} of the {} elements it needs", b,
                                   got[static_cast<std::size_t>(b)], box_numel(need[static_cast<std::size_t>(b)])));
}

std::string CrossMeshPlan::to_json(int indent) const {
  using ordered = nlohmann::ordered_json;
  ordered j;
  j["kind"] = "cross_mesh";
  j["version"] = 1;
  j["world_size"] = world_size;
  j["src_ranks"] = src_ranks;
  j["dst_ranks"] = dst_ranks;
  j["pre"] = ordered::parse(pre.to_json());
  j["post"] = ordered::parse(post.to_json());
  j["messages"] = ordered::array();
  for (const auto& m : messages)
    j["messages"].push_back({{"from", m.from}, {"to", m.to}, {"elements", m.elements},
                             {"local", world_rank_of_src(m.from) == world_rank_of_dst(m.to)}});
  j["transfer_bytes"] = transfer_bytes;
  j["busiest_bytes"] = busiest_bytes;
  j["balanced_bound_bytes"] = balanced_bound_bytes;
  j["busiest_peers"] = busiest_peers;
  j["inter_host"] = inter_host;
  j["transfer_cost_us"] = transfer_cost_us;
  j["total_cost_us"] = total_cost_us;
  j["collectives"] = collectives();
  j["cost_model"] = cost_model;
  j["hash"] = fmt::format("{:016x}", hash());
  return j.dump(indent);
}

std::string explain(const CrossMeshPlan& p) {
  std::string out;
  auto rl = [](const std::vector<std::int64_t>& r) { return rank_list(r); };
  out += fmt::format("cross-mesh {} {} {}: {} on {} (world {}) -> {} on {} (world {})\n", fmt::join(p.src.shape(), "x"),
                     to_string(p.src.dtype()), p.cost_model, p.src.placements_str(), p.src.mesh().str(),
                     rl(p.src_ranks), p.dst.placements_str(), p.dst.mesh().str(), rl(p.dst_ranks));
  out += fmt::format("  inside A: {} ({} steps, {:.1f} us)\n", p.pre.trace(), p.pre.steps.size(), p.pre.total_cost_us);
  std::int64_t local = 0, remote = 0;
  for (const auto& m : p.messages)
    (p.world_rank_of_src(m.from) == p.world_rank_of_dst(m.to) ? local : remote) += 1;
  out += fmt::format(
      "  transfer:  {} -> {}: {} messages between ranks, {} local copies; {} bytes cross, busiest rank {} bytes "
      "(balanced bound {}), {} peers, {}, {:.1f} us\n",
      p.pre.dst.placements_str(), p.post.src.placements_str(), remote, local, p.transfer_bytes, p.busiest_bytes,
      p.balanced_bound_bytes, p.busiest_peers, p.inter_host ? "inter-host" : "intra-host", p.transfer_cost_us);
  out += fmt::format("  inside B: {} ({} steps, {:.1f} us)\n", p.post.trace(), p.post.steps.size(), p.post.total_cost_us);
  out += fmt::format("  total {:.1f} us, {} collectives\n", p.total_cost_us, p.collectives());
  return out;
}

}  // namespace dtensor
