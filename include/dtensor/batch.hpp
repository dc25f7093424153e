#pragma once
// Deprecated name (until 0.2.0): the batch plan is batch_plan.hpp, its executor batch_executor.hpp.
#include "dtensor/batch_executor.hpp"
#include "dtensor/batch_plan.hpp"
