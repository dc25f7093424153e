// The distinct blocks of a layout and the blocks a box meets (blocks.hpp).
#include "placement/blocks.hpp"

#include <algorithm>
#include <map>
#include <numeric>

namespace dtensor::detail {

LayoutBlocks::LayoutBlocks(const Layout& l) {
  const Mesh& mesh = l.mesh();
  const auto nd = static_cast<std::size_t>(l.ndim());
  const std::int64_t N = mesh.num_ranks();
  const auto mesh_shape = mesh.shape();
  sets_.resize(nd);
  sorted_runs_.assign(nd, 1);
  // Per tensor dim: the mesh dims that shard it; every combination of their coordinates gives a
  // set (the other coordinates do not change it), deduplicated by its runs, then numbered in
  // order of first index. `combo_id[d][c]` is the set id of combination c (mixed radix, the
  // entries' mesh dims in ascending order).
  std::vector<std::vector<int>> dims(nd);
  std::vector<std::vector<std::int32_t>> combo_id(nd);
  std::vector<std::int64_t> coord(mesh_shape.size(), 0);
  for (std::size_t d = 0; d < nd; ++d) {
    for (const auto& e : l.sharding().entries(static_cast<int>(d))) dims[d].push_back(e.mesh_dim);
    std::sort(dims[d].begin(), dims[d].end());
    dims[d].erase(std::unique(dims[d].begin(), dims[d].end()), dims[d].end());
    std::int64_t combos = 1;
    for (int m : dims[d]) combos *= mesh_shape[static_cast<std::size_t>(m)];
    std::map<std::vector<std::int64_t>, std::int32_t> ids;
    std::vector<IndexSet> distinct;
    std::fill(coord.begin(), coord.end(), 0);
    for (std::int64_t c = 0; c < combos; ++c) {
      std::int64_t rest = c;
      for (std::size_t k = dims[d].size(); k-- > 0;) {
        const auto m = static_cast<std::size_t>(dims[d][k]);
        coord[m] = rest % mesh_shape[m];
        rest /= mesh_shape[m];
      }
      IndexSet s = l.indices(coord, static_cast<int>(d));
      std::vector<std::int64_t> key;
      for (const auto& r : s.runs()) key.insert(key.end(), {r.start, r.stop});
      const auto [it, fresh] = ids.emplace(std::move(key), static_cast<std::int32_t>(distinct.size()));
      if (fresh) distinct.push_back(std::move(s));
      combo_id[d].push_back(it->second);
    }
    // renumber by first index (empty sets first), ties by discovery
    std::vector<std::int32_t> order(distinct.size());
    std::iota(order.begin(), order.end(), 0);
    auto first = [&](std::int32_t i) { return distinct[static_cast<std::size_t>(i)].first_or(-1); };
    std::sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) { return std::pair(first(a), a) < std::pair(first(b), b); });
    std::vector<std::int32_t> renum(order.size());
    for (std::size_t i = 0; i < order.size(); ++i) {
      renum[static_cast<std::size_t>(order[i])] = static_cast<std::int32_t>(i);
      sets_[d].push_back(std::move(distinct[static_cast<std::size_t>(order[i])]));
    }
    for (auto& id : combo_id[d]) id = renum[static_cast<std::size_t>(id)];
    for (std::size_t i = 0; i < sets_[d].size(); ++i) {
      const auto r = sets_[d][i].runs();
      if (r.size() > 1 || (i > 0 && !r.empty() && !sets_[d][i - 1].runs().empty() &&
                           sets_[d][i - 1].runs().back().stop > r.front().start))
        sorted_runs_[d] = 0;
    }
  }
  // Per rank, its tuple of set ids; ranks with equal tuples form a block.
  std::vector<std::int32_t> rank_tuple(static_cast<std::size_t>(N) * nd);
  for (std::int64_t r = 0; r < N; ++r) {
    const auto cr = mesh.coord_of_rank(r);
    for (std::size_t d = 0; d < nd; ++d) {
      std::int64_t c = 0;
      for (int m : dims[d]) c = c * mesh_shape[static_cast<std::size_t>(m)] + cr[static_cast<std::size_t>(m)];
      rank_tuple[static_cast<std::size_t>(r) * nd + d] = combo_id[d][static_cast<std::size_t>(c)];
    }
  }
  auto tuple_of = [&](std::int64_t r) {
    return std::span<const std::int32_t>(rank_tuple.data() + static_cast<std::size_t>(r) * nd, nd);
  };
  std::vector<std::int64_t> ranks(static_cast<std::size_t>(N));
  std::iota(ranks.begin(), ranks.end(), 0);
  std::sort(ranks.begin(), ranks.end(), [&](std::int64_t a, std::int64_t b) {
    const auto x = tuple_of(a), y = tuple_of(b);
    if (!std::equal(x.begin(), x.end(), y.begin())) return std::lexicographical_compare(x.begin(), x.end(), y.begin(), y.end());
    return a < b;
  });
  // groups of equal tuples (each ascending by rank), numbered by their lowest rank
  std::vector<std::pair<std::int64_t, std::size_t>> groups;  // (lowest rank, start in `ranks`)
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const bool fresh = i == 0 || !std::equal(tuple_of(ranks[i]).begin(), tuple_of(ranks[i]).end(), tuple_of(ranks[i - 1]).begin());
    if (fresh) groups.emplace_back(ranks[i], i);
  }
  std::vector<std::int32_t> block_of_group(groups.size());
  {
    std::vector<std::size_t> by_rank(groups.size());
    std::iota(by_rank.begin(), by_rank.end(), 0);
    std::sort(by_rank.begin(), by_rank.end(), [&](std::size_t a, std::size_t b) { return groups[a].first < groups[b].first; });
    for (std::size_t b = 0; b < by_rank.size(); ++b) block_of_group[by_rank[b]] = static_cast<std::int32_t>(b);
    tuples_.resize(groups.size() * nd);
    block_of_rank_.resize(static_cast<std::size_t>(N));
    first_member_.assign(groups.size() + 1, 0);
    members_.reserve(static_cast<std::size_t>(N));
    for (std::size_t b = 0; b < by_rank.size(); ++b) {
      const std::size_t g = by_rank[b];
      const std::size_t end = g + 1 < groups.size() ? groups[g + 1].second : ranks.size();
      for (std::size_t i = groups[g].second; i < end; ++i) {
        members_.push_back(ranks[i]);
        block_of_rank_[static_cast<std::size_t>(ranks[i])] = static_cast<std::int32_t>(b);
      }
      first_member_[b + 1] = static_cast<std::int64_t>(members_.size());
      const auto t = tuple_of(ranks[groups[g].second]);
      std::copy(t.begin(), t.end(), tuples_.begin() + static_cast<std::ptrdiff_t>(b * nd));
    }
  }
  by_tuple_.resize(groups.size());
  for (std::size_t g = 0; g < groups.size(); ++g) by_tuple_[g] = block_of_group[g];  // groups are in tuple order
  full_ = full_product();
}

std::vector<IndexSet> LayoutBlocks::box(std::size_t b) const {
  std::vector<IndexSet> out;
  out.reserve(sets_.size());
  for (std::size_t d = 0; d < sets_.size(); ++d) out.push_back(set(b, d));
  return out;
}

std::int64_t LayoutBlocks::numel(std::size_t b) const noexcept {
  std::int64_t n = 1;
  for (std::size_t d = 0; d < sets_.size(); ++d) n *= set(b, d).size();
  return n;
}

std::pair<std::size_t, std::size_t> LayoutBlocks::candidates(std::size_t d, const IndexSet& q) const noexcept {
  const auto& sd = sets_[d];
  if (!sorted_runs_[d] || q.empty()) return {0, sd.size()};
  // the sets that end after the box starts and start before it ends
  const std::int64_t lo = q.runs().front().start, hi = q.runs().back().stop;
  const auto i = std::partition_point(sd.begin(), sd.end(), [&](const IndexSet& x) { return x.empty() || x.runs().front().stop <= lo; });
  const auto end = std::partition_point(i, sd.end(), [&](const IndexSet& x) { return x.runs().front().start < hi; });
  return {static_cast<std::size_t>(i - sd.begin()), static_cast<std::size_t>(end - sd.begin())};
}

std::int32_t LayoutBlocks::find(std::span<const std::int32_t> tuple) const noexcept {
  const std::size_t nd = sets_.size();
  if (full_) {  // every combination is a block, in lexicographic order: its mixed-radix index
    std::size_t i = 0;
    for (std::size_t d = 0; d < nd; ++d) i = i * sets_[d].size() + static_cast<std::size_t>(tuple[d]);
    return by_tuple_[i];
  }
  auto tuple_at = [&](std::int32_t b) { return std::span<const std::int32_t>(tuples_.data() + static_cast<std::size_t>(b) * nd, nd); };
  const auto it = std::partition_point(by_tuple_.begin(), by_tuple_.end(), [&](std::int32_t b) {
    const auto t = tuple_at(b);
    return std::lexicographical_compare(t.begin(), t.end(), tuple.begin(), tuple.end());
  });
  if (it == by_tuple_.end()) return -1;
  const auto t = tuple_at(*it);
  return std::equal(t.begin(), t.end(), tuple.begin(), tuple.end()) ? *it : -1;
}

void LayoutBlocks::meeting(std::span<const IndexSet> box, std::vector<Meet>& out, Scratch& scratch) const {
  const std::size_t nd = sets_.size();
  const std::size_t start = out.size();
  if (nd == 0) {  // a scalar: every block holds it
    for (std::size_t b = 0; b < size(); ++b) out.push_back({static_cast<std::int32_t>(b), 1, 1});
    return;
  }
  // per dim, the sets the box meets and how many of its indices each holds
  auto& meets = scratch.meets;
  meets.resize(nd);
  for (auto& m : meets) m.clear();
  for (std::size_t d = 0; d < nd; ++d) {
    const IndexSet& q = box[d];
    if (q.empty()) return;
    const auto& sd = sets_[d];
    auto [i, end] = candidates(d, q);
    for (; i < end; ++i)
      if (const auto e = sd[i].overlap(q); e > 0) meets[d].emplace_back(static_cast<std::int32_t>(i), e);
    if (meets[d].empty()) return;
  }
  auto& at = scratch.at;
  auto& tuple = scratch.tuple;
  at.assign(nd, 0);
  tuple.assign(nd, 0);
  while (true) {
    Meet m{0, 1, 1};
    bool split_found = false;
    for (std::size_t d = 0; d < nd; ++d) {
      const auto& [id, e] = meets[d][at[d]];
      tuple[d] = id;
      m.elements *= e;
      if (!split_found && e > 1) {
        m.rows = e;
        split_found = true;
      }
    }
    if (const auto b = find(tuple); b >= 0) {
      m.block = b;
      out.push_back(m);
    }
    std::size_t d = nd;
    while (d-- > 0 && ++at[d] == meets[d].size()) at[d] = 0;
    if (d == static_cast<std::size_t>(-1)) break;
  }
  std::sort(out.begin() + static_cast<std::ptrdiff_t>(start), out.end(), [](const Meet& x, const Meet& y) { return x.block < y.block; });
}

bool LayoutBlocks::full_product() const noexcept {
  if (size() == 0) return false;
  std::int64_t combos = 1;
  for (const auto& sd : sets_) {
    combos *= static_cast<std::int64_t>(sd.size());
    if (combos > static_cast<std::int64_t>(size())) return false;
  }
  return combos == static_cast<std::int64_t>(size());
}

std::int64_t LayoutBlocks::most_met_by(const LayoutBlocks& other) const {
  if (other.sets_.size() != sets_.size() || !full_product() || !other.full_product()) return 0;
  std::int64_t most = 1;
  for (std::size_t d = 0; d < sets_.size(); ++d) {
    const auto& sd = sets_[d];
    std::int64_t dim_most = 0;
    for (const IndexSet& q : other.sets_[d]) {
      if (q.empty()) continue;
      auto [i, end] = candidates(d, q);
      if (sorted_runs_[d] && q.runs().size() == 1) {  // one run meets every set between
        dim_most = std::max(dim_most, static_cast<std::int64_t>(end - i));
        continue;
      }
      std::int64_t n = 0;
      for (; i < end; ++i) n += sd[i].overlap(q) > 0 ? 1 : 0;
      dim_most = std::max(dim_most, n);
    }
    most *= dim_most;
  }
  return most;
}

}  // namespace dtensor::detail
