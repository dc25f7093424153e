// Bindings of the values: placements, meshes, layouts.
#include "bindings.hpp"

namespace dtensor::python {

void bind_values(nb::module_& m) {
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
}

}  // namespace dtensor::python
