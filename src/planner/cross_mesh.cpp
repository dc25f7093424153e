// Cross-mesh planning (docs/cross-mesh.md): intermediate layouts on both meshes, the transfer
// between them with balanced senders, and the three parts' costs.
#include "dtensor/cross_mesh_plan.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <fmt/ranges.h>

#include "dtensor/error.hpp"
#include "dtensor/plan_cache.hpp"
#include "planner/bounds.hpp"
#include "placement/hash.hpp"
#include "placement/json_fields.hpp"
#include "placement/odometer.hpp"

namespace dtensor {
namespace {

constexpr std::size_t kMaxCandidates = 64;  // per side

void check_rank_list(const char* which, const Mesh& mesh, std::span<const std::int64_t> ranks, std::int64_t world) {
  if (static_cast<std::int64_t>(ranks.size()) != mesh.num_ranks())
    throw InputError(fmt::format("{} mesh {} has {} ranks but its world rank list has {} entries", which, mesh.str(),
                                 mesh.num_ranks(), ranks.size()));
  // checked before any arithmetic on them (the world size is one more than the largest)
  for (auto r : ranks) {
    if (r < 0) throw InputError(fmt::format("{} world rank {} is negative", which, r));
    if (r >= kMaxWorldSize)
      throw InputError(fmt::format("{} world rank {} is not below 2^31 ({})", which, r, kMaxWorldSize));
    if (world >= 0 && r >= world)
      throw InputError(fmt::format("{} world rank {} does not exist in a world of {} ranks", which, r, world));
  }
  std::vector<std::int64_t> sorted(ranks.begin(), ranks.end());
  std::sort(sorted.begin(), sorted.end());
  if (const auto it = std::adjacent_find(sorted.begin(), sorted.end()); it != sorted.end())
    throw InputError(fmt::format("{} world rank {} is listed twice", which, *it));
}

std::int64_t world_of(std::span<const std::int64_t> a, std::span<const std::int64_t> b, std::int64_t given) {
  if (given >= 0) return given;
  std::int64_t m = 0;
  for (auto r : a) m = std::max(m, r + 1);
  for (auto r : b) m = std::max(m, r + 1);
  return m;
}

// The world ranks a plan uses, numbered compactly (0 .. used-1 in the order of their ids), so
// that every per-world-rank table follows the plan's ranks, never the largest id.
struct UsedRanks {
  std::span<const std::int64_t> src_ids, dst_ids;  // world rank ids, by mesh rank
  std::vector<std::int64_t> src, dst;              // compact index, by mesh rank
  std::size_t used = 0;
  UsedRanks(std::span<const std::int64_t> a, std::span<const std::int64_t> b) : src_ids(a), dst_ids(b) {
    const auto ids = used_world_ranks(a, b);
    used = ids.size();
    auto index = [&](std::span<const std::int64_t> ranks, std::vector<std::int64_t>& out) {
      for (auto r : ranks) out.push_back(std::lower_bound(ids.begin(), ids.end(), r) - ids.begin());
    };
    index(a, src);
    index(b, dst);
  }
};

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

// One intermediate layout's per-rank index sets and, for A, its replica classes (ranks with
// identical holdings, in order of their lowest rank; two A ranks' boxes are identical or disjoint).
struct Side {
  std::vector<std::vector<IndexSet>> sets;
  std::vector<std::vector<std::int64_t>> classes;
};

Side side_of(const Layout& l, bool with_classes) {
  Side sd;
  sd.sets = rank_sets(l);
  if (!with_classes) return sd;
  std::map<std::vector<std::int64_t>, std::size_t> index;  // key: the holdings' runs, dims separated by -1
  for (std::size_t a = 0; a < sd.sets.size(); ++a) {
    if (box_numel(sd.sets[a]) == 0) continue;
    std::vector<std::int64_t> key;
    for (const auto& set : sd.sets[a]) {
      for (const auto& r : set.runs()) key.insert(key.end(), {r.start, r.stop});
      key.push_back(-1);
    }
    auto [it, fresh] = index.try_emplace(std::move(key), sd.classes.size());
    if (fresh) sd.classes.emplace_back();
    sd.classes[it->second].push_back(static_cast<std::int64_t>(a));
  }
  return sd;
}


struct Piece {
  std::size_t k;
  std::int64_t b, n, rows;
};

TransferResult finish(std::vector<CrossMeshPlan::Message> messages, const UsedRanks& u, std::int64_t s,
                      std::int64_t devices_per_host, std::int64_t bound) {
  TransferResult t;
  std::sort(messages.begin(), messages.end(),
            [](const auto& x, const auto& y) { return x.to != y.to ? x.to < y.to : x.from < y.from; });
  std::vector<std::int64_t> sent(u.used, 0), recv(u.used, 0), local(u.used, 0);
  std::vector<std::vector<std::int64_t>> peers(u.used);
  for (const auto& m : messages) {
    const auto wa = static_cast<std::size_t>(u.src[static_cast<std::size_t>(m.from)]);
    const auto wb = static_cast<std::size_t>(u.dst[static_cast<std::size_t>(m.to)]);
    if (wa == wb) {
      local[wa] += m.elements;
      continue;
    }
    sent[wa] += m.elements;
    recv[wb] += m.elements;
    t.transfer_bytes += m.elements * s;
    peers[wa].push_back(static_cast<std::int64_t>(wb));
    peers[wb].push_back(static_cast<std::int64_t>(wa));
    const auto ida = u.src_ids[static_cast<std::size_t>(m.from)], idb = u.dst_ids[static_cast<std::size_t>(m.to)];
    if (devices_per_host > 0 && ida / devices_per_host != idb / devices_per_host) t.inter_host = true;
  }
  for (std::size_t w = 0; w < u.used; ++w) {
    auto& pw = peers[w];
    std::sort(pw.begin(), pw.end());
    pw.erase(std::unique(pw.begin(), pw.end()), pw.end());
    t.busiest_bytes = std::max(t.busiest_bytes, std::max(sent[w], recv[w]) * s);
    t.busiest_peers = std::max(t.busiest_peers, static_cast<std::int64_t>(pw.size()));
    t.copy_bytes = std::max(t.copy_bytes, (sent[w] + recv[w] + local[w]) * s);
  }
  t.bound_bytes = bound * s;
  t.messages = std::move(messages);
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

// The transfer from A's intermediate layout (no Partial) to B's: every B rank's part, block by
// block of A's holdings, from a holder on its own world rank when there is one. The rest goes
// one of two ways, whichever the cost model prices lower (ties: the first, fewer messages):
//  - whole: each piece from one holder, largest pieces first, to the holder whose max(sent,
//    received) grows least (ties: the lower mesh rank);
//  - split: each class's pieces, in receiver order, filled into its holders in rank order up to
//    an even share each (a piece split by rows of its first dim longer than 1), which reaches the
//    balanced bound within one row.
TransferResult compute_transfer(const Side& A, const Side& B, const UsedRanks& u, std::int64_t s, const CostModel& cost) {
  std::vector<CrossMeshPlan::Message> fixed;  // local copies
  std::vector<Piece> pending;
  std::vector<std::int64_t> recv(u.used, 0), class_total(A.classes.size(), 0);
  for (std::int64_t b = 0; b < static_cast<std::int64_t>(B.sets.size()); ++b) {
    const auto& nb = B.sets[static_cast<std::size_t>(b)];
    const auto wb = u.dst[static_cast<std::size_t>(b)];
    for (std::size_t k = 0; k < A.classes.size(); ++k) {
      const auto& hk = A.sets[static_cast<std::size_t>(A.classes[k].front())];
      std::int64_t n = 1, rows = 1;
      bool found = false;
      for (std::size_t d = 0; d < nb.size() && n > 0; ++d) {
        const auto o = nb[d].overlap(hk[d]);
        n *= o;
        if (!found && o > 1) {
          rows = o;
          found = true;
        }
      }
      if (n == 0) continue;
      std::optional<std::int64_t> self;
      for (auto a : A.classes[k])
        if (u.src[static_cast<std::size_t>(a)] == wb) self = a;
      if (self) {
        fixed.push_back({*self, b, n});
        continue;
      }
      pending.push_back({k, b, n, rows});
      recv[static_cast<std::size_t>(wb)] += n;
      class_total[k] += n;
    }
  }
  std::int64_t bound = 0;
  for (auto r : recv) bound = std::max(bound, r);
  for (std::size_t k = 0; k < A.classes.size(); ++k) {
    const auto c = static_cast<std::int64_t>(A.classes[k].size());
    bound = std::max(bound, (class_total[k] + c - 1) / c);
  }
  // whole pieces, greedy
  std::vector<CrossMeshPlan::Message> whole = fixed;
  {
    std::vector<Piece> order = pending;
    std::stable_sort(order.begin(), order.end(), [](const Piece& x, const Piece& y) { return x.n > y.n; });
    std::vector<std::int64_t> sent(u.used, 0);
    for (const auto& p : order) {
      std::int64_t best = -1, best_key = 0, best_sent = 0;
      for (auto a : A.classes[p.k]) {
        const auto w = static_cast<std::size_t>(u.src[static_cast<std::size_t>(a)]);
        const auto key = std::max(sent[w] + p.n, recv[w]);
        if (best < 0 || key < best_key || (key == best_key && sent[w] < best_sent)) {
          best = a;
          best_key = key;
          best_sent = sent[w];
        }
      }
      sent[static_cast<std::size_t>(u.src[static_cast<std::size_t>(best)])] += p.n;
      whole.push_back({best, p.b, p.n});
    }
  }
  auto t_whole = finish(std::move(whole), u, s, cost.devices_per_host, bound);
  bool any_split = false;
  for (const auto& c : A.classes) any_split = any_split || c.size() > 1;
  if (!any_split) return t_whole;
  // split: water-fill each class's holders in rank order
  std::vector<CrossMeshPlan::Message> split = fixed;
  for (std::size_t k = 0; k < A.classes.size(); ++k) {
    const auto& holders = A.classes[k];
    const auto c = static_cast<std::int64_t>(holders.size());
    const auto cap = (class_total[k] + c - 1) / c;
    std::size_t h = 0;
    std::int64_t load = 0;
    for (const auto& p : pending) {
      if (p.k != k) continue;
      const std::int64_t z = p.n / p.rows;  // elements per row
      std::int64_t row = 0;
      while (row < p.rows) {
        if (load >= cap && h + 1 < holders.size()) {
          ++h;
          load = 0;
        }
        const bool last = h + 1 == holders.size();
        const std::int64_t take = last ? p.rows - row : std::min(p.rows - row, std::max<std::int64_t>(1, (cap - load + z - 1) / z));
        CrossMeshPlan::Message m{holders[h], p.b, take * z};
        if (take != p.rows) {
          m.row_begin = row;
          m.row_end = row + take;
        }
        split.push_back(m);
        load += take * z;
        row += take;
      }
    }
  }
  auto t_split = finish(std::move(split), u, s, cost.devices_per_host, bound);
  return transfer_cost(t_split, cost) < transfer_cost(t_whole, cost) ? t_split : t_whole;
}

void add_unique(std::vector<Sharding>& out, const Sharding& s) {
  if (out.size() < kMaxCandidates && std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
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
  std::vector<std::size_t> pick(static_cast<std::size_t>(mesh_ndim), 0);  // 0: R, k: options[k - 1]
  do {
    Sharding s = Sharding::replicated(mesh_ndim, tensor_ndim);
    for (int m = 0; m < mesh_ndim; ++m)
      if (const auto p = pick[static_cast<std::size_t>(m)]; p > 0) {
        ShardEntry e = options[p - 1].second;
        e.mesh_dim = m;
        s = s.with_shard_appended(options[p - 1].first, e);
      }
    add_unique(out, s);
  } while (out.size() < kMaxCandidates &&
           detail::next_digits(
               pick.size(), [&](std::size_t k) -> auto& { return pick[k]; }, [&](std::size_t) { return options.size() + 1; }));
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


// The derived candidates of the side whose own layout is `side` (capped, duplicates dropped, in
// order), then that mesh's plain layouts.
std::vector<Sharding> with_plain_layouts(std::vector<Sharding> derived, const Layout& side, const Layout& src,
                                         const Layout& dst) {
  std::vector<Sharding> out;
  for (const auto& c : derived) add_unique(out, c);
  add_plain_layouts(side.sharding().mesh_ndim(), side.sharding().tensor_ndim(),
                    strided_splits(src.sharding(), dst.sharding()), out);
  return out;
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
  return with_plain_layouts(std::move(derived), src, src, dst);
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
  return with_plain_layouts(std::move(derived), dst, src, dst);
}

}  // namespace

int cross_mesh_split_dim(std::span<const IndexSet> box) noexcept {
  for (std::size_t d = 0; d < box.size(); ++d)
    if (box[d].size() > 1) return static_cast<int>(d);
  return 0;
}

namespace {
std::vector<IndexSet> split_box(std::vector<IndexSet> box, const CrossMeshPlan::Message& m) {
  if (m.row_end < 0) return box;
  const int d = cross_mesh_split_dim(box);
  if (box.empty() || m.row_begin < 0 || m.row_begin >= m.row_end || m.row_end > box[static_cast<std::size_t>(d)].size())
    throw InputError(fmt::format("cross-mesh message (A rank {} to B rank {}) has rows [{}, {}) outside its {} rows", m.from,
                                 m.to, m.row_begin, m.row_end, box.empty() ? 0 : box[static_cast<std::size_t>(d)].size()));
  box[static_cast<std::size_t>(d)] = box[static_cast<std::size_t>(d)].slice(m.row_begin, m.row_end);
  return box;
}
}  // namespace

std::vector<IndexSet> message_box(const CrossMeshPlan& p, const CrossMeshPlan::Message& m) {
  const auto h = p.pre.dst.indices(p.src.mesh().coord_of_rank(m.from));
  const auto n = p.post.src.indices(p.dst.mesh().coord_of_rank(m.to));
  std::vector<IndexSet> box;
  for (std::size_t d = 0; d < h.size(); ++d) box.push_back(h[d].intersect(n[d]));
  return split_box(std::move(box), m);
}

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
    detail::hash_combine(h, static_cast<std::uint64_t>(m.row_begin));
    detail::hash_combine(h, static_cast<std::uint64_t>(m.row_end));
  }
  return h;
}

std::vector<std::int64_t> used_world_ranks(std::span<const std::int64_t> src_ranks, std::span<const std::int64_t> dst_ranks) {
  std::vector<std::int64_t> ids(src_ranks.begin(), src_ranks.end());
  ids.insert(ids.end(), dst_ranks.begin(), dst_ranks.end());
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
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
  if (options.world_size > kMaxWorldSize)
    throw InputError(fmt::format("world size {} is above 2^31 ({})", options.world_size, kMaxWorldSize));
  check_rank_list("source", src.mesh(), src_ranks, options.world_size);
  check_rank_list("target", dst.mesh(), dst_ranks, options.world_size);
  const std::int64_t world = world_of(src_ranks, dst_ranks, options.world_size);
  const UsedRanks used(src_ranks, dst_ranks);

  CrossMeshPlan best;
  std::optional<double> best_cost;
  std::optional<std::string> first_error;
  const auto sc = options.src_via ? std::vector<Sharding>{*options.src_via} : src_candidates(src, dst);
  const auto dc = options.dst_via ? std::vector<Sharding>{*options.dst_via} : dst_candidates(src, dst);
  for (const auto* via : {&options.src_via, &options.dst_via})
    if (*via && (*via)->has_partial())
      throw InputError(fmt::format("intermediate layout {} has a Partial: the transfer moves whole values", (*via)->str()));
  auto layouts_of = [&](const Layout& like, const std::vector<Sharding>& cands) {
    std::vector<std::optional<Layout>> out;
    for (const auto& c : cands) {
      try {
        out.emplace_back(Layout(like.mesh(), like.shape(), like.dtype(), c));
      } catch (const Error& e) {
        if (!first_error) first_error = e.what();
        out.emplace_back();
      }
    }
    return out;
  };
  const auto mids_a = layouts_of(src, sc), mids_b = layouts_of(dst, dc);
  // the parts' plans, made when a pair first needs them (most pairs are pruned before)
  PlanOptions inner = options.plan;
  inner.runner_up = false;  // the parts' runner-ups are not reported
  std::vector<std::shared_ptr<const Plan>> pres(mids_a.size()), posts(mids_b.size());
  std::vector<char> pre_done(mids_a.size(), 0), post_done(mids_b.size(), 0);
  auto plan_part = [&](std::vector<std::shared_ptr<const Plan>>& plans, std::vector<char>& done, std::size_t k,
                       const Layout& from, const Layout& to) -> const Plan* {
    if (!done[k]) {
      done[k] = 1;
      try {
        plans[k] = options.cache ? options.cache->get_or_plan(from, to, cost, inner)
                                 : std::make_shared<const Plan>(plan_redistribution(from, to, cost, inner));
      } catch (const Error& e) {
        if (!first_error) first_error = e.what();
      }
    }
    return plans[k].get();
  };
  // A floor of each part's cost without planning it: the part's A* bound at its source (admissible:
  // at most the optimal plan's cost; docs/planner.md), less 0.1 ns and a relative 1e-9: the bound may be
  // exact in quantised picoseconds while a plan's total sums unquantised step costs.
  const EdgeSet part_edges = edge_set_of(cost, inner);
  auto part_floor = [&](const Layout& from, const Layout& to) {
    if (from.sharding() == to.sharding()) return 0.0;
    try {
      const Query q(from, to, cost, part_edges);
      const Bounds b(q);
      const double us = b.lower_bound(from.sharding()).us;
      return std::max(0.0, us - 1e-4 - 1e-9 * us);
    } catch (const Error&) {
      return 0.0;  // planning it reports the error
    }
  };
  // A part the cache already holds is taken from it: its floor is its cost.
  auto floor_of_part = [&](std::vector<std::shared_ptr<const Plan>>& plans, std::vector<char>& done, std::size_t k,
                           const Layout& from, const Layout& to) {
    if (options.cache)
      if (auto hit = options.cache->peek(from, to, cost, inner)) {
        done[k] = 1;
        plans[k] = std::move(hit);
        return plans[k]->total_cost_us;
      }
    return part_floor(from, to);
  };
  std::vector<double> pre_floor(mids_a.size(), 0), post_floor(mids_b.size(), 0);
  for (std::size_t i = 0; i < mids_a.size(); ++i)
    if (mids_a[i]) pre_floor[i] = floor_of_part(pres, pre_done, i, src, *mids_a[i]);
  for (std::size_t j = 0; j < mids_b.size(); ++j)
    if (mids_b[j]) post_floor[j] = floor_of_part(posts, post_done, j, *mids_b[j], dst);
  const auto s = static_cast<std::int64_t>(itemsize(src.dtype()));
  std::vector<Side> src_sides(mids_a.size()), dst_sides(mids_b.size());
  // Floors of the transfer's busiest-rank elements: a B rank on no A rank's world rank receives its
  // whole part (recv_floor); when no rank is on both meshes, every element is sent to each of the
  // R_j B ranks holding it (B's layout without Partial holds every element equally often), so a
  // class of A ranks sends its block R_j times, at best split evenly (send_floor_i * R_j).
  std::vector<std::int64_t> recv_floor(mids_b.size(), 0), copies(mids_b.size(), 0);
  std::vector<double> send_floor(mids_a.size(), 0);
  const std::set<std::int64_t> on_a(src_ranks.begin(), src_ranks.end());
  bool disjoint = true;
  for (auto r : dst_ranks) disjoint = disjoint && !on_a.count(r);
  for (std::size_t i = 0; i < mids_a.size(); ++i) {
    if (!mids_a[i]) continue;
    src_sides[i] = side_of(*mids_a[i], true);
    for (const auto& cl : src_sides[i].classes)
      send_floor[i] = std::max(send_floor[i], static_cast<double>(box_numel(src_sides[i].sets[static_cast<std::size_t>(cl.front())])) /
                                                  static_cast<double>(cl.size()));
  }
  for (std::size_t j = 0; j < mids_b.size(); ++j) {
    if (!mids_b[j]) continue;
    dst_sides[j] = side_of(*mids_b[j], false);
    std::int64_t held = 0;
    for (std::size_t b = 0; b < dst_sides[j].sets.size(); ++b) {
      const auto n = box_numel(dst_sides[j].sets[b]);
      held += n;
      if (!on_a.count(dst_ranks[b])) recv_floor[j] = std::max(recv_floor[j], n);
    }
    copies[j] = src.numel() > 0 ? held / src.numel() : 0;
  }
  // when no A rank shares a host with a B rank, every message crosses hosts
  bool all_inter = cost.devices_per_host > 0;
  for (auto a : src_ranks)
    for (auto b : dst_ranks) all_inter = all_inter && a / cost.devices_per_host != b / cost.devices_per_host;
  auto floor_of = [&](std::size_t i, std::size_t j) {
    double most = static_cast<double>(recv_floor[j]);
    if (disjoint) most = std::max(most, std::floor(send_floor[i] * static_cast<double>(copies[j])));
    if (most <= 0) return 0.0;
    // a direct step of those bytes to one peer, without copies: what any transfer moving them costs at least
    Traffic t;
    t.kind = Traffic::Kind::direct;
    t.peers = 1;
    t.bytes = most * static_cast<double>(s);
    t.inter_host = true;
    const double inter = cost.time(t).total_us();
    if (all_inter) return inter;
    t.inter_host = false;
    return std::min(inter, cost.time(t).total_us());
  };
  // every (A, B) pair of intermediates, by the floor of its total (transfer floor + both parts'
  // floors): once it passes the best total found, no later pair can win; a pair whose floor with
  // its plans' costs in place of their floors passes it is skipped (so the result is the least
  // total, ties to the lower (A, B) candidate index, whatever the order)
  struct Pair {
    std::size_t i, j;
    double transfer_floor, floor;
  };
  std::vector<Pair> order;
  for (std::size_t i = 0; i < mids_a.size(); ++i)
    for (std::size_t j = 0; j < mids_b.size(); ++j)
      if (mids_a[i] && mids_b[j]) {
        const double tf = floor_of(i, j);
        order.push_back({i, j, tf, tf + pre_floor[i] + post_floor[j]});
      }
  std::stable_sort(order.begin(), order.end(), [](const Pair& x, const Pair& y) { return x.floor < y.floor; });
  std::optional<std::pair<std::size_t, std::size_t>> best_pair;
  for (const auto& [i, j, tf, floor] : order) {
    if (best_cost && floor > *best_cost) break;
    const Plan* pre_p = plan_part(pres, pre_done, i, src, *mids_a[i]);
    if (!pre_p || (best_cost && pre_p->total_cost_us + tf + post_floor[j] > *best_cost)) continue;
    const Plan* post_p = plan_part(posts, post_done, j, *mids_b[j], dst);
    if (!post_p || (best_cost && pre_p->total_cost_us + post_p->total_cost_us + tf > *best_cost)) continue;
    const Plan& pre = *pre_p;
    const Plan& post = *post_p;
    const auto t = compute_transfer(src_sides[i], dst_sides[j], used, s, cost);
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
  if (p.world_size > kMaxWorldSize)
    throw InputError(fmt::format("cross-mesh plan: world size {} is above 2^31 ({})", p.world_size, kMaxWorldSize));
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
    std::vector<IndexSet> whole;
    for (std::size_t d = 0; d < hold[static_cast<std::size_t>(m.from)].size(); ++d)
      whole.push_back(hold[static_cast<std::size_t>(m.from)][d].intersect(need[static_cast<std::size_t>(m.to)][d]));
    const auto box = box_numel(split_box(whole, m));
    if (m.elements <= 0 || m.elements != box)
      throw InputError(fmt::format("cross-mesh message {} (A rank {} to B rank {}) has {} elements; the ranks share {}", i,
                                   m.from, m.to, m.elements, box));
    // two senders to one receiver hold different (so disjoint) blocks, or send disjoint rows of one
    for (std::size_t j = i; j-- > 0 && p.messages[j].to == m.to;) {
      const auto& q = p.messages[j];
      if (hold[static_cast<std::size_t>(q.from)] != hold[static_cast<std::size_t>(m.from)]) continue;
      const bool disjoint = q.row_end >= 0 && m.row_end >= 0 && (q.row_end <= m.row_begin || m.row_end <= q.row_begin);
      if (!disjoint) throw InputError(fmt::format("cross-mesh messages {} and {} send B rank {} the same elements", j, i, m.to));
    }
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
    j["messages"].push_back({{"from", m.from}, {"to", m.to}, {"elements", m.elements}, {"row_begin", m.row_begin},
                             {"row_end", m.row_end}, {"local", world_rank_of_src(m.from) == world_rank_of_dst(m.to)}});
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

CrossMeshPlan CrossMeshPlan::from_json(std::string_view text) {
  using json = nlohmann::json;
  const json j = detail::parse_json(text, "cross-mesh plan");
  if (!j.is_object()) throw InputError("cross-mesh plan JSON must be an object");
  static const std::set<std::string> known{"kind", "version", "world_size", "src_ranks", "dst_ranks", "pre", "post",
                                           "messages", "transfer_bytes", "busiest_bytes", "balanced_bound_bytes",
                                           "busiest_peers", "inter_host", "transfer_cost_us", "total_cost_us",
                                           "collectives", "cost_model", "hash"};
  for (const auto& [k, v] : j.items())
    if (!known.count(k)) throw InputError(fmt::format("cross-mesh plan JSON has an unknown field {}", quote_input(k)));
  auto field = [&](const json& o, const char* key) -> const json& {
    auto it = o.find(key);
    if (it == o.end()) throw InputError(fmt::format("cross-mesh plan JSON lacks the field '{}'", key));
    return *it;
  };
  auto number = [&](const char* key) {
    const json& v = field(j, key);
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
      throw InputError(fmt::format("cross-mesh plan JSON field '{}' must be a finite number >= 0, not {}", key,
                                   detail::json_quote(v)));
    return v.get<double>();
  };
  if (field(j, "kind") != "cross_mesh") throw InputError("cross-mesh plan JSON 'kind' must be \"cross_mesh\"");
  if (detail::json_int(field(j, "version"), "version", 1, 1 << 20) != 1) throw InputError("cross-mesh plan JSON version must be 1");
  CrossMeshPlan p;
  p.world_size = detail::json_int(field(j, "world_size"), "world_size", 1, kMaxWorldSize);
  auto plan_of = [&](const char* key) {
    try {
      return Plan::from_json(field(j, key).dump());
    } catch (const InputError& e) {
      throw InputError(fmt::format("cross-mesh plan JSON '{}': {}", key, e.what()));
    }
  };
  p.pre = plan_of("pre");
  p.post = plan_of("post");
  p.src = p.pre.src;
  p.dst = p.post.dst;
  p.src_ranks = detail::json_int_list(field(j, "src_ranks"), "src_ranks", 0, p.world_size - 1);
  p.dst_ranks = detail::json_int_list(field(j, "dst_ranks"), "dst_ranks", 0, p.world_size - 1);
  check_rank_list("source", p.src.mesh(), p.src_ranks, p.world_size);
  check_rank_list("target", p.dst.mesh(), p.dst_ranks, p.world_size);
  const json& cm = field(j, "cost_model");
  if (!cm.is_string()) throw InputError("cross-mesh plan JSON 'cost_model' must be a string");
  p.cost_model = cm.get<std::string>();
  if (p.pre.cost_model != p.cost_model || p.post.cost_model != p.cost_model)
    throw InputError(fmt::format("cross-mesh plan JSON: its parts were planned under cost models {} and {}, the plan under {}",
                                 quote_input(p.pre.cost_model), quote_input(p.post.cost_model), quote_input(p.cost_model)));
  const json& ms = field(j, "messages");
  const auto most = p.src.mesh().num_ranks() * p.dst.mesh().num_ranks();
  if (!ms.is_array() || static_cast<std::int64_t>(ms.size()) > most)
    throw InputError(fmt::format("cross-mesh plan JSON 'messages' must be a list of at most {} messages", most));
  static const std::set<std::string> message_fields{"from", "to", "elements", "row_begin", "row_end", "local"};
  for (std::size_t i = 0; i < ms.size(); ++i) {
    const json& m = ms[i];
    if (!m.is_object()) throw InputError(fmt::format("cross-mesh plan JSON messages[{}] must be an object", i));
    for (const auto& [k, v] : m.items())
      if (!message_fields.count(k)) throw InputError(fmt::format("cross-mesh plan JSON messages[{}] has an unknown field {}", i, quote_input(k)));
    Message x;
    x.from = detail::json_int(field(m, "from"), "from", 0, p.src.mesh().num_ranks() - 1);
    x.to = detail::json_int(field(m, "to"), "to", 0, p.dst.mesh().num_ranks() - 1);
    x.elements = detail::json_int(field(m, "elements"), "elements", 1, INT64_MAX);
    x.row_begin = detail::json_int(field(m, "row_begin"), "row_begin", 0, INT64_MAX);
    x.row_end = detail::json_int(field(m, "row_end"), "row_end", -1, INT64_MAX);
    const json& local = field(m, "local");
    if (!local.is_boolean() || local.get<bool>() != (p.world_rank_of_src(x.from) == p.world_rank_of_dst(x.to)))
      throw InputError(fmt::format("cross-mesh plan JSON messages[{}].local must be {}", i,
                                   p.world_rank_of_src(x.from) == p.world_rank_of_dst(x.to)));
    p.messages.push_back(x);
  }
  validate_cross_mesh_plan(p);
  // the transfer's figures, as its messages give them
  const auto t = finish(p.messages, UsedRanks(p.src_ranks, p.dst_ranks), static_cast<std::int64_t>(itemsize(p.src.dtype())), 0, 0);
  p.transfer_bytes = detail::json_int(field(j, "transfer_bytes"), "transfer_bytes", 0, INT64_MAX);
  p.busiest_bytes = detail::json_int(field(j, "busiest_bytes"), "busiest_bytes", 0, INT64_MAX);
  p.busiest_peers = detail::json_int(field(j, "busiest_peers"), "busiest_peers", 0, INT64_MAX);
  p.balanced_bound_bytes = detail::json_int(field(j, "balanced_bound_bytes"), "balanced_bound_bytes", 0, p.busiest_bytes);
  for (const auto& [name, read, want] : {std::tuple{"transfer_bytes", p.transfer_bytes, t.transfer_bytes},
                                         std::tuple{"busiest_bytes", p.busiest_bytes, t.busiest_bytes},
                                         std::tuple{"busiest_peers", p.busiest_peers, t.busiest_peers}})
    if (read != want)
      throw InputError(fmt::format("cross-mesh plan JSON '{}' is {}, its messages give {}", name, read, want));
  const json& ih = field(j, "inter_host");
  if (!ih.is_boolean()) throw InputError("cross-mesh plan JSON 'inter_host' must be true or false");
  p.inter_host = ih.get<bool>();
  p.transfer_cost_us = number("transfer_cost_us");
  p.total_cost_us = number("total_cost_us");
  const double sum = p.pre.total_cost_us + p.transfer_cost_us + p.post.total_cost_us;
  if (std::abs(p.total_cost_us - sum) > 1e-9 * std::max(1.0, sum))
    throw InputError(fmt::format("cross-mesh plan JSON 'total_cost_us' is {}, its parts add up to {}", p.total_cost_us, sum));
  if (detail::json_int(field(j, "collectives"), "collectives", 0, INT64_MAX) != p.collectives())
    throw InputError(fmt::format("cross-mesh plan JSON 'collectives' does not match its parts ({})", p.collectives()));
  const json& h = field(j, "hash");
  if (!h.is_string() || h.get<std::string>() != fmt::format("{:016x}", p.hash()))
    throw InputError(fmt::format("cross-mesh plan JSON 'hash' is {}, the plan's is {:016x}", detail::json_quote(h), p.hash()));
  return p;
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
