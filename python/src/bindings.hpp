#pragma once
// What the binding files of `dtensor._core` share (args.cpp): the nanobind headers, the conversion
// of Python arguments (cost models, coordinates, rank lists) and one bind_* function per file.
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
#include "placement/groups.hpp"

namespace nb = nanobind;
using namespace nb::literals;  // NOLINT: the bindings' "name"_a

namespace dtensor::python {

// A cost model argument: "default", "pytorch", a profile file's path, or a CostModel.
[[nodiscard]] CostModel model_of(const nb::handle& cost_model);
[[nodiscard]] nb::dict stats_dict(const PlanCacheStats& s);
// Planner options from the Python keywords (edges: "all" / "pytorch" / None for the model's own).
[[nodiscard]] PlanOptions options_of(const std::optional<std::string>& edges, std::optional<std::int64_t> max_memory,
                                     bool runner_up, std::int64_t max_states);
// A rank or a coordinate of `mesh` (an int or a sequence of ints), checked.
[[nodiscard]] std::vector<std::int64_t> coord_arg(const Mesh& mesh, const nb::handle& where);
// A list of `n` world rank ids, checked.
[[nodiscard]] std::vector<std::int64_t> rank_list_arg(const char* name, const nb::handle& v, std::int64_t n);
[[nodiscard]] std::vector<std::pair<std::int64_t, std::int64_t>> runs_of(const IndexSet& s);
[[nodiscard]] std::vector<std::pair<int, std::string>> ignored_of(const std::vector<tune::IgnoredRow>& rows);

// One per binding file, called by module.cpp in this order (a type is bound before it is used).
void bind_values(nb::module_& m);      // values.cpp: placements, meshes, layouts
void bind_plans(nb::module_& m);       // plans.cpp: cost models, plans, batches, cross-mesh
void bind_load(nb::module_& m);        // load.cpp: checkpoint load plans
void bind_ragged(nb::module_& m);      // ragged.cpp: RaggedShard layouts, ragged plans, owners
void bind_simulation(nb::module_& m);  // simulation.cpp
void bind_execution(nb::module_& m);   // execution.cpp: executors on a Python communicator
void bind_tune(nb::module_& m);        // tune.cpp

}  // namespace dtensor::python
