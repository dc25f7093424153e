// The cross-mesh planner (cross_mesh_plan.hpp, docs/cross-mesh.md): candidate intermediate layouts
// on each side, the transfer between them, and the cheapest of the combinations.
#include "dtensor/cross_mesh_plan.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cross_mesh_transfer.hpp"
#include "dtensor/error.hpp"
#include "dtensor/plan_cache.hpp"
#include "placement/odometer.hpp"
#include "placement/blocks.hpp"
#include "planner/bounds.hpp"

namespace dtensor {

using namespace cross_mesh_detail;

namespace {

constexpr std::size_t kMaxCandidates = 64;  // per side

std::int64_t world_of(std::span<const std::int64_t> a, std::span<const std::int64_t> b, std::int64_t given) {
  if (given >= 0) return given;
  std::int64_t m = 0;
  for (auto r : a) m = std::max(m, r + 1);
  for (auto r : b) m = std::max(m, r + 1);
  return m;
}

// One intermediate layout's distinct blocks (placement/blocks.hpp) and, for A, its replica
// classes: the non-empty blocks, in order of their lowest rank (two A ranks' boxes are identical
// or disjoint), each held by the block's members.
struct Side {
  std::optional<detail::LayoutBlocks> blocks;
  std::vector<std::int32_t> classes;         // class -> block
  std::vector<std::int32_t> class_of_block;  // block -> class (-1: an empty block)
};

Side side_of(const Layout& l) {
  Side sd;
  sd.blocks.emplace(l);
  sd.class_of_block.assign(sd.blocks->size(), -1);
  for (std::size_t b = 0; b < sd.blocks->size(); ++b)
    if (sd.blocks->numel(b) > 0) {
      sd.class_of_block[b] = static_cast<std::int32_t>(sd.classes.size());
      sd.classes.push_back(static_cast<std::int32_t>(b));
    }
  return sd;
}

struct Piece {
  std::size_t k;
  std::int64_t b, n, rows;
};

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
// The classes a B rank meets are found once per B block by range queries (never every class for
// every B rank): O(pieces log) in all. `a_at_world`: per compact world rank, the A mesh rank on
// it (-1: none).
TransferResult compute_transfer(const Side& A, const Side& B, const UsedRanks& u, std::int64_t s, const CostModel& cost,
                                std::span<const std::int64_t> a_at_world) {
  const auto& ab = *A.blocks;
  const auto& bb = *B.blocks;
  // per B block, the A classes it meets (ascending), once
  std::vector<detail::LayoutBlocks::Meet> met;
  std::vector<std::int64_t> met_start(bb.size() + 1, 0);
  for (std::size_t j = 0; j < bb.size(); ++j) {
    if (bb.numel(j) > 0) ab.meeting(bb.box(j), met);
    met_start[j + 1] = static_cast<std::int64_t>(met.size());
  }
  std::vector<CrossMeshPlan::Message> fixed;  // local copies
  std::vector<Piece> pending;
  std::vector<std::int64_t> recv(u.used, 0), class_total(A.classes.size(), 0);
  const auto nb = static_cast<std::int64_t>(u.dst.size());
  for (std::int64_t b = 0; b < nb; ++b) {
    const auto wb = u.dst[static_cast<std::size_t>(b)];
    const auto j = static_cast<std::size_t>(bb.block_of(b));
    const std::int64_t self = a_at_world[static_cast<std::size_t>(wb)];
    const std::int32_t self_block = self >= 0 ? ab.block_of(self) : -1;
    for (auto i = met_start[j]; i < met_start[j + 1]; ++i) {
      const auto& m = met[static_cast<std::size_t>(i)];
      const auto k = A.class_of_block[static_cast<std::size_t>(m.block)];
      if (m.block == self_block) {
        fixed.push_back({self, b, m.elements});
        continue;
      }
      pending.push_back({static_cast<std::size_t>(k), b, m.elements, m.rows});
      recv[static_cast<std::size_t>(wb)] += m.elements;
      class_total[static_cast<std::size_t>(k)] += m.elements;
    }
  }
  std::int64_t bound = 0;
  for (auto r : recv) bound = std::max(bound, r);
  for (std::size_t k = 0; k < A.classes.size(); ++k) {
    const auto c = static_cast<std::int64_t>(ab.members(static_cast<std::size_t>(A.classes[k])).size());
    bound = std::max(bound, (class_total[k] + c - 1) / c);
  }
  // whole pieces, greedy: largest first, ties in (receiver, class) order
  std::vector<CrossMeshPlan::Message> whole = fixed;
  {
    std::vector<std::pair<std::int64_t, std::size_t>> order;  // (-n, position)
    order.reserve(pending.size());
    for (std::size_t i = 0; i < pending.size(); ++i) order.emplace_back(-pending[i].n, i);
    std::sort(order.begin(), order.end());
    std::vector<std::int64_t> sent(u.used, 0);
    whole.reserve(fixed.size() + pending.size());
    for (const auto& [neg, i] : order) {
      const Piece& p = pending[i];
      std::int64_t best = -1, best_key = 0, best_sent = 0;
      for (auto a : ab.members(static_cast<std::size_t>(A.classes[p.k]))) {
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
  for (auto blk : A.classes) any_split = any_split || ab.members(static_cast<std::size_t>(blk)).size() > 1;
  if (!any_split) return t_whole;
  // split: water-fill each class's holders in rank order (each class's pieces in receiver order)
  std::vector<std::vector<std::size_t>> of_class(A.classes.size());
  for (std::size_t i = 0; i < pending.size(); ++i) of_class[pending[i].k].push_back(i);
  std::vector<CrossMeshPlan::Message> split = std::move(fixed);
  for (std::size_t k = 0; k < A.classes.size(); ++k) {
    const auto holders = ab.members(static_cast<std::size_t>(A.classes[k]));
    const auto c = static_cast<std::int64_t>(holders.size());
    const auto cap = (class_total[k] + c - 1) / c;
    std::size_t h = 0;
    std::int64_t load = 0;
    for (const auto i : of_class[k]) {
      const Piece& p = pending[i];
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
  return transfer_cost(t_split, cost) < transfer_cost(t_whole, cost) ? std::move(t_split) : std::move(t_whole);
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
  // per compact world rank, the A mesh rank on it (-1: none)
  std::vector<std::int64_t> a_at_world(used.used, -1);
  for (std::size_t a = 0; a < used.src.size(); ++a) a_at_world[static_cast<std::size_t>(used.src[a])] = static_cast<std::int64_t>(a);
  bool disjoint = true;
  for (auto w : used.dst) disjoint = disjoint && a_at_world[static_cast<std::size_t>(w)] < 0;
  for (std::size_t i = 0; i < mids_a.size(); ++i) {
    if (!mids_a[i]) continue;
    src_sides[i] = side_of(*mids_a[i]);
    const auto& ab = *src_sides[i].blocks;
    for (const auto blk : src_sides[i].classes)
      send_floor[i] = std::max(send_floor[i], static_cast<double>(ab.numel(static_cast<std::size_t>(blk))) /
                                                  static_cast<double>(ab.members(static_cast<std::size_t>(blk)).size()));
  }
  for (std::size_t j = 0; j < mids_b.size(); ++j) {
    if (!mids_b[j]) continue;
    dst_sides[j] = side_of(*mids_b[j]);
    const auto& bb = *dst_sides[j].blocks;
    std::int64_t held = 0;
    for (std::size_t blk = 0; blk < bb.size(); ++blk) {
      const auto n = bb.numel(blk);
      for (auto b : bb.members(blk)) {
        held += n;
        if (a_at_world[static_cast<std::size_t>(used.dst[static_cast<std::size_t>(b)])] < 0) recv_floor[j] = std::max(recv_floor[j], n);
      }
    }
    copies[j] = src.numel() > 0 ? held / src.numel() : 0;
  }
  // when no A rank shares a host with a B rank, every message crosses hosts
  bool all_inter = cost.devices_per_host > 0;
  if (all_inter) {
    std::set<std::int64_t> a_hosts;
    for (auto a : src_ranks) a_hosts.insert(a / cost.devices_per_host);
    for (auto b : dst_ranks) all_inter = all_inter && !a_hosts.count(b / cost.devices_per_host);
  }
  auto floor_of = [&](std::size_t i, std::size_t j) {
    double most = static_cast<double>(recv_floor[j]);
    if (disjoint) most = std::max(most, std::floor(send_floor[i] * static_cast<double>(copies[j])));
    if (most <= 0) return 0.0;
    // A B rank receives a piece from each A class its block meets, each from another world rank
    // (but for one, held on its own world rank when the meshes share ranks): the busiest rank's
    // peers are at least the most classes one B block meets, less one unless the meshes are disjoint.
    const std::int64_t met = src_sides[i].blocks->most_met_by(*dst_sides[j].blocks) - (disjoint ? 0 : 1);
    return cost.direct_floor_us(most * static_cast<double>(s), met, all_inter);
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
    const auto t = compute_transfer(src_sides[i], dst_sides[j], used, s, cost, a_at_world);
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

}  // namespace dtensor
