#pragma once
// Deprecated name (until 0.2.0): the cross-mesh plan is cross_mesh_plan.hpp, its executor
// cross_mesh_executor.hpp.
#include "dtensor/cross_mesh_executor.hpp"
#include "dtensor/cross_mesh_plan.hpp"
