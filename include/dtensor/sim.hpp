#pragma once
// Deprecated (removed in 0.2.0): include what you use, dtensor/simulate.hpp (simulate()),
// dtensor/verify.hpp (seeded inputs, verification) or dtensor/simulated.hpp (the in-process world
// and its drivers).
#include "dtensor/simulate.hpp"
#include "dtensor/simulated.hpp"
#include "dtensor/verify.hpp"
