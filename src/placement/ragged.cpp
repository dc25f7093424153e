// RaggedShard layouts: validation, the piece algebra, text and JSON (docs/ragged.md).
#include "dtensor/ragged.hpp"

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

#include "dtensor/error.hpp"
#include "json_fields.hpp"

namespace dtensor {
namespace {

constexpr std::int64_t kMaxUnits = std::int64_t{1} << 53;

std::int64_t product(std::span<const std::int64_t> xs) {
  std::int64_t p = 1;
  for (auto x : xs) p *= x;  // extents of a valid layout: the product stays within 2^53
  return p;
}

// The coordinate of every rank whose block is distinct: coordinate 0 on the ragged mesh dim.
template <class F>
void for_each_block(const Mesh& mesh, int ragged_dim, F&& f) {
  std::vector<std::int64_t> c(static_cast<std::size_t>(mesh.ndim()), 0);
  while (true) {
    f(std::span<const std::int64_t>(c));
    int m = mesh.ndim();
    while (m-- > 0) {
      if (m == ragged_dim) continue;
      if (++c[static_cast<std::size_t>(m)] < mesh.size(m)) break;
      c[static_cast<std::size_t>(m)] = 0;
    }
    if (m < 0) return;
  }
}

struct TextCursor {
  std::string_view s;
  std::string_view whole;
  std::size_t p = 0;
  void space() {
    while (p < s.size() && s[p] == ' ') ++p;
  }
  [[noreturn]] void fail(std::string_view expected) const {
    throw InputError(fmt::format("RaggedShard {}: expected {} at character {}", quote_input(whole), expected, p + 1));
  }
  bool accept(std::string_view t) {
    space();
    if (s.substr(p, t.size()) != t) return false;
    p += t.size();
    return true;
  }
  void expect(std::string_view t) {
    if (!accept(t)) fail(fmt::format("'{}'", t));
  }
  std::int64_t integer(std::string_view what) {
    space();
    const std::size_t start = p;
    while (p < s.size() && std::isdigit(static_cast<unsigned char>(s[p]))) ++p;
    if (p == start) {
      if (p < s.size() && s[p] == '-') throw InputError(fmt::format("RaggedShard {}: {} must not be negative", quote_input(whole), what));
      fail(fmt::format("a non-negative integer ({})", what));
    }
    // the value, not the digits, is bounded (leading zeros are digits of a small number)
    std::size_t first = start;
    while (first + 1 < p && s[first] == '0') ++first;
    if (p - first > 16) throw InputError(fmt::format("RaggedShard {}: {} {} is too large", quote_input(whole), what, s.substr(start, p - start)));
    return std::stoll(std::string(s.substr(first, p - first)));
  }
  // "(a, b, ...)" with an optional trailing comma; "(0)" reads as (0,).
  std::vector<std::int64_t> tuple(std::string_view what, std::size_t max_items) {
    expect("(");
    std::vector<std::int64_t> out;
    if (accept(")")) return out;
    while (true) {
      out.push_back(integer(what));
      if (out.size() > max_items)
        throw InputError(fmt::format("RaggedShard {}: more than {} {}", quote_input(whole), max_items, what));
      if (accept(")")) return out;
      expect(",");
      if (accept(")")) return out;
    }
  }
};

}  // namespace

std::string RaggedShard::str() const {
  std::string dims = "(";
  for (int d = 0; d < prefix_dims; ++d) dims += fmt::format("{}{}", d, prefix_dims == 1 ? "," : d + 1 < prefix_dims ? "," : "");
  dims += ")";
  return fmt::format("RaggedShard({},({}))", dims, fmt::join(units, ","));
}

RaggedLayout::RaggedLayout(Layout base, std::optional<RaggedShard> ragged) : base_(std::move(base)), ragged_(std::move(ragged)) {
  if (!ragged_) return;
  const RaggedShard& r = *ragged_;
  const Mesh& mesh = base_.mesh();
  const auto pls = base_.placements();
  if (r.mesh_dim < 0 || r.mesh_dim >= mesh.ndim())
    throw InputError(fmt::format("RaggedShard on mesh dim {}: the mesh {} has {} dims", r.mesh_dim, mesh.str(), mesh.ndim()));
  if (!pls[static_cast<std::size_t>(r.mesh_dim)].is_replicate())
    throw InputError(fmt::format("RaggedShard on mesh dim {}: the base layout must read that dim as Replicate, not {}",
                                 r.mesh_dim, pls[static_cast<std::size_t>(r.mesh_dim)].str()));
  for (int m = 0; m < r.mesh_dim; ++m)
    if (!pls[static_cast<std::size_t>(m)].is_replicate())
      throw InputError(fmt::format("RaggedShard on mesh dim {} must come before every other non-Replicate placement "
                                   "(mesh dim {} holds {})", r.mesh_dim, m, pls[static_cast<std::size_t>(m)].str()));
  for (int m = 0; m < mesh.ndim(); ++m)
    if (pls[static_cast<std::size_t>(m)].is_partial())
      throw InputError(fmt::format("a RaggedShard layout cannot hold a Partial (mesh dim {} holds {})", m,
                                   pls[static_cast<std::size_t>(m)].str()));
  const int nd = base_.ndim();
  if (r.prefix_dims < 1 || r.prefix_dims > nd)
    throw InputError(fmt::format("RaggedShard dims (0..{}) on a {}-d tensor: dims must be a non-empty leading run of the "
                                 "tensor's dims", r.prefix_dims - 1, nd));
  const auto n = mesh.size(r.mesh_dim);
  if (static_cast<std::int64_t>(r.units.size()) != n)
    throw InputError(fmt::format("RaggedShard local_units ({}) has {} entries; mesh dim {} has size {}",
                                 fmt::join(r.units, ","), r.units.size(), r.mesh_dim, n));
  std::int64_t sum = 0;
  before_.reserve(r.units.size());
  for (std::size_t i = 0; i < r.units.size(); ++i) {
    before_.push_back(sum);
    const auto u = r.units[i];
    if (u < 0) throw InputError(fmt::format("RaggedShard local_units[{}] is {}: units must not be negative", i, u));
    if (u > kMaxUnits) throw InputError(fmt::format("RaggedShard local_units[{}] is {}, above 2^53", i, u));
    sum += u;
    if (sum > kMaxUnits) throw InputError(fmt::format("RaggedShard local_units sum above 2^53"));
  }
  if (sum == 0) throw InputError(fmt::format("RaggedShard local_units ({}) are all zero: at least one unit is needed", fmt::join(r.units, ",")));
  before_.push_back(sum);  // the last entry: every unit
  for_each_block(mesh, r.mesh_dim, [&](std::span<const std::int64_t> c) {
    const auto local = base_.local_shape(c);
    const auto numel = product(local);
    if (numel % sum != 0)
      throw InputError(fmt::format("RaggedShard local_units ({}) sum to {}, which does not divide the {} elements of the "
                                   "block at mesh coordinate ({}) (local shape {})",
                                   fmt::join(r.units, ","), sum, numel, fmt::join(c, ","), shape_str(local)));
    const auto row = product(std::span<const std::int64_t>(local).subspan(static_cast<std::size_t>(r.prefix_dims)));
    const auto unit = numel / sum;
    if (row == 0 || unit % row == 0) return;
    // veScale's rule: every piece holds whole rows (units may share a factor with the row). The
    // boundaries of the pieces are the prefix sums; an empty piece sits on its neighbour's boundary.
    for (std::size_t i = 0; i < r.units.size(); ++i) {
      if (r.units[i] == 0 || ((unit * before_[i]) % row == 0 && (unit * before_[i + 1]) % row == 0)) continue;
      std::vector<std::int64_t> at(c.begin(), c.end());
      at[static_cast<std::size_t>(r.mesh_dim)] = static_cast<std::int64_t>(i);
      throw InputError(fmt::format(
          "RaggedShard dims (0..{}): the piece of rank {} (mesh coordinate ({})), elements [{}, {}) of its block "
          "(local shape {}, units of {} elements), cuts a trailing row of {} elements: every piece must hold whole rows",
          r.prefix_dims - 1, mesh.rank_at(at), fmt::join(at, ","), unit * before_[i], unit * before_[i + 1],
          shape_str(local), unit, row));
    }
  });
}

std::int64_t RaggedLayout::unit_numel(std::span<const std::int64_t> coord) const {
  if (!ragged_) return 0;
  return base_.local_numel(coord) / before_.back();
}

Interval RaggedLayout::piece(std::span<const std::int64_t> coord) const {
  if (!ragged_) return {0, base_.local_numel(coord)};
  const auto u = unit_numel(coord);
  const auto i = static_cast<std::size_t>(coord[static_cast<std::size_t>(ragged_->mesh_dim)]);
  const std::int64_t before = before_[i];  // O(1): bucket_of and the planners ask per coordinate
  return {u * before, u * (before + ragged_->units[i])};
}

std::int64_t RaggedLayout::local_numel(std::span<const std::int64_t> coord) const { return piece(coord).size(); }

std::vector<std::int64_t> RaggedLayout::local_shape(std::span<const std::int64_t> coord) const {
  auto local = base_.local_shape(coord);
  if (!ragged_) return local;
  const auto k = static_cast<std::size_t>(ragged_->prefix_dims);
  std::vector<std::int64_t> out{0};
  out.insert(out.end(), local.begin() + static_cast<std::ptrdiff_t>(k), local.end());
  const auto row = product(std::span<const std::int64_t>(out).subspan(1));
  out[0] = row > 0 ? piece(coord).size() / row : 0;
  return out;
}

std::vector<Interval> RaggedLayout::owned_runs(std::span<const std::int64_t> coord) const {
  const auto box = base_.indices(coord);
  const auto pc = piece(coord);
  const auto& shape = base_.shape();
  const auto boxes = range_boxes(box, pc.start, pc.stop);
  // Per box, the trailing dims it holds whole are one stretch of memory: the box's runs are its
  // outer dims' index combinations times the runs of the last dim it does not hold whole (k), so
  // they are counted before any is listed (time and memory follow the runs returned, capped as a
  // Layout caps its index lists), never the rows walked.
  struct Cut {
    std::size_t k;
    std::int64_t stride;  // elements per index of dim k
  };
  std::vector<Cut> cuts;
  std::int64_t count = 0;
  for (const auto& b : boxes) {
    const std::size_t nd = b.size();
    std::size_t k = nd == 0 ? 0 : nd - 1;
    std::int64_t stride = 1, n = 1;
    if (nd > 0) {
      while (k > 0 && b[k].size() == shape[k] && b[k].runs().size() == 1) stride *= shape[k--];
      n = static_cast<std::int64_t>(b[k].runs().size());
      constexpr std::int64_t over = Layout::kMaxRunsPerRank + 1;  // saturate: no product overflows
      for (std::size_t d = 0; d < k; ++d) n = b[d].size() >= over ? over : std::min(over, n * b[d].size());
    }
    count = std::min<std::int64_t>(count + n, Layout::kMaxRunsPerRank + 1);
    if (count > Layout::kMaxRunsPerRank)
      throw InputError(fmt::format("layout {} {}: the rank at coordinate ({}) holds more than {} separate runs of the "
                                   "tensor; index lists support at most that many per rank (local shapes and offsets "
                                   "do not need them)", shape_str(shape), placements_str(), fmt::join(coord, ","),
                                   Layout::kMaxRunsPerRank));
    cuts.push_back({k, stride});
  }
  std::vector<Interval> runs;
  runs.reserve(static_cast<std::size_t>(count));
  auto push = [&](Interval iv) {
    if (!runs.empty() && runs.back().stop == iv.start) runs.back().stop = iv.stop;
    else runs.push_back(iv);
  };
  for (std::size_t i = 0; i < boxes.size(); ++i) {
    const auto& b = boxes[i];
    if (b.empty()) {
      push({0, 1});
      continue;
    }
    const auto [k, stride] = cuts[i];
    std::vector<std::vector<std::int64_t>> outer;
    for (std::size_t d = 0; d < k; ++d) outer.push_back(b[d].materialize());
    if (std::any_of(outer.begin(), outer.end(), [](const auto& o) { return o.empty(); }) || b[k].empty()) continue;
    std::vector<std::size_t> pos(k, 0);
    while (true) {
      std::int64_t base_id = 0;  // the flat index of (outer indices, 0, 0, ...) in units of dim k's stride
      for (std::size_t d = 0; d < k; ++d) base_id = (base_id + outer[d][pos[d]]) * shape[d + 1];
      for (const auto& r : b[k].runs()) push({(base_id + r.start) * stride, (base_id + r.stop) * stride});
      std::size_t d = k;
      while (d-- > 0) {
        if (++pos[d] < outer[d].size()) break;
        pos[d] = 0;
      }
      if (d == static_cast<std::size_t>(-1)) break;
    }
  }
  return runs;
}

std::string RaggedLayout::placements_str() const {
  if (!ragged_) return base_.placements_str();
  // the base's text with the ragged mesh dim's placement spelt out: per mesh dim, in order
  const auto pls = base_.placements();
  const auto order = base_.sharding().printed_order();
  std::string out;
  for (int m = 0; m < mesh().ndim(); ++m) {
    if (m == ragged_->mesh_dim) {
      out += ragged_->str();
      continue;
    }
    out += pls[static_cast<std::size_t>(m)].str();
    if (order[static_cast<std::size_t>(m)] >= 0) out += fmt::format("[{}]", order[static_cast<std::size_t>(m)]);
  }
  return out;
}

std::string RaggedLayout::str() const {
  return fmt::format("{} {} {} {}", mesh().str(), shape_str(shape()), to_string(dtype()), placements_str());
}

RaggedLayout RaggedLayout::parse(Mesh mesh, std::vector<std::int64_t> shape, DType dtype, std::string_view placements) {
  const auto at = placements.find("RaggedShard");
  if (at == std::string_view::npos) return RaggedLayout(Layout::parse(std::move(mesh), std::move(shape), dtype, placements));
  if (placements.find("RaggedShard", at + 1) != std::string_view::npos)
    throw InputError(fmt::format("placements {} hold two RaggedShard placements: at most one mesh dim is ragged",
                                 quote_input(placements)));
  // the token runs to its matching parenthesis
  std::size_t end = at + std::string_view("RaggedShard").size(), depth = 0;
  for (; end < placements.size(); ++end) {
    if (placements[end] == '(') ++depth;
    else if (placements[end] == ')' && depth > 0 && --depth == 0) break;
  }
  if (end == placements.size())
    throw InputError(fmt::format("placements {}: RaggedShard( is never closed", quote_input(placements)));
  const std::string_view token = placements.substr(at, end + 1 - at);
  TextCursor c{token, token};
  c.expect("RaggedShard");
  c.expect("(");
  c.accept("dims=");
  const auto dims = c.tuple("dims", Sharding::kMaxTensorDims);
  c.expect(",");
  c.accept("local_units=");
  const auto units = c.tuple("local_units", static_cast<std::size_t>(std::max<std::int64_t>(1, mesh.num_ranks())));
  c.expect(")");
  // dims: a non-empty leading run (0, 1, ..., k-1)
  if (dims.empty()) throw InputError(fmt::format("RaggedShard {}: dims must not be empty", quote_input(token)));
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] >= static_cast<std::int64_t>(shape.size()))
      throw InputError(fmt::format("RaggedShard {}: dim {} is out of range for a {}-d tensor", quote_input(token), dims[i], shape.size()));
    if (std::count(dims.begin(), dims.end(), dims[i]) > 1)
      throw InputError(fmt::format("RaggedShard {}: dim {} is repeated", quote_input(token), dims[i]));
    if (dims[i] != static_cast<std::int64_t>(i))
      throw InputError(fmt::format("RaggedShard {}: dims ({}) are not a leading run (0, 1, ...) of the tensor's dims",
                                   quote_input(token), fmt::join(dims, ",")));
  }
  // the ragged mesh dim: how many placements precede the token
  std::string_view prefix = placements.substr(0, at);
  while (!prefix.empty() && (prefix.back() == ' ' || prefix.back() == ',')) prefix.remove_suffix(1);
  std::size_t lead = 0;
  while (lead < prefix.size() && (prefix[lead] == ' ' || prefix[lead] == '(' || prefix[lead] == '[')) ++lead;
  prefix.remove_prefix(lead);
  const int mesh_dim = prefix.empty() ? 0 : static_cast<int>(parse_placements(prefix).placements.size());
  const std::string base_text = std::string(placements.substr(0, at)) + "R" + std::string(placements.substr(end + 1));
  Layout base = Layout::parse(std::move(mesh), std::move(shape), dtype, base_text);
  return RaggedLayout(std::move(base), RaggedShard{mesh_dim, static_cast<int>(dims.size()), units});
}

RaggedLayout RaggedLayout::parse(std::string_view text) {
  // MESH SHAPE DTYPE PLACEMENTS, the first three single words (Layout::parse's form)
  std::size_t pos = 0;
  std::string_view words[3];
  for (auto& w : words) {
    while (pos < text.size() && text[pos] == ' ') ++pos;
    const std::size_t start = pos;
    while (pos < text.size() && text[pos] != ' ') ++pos;
    w = text.substr(start, pos - start);
  }
  if (text.find("RaggedShard") == std::string_view::npos) return RaggedLayout(Layout::parse(text));
  while (pos < text.size() && text[pos] == ' ') ++pos;
  if (words[2].empty() || pos == text.size())
    throw InputError(fmt::format("layout text {}: expected \"MESH SHAPE DTYPE PLACEMENTS\"", quote_input(text)));
  return parse(Mesh::parse(words[0]), parse_shape(words[1]), parse_dtype(words[2]), text.substr(pos));
}

std::string to_json(const RaggedLayout& l) {
  nlohmann::ordered_json j;
  j["version"] = 1;
  detail::write_mesh_fields(j, l.mesh());
  j["shape"] = l.shape();
  j["dtype"] = std::string(to_string(l.dtype()));
  j["placements"] = l.placements_str();
  if (l.ragged()) {
    std::vector<int> dims;
    for (int d = 0; d < l.ragged()->prefix_dims; ++d) dims.push_back(d);
    j["ragged"] = {{"mesh_dim", l.ragged()->mesh_dim}, {"dims", dims}, {"local_units", l.ragged()->units}};
  }
  return j.dump();
}

RaggedLayout ragged_layout_from_json(std::string_view text) {
  const auto j = detail::parse_json(text, "layout");
  if (!j.is_object()) throw InputError("layout JSON must be an object");
  const auto p = j.find("placements");
  if (p == j.end() || !p->is_string()) throw InputError("layout JSON needs a string field 'placements'");
  const auto dt = j.find("dtype");
  if (dt == j.end() || !dt->is_string()) throw InputError("layout JSON needs a string field 'dtype'");
  RaggedLayout l = RaggedLayout::parse(detail::read_mesh_fields(j, "layout"), detail::read_shape_field(j, "layout"),
                                       parse_dtype(dt->get<std::string>()), p->get<std::string>());
  if (const auto r = j.find("ragged"); r != j.end()) {
    if (!r->is_object()) throw InputError("layout JSON field 'ragged' must be an object");
    for (const auto& [key, v] : r->items())
      if (key != "mesh_dim" && key != "dims" && key != "local_units")
        throw InputError(fmt::format("layout JSON field 'ragged' has an unknown field {}", quote_input(key)));
    if (!l.ragged()) throw InputError("layout JSON has a 'ragged' field but its placements hold no RaggedShard");
    const auto need = [&](const char* f) -> const nlohmann::json& {
      const auto it = r->find(f);
      if (it == r->end()) throw InputError(fmt::format("layout JSON field 'ragged' lacks '{}'", f));
      return *it;
    };
    const auto md = detail::json_int(need("mesh_dim"), "ragged.mesh_dim", 0, Sharding::kMaxMeshDims - 1);
    const auto dims = detail::json_int_list(need("dims"), "ragged.dims", 0, Sharding::kMaxTensorDims - 1);
    const auto units = detail::json_int_list(need("local_units"), "ragged.local_units", 0, kMaxUnits);
    std::vector<std::int64_t> want_dims;
    for (int d = 0; d < l.ragged()->prefix_dims; ++d) want_dims.push_back(d);
    if (md != l.ragged()->mesh_dim || dims != want_dims || units != l.ragged()->units)
      throw InputError(fmt::format("layout JSON field 'ragged' (mesh dim {}, dims ({}), local_units ({})) disagrees with "
                                   "its placements {}", md, fmt::join(dims, ","), fmt::join(units, ","),
                                   quote_input(l.placements_str())));
  }
  return l;
}

std::vector<std::vector<IndexSet>> range_boxes(const std::vector<IndexSet>& box, std::int64_t p0, std::int64_t p1) {
  std::vector<std::vector<IndexSet>> out;
  const std::size_t nd = box.size();
  std::int64_t total = 1;
  for (const auto& s : box) total *= s.size();
  p0 = std::clamp<std::int64_t>(p0, 0, total);
  p1 = std::clamp<std::int64_t>(p1, p0, total);
  if (p0 == p1) return out;
  if (nd == 0) return {{}};
  std::vector<std::int64_t> inner(nd + 1, 1);  // elements per step of dim d
  for (std::size_t d = nd; d-- > 0;) inner[d] = inner[d + 1] * box[d].size();
  std::vector<IndexSet> fixed;  // the chosen index of each outer dim
  // [start, stop) over dims d.. (positions within the rows fixed so far)
  auto emit = [&](auto&& self, std::size_t d, std::int64_t start, std::int64_t stop) -> void {
    if (start >= stop) return;
    const std::int64_t in = inner[d + 1];
    auto whole = [&](std::int64_t a, std::int64_t b) {
      std::vector<IndexSet> b2 = fixed;
      b2.push_back(box[d].slice(a, b));
      for (std::size_t e = d + 1; e < nd; ++e) b2.push_back(box[e]);
      out.push_back(std::move(b2));
    };
    if (d + 1 == nd || (start % in == 0 && stop % in == 0)) {
      whole(start / in, stop / in);
      return;
    }
    std::int64_t a = start / in;
    const std::int64_t b = stop / in;
    auto sub = [&](std::int64_t row, std::int64_t s, std::int64_t e) {
      fixed.push_back(box[d].slice(row, row + 1));
      self(self, d + 1, s, e);
      fixed.pop_back();
    };
    if (a == b) {
      sub(a, start % in, stop % in);
      return;
    }
    if (start % in != 0) {
      sub(a, start % in, in);
      ++a;
    }
    if (a < b) whole(a, b);
    if (stop % in != 0) sub(b, 0, stop % in);
  };
  emit(emit, 0, p0, p1);
  return out;
}

std::int64_t position_in(const std::vector<IndexSet>& sub, std::int64_t t, const std::vector<IndexSet>& box) {
  std::int64_t p = 0, stride = 1;
  for (std::size_t d = sub.size(); d-- > 0;) {
    const auto k = t % sub[d].size();
    t /= sub[d].size();
    p += box[d].position_of(sub[d].nth(k)) * stride;
    stride *= box[d].size();
  }
  return p;
}

std::int64_t count_before(const std::vector<IndexSet>& sub, const std::vector<IndexSet>& box, std::int64_t pos) {
  std::int64_t n = 1;
  for (const auto& s : sub) n *= s.size();
  if (n == 0) return 0;
  bool dense = true;  // every set one run: positions are row-major arithmetic
  for (std::size_t d = 0; d < sub.size(); ++d) dense = dense && sub[d].runs().size() == 1 && box[d].runs().size() == 1;
  if (dense) {
    // pos as a coordinate of the box (row-major), then the sub-box's elements lexicographically
    // before it: per dim, those below its coordinate there times the sub-box's inner size, while
    // the coordinates before lie inside the sub-box
    const std::size_t nd = sub.size();
    std::vector<std::int64_t> q(nd, 0);
    std::int64_t rest = std::max<std::int64_t>(pos, 0), inner_box = 1;
    for (std::size_t d = nd; d-- > 0;) inner_box *= box[d].size();
    if (rest >= inner_box) return n;
    for (std::size_t d = 0; d < nd; ++d) {
      inner_box /= box[d].size();
      q[d] = rest / inner_box;
      rest %= inner_box;
    }
    std::int64_t count = 0, inner_sub = n;
    for (std::size_t d = 0; d < nd; ++d) {
      inner_sub /= sub[d].size();
      const std::int64_t lo = sub[d].runs().front().start - box[d].runs().front().start;  // sub's first coordinate in the box
      count += std::clamp<std::int64_t>(q[d] - lo, 0, sub[d].size()) * inner_sub;
      if (q[d] < lo || q[d] >= lo + sub[d].size()) break;
    }
    return count;
  }
  std::int64_t lo = 0, hi = n;  // the first t whose position is >= pos (positions rise with t)
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (position_in(sub, mid, box) < pos) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

}  // namespace dtensor
