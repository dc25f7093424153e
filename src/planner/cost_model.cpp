#include "dtensor/cost_model.hpp"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "../placement/hash.hpp"
#include "../placement/json_fields.hpp"
#include "dtensor/error.hpp"

namespace dtensor {
namespace {
using nlohmann::json;

// Documented bounds (docs/cost-model.md): latencies in [0, 1e6] us, bandwidths in [1e-3, 1e6] GB/s.
// Inside them every step's cost is finite, so the search never sees inf or NaN.
constexpr double kMaxLatencyUs = 1e6, kMinBwGBps = 1e-3, kMaxBwGBps = 1e6;

double number(const json& obj, const char* key, std::string_view where, bool latency) {
  auto it = obj.find(key);
  if (it == obj.end()) throw InputError(fmt::format("cost model: {} lacks '{}'", where, key));
  if (!it->is_number())
    throw InputError(fmt::format("cost model: {}.{} must be a number, not {}", where, key, detail::json_quote(*it)));
  const double v = it->get<double>();
  const double lo = latency ? 0 : kMinBwGBps, hi = latency ? kMaxLatencyUs : kMaxBwGBps;
  if (!std::isfinite(v) || v < lo || v > hi)
    throw InputError(fmt::format("cost model: {}.{} = {} is outside [{}, {}] {}", where, key, v, lo, hi,
                                 latency ? "us" : "GB/s"));
  return v;
}

void only_keys(const json& obj, std::initializer_list<const char*> keys, std::string_view where) {
  if (!obj.is_object())
    throw InputError(fmt::format("cost model: {} must be an object, not {}", where, detail::json_quote(obj)));
  for (const auto& [k, v] : obj.items()) {
    bool known = false;
    for (const char* key : keys) known = known || k == key;
    if (!known) throw InputError(fmt::format("cost model: unknown field {} in {}", quote_input(k), where));
  }
}

LinkParams link_of(const json& obj, std::string_view where) {
  only_keys(obj, {"alpha_us", "alpha_per_peer_us", "bw_GBps", "p2p_bw_GBps"}, where);
  return {number(obj, "alpha_us", where, true), number(obj, "alpha_per_peer_us", where, true),
          number(obj, "bw_GBps", where, false), number(obj, "p2p_bw_GBps", where, false)};
}

json link_json(const LinkParams& l) {
  return {{"alpha_us", l.alpha_us}, {"alpha_per_peer_us", l.alpha_per_peer_us}, {"bw_GBps", l.bw_GBps},
          {"p2p_bw_GBps", l.p2p_bw_GBps}};
}
}  // namespace

CostModel CostModel::default_model() { return CostModel{}; }

CostModel CostModel::pytorch() {
  CostModel m;
  m.name = "pytorch";
  m.formula = Formula::pytorch;
  m.devices_per_host = 8;
  constexpr double base_bw = 87.7;
  m.intra = {6.6, 0.6, base_bw, base_bw};
  m.inter = {6.6, 2.7, base_bw * 0.22, base_bw * 0.22};  // PyTorch scales the inter-host bw by 0.22
  m.copy_bw_GBps = 1500;  // unused: PyTorch's local steps are free
  return m;
}

CostModel CostModel::from_json(std::string_view text) {
  const json j = detail::parse_json(text, "cost model");
  only_keys(j, {"name", "formula", "devices_per_host", "links", "copy_bw_GBps"}, "profile");
  CostModel m;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get<std::string>().empty())
    throw InputError("cost model: 'name' must be a non-empty string");
  m.name = name->get<std::string>();
  if (auto f = j.find("formula"); f != j.end()) {
    if (*f == "ring") m.formula = Formula::ring;
    else if (*f == "pytorch") m.formula = Formula::pytorch;
    else throw InputError(fmt::format("cost model: unknown formula {} (expected \"ring\" or \"pytorch\")", detail::json_quote(*f)));
  }
  auto dph = j.find("devices_per_host");
  if (dph == j.end()) throw InputError("cost model: profile lacks 'devices_per_host'");
  m.devices_per_host = detail::json_int(*dph, "devices_per_host", 1, std::int64_t{1} << 31);
  auto links = j.find("links");
  if (links == j.end()) throw InputError("cost model: profile lacks 'links'");
  only_keys(*links, {"intra", "inter"}, "links");
  if (!links->contains("intra") || !links->contains("inter"))
    throw InputError("cost model: 'links' needs both 'intra' and 'inter'");
  m.intra = link_of((*links)["intra"], "links.intra");
  m.inter = link_of((*links)["inter"], "links.inter");
  m.copy_bw_GBps = number(j, "copy_bw_GBps", "profile", false);
  return m;
}

CostModel CostModel::load(std::string_view name_or_path) {
  if (name_or_path == "default") return default_model();
  if (name_or_path == "pytorch") return pytorch();
  // Only regular files, and small ones: /dev/zero or a FIFO would never end.
  constexpr std::uintmax_t kMaxProfileBytes = 1 << 20;
  const std::string path(name_or_path);
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st))
    throw InputError(fmt::format("cost model {} is neither 'default', 'pytorch' nor an existing JSON file",
                                 quote_input(name_or_path)));
  if (!std::filesystem::is_regular_file(st))
    throw InputError(fmt::format("cost model {} is not a regular file ({}); give a JSON profile file",
                                 quote_input(name_or_path), std::filesystem::is_directory(st) ? "a directory" : "a device, FIFO or socket"));
  const auto size = std::filesystem::file_size(path, ec);
  if (ec || size > kMaxProfileBytes)
    throw InputError(fmt::format("cost model file {} is {} bytes; profiles are at most {} bytes", quote_input(name_or_path),
                                 ec ? 0 : size, kMaxProfileBytes));
  std::ifstream in{path};
  if (!in) throw InputError(fmt::format("cost model file {} cannot be read", quote_input(name_or_path)));
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return from_json(ss.str());
  } catch (const Error& e) {
    throw InputError(fmt::format("{} (in {})", e.what(), quote_input(name_or_path)));
  }
}

std::string CostModel::to_json() const {
  json j = {{"name", name},
            {"devices_per_host", devices_per_host},
            {"links", {{"intra", link_json(intra)}, {"inter", link_json(inter)}}},
            {"copy_bw_GBps", copy_bw_GBps}};
  if (formula == Formula::pytorch) j["formula"] = "pytorch";
  return j.dump();
}

bool CostModel::is_inter_host(std::span<const std::int64_t> mesh_shape, int mesh_dim) const noexcept {
  std::int64_t n = 1;
  for (std::size_t k = static_cast<std::size_t>(mesh_dim); k < mesh_shape.size(); ++k) n *= mesh_shape[k];
  return n > devices_per_host;
}

std::uint64_t CostModel::fingerprint() const noexcept {
  // Two independent multiply chains (the plan cache computes this on every lookup).
  auto bits = [](double v) {
    std::uint64_t b;
    std::memcpy(&b, &v, sizeof b);
    return b;
  };
  std::uint64_t a = detail::fnv1a(name.data(), name.size());
  std::uint64_t b = 0x9e3779b97f4a7c15ULL ^ (static_cast<std::uint64_t>(formula) << 32 | static_cast<std::uint64_t>(devices_per_host));
  detail::hash_combine(a, bits(intra.alpha_us));
  detail::hash_combine(b, bits(intra.alpha_per_peer_us));
  detail::hash_combine(a, bits(intra.bw_GBps));
  detail::hash_combine(b, bits(intra.p2p_bw_GBps));
  detail::hash_combine(a, bits(inter.alpha_us));
  detail::hash_combine(b, bits(inter.alpha_per_peer_us));
  detail::hash_combine(a, bits(inter.bw_GBps));
  detail::hash_combine(b, bits(inter.p2p_bw_GBps));
  detail::hash_combine(a, bits(copy_bw_GBps));
  return detail::mix64(a ^ detail::mix64(b));
}

}  // namespace dtensor
