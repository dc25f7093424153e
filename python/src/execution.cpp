// Bindings of execution through a Python communicator (dtensor.torch).
#include <algorithm>

#include <fmt/format.h>

#include "bindings.hpp"
#include "py_communicator.hpp"
#include "dtensor/ragged_executor.hpp"

namespace dtensor::python {
namespace {

std::span<std::byte> span_at(std::uintptr_t address, std::int64_t bytes, const char* what) {
  if (bytes < 0) throw InputError(std::string(what) + ": negative size " + std::to_string(bytes));
  if (bytes > 0 && address == 0) throw InputError(std::string(what) + ": null address for " + std::to_string(bytes) + " bytes");
  return {reinterpret_cast<std::byte*>(address), static_cast<std::size_t>(bytes)};
}

// The sizes and execute() every executor class shares (one rank's input, output and workspace as
// (address, bytes) pairs).
template <class E>
void def_buffers_and_execute(nb::class_<E>& c) {
  c.def_prop_ro("workspace_bytes", &E::workspace_bytes)
      .def_prop_ro("input_bytes", &E::input_bytes)
      .def_prop_ro("output_bytes", &E::output_bytes)
      .def(
          "execute",
          [](const E& e, std::uintptr_t in, std::int64_t in_bytes, std::uintptr_t out, std::int64_t out_bytes,
             std::uintptr_t ws, std::int64_t ws_bytes) {
            const Buffers b{span_at(in, in_bytes, "input"), span_at(out, out_bytes, "output"),
                            span_at(ws, ws_bytes, "workspace")};
            nb::gil_scoped_release release;
            e.execute(b);
          },
          "input"_a, "input_bytes"_a, "output"_a, "output_bytes"_a, "workspace"_a, "workspace_bytes"_a);
}

}  // namespace

void bind_execution(nb::module_& m) {
  // ---- execution through a Python communicator (dtensor.torch) ----
  nb::class_<PyCommunicator>(m, "_PyCommunicator")
      .def(nb::init<Mesh, std::int64_t, nb::object, bool>(), "mesh"_a, "rank"_a, "impl"_a, "host"_a)
      .def_prop_ro("rank", &PyCommunicator::rank)
      .def("_set_buffers", &PyCommunicator::set_buffers, "buffers"_a,
           "The call's buffers as (address, bytes) pairs, in the order the Python side indexes them")
      .def(
          "check_plans_agree",
          [](PyCommunicator& c, std::uint64_t plan_hash) {
            nb::gil_scoped_release release;
            check_plans_agree(c, plan_hash);
          },
          "plan_hash"_a, "Exchanges plan hashes over the mesh; BackendError naming the ranks whose plan differs");
  nb::class_<Executor> executor(m, "_Executor");
  executor
      .def(
          "__init__",
          [](Executor* self, const Plan& plan, PyCommunicator& comm, bool check, bool every_call) {
            nb::gil_scoped_release release;
            new (self) Executor(plan, comm,
                                ExecutorOptions{.check_plans_agree = check, .max_workspace_bytes = {},
                                                .check_plans_every_call = every_call});
          },
          "plan"_a, "comm"_a, "check_plans_agree"_a = true, "check_plans_every_call"_a = false, nb::keep_alive<1, 3>())
      .def_prop_ro("collectives", &Executor::collectives, "Collectives this rank issues per execute()")
      .def_prop_ro("ends_with_collective", &Executor::ends_with_collective,
                   "Whether execute() ends with a collective (no local copy after it)");
  def_buffers_and_execute(executor);

  nb::class_<RaggedExecutor> ragged(m, "_RaggedExecutor");
  ragged
      .def(
          "__init__",
          [](RaggedExecutor* self, const RaggedPlan& plan, PyCommunicator& comm, bool check) {
            nb::gil_scoped_release release;
            new (self) RaggedExecutor(plan, comm, ExecutorOptions{.check_plans_agree = check});
          },
          "plan"_a, "comm"_a, "check_plans_agree"_a = true, nb::keep_alive<1, 3>())
      .def_prop_ro("collectives", &RaggedExecutor::collectives)
      .def_prop_ro("ends_with_collective", [](const RaggedExecutor&) { return false; });
  def_buffers_and_execute(ragged);

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

  nb::class_<CrossMeshExecutor> cross(m, "_CrossMeshExecutor");
  cross
      .def(
          "__init__",
          [](CrossMeshExecutor* self, const CrossMeshPlan& plan, PyCommunicator& world, PyCommunicator* on_src,
             PyCommunicator* on_dst) {
            nb::gil_scoped_release release;
            new (self) CrossMeshExecutor(plan, world, on_src, on_dst);
          },
          "plan"_a, "world"_a, "on_src"_a.none(), "on_dst"_a.none(), nb::keep_alive<1, 3>(), nb::keep_alive<1, 4>(),
          nb::keep_alive<1, 5>());
  def_buffers_and_execute(cross);
}

}  // namespace dtensor::python
