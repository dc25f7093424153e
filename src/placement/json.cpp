#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "dtensor/error.hpp"
#include "dtensor/layout.hpp"
#include "json_fields.hpp"

namespace dtensor {
namespace detail {
using nlohmann::json;
using ordered = nlohmann::ordered_json;

namespace {
// The nesting bound, checked by one pass over the text before parsing (brackets inside strings
// skipped), so that no nesting reaches the parser's recursion or a recursive walk later. A pass
// rather than the parser's callback: nlohmann's callback parser costs more than linear time in
// the number of values (its end_object re-examines the enclosing container), the plain one is
// linear.
void check_depth(std::string_view text, std::string_view what) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth + 1)
        throw InputError(fmt::format("{} JSON is nested deeper than {} levels", what, kMaxJsonDepth));
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
}
}  // namespace

json parse_json(std::string_view text, std::string_view what) {
  check_depth(text, what);
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {  // parse errors, and numbers out of range (1e400)
    throw InputError(fmt::format("invalid {} JSON: {}", what, e.what()));
  }
}

std::string json_quote(const json& v) {
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  if (v.is_string()) return quote_input(v.get<std::string>());  // quoted once, not its JSON form quoted again
  return quote_input(v.dump());
}

std::int64_t json_int(const json& v, std::string_view field, std::int64_t lo, std::int64_t hi) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(hi) || (lo > 0 && u < static_cast<std::uint64_t>(lo)))
      throw InputError(fmt::format("JSON field '{}' is {}, outside [{}, {}]", field, u, lo, hi));
    return static_cast<std::int64_t>(u);
  }
  if (!v.is_number_integer()) throw InputError(fmt::format("JSON field '{}' must be an integer, not {}", field, json_quote(v)));
  const auto x = v.get<std::int64_t>();
  if (x < lo || x > hi) throw InputError(fmt::format("JSON field '{}' is {}, outside [{}, {}]", field, x, lo, hi));
  return x;
}

std::vector<std::int64_t> json_int_list(const json& v, std::string_view field, std::int64_t lo, std::int64_t hi) {
  if (!v.is_array()) throw InputError(fmt::format("JSON field '{}' must be an array of integers, not {}", field, json_quote(v)));
  std::vector<std::int64_t> out;
  for (const auto& x : v) out.push_back(json_int(x, field, lo, hi));
  return out;
}

bool json_hash_is(const json& v, std::uint64_t h) {
  return v.is_string() && v.get<std::string>() == fmt::format("{:016x}", h);
}

bool same_time(double got, double parts) { return std::abs(got - parts) <= 1e-9 * std::max(1.0, parts); }

namespace {
const json& need(const json& j, const char* name, std::string_view what) {
  if (!j.is_object()) throw InputError(fmt::format("{} JSON must be an object, not {}", what, json_quote(j)));
  auto it = j.find(name);
  if (it == j.end()) throw InputError(fmt::format("{} JSON lacks the field '{}'", what, name));
  return *it;
}
std::string string_field(const json& j, const char* name, std::string_view what) {
  const auto& f = need(j, name, what);
  if (!f.is_string()) throw InputError(fmt::format("{} JSON field '{}' must be a string, not {}", what, name, json_quote(f)));
  return f.get<std::string>();
}
std::vector<std::string> string_list(const json& v, std::string_view field) {
  if (!v.is_array()) throw InputError(fmt::format("JSON field '{}' must be an array of strings, not {}", field, json_quote(v)));
  std::vector<std::string> out;
  for (const auto& n : v) {
    if (!n.is_string()) throw InputError(fmt::format("JSON field '{}' must hold strings, not {}", field, json_quote(n)));
    out.push_back(n.get<std::string>());
  }
  return out;
}
constexpr std::int64_t kMaxSize = std::int64_t{1} << 53;
}  // namespace

void write_mesh_fields(ordered& j, const Mesh& m) {
  j["mesh"] = m.shape();
  if (!m.names().empty()) j["mesh_names"] = m.names();
  if (m.has_explicit_ranks()) j["mesh_ranks"] = m.ranks();
}

void write_layout_fields(ordered& j, const Layout& l) {
  write_mesh_fields(j, l.mesh());
  j["shape"] = l.shape();
  j["dtype"] = std::string(to_string(l.dtype()));
  j["placements"] = l.placements_str();
}

Mesh read_mesh_fields(const json& j, std::string_view what) {
  const json& m = need(j, "mesh", what);
  if (m.is_string()) return Mesh::parse(m.get<std::string>());
  std::vector<std::int64_t> shape;
  std::vector<std::string> names;
  std::vector<std::int64_t> ranks;
  if (m.is_object()) {  // {"shape", "names", "ranks"}: the form of earlier versions
    shape = json_int_list(need(m, "shape", "mesh"), "mesh.shape", 1, kMaxSize);
    if (auto it = m.find("names"); it != m.end()) names = string_list(*it, "mesh.names");
    if (auto it = m.find("ranks"); it != m.end()) ranks = json_int_list(*it, "mesh.ranks", 0, kMaxSize);
  } else {
    shape = json_int_list(m, "mesh", 1, kMaxSize);
  }
  if (auto it = j.find("mesh_names"); it != j.end()) names = string_list(*it, "mesh_names");
  if (auto it = j.find("mesh_ranks"); it != j.end()) ranks = json_int_list(*it, "mesh_ranks", 0, kMaxSize);
  return Mesh(shape, names, ranks);
}

std::vector<std::int64_t> read_shape_field(const json& j, std::string_view what) {
  return json_int_list(need(j, "shape", what), "shape", 0, kMaxSize);
}

}  // namespace detail

using detail::ordered;

std::string to_json(const Mesh& m) {
  ordered j;
  detail::write_mesh_fields(j, m);
  return j.dump();
}

std::string to_json(const Layout& l) {
  ordered j;
  j["version"] = 1;
  detail::write_layout_fields(j, l);
  return j.dump();
}

Mesh mesh_from_json(std::string_view text) {
  const auto j = detail::parse_json(text, "mesh");
  if (j.is_object() && !j.contains("mesh")) {  // {"shape", "names", "ranks"}
    nlohmann::json wrapped;
    wrapped["mesh"] = j;
    return detail::read_mesh_fields(wrapped, "mesh");
  }
  if (!j.is_object()) {
    nlohmann::json wrapped;
    wrapped["mesh"] = j;
    return detail::read_mesh_fields(wrapped, "mesh");
  }
  return detail::read_mesh_fields(j, "mesh");
}

Layout layout_from_json(std::string_view text) {
  const auto j = detail::parse_json(text, "layout");
  if (!j.is_object()) throw InputError(fmt::format("layout JSON must be an object, not {}", detail::json_quote(j)));
  if (auto v = j.find("version"); v != j.end() && detail::json_int(*v, "version", 0, INT64_MAX) != 1)
    throw InputError(fmt::format("layout JSON version {} is not supported (this library reads 1)", v->dump()));
  Mesh mesh = detail::read_mesh_fields(j, "layout");
  auto shape = detail::read_shape_field(j, "layout");
  const DType dtype = parse_dtype(detail::string_field(j, "dtype", "layout"));
  return Layout::parse(std::move(mesh), std::move(shape), dtype, detail::string_field(j, "placements", "layout"));
}

}  // namespace dtensor
