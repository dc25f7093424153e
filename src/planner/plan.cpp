#include "dtensor/plan.hpp"

#include <cmath>
#include <nlohmann/json.hpp>

#include "placement/hash.hpp"
#include "placement/json_fields.hpp"
#include "dtensor/error.hpp"
#include "dtensor/planner.hpp"

namespace dtensor {
namespace {
constexpr std::int64_t kPlanJsonVersion = 2;
using nlohmann::json;
using ordered = nlohmann::ordered_json;

constexpr StepKind kKinds[] = {StepKind::all_gather, StepKind::reduce_scatter, StepKind::all_reduce,
                               StepKind::all_to_all, StepKind::local_chunk,    StepKind::local_fill,
                               StepKind::direct,     StepKind::relabel};

bool flattened(const Step& s) {
  return s.mesh_dims.size() >= 2 && (s.kind == StepKind::all_gather || s.kind == StepKind::reduce_scatter ||
                                     s.kind == StepKind::all_reduce);
}

ordered step_json(const Step& s, bool with_buffers = true) {
  ordered j;
  j["kind"] = std::string(to_string(s.kind));
  j["mesh_dims"] = s.mesh_dims;
  j["tensor_dims"] = s.tensor_dims;
  j["from"] = s.from.str();
  j["to"] = s.to.str();
  j["bytes_sent"] = s.bytes_sent;
  j["bytes_received"] = s.bytes_received;
  j["padding_bytes"] = s.padding_bytes;
  j["copy_bytes"] = s.copy_bytes;
  j["cost_us"] = s.cost_us;
  j["alpha_us"] = s.alpha_us;
  j["wire_us"] = s.wire_us;
  j["copy_us"] = s.copy_us;
  j["peers"] = s.peers;
  j["inter_host"] = s.inter_host;
  j["peak_bytes"] = s.peak_bytes;
  j["why"] = s.why;
  if (!with_buffers) return j;  // runner-up steps are never lowered
  const StepBuffers& b = s.buffers;
  j["buffers"] = ordered{{"chunk", b.chunk},           {"zero_copy", b.zero_copy},     {"pad_send", b.pad_send},
                         {"from_offset", b.from_offset}, {"to_offset", b.to_offset},     {"send_offset", b.send_offset},
                         {"send_elems", b.send_elems},   {"recv_offset", b.recv_offset}, {"recv_elems", b.recv_elems}};
  return j;
}

using detail::json_quote;  // one JSON reader's checks for layouts, plans and profiles

const json& field(const json& j, const char* key) {
  if (!j.is_object()) throw InputError(fmt::format("plan JSON: expected an object holding '{}', got {}", key, json_quote(j)));
  auto it = j.find(key);
  if (it == j.end()) throw InputError(fmt::format("plan JSON lacks the field '{}'", key));
  return *it;
}

template <typename T>
T get_field(const json& j, const char* key, std::int64_t lo = 0, std::int64_t hi = INT64_MAX) {
  const json& v = field(j, key);
  if constexpr (std::is_same_v<T, std::int64_t> || std::is_same_v<T, int>) {
    return static_cast<T>(detail::json_int(v, key, lo, hi));
  } else if constexpr (std::is_same_v<T, std::vector<std::int64_t>> || std::is_same_v<T, std::vector<int>>) {
    if (!v.is_array()) throw InputError(fmt::format("plan JSON field '{}' must be an array, not {}", key, json_quote(v)));
    T out;
    for (const auto& x : v) out.push_back(static_cast<typename T::value_type>(detail::json_int(x, key, lo, hi)));
    return out;
  } else if constexpr (std::is_same_v<T, double>) {
    if (!v.is_number()) throw InputError(fmt::format("plan JSON field '{}' must be a number, not {}", key, json_quote(v)));
    const double x = v.get<double>();
    if (!std::isfinite(x)) throw InputError(fmt::format("plan JSON field '{}' is not finite", key));
    return x;
  } else {
    try {
      return v.get<T>();
    } catch (const json::exception&) {
      throw InputError(fmt::format("plan JSON field '{}' has the wrong type: {}", key, json_quote(v)));
    }
  }
}

StepBuffers buffers_of(const json& j) {
  StepBuffers b;
  b.chunk = get_field<std::int64_t>(j, "chunk");
  b.zero_copy = get_field<bool>(j, "zero_copy");
  b.pad_send = get_field<bool>(j, "pad_send");
  b.from_offset = get_field<std::int64_t>(j, "from_offset", -1);
  b.to_offset = get_field<std::int64_t>(j, "to_offset", -1);
  b.send_offset = get_field<std::int64_t>(j, "send_offset");
  b.send_elems = get_field<std::int64_t>(j, "send_elems");
  b.recv_offset = get_field<std::int64_t>(j, "recv_offset");
  b.recv_elems = get_field<std::int64_t>(j, "recv_elems");
  return b;
}

// `runner_up`: a runner-up's step, which carries no buffer records (to_json writes none).
Step step_of(const json& j, int mesh_ndim, int tensor_ndim, bool runner_up = false) {
  Step s;
  s.kind = parse_step_kind(get_field<std::string>(j, "kind"));
  s.mesh_dims = get_field<std::vector<int>>(j, "mesh_dims", 0, mesh_ndim - 1);
  s.tensor_dims = get_field<std::vector<int>>(j, "tensor_dims", 0, tensor_ndim - 1);
  s.from = Sharding::parse(get_field<std::string>(j, "from"), mesh_ndim, tensor_ndim);
  s.to = Sharding::parse(get_field<std::string>(j, "to"), mesh_ndim, tensor_ndim);
  s.bytes_sent = get_field<std::int64_t>(j, "bytes_sent");
  s.bytes_received = get_field<std::int64_t>(j, "bytes_received");
  s.padding_bytes = get_field<std::int64_t>(j, "padding_bytes");
  s.copy_bytes = get_field<std::int64_t>(j, "copy_bytes");
  s.cost_us = get_field<double>(j, "cost_us");
  s.alpha_us = get_field<double>(j, "alpha_us");
  s.wire_us = get_field<double>(j, "wire_us");
  s.copy_us = get_field<double>(j, "copy_us");
  s.peers = get_field<std::int64_t>(j, "peers");
  if (j.contains("buffers")) {
    if (runner_up)  // (kept, it would be dropped again when the plan is written: refused instead)
      throw InputError("plan JSON runner_up step has 'buffers': only the plan's own steps carry buffer records");
    s.buffers = buffers_of(field(j, "buffers"));
  }
  s.inter_host = get_field<bool>(j, "inter_host");
  s.peak_bytes = get_field<std::int64_t>(j, "peak_bytes");
  s.why = get_field<std::string>(j, "why");
  for (int m : s.mesh_dims)
    if (m < 0 || m >= mesh_ndim) throw InputError(fmt::format("plan JSON step names mesh dim {}, out of range", m));
  return s;
}
}  // namespace

std::string_view to_string(StepKind k) noexcept {
  switch (k) {
    case StepKind::all_gather: return "all_gather";
    case StepKind::reduce_scatter: return "reduce_scatter";
    case StepKind::all_reduce: return "all_reduce";
    case StepKind::all_to_all: return "all_to_all";
    case StepKind::local_chunk: return "local_chunk";
    case StepKind::local_fill: return "local_fill";
    case StepKind::direct: return "direct";
    case StepKind::relabel: return "relabel";
  }
  return "?";
}

StepKind parse_step_kind(std::string_view text) {
  for (auto k : kKinds)
    if (to_string(k) == text) return k;
  throw InputError(fmt::format("unknown step kind '{}'", text));
}

std::optional<Collective> collective_of(StepKind k) noexcept {
  switch (k) {
    case StepKind::all_gather: return Collective::all_gather;
    case StepKind::reduce_scatter: return Collective::reduce_scatter;
    case StepKind::all_reduce: return Collective::all_reduce;
    case StepKind::all_to_all: return Collective::all_to_all;
    case StepKind::direct: return Collective::send_recv;
    default: return std::nullopt;
  }
}

bool is_communication(StepKind k) noexcept {
  return k != StepKind::local_chunk && k != StepKind::local_fill && k != StepKind::relabel;
}

std::string_view to_string(EdgeSet e) noexcept { return e == EdgeSet::all ? "all" : "pytorch"; }

EdgeSet parse_edge_set(std::string_view text) {
  if (text == "all") return EdgeSet::all;
  if (text == "pytorch") return EdgeSet::pytorch;
  throw InputError(fmt::format("unknown edge set '{}' (expected all or pytorch)", text));
}

std::string trace_of(const Sharding& src, const std::vector<Step>& steps) {
  std::string t = src.str();
  for (const auto& s : steps) t += (flattened(s) ? "-->" : "->") + s.to.str();
  return t;
}

std::string Plan::trace() const { return trace_of(src.sharding(), steps); }

std::uint64_t Plan::hash() const {
  std::string canon = fmt::format("{}|{}|{}|{}|{}|{}|{}", mesh().str(), fmt::join(mesh().ranks(), ","),
                                  fmt::join(shape(), ","), to_string(dtype()), src.placements_str(),
                                  dst.placements_str(), cost_model);
  canon += fmt::format("|{}", to_string(edges));
  for (const auto& s : steps)
    canon += fmt::format(";{}:{}:{}:{}:{}", to_string(s.kind), fmt::join(s.mesh_dims, ","), fmt::join(s.tensor_dims, ","),
                         s.to.str(), std::llround(s.cost_us * 1e6));
  return detail::fnv1a(canon.data(), canon.size());
}

std::string Plan::to_json(int indent) const {
  ordered j;
  j["version"] = kPlanJsonVersion;
  detail::write_mesh_fields(j, mesh());
  j["shape"] = shape();
  j["dtype"] = std::string(to_string(dtype()));
  j["from"] = src.placements_str();
  j["to"] = dst.placements_str();
  j["cost_model"] = cost_model;
  j["edges"] = std::string(to_string(edges));
  j["total_cost_us"] = total_cost_us;
  j["peak_bytes"] = peak_bytes;
  j["trace"] = trace();
  j["plan_hash"] = fmt::format("{:016x}", hash());
  j["steps"] = ordered::array();
  for (const auto& s : steps) j["steps"].push_back(step_json(s));
  if (runner_up) {
    ordered r;
    r["total_cost_us"] = runner_up->total_cost_us;
    r["trace"] = runner_up->trace;
    r["steps"] = ordered::array();
    for (const auto& s : runner_up->steps) r["steps"].push_back(step_json(s, false));
    j["runner_up"] = r;
  } else {
    j["runner_up"] = nullptr;
  }
  return j.dump(indent);
}

Plan Plan::from_json(std::string_view text) {
  const json j = detail::parse_json(text, "plan");
  if (!j.is_object()) throw InputError("plan JSON must be an object");
  Plan p;
  const std::int64_t version = j.contains("version") ? get_field<std::int64_t>(j, "version") : 1;
  if (version != 1 && version != kPlanJsonVersion)
    throw InputError(fmt::format("plan JSON version {} is not supported (this library reads 1 and {})", version,
                                 kPlanJsonVersion));
  const Mesh mesh = detail::read_mesh_fields(j, "plan");
  const auto shape = detail::read_shape_field(j, "plan");
  const DType dtype = parse_dtype(get_field<std::string>(j, "dtype"));
  const int md = mesh.ndim(), td = static_cast<int>(shape.size());
  p.src = Layout::parse(mesh, shape, dtype, get_field<std::string>(j, "from"));
  p.dst = Layout::parse(mesh, shape, dtype, get_field<std::string>(j, "to"));
  p.cost_model = get_field<std::string>(j, "cost_model");
  p.edges = parse_edge_set(get_field<std::string>(j, "edges"));
  p.total_cost_us = get_field<double>(j, "total_cost_us");
  p.peak_bytes = get_field<std::int64_t>(j, "peak_bytes");
  const auto steps = j.find("steps");
  if (steps == j.end() || !steps->is_array()) throw InputError("plan JSON needs a 'steps' array");
  for (const auto& s : *steps) p.steps.push_back(step_of(s, md, td));
  check_chain(p);  // before the lowering below reads the states
  if (version < 2)  // version 1 carried no buffer records: rebuild them (the same function the planner runs)
    lower_buffers(p);
  if (auto r = j.find("runner_up"); r != j.end() && !r->is_null()) {
    RunnerUp ru;
    ru.total_cost_us = get_field<double>(*r, "total_cost_us");
    ru.trace = get_field<std::string>(*r, "trace");
    if (auto rs = r->find("steps"); rs != r->end())
      for (const auto& s : *rs) ru.steps.push_back(step_of(s, md, td, true));
    p.runner_up = std::move(ru);
  }
  // The plan as a whole must be one the planner produces (steps, groups, buffer records), its
  // peak_bytes exactly what the steps need (a plan read and stored again keeps no inflated figure).
  validate_plan(p);
  return p;
}

}  // namespace dtensor
