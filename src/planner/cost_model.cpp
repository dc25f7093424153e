#include "dtensor/cost_model.hpp"

#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "../placement/hash.hpp"
#include "dtensor/error.hpp"

namespace dtensor {
namespace {
using nlohmann::json;

double positive(const json& obj, const char* key, std::string_view where, bool allow_zero = false) {
  auto it = obj.find(key);
  if (it == obj.end()) throw InputError(fmt::format("cost model: {} lacks '{}'", where, key));
  if (!it->is_number()) throw InputError(fmt::format("cost model: {}.{} must be a number, got {}", where, key, it->dump()));
  const double v = it->get<double>();
  if (!(allow_zero ? v >= 0 : v > 0))
    throw InputError(fmt::format("cost model: {}.{} = {} must be {}", where, key, v, allow_zero ? ">= 0" : "> 0"));
  return v;
}

void only_keys(const json& obj, std::initializer_list<const char*> keys, std::string_view where) {
  if (!obj.is_object()) throw InputError(fmt::format("cost model: {} must be an object, got {}", where, obj.dump()));
  for (const auto& [k, v] : obj.items()) {
    bool known = false;
    for (const char* key : keys) known = known || k == key;
    if (!known) throw InputError(fmt::format("cost model: unknown field '{}' in {}", k, where));
  }
}

LinkParams link_of(const json& obj, std::string_view where) {
  only_keys(obj, {"alpha_us", "alpha_per_peer_us", "bw_GBps", "p2p_bw_GBps"}, where);
  return {positive(obj, "alpha_us", where, true), positive(obj, "alpha_per_peer_us", where, true),
          positive(obj, "bw_GBps", where), positive(obj, "p2p_bw_GBps", where)};
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
  json j;
  try {
    j = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    throw InputError(fmt::format("invalid cost model JSON: {}", e.what()));
  }
  only_keys(j, {"name", "formula", "devices_per_host", "links", "copy_bw_GBps"}, "profile");
  CostModel m;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get<std::string>().empty())
    throw InputError("cost model: 'name' must be a non-empty string");
  m.name = name->get<std::string>();
  if (auto f = j.find("formula"); f != j.end()) {
    if (*f == "ring") m.formula = Formula::ring;
    else if (*f == "pytorch") m.formula = Formula::pytorch;
    else throw InputError(fmt::format("cost model: unknown formula {} (expected \"ring\" or \"pytorch\")", f->dump()));
  }
  auto dph = j.find("devices_per_host");
  if (dph == j.end() || !dph->is_number_integer() || dph->get<std::int64_t>() < 1)
    throw InputError(fmt::format("cost model: devices_per_host must be an integer >= 1, got {}",
                            dph == j.end() ? "nothing" : dph->dump()));
  m.devices_per_host = dph->get<std::int64_t>();
  auto links = j.find("links");
  if (links == j.end()) throw InputError("cost model: profile lacks 'links'");
  only_keys(*links, {"intra", "inter"}, "links");
  if (!links->contains("intra") || !links->contains("inter"))
    throw InputError("cost model: 'links' needs both 'intra' and 'inter'");
  m.intra = link_of((*links)["intra"], "links.intra");
  m.inter = link_of((*links)["inter"], "links.inter");
  m.copy_bw_GBps = positive(j, "copy_bw_GBps", "profile");
  return m;
}

CostModel CostModel::load(std::string_view name_or_path) {
  if (name_or_path == "default") return default_model();
  if (name_or_path == "pytorch") return pytorch();
  std::ifstream in{std::string(name_or_path)};
  if (!in)
    throw InputError(fmt::format("cost model '{}' is neither 'default', 'pytorch' nor a readable JSON file", name_or_path));
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return from_json(ss.str());
  } catch (const Error& e) {
    throw InputError(fmt::format("{} (in {})", e.what(), name_or_path));
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
  std::uint64_t h = detail::fnv1a(name.data(), name.size());
  auto add = [&](double v) {
    std::uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    detail::hash_combine(h, bits);
  };
  detail::hash_combine(h, static_cast<std::uint64_t>(formula));
  detail::hash_combine(h, static_cast<std::uint64_t>(devices_per_host));
  for (const LinkParams* l : {&intra, &inter}) {
    add(l->alpha_us);
    add(l->alpha_per_peer_us);
    add(l->bw_GBps);
    add(l->p2p_bw_GBps);
  }
  add(copy_bw_GBps);
  return detail::mix64(h);
}

}  // namespace dtensor
