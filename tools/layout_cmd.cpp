#include <iostream>
#include <nlohmann/json.hpp>

#include "common.hpp"
#include "dtensor/error.hpp"

namespace dtensor::cli {
namespace {

struct LayoutArgs {
  std::string mesh, shape, placements, dtype = "f32", format = "text";
  bool indices = false;
  std::string rank;  // parsed strictly: -2 or 99999999999999999999 are errors
};

std::string dims_str(const std::vector<std::int64_t>& v) { return fmt::format("({})", fmt::join(v, ",")); }

void run(const LayoutArgs& a) {
  check_format(a.format);
  const Mesh mesh = for_flag("--mesh", [&] { return Mesh::parse(a.mesh); });
  const auto shape = for_flag("--shape", [&] { return parse_shape(a.shape); });
  const DType dt = for_flag("--dtype", [&] { return parse_dtype(a.dtype); });
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
    auto j = nlohmann::ordered_json::parse(to_json(l));
    j["ranks"] = nlohmann::ordered_json::array();
    for (auto r : ranks) {
      const auto coord = mesh.coord_of_rank(r);
      nlohmann::ordered_json rj;
      rj["rank"] = r;
      rj["coord"] = coord;
      rj["local_shape"] = l.local_shape(coord);
      rj["global_offset"] = l.global_offset(coord);
      if (with_indices) {
        rj["indices"] = nlohmann::ordered_json::array();
        for (const auto& s : l.indices(coord)) rj["indices"].push_back(s.materialize());
      }
      j["ranks"].push_back(rj);
    }
    std::cout << j.dump() << "\n";
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
  cmd->add_option("--placements", a.placements, "placements, e.g. 'S(0)S(0)' or '_S(0, 2)S(0)'")->required();
  cmd->add_option("--dtype", a.dtype, "element type")->capture_default_str();
  cmd->add_option("--format", a.format, "text or json")->capture_default_str();
  cmd->add_option("--rank", a.rank, "show only this rank");
  cmd->add_flag("--indices", a.indices, "list owned indices in JSON even for large tensors");
  cmd->callback([] { run(a); });
}

}  // namespace dtensor::cli
