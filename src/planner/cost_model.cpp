#include "dtensor/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "placement/hash.hpp"
#include "placement/json_fields.hpp"
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

// PyTorch 2.15's cost of one collective over a group of n ranks on link L (latency, wire time),
// with bytes_gb the tensor's bytes over its shard count in GiB (CostModel::time's PyTorch row).
struct AlphaWire {
  double alpha, wire;
};
AlphaWire pytorch_collective(const LinkParams& L, Collective c, double n, double bytes_gb) {
  const double hops = n - 1;
  switch (c) {
    case Collective::all_reduce:
      return {L.alpha_us + 2 * hops * L.alpha_per_peer_us, (2 * bytes_gb * hops / n) / L.bw_GBps * 1e6};
    case Collective::all_gather:
      return {L.alpha_us + hops * L.alpha_per_peer_us, (bytes_gb * n * hops / n) / L.bw_GBps * 1e6};
    case Collective::all_to_all:
      return {L.alpha_us + hops * L.alpha_per_peer_us + 1.0, (bytes_gb * hops / n) / L.bw_GBps * 1e6};
    default:  // reduce_scatter
      return {L.alpha_us + hops * L.alpha_per_peer_us, (bytes_gb * hops / n) / L.bw_GBps * 1e6};
  }
}

constexpr std::size_t kMaxCurves = 64, kMaxBands = 16;

CollectiveCurve curve_of(const json& obj, std::string_view where) {
  only_keys(obj, {"collective", "link", "ranks", "bands"}, where);
  CollectiveCurve c;
  auto col = obj.find("collective");
  if (col == obj.end() || !col->is_string() || !parse_collective(col->get<std::string>()))
    throw InputError(fmt::format("cost model: {}.collective must be all_gather, reduce_scatter, all_reduce, alltoall or "
                                 "sendrecv, not {}", where, col == obj.end() ? "missing" : detail::json_quote(*col)));
  c.collective = *parse_collective(col->get<std::string>());
  auto link = obj.find("link");
  if (link == obj.end() || !(*link == "intra" || *link == "inter"))
    throw InputError(fmt::format("cost model: {}.link must be \"intra\" or \"inter\"", where));
  c.inter_host = *link == "inter";
  auto ranks = obj.find("ranks");
  if (ranks == obj.end()) throw InputError(fmt::format("cost model: {} lacks 'ranks'", where));
  c.ranks = detail::json_int(*ranks, "ranks", 2, std::int64_t{1} << 24);
  auto bands = obj.find("bands");
  if (bands == obj.end() || !bands->is_array() || bands->empty() || bands->size() > kMaxBands)
    throw InputError(fmt::format("cost model: {}.bands must be a list of 1 to {} bands", where, kMaxBands));
  double prev = 0;
  for (std::size_t i = 0; i < bands->size(); ++i) {
    const auto& b = (*bands)[i];
    const std::string bw = fmt::format("{}.bands[{}]", where, i);
    only_keys(b, {"up_to_bytes", "alpha_us", "bw_GBps"}, bw);
    auto up = b.find("up_to_bytes");
    if (up == b.end() || !up->is_number() || !std::isfinite(up->get<double>()) || up->get<double>() <= prev ||
        up->get<double>() > 1e18)
      throw InputError(fmt::format("cost model: {}.up_to_bytes must increase from band to band, within (0, 1e18]", bw));
    prev = up->get<double>();
    c.bands.push_back({prev, number(b, "alpha_us", bw, true), number(b, "bw_GBps", bw, false)});
  }
  return c;
}

json curve_json(const CollectiveCurve& c) {
  json bands = json::array();
  for (const auto& b : c.bands) bands.push_back({{"up_to_bytes", b.up_to_bytes}, {"alpha_us", b.alpha_us}, {"bw_GBps", b.bw_GBps}});
  return {{"collective", std::string(to_string(c.collective))}, {"link", c.inter_host ? "inter" : "intra"},
          {"ranks", c.ranks}, {"bands", bands}};
}
}  // namespace

double bus_factor(Collective c, std::int64_t n) noexcept {
  const double nn = static_cast<double>(std::max<std::int64_t>(n, 1));
  switch (c) {
    case Collective::all_reduce: return 2 * (nn - 1) / nn;
    case Collective::send_recv: return 1;
    default: return (nn - 1) / nn;
  }
}

double CollectiveCurve::time_us(std::int64_t n, double bytes, double* alpha_out) const {
  // the band is chosen by the size that moves the same bus bytes at the fitted group size
  const double f = bus_factor(collective, n), f0 = bus_factor(collective, ranks);
  const double at_fit = f0 > 0 ? bytes * f / f0 : bytes;
  const double hops = collective == Collective::send_recv ? 1.0 : static_cast<double>(std::max<std::int64_t>(n - 1, 0));
  const double hops0 = collective == Collective::send_recv ? 1.0 : static_cast<double>(std::max<std::int64_t>(ranks - 1, 1));
  const double scale = hops / hops0;
  // monotone: a larger message never costs less than the top of the band before it (a
  // measured dip across a protocol switch is taken as noise, not as a cheaper size)
  double floor = 0;
  for (std::size_t k = 0; k < bands.size(); ++k) {
    const auto& b = bands[k];
    const bool here = at_fit <= b.up_to_bytes || k + 1 == bands.size();
    const double x = here ? at_fit : b.up_to_bytes;
    const double v = b.alpha_us * scale + x * f0 / (b.bw_GBps * 1e3);
    if (here) {
      const double t = std::max(v, floor);
      if (alpha_out) *alpha_out = std::min(b.alpha_us * scale, t);
      return t;
    }
    floor = std::max(floor, v);
  }
  if (alpha_out) *alpha_out = 0;
  return 0;
}

StepTime CostModel::time(const Traffic& t) const {
  StepTime out;
  const bool torch = formula == Formula::pytorch;
  if (t.kind == Traffic::Kind::free) return out;
  // PyTorch's estimate charges nothing for local work; the ring model its copy bandwidth
  if (!torch) out.copy_us = t.copy_bytes / (copy_bw_GBps * 1e3);
  if (t.kind == Traffic::Kind::local) return out;
  const LinkParams& L = link(t.inter_host);
  if (t.kind == Traffic::Kind::direct) {
    if (t.peers <= 0) return out;
    if (const auto* cv = torch ? nullptr : curve(Collective::send_recv, t.inter_host)) {
      // the busiest rank's bytes as one pair's exchange, plus the per-peer latency of the peers
      // beyond the first where it exceeds the wire time: a rank posts and completes one peer's
      // message while the others' are on the wire (on the simulated cluster a direct step of 7
      // peers at 448 KiB took 14.9 us; wire plus every peer's latency predicted 22.9)
      const double total = cv->time_us(2, t.bytes, &out.alpha_us);
      out.wire_us = total - out.alpha_us;
      out.alpha_us += std::max(0.0, static_cast<double>(t.peers - 1) * L.alpha_per_peer_us - out.wire_us);
    } else {
      out.alpha_us = L.alpha_us + static_cast<double>(t.peers) * L.alpha_per_peer_us;
      out.wire_us = torch ? t.bytes / 1024 / 1024 / 1024 / L.p2p_bw_GBps * 1e6 : t.bytes / (L.p2p_bw_GBps * 1e3);
    }
    return out;
  }
  const Collective c = t.collective;
  const std::int64_t n = t.group;
  if (n <= 1 && c != Collective::send_recv) return out;  // a group of one moves nothing
  const double nn = static_cast<double>(n), hops = nn - 1;
  if (torch) {
    if (c == Collective::send_recv) {
      out.alpha_us = L.alpha_us + L.alpha_per_peer_us;
      out.wire_us = t.bytes / 1024 / 1024 / 1024 / L.p2p_bw_GBps * 1e6;
    } else {
      const auto aw = pytorch_collective(L, c, nn, t.shard_bytes / 1024 / 1024 / 1024);
      out.alpha_us = aw.alpha;
      out.wire_us = aw.wire;
    }
  } else if (const auto* cv = curve(c, t.inter_host)) {
    const double total = cv->time_us(c == Collective::send_recv ? 2 : n, t.bytes, &out.alpha_us);
    out.wire_us = total - out.alpha_us;  // the curve's monotone floor, if any, counts as wire time
  } else if (c == Collective::send_recv) {
    out.alpha_us = L.alpha_us + L.alpha_per_peer_us;
    out.wire_us = t.bytes / (L.p2p_bw_GBps * 1e3);
  } else if (c == Collective::all_reduce) {
    out.alpha_us = L.alpha_us + 2 * hops * L.alpha_per_peer_us;
    out.wire_us = 2.0 * hops / nn * t.bytes / (L.bw_GBps * 1e3);
  } else {
    out.alpha_us = L.alpha_us + hops * L.alpha_per_peer_us;
    out.wire_us = hops * (t.bytes / nn) / (L.bw_GBps * 1e3);  // ring: n-1 of the n chunks cross each link
  }
  return out;
}

double predict_collective_us(const CostModel& m, Collective c, std::int64_t n, bool inter, double bytes, double* alpha_out,
                             double* wire_out) {
  Traffic t;
  t.collective = c;
  t.group = n;
  t.inter_host = inter;
  t.bytes = bytes;
  // PyTorch counts one rank's shard before the step: all_gather's input is a 1/n of its size
  t.shard_bytes = c == Collective::all_gather ? bytes / static_cast<double>(n) : bytes;
  const StepTime st = m.time(t);
  if (alpha_out) *alpha_out = st.alpha_us;
  if (wire_out) *wire_out = st.wire_us;
  return st.alpha_us + st.wire_us;
}

const CollectiveCurve* CostModel::curve(Collective c, bool inter_host) const noexcept {
  for (const auto& cv : curves)
    if (cv.collective == c && cv.inter_host == inter_host) return &cv;
  return nullptr;
}

LinkParams CostModel::bound_link(bool inter_host) const noexcept {
  LinkParams b = link(inter_host);
  for (const auto& cv : curves) {
    if (cv.inter_host != inter_host) continue;
    // the smallest latency a curve charges any group (2 ranks), and no per-hop latency beyond it
    const double hops0 = cv.collective == Collective::send_recv ? 1.0 : static_cast<double>(std::max<std::int64_t>(cv.ranks - 1, 1));
    for (const auto& band : cv.bands) {
      b.alpha_us = std::min(b.alpha_us, band.alpha_us / hops0);
      b.bw_GBps = std::max(b.bw_GBps, band.bw_GBps);
      b.p2p_bw_GBps = std::max(b.p2p_bw_GBps, band.bw_GBps);
    }
    b.alpha_per_peer_us = 0;
  }
  return b;
}

double CostModel::receive_bw_floor_GBps(bool inter_host) const noexcept {
  const LinkParams l = bound_link(inter_host);
  // a direct step's Step::copy_bytes counts the busiest rank's sent + received elements: per
  // byte received it takes at least 1/p2p + 1/copy
  const double direct = copy_bw_GBps > 0 ? 1.0 / (1.0 / l.p2p_bw_GBps + 1.0 / copy_bw_GBps) : l.p2p_bw_GBps;
  return std::max(l.bw_GBps, direct);
}

double CostModel::wire_floor_us(double bytes, bool direct_only) const noexcept {
  if (prices_by_shard_count() || bytes <= 0) return 0;
  if (direct_only) return bytes / (std::max(bound_link(false).p2p_bw_GBps, bound_link(true).p2p_bw_GBps) * 1e3);
  return bytes / receive_floor_bytes_per_us();
}

double CostModel::direct_floor_us(double bytes, std::int64_t peers, bool inter_host) const {
  Traffic t;
  t.kind = Traffic::Kind::direct;
  t.peers = std::max<std::int64_t>(1, peers);
  t.bytes = bytes;
  t.inter_host = true;
  const double inter = time(t).total_us();
  if (inter_host) return inter;
  t.inter_host = false;
  return std::min(inter, time(t).total_us());
}

double CostModel::receive_floor_bytes_per_us() const noexcept {
  return std::max(receive_bw_floor_GBps(false), receive_bw_floor_GBps(true)) * 1e3;
}

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
  only_keys(j, {"version", "name", "formula", "devices_per_host", "links", "copy_bw_GBps", "curves", "storage"},
            "profile");
  CostModel m;
  const std::int64_t version = j.contains("version") ? detail::json_int(j["version"], "version", 1, 1 << 20) : 1;
  if (version > 2)
    throw InputError(fmt::format("cost model: profile version {} is newer than this library reads (1 and 2)", version));
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
  if (auto st = j.find("storage"); st != j.end()) {
    only_keys(*st, {"read_bw_GBps", "read_alpha_us"}, "storage");
    m.storage = {number(*st, "read_bw_GBps", "storage", false), number(*st, "read_alpha_us", "storage", true)};
  }
  if (auto c = j.find("curves"); c != j.end()) {
    if (version < 2) throw InputError("cost model: 'curves' need \"version\": 2");
    if (!c->is_array() || c->size() > kMaxCurves)
      throw InputError(fmt::format("cost model: 'curves' must be a list of at most {} curves", kMaxCurves));
    for (std::size_t i = 0; i < c->size(); ++i) {
      auto cv = curve_of((*c)[i], fmt::format("curves[{}]", i));
      if (m.curve(cv.collective, cv.inter_host))
        throw InputError(fmt::format("cost model: curves[{}] repeats {} on the {} link", i, to_string(cv.collective),
                                     cv.inter_host ? "inter" : "intra"));
      m.curves.push_back(std::move(cv));
    }
    if (!m.curves.empty() && m.formula == Formula::pytorch)
      throw InputError("cost model: fitted curves apply to the ring formula, not \"formula\": \"pytorch\"");
  }
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
  json j = {{"version", 2},
            {"name", name},
            {"devices_per_host", devices_per_host},
            {"links", {{"intra", link_json(intra)}, {"inter", link_json(inter)}}},
            {"copy_bw_GBps", copy_bw_GBps}};
  if (formula == Formula::pytorch) j["formula"] = "pytorch";
  if (storage != StorageParams{})
    j["storage"] = {{"read_bw_GBps", storage.read_bw_GBps}, {"read_alpha_us", storage.read_alpha_us}};
  if (!curves.empty()) {
    j["curves"] = json::array();
    for (const auto& c : curves) j["curves"].push_back(curve_json(c));
  }
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
  if (storage != StorageParams{}) {
    detail::hash_combine(a, bits(storage.read_bw_GBps));
    detail::hash_combine(b, bits(storage.read_alpha_us));
  }
  for (const auto& c : curves) {
    detail::hash_combine(b, static_cast<std::uint64_t>(c.collective) * 2 + (c.inter_host ? 1 : 0));
    detail::hash_combine(b, static_cast<std::uint64_t>(c.ranks));
    for (const auto& band : c.bands) {
      detail::hash_combine(a, bits(band.up_to_bytes));
      detail::hash_combine(b, bits(band.alpha_us));
      detail::hash_combine(a, bits(band.bw_GBps));
    }
  }
  return detail::mix64(a ^ detail::mix64(b));
}

}  // namespace dtensor
