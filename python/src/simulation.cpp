// Bindings of simulate().
#include "bindings.hpp"

namespace dtensor::python {

void bind_simulation(nb::module_& m) {
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
}

}  // namespace dtensor::python
