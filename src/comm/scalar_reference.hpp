#pragma once
// The slow, obviously-written minifloat codecs that define bf16/f16/fp8 rounding; the fast paths
// of load_element/store_element are tested against them bit for bit.
#include <cstdint>

#include "dtensor/dtype.hpp"

namespace dtensor::detail {
[[nodiscard]] double decode_reference(DType t, std::uint32_t bits);
[[nodiscard]] std::uint32_t encode_reference(DType t, double v);
}  // namespace dtensor::detail
