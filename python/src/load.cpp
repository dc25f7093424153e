// Bindings of checkpoint load plans (dtensor.plan_load; dtensor.torch.checkpoint).
#include "bindings.hpp"
#include "dtensor/load_plan.hpp"
#include "dtensor/load_request.hpp"

namespace dtensor::python {

void bind_load(nb::module_& m) {
  nb::class_<SavedTensor>(m, "SavedTensor", "A saved tensor as DCP's metadata describes it: shape, dtype and chunks.")
      .def(
          "__init__",
          [](SavedTensor* self, std::string name, std::vector<std::int64_t> shape, const std::string& dtype,
             const std::vector<std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>>>& chunks) {
            std::vector<SavedChunk> cs;
            for (const auto& [o, s] : chunks) cs.push_back({o, s});
            new (self) SavedTensor{std::move(name), std::move(shape), parse_dtype(dtype), std::move(cs)};
          },
          "name"_a, "shape"_a, "dtype"_a, "chunks"_a, "chunks: (offsets, sizes) per saved chunk")
      .def_ro("name", &SavedTensor::name)
      .def_ro("shape", &SavedTensor::shape)
      .def_prop_ro("dtype", [](const SavedTensor& t) { return std::string(to_string(t.dtype)); })
      .def_prop_ro("chunks", [](const SavedTensor& t) {
        std::vector<std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>>> out;
        for (const auto& c : t.chunks) out.emplace_back(c.offsets, c.sizes);
        return out;
      });
  nb::class_<LoadPlan>(m, "LoadPlan", "Every saved chunk read once, then each target rank's elements moved from its reader.")
      .def_prop_ro("reads", [](const LoadPlan& p) {
        std::vector<std::tuple<std::int32_t, std::int32_t, std::int64_t, std::int64_t>> out;
        for (const auto& r : p.reads) out.emplace_back(r.tensor, r.chunk, r.reader, r.bytes);
        return out;
      }, "(tensor, chunk, reader, bytes) per read")
      .def_prop_ro("messages", [](const LoadPlan& p) {
        std::vector<std::tuple<std::int32_t, std::int32_t, std::int64_t, std::int64_t, std::int64_t>> out;
        for (const auto& x : p.messages) out.emplace_back(x.tensor, x.chunk, x.from, x.to, x.elements);
        return out;
      }, "(tensor, chunk, from, to, elements) per message, in (tensor, chunk, to) order")
      .def_ro("total_read_bytes", &LoadPlan::total_read_bytes)
      .def_ro("busiest_read_bytes", &LoadPlan::busiest_read_bytes)
      .def_ro("balanced_read_bytes", &LoadPlan::balanced_read_bytes)
      .def_ro("moved_bytes", &LoadPlan::moved_bytes)
      .def_ro("gathered_bytes", &LoadPlan::gathered_bytes)
      .def_ro("busiest_transfer_bytes", &LoadPlan::busiest_transfer_bytes)
      .def_ro("read_us", &LoadPlan::read_us)
      .def_ro("transfer_us", &LoadPlan::transfer_us)
      .def_ro("post_us", &LoadPlan::post_us)
      .def_ro("total_us", &LoadPlan::total_us)
      .def_ro("staged", &LoadPlan::staged, "The tensors received in an intermediate layout, then gathered (post)")
      .def_ro("post", &LoadPlan::post, "The batch inside the mesh: post.plans[i] takes staged[i] from its intermediate to its target")
      .def_prop_ro("read_bw_GBps", [](const LoadPlan& p) { return p.storage.read_bw_GBps; })
      .def_prop_ro("read_alpha_us", [](const LoadPlan& p) { return p.storage.read_alpha_us; })
      .def_prop_ro("hash", &LoadPlan::hash)
      .def_prop_ro("decision_hash", &LoadPlan::decision_hash,
                   "The hash of the plan's decisions (who reads each chunk, the fan-out): what every rank's part carries")
      .def("part", &LoadPlan::part, "rank"_a, "Mesh rank `rank`'s part of this plan (plan_load_part's)")
      .def("to_json", &LoadPlan::to_json, "indent"_a = -1)
      .def_static("from_json", [](const std::string& text) { return LoadPlan::from_json(text); }, "text"_a,
                  "A plan's JSON, validated as untrusted (ValueError naming the field)")
      .def("check", [](const LoadPlan& p, const std::vector<SavedTensor>& saved, const std::vector<Layout>& targets,
                       const nb::handle& cost_model) {
        if (cost_model.is_none()) {
          check_load_plan(p, saved, targets);
        } else {
          const CostModel m = model_of(cost_model);
          check_load_plan(p, saved, targets, &m);
        }
      }, "saved"_a, "targets"_a, "cost_model"_a = nb::none(),
         "ValueError unless this plan loads saved[i] into targets[i] (naming the chunk or figure that differs; with "
         "cost_model, its times too)")
      .def("show", [](const LoadPlan& p, const std::vector<SavedTensor>& saved, std::int32_t tensor) {
        return show_tensor(p, saved, tensor);
      }, "saved"_a, "tensor"_a, "One tensor's chunks: reader and receiving ranks")
      .def("explain", [](const LoadPlan& p) { return explain(p); })
      .def("__eq__", [](const LoadPlan& a, const LoadPlan& b) { return a == b; });
  nb::class_<LoadPart>(m, "LoadPart",
                       "One rank's part of a load plan: `plan` holds only its reads and the messages it sends or receives, "
                       "with the whole plan's figures; decision_hash is the whole plan's (the same on every rank).")
      .def_ro("rank", &LoadPart::rank)
      .def_ro("decision_hash", &LoadPart::decision_hash)
      .def_ro("plan", &LoadPart::plan)
      .def("to_json", &LoadPart::to_json, "indent"_a = -1)
      .def("explain", [](const LoadPart& p) { return explain(p); })
      .def("__eq__", [](const LoadPart& a, const LoadPart& b) { return a == b; });
  nb::class_<LoadRequest>(m, "LoadRequest", "A checkpoint load as a file: saved tensors and the layouts they load into.")
      .def_static("from_json", [](const std::string& text) { return LoadRequest::from_json(text); }, "text"_a,
                  "Validated as untrusted (ValueError naming the tensor and field)")
      .def("to_json", &LoadRequest::to_json)
      .def_ro("saved", &LoadRequest::saved)
      .def_ro("targets", &LoadRequest::targets)
      .def("index_of", &LoadRequest::index_of, "name"_a);
  m.def(
      "ragged_intermediate",
      [](const RaggedLayout& target, const nb::handle& cost_model) {
        const CostModel cost = model_of(cost_model);
        nb::gil_scoped_release release;
        return ragged_intermediate(target, cost);
      },
      "target"_a, "cost_model"_a = "default",
      "The plain layout a RaggedShard target is loaded in, before the ragged plan takes it to the target");
  m.def(
      "plan_load",
      [](const std::vector<SavedTensor>& saved, const std::vector<Layout>& targets, const nb::handle& cost_model,
         std::optional<double> read_bw_GBps, std::optional<double> read_alpha_us, const std::string& fanout) {
        const CostModel cost = model_of(cost_model);
        const LoadOptions o{read_bw_GBps, read_alpha_us, parse_fanout(fanout)};
        nb::gil_scoped_release release;
        return plan_load(saved, targets, cost, o);
      },
      "saved"_a, "targets"_a, "cost_model"_a = "default", "read_bw_GBps"_a = nb::none(), "read_alpha_us"_a = nb::none(),
      "fanout"_a = "cheapest",
      "The load plan of saved[i] into targets[i] (one mesh): every chunk read once, then the moves. The reads are "
      "priced with the cost profile's storage field unless read_bw_GBps / read_alpha_us are given; fanout: how "
      "replicas get their copies ('cheapest' by the cost model, 'direct' point to point, 'gather' sharded then "
      "gathered inside the mesh)");
  m.def(
      "plan_load_part",
      [](const std::vector<SavedTensor>& saved, const std::vector<Layout>& targets, std::int64_t rank,
         const nb::handle& cost_model, std::optional<double> read_bw_GBps, std::optional<double> read_alpha_us,
         const std::string& fanout) {
        const CostModel cost = model_of(cost_model);
        const LoadOptions o{read_bw_GBps, read_alpha_us, parse_fanout(fanout)};
        nb::gil_scoped_release release;
        return plan_load_part(saved, targets, rank, cost, o);
      },
      "saved"_a, "targets"_a, "rank"_a, "cost_model"_a = "default", "read_bw_GBps"_a = nb::none(),
      "read_alpha_us"_a = nb::none(), "fanout"_a = "cheapest",
      "Mesh rank `rank`'s part of plan_load(saved, targets, ...), planned by that rank alone (the same decision on "
      "every rank, then only its entries): equal to plan_load(...).part(rank). ValueError as plan_load, or naming "
      "a rank off the mesh");
}

}  // namespace dtensor::python
