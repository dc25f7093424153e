#include "dtensor/ownership_map.hpp"

#include <algorithm>
#include <set>

#include "dtensor/error.hpp"

namespace dtensor {

OwnershipMap ownership_map(const Layout& l, int dr, int dc, std::size_t max_cells) {
  const int nd = l.ndim();
  if (dr < 0 || dr >= nd || dc < -1 || dc >= nd || dr == dc)
    throw InputError(fmt::format("ownership_map: dims {},{} do not name two different dims of a {}-d tensor", dr, dc, nd));
  OwnershipMap map;
  map.dim_row = dr;
  map.dim_col = dc;
  const Mesh& mesh = l.mesh();
  const auto R = mesh.num_ranks();
  const std::int64_t Lr = l.shape()[static_cast<std::size_t>(dr)];
  const std::int64_t Lc = dc >= 0 ? l.shape()[static_cast<std::size_t>(dc)] : 1;
  std::vector<IndexSet> rows(static_cast<std::size_t>(R)), cols(static_cast<std::size_t>(R));
  std::vector<std::int64_t> rank_id(static_cast<std::size_t>(R));
  std::vector<char> has_data(static_cast<std::size_t>(R), 1);
  for (std::int64_t p = 0; p < R; ++p) {
    const auto c = mesh.coord_at(p);
    const auto sets = l.indices(c);
    const auto u = static_cast<std::size_t>(p);
    rows[u] = sets[static_cast<std::size_t>(dr)];
    cols[u] = dc >= 0 ? sets[static_cast<std::size_t>(dc)] : IndexSet::range(0, 1);
    for (const auto& s : sets)
      if (s.empty()) has_data[u] = 0;
    rank_id[u] = mesh.rank_at(c);
  }
  auto cuts_of = [&](const std::vector<IndexSet>& sets, std::int64_t L) {
    std::set<std::int64_t> c{0, L};
    for (const auto& s : sets) {
      for (const auto& r : s.runs()) {
        c.insert(r.start);
        c.insert(r.stop);
      }
      if (c.size() > max_cells + 1) break;  // too many already: stop collecting
    }
    return std::vector<std::int64_t>(c.begin(), c.end());
  };
  map.row_cuts = cuts_of(rows, Lr);
  map.col_cuts = cuts_of(cols, Lc);
  if (map.rows() > max_cells || map.cols() > max_cells)
    throw InputError(fmt::format("layout {} has {}{}x{} distinct blocks on dims {},{}: more than the {} per dim a map holds",
                                 l.placements_str(), map.rows() > max_cells ? "over " : "", map.rows(), map.cols(), dr, dc,
                                 max_cells));
  map.owners.assign(map.rows() * map.cols(), {});
  if (Lr == 0 || Lc == 0) return map;
  auto cell_range = [](const std::vector<std::int64_t>& cuts, const Interval& run) {
    const auto a = std::lower_bound(cuts.begin(), cuts.end(), run.start) - cuts.begin();
    const auto b = std::lower_bound(cuts.begin(), cuts.end(), run.stop) - cuts.begin();
    return std::pair<std::size_t, std::size_t>(static_cast<std::size_t>(a), static_cast<std::size_t>(b));
  };
  const std::size_t nc = map.cols();
  for (std::int64_t p = 0; p < R; ++p) {
    const auto u = static_cast<std::size_t>(p);
    if (!has_data[u]) continue;
    for (const auto& rr : rows[u].runs()) {
      const auto [r0, r1] = cell_range(map.row_cuts, rr);
      for (const auto& cr : cols[u].runs()) {
        const auto [c0, c1] = cell_range(map.col_cuts, cr);
        for (auto i = r0; i < r1; ++i)
          for (auto j = c0; j < c1; ++j) map.owners[i * nc + j].push_back(rank_id[u]);
      }
    }
  }
  for (auto& o : map.owners) std::sort(o.begin(), o.end());
  return map;
}

}  // namespace dtensor
