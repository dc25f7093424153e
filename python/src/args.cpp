// Conversions of Python arguments shared by the binding files (bindings.hpp).
#include "bindings.hpp"

namespace dtensor::python {
namespace {

// Cost models are named ("default", "pytorch") or read from a JSON file; loading one per call is
// cheap next to planning, but the pair (name, model) is kept so repeated calls skip the file.
// Profiles loaded from files, reused while the file's size and modification time are unchanged:
// a cached plan lookup must not re-read and re-validate a JSON file on every call.
CostModel load_profile(const std::string& name_or_path) {
  if (name_or_path == "default" || name_or_path == "pytorch") return CostModel::load(name_or_path);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(name_or_path, ec)) return CostModel::load(name_or_path);  // its own error
  const auto mtime = std::filesystem::last_write_time(name_or_path, ec);
  const auto size = ec ? std::uintmax_t{0} : std::filesystem::file_size(name_or_path, ec);
  if (ec) return CostModel::load(name_or_path);
  struct Entry {
    std::filesystem::file_time_type mtime;
    std::uintmax_t size;
    CostModel model;
  };
  static std::mutex mu;
  static std::map<std::string, Entry> cache;
  {
    std::lock_guard lock(mu);
    if (auto it = cache.find(name_or_path); it != cache.end() && it->second.mtime == mtime && it->second.size == size)
      return it->second.model;
  }
  CostModel m = CostModel::load(name_or_path);
  std::lock_guard lock(mu);
  if (cache.size() >= 64) cache.clear();
  cache.insert_or_assign(name_or_path, Entry{mtime, size, m});
  return m;
}

}  // namespace

CostModel model_of(const nb::handle& cost_model) {
  if (nb::isinstance<CostModel>(cost_model)) return nb::cast<CostModel>(cost_model);
  if (nb::isinstance<nb::str>(cost_model)) return load_profile(nb::cast<std::string>(cost_model));
  // os.PathLike
  if (nb::hasattr(cost_model, "__fspath__"))
    return load_profile(nb::cast<std::string>(cost_model.attr("__fspath__")()));
  throw InputError("cost_model: expected \"default\", \"pytorch\", a profile path or a CostModel, got " +
                   nb::cast<std::string>(nb::str(cost_model.type())));
}

nb::dict stats_dict(const PlanCacheStats& s) {
  nb::dict d;
  d["hits"] = s.hits;
  d["misses"] = s.misses;
  d["evictions"] = s.evictions;
  d["size"] = s.size;
  return d;
}

PlanOptions options_of(const std::optional<std::string>& edges, std::optional<std::int64_t> max_memory,
                       bool runner_up, std::int64_t max_states) {
  PlanOptions o;
  if (edges) o.edges = parse_edge_set(*edges);
  if (max_memory) {
    if (*max_memory < 0) throw InputError("max_memory: must be >= 0 bytes, got " + std::to_string(*max_memory));
    o.max_peak_bytes = *max_memory;
  }
  o.runner_up = runner_up;
  if (max_states <= 0) throw InputError("max_states: must be > 0, got " + std::to_string(max_states));
  o.max_states = max_states;
  return o;
}

std::vector<std::int64_t> coord_arg(const Mesh& mesh, const nb::handle& where) {
  if (nb::isinstance<nb::bool_>(where) || nb::isinstance<nb::str>(where) || nb::isinstance<nb::float_>(where) ||
      (!nb::isinstance<nb::int_>(where) && !nb::isinstance<nb::sequence>(where)))
    throw nb::type_error(("rank_or_coord must be a rank (int) or a mesh coordinate (sequence of ints), not " +
                          std::string(nb::type_name(where.type()).c_str()))
                             .c_str());
  if (nb::isinstance<nb::int_>(where)) {
    std::int64_t r = 0;
    if (!nb::try_cast<std::int64_t>(where, r))
      throw InputError("rank " + std::string(nb::str(where).c_str()) + " is not on mesh " + mesh.str());
    if (r < 0 || r >= mesh.num_ranks())
      throw InputError("rank " + std::to_string(r) + " is not on mesh " + mesh.str() + " (" +
                       std::to_string(mesh.num_ranks()) + " ranks)");
    return mesh.coord_of_rank(r);
  }
  std::vector<std::int64_t> c;
  for (nb::handle x : nb::borrow<nb::sequence>(where)) {
    std::int64_t v = 0;
    if (nb::isinstance<nb::bool_>(x) || !nb::isinstance<nb::int_>(x))
      throw nb::type_error(("a mesh coordinate holds ints, not " + std::string(nb::type_name(x.type()).c_str())).c_str());
    if (!nb::try_cast<std::int64_t>(x, v))
      throw InputError("coordinate " + std::string(nb::str(x).c_str()) + " is outside mesh " + mesh.str());
    c.push_back(v);
  }
  if (static_cast<int>(c.size()) != mesh.ndim())
    throw InputError("coordinate of " + std::to_string(c.size()) + " values for a " + std::to_string(mesh.ndim()) +
                     "-d mesh " + mesh.str());
  for (int d = 0; d < mesh.ndim(); ++d)
    if (c[static_cast<std::size_t>(d)] < 0 || c[static_cast<std::size_t>(d)] >= mesh.size(d))
      throw InputError("coordinate " + std::to_string(c[static_cast<std::size_t>(d)]) + " is outside mesh dim " +
                       mesh.describe_dim(d));
  return c;
}

// A list of world ranks from Python: a sequence (not a string) of ints (not bools); None: 0..n-1.
std::vector<std::int64_t> rank_list_arg(const char* name, const nb::handle& v, std::int64_t n) {
  std::vector<std::int64_t> out;
  if (v.is_none()) {
    for (std::int64_t r = 0; r < n; ++r) out.push_back(r);
    return out;
  }
  if (nb::isinstance<nb::str>(v) || !nb::isinstance<nb::sequence>(v))
    throw nb::type_error((std::string(name) + " must be a sequence of ints, not " + nb::type_name(v.type()).c_str()).c_str());
  for (nb::handle x : nb::borrow<nb::sequence>(v)) {
    std::int64_t r = 0;
    if (nb::isinstance<nb::bool_>(x) || !nb::isinstance<nb::int_>(x))
      throw nb::type_error((std::string(name) + " holds ints, not " + nb::type_name(x.type()).c_str()).c_str());
    if (!nb::try_cast<std::int64_t>(x, r))
      throw InputError(std::string(name) + ": world rank " + nb::str(x).c_str() + " is out of range");
    out.push_back(r);
  }
  return out;
}

std::vector<std::pair<std::int64_t, std::int64_t>> runs_of(const IndexSet& s) {
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  out.reserve(s.runs().size());
  for (const auto& r : s.runs()) out.emplace_back(r.start, r.stop);
  return out;
}

std::vector<std::pair<int, std::string>> ignored_of(const std::vector<tune::IgnoredRow>& rows) {
  std::vector<std::pair<int, std::string>> out;
  for (const auto& r : rows) out.emplace_back(r.line, r.reason);
  return out;
}


// A Communicator whose collectives are Python calls (dtensor.torch runs them as torch.distributed
// collectives). Addresses travel as integers; the Python side maps them back into the buffers it
// handed to execute(). Local copies run here on host memory when `host` is true (CPU tensors),

}  // namespace dtensor::python
