// Bindings of the planner: cost models, plans, batches and cross-mesh plans.
#include "bindings.hpp"

namespace dtensor::python {

void bind_plans(nb::module_& m) {
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
}

}  // namespace dtensor::python
