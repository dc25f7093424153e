// The Python extension module `dtensor._core` (nanobind). Thin: every function forwards to the C++
// library and the library's errors become Python exceptions (InputError -> ValueError,
// BackendError -> dtensor.BackendError, a RuntimeError). Planning and executing release the GIL.
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <map>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "dtensor/batch_executor.hpp"
#include "dtensor/comm.hpp"
#include "dtensor/cost_model.hpp"
#include "dtensor/cross_mesh_executor.hpp"
#include "dtensor/error.hpp"
#include "dtensor/executor.hpp"
#include "dtensor/layout.hpp"
#include "dtensor/plan.hpp"
#include "dtensor/plan_cache.hpp"
#include "dtensor/planner.hpp"
#include "dtensor/simulated.hpp"
#include "dtensor/simulate.hpp"
#include "dtensor/tune.hpp"

namespace nb = nanobind;
using namespace nb::literals;

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
// else through Python too (device tensors).
class PyCommunicator final : public Communicator {
 public:
  PyCommunicator(Mesh mesh, std::int64_t rank, nb::object impl, bool host)
      : mesh_(std::move(mesh)), rank_(rank), impl_(std::move(impl)), host_(host) {
    if (rank_ < 0 || rank_ >= mesh_.num_ranks())
      throw InputError("rank " + std::to_string(rank_) + " is not on mesh " + mesh_.str());
  }
  ~PyCommunicator() override {
    nb::gil_scoped_acquire gil;
    impl_.reset();
  }
  [[nodiscard]] const Mesh& mesh() const override { return mesh_; }
  [[nodiscard]] std::int64_t rank() const override { return rank_; }
  [[nodiscard]] bool supports(Collective c, DType dtype, ReduceOp op) const override {
    nb::gil_scoped_acquire gil;
    return nb::cast<bool>(impl_.attr("supports")(to_string(c), to_string(dtype), to_string(op)));
  }
  [[nodiscard]] std::vector<std::uint64_t> exchange(std::uint64_t value) override {
    nb::gil_scoped_acquire gil;
    // as a signed 64-bit value (torch has no uint64 collectives); the bits are kept
    const auto out = nb::cast<std::vector<std::int64_t>>(impl_.attr("exchange")(static_cast<std::int64_t>(value)));
    if (static_cast<std::int64_t>(out.size()) != mesh_.num_ranks())
      throw BackendError("exchange: " + std::to_string(out.size()) + " values for " +
                         std::to_string(mesh_.num_ranks()) + " ranks");
    return {out.begin(), out.end()};
  }
  void prepare(std::span<const Group> groups) override {
    nb::gil_scoped_acquire gil;
    std::vector<std::vector<int>> dims;
    for (const Group& g : groups) dims.push_back(g.mesh_dims);
    impl_.attr("prepare")(dims);
  }
  void all_gather(const Group& g, const void* send, void* recv, std::int64_t count, DType dtype) override {
    nb::gil_scoped_acquire gil;
    impl_.attr("all_gather")(g.mesh_dims, addr(send), addr(recv), count, to_string(dtype));
  }
  void reduce_scatter(const Group& g, const void* send, void* recv, std::int64_t count, DType dtype,
                      ReduceOp op) override {
    nb::gil_scoped_acquire gil;
    impl_.attr("reduce_scatter")(g.mesh_dims, addr(send), addr(recv), count, to_string(dtype), to_string(op));
  }
  void all_reduce(const Group& g, const void* send, void* recv, std::int64_t count, DType dtype,
                  ReduceOp op) override {
    nb::gil_scoped_acquire gil;
    impl_.attr("all_reduce")(g.mesh_dims, addr(send), addr(recv), count, to_string(dtype), to_string(op));
  }
  void all_to_all(const Group& g, const void* send, void* recv, std::int64_t count, DType dtype) override {
    nb::gil_scoped_acquire gil;
    impl_.attr("all_to_all")(g.mesh_dims, addr(send), addr(recv), count, to_string(dtype));
  }
  void send_recv(std::span<const Transfer> sends, std::span<const Transfer> recvs, DType dtype) override {
    nb::gil_scoped_acquire gil;
    auto list = [](std::span<const Transfer> ts) {
      std::vector<std::tuple<std::int64_t, std::uintptr_t, std::int64_t>> out;
      for (const auto& t : ts) out.emplace_back(t.peer, addr(t.buffer), t.count);
      return out;
    };
    impl_.attr("send_recv")(list(sends), list(recvs), to_string(dtype));
  }
  void synchronize() override {
    nb::gil_scoped_acquire gil;
    impl_.attr("synchronize")();
  }
  // CPU tensors: host memory; device tensors: the Python side's copies (torch ops on its stream).
  Memory& memory() override { return host_ ? host_memory() : device_; }

 private:
  static std::uintptr_t addr(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }
  Mesh mesh_;
  std::int64_t rank_;
  nb::object impl_;
  bool host_;
  // The executor's local operations as Python calls; storage and reductions are torch's.
  class PyMemory final : public Memory {
   public:
    explicit PyMemory(const nb::object& impl) : impl_(impl) {}
    void* allocate(std::size_t) override { throw InputError("dtensor.torch allocates its buffers as torch tensors"); }
    void release(void*) noexcept override {}
    void upload(void*, const void*, std::size_t) override { throw InputError("dtensor.torch moves data with torch"); }
    void download(void*, const void*, std::size_t) override { throw InputError("dtensor.torch moves data with torch"); }
    void wait() override {}
    bool supports(Collective c, DType, ReduceOp) const override { return !reduces(c); }
    void reduce(DType, ReduceOp, void*, std::span<const void* const>, std::int64_t) override {
      throw InputError("dtensor.torch reduces through torch.distributed collectives, not locally");
    }
    void copy(void* dst, const void* src, std::int64_t bytes) override {
      nb::gil_scoped_acquire gil;
      impl_.attr("copy")(addr(dst), addr(src), bytes);
    }
    void fill(void* dst, DType dtype, std::int64_t count, double value) override {
      nb::gil_scoped_acquire gil;
      impl_.attr("fill")(addr(dst), to_string(dtype), count, value);
    }
    void copy_strided(void* dst, const void* src, std::int64_t run_bytes, std::span<const std::int64_t> count,
                      std::span<const std::int64_t> dst_stride, std::span<const std::int64_t> src_stride) override {
      nb::gil_scoped_acquire gil;
      using V = std::vector<std::int64_t>;
      impl_.attr("copy_strided")(addr(dst), addr(src), run_bytes, V(count.begin(), count.end()),
                                 V(dst_stride.begin(), dst_stride.end()), V(src_stride.begin(), src_stride.end()));
    }

   private:
    const nb::object& impl_;
  };
  PyMemory device_{impl_};
};

std::span<std::byte> span_at(std::uintptr_t address, std::int64_t bytes, const char* what) {
  if (bytes < 0) throw InputError(std::string(what) + ": negative size " + std::to_string(bytes));
  if (bytes > 0 && address == 0) throw InputError(std::string(what) + ": null address for " + std::to_string(bytes) + " bytes");
  return {reinterpret_cast<std::byte*>(address), static_cast<std::size_t>(bytes)};
}

}  // namespace
}  // namespace dtensor::python

NB_MODULE(_core, m) {
  using namespace dtensor;
  using namespace dtensor::python;
  m.doc() = "dtensor's C++ core: layouts, the redistribution planner, its cost model and executor.";

  static nb::exception<BackendError> backend_error(m, "BackendError", PyExc_RuntimeError);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    // messages decoded leniently: a byte that is not UTF-8 becomes U+FFFD, never a UnicodeDecodeError
    auto set = [](PyObject* type, const char* what) {
      PyObject* msg = PyUnicode_DecodeUTF8(what, static_cast<Py_ssize_t>(std::strlen(what)), "replace");
      PyErr_SetObject(type, msg);
      Py_XDECREF(msg);
    };
    try {
      std::rethrow_exception(p);
    } catch (const InputError& e) {
      set(PyExc_ValueError, e.what());
    } catch (const BackendError& e) {
      set(backend_error.ptr(), e.what());
    } catch (const Error& e) {
      set(PyExc_RuntimeError, e.what());
    } catch (const nb::cast_error&) {
      set(PyExc_TypeError, "an argument has the wrong type (expected an int, a sequence of ints or a str as documented)");
    }
  });

  // ---- placements ----
  nb::class_<Placement>(m, "Placement", "The placement of a tensor on one mesh dim.")
      .def_static("shard", &Placement::Shard, "dim"_a, "Shard(dim)")
      .def_static("strided_shard", &Placement::StridedShard, "dim"_a, "split_factor"_a, "_StridedShard(dim, split_factor)")
      .def_static("replicate", &Placement::Replicate, "Replicate()")
      .def_static("partial", [](const std::string& op) { return Placement::Partial(parse_reduce_op(op)); },
                  "reduce_op"_a = "sum", "Partial(reduce_op): sum, avg, max, min or product")
      .def_prop_ro("kind", [](const Placement& p) -> std::string {
        switch (p.kind()) {
          case Placement::Kind::replicate: return "replicate";
          case Placement::Kind::shard: return "shard";
          case Placement::Kind::strided_shard: return "strided_shard";
          case Placement::Kind::partial: return "partial";
        }
        return "";
      }, "\"shard\", \"strided_shard\", \"replicate\" or \"partial\"")
      .def_prop_ro("dim", &Placement::dim, "The tensor dim of a shard (0 otherwise)")
      .def_prop_ro("split_factor", &Placement::split_factor)
      .def_prop_ro("reduce_op", [](const Placement& p) { return std::string(to_string(p.op())); })
      .def("__str__", &Placement::str)
      .def("__repr__", [](const Placement& p) { return "Placement(" + p.str() + ")"; })
      .def("__eq__", [](const Placement& a, const Placement& b) { return a == b; })
      .def("__hash__", [](const Placement& p) { return hash_value(p); });

  // ---- mesh ----
  nb::class_<Mesh>(m, "Mesh", "An n-d grid of ranks: Mesh(\"dp=2,tp=4\"), Mesh([2, 4], names=[\"dp\", \"tp\"]).")
      .def("__init__", [](Mesh* self, const std::string& text) { new (self) Mesh(Mesh::parse(text)); }, "text"_a)
      .def(nb::init<std::vector<std::int64_t>, std::vector<std::string>, std::vector<std::int64_t>>(), "shape"_a,
           "names"_a = std::vector<std::string>{}, "ranks"_a = std::vector<std::int64_t>{},
           "An explicit rank list (a permutation of 0..N-1 in row-major coordinate order) is optional.")
      .def_prop_ro("shape", &Mesh::shape)
      .def_prop_ro("names", &Mesh::names)
      .def_prop_ro("ranks", [](const Mesh& mesh) {
        std::vector<std::int64_t> out;
        for (std::int64_t p = 0; p < mesh.num_ranks(); ++p) out.push_back(mesh.rank_at(mesh.coord_at(p)));
        return out;
      }, "Every rank id in row-major coordinate order")
      .def_prop_ro("ndim", &Mesh::ndim)
      .def_prop_ro("num_ranks", &Mesh::num_ranks)
      .def("coord_of", &Mesh::coord_of_rank, "rank"_a)
      .def("rank_at", [](const Mesh& mesh, const std::vector<std::int64_t>& c) { return mesh.rank_at(c); }, "coord"_a)
      .def("to_json", [](const Mesh& mesh) { return to_json(mesh); })
      .def_static("from_json", [](const std::string& s) { return mesh_from_json(s); }, "json"_a)
      .def("__str__", &Mesh::str)
      .def("__repr__", [](const Mesh& mesh) { return "Mesh(\"" + mesh.str() + "\")"; })
      .def("__eq__", [](const Mesh& a, const Mesh& b) { return a == b; })
      .def("__hash__", [](const Mesh& mesh) { return hash_value(mesh); });

  // ---- layout ----
  nb::class_<Layout>(m, "Layout", "A distributed tensor's layout: mesh, global shape, dtype and placements.")
      .def("__init__",
           [](Layout* self, const Mesh& mesh, const std::vector<std::int64_t>& shape, const std::string& placements,
              const std::string& dtype) { new (self) Layout(Layout::parse(mesh, shape, parse_dtype(dtype), placements)); },
           "mesh"_a, "shape"_a, "placements"_a, "dtype"_a = "f32",
           "placements in the placement text, e.g. \"S(0)[1]S(0)[0]\", \"_S(0, 3)R\", \"P(sum)S(1)\"")
      .def_static("parse", [](const std::string& text) { return Layout::parse(text); }, "text"_a,
                  "The whole text form: \"dp=2,tp=4 1000x512 bf16 S(0)[1]S(0)[0]\"")
      .def_static("from_placements",
                  [](const Mesh& mesh, const std::vector<std::int64_t>& shape, const std::vector<Placement>& placements,
                     const std::string& dtype, const std::optional<std::vector<std::pair<std::int64_t, std::vector<int>>>>& shard_order) {
                    std::vector<Layout::ShardOrderEntry> order;
                    if (shard_order)
                      for (const auto& [d, ms] : *shard_order) order.push_back({d, ms});
                    return Layout::from_torch(mesh, shape, parse_dtype(dtype), placements, order);
                  },
                  "mesh"_a, "shape"_a, "placements"_a, "dtype"_a = "f32", "shard_order"_a = nb::none(),
                  "PyTorch's form: one Placement per mesh dim and an optional shard order, a list of "
                  "(tensor_dim, mesh_dims) with each tensor dim's mesh dims in split order.")
      .def_prop_ro("mesh", &Layout::mesh)
      .def_prop_ro("shape", &Layout::shape)
      .def_prop_ro("dtype", [](const Layout& l) { return std::string(to_string(l.dtype())); })
      .def_prop_ro("ndim", &Layout::ndim)
      .def_prop_ro("numel", &Layout::numel)
      .def_prop_ro("placements", &Layout::placements)
      .def_prop_ro("placements_str", &Layout::placements_str)
      .def_prop_ro("shard_order", [](const Layout& l) {
        std::vector<std::pair<std::int64_t, std::vector<int>>> out;
        for (const auto& e : l.torch_shard_order()) out.emplace_back(e.tensor_dim, e.mesh_dims);
        return out;
      }, "(tensor_dim, mesh_dims) for every sharded tensor dim, mesh dims in split order")
      .def("local_shape", [](const Layout& l, const nb::handle& where) { return l.local_shape(coord_arg(l.mesh(), where)); },
           "rank_or_coord"_a)
      .def("global_offset", [](const Layout& l, const nb::handle& where) { return l.global_offset(coord_arg(l.mesh(), where)); },
           "rank_or_coord"_a, "First owned index per dim; an empty shard reports the dim's size (as PyTorch)")
      .def("local_numel", [](const Layout& l, const nb::handle& where) { return l.local_numel(coord_arg(l.mesh(), where)); },
           "rank_or_coord"_a)
      .def("owned_runs", [](const Layout& l, const nb::handle& where) {
        std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>> out;
        for (const auto& s : l.indices(coord_arg(l.mesh(), where))) out.push_back(runs_of(s));
        return out;
      }, "rank_or_coord"_a, "Per tensor dim, the owned global indices as [start, stop) runs in local order")
      .def("to_json", [](const Layout& l) { return to_json(l); })
      .def_static("from_json", [](const std::string& s) { return layout_from_json(s); }, "json"_a)
      .def("__str__", &Layout::str)
      .def("__repr__", [](const Layout& l) { return "Layout.parse(\"" + l.str() + "\")"; })
      .def("__eq__", [](const Layout& a, const Layout& b) { return a == b; })
      .def("__hash__", [](const Layout& l) { return hash_value(l); });
  m.def("equivalent", [](const Layout& a, const Layout& b) { return equivalent(a, b); }, "a"_a, "b"_a,
        "Whether every rank holds the same data under both layouts");

  // ---- cost model ----
  nb::class_<CostModel>(m, "CostModel", "The planner's cost model (a profile).")
      .def_static("load", [](const std::string& s) { return CostModel::load(s); }, "name_or_path"_a,
                  "\"default\", \"pytorch\" or a JSON profile's path")
      .def_static("from_json", [](const std::string& s) { return CostModel::from_json(s); }, "json"_a)
      .def("to_json", &CostModel::to_json)
      .def_prop_ro("name", [](const CostModel& c) { return c.name; })
      .def_prop_ro("devices_per_host", [](const CostModel& c) { return c.devices_per_host; })
      .def_prop_ro("fingerprint", &CostModel::fingerprint)
      .def("predict_us",
           [](const CostModel& c, const std::string& collective, std::int64_t ranks, std::int64_t bytes, bool inter_host) {
             const auto k = parse_collective(collective);
             if (!k) throw InputError("unknown collective \"" + collective + "\" (all_gather, reduce_scatter, all_reduce, alltoall, sendrecv)");
             if (ranks < 1) throw InputError("ranks: must be >= 1, got " + std::to_string(ranks));
             if (bytes < 0) throw InputError("bytes: must be >= 0, got " + std::to_string(bytes));
             return predict_collective_us(c, *k, ranks, inter_host, static_cast<double>(bytes));
           },
           "collective"_a, "ranks"_a, "bytes"_a, "inter_host"_a = false,
           "What the planner charges one collective (nccl-tests size in bytes), as `dtensor tune predict`")
      .def("__eq__", [](const CostModel& a, const CostModel& b) { return a == b; })
      .def("__repr__", [](const CostModel& c) { return "CostModel(\"" + c.name + "\")"; });

  // ---- plans ----
  nb::class_<Step>(m, "Step", "One step of a plan.")
      .def_prop_ro("kind", [](const Step& s) { return std::string(to_string(s.kind)); })
      .def_ro("mesh_dims", &Step::mesh_dims)
      .def_ro("tensor_dims", &Step::tensor_dims)
      .def_prop_ro("src", [](const Step& s) { return s.from.str(); }, "placements before the step")
      .def_prop_ro("dst", [](const Step& s) { return s.to.str(); }, "placements after the step")
      .def_ro("bytes_sent", &Step::bytes_sent)
      .def_ro("bytes_received", &Step::bytes_received)
      .def_ro("padding_bytes", &Step::padding_bytes)
      .def_ro("copy_bytes", &Step::copy_bytes)
      .def_ro("peak_bytes", &Step::peak_bytes)
      .def_ro("peers", &Step::peers)
      .def_ro("inter_host", &Step::inter_host)
      .def_ro("alpha_us", &Step::alpha_us)
      .def_ro("wire_us", &Step::wire_us)
      .def_ro("copy_us", &Step::copy_us)
      .def_ro("cost_us", &Step::cost_us)
      .def_ro("why", &Step::why)
      .def("__repr__", [](const Step& s) {
        return "Step(" + std::string(to_string(s.kind)) + ", " + s.from.str() + " -> " + s.to.str() + ")";
      });

  nb::class_<Plan>(m, "Plan", "An optimal redistribution plan.")
      .def_ro("src", &Plan::src)
      .def_ro("dst", &Plan::dst)
      .def_ro("cost_model", &Plan::cost_model)
      .def_prop_ro("edges", [](const Plan& p) { return std::string(to_string(p.edges)); })
      .def_ro("steps", &Plan::steps)
      .def_ro("total_cost_us", &Plan::total_cost_us)
      .def_ro("peak_bytes", &Plan::peak_bytes, "The workspace the executor needs (bytes)")
      .def_prop_ro("trace", &Plan::trace)
      .def_prop_ro("hash", &Plan::hash, "Stable across processes: equal on every rank for the same request")
      .def_prop_ro("runner_up_cost_us", [](const Plan& p) -> std::optional<double> {
        if (!p.runner_up) return std::nullopt;
        return p.runner_up->total_cost_us;
      })
      .def_prop_ro("runner_up_trace", [](const Plan& p) { return runner_up_trace(p); })
      .def("explain", [](const Plan& p) { return explain(p); })
      .def("to_json", &Plan::to_json, "indent"_a = -1)
      .def_static("from_json", [](const std::string& s) { return Plan::from_json(s); }, "json"_a)
      .def("__eq__", [](const Plan& a, const Plan& b) { return a == b; })
      .def("__repr__", [](const Plan& p) {
        return "Plan(" + p.trace() + ", " + fmt::format("{:.3f}", p.total_cost_us) + " us)";
      });

  m.def("plan",
        [](const Layout& src, const Layout& dst, const nb::handle& cost_model, const std::optional<std::string>& edges,
           std::optional<std::int64_t> max_memory, bool runner_up, std::int64_t max_states) {
          const CostModel cost = model_of(cost_model);
          const PlanOptions o = options_of(edges, max_memory, runner_up, max_states);
          nb::gil_scoped_release release;
          return plan_redistribution(src, dst, cost, o);
        },
        "src"_a, "dst"_a, "cost_model"_a = "default", "edges"_a = nb::none(), "max_memory"_a = nb::none(),
        "runner_up"_a = true, "max_states"_a = kDefaultMaxStates,
        "The cheapest plan from src to dst (same mesh, shape, dtype). edges: \"all\" or \"pytorch\" "
        "(default: the cost model's own); max_memory: a bound on any step's transient peak, bytes.");

  // ---- batches (docs/batch.md) ----
  nb::class_<BatchStage>(m, "BatchStage", "One stage of a batch plan: a step of each member tensor.")
      .def_prop_ro("kind", [](const BatchStage& s) { return std::string(to_string(s.kind)); })
      .def_ro("mesh_dims", &BatchStage::mesh_dims)
      .def_prop_ro("members", [](const BatchStage& s) {
        std::vector<std::pair<std::int32_t, std::int32_t>> out;
        for (const auto& m : s.members) out.emplace_back(m.tensor, m.step);
        return out;
      }, "(tensor, step) pairs")
      .def_ro("coalesced", &BatchStage::coalesced, "One collective over the members' concatenated chunks")
      .def_ro("grouped", &BatchStage::grouped, "The members' own collectives launched as one group (no packing)")
      .def_ro("cost_us", &BatchStage::cost_us);
  nb::class_<BatchPlan>(m, "BatchPlan", "Many tensors' plans on one mesh, scheduled into stages.")
      .def_prop_ro("plans",
                   [](const BatchPlan& b) {
                     std::vector<Plan> out;
                     out.reserve(b.size());
                     for (std::size_t t = 0; t < b.size(); ++t) out.push_back(b.plan(t));
                     return out;
                   },
                   "Per tensor, its plan (copies; the batch keeps each distinct plan once)")
      .def_ro("stages", &BatchPlan::stages)
      .def_ro("total_cost_us", &BatchPlan::total_cost_us)
      .def_ro("separate_cost_us", &BatchPlan::separate_cost_us, "The plans run one after another")
      .def_ro("cost_model", &BatchPlan::cost_model)
      .def_prop_ro("collectives", &BatchPlan::collectives)
      .def_prop_ro("separate_collectives", &BatchPlan::separate_collectives)
      .def_prop_ro("staging_bytes", &BatchPlan::staging_bytes)
      .def_prop_ro("hash", &BatchPlan::hash, "Stable across processes: equal on every rank for the same request")
      .def("explain", [](const BatchPlan& b) { return explain(b); })
      .def("to_json", &BatchPlan::to_json, "indent"_a = -1)
      .def_static("from_json", [](const std::string& s) { return BatchPlan::from_json(s); }, "json"_a)
      .def("__eq__", [](const BatchPlan& a, const BatchPlan& b) { return a == b; })
      .def("__len__", [](const BatchPlan& b) { return b.size(); })
      .def("__repr__", [](const BatchPlan& b) {
        return fmt::format("BatchPlan({} tensors, {} stages, {} collectives against {}, {:.3f} us)", b.size(),
                           b.stages.size(), b.collectives(), b.separate_collectives(), b.total_cost_us);
      });
  m.def("plan_batch",
        [](const std::vector<std::pair<Layout, Layout>>& pairs, const nb::handle& cost_model, const std::optional<std::string>& edges,
           std::optional<std::int64_t> max_memory, bool runner_up, std::int64_t max_states) {
          const CostModel cost = model_of(cost_model);
          const PlanOptions o = options_of(edges, max_memory, runner_up, max_states);
          nb::gil_scoped_release release;
          return plan_batch(pairs, cost, o);
        },
        "pairs"_a, "cost_model"_a = "default", "edges"_a = nb::none(), "max_memory"_a = nb::none(), "runner_up"_a = true,
        "max_states"_a = kDefaultMaxStates,
        "Plans a list of (src, dst) layout pairs on one mesh together: each tensor on its own optimal plan, the steps "
        "scheduled into stages, small tensors' collectives coalesced where the cost model says it pays (docs/batch.md).");
  nb::class_<BatchPlanCache>(m, "BatchPlanCache", "A bounded, thread-safe LRU of batch plans keyed by every pair.")
      .def(nb::init<std::size_t>(), "capacity"_a = 256)
      .def("get",
           [](BatchPlanCache& cache, const std::vector<std::pair<Layout, Layout>>& pairs, const nb::handle& cost_model,
              const std::optional<std::string>& edges, std::optional<std::int64_t> max_memory) {
             const CostModel cost = model_of(cost_model);
             const PlanOptions o = options_of(edges, max_memory, true, PlanOptions{}.max_states);
             nb::gil_scoped_release release;
             return cache.get_or_plan(pairs, cost, o);
           },
           "pairs"_a, "cost_model"_a = "default", "edges"_a = nb::none(), "max_memory"_a = nb::none(),
           "The cached batch plan of these (src, dst) pairs, planned on a miss (as plan_batch)")
      .def_prop_ro("capacity", &BatchPlanCache::capacity)
      .def("stats", [](const BatchPlanCache& c) { return stats_dict(c.stats()); })
      .def("clear", &BatchPlanCache::clear);
  // ---- cross-mesh ----
  nb::class_<CrossMeshPlan::Message>(m, "CrossMeshMessage", "One message of a cross-mesh transfer.")
      .def_ro("src_rank", &CrossMeshPlan::Message::from, "The sender's rank on the source mesh")
      .def_ro("dst_rank", &CrossMeshPlan::Message::to, "The receiver's rank on the target mesh")
      .def_ro("elements", &CrossMeshPlan::Message::elements)
      .def_ro("row_begin", &CrossMeshPlan::Message::row_begin)
      .def_ro("row_end", &CrossMeshPlan::Message::row_end, "-1: the whole intersection")
      .def("__repr__", [](const CrossMeshPlan::Message& x) {
        return fmt::format("CrossMeshMessage({} -> {}, {} elements)", x.from, x.to, x.elements);
      });
  nb::class_<CrossMeshPlan>(m, "CrossMeshPlan",
                            "A plan from a layout on one mesh to a layout on another (docs/cross-mesh.md): steps "
                            "inside the source mesh, one grouped send/recv, steps inside the target mesh.")
      .def_ro("src", &CrossMeshPlan::src)
      .def_ro("dst", &CrossMeshPlan::dst)
      .def_ro("src_ranks", &CrossMeshPlan::src_ranks, "World rank of each source-mesh rank")
      .def_ro("dst_ranks", &CrossMeshPlan::dst_ranks, "World rank of each target-mesh rank")
      .def_ro("world_size", &CrossMeshPlan::world_size)
      .def_ro("pre", &CrossMeshPlan::pre, "The plan inside the source mesh")
      .def_ro("post", &CrossMeshPlan::post, "The plan inside the target mesh")
      .def_ro("messages", &CrossMeshPlan::messages)
      .def_ro("transfer_bytes", &CrossMeshPlan::transfer_bytes, "Bytes sent between world ranks")
      .def_ro("busiest_bytes", &CrossMeshPlan::busiest_bytes, "Max over world ranks of max(sent, received) bytes")
      .def_ro("balanced_bound_bytes", &CrossMeshPlan::balanced_bound_bytes,
              "The least busiest_bytes any choice of senders reaches")
      .def_ro("transfer_cost_us", &CrossMeshPlan::transfer_cost_us)
      .def_ro("total_cost_us", &CrossMeshPlan::total_cost_us)
      .def_ro("cost_model", &CrossMeshPlan::cost_model)
      .def_prop_ro("collectives", &CrossMeshPlan::collectives)
      .def_prop_ro("hash", &CrossMeshPlan::hash, "Stable across processes: equal on every rank for the same request")
      .def("explain", [](const CrossMeshPlan& p) { return explain(p); })
      .def("to_json", &CrossMeshPlan::to_json, "indent"_a = -1)
      .def_static("from_json", [](const std::string& s) { return CrossMeshPlan::from_json(s); }, "json"_a,
                  "Reads a plan back, checking it fully (ValueError naming the field)")
      .def("__eq__", [](const CrossMeshPlan& a, const CrossMeshPlan& b) { return a == b; })
      .def("__repr__", [](const CrossMeshPlan& p) {
        return fmt::format("CrossMeshPlan({} on {} -> {} on {}, {} messages, {:.3f} us)", p.src.placements_str(),
                           p.src.mesh().str(), p.dst.placements_str(), p.dst.mesh().str(), p.messages.size(), p.total_cost_us);
      });
  m.def("plan_cross_mesh",
        [](const Layout& src, const Layout& dst, const nb::handle& src_ranks, const nb::handle& dst_ranks,
           const nb::handle& cost_model, const std::optional<std::string>& edges, std::optional<std::int64_t> max_memory,
           const nb::handle& world_size) {
          const CostModel cost = model_of(cost_model);
          CrossMeshOptions o;
          o.plan = options_of(edges, max_memory, false, PlanOptions{}.max_states);
          if (!world_size.is_none()) {
            std::int64_t w = 0;
            if (nb::isinstance<nb::bool_>(world_size) || !nb::isinstance<nb::int_>(world_size))
              throw nb::type_error(("world_size must be an int, not " + std::string(nb::type_name(world_size.type()).c_str())).c_str());
            if (!nb::try_cast<std::int64_t>(world_size, w) || w < 1)
              throw InputError("world_size: must be >= 1, got " + std::string(nb::str(world_size).c_str()));
            o.world_size = w;
          }
          const auto ra = rank_list_arg("src_ranks", src_ranks, src.mesh().num_ranks());
          const auto rb = rank_list_arg("dst_ranks", dst_ranks, dst.mesh().num_ranks());
          nb::gil_scoped_release release;
          return plan_cross_mesh(src, ra, dst, rb, cost, o);
        },
        "src"_a, "dst"_a, "src_ranks"_a = nb::none(), "dst_ranks"_a = nb::none(), "cost_model"_a = "default",
        "edges"_a = nb::none(), "max_memory"_a = nb::none(), "world_size"_a = nb::none(),
        "Plans moving a tensor from `src` (on its mesh, at world ranks `src_ranks`, default 0..n-1) to `dst` (on its "
        "mesh, at `dst_ranks`): the cheapest plan among the intermediate layouts it considers, senders balanced "
        "(docs/cross-mesh.md).");
  nb::class_<CrossMeshSimulationResult>(m, "CrossMeshSimulationResult")
      .def_ro("verified", &CrossMeshSimulationResult::verified)
      .def_ro("mismatch", &CrossMeshSimulationResult::mismatch);

  nb::class_<BatchSimulationResult>(m, "BatchSimulationResult")
      .def_ro("mismatch", &BatchSimulationResult::mismatch, "Per tensor: '' when right")
      .def_ro("verified", &BatchSimulationResult::verified)
      .def_ro("collectives", &BatchSimulationResult::collectives, "Collectives rank 0 issued");

  nb::class_<PlanCache>(m, "PlanCache", "A bounded, thread-safe LRU of plans.")
      .def(nb::init<std::size_t>(), "capacity"_a = 1024)
      .def("get",
           [](PlanCache& cache, const Layout& src, const Layout& dst, const nb::handle& cost_model,
              const std::optional<std::string>& edges, std::optional<std::int64_t> max_memory) {
             const CostModel cost = model_of(cost_model);
             const PlanOptions o = options_of(edges, max_memory, true, PlanOptions{}.max_states);
             std::shared_ptr<const Plan> p;
             {
               nb::gil_scoped_release release;
               p = cache.get_or_plan(src, dst, cost, o);
             }
             return p;  // shared with the cache: no copy (Plan has no mutators in Python)
           },
           "src"_a, "dst"_a, "cost_model"_a = "default", "edges"_a = nb::none(), "max_memory"_a = nb::none(),
           "The cached plan, planned on a miss")
      .def_prop_ro("capacity", &PlanCache::capacity)
      .def("stats", [](const PlanCache& c) { return stats_dict(c.stats()); })
      .def("clear", &PlanCache::clear);

  // ---- simulation ----
  nb::class_<SimulationResult::Rank>(m, "SimulatedRank")
      .def_ro("rank", &SimulationResult::Rank::rank)
      .def_ro("coord", &SimulationResult::Rank::coord)
      .def_ro("local_shape", &SimulationResult::Rank::local_shape)
      .def_ro("data", &SimulationResult::Rank::data);
  nb::class_<SimulationResult>(m, "SimulationResult")
      .def_ro("ranks", &SimulationResult::ranks)
      .def_ro("verified", &SimulationResult::verified)
      .def_ro("mismatch", &SimulationResult::mismatch);
  m.def("simulate",
        [](const Plan& plan, bool threads, std::optional<std::int64_t> memory_limit) {
          if (memory_limit && *memory_limit < 0)
            throw InputError(fmt::format("memory_limit: must be >= 0 bytes, got {}", *memory_limit));
          const std::int64_t limit = memory_limit.value_or(default_simulation_limit());
          if (const auto need = simulation_bytes(plan, threads); need > limit)
            throw InputError(fmt::format("simulating {} on mesh {} needs about {} bytes of host memory, above memory_limit {}",
                                         plan.trace(), plan.mesh().str(), need, limit));
          nb::gil_scoped_release release;
          return simulate(plan, threads);
        },
        "plan"_a, "threads"_a = false, "memory_limit"_a = nb::none(),
        "Runs the plan on an in-process mesh over inputs whose element i is i and checks every rank's output. "
        "memory_limit: refuse simulations needing more host memory (bytes; default half of this machine's)");

  m.def("simulate",
        [](const BatchPlan& batch, std::optional<std::int64_t> memory_limit) {
          if (memory_limit && *memory_limit < 0)
            throw InputError(fmt::format("memory_limit: must be >= 0 bytes, got {}", *memory_limit));
          const std::int64_t limit = memory_limit.value_or(default_simulation_limit());
          if (const auto need = simulation_bytes(batch); need > limit)
            throw InputError(fmt::format("simulating the batch of {} tensors needs about {} bytes of host memory, above "
                                         "memory_limit {}", batch.size(), need, limit));
          nb::gil_scoped_release release;
          return simulate(batch);
        },
        "batch"_a, "memory_limit"_a = nb::none(),
        "Runs a batch plan on an in-process mesh (one thread per rank) and checks every tensor on every rank.");

  m.def("simulate",
        [](const CrossMeshPlan& plan, std::optional<std::int64_t> memory_limit) {
          if (memory_limit && *memory_limit < 0)
            throw InputError(fmt::format("memory_limit: must be >= 0 bytes, got {}", *memory_limit));
          const std::int64_t limit = memory_limit.value_or(default_simulation_limit());
          if (const auto need = simulation_bytes(plan); need > limit)
            throw InputError(fmt::format("simulating the cross-mesh plan needs about {} bytes of host memory, above "
                                         "memory_limit {}", need, limit));
          nb::gil_scoped_release release;
          auto r = simulate(plan);
          r.outputs.clear();
          return r;
        },
        "plan"_a, "memory_limit"_a = nb::none(),
        "Runs a cross-mesh plan on in-process worlds (one thread per world rank) and checks every target rank.");

  // ---- execution through a Python communicator (dtensor.torch) ----
  nb::class_<PyCommunicator>(m, "_PyCommunicator")
      .def(nb::init<Mesh, std::int64_t, nb::object, bool>(), "mesh"_a, "rank"_a, "impl"_a, "host"_a)
      .def_prop_ro("rank", &PyCommunicator::rank)
      .def(
          "check_plans_agree",
          [](PyCommunicator& c, std::uint64_t plan_hash) {
            nb::gil_scoped_release release;
            check_plans_agree(c, plan_hash);
          },
          "plan_hash"_a, "Exchanges plan hashes over the mesh; BackendError naming the ranks whose plan differs");
  nb::class_<Executor>(m, "_Executor")
      .def(
          "__init__",
          [](Executor* self, const Plan& plan, PyCommunicator& comm, bool check, bool every_call) {
            nb::gil_scoped_release release;
            new (self) Executor(plan, comm,
                                ExecutorOptions{.check_plans_agree = check, .max_workspace_bytes = {},
                                                .check_plans_every_call = every_call});
          },
          "plan"_a, "comm"_a, "check_plans_agree"_a = true, "check_plans_every_call"_a = false, nb::keep_alive<1, 3>())
      .def_prop_ro("workspace_bytes", &Executor::workspace_bytes)
      .def_prop_ro("input_bytes", &Executor::input_bytes)
      .def_prop_ro("output_bytes", &Executor::output_bytes)
      .def_prop_ro("collectives", &Executor::collectives, "Collectives this rank issues per execute()")
      .def_prop_ro("ends_with_collective", &Executor::ends_with_collective,
                   "Whether execute() ends with a collective (no local copy after it)")
      .def(
          "execute",
          [](const Executor& e, std::uintptr_t in, std::int64_t in_bytes, std::uintptr_t out, std::int64_t out_bytes,
             std::uintptr_t ws, std::int64_t ws_bytes) {
            const Buffers b{span_at(in, in_bytes, "input"), span_at(out, out_bytes, "output"),
                            span_at(ws, ws_bytes, "workspace")};
            nb::gil_scoped_release release;
            e.execute(b);
          },
          "input"_a, "input_bytes"_a, "output"_a, "output_bytes"_a, "workspace"_a, "workspace_bytes"_a);

  nb::class_<BatchExecutor>(m, "_BatchExecutor")
      .def(
          "__init__",
          [](BatchExecutor* self, const BatchPlan& batch, PyCommunicator& comm) {
            nb::gil_scoped_release release;
            new (self) BatchExecutor(batch, comm);
          },
          "batch"_a, "comm"_a, nb::keep_alive<1, 3>())
      .def_prop_ro("staging_bytes", &BatchExecutor::staging_bytes)
      .def("__len__", &BatchExecutor::size)
      .def("workspace_bytes", [](const BatchExecutor& e, std::size_t i) { return e.executor(i).workspace_bytes(); }, "tensor"_a)
      .def("input_bytes", [](const BatchExecutor& e, std::size_t i) { return e.executor(i).input_bytes(); }, "tensor"_a)
      .def("output_bytes", [](const BatchExecutor& e, std::size_t i) { return e.executor(i).output_bytes(); }, "tensor"_a)
      .def(
          "execute",
          [](const BatchExecutor& e,
             const std::vector<std::tuple<std::uintptr_t, std::int64_t, std::uintptr_t, std::int64_t, std::uintptr_t, std::int64_t>>& bufs,
             std::uintptr_t staging, std::int64_t staging_bytes) {
            if (bufs.size() != e.size())
              throw InputError(fmt::format("{} buffer sets for a batch of {} tensors", bufs.size(), e.size()));
            std::vector<Buffers> b;
            for (const auto& [in, ib, out, ob, ws, wb] : bufs)
              b.push_back({span_at(in, ib, "input"), span_at(out, ob, "output"), span_at(ws, wb, "workspace")});
            const auto st = span_at(staging, staging_bytes, "staging");
            nb::gil_scoped_release release;
            e.execute(b, st);
          },
          "buffers"_a, "staging"_a, "staging_bytes"_a);

  nb::class_<CrossMeshExecutor>(m, "_CrossMeshExecutor")
      .def(
          "__init__",
          [](CrossMeshExecutor* self, const CrossMeshPlan& plan, PyCommunicator& world, PyCommunicator* on_src,
             PyCommunicator* on_dst) {
            nb::gil_scoped_release release;
            new (self) CrossMeshExecutor(plan, world, on_src, on_dst);
          },
          "plan"_a, "world"_a, "on_src"_a.none(), "on_dst"_a.none(), nb::keep_alive<1, 3>(), nb::keep_alive<1, 4>(),
          nb::keep_alive<1, 5>())
      .def_prop_ro("workspace_bytes", &CrossMeshExecutor::workspace_bytes)
      .def_prop_ro("input_bytes", &CrossMeshExecutor::input_bytes)
      .def_prop_ro("output_bytes", &CrossMeshExecutor::output_bytes)
      .def(
          "execute",
          [](const CrossMeshExecutor& e, std::uintptr_t in, std::int64_t in_bytes, std::uintptr_t out,
             std::int64_t out_bytes, std::uintptr_t ws, std::int64_t ws_bytes) {
            const Buffers b{span_at(in, in_bytes, "input"), span_at(out, out_bytes, "output"),
                            span_at(ws, ws_bytes, "workspace")};
            nb::gil_scoped_release release;
            e.execute(b);
          },
          "input"_a, "input_bytes"_a, "output"_a, "output_bytes"_a, "workspace"_a, "workspace_bytes"_a);

  // ---- tuning (dtensor.tune) ----
  auto t = m.def_submodule("tune", "Fitting the cost model to nccl-tests logs (as `dtensor tune fit`).");
  nb::class_<tune::Log>(t, "Log", "One parsed nccl-tests log.")
      .def_ro("name", &tune::Log::name)
      .def_prop_ro("collective", [](const tune::Log& l) { return std::string(to_string(l.collective)); })
      .def_ro("ranks", &tune::Log::ranks)
      .def_ro("ranks_per_node", &tune::Log::ranks_per_node)
      .def_prop_ro("rows", [](const tune::Log& l) {
        std::vector<std::tuple<std::int64_t, double, int>> out;
        for (const auto& r : l.rows) out.emplace_back(r.bytes, r.time_us, r.line);
        return out;
      }, "(bytes, out-of-place time in us, line) per data row")
      .def_prop_ro("ignored", [](const tune::Log& l) { return ignored_of(l.ignored); },
                   "(line, reason) per row the parser skipped");
  auto log_options = [](const std::optional<std::string>& collective, std::optional<std::int64_t> ranks,
                        std::optional<std::int64_t> ranks_per_node) {
    tune::LogOptions o;
    if (collective) {
      o.collective = parse_collective(*collective);
      if (!o.collective) throw InputError("unknown collective " + quote_input(*collective));
    }
    o.ranks = ranks;
    o.ranks_per_node = ranks_per_node;
    return o;
  };
  t.def("parse_nccl_log",
        [log_options](const std::string& text, const std::string& name, const std::optional<std::string>& collective,
                      std::optional<std::int64_t> ranks, std::optional<std::int64_t> ranks_per_node) {
          return tune::parse_nccl_log(text, name, log_options(collective, ranks, ranks_per_node));
        },
        "text"_a, "name"_a = "log", "collective"_a = nb::none(), "ranks"_a = nb::none(), "ranks_per_node"_a = nb::none(),
        "Parses nccl-tests output (every variant `dtensor tune fit` reads)");
  t.def("read_nccl_log",
        [log_options](const std::string& path, const std::optional<std::string>& collective,
                      std::optional<std::int64_t> ranks, std::optional<std::int64_t> ranks_per_node) {
          return tune::read_nccl_log(path, log_options(collective, ranks, ranks_per_node));
        },
        "path"_a, "collective"_a = nb::none(), "ranks"_a = nb::none(), "ranks_per_node"_a = nb::none(),
        "Reads and parses one nccl-tests log file, as `dtensor tune fit` does");
  nb::class_<tune::LogFit>(t, "LogFit", "The fit of one log.")
      .def_ro("log", &tune::LogFit::log)
      .def_ro("inter_host", &tune::LogFit::inter_host)
      .def_prop_ro("rows_used", [](const tune::LogFit& f) { return f.fit.rows_used; })
      .def_prop_ro("median_rel_error", [](const tune::LogFit& f) { return f.fit.median_rel_error; })
      .def_prop_ro("max_rel_error", [](const tune::LogFit& f) { return f.fit.max_rel_error; })
      .def_prop_ro("bands", [](const tune::LogFit& f) {
        std::vector<std::tuple<double, double, double>> out;
        for (const auto& b : f.fit.curve.bands) out.emplace_back(b.up_to_bytes, b.alpha_us, b.bw_GBps);
        return out;
      }, "(up_to_bytes, alpha_us, bus bandwidth GB/s) per size band")
      .def_prop_ro("ignored", [](const tune::LogFit& f) { return ignored_of(f.ignored); });
  nb::class_<tune::ProfileFit>(t, "ProfileFit")
      .def_ro("model", &tune::ProfileFit::model)
      .def_ro("logs", &tune::ProfileFit::logs);
  t.def("fit_profile",
        [](const std::vector<tune::Log>& logs, const nb::handle& base) {
          const CostModel b = model_of(base);
          nb::gil_scoped_release release;
          return tune::fit_profile(logs, b);
        },
        "logs"_a, "base"_a = "default",
        "One fitted curve per log (collective and link class) on top of base's links: a CostModel and per-log reports");

  // ---- misc ----
  m.def("parse_collective", [](const std::string& s) -> std::optional<std::string> {
    const auto c = parse_collective(s);
    if (!c) return std::nullopt;
    return std::string(to_string(*c));
  });
  m.def("dtypes", [] {
    std::vector<std::string> out;
    for (const auto t : kAllDTypes) out.emplace_back(to_string(t));
    return out;
  }, "The dtype names layouts accept");
  m.def("itemsize", [](const std::string& t) { return itemsize(parse_dtype(t)); }, "dtype"_a);
}
