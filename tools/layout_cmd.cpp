#include <iostream>
#include <nlohmann/json.hpp>

#include "common.hpp"
#include "dtensor/error.hpp"
#include "dtensor/ragged.hpp"

namespace dtensor::cli {
namespace {

struct LayoutArgs {
  std::string mesh, shape, placements, dtype = "f32", format = "text";
  bool indices = false;
  std::string rank;  // parsed strictly: -2 or 99999999999999999999 are errors
};

std::string dims_str(const std::vector<std::int64_t>& v) { return fmt::format("({})", fmt::join(v, ",")); }

// The layout's JSON (`layout_json`, which its reader takes back) with "ranks": each rank's record,
// its rank and coordinate first, then what add(record, coord) writes.
template <class Add>
void print_ranks_json(const std::string& layout_json, const Mesh& mesh, const std::vector<std::int64_t>& ranks, Add&& add) {
  auto j = nlohmann::ordered_json::parse(layout_json);
  j["ranks"] = nlohmann::ordered_json::array();
  for (auto r : ranks) {
    const auto coord = mesh.coord_of_rank(r);
    nlohmann::ordered_json rj;
    rj["rank"] = r;
    rj["coord"] = coord;
    add(rj, coord);
    j["ranks"].push_back(rj);
  }
  std::cout << j.dump() << "\n";
}

// Owner of every element of a small 1-d or 2-d tensor, as a picture: one cell per element listing
// the ranks that hold it ("" when the tensor is too large to draw).
std::string element_map(const RaggedLayout& l) {
  if (l.ndim() < 1 || l.ndim() > 2 || l.base().numel() == 0 || l.base().numel() > 4096) return "";
  const auto rows = l.shape()[0], cols = l.ndim() == 2 ? l.shape()[1] : 1;
  if (cols > 32 || rows > 64) return "";
  std::vector<std::string> cell(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < l.mesh().num_ranks(); ++r)
    for (const auto& run : l.owned_runs(l.mesh().coord_of_rank(r)))
      for (auto x = run.start; x < run.stop; ++x)
        cell[static_cast<std::size_t>(x)] += fmt::format("{}{}", cell[static_cast<std::size_t>(x)].empty() ? "" : ",", r);
  std::size_t w = 1;
  for (const auto& c : cell) w = std::max(w, c.size());
  std::string out;
  for (std::int64_t i = 0; i < rows; ++i) {
    out += fmt::format("{:>4} |", i);
    for (std::int64_t j = 0; j < cols; ++j) out += fmt::format(" {:>{}}", cell[static_cast<std::size_t>(i * cols + j)], w);
    out += "\n";
  }
  return out;
}

void run_ragged(const LayoutArgs& a, const RaggedLayout& l, std::int64_t rank) {
  const Mesh& mesh = l.mesh();
  std::vector<std::int64_t> ranks;
  for (std::int64_t r = rank < 0 ? 0 : rank; r < (rank < 0 ? mesh.num_ranks() : rank + 1); ++r) ranks.push_back(r);
  if (a.format == "json") {
    print_ranks_json(to_json(l), mesh, ranks, [&](nlohmann::ordered_json& rj, const std::vector<std::int64_t>& coord) {
      rj["local_shape"] = l.local_shape(coord);
      rj["block_shape"] = l.base().local_shape(coord);
      rj["piece"] = {l.piece(coord).start, l.piece(coord).stop};
      if (a.indices || l.base().numel() <= 65536) {
        rj["global_runs"] = nlohmann::ordered_json::array();
        for (const auto& run : l.owned_runs(coord)) rj["global_runs"].push_back({run.start, run.stop});
      }
    });
    return;
  }
  const auto& rs = *l.ragged();
  std::cout << fmt::format("layout {} on mesh {} ({} ranks), shape {}, {}\n", l.placements_str(), mesh.str(), mesh.num_ranks(),
                           shape_str(l.shape()), to_string(l.dtype()));
  std::cout << fmt::format("RaggedShard on mesh dim {}: each rank's block under {} (that dim read as Replicate), "
                           "flattened, is cut into pieces of local_units ({}) units; cuts cross tensor dims 0..{}\n",
                           rs.mesh_dim, l.base().placements_str(), fmt::join(rs.units, ","), rs.prefix_dims - 1);
  std::cout << "\n" << fmt::format("{:>5}  {:<12} {:<12} {:<12} {:<16} {}\n", "rank", "coord", "local_shape", "block_shape",
                                   "piece of block", "owned global elements (start:stop runs of the flat index)");
  for (auto r : ranks) {
    const auto coord = mesh.coord_of_rank(r);
    const auto p = l.piece(coord);
    std::string runs;
    if (l.base().numel() <= 65536) {
      const auto rr = l.owned_runs(coord);
      for (std::size_t k = 0; k < rr.size() && k < 8; ++k) runs += fmt::format("{}{}:{}", k ? "," : "", rr[k].start, rr[k].stop);
      if (rr.size() > 8) runs += fmt::format(",... ({} runs)", rr.size());
      if (rr.empty()) runs = "empty";
    }
    std::cout << fmt::format("{:>5}  {:<12} {:<12} {:<12} {:<16} {}\n", r, dims_str(coord), shape_str(l.local_shape(coord)),
                             shape_str(l.base().local_shape(coord)), fmt::format("[{}, {})", p.start, p.stop), runs);
  }
  if (rank < 0)
    if (const auto map = element_map(l); !map.empty())
      std::cout << "\nowner of every element (row | the ranks holding each column's element):\n" << map;
}

void run(const LayoutArgs& a) {
  check_format(a.format);
  const Mesh mesh = for_flag("--mesh", [&] { return Mesh::parse(a.mesh); });
  const auto shape = for_flag("--shape", [&] { return parse_shape(a.shape); });
  const DType dt = for_flag("--dtype", [&] { return parse_dtype(a.dtype); });
  if (a.placements.find("RaggedShard") != std::string::npos) {
    const RaggedLayout rl = for_flag("--placements", [&] { return RaggedLayout::parse(mesh, shape, dt, a.placements); });
    run_ragged(a, rl, a.rank.empty() ? -1 : parse_index("--rank", a.rank, mesh.num_ranks()));
    return;
  }
  const Layout l = for_flag("--placements", [&] { return Layout::parse(mesh, shape, dt, a.placements); });
  const std::int64_t rank = a.rank.empty() ? -1 : parse_index("--rank", a.rank, mesh.num_ranks());
  std::vector<std::int64_t> ranks;
  if (rank >= 0) ranks.push_back(rank);
  else
    for (std::int64_t r = 0; r < mesh.num_ranks(); ++r) ranks.push_back(r);
  // index lists exist up to Layout::kMaxRunsPerRank runs; sizes and offsets always (closed form)
  bool listable = true;
  try {
    l.check_runs();
  } catch (const InputError&) {
    if (a.indices) throw;
    listable = false;
  }
  const bool with_indices = listable && (a.indices || l.numel() <= 65536);

  if (a.format == "json") {
    // the library's layout JSON (read back by layout_from_json), plus what each rank owns
    print_ranks_json(to_json(l), mesh, ranks, [&](nlohmann::ordered_json& rj, const std::vector<std::int64_t>& coord) {
      rj["local_shape"] = l.local_shape(coord);
      rj["global_offset"] = l.global_offset(coord);
      if (with_indices) {
        rj["indices"] = nlohmann::ordered_json::array();
        for (const auto& s : l.indices(coord)) rj["indices"].push_back(s.materialize());
      }
    });
    return;
  }
  std::cout << fmt::format("layout {} on mesh {} ({} ranks), shape {}, {}\n", l.placements_str(), mesh.str(), mesh.num_ranks(),
                           shape_str(l.shape()), to_string(l.dtype()));
  std::vector<int> partial;
  for (int m = 0; m < mesh.ndim(); ++m)
    if (l.sharding().partial(m)) partial.push_back(m);
  if (!partial.empty())
    std::cout << fmt::format("Partial over mesh dim(s) {}: each rank holds a full-size contribution; the value is "
                             "their reduction\n", fmt::join(partial, ","));
  std::cout << "\n" << fmt::format("{:>5}  {:<12} {:<12} {:<14} {}\n", "rank", "coord", "local_shape", "global_offset",
                                   "owned indices per dim (start:stop runs)");
  for (auto r : ranks) {
    const auto coord = mesh.coord_of_rank(r);
    const auto local = l.local_shape(coord), offset = l.global_offset(coord);
    std::string idx;
    if (listable) {
      const auto sets = l.indices(coord);
      for (std::size_t d = 0; d < sets.size(); ++d)
        idx += fmt::format("{}[{}]", d ? " x " : "", sets[d].empty() ? "empty" : sets[d].str());
    } else {
      idx = fmt::format("(more than {} runs: sizes and offsets only)", Layout::kMaxRunsPerRank);
    }
    std::cout << fmt::format("{:>5}  {:<12} {:<12} {:<14} {}\n", r, dims_str(coord), shape_str(local), dims_str(offset),
                             idx);
  }
  if (rank < 0 && listable) {
    const auto grid = ownership_grid(l);
    if (!grid.empty())
      std::cout << "\nownership grid (cells list the ranks holding each block; rows/cols are start:stop):\n" << grid;
    else if (l.ndim() <= 2)
      std::cout << "\n(ownership grid omitted: too many blocks to draw; use --format json)\n";
  }
}

}  // namespace

void register_layout(CLI::App& app) {
  static LayoutArgs a;
  auto* cmd = app.add_subcommand("layout", "which rank owns which elements of a layout");
  cmd->add_option("--mesh", a.mesh, "mesh shape: 2x4 or dp=2,tp=4")->required();
  cmd->add_option("--shape", a.shape, "global tensor shape: 9x5 or 9,5")->required();
  cmd->add_option("--placements", a.placements, "placements, e.g. 'S(0)S(0)', '_S(0, 2)S(0)' or 'RaggedShard((0,),(1,2,0,1))'")->required();
  cmd->add_option("--dtype", a.dtype, "element type")->capture_default_str();
  cmd->add_option("--format", a.format, "text or json")->capture_default_str();
  cmd->add_option("--rank", a.rank, "show only this rank");
  cmd->add_flag("--indices", a.indices, "list owned indices in JSON even for large tensors");
  cmd->callback([] { run(a); });
}

}  // namespace dtensor::cli
