#include "common.hpp"

#include "dtensor/batch_executor.hpp"

#include <algorithm>
#include <charconv>
#include <set>

#include "dtensor/error.hpp"
#include "dtensor/viz.hpp"
#include "dtensor/ownership_map.hpp"

namespace dtensor::cli {

void add_plan_flags(CLI::App& cmd, PlanArgs& a) {
  // required unless --batch names a batch file (checked by make_request)
  cmd.add_option("--mesh", a.mesh, "mesh shape: 2x4 or dp=2,tp=4 (required unless --batch)");
  cmd.add_option("--shape", a.shape, "global tensor shape: 9x5, 9,5 or [9, 5] (required unless --batch)");
  cmd.add_option("--from", a.from, "source placements, e.g. 'S(0)[1]S(0)[0]' or '(Shard(dim=0), Replicate())' (required unless --batch)");
  cmd.add_option("--to", a.to, "target placements (required unless --batch)");
  cmd.add_option("--batch", a.batch, "a batch file of (shape, dtype, from, to) pairs on one mesh (docs/cli.md): plan or simulate them together");
  cmd.add_option("--to-mesh", a.to_mesh, "cross-mesh: the target's mesh (the source stays on --mesh), e.g. tp=4");
  cmd.add_option("--ranks", a.ranks, "cross-mesh: world ranks of --mesh's ranks, e.g. 0-7 or 0,2,4,6 (default 0..n-1)");
  cmd.add_option("--to-ranks", a.to_ranks, "cross-mesh: world ranks of --to-mesh's ranks, e.g. 8-11 (default 0..n-1)");
  cmd.add_option("--dtype", a.dtype, "f64 f32 bf16 f16 f8e4m3 f8e5m2 i64 i32 i8 u8 bool (or torch names: bfloat16, ...)")
      ->capture_default_str();
  cmd.add_option("--cost-model", a.cost_model, "default, pytorch, or a JSON profile file")->capture_default_str();
  cmd.add_option("--edges", a.edges, "edge set: all or pytorch (default: pytorch for --cost-model pytorch, else all)");
  cmd.add_option("--max-memory", a.max_memory, "largest workspace (peak bytes) a plan may use: 1073741824, 1GiB, 512MiB")
      ->each([&a](const std::string&) { a.max_memory_given = true; });
  cmd.add_option("--format", a.format, "text or json")->capture_default_str();
  cmd.add_option("--max-states", a.max_states, "search effort bound: layouts the planner may explore (default 2000000)");
  cmd.add_option("--max-search-memory", a.max_search_memory, "memory bound of the search, e.g. 4GiB (default 1GiB)");
}

void check_format(const std::string& format) {
  if (format != "text" && format != "json")
    throw InputError(fmt::format("unknown --format '{}' (expected text or json)", format));
}

std::int64_t parse_bytes(const std::string& flag, const std::string& text) {
  std::size_t i = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + i, v);
  if (i == 0 || ec != std::errc())
    throw InputError(fmt::format("{} {} is not a byte count (e.g. 1073741824, 1GiB, 512MiB)", flag, quote_input(text)));
  std::string unit = text.substr(i);
  while (!unit.empty() && unit.front() == ' ') unit.erase(0, 1);
  struct U {
    const char* name;
    std::int64_t mul;
  };
  static constexpr U kUnits[] = {{"", 1},          {"B", 1},           {"K", 1 << 10},      {"KiB", 1 << 10},
                                 {"M", 1 << 20},   {"MiB", 1 << 20},   {"G", 1 << 30},      {"GiB", 1 << 30},
                                 {"T", 1LL << 40}, {"TiB", 1LL << 40}, {"KB", 1000},        {"MB", 1000000},
                                 {"GB", 1000000000}, {"TB", 1000000000000LL}};
  for (const auto& u : kUnits)
    if (unit == u.name) {
      if (v > INT64_MAX / u.mul) throw InputError(fmt::format("{} {} is too large", flag, quote_input(text)));
      return v * u.mul;
    }
  throw InputError(fmt::format("{} {}: unknown unit {} (B, KiB, MiB, GiB, TiB, K, M, G, T, KB, MB, GB, TB)", flag,
                               quote_input(text), quote_input(unit)));
}

std::int64_t parse_index(const std::string& flag, const std::string& text, std::int64_t limit) {
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || p != text.data() + text.size() || v < 0 || v >= limit)
    throw InputError(fmt::format("{} {} must be an integer in [0, {})", flag, quote_input(text), limit));
  return v;
}

namespace {
PlanOptions options_of(const PlanArgs& a) {
  PlanOptions opt;
  if (!a.edges.empty()) opt.edges = for_flag("--edges", [&] { return parse_edge_set(a.edges); });
  if (a.max_memory_given) opt.max_peak_bytes = parse_bytes("--max-memory", a.max_memory);
  if (!a.max_states.empty()) opt.max_states = parse_index("--max-states", a.max_states, INT64_MAX) ;
  if (!a.max_search_memory.empty()) opt.max_search_bytes = parse_bytes("--max-search-memory", a.max_search_memory);
  if (opt.max_states < 1) throw InputError("--max-states must be at least 1");
  if (opt.max_search_bytes < 1) throw InputError("--max-search-memory must be at least 1 byte");
  return opt;
}
}  // namespace

PlanRequest make_batch_request(const PlanArgs& a) {
  check_format(a.format);
  for (const auto& [flag, value] : {std::pair{"--mesh", &a.mesh}, {"--shape", &a.shape}, {"--from", &a.from}, {"--to", &a.to}})
    if (!value->empty()) throw InputError(fmt::format("{} and --batch exclude each other: a batch file names its mesh and layouts", flag));
  CostModel cost = for_flag("--cost-model", [&] { return CostModel::load(a.cost_model); });
  const Layout none(Mesh(std::vector<std::int64_t>{1}), {}, DType::f32, Sharding::replicated(1, 0));
  return {none, none, std::move(cost), options_of(a)};
}

std::vector<std::pair<Layout, Layout>> read_batch_file(const std::string& path) {
  return for_flag("--batch", [&] { return batch_pairs_from_json(read_input_file(path, "batch file", 64u << 20)); });
}

namespace {
// "0-3,8,10-11": ascending or not, each value a non-negative integer; a rank listed twice is left
// for the planner to name.
std::vector<std::int64_t> parse_rank_list(const char* flag, const std::string& text, std::int64_t n) {
  std::vector<std::int64_t> out;
  if (text.empty()) {
    for (std::int64_t r = 0; r < n; ++r) out.push_back(r);
    return out;
  }
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const auto comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    const auto dash = item.find('-', 1);
    if (dash == std::string::npos) {
      out.push_back(parse_index(flag, item, kMaxWorldSize));
    } else {
      const auto lo = parse_index(flag, item.substr(0, dash), kMaxWorldSize), hi = parse_index(flag, item.substr(dash + 1), kMaxWorldSize);
      if (hi < lo) throw InputError(fmt::format("{} range {} runs backwards", flag, quote_input(item)));
      if (hi - lo >= (std::int64_t{1} << 20)) throw InputError(fmt::format("{} range {} is too long", flag, quote_input(item)));
      for (std::int64_t r = lo; r <= hi; ++r) out.push_back(r);
    }
    if (out.size() > (std::size_t{1} << 20)) throw InputError(fmt::format("{} lists too many ranks", flag));
    pos = comma + 1;
  }
  return out;
}
}  // namespace

CrossRequest make_cross_request(const PlanArgs& a) {
  check_format(a.format);
  if (!a.batch.empty()) throw InputError("--to-mesh and --batch exclude each other");
  for (const auto& [flag, value] : {std::pair{"--mesh", &a.mesh}, {"--shape", &a.shape}, {"--from", &a.from}, {"--to", &a.to}})
    if (value->empty()) throw InputError(fmt::format("{} is required", flag));
  Mesh mesh = for_flag("--mesh", [&] { return Mesh::parse(a.mesh); });
  Mesh to_mesh = for_flag("--to-mesh", [&] { return Mesh::parse(a.to_mesh); });
  auto shape = for_flag("--shape", [&] { return parse_shape(a.shape); });
  const DType dt = for_flag("--dtype", [&] { return parse_dtype(a.dtype); });
  for (const auto& [flag, text] : {std::pair{"--from", &a.from}, {"--to", &a.to}})
    if (text->find("RaggedShard") != std::string::npos)
      throw InputError(fmt::format("{}: a RaggedShard layout ({}): cross-mesh plans (--to-mesh) do not take RaggedShard "
                                   "layouts yet (`dtensor plan` and `simulate` on one mesh do)", flag, quote_input(*text)));
  Layout src = for_flag("--from", [&] { return Layout::parse(mesh, shape, dt, a.from); });
  Layout dst = for_flag("--to", [&] { return Layout::parse(to_mesh, shape, dt, a.to); });
  auto src_ranks = parse_rank_list("--ranks", a.ranks, mesh.num_ranks());
  auto dst_ranks = parse_rank_list("--to-ranks", a.to_ranks, to_mesh.num_ranks());
  CostModel cost = for_flag("--cost-model", [&] { return CostModel::load(a.cost_model); });
  return {std::move(src), std::move(dst), std::move(src_ranks), std::move(dst_ranks), std::move(cost), options_of(a)};
}

CrossMeshPlan plan_of(const CrossRequest& req) {
  CrossMeshOptions o;
  o.plan = req.options;
  return plan_cross_mesh(req.src, req.src_ranks, req.dst, req.dst_ranks, req.cost, o);
}

RaggedRequest make_ragged_request(const PlanArgs& a) {
  check_format(a.format);
  if (!a.ranks.empty() || !a.to_ranks.empty()) throw InputError("--ranks and --to-ranks need --to-mesh");
  for (const auto& [flag, value] : {std::pair{"--mesh", &a.mesh}, {"--shape", &a.shape}, {"--from", &a.from}, {"--to", &a.to}})
    if (value->empty()) throw InputError(fmt::format("{} is required (or --batch FILE)", flag));
  Mesh mesh = for_flag("--mesh", [&] { return Mesh::parse(a.mesh); });
  auto shape = for_flag("--shape", [&] { return parse_shape(a.shape); });
  const DType dt = for_flag("--dtype", [&] { return parse_dtype(a.dtype); });
  RaggedLayout src = for_flag("--from", [&] { return RaggedLayout::parse(mesh, shape, dt, a.from); });
  RaggedLayout dst = for_flag("--to", [&] { return RaggedLayout::parse(mesh, shape, dt, a.to); });
  CostModel cost = for_flag("--cost-model", [&] { return CostModel::load(a.cost_model); });
  return {std::move(src), std::move(dst), std::move(cost), options_of(a)};
}

PlanRequest make_request(const PlanArgs& a) {
  auto r = make_ragged_request(a);
  for (const auto& [flag, l] : {std::pair{"--from", &r.src}, {"--to", &r.dst}})
    if (l->is_ragged())
      throw InputError(fmt::format("{}: a RaggedShard layout ({}): `dtensor layout`, `plan` and `simulate` take them, this command "
                                   "not yet", flag, l->placements_str()));
  return {r.src.base(), r.dst.base(), std::move(r.cost), std::move(r.options)};
}

std::string ownership_grid(const Layout& l, std::size_t max_blocks) {
  if (l.ndim() < 1 || l.ndim() > 2) return "";
  if (l.mesh().num_ranks() > 65536) return "";  // too many ranks to draw (every rank's sets are held)
  OwnershipMap map;
  try {
    map = ownership_map(l, 0, l.ndim() == 2 ? 1 : -1, max_blocks);
  } catch (const InputError&) {
    return "";  // too many blocks to draw
  }
  if (l.numel() == 0) return "(empty tensor: no elements to own)\n";
  const auto& rows = map.row_cuts;
  const auto& cols = map.col_cuts;
  auto owners = [&](std::size_t r, std::size_t c) { return viz::rank_ranges(map.at(r, c)); };
  std::vector<std::string> row_labels, col_labels;
  for (std::size_t r = 0; r + 1 < rows.size(); ++r) row_labels.push_back(fmt::format("{}:{}", rows[r], rows[r + 1]));
  if (l.ndim() == 2)
    for (std::size_t c = 0; c + 1 < cols.size(); ++c) col_labels.push_back(fmt::format("{}:{}", cols[c], cols[c + 1]));
  else
    col_labels.push_back("ranks");
  std::vector<std::vector<std::string>> cells(row_labels.size(), std::vector<std::string>(col_labels.size()));
  std::size_t width = 0, label_w = 0;
  for (std::size_t r = 0; r < row_labels.size(); ++r) {
    label_w = std::max(label_w, row_labels[r].size());
    for (std::size_t c = 0; c < col_labels.size(); ++c) {
      cells[r][c] = owners(r, c);
      width = std::max(width, cells[r][c].size());
    }
  }
  for (const auto& c : col_labels) width = std::max(width, c.size());
  std::string out = fmt::format("{:>{}}   ", l.ndim() == 2 ? "dim0\\dim1" : "dim0", std::max<std::size_t>(label_w, 9));
  label_w = std::max<std::size_t>(label_w, 9);
  for (const auto& c : col_labels) out += fmt::format(" {:<{}}", c, width);
  out += "\n";
  for (std::size_t r = 0; r < row_labels.size(); ++r) {
    out += fmt::format("{:>{}}  |", row_labels[r], label_w);
    for (std::size_t c = 0; c < col_labels.size(); ++c) out += fmt::format(" {:<{}}", cells[r][c], width);
    out += "\n";
  }
  return out;
}

}  // namespace dtensor::cli
