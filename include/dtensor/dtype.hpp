#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <fmt/format.h>

namespace dtensor {

enum class DType : std::uint8_t { f64, f32, bf16, f16, f8e4m3, f8e5m2, i64, i32, i8, u8, boolean };

inline constexpr DType kAllDTypes[] = {DType::f64,    DType::f32,    DType::bf16, DType::f16,
                                       DType::f8e4m3, DType::f8e5m2, DType::i64,  DType::i32,
                                       DType::i8,     DType::u8,     DType::boolean};

[[nodiscard]] std::size_t itemsize(DType t) noexcept;
[[nodiscard]] std::string_view to_string(DType t) noexcept;
[[nodiscard]] bool is_floating(DType t) noexcept;
// Parses the dtype names (f64 f32 bf16 f16 f8e4m3 f8e5m2 i64 i32 i8 u8 bool).
[[nodiscard]] DType parse_dtype(std::string_view text);

}  // namespace dtensor

template <>
struct fmt::formatter<dtensor::DType> : fmt::formatter<std::string_view> {
  template <typename Ctx>
  auto format(dtensor::DType t, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(dtensor::to_string(t), ctx);
  }
};
