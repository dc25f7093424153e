#pragma once
// The one JSON form of a layout's fields, shared by layout JSON, plan JSON and the CLI:
//   "mesh": [2, 4], "mesh_names": ["dp", "tp"] (when named), "mesh_ranks": [...] (when explicit),
//   "shape": [1000, 512], "dtype": "bf16", "placements": "S(0)[1]S(0)[0]".
// Readers bound nesting depth, refuse numbers out of range and non-integers, and quote at most
// ~80 characters of the input in errors.
#include <nlohmann/json.hpp>

#include "dtensor/layout.hpp"

namespace dtensor::detail {

inline constexpr int kMaxJsonDepth = 32;

// Parses `text`; errors name `what` ("plan", "layout", "cost profile").
[[nodiscard]] nlohmann::json parse_json(std::string_view text, std::string_view what);
// A short rendering of a JSON value for messages (never a whole input).
[[nodiscard]] std::string json_quote(const nlohmann::json& v);
[[nodiscard]] std::int64_t json_int(const nlohmann::json& v, std::string_view field, std::int64_t lo, std::int64_t hi);
[[nodiscard]] std::vector<std::int64_t> json_int_list(const nlohmann::json& v, std::string_view field, std::int64_t lo,
                                                      std::int64_t hi);
// Whether `v` is the hash `h` as the writers put it: a string of 16 hex digits.
[[nodiscard]] bool json_hash_is(const nlohmann::json& v, std::uint64_t h);
// Whether a time read from a file is the one its parts add up to: the writers sum the same parts
// in the same order and JSON numbers read back bit for bit, so the margin (1e-9 relative) only
// absorbs a sum taken in another order.
[[nodiscard]] bool same_time(double got, double parts);

void write_mesh_fields(nlohmann::ordered_json& j, const Mesh& m);
void write_layout_fields(nlohmann::ordered_json& j, const Layout& l);
// "mesh" (an array of sizes; also accepted: the mesh text or {"shape", "names", "ranks"}), with
// "mesh_names" and "mesh_ranks".
[[nodiscard]] Mesh read_mesh_fields(const nlohmann::json& j, std::string_view what);
[[nodiscard]] std::vector<std::int64_t> read_shape_field(const nlohmann::json& j, std::string_view what);

}  // namespace dtensor::detail
