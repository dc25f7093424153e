// Bindings of RaggedShard layouts, ragged plans and owner planning (docs/ragged.md).
#include "bindings.hpp"
#include "dtensor/owners.hpp"
#include "dtensor/ragged_bucket.hpp"
#include "dtensor/ragged_plan.hpp"

namespace dtensor::python {

void bind_ragged(nb::module_& m) {
  nb::class_<RaggedLayout>(m, "RaggedLayout",
                           "A layout that may hold one RaggedShard (veScale's placement): RaggedLayout(mesh, shape, "
                           "\"RaggedShard((0,),(1,2,0,1))S(1)\", dtype). Without one it is its base Layout.")
      .def("__init__",
           [](RaggedLayout* self, const Mesh& mesh, const std::vector<std::int64_t>& shape, const std::string& placements,
              const std::string& dtype) { new (self) RaggedLayout(RaggedLayout::parse(mesh, shape, parse_dtype(dtype), placements)); },
           "mesh"_a, "shape"_a, "placements"_a, "dtype"_a = "f32")
      .def("__init__", [](RaggedLayout* self, const Layout& plain) { new (self) RaggedLayout(plain); }, "layout"_a,
           "The same layout, as a RaggedLayout")
      .def_static("parse", [](const std::string& text) { return RaggedLayout::parse(text); }, "text"_a,
                  "The whole text form: \"4 8x6 f32 RaggedShard((0,),(1,2,0,1))\"")
      .def_prop_ro("base", &RaggedLayout::base, "The layout with the ragged mesh dim read as Replicate")
      .def_prop_ro("is_ragged", &RaggedLayout::is_ragged)
      .def_prop_ro("ragged_mesh_dim", [](const RaggedLayout& l) -> std::optional<int> {
        return l.ragged() ? std::optional<int>(l.ragged()->mesh_dim) : std::nullopt;
      })
      .def_prop_ro("dims", [](const RaggedLayout& l) {
        std::vector<int> d;
        if (l.ragged())
          for (int k = 0; k < l.ragged()->prefix_dims; ++k) d.push_back(k);
        return d;
      }, "The RaggedShard's dims (0, ..., k-1); empty when not ragged")
      .def_prop_ro("local_units", [](const RaggedLayout& l) { return l.ragged() ? l.ragged()->units : std::vector<std::int64_t>{}; })
      .def_prop_ro("mesh", &RaggedLayout::mesh)
      .def_prop_ro("shape", &RaggedLayout::shape)
      .def_prop_ro("dtype", [](const RaggedLayout& l) { return std::string(to_string(l.dtype())); })
      .def_prop_ro("placements_str", &RaggedLayout::placements_str)
      .def("local_shape", [](const RaggedLayout& l, const nb::handle& w) { return l.local_shape(coord_arg(l.mesh(), w)); },
           "rank_or_coord"_a, "(rows, trailing extents...) of the rank's piece (the base's local shape when not ragged)")
      .def("local_numel", [](const RaggedLayout& l, const nb::handle& w) { return l.local_numel(coord_arg(l.mesh(), w)); },
           "rank_or_coord"_a)
      .def("piece", [](const RaggedLayout& l, const nb::handle& w) {
        const auto p = l.piece(coord_arg(l.mesh(), w));
        return std::pair<std::int64_t, std::int64_t>(p.start, p.stop);
      }, "rank_or_coord"_a, "[start, stop) of the rank's piece within its base block, flattened row-major")
      .def("owned_runs", [](const RaggedLayout& l, const nb::handle& w) {
        std::vector<std::pair<std::int64_t, std::int64_t>> out;
        for (const auto& r : l.owned_runs(coord_arg(l.mesh(), w))) out.emplace_back(r.start, r.stop);
        return out;
      }, "rank_or_coord"_a, "The rank's global element ids (flat, row-major) as ascending [start, stop) runs")
      .def("to_json", [](const RaggedLayout& l) { return to_json(l); })
      .def_static("from_json", [](const std::string& s) { return ragged_layout_from_json(s); }, "json"_a)
      .def("__str__", &RaggedLayout::str)
      .def("__repr__", [](const RaggedLayout& l) { return "RaggedLayout.parse(\"" + l.str() + "\")"; })
      .def("__eq__", [](const RaggedLayout& a, const RaggedLayout& b) { return a == b; })
      .def("__hash__", [](const RaggedLayout& l) { return std::hash<std::string>{}(l.str()); });

  nb::class_<RaggedPlan>(m, "RaggedPlan", "A ragged plan: ordinary plans and exchanges (grouped send/recv of per-rank counts)")
      .def_prop_ro("src", [](const RaggedPlan& p) { return p.src; })
      .def_prop_ro("dst", [](const RaggedPlan& p) { return p.dst; })
      .def_prop_ro("trace", &RaggedPlan::trace)
      .def_prop_ro("total_cost_us", [](const RaggedPlan& p) { return p.total_cost_us; })
      .def_prop_ro("hash", &RaggedPlan::hash)
      .def_prop_ro("cost_model", [](const RaggedPlan& p) { return p.cost_model; })
      .def_prop_ro("stages", [](const RaggedPlan& p) {
        std::vector<std::string> out;
        for (const auto& st : p.stages) out.push_back(st.plan ? "plan" : "exchange");
        return out;
      }, "Each stage's kind: \"plan\" or \"exchange\"")
      .def("explain", &RaggedPlan::explain)
      .def("to_json", &RaggedPlan::to_json)
      .def_static("from_json", &RaggedPlan::from_json, "json"_a,
                  "Reads to_json's form as untrusted input (every record checked against its layouts)")
      .def("__eq__", [](const RaggedPlan& a, const RaggedPlan& b) { return a == b; });

  m.def("plan_ragged",
        [](const nb::handle& src, const nb::handle& dst, const nb::handle& cost_model) {
          auto as_ragged = [](const nb::handle& h, const char* what) {
            if (nb::isinstance<RaggedLayout>(h)) return nb::cast<RaggedLayout>(h);
            if (nb::isinstance<Layout>(h)) return RaggedLayout(nb::cast<Layout>(h));
            throw nb::type_error((std::string(what) + " must be a dtensor.Layout or dtensor.RaggedLayout").c_str());
          };
          const RaggedLayout a = as_ragged(src, "src"), b = as_ragged(dst, "dst");
          const CostModel cost = model_of(cost_model);
          nb::gil_scoped_release release;
          return plan_ragged(a, b, cost);
        },
        "src"_a, "dst"_a, "cost_model"_a = "default",
        "The cheapest ragged plan from src to dst (Layouts or RaggedLayouts of one mesh, shape and dtype)");
  m.def("exchange_received", [](const RaggedLayout& a, const RaggedLayout& b) { return exchange_received(a, b); }, "src"_a,
        "dst"_a, "Per rank, the elements it receives from others moving src to dst in one exchange (no Partial)");

  nb::class_<OwnerPlan>(m, "OwnerPlan", "Owners of N tensors along a mesh dim (plan_owners)")
      .def_ro("owners", &OwnerPlan::owners, "Per tensor, its owner's coordinate on the mesh dim")
      .def_ro("load_us", &OwnerPlan::load_us, "Per coordinate: receive time plus compute of what it owns")
      .def_ro("makespan_us", &OwnerPlan::makespan_us)
      .def_ro("exact", &OwnerPlan::exact, "Whether the branch-and-bound proved it optimal (N <= 12)")
      .def_ro("nodes", &OwnerPlan::nodes);
  m.def("plan_owners",
        [](const std::vector<Layout>& layouts, int mesh_dim, const std::optional<std::vector<double>>& compute_us,
           const nb::handle& cost_model, const std::optional<std::string>& compute, int iterations,
           std::optional<double> flops_per_us) {
          const CostModel cost = model_of(cost_model);
          std::vector<double> c = compute_us.value_or(std::vector<double>{});
          if (compute) {
            if (*compute != "newton_schulz")
              throw InputError(fmt::format("compute {}: the one derived compute is 'newton_schulz'", quote_input(*compute)));
            if (compute_us) throw InputError("compute='newton_schulz' and compute_us: one or the other");
            if (!flops_per_us) throw InputError("compute='newton_schulz' needs flops_per_us (the owners' matmul rate)");
            c = newton_schulz_us(layouts, iterations, *flops_per_us);
          } else if (flops_per_us) {
            throw InputError("flops_per_us without compute='newton_schulz'");
          }
          nb::gil_scoped_release release;
          return plan_owners(layouts, mesh_dim, cost, c);
        },
        "layouts"_a, "mesh_dim"_a, "compute_us"_a = nb::none(), "cost_model"_a = "default", "compute"_a = nb::none(),
        "iterations"_a = 5, "flops_per_us"_a = nb::none(),
        "An owner per tensor along mesh_dim minimising the largest per-rank time (LPT; exact for N <= 12): the "
        "time each owner receives its tensors in, plus compute_us, or with compute='newton_schulz' the Muon step's "
        "Newton-Schulz iterations at flops_per_us");
  m.def("newton_schulz_us",
        [](const std::vector<Layout>& layouts, int iterations, double flops_per_us) {
          return newton_schulz_us(layouts, iterations, flops_per_us);
        },
        "layouts"_a, "iterations"_a = 5, "flops_per_us"_a,
        "Per tensor, the microseconds of `iterations` Newton-Schulz iterations on it as a matrix at flops_per_us");
  m.def("evaluate_owners",
        [](const std::vector<Layout>& layouts, int mesh_dim, const std::vector<std::int64_t>& owners,
           const std::optional<std::vector<double>>& compute_us, const nb::handle& cost_model) {
          const CostModel cost = model_of(cost_model);
          return evaluate_owners(layouts, mesh_dim, cost, owners, compute_us.value_or(std::vector<double>{}));
        },
        "layouts"_a, "mesh_dim"_a, "owners"_a, "compute_us"_a = nb::none(), "cost_model"_a = "default",
        "The loads of given owners (round-robin, say), for comparison");
  m.def("flat_bucket_layouts",
        [](const Mesh& mesh, int mesh_dim, const std::vector<std::vector<std::int64_t>>& shapes, const std::string& dtype) {
          return flat_bucket_layouts(mesh, mesh_dim, shapes, parse_dtype(dtype));
        },
        "mesh"_a, "mesh_dim"_a, "shapes"_a, "dtype"_a = "f32",
        "FSDP's flat parameter: the tensors concatenated and cut over mesh_dim as torch.chunk cuts a list, "
        "each a RaggedLayout");
  m.def("bucket_of",
        [](const std::vector<RaggedLayout>& members) -> std::optional<std::pair<RaggedLayout, std::vector<std::int64_t>>> {
          auto b = bucket_of(members);
          if (!b) return std::nullopt;
          return std::pair<RaggedLayout, std::vector<std::int64_t>>(b->flat, b->offsets);
        },
        "members"_a,
        "(flat layout, offsets) when the members' pieces are views of one flat bucket per rank; None otherwise. "
        "Gather the flat layout to R: member i is the view at offsets[i]");
  m.def("owner_layout", &owner_layout, "layout"_a, "mesh_dim"_a, "owner"_a,
        "The single-owner layout: the rank at `owner` on mesh_dim holds its group's whole block");
}

}  // namespace dtensor::python
