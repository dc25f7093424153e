#include <nlohmann/json.hpp>

#include "dtensor/error.hpp"
#include "dtensor/layout.hpp"

namespace dtensor {
namespace {
using nlohmann::json;

json parse_json(std::string_view text, std::string_view what) {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    throw InputError(fmt::format("invalid {} JSON: {}", what, e.what()));
  }
}

std::vector<std::int64_t> int_list(const json& j, std::string_view field) {
  if (!j.is_array()) throw InputError(fmt::format("JSON field '{}' must be an array of integers, got {}", field, j.dump()));
  std::vector<std::int64_t> v;
  for (const auto& x : j) {
    if (!x.is_number_integer())
      throw InputError(fmt::format("JSON field '{}' must hold integers, got {}", field, x.dump()));
    v.push_back(x.get<std::int64_t>());
  }
  return v;
}

const json& field(const json& j, const char* name, std::string_view what) {
  if (!j.is_object()) throw InputError(fmt::format("{} JSON must be an object, got {}", what, j.dump()));
  auto it = j.find(name);
  if (it == j.end()) throw InputError(fmt::format("{} JSON lacks the field '{}'", what, name));
  return *it;
}

std::string string_field(const json& j, const char* name, std::string_view what) {
  const auto& f = field(j, name, what);
  if (!f.is_string()) throw InputError(fmt::format("JSON field '{}' must be a string, got {}", name, f.dump()));
  return f.get<std::string>();
}

json mesh_json(const Mesh& m) {
  json j = {{"shape", m.shape()}};
  if (!m.names().empty()) j["names"] = m.names();
  if (m.has_explicit_ranks()) j["ranks"] = m.ranks();
  return j;
}

Mesh mesh_of(const json& j) {
  if (j.is_array()) return Mesh(int_list(j, "mesh"));
  if (j.is_string()) return Mesh::parse(j.get<std::string>());
  const auto shape = int_list(field(j, "shape", "mesh"), "shape");
  std::vector<std::string> names;
  if (auto it = j.find("names"); it != j.end()) {
    if (!it->is_array()) throw InputError(fmt::format("JSON field 'names' must be an array of strings, got {}", it->dump()));
    for (const auto& n : *it) {
      if (!n.is_string()) throw InputError(fmt::format("JSON field 'names' must hold strings, got {}", n.dump()));
      names.push_back(n.get<std::string>());
    }
  }
  std::vector<std::int64_t> ranks;
  if (auto it = j.find("ranks"); it != j.end()) ranks = int_list(*it, "ranks");
  return Mesh(shape, names, ranks);
}
}  // namespace

std::string to_json(const Mesh& m) { return mesh_json(m).dump(); }

std::string to_json(const Layout& l) {
  json j = {{"mesh", mesh_json(l.mesh())},
            {"shape", l.shape()},
            {"dtype", std::string(to_string(l.dtype()))},
            {"placements", l.str()}};
  return j.dump();
}

Mesh mesh_from_json(std::string_view text) { return mesh_of(parse_json(text, "mesh")); }

Layout layout_from_json(std::string_view text) {
  const json j = parse_json(text, "layout");
  Mesh mesh = mesh_of(field(j, "mesh", "layout"));
  auto shape = int_list(field(j, "shape", "layout"), "shape");
  const DType dtype = parse_dtype(string_field(j, "dtype", "layout"));
  return Layout::parse(std::move(mesh), std::move(shape), dtype, string_field(j, "placements", "layout"));
}

}  // namespace dtensor
