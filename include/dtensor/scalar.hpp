#pragma once
// Element access and reductions for every dtype on host memory (the simulated backend's
// arithmetic, and the seeding/verification of simulations).
#include <cstdint>

#include "dtensor/dtype.hpp"
#include "dtensor/placement.hpp"

namespace dtensor {

// Value of element `i` of a buffer of `t`, as double (exact for every value a dtype holds).
[[nodiscard]] double load_element(DType t, const void* data, std::int64_t i) noexcept;
// Stores `v` rounded to `t` (round-to-nearest-even for floats, saturating fp8 e4m3, truncation
// toward zero for integers, v != 0 for bool).
void store_element(DType t, void* data, std::int64_t i, double v) noexcept;
// Every value of a 16- or 8-bit float dtype, decoded: table[bits] (nullptr for other dtypes).
[[nodiscard]] const double* decode_table(DType t) noexcept;

// acc[k] = op(acc[k], x[k]) for k < count (avg accumulates a sum; see finish_average).
void reduce_into(DType t, ReduceOp op, void* acc, const void* x, std::int64_t count) noexcept;
// acc[k] /= n (integer types: truncating division, as NCCL's ncclAvg).
void finish_average(DType t, void* acc, std::int64_t count, std::int64_t n) noexcept;
// The op's identity element, for Replicate -> Partial fills (sum: 0, product: 1).
[[nodiscard]] double identity_of(ReduceOp op) noexcept;
// The simulation value of global element `index` of a tensor on a mesh of `mesh_ranks` ranks
// (docs/cli.md, simulate: the index, reduced modulo what the dtype holds exactly, for f32 and i32
// with room for a Partial reduction over the mesh to stay exact).
[[nodiscard]] double simulation_value(DType t, std::int64_t index, std::int64_t mesh_ranks = 1) noexcept;
// The modulus f32 and i32 indices are reduced by on a mesh of `mesh_ranks` ranks (0 for others).
[[nodiscard]] std::int64_t simulation_modulus(DType t, std::int64_t mesh_ranks) noexcept;

}  // namespace dtensor
