// The transfers of a ragged exchange (ragged_exchange.hpp): pairs of ranks, the overlap of their
// base blocks, and the run of that overlap both pieces hold.
#include "ragged_exchange.hpp"

#include <algorithm>
#include <tuple>

#include <fmt/format.h>

#include "dtensor/error.hpp"

#include "placement/groups.hpp"

namespace dtensor::detail {

std::vector<int> exchange_group_dims(const RaggedLayout& from) {
  std::vector<int> dims;
  const Sharding& s = from.base().sharding();
  for (int d = 0; d < s.tensor_ndim(); ++d)
    for (const auto& e : s.entries(d)) dims.push_back(e.mesh_dim);
  if (from.ragged()) dims.push_back(from.ragged()->mesh_dim);
  std::sort(dims.begin(), dims.end());
  return dims;
}

ExchangePart exchange_part(const std::vector<IndexSet>& a, Interval pa, const std::vector<IndexSet>& b, Interval pb) {
  ExchangePart p;
  if (a == b) {  // one block (a ragged cut against its own base, say): the pieces' positions are the overlap's
    p.box = a;
    p.lo = std::max(pa.start, pb.start);
    p.hi = std::max(p.lo, std::min(pa.stop, pb.stop));
    return p;
  }
  p.box.reserve(a.size());
  for (std::size_t d = 0; d < a.size(); ++d) p.box.push_back(a[d].intersect(b[d]));
  if (box_numel(p.box) == 0) return p;
  // the overlap's elements in each piece are one run of the overlap's own order (positions in a
  // block rise with the overlap's row-major order), so both pieces together hold one run too
  p.lo = std::max(count_before(p.box, a, pa.start), count_before(p.box, b, pb.start));
  p.hi = std::min(count_before(p.box, a, pa.stop), count_before(p.box, b, pb.stop));
  if (p.hi < p.lo) p.hi = p.lo;
  return p;
}

namespace {
// The parts between the rank at `coord` and each member of its group: as the sender (`sending`)
// or as the receiver.
std::vector<ExchangePart> exchange_parts(const RaggedLayout& from, const RaggedLayout& to, const std::vector<std::int64_t>& coord,
                                         bool sending) {
  std::vector<ExchangePart> out;
  // this rank's side once; each peer's side per peer
  const auto& mine = sending ? from : to;
  const auto block = mine.base().indices(coord);
  const auto piece = mine.piece(coord);
  for (const auto& pc : group_members(from.mesh(), coord, exchange_group_dims(from))) {
    auto p = sending ? exchange_part(block, piece, to.base().indices(pc), to.piece(pc))
                     : exchange_part(from.base().indices(pc), from.piece(pc), block, piece);
    if (p.count() == 0) continue;
    p.peer = from.mesh().rank_at(pc);
    out.push_back(std::move(p));
  }
  return out;
}
}  // namespace

std::vector<ExchangePart> exchange_sends(const RaggedLayout& from, const RaggedLayout& to, const std::vector<std::int64_t>& coord) {
  return exchange_parts(from, to, coord, true);
}

std::vector<ExchangePart> exchange_recvs(const RaggedLayout& from, const RaggedLayout& to, const std::vector<std::int64_t>& coord) {
  return exchange_parts(from, to, coord, false);
}

std::int64_t exchange_group_index(const Mesh& mesh, std::span<const std::int64_t> coord, const std::vector<int>& dims) {
  std::int64_t group = 0;
  for (int m = 0; m < mesh.ndim(); ++m)
    if (std::find(dims.begin(), dims.end(), m) == dims.end()) group = group * mesh.size(m) + coord[static_cast<std::size_t>(m)];
  return group;
}

std::optional<std::vector<std::vector<std::int64_t>>> exchange_candidates(const RaggedLayout& from, const RaggedLayout& to) {
  const Mesh& mesh = from.mesh();
  const auto R = mesh.num_ranks();
  // a rank's group: its coordinates on the mesh dims outside the exchange's group dims
  const auto dims = exchange_group_dims(from);
  struct Run {
    std::int64_t group, start, stop, rank;
    bool sender;
  };
  std::vector<Run> runs;
  constexpr std::int64_t kMaxRuns = std::int64_t{1} << 24;
  // When both layouts split the last tensor dim alike and every piece holds whole rows of it (a
  // ragged cut crosses only leading dims), two ranks' pieces meet only where their last-dim sets
  // are the same, and then exactly where their rows meet: runs are keyed by the mesh coordinates
  // that split that dim and swept as row ranges (a few per rank, not one per row of a column block).
  const auto nd = static_cast<int>(from.shape().size());
  bool by_rows = nd >= 2;
  std::vector<int> row_dims;  // the mesh dims splitting the last tensor dim
  if (by_rows) {
    const auto ef = from.base().sharding().entries(nd - 1), et = to.base().sharding().entries(nd - 1);
    by_rows = std::equal(ef.begin(), ef.end(), et.begin(), et.end());
    for (const RaggedLayout* l : {&from, &to})
      if (l->is_ragged() && l->ragged()->prefix_dims >= nd) by_rows = false;
    for (const auto& e : ef) row_dims.push_back(e.mesh_dim);
  }
  const std::int64_t row = by_rows ? from.shape().back() : 1;
  if (row == 0) return std::vector<std::vector<std::int64_t>>(static_cast<std::size_t>(R));  // no elements
  for (std::int64_t r = 0; r < R; ++r) {
    const auto c = mesh.coord_of_rank(r);
    std::int64_t group = exchange_group_index(mesh, c, dims);
    if (by_rows)
      for (int m : row_dims) group = group * mesh.size(m) + c[static_cast<std::size_t>(m)];
    for (const RaggedLayout* l : {&from, &to}) {
      std::vector<Interval> owned;
      try {
        owned = l->owned_runs(c);
      } catch (const InputError&) {
        return std::nullopt;  // more runs on a rank than index lists hold
      }
      if (static_cast<std::int64_t>(runs.size() + owned.size()) > kMaxRuns) return std::nullopt;
      const std::size_t first = runs.size();
      for (const auto& iv : owned) {
        if (iv.stop <= iv.start) continue;
        const std::int64_t a = iv.start / row, b = (iv.stop - 1) / row + 1;  // its rows (the run itself when not by rows)
        if (runs.size() > first && a >= runs.back().start && runs.back().stop >= a) {
          runs.back().stop = std::max(runs.back().stop, b);
        } else {
          runs.push_back({group, a, b, r, l == &from});
        }
      }
    }
  }
  std::sort(runs.begin(), runs.end(), [](const Run& a, const Run& b) {
    return std::tie(a.group, a.start, a.sender, a.rank) < std::tie(b.group, b.start, b.sender, b.rank);
  });
  // sweep each group's runs by start: a run meets every run of the other side still open
  std::vector<std::pair<std::int64_t, std::int64_t>> pairs;  // (sender, receiver)
  std::vector<const Run*> open_send, open_recv;
  std::int64_t group = -1;
  for (const auto& run : runs) {
    if (run.group != group) open_send.clear(), open_recv.clear(), group = run.group;
    auto& other = run.sender ? open_recv : open_send;
    std::size_t keep = 0;
    for (const Run* o : other)
      if (o->stop > run.start) {
        other[keep++] = o;
        pairs.emplace_back(run.sender ? run.rank : o->rank, run.sender ? o->rank : run.rank);
      }
    if (static_cast<std::int64_t>(pairs.size()) > kMaxExchangePairs)
      throw InputError(fmt::format("a ragged exchange {} -> {} on {} ranks pairs more than 2^24 (sender, receiver) ranks",
                                   from.placements_str(), to.placements_str(), R));
    other.resize(keep);
    (run.sender ? open_send : open_recv).push_back(&run);
  }
  std::sort(pairs.begin(), pairs.end());
  pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  std::vector<std::vector<std::int64_t>> out(static_cast<std::size_t>(R));
  for (const auto& [a, b] : pairs) out[static_cast<std::size_t>(a)].push_back(b);
  return out;
}

void for_each_exchange_pair(const RaggedLayout& from, const RaggedLayout& to,
                            const std::function<void(std::int64_t, std::int64_t)>& f) {
  if (const auto candidates = exchange_candidates(from, to)) {
    for (std::size_t a = 0; a < candidates->size(); ++a)
      for (const auto b : (*candidates)[a]) f(static_cast<std::int64_t>(a), b);
    return;
  }
  const Mesh& mesh = from.mesh();
  const auto dims = exchange_group_dims(from);
  std::int64_t group = 1;
  for (int d : dims) group *= mesh.size(d);
  if (static_cast<double>(group) * static_cast<double>(mesh.num_ranks()) > static_cast<double>(kMaxExchangePairs))
    throw InputError(fmt::format("a ragged exchange {} -> {} on {} ranks (groups of {}) pairs more than 2^24 (sender, receiver) ranks",
                                 from.placements_str(), to.placements_str(), mesh.num_ranks(), group));
  for (std::int64_t a = 0; a < mesh.num_ranks(); ++a)
    for (const auto& pc : group_members(mesh, mesh.coord_of_rank(a), dims)) f(a, mesh.rank_at(pc));
}

bool contiguous_in(const std::vector<IndexSet>& sub, std::int64_t lo, std::int64_t hi, const std::vector<IndexSet>& block) {
  if (hi <= lo) return true;
  return position_in(sub, hi - 1, block) - position_in(sub, lo, block) == hi - 1 - lo;
}

}  // namespace dtensor::detail
