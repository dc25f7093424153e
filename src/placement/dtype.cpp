#include "dtensor/dtype.hpp"

#include <string>

#include <fmt/format.h>

#include "dtensor/error.hpp"

namespace dtensor {

std::size_t itemsize(DType t) noexcept {
  switch (t) {
    case DType::f64: case DType::i64: return 8;
    case DType::f32: case DType::i32: return 4;
    case DType::bf16: case DType::f16: return 2;
    case DType::f8e4m3: case DType::f8e5m2: case DType::i8: case DType::u8: case DType::boolean: return 1;
  }
  return 1;
}

std::string_view to_string(DType t) noexcept {
  switch (t) {
    case DType::f64: return "f64";
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    case DType::f8e4m3: return "f8e4m3";
    case DType::f8e5m2: return "f8e5m2";
    case DType::i64: return "i64";
    case DType::i32: return "i32";
    case DType::i8: return "i8";
    case DType::u8: return "u8";
    case DType::boolean: return "bool";
  }
  return "?";
}

bool is_floating(DType t) noexcept {
  switch (t) {
    case DType::f64: case DType::f32: case DType::bf16: case DType::f16: case DType::f8e4m3:
    case DType::f8e5m2: return true;
    default: return false;
  }
}

DType parse_dtype(std::string_view text) {
  for (DType t : kAllDTypes)
    if (to_string(t) == text) return t;
  // torch's names (with or without "torch.")
  std::string_view n = text;
  if (n.substr(0, 6) == "torch.") n.remove_prefix(6);
  struct Alias {
    std::string_view name;
    DType t;
  };
  static constexpr Alias kTorch[] = {
      {"float64", DType::f64},      {"double", DType::f64},         {"float32", DType::f32},  {"float", DType::f32},
      {"bfloat16", DType::bf16},    {"float16", DType::f16},        {"half", DType::f16},     {"float8_e4m3fn", DType::f8e4m3},
      {"float8_e5m2", DType::f8e5m2}, {"int64", DType::i64},        {"long", DType::i64},     {"int32", DType::i32},
      {"int", DType::i32},          {"int8", DType::i8},            {"uint8", DType::u8},     {"bool", DType::boolean}};
  for (const auto& a : kTorch)
    if (a.name == n) return a.t;
  throw InputError(fmt::format("unknown dtype {} (expected one of f64 f32 bf16 f16 f8e4m3 f8e5m2 i64 i32 i8 u8 bool, or "
                               "torch's names such as bfloat16, float32, float8_e4m3fn)", quote_input(text)));
}

}  // namespace dtensor
